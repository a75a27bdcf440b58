"""rearr on dask, out of core: a rearrange of an array several times larger than the workers' memory.

A dask.distributed LocalCluster on loopback: 2 worker processes, one thread each, a memory limit of
300 MB each (--workers, --memory-limit). The input is a lazy int32 array of 2 GiB (--gib), shape
(B, H, W, 8), chunks of one image row-block (1, 512, W, 8) = 16 MiB, whose values are their own
row-major position, made block by block on the workers; nothing of it exists anywhere at once.

    rearr   rearr.rearrange(x, "b h w c -> b c (h w)")
    dask    x.transpose(0, 3, 1, 2).reshape(B, C, H * W)      the same, written directly in dask

Each variant's result is checked on the workers, block by block, against the formula
out[b, c, k] = (b*H*W + k)*C + c, so only one bool per block comes back: the run completes in bounded
memory and the values are right (the script exits 1 otherwise). What is timed is that whole
computation (make the input, rearrange, check), which is the same for both but for the rearrange.

Time: rounds that run both variants once, in alternating order (forward, then reversed); the figure
is the median over rounds of (a) wall time and (b) the CPU time the worker processes spent
(time.process_time summed over the workers, before and after the run): this machine is shared, and
(b) does not count time the workers spent waiting for a core. The graph's size (tasks) and whether
it rechunks are printed too. Run: python benchmarks/bench_dask.py (about 2-4 minutes).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import _harness  # benchmarks/_harness.py: the header lines (commit, machine)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import distributed  # noqa: E402
import numpy as np  # noqa: E402

import rearr  # noqa: E402

C = 8
ROWS = 512  # rows of one chunk


def _fill(block_info=None) -> np.ndarray:
    """One block of the input: each value is its row-major position in the whole array."""
    info = block_info[None]
    (b0, b1), (h0, h1), (w0, w1), (c0, c1) = info["array-location"]
    _, H, W, _ = info["shape"]
    b, h, w, c = np.ix_(np.arange(b0, b1), np.arange(h0, h1), np.arange(w0, w1), np.arange(c0, c1))
    return (((b * H + h) * W + w) * C + c).astype(np.int32)


def _check(block: np.ndarray, H: int, W: int, block_info=None) -> np.ndarray:
    """True when every value of this block of the result is what out[b, c, k] = x[b, k // W, k % W, c] holds."""
    (b0, b1), (c0, c1), (k0, k1) = block_info[0]["array-location"]
    b, c, k = np.ix_(np.arange(b0, b1), np.arange(c0, c1), np.arange(k0, k1))
    return np.array(bool(np.array_equal(block, (b * H * W + k) * C + c))).reshape(1, 1, 1)


def source(B: int, H: int, W: int) -> da.Array:
    chunks = ((1,) * B, (ROWS,) * (H // ROWS), (W,), (C,))
    return da.map_blocks(_fill, chunks=chunks, dtype=np.int32, meta=np.empty((0, 0, 0, 0), np.int32))


def checked(out: da.Array, H: int, W: int) -> da.Array:
    ones = tuple((1,) * len(c) for c in out.chunks)
    return da.map_blocks(_check, out, H, W, chunks=ones, dtype=bool, meta=np.empty((0, 0, 0), bool)).all()


def rechunks(x: da.Array) -> bool:
    return any(name.startswith("rechunk") for name in x.dask.layers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=2.0, help="input size in GiB (default 2)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="300MB", help="per worker (default 300MB)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    W = 1024
    B = 32
    H = max(ROWS, round(args.gib * 2**30 / 4 / (B * W * C) / ROWS) * ROWS)
    nbytes = B * H * W * C * 4
    print(f"python {platform.python_version()}, dask {dask.__version__}, distributed {distributed.__version__}, "
          f"numpy {np.__version__}, {platform.machine()}, {_harness.machine_state()}")
    print(_harness.tree_state())
    print(f"input: int32 ({B}, {H}, {W}, {C}) = {nbytes / 2**30:.2f} GiB in chunks of "
          f"(1, {ROWS}, {W}, {C}) = {ROWS * W * C * 4 / 2**20:.0f} MiB; "
          f"{args.workers} worker processes x 1 thread, memory limit {args.memory_limit} each")

    variants = {
        "rearr": lambda x: rearr.rearrange(x, "b h w c -> b c (h w)"),
        "dask": lambda x: x.transpose(0, 3, 1, 2).reshape(B, C, H * W),
    }
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit=args.memory_limit) as cluster, \
            distributed.Client(cluster) as client:
        workers = set(client.scheduler_info()["workers"])
        limit = min(w["memory_limit"] for w in client.scheduler_info()["workers"].values())
        print(f"workers' memory limit: {limit / 1e6:.0f} MB each, {limit * len(workers) / 1e6:.0f} MB in all: "
              f"the input is {nbytes / limit:.1f}x one worker's limit, {nbytes / (limit * len(workers)):.1f}x all")
        for name, fn in variants.items():
            out = fn(source(B, H, W))
            print(f"  {name:5s} graph: {len(out.dask)} tasks, chunks {out.chunksize}, "
                  f"{'rechunks' if rechunks(out) else 'no rechunk'}")

        def worker_cpu() -> float:
            return sum(client.run(time.process_time).values())

        wall: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        for r in range(args.rounds + 1):  # round 0 warms up (imports on the workers) and is not counted
            for name in names if r % 2 == 0 else names[::-1]:
                c0, t0 = worker_cpu(), time.perf_counter()
                ok = checked(variants[name](source(B, H, W)), H, W).compute()
                t1, c1 = time.perf_counter(), worker_cpu()
                if not ok:
                    print(f"WRONG VALUES from {name}")
                    return 1
                if r:
                    wall[name].append(t1 - t0)
                    cpu[name].append(c1 - c0)
        if set(client.scheduler_info()["workers"]) != workers:
            print("a worker died and was restarted during the runs")
            return 1
        print(f"values right in every run; the same {len(workers)} workers throughout (none killed for memory)")
        print(f"\nmedian of {args.rounds} rounds    wall s   workers' CPU s")
        for name in names:
            print(f"  {name:22s} {statistics.median(wall[name]):7.2f}  {statistics.median(cpu[name]):9.2f}")
        ratio = statistics.median(cpu["rearr"]) / statistics.median(cpu["dask"])
        print(f"rearr / dask (workers' CPU): {ratio:.2f}")
    print(f"load average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
