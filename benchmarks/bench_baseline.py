"""This checkout's eager rearr against rearr at a git revision, interleaved in one process.

A change to the hot path is judged by this script: both versions run the same
calls in the same rounds (bench_core.py's five patterns, bench_indexing.py's
gather and scatter-sum, tiny and large, torch and numpy), so the machine's load
hits them alike. The revision's rearr/ is extracted with `git archive` into a
temporary folder as the package ``rearr_base`` (its absolute module names
rewritten), so the two versions have separate caches and registries.

    python benchmarks/bench_baseline.py [--rev REV] [--new REV] [--rounds N] [--size tiny|large|both]
                                        [--clock cpu|wall] [--malloc warm|fresh]

``--new REV`` extracts the new side from git too (as ``rearr_new``), so both sides are loaded the
same way: the fairer A/B for a sub-microsecond difference. ``--rev HEAD --new HEAD`` is the
control that shows the machine's spread for one code.

The figure is the median us per call over the rounds; base/new > 1 means this
checkout is faster. Exit status 0 always.
"""

from __future__ import annotations

import argparse
import importlib
import io
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import _harness  # benchmarks/_harness.py: the clock, interleaved rounds, malloc pinning

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_core import CASES, LARGE, TINY, make_input  # noqa: E402
from bench_indexing import GATHER, SCATTER, SIZES, inputs  # noqa: E402

import rearr  # noqa: E402

torch.set_num_threads(1)


def load_revision(rev: str, name: str = "rearr_base"):
    """rearr at git revision rev, imported as the package ``name``."""
    data = subprocess.run(["git", "-C", str(_harness.ROOT), "archive", rev, "rearr"], capture_output=True,
                          check=True).stdout
    root = Path(tempfile.mkdtemp(prefix="rearr_base_"))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(root, filter="data")
    package = root / "rearr"
    for path in package.rglob("*.py"):  # the registry names backend modules absolutely
        path.write_text(path.read_text().replace('"rearr.', f'"{name}.'))
    package.rename(root / name)
    sys.path.insert(0, str(root))
    return importlib.import_module(name)


def calls(lib, size: str):
    """(label, f(r) -> result) for each measured call, r the rearr module."""
    out = []
    for name, op, pattern, sizes, reduction, _, _ in CASES:
        shape, lengths = sizes[size]
        x = make_input(shape, lib)
        if op == "rearrange":
            out.append((name, lambda r, x=x, p=pattern, L=lengths: r.rearrange(x, p, **L)))
        elif op == "reduce":
            out.append((name, lambda r, x=x, p=pattern, red=reduction, L=lengths: r.reduce(x, p, red, **L)))
        else:
            out.append((name, lambda r, x=x, p=pattern, L=lengths: r.repeat(x, p, **L)))
    x, idx, src = inputs("tiny" if size == TINY else "large")
    if lib == "torch":
        x, idx, src = torch.from_numpy(x), torch.from_numpy(idx), torch.from_numpy(src)
    n = SIZES["tiny" if size == TINY else "large"][1]
    out.append(("gather", lambda r: r.rearrange(x, GATHER, idx=idx)))
    out.append(("gather unchecked", lambda r: r.rearrange(x, GATHER, idx=idx, check_bounds=False)))
    out.append(("scatter-sum", lambda r: r.scatter(src, SCATTER, "sum", idx=idx, n=n)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the revision to compare with (default HEAD)")
    parser.add_argument("--new", default=None, help="the new side at a revision too (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", choices=(TINY, LARGE, "both"), default=TINY)
    _harness.add_options(parser)
    args = parser.parse_args()
    base = load_revision(args.rev)
    new_rearr = rearr if args.new is None else load_revision(args.new, "rearr_new")
    rev = subprocess.run(["git", "-C", str(_harness.ROOT), "rev-parse", "--short", args.rev], capture_output=True,
                         text=True, check=True).stdout.strip()
    print(f"python {platform.python_version()}, torch {torch.__version__} (1 thread), numpy {np.__version__}, "
          f"{_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    new_name = "this checkout" if args.new is None else f"rearr at {args.new}"
    print(f"base: rearr at {rev}; new: {new_name}; figures: median us per call\n")
    head = f"{'call':18} {'lib':5} {'size':5} {'new':>9} {'base':>9} {'base/new':>8}"
    print(head)
    print("-" * len(head))
    for size in ((TINY, LARGE) if args.size == "both" else (args.size,)):
        for lib in ("torch", "numpy"):
            for label, f in calls(lib, size):
                new, old = (lambda f=f: f(new_rearr)), (lambda f=f: f(base))
                a, b = new(), old()
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
                med = _harness.interleaved({"new": new, "base": old}, args.rounds, 0.01 if size == TINY else 0.03)
                print(f"{label:18} {lib:5} {size:5} {med['new'] * 1e6:9.2f} {med['base'] * 1e6:9.2f} "
                      f"{med['base'] / med['new']:8.3f}", flush=True)
    print(f"\nload average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
