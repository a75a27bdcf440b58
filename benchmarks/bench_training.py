"""Indexing where models train: each section's rows against their best hand-written variants, in one run.

Sections, one module each, run in this process one after the other (each interleaves its own
variants, medians over rounds; see benchmarks/README.md):

    torch    _training_torch.py   scatter reductions and message passing, forward + backward, time and peak memory
    jax      _training_jax.py     jax gathers and scatters, eager and under jit
    einsum   _training_einsum.py  an inductor-compiled attention block against the same block in matmul

A section whose module is not in this checkout prints "section X: not present". Each module exposes
run(args) -> the goals it missed, and runs alone too (python benchmarks/_training_torch.py). After the
sections, one summary table holds every row of every section: rearr against its fastest hand-written
variant, the time ratio, the peak-memory ratio (torch), the goal and whether it was met; a section
appends its rows to args.summary, which this script sets.

    python benchmarks/bench_training.py [--rounds N] [--small] [--clock cpu|wall] [--only SECTION]

--small: tiny sizes and short loops, a smoke run of a few seconds per section (about 10 s of CPU
time in all; the torch section probes the peak memory of its first case only) for CI; its figures
mean nothing and its goals are not checked. Exit status: 1 when a section missed a goal (not under --small).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness  # noqa: E402

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

SECTIONS = {"torch": "_training_torch", "jax": "_training_jax", "einsum": "_training_einsum"}


def _versions() -> str:
    found = []
    for name in ("torch", "jax", "numpy"):
        try:
            found.append(f"{name} {importlib.import_module(name).__version__}")
        except ImportError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def _time(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def print_summary(rows: list[tuple], small: bool) -> None:
    """One table of every section's rows: rearr against its fastest hand-written variant, the time
    ratio, the peak-memory ratio where the section measures it, the goal and whether the section found
    it met (time, and peak memory with a page of slack)."""
    print("\nSummary: every row against its fastest hand-written variant, medians of interleaved rounds"
          + (" (--small: the figures mean nothing)" if small else ""))
    head = ("section", "case", "size", "rearr", "hand-written", "time", "peak", "goal", "", "fastest hand-written")
    table = [head]
    for section, case, size, ours, best, theirs, peak, goal, met in rows:
        table.append((section, case, size, _time(ours), _time(theirs), f"{ours / theirs:.2f}x",
                      "-" if peak is None else f"{peak:.2f}x", f"{goal}x", "" if small else "met" if met else "MISSED",
                      best))
    widths = [max(len(r[k]) for r in table) for k in range(len(head) - 1)]
    for r in table:
        print("  " + "  ".join(f"{v:<{w}}" if k < 3 else f"{v:>{w}}" for k, (v, w) in enumerate(zip(r, widths)))
              + "  " + r[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per row (median)")
    parser.add_argument("--small", action="store_true", help="tiny sizes: a smoke run, goals not checked")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--only", choices=sorted(SECTIONS), help="run one section")
    args = parser.parse_args()

    print(f"python {platform.python_version()}, {_versions()}; {platform.machine()}, {_harness.machine_state()}")
    print(f"threads: torch runs on 1 (torch.set_num_threads(1) in its sections); "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print(_harness.tree_state())
    print(_harness.pin_malloc("warm"))
    print("clock: " + _harness.CLOCK_LINES[args.clock])
    # each section appends its rows: (section, case, size, rearr s, fastest hand-written, its s, peak ratio
    # or None, goal, met)
    args.summary = []
    missed: dict[str, list[str]] = {}
    for section, module in SECTIONS.items():
        if args.only and section != args.only:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            print(f"\nsection {section}: not present")
            continue
        print(f"\n=== section {section} ({module}.py) ===")
        start = time.perf_counter()
        missed[section] = mod.run(args)
        print(f"(section {section}: {time.perf_counter() - start:.0f} s)")

    print_summary(args.summary, args.small)
    if args.small:
        print("\nGoals: not checked under --small")
        missed = {}
    else:
        print("\nGoals:")
    for section, goals in missed.items():
        print(f"  {section}: " + ("all met" if not goals else f"{len(goals)} missed"))
        for g in goals:
            print(f"    [MISSED] {g}")
    print(f"load average at the end: {_harness.load_average()}")
    return 1 if not args.small and any(missed.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
