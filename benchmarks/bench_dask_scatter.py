"""rearr's dask scatter out of core: a source larger than a worker's memory, scattered on a cluster.

A dask.distributed LocalCluster on loopback: 2 worker processes (--workers), one thread each, a
memory limit of 1 GiB each (--memory-limit). The source is a lazy float32 array (edges, 16) of
--gib GiB in blocks of 64 MiB (--block-mib), with an index dst (edges,) into 1M rows (--nodes: the
result is 64 MiB), both made block by block on the workers: nothing of them exists anywhere at once.

    rearr   rearr.scatter(x, "e c -> v[dst: e] c", reduction, dst=dst, v=nodes)
    hand    the same written by hand in dask: map_blocks of np.add.at into a (1, nodes, c) partial per
            block, then .sum(axis=0) (dask's tree reduction); the mean divides by da.bincount(dst)
    floor   make and read the same blocks (x.sum(axis=0), dst.sum()): what both pay, for scale

Each run ends in a checksum of the result computed on the workers (its column sums, and its sums
weighted by a fixed random vector over the rows), so that only 32 numbers come back; rearr's must
equal hand's (the script exits 1 otherwise). Building a candidate's graph runs under a scheduler that
raises: it computes nothing.

Figures, per size and candidate: the median over rounds of the wall time and of the workers' CPU time
(time.process_time summed over the worker processes: this machine is shared, and it does not count
time spent waiting for a core); the peak resident memory of the busiest worker during the run
(VmHWM, reset before each run through /proc/self/clear_refs); bytes spilled to disk; worker restarts.
Rounds run the candidates in alternating order (forward, then reversed). Several sizes (--gib
0.5,2, the default) show the peak per worker at fixed blocks and result as the input grows.

Goals (exit 1 when one is missed): at the largest size, rearr / hand <= 1.3 in median wall time and
in median workers' CPU time; every peak below the memory limit; no worker restarted.

    python benchmarks/bench_dask_scatter.py                 # about 30 min on the loaded 2-core machine
    python benchmarks/bench_dask_scatter.py --small         # a smoke run (seconds): values, no claim
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

MiB = 1 << 20
WIDTH = 16


# --- what runs on the workers (this script's functions travel by value) ---------------------------------


def _partial_sum(xb: np.ndarray, ib: np.ndarray, n: int) -> np.ndarray:
    """The hand-written scatter of one block: its rows added into a (1, n, c) partial, with numpy's fast
    1-D np.add.at on flat positions (what rearr's numpy backend does too)."""
    c = xb.shape[1]
    out = np.zeros((1, n, c), dtype=xb.dtype)
    np.add.at(out.reshape(-1), (ib.reshape(-1, 1) * c + np.arange(c)).reshape(-1), xb.reshape(-1))
    return out


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def _peak() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024
    return 0


# --- the candidates -----------------------------------------------------------------------------------


def sources(edges: int, nodes: int, block: int) -> tuple[da.Array, da.Array]:
    x = da.random.default_rng(42).random((edges, WIDTH), dtype=np.float32, chunks=(block, WIDTH))
    dst = da.random.default_rng(7).integers(0, nodes, edges, chunks=block)
    return x, dst


def hand_sum(x: da.Array, dst: da.Array, n: int) -> da.Array:
    parts = da.map_blocks(_partial_sum, x, dst[:, None], n=n, new_axis=1, dtype=x.dtype,
                          chunks=((1,) * x.numblocks[0], (n,), x.chunks[1]))
    return parts.sum(axis=0)


def hand_mean(x: da.Array, dst: da.Array, n: int) -> da.Array:
    counts = da.bincount(dst, minlength=n)
    return hand_sum(x, dst, n) / da.maximum(counts, 1)[:, None].astype(x.dtype)


def candidates(reduction: str, edges: int, nodes: int, block: int) -> dict:
    """name -> a function that builds the candidate's result (a lazy (nodes, c) array, or the floor's)."""
    hand = hand_sum if reduction == "sum" else hand_mean

    def rearr_scatter():
        x, dst = sources(edges, nodes, block)
        return rearr.scatter(x, "e c -> v[dst: e] c", reduction, dst=dst, v=nodes)

    def hand_written():
        x, dst = sources(edges, nodes, block)
        return hand(x, dst, nodes)

    def floor():
        x, dst = sources(edges, nodes, block)
        return x.sum(axis=0) + dst.sum()

    return {"rearr": rearr_scatter, "hand": hand_written, "floor": floor}


def checksum(out: da.Array, nodes: int) -> da.Array:
    if out.ndim == 1:  # the floor
        return out
    w = da.random.default_rng(5).random(nodes, chunks=out.chunks[0])
    return da.stack([out.sum(axis=0), (out * w[:, None]).sum(axis=0)])


def _refuse_to_compute(*args, **kwargs):
    raise AssertionError("building the graph computed something")


def run_once(client: distributed.Client, build, nodes: int) -> dict:
    with dask.config.set(scheduler=_refuse_to_compute):
        graph = checksum(build(), nodes)
    before = set(client.scheduler_info()["workers"])
    client.run(_reset_peak)
    cpu0 = sum(client.run(time.process_time).values())
    t0 = time.perf_counter()
    value = client.compute(graph).result()
    wall = time.perf_counter() - t0
    cpu = sum(client.run(time.process_time).values()) - cpu0
    peaks = client.run(_peak)
    info = client.scheduler_info()["workers"]
    spilled = sum(w.get("metrics", {}).get("spilled_bytes", {}).get("disk", 0) for w in info.values())
    return {"wall": wall, "cpu": cpu, "peak": max(peaks.values()), "spilled": spilled,
            "restarted": set(info) != before, "value": np.asarray(value), "tasks": len(graph.__dask_graph__())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", default="0.5,2", help="source sizes in GiB, comma-separated (default 0.5,2)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GiB", help="per worker (default 1GiB)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reductions", default="sum,mean")
    parser.add_argument("--block-mib", type=float, default=64, help="MiB per block of the source (default 64)")
    parser.add_argument("--nodes", type=int, default=1 << 20, help="rows of the result (default 1M: 64 MiB)")
    parser.add_argument("--small", action="store_true", help="a smoke run: tiny sizes, one round, no goals")
    args = parser.parse_args()
    if args.small:
        args.gib, args.rounds, args.block_mib, args.nodes, args.memory_limit = "0.03", 1, 4, 1 << 14, "500MB"
    sizes = [float(g) for g in args.gib.split(",")]
    block = max(1, int(args.block_mib * MiB) // (WIDTH * 4))
    print(f"python {platform.python_version()}, dask {dask.__version__}, distributed {distributed.__version__}, "
          f"numpy {np.__version__}, {platform.machine()}, {_harness.machine_state()}")
    print(_harness.tree_state())
    print(f"source: float32 (edges, {WIDTH}) in blocks of {block} rows ({block * WIDTH * 4 / MiB:.0f} MiB), index "
          f"int64 (edges,) into {args.nodes} rows; result {args.nodes * WIDTH * 4 / MiB:.0f} MiB; {args.workers} "
          f"worker processes x 1 thread, memory limit {args.memory_limit} each")

    results: dict[tuple, list[dict]] = {}
    wrong = False
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit=args.memory_limit) as cluster, \
            distributed.Client(cluster, timeout="60s") as client:
        if not all(client.run(_reset_peak).values()):
            print("no /proc/self/clear_refs: the peaks would be the workers' lifetime peaks")
            return 1
        limit = min(w["memory_limit"] for w in client.scheduler_info()["workers"].values())
        for build in candidates("mean", 4 * block, 1024, block).values():  # warm up: imports on the workers
            run_once(client, build, 1024)
        for gib in sizes:
            edges = max(block, round(gib * 2**30 / (WIDTH * 4) / block) * block)
            print(f"\n{edges * WIDTH * 4 / 2**30:.2f} GiB: {edges} edges in {edges // block} blocks; the source is "
                  f"{edges * WIDTH * 4 / limit:.1f}x one worker's limit")
            for reduction in args.reductions.split(","):
                cands = candidates(reduction, edges, args.nodes, block)
                names = list(cands)
                for r in range(args.rounds):
                    for name in names if r % 2 == 0 else names[::-1]:
                        got = run_once(client, cands[name], args.nodes)
                        results.setdefault((gib, reduction, name), []).append(got)
                        print(f"  {reduction:4s} {name:5s} round {r}: {got['wall']:7.2f} s wall, {got['cpu']:7.2f} s "
                              f"CPU, peak {got['peak'] / MiB:5.0f} MiB per worker, spilled "
                              f"{got['spilled'] / MiB:.0f} MiB, {got['tasks']} tasks"
                              + (", A WORKER WAS RESTARTED" if got["restarted"] else ""), flush=True)
                mine = results[(gib, reduction, "rearr")][-1]["value"]
                theirs = results[(gib, reduction, "hand")][-1]["value"]
                if not np.allclose(mine, theirs, rtol=1e-4):
                    print(f"  WRONG VALUES: rearr's checksum {mine} against hand's {theirs}")
                    wrong = True

    print(f"\nmedians over {args.rounds} rounds; peak: the busiest worker's, the most of any round "
          f"(limit {limit / MiB:.0f} MiB)")
    print(f"  {'GiB':>5s} {'reduction':9s} {'candidate':9s} {'wall s':>8s} {'CPU s':>8s} {'peak MiB':>9s}")
    for (gib, reduction, name), runs in results.items():
        print(f"  {gib:5.2f} {reduction:9s} {name:9s} {statistics.median(r['wall'] for r in runs):8.2f} "
              f"{statistics.median(r['cpu'] for r in runs):8.2f} {max(r['peak'] for r in runs) / MiB:9.0f}")
    missed = wrong
    for gib in sizes:
        for reduction in args.reductions.split(","):
            mine, theirs = results[(gib, reduction, "rearr")], results[(gib, reduction, "hand")]
            wall = statistics.median(r["wall"] for r in mine) / statistics.median(r["wall"] for r in theirs)
            cpu = statistics.median(r["cpu"] for r in mine) / statistics.median(r["cpu"] for r in theirs)
            peak = max(r["peak"] for r in mine)
            goal = "" if args.small or gib != max(sizes) else \
                ("  (goal <= 1.3: met)" if max(wall, cpu) <= 1.3 else "  (goal <= 1.3: MISSED)")
            print(f"  {gib:.2f} GiB {reduction}: rearr / hand = {wall:.2f} wall, {cpu:.2f} CPU{goal}; rearr's peak "
                  f"{peak / MiB:.0f} MiB per worker")
            missed |= bool(goal.endswith("MISSED)")) or peak >= limit
    restarted = any(r["restarted"] for runs in results.values() for r in runs)
    if restarted:
        print("a worker was restarted during the runs (killed for memory?)")
    print(f"values {'WRONG' if wrong else 'equal to the hand-written scatter in every round'}; "
          f"load average at the end: {_harness.load_average()}")
    return 1 if missed or restarted else 0


if __name__ == "__main__":
    sys.exit(main())
