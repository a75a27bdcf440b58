"""The calls whose plans lay their results out as einops' do (issue 29), against a base revision and einops.

    python benchmarks/bench_layout.py [--rev REV] [--rounds N] [--clock cpu|wall] [--malloc warm|fresh]

Rows: torch and numpy reductions that also reorder the kept axes (einops reduces a permuted view;
rearr reduces in place and, on torch, writes the permuted result out, contiguous as einops' is), a
rearrange that merges axes of two input dimensions (no longer merged before the permute), and
numpy's repeat (a new, writable array, as einops' np.tile makes it, where it was a read-only
broadcast view). Large tensors, one torch thread. Each row runs this checkout, rearr at ``--rev``
(extracted as bench_baseline.py does) and einops in interleaved rounds (benchmarks/_harness.py);
the figure is the median ms per call. The results are checked to agree first. Exit status 0 always.
"""

from __future__ import annotations

import argparse
import sys

import _harness  # benchmarks/_harness.py: the clock, interleaved rounds, malloc pinning

sys.path.insert(0, str(_harness.ROOT))

import bench_baseline  # noqa: E402
import einops  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import rearr  # noqa: E402

torch.set_num_threads(1)

# (op, pattern, reduction, shape, lengths)
ROWS = [
    ("reduce", "b c (h h2) (w w2) -> b h w c", "mean", (8, 64, 64, 64), {"h2": 2, "w2": 2}),  # einops' README
    ("reduce", "b c h w -> w c", "sum", (8, 64, 64, 64), {}),
    ("reduce", "b t c -> c b", "sum", (32, 512, 256), {}),
    ("reduce", "b c h w -> b c", "mean", (8, 64, 64, 64), {}),  # no reorder: the plan is as before
    ("rearrange", "b (h c) x y -> (b h) (x y) c", None, (8, 64, 64, 64), {"c": 8}),
    ("repeat", "h w -> h w c", None, (1024, 1024), {"c": 3}),
    ("repeat", "h w -> (h c) w", None, (1024, 1024), {"c": 3}),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the base revision (default HEAD)")
    parser.add_argument("--rounds", type=int, default=9)
    _harness.add_options(parser)
    args = parser.parse_args()
    base = bench_baseline.load_revision(args.rev)
    print(f"new: this checkout; base: rearr at {args.rev}; einops {einops.__version__}; "
          f"torch {torch.__version__} (1 thread); {_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    head = f"{'lib':5} {'op':9} {'pattern':32} {'shape':18} {'new':>9} {'base':>9} {'einops':>9} {'base/new':>8} " \
           f"{'einops/new':>10}"
    print(head + "\n" + "-" * len(head))
    for lib in ("torch", "numpy"):
        for op, pattern, reduction, shape, lengths in ROWS:
            a = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
            x = torch.from_numpy(a) if lib == "torch" else a
            extra = (reduction,) if reduction else ()
            calls = {name: (lambda m=m, op=op, x=x, p=pattern, e=extra, kw=lengths: getattr(m, op)(x, p, *e, **kw))
                     for name, m in (("new", rearr), ("base", base), ("einops", einops))}
            want = np.asarray(calls["einops"]())
            for name in ("new", "base"):
                np.testing.assert_allclose(np.asarray(calls[name]()), want, rtol=1e-4, atol=1e-4)
            med = _harness.interleaved(calls, args.rounds, 0.05)
            print(f"{lib:5} {op:9} {pattern:32} {str(shape):18} {med['new'] * 1e3:9.3f} {med['base'] * 1e3:9.3f} "
                  f"{med['einops'] * 1e3:9.3f} {med['base'] / med['new']:8.2f} {med['einops'] / med['new']:10.2f}",
                  flush=True)
    print(f"\nload average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
