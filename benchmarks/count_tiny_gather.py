"""The tiny torch gather in instructions: rearr's call, bench_table.py's floor and the bare native call.

    python benchmarks/count_tiny_gather.py [--calls N]

Not a timing: one child under valgrind's callgrind (as count_instructions.py, whose method this is)
runs, after a warm-up, --calls calls of each of: ``rearr.rearrange(x, "b n[idx] -> b k", idx=idx)``,
the floor (bench_table.floor: one dict look-up, then the hand-written call), ``torch.gather`` alone,
then two pieces of rearr's call alone: the direct table's key (rearr.run.cache.direct_key) and the
direct program (the table's entry called with the keywords). x is (2, 8) float32, idx (2, 3) int64,
on the CPU, checks on (torch's kernel checks this index: rearr's own check does not run). Then
bench_table's two other tiny rows of issue 30's goal, each rearr's call, its floor and the
hand-written call: the torch scatter-sum ``rearr.scatter(st, "b k -> b n[idx]", "sum", idx=idx,
n=8)``, st (2, 3), and the numpy gather, x and idx as numpy arrays. Prints instructions per call,
gc off. Needs valgrind (several minutes: torch is imported under it); without it the script says so
and exits 0.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import _harness  # benchmarks/_harness.py: the repository root

CHILD = """import gc, os, sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
gc.disable()
import numpy as np, torch, rearr
from bench_table import floor
from rearr.run import cache
torch.set_num_threads(1)
x, idx, g = torch.randn(2, 8), torch.randint(0, 8, (2, 3)), "b n[idx] -> b k"
st, s = torch.randn(2, 3), "b k -> b n[idx]"
xn, idxn = x.numpy(), idx.numpy()
def scatter_add(x, idx, n=8):
    return torch.zeros(x.shape[0], n).scatter_add_(1, idx, x)
fl, fls = floor(lambda x, idx: torch.gather(x, 1, idx)), floor(scatter_add)
fln = floor(lambda x, idx: np.take_along_axis(x, idx, 1))
for _ in range(50):
    rearr.rearrange(x, g, idx=idx), fl(x, g, idx=idx), torch.gather(x, 1, idx)
    rearr.scatter(st, s, "sum", idx=idx, n=8), fls(st, s, idx=idx), scatter_add(st, idx)
    rearr.rearrange(xn, g, idx=idxn), fln(xn, g, idx=idxn), np.take_along_axis(xn, idxn, 1)
kw = {{"idx": idx}}
run = cache.DIRECT[cache.direct_key("rearrange", x, g, None, True, kw)]
os.getppid()
for _ in range({n}): rearr.rearrange(x, g, idx=idx)
os.getppid()
for _ in range({n}): fl(x, g, idx=idx)
os.getppid()
for _ in range({n}): torch.gather(x, 1, idx)
os.getppid()
for _ in range({n}): cache.direct_key("rearrange", x, g, None, True, kw)
os.getppid()
for _ in range({n}): run(x, kw)
os.getppid()
for _ in range({n}): rearr.scatter(st, s, "sum", idx=idx, n=8)
os.getppid()
for _ in range({n}): fls(st, s, idx=idx)
os.getppid()
for _ in range({n}): scatter_add(st, idx)
os.getppid()
for _ in range({n}): rearr.rearrange(xn, g, idx=idxn)
os.getppid()
for _ in range({n}): fln(xn, g, idx=idxn)
os.getppid()
for _ in range({n}): np.take_along_axis(xn, idxn, 1)
os.getppid()
"""
STAGES = ("rearr.rearrange", "the floor (bench_table.py)", "torch.gather alone", "  rearr's direct key",
          "  rearr's direct program", "torch scatter-sum: rearr.scatter", "  its floor", "  zeros().scatter_add_ alone",
          "numpy gather: rearr.rearrange", "  its floor", "  np.take_along_axis alone")
RATIOS = (("torch gather", 0, 1), ("torch scatter-sum", 5, 6), ("numpy gather", 8, 9))  # rearr's stage, the floor's

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing counted")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg")
        code = CHILD.format(root=str(_harness.ROOT), bench=str(_harness.ROOT / "benchmarks"), n=args.calls)
        subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=os_getppid", f"--callgrind-out-file={out}",
                        sys.executable, "-c", code], check=True, capture_output=True,
                       env={**os.environ, "PYTHONHASHSEED": "0"})
        dumps = sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1]))[1:1 + len(STAGES)]
        totals = []
        for path in dumps:
            with open(path) as f:
                totals.append(next(int(line.split()[1]) for line in f if line.startswith("summary:")))
    print(f"{_harness.tree_state()}; instructions per call (callgrind, gc off), {args.calls} calls each")
    for name, total in zip(STAGES, totals):
        print(f"{name:34s} {total / args.calls:10,.0f}")
    for name, rearr, floor in RATIOS:
        print(f"{name}, rearr / floor: {totals[rearr] / totals[floor]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
