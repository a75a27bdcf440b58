"""Tiny calls of two git revisions of rearr, both extracted the same way, in alternating order.

    python benchmarks/bench_ab.py A B [--rounds N] [--calls N] [--imports N]

Each revision's rearr/ is extracted with `git archive` as its own package (``ab_a``, ``ab_b``); every
round times ``--calls`` calls of each of bench_baseline.py's tiny rows on each revision, A first on
even rounds and B first on odd ones, on this thread's CPU clock. The figure is the median us per
call; A/B > 1 means B is faster. ``A A`` (a revision against itself) is the control: the spread it
shows is the machine's, not the code's.

Then ``import rearr`` of each (numpy loaded first, bytecode compiled, this process's children, A and B
in alternating order, ``--imports`` fresh processes each): the median of the child's thread CPU time,
with the garbage collector on (what a program sees; whether a collection falls inside the import
depends on what was allocated before it) and off (the import's own work). Exit status 0 always.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
    parser.add_argument("--imports", type=int, default=41, help="fresh processes per revision and mode (0: none)")
    args = parser.parse_args()
    mods = {"A": bench_baseline.load_revision(args.a, "ab_a"), "B": bench_baseline.load_revision(args.b, "ab_b")}
    rows = [(f"{label:18s} {lib}", f) for lib in ("torch", "numpy") for label, f in bench_baseline.calls(lib, "tiny")]
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
    if args.imports:
        _imports(mods, args.imports)
    print(f"load average at the end: {_harness.load_average()}")
    return 0


_IMPORT = ("import numpy, gc, time\n{gc}t = time.thread_time()\nimport {name}\n"
           "print((time.thread_time() - t) * 1e3)")


def _imports(mods: dict, n: int) -> None:
    """`import rearr` of each extracted revision in fresh processes (see the module's docstring)."""
    for m in mods.values():
        compileall.compile_dir(Path(m.__file__).parent, quiet=1, force=True)
    print(f"\nimport, numpy loaded: median ms of the child's thread CPU time, {n} fresh processes each")
    print(f"{'gc':24s} {'A':>9s} {'B':>9s} {'A/B':>6s}")
    for gc, line in (("on", ""), ("off", "gc.disable()\n")):
        times: dict[str, list[float]] = {"A": [], "B": []}
        for k in range(n):
            for side in ("A", "B") if k % 2 == 0 else ("B", "A"):
                m = mods[side]
                code = _IMPORT.format(gc=line, name=m.__name__)
                out = subprocess.run([sys.executable, "-c", code], cwd=Path(m.__file__).parents[1], check=True,
                                     capture_output=True, text=True).stdout
                times[side].append(float(out))
        a, b = statistics.median(times["A"]), statistics.median(times["B"])
        print(f"{gc:24s} {a:9.2f} {b:9.2f} {a / b:6.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
