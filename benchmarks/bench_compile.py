"""One model-like block (attention head split, a gather, reduce, repeat): rearr against hand-written
torch, each eager and compiled with torch.compile (inductor, fullgraph), on CPU.

    block:  q = x split into heads                 "b t (h d) -> b h t d"
            k = q at positions idx (a gather)       "b h t[idx: b k] d -> b h k d"
            m = mean of k over k                    "b h k d -> b h d"
            out = q + m repeated over t             "b h d -> b h t d"

Every variant's result is checked against eager hand-written torch first. Timings: the shared
harness (interleaved rounds, median, this thread's CPU time; torch on one thread).

    python benchmarks/bench_compile.py [--rounds N] [--clock cpu|wall] [--malloc warm|fresh]
"""

from __future__ import annotations

import argparse
import platform
import sys

import _harness  # benchmarks/_harness.py: the clock, interleaved rounds, malloc pinning

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

import torch  # noqa: E402

import rearr  # noqa: E402

torch.set_num_threads(1)

SIZES = {"tiny": (2, 8, 2, 4, 3), "medium": (8, 256, 8, 64, 32)}  # B, T, H, D, K


def block_rearr(x, idx, h, check_bounds=True):
    q = rearr.rearrange(x, "b t (h d) -> b h t d", h=h)
    k = rearr.rearrange(q, "b h t[idx: b k] d -> b h k d", idx=idx, check_bounds=check_bounds)
    m = rearr.reduce(k, "b h k d -> b h d", "mean")
    return q + rearr.repeat(m, "b h d -> b h t d", t=q.shape[2])


def block_hand(x, idx, h):
    b, t, hd = x.shape
    q = x.view(b, t, h, hd // h).permute(0, 2, 1, 3)
    k = torch.gather(q, 2, idx[:, None, :, None].expand(b, h, idx.shape[1], hd // h))
    m = k.mean(2)
    return q + m.unsqueeze(2).expand(b, h, t, hd // h)


def run_size(size: str, rounds: int) -> dict[str, float]:
    B, T, H, D, K = SIZES[size]
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, T, H * D, generator=gen)
    idx = torch.randint(0, T, (B, K), generator=gen)
    rc = torch.compile(block_rearr, fullgraph=True, dynamic=False)
    hc = torch.compile(block_hand, fullgraph=True, dynamic=False)
    fns = {
        "rearr eager": lambda: block_rearr(x, idx, H),
        "hand eager": lambda: block_hand(x, idx, H),
        "rearr compiled": lambda: rc(x, idx, H),
        "unchecked": lambda: rc(x, idx, H, False),
        "async": lambda: rc(x, idx, H, "async"),
        "hand compiled": lambda: hc(x, idx, H),
    }
    ref = block_hand(x, idx, H)
    for name, f in fns.items():
        torch.testing.assert_close(f(), ref, msg=f"{size}: {name} differs from eager hand-written torch")
    return _harness.interleaved(fns, rounds, 0.01 if size == "tiny" else 0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    _harness.add_options(parser)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__} (1 thread), {_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    print("figures: median us per call; compiled = torch.compile(fullgraph=True), inductor, static shapes; "
          "unchecked = rearr compiled with check_bounds=False (the gather's bounds check is the difference); "
          "async = compiled with check_bounds='async' (device-side assertions, fused by inductor)\n")
    head = (f"{'size':7} {'rearr eager':>12} {'hand eager':>11} {'rearr compiled':>15} {'unchecked':>10} "
            f"{'async':>9} {'hand compiled':>14}")
    print(head)
    print("-" * len(head))
    for size in SIZES:
        med = run_size(size, args.rounds)
        print(f"{size:7} {med['rearr eager'] * 1e6:12.2f} {med['hand eager'] * 1e6:11.2f} "
              f"{med['rearr compiled'] * 1e6:15.2f} {med['unchecked'] * 1e6:10.2f} {med['async'] * 1e6:9.2f} "
              f"{med['hand compiled'] * 1e6:14.2f}",
              flush=True)
    print(f"\nload average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
