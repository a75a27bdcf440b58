"""Per-call cost of rearr against einops and the hand-written torch / numpy code.

Five patterns, each on a tiny tensor (where the per-call overhead is all there
is) and on a large one (where the native work dominates), on torch and numpy:

    permute   b c h w -> b h w c     a view: x.permute(0, 2, 3, 1)
    copy      c b h -> b (c h)       permute + one copy: x.permute(1, 0, 2).reshape(B, C*H)
    split     b (h w) c -> b h w c   a view: x.view(B, H, W, C)
    mean      b c h w -> b c         x.mean((2, 3))
    repeat    h w -> h w c           torch: a view, x.unsqueeze(2).expand(H, W, C); numpy: a copy

(numpy: the ndarray methods x.transpose(...), x.reshape(...), x.mean(axis=...)
and np.repeat(x[:, :, None], c, axis=2) for repeat: a new, writable array, as einops'
np.tile gives it and rearr as einops does.)

Every variant's result is checked against the hand-written one first (same
values; and whether it is a view of the input, shown as V / C for
view / copy). Timings: one thread for torch (torch.set_num_threads(1)); for
each case, rounds that run the three variants in alternating order (forward,
then reversed), each round a loop of calls sized to take ~10 ms (tiny) or
~30 ms (large); the figure is the median over rounds (15 tiny, 9 large) of
the time per call, in microseconds. The clock is
the thread's CPU time (time.thread_time: user + system, page faults included),
so that time spent descheduled on a busy shared machine is not counted;
--clock wall uses time.perf_counter instead. glibc's malloc is put in one
regime for all variants (see _harness.pin_malloc): by default large buffers reuse warm
heap pages (--malloc fresh: fresh mmapped pages every call). The loop's own
cost (calling an empty lambda) is printed once; it is included in every figure.

    python benchmarks/bench_core.py [--rounds N] [--backend torch|numpy|both] [--size tiny|large|both]
                                    [--clock cpu|wall] [--malloc warm|fresh]

Exit status 0 always: the figures are information; the goals are judged in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import _harness  # benchmarks/_harness.py: the clock, interleaved rounds, malloc pinning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import einops  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import rearr  # noqa: E402

torch.set_num_threads(1)

TINY = "tiny"
LARGE = "large"

# name, op, pattern, {size: (shape, lengths)}, reduction,
# hand-written torch f(x, lengths), hand-written numpy f(x, lengths)
CASES = [
    ("permute", "rearrange", "b c h w -> b h w c",
     {TINY: ((2, 3, 4, 5), {}), LARGE: ((4, 64, 128, 128), {})}, None,
     lambda x, L: x.permute(0, 2, 3, 1),
     lambda x, L: x.transpose(0, 2, 3, 1)),
    ("copy", "rearrange", "c b h -> b (c h)",
     {TINY: ((2, 3, 4), {}), LARGE: ((64, 256, 256), {})}, None,
     lambda x, L: x.permute(1, 0, 2).reshape(x.shape[1], x.shape[0] * x.shape[2]),
     lambda x, L: x.transpose(1, 0, 2).reshape(x.shape[1], x.shape[0] * x.shape[2])),
    ("split", "rearrange", "b (h w) c -> b h w c",
     {TINY: ((2, 12, 4), {"h": 3}), LARGE: ((16, 4096, 64), {"h": 64})}, None,
     lambda x, L: x.view(x.shape[0], L["h"], x.shape[1] // L["h"], x.shape[2]),
     lambda x, L: x.reshape(x.shape[0], L["h"], x.shape[1] // L["h"], x.shape[2])),
    ("mean", "reduce", "b c h w -> b c",
     {TINY: ((2, 3, 4, 5), {}), LARGE: ((4, 64, 128, 128), {})}, "mean",
     lambda x, L: x.mean((2, 3)),
     lambda x, L: x.mean(axis=(2, 3))),
    ("repeat", "repeat", "h w -> h w c",
     {TINY: ((2, 3), {"c": 4}), LARGE: ((1024, 4096), {"c": 3})}, None,
     lambda x, L: x.unsqueeze(2).expand(x.shape[0], x.shape[1], L["c"]),
     lambda x, L: np.repeat(x[:, :, None], L["c"], axis=2)),
]


def make_input(shape, lib):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape, dtype=np.float32)
    return torch.from_numpy(a) if lib == "torch" else a


def is_view(result, x) -> bool:
    if isinstance(x, torch.Tensor):
        return result.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    return bool(np.shares_memory(result, x))


def to_numpy(r):
    return r.numpy() if isinstance(r, torch.Tensor) else np.asarray(r)


def run_case(case, size: str, lib: str, rounds: int) -> dict:
    name, op, pattern, sizes, reduction, hand_t, hand_n = case
    shape, lengths = sizes[size]
    hand = hand_t if lib == "torch" else hand_n
    x = make_input(shape, lib)
    if op == "rearrange":
        ours = lambda: rearr.rearrange(x, pattern, **lengths)  # noqa: E731
        theirs = lambda: einops.rearrange(x, pattern, **lengths)  # noqa: E731
    elif op == "reduce":
        ours = lambda: rearr.reduce(x, pattern, reduction, **lengths)  # noqa: E731
        theirs = lambda: einops.reduce(x, pattern, reduction, **lengths)  # noqa: E731
    else:
        ours = lambda: rearr.repeat(x, pattern, **lengths)  # noqa: E731
        theirs = lambda: einops.repeat(x, pattern, **lengths)  # noqa: E731
    by_hand = lambda: hand(x, lengths)  # noqa: E731
    ref = by_hand()
    views = {}
    for label, f in (("rearr", ours), ("einops", theirs), ("hand", by_hand)):
        out = f()
        assert tuple(out.shape) == tuple(ref.shape), (name, label, out.shape, ref.shape)
        np.testing.assert_allclose(to_numpy(out), to_numpy(ref), rtol=1e-6, atol=1e-6,
                                   err_msg=f"{name} {size} {lib}: {label} differs from the hand-written result")
        views[label] = is_view(out, x)
    target = 0.01 if size == TINY else 0.03
    med = _harness.interleaved({"rearr": ours, "einops": theirs, "hand": by_hand}, rounds, target)
    return {"case": name, "pattern": pattern, "size": size, "lib": lib, "shape": shape, **med,
            "views": views}


def fmt_us(s: float) -> str:
    us = s * 1e6
    return f"{us:9.2f}" if us < 1000 else f"{us:9.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (default 15 tiny, 9 large)")
    parser.add_argument("--backend", choices=("torch", "numpy", "both"), default="both")
    parser.add_argument("--size", choices=(TINY, LARGE, "both"), default="both")
    _harness.add_options(parser)
    args = parser.parse_args()

    libs = ("torch", "numpy") if args.backend == "both" else (args.backend,)
    sizes = (TINY, LARGE) if args.size == "both" else (args.size,)
    print(f"python {platform.python_version()}, torch {torch.__version__} "
          f"(torch.set_num_threads(1): {torch.get_num_threads()} thread), numpy {np.__version__}, "
          f"einops {einops.__version__}, {platform.machine()}, {_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    empty = lambda: None  # noqa: E731
    floor = _harness.interleaved({"empty": empty}, 5, 0.01)["empty"]
    print(f"loop floor (calling an empty lambda, included in every figure): {floor * 1e6:.3f} us")
    print("figures: median us per call; view: V = result shares the input's memory, C = a copy "
          "(rearr/einops/hand)\n")
    head = (f"{'case':8} {'pattern':22} {'lib':5} {'size':5} {'shape':18} {'rearr':>9} {'einops':>9} "
            f"{'hand':>9} {'r/einops':>8} {'r/hand':>7} view")
    print(head)
    print("-" * len(head))
    rows = []
    for size in sizes:
        for lib in libs:
            for case in CASES:
                rounds = args.rounds or (15 if size == TINY else 9)
                row = run_case(case, size, lib, rounds)
                rows.append(row)
                v = row["views"]
                view = "/".join("V" if v[k] else "C" for k in ("rearr", "einops", "hand"))
                flag = "" if v["rearr"] == v["hand"] or not v["hand"] else "  <- hand is a view, rearr copies"
                print(f"{row['case']:8} {row['pattern']:22} {lib:5} {size:5} {str(row['shape']):18} "
                      f"{fmt_us(row['rearr'])} {fmt_us(row['einops'])} {fmt_us(row['hand'])} "
                      f"{row['rearr'] / row['einops']:8.2f} {row['rearr'] / row['hand']:7.2f} {view}{flag}",
                      flush=True)
    print(f"\nload average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
