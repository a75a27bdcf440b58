"""Per-call cost of rearr against einops and the hand-written torch / numpy code.

Five patterns, each on a tiny tensor (where the per-call overhead is all there
is) and on a large one (where the native work dominates), on torch and numpy:

    permute   b c h w -> b h w c     a view: x.permute(0, 2, 3, 1)
    copy      c b h -> b (c h)       permute + one copy: x.permute(1, 0, 2).reshape(B, C*H)
    split     b (h w) c -> b h w c   a view: x.view(B, H, W, C)
    mean      b c h w -> b c         x.mean((2, 3))
    repeat    h w -> h w c           a view: x.unsqueeze(2).expand(H, W, C)

(numpy: the ndarray methods x.transpose(...), x.reshape(...), x.mean(axis=...)
and np.broadcast_to for repeat.)

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
regime for all variants (see pin_malloc): by default large buffers reuse warm
heap pages (--malloc fresh: fresh mmapped pages every call). The loop's own
cost (calling an empty lambda) is printed once; it is included in every figure.

    python benchmarks/bench_core.py [--rounds N] [--backend torch|numpy|both] [--size tiny|large|both]
                                    [--clock cpu|wall] [--malloc warm|fresh]

Exit status 0 always: the figures are information; the goals are judged in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import einops  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import rearr  # noqa: E402

torch.set_num_threads(1)


def pin_malloc(mode: str = "warm") -> str:
    """Give every variant the same memory regime from glibc's malloc.

    Left alone, glibc's dynamic mmap threshold lets one variant reuse heap pages
    that an earlier variant warmed while another gets fresh, page-faulting
    pages: large timings moved by up to 2x with the order of the variants.
    warm (default): never mmap, never trim, so every large buffer reuses warm
    heap pages, as in the steady state of a hot loop; fresh: mmap every block
    >= 128 KiB and unmap it on free, so every large buffer is fresh pages
    (page faults, the kernel zeroing them) on every call.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return "malloc: not glibc, left as is"
    m_trim_threshold, m_mmap_threshold, m_mmap_max = -1, -3, -4
    if mode == "warm":
        ok = libc.mallopt(m_mmap_max, 0) and libc.mallopt(m_trim_threshold, 1 << 30)
        what = "warm: no mmap, no trim, large buffers reuse warm heap pages"
    else:
        ok = libc.mallopt(m_mmap_threshold, 128 * 1024) and libc.mallopt(m_trim_threshold, 128 * 1024)
        what = "fresh: blocks >= 128 KiB mmapped and unmapped on free, fresh pages every call"
    return f"malloc: glibc, {what}" if ok else "malloc: mallopt refused, left as is"

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
     lambda x, L: np.broadcast_to(x[:, :, None], (x.shape[0], x.shape[1], L["c"]))),
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


# The clock: this thread's CPU time (user + system, page faults included) by
# default, so that time spent descheduled on a shared machine is not counted;
# --clock wall for time.perf_counter. One torch thread, so all the work is on it.
CLOCK = [time.thread_time]


def calibrate(fn, target_s: float) -> int:
    """Calls per round so that a round takes about target_s."""
    n = 1
    while True:
        t0 = CLOCK[0]()
        for _ in range(n):
            fn()
        dt = CLOCK[0]() - t0
        if dt >= target_s / 4 or n >= 1 << 20:
            return max(1, int(n * target_s / max(dt, 1e-9)))
        n *= 4


def interleaved(fns: dict, rounds: int, target_s: float) -> dict[str, float]:
    """Median seconds per call of each fn, rounds alternating forward / reversed order."""
    names = list(fns)
    reps = {k: calibrate(fns[k], target_s) for k in names}
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            f, n = fns[k], reps[k]
            t0 = CLOCK[0]()
            for _ in range(n):
                f()
            samples[k].append((CLOCK[0]() - t0) / n)
    return {k: statistics.median(v) for k, v in samples.items()}


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
    med = interleaved({"rearr": ours, "einops": theirs, "hand": by_hand}, rounds, target)
    return {"case": name, "pattern": pattern, "size": size, "lib": lib, "shape": shape, **med,
            "views": views}


def tree_state() -> str:
    """The commit measured, and whether rearr/ differs from it (others edit it while we measure)."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "rearr"],
                               capture_output=True, text=True, check=True).stdout.split("\n")
        dirty = [line[3:] for line in dirty if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        return "rearr: not a git checkout"
    return f"rearr at commit {head}" + (f", with uncommitted changes in {', '.join(dirty)}" if dirty else "")


def fmt_us(s: float) -> str:
    us = s * 1e6
    return f"{us:9.2f}" if us < 1000 else f"{us:9.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (default 15 tiny, 9 large)")
    parser.add_argument("--backend", choices=("torch", "numpy", "both"), default="both")
    parser.add_argument("--size", choices=(TINY, LARGE, "both"), default="both")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: this thread's CPU time (default; robust on a shared machine); wall: perf_counter")
    parser.add_argument("--malloc", choices=("warm", "fresh"), default="warm",
                        help="glibc regime for large buffers: warm heap pages (default) or fresh mmapped pages")
    args = parser.parse_args()
    CLOCK[0] = time.thread_time if args.clock == "cpu" else time.perf_counter

    libs = ("torch", "numpy") if args.backend == "both" else (args.backend,)
    sizes = (TINY, LARGE) if args.size == "both" else (args.size,)
    print(f"python {platform.python_version()}, torch {torch.__version__} "
          f"(torch.set_num_threads(1): {torch.get_num_threads()} thread), numpy {np.__version__}, "
          f"einops {einops.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}")
    print(tree_state())
    print(pin_malloc(args.malloc))
    print("clock: " + ("this thread's CPU time (time.thread_time)" if args.clock == "cpu" else "wall (perf_counter)"))
    empty = lambda: None  # noqa: E731
    floor = interleaved({"empty": empty}, 5, 0.01)["empty"]
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
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
