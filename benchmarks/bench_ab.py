"""Tiny calls of two git revisions of rearr, both extracted the same way, in alternating order.

    python benchmarks/bench_ab.py A B [--rounds N] [--calls N]

Each revision's rearr/ is extracted with `git archive` as its own package (``ab_a``, ``ab_b``); every
round times ``--calls`` calls of each of bench_baseline.py's tiny rows on each revision, A first on
even rounds and B first on odd ones, on this thread's CPU clock. The figure is the median us per
call; A/B > 1 means B is faster. ``A A`` (a revision against itself) is the control: the spread it
shows is the machine's, not the code's. Exit status 0 always.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _harness  # benchmarks/_harness.py: the repository root

sys.path.insert(0, str(_harness.ROOT))

import bench_baseline  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rounds", type=int, default=301)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    mods = {"A": bench_baseline.load_revision(args.a, "ab_a"), "B": bench_baseline.load_revision(args.b, "ab_b")}
    rows = [(f"{label:18s} {lib}", f) for lib, module in (("torch", torch), ("numpy", np))
            for label, f in bench_baseline.calls(module, "tiny")]
    times: dict[tuple[str, str], list[float]] = {(label, k): [] for label, _ in rows for k in mods}
    for _, f in rows:
        np.testing.assert_array_equal(np.asarray(f(mods["A"])), np.asarray(f(mods["B"])))
    for k in range(args.rounds):
        order = ("A", "B") if k % 2 == 0 else ("B", "A")
        for label, f in rows:
            for side in order:
                m, start = mods[side], time.thread_time()
                for _ in range(args.calls):
                    f(m)
                times[(label, side)].append((time.thread_time() - start) / args.calls * 1e6)
    print(f"A: rearr at {args.a}; B: rearr at {args.b}; {args.rounds} rounds of {args.calls} calls; "
          f"{_harness.machine_state()}")
    print(f"{'call':24s} {'A':>9s} {'B':>9s} {'A/B':>6s}")
    for label, _ in rows:
        a, b = (statistics.median(times[(label, side)]) for side in ("A", "B"))
        print(f"{label:24s} {a:9.2f} {b:9.2f} {a / b:6.3f}")
    print(f"load average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
