"""Per-call cost of rearr.einsum against the backend's own einsum (and einops.einsum), tiny tensors.

Issue 9's goal: rearr.einsum <= 1.0x the backend's einsum call (torch.einsum, np.einsum) on tiny
tensors, where the per-call overhead is all there is. Cases:

    bmm      b i d, b j d -> b i j                 torch.einsum("bid,bjd->bij", x, y)
    linear   b t c, c d -> b t d                   torch.einsum("btc,cd->btd", x, w)
    grouped  b (h w) c, c d -> b h w d  (h=2)      torch.einsum("bxc,cd->bxd", x, w).reshape(...)

Every variant's result is checked against the backend's first. Timings: torch on one thread;
interleaved rounds (forward, then reversed order), each a loop sized to ~10 ms, the median over
rounds of the time per call in microseconds, on this thread's CPU time (--clock wall for
perf_counter); see benchmarks/README.md, "Method".

    python benchmarks/bench_einsum.py [--rounds N] [--clock cpu|wall] [--malloc warm|fresh]

Exit status 0 always: the figures are information.
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

# name, rearr pattern, lengths, operand shapes, the backend's spec, reshape of its result (or None)
CASES = [
    ("bmm", "b i d, b j d -> b i j", {}, [(2, 3, 4), (2, 5, 4)], "bid,bjd->bij", None),
    ("linear", "b t c, c d -> b t d", {}, [(2, 3, 4), (4, 5)], "btc,cd->btd", None),
    ("grouped", "b (h w) c, c d -> b h w d", {"h": 2}, [(2, 6, 4), (4, 5)], "bxc,cd->bxd", (2, 2, 3, 5)),
]


def variants(backend: str, case: tuple) -> dict:
    name, pattern, lengths, shapes, spec, post = case
    rng = np.random.default_rng(0)
    arrays = [rng.random(s, dtype=np.float32) for s in shapes]
    xs = [torch.from_numpy(a) for a in arrays] if backend == "torch" else arrays
    native = torch.einsum if backend == "torch" else np.einsum
    if post is None:
        def hand():
            return native(spec, *xs)
    else:
        def hand():
            return native(spec, *xs).reshape(post)
    fns = {"backend": hand, "rearr": lambda: rearr.einsum(*xs, pattern, **lengths)}
    if not lengths:  # einops takes no groups
        fns["einops"] = lambda: einops.einsum(*xs, pattern)
    expected = np.asarray(hand())
    for label, f in fns.items():
        np.testing.assert_allclose(np.asarray(f()), expected, rtol=1e-6, err_msg=f"{name} {label}")
    return fns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    _harness.add_options(parser)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__} (1 thread), numpy {np.__version__}, "
          f"einops {einops.__version__}; {_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    print(f"{'case':<20} {'backend':>9} {'rearr':>9} {'einops':>9} {'rearr/backend':>14}   (us per call)")
    for backend in ("torch", "numpy"):
        for case in CASES:
            t = _harness.interleaved(variants(backend, case), args.rounds, 0.01)
            us = {k: v * 1e6 for k, v in t.items()}
            einops_us = f"{us['einops']:9.2f}" if "einops" in us else f"{'-':>9}"
            print(f"{backend + ' ' + case[0]:<20} {us['backend']:9.2f} {us['rearr']:9.2f} {einops_us} "
                  f"{us['rearr'] / us['backend']:13.2f}x")


if __name__ == "__main__":
    main()
