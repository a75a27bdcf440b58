"""torch.distributed for the tests: N gloo processes on 127.0.0.1 that always end, and one rank in-process.

`run_ranks(fn, *args, world=2, timeout=...)` spawns ``world`` processes, each of which joins a gloo
process group, runs ``fn(rank, world, *args)`` and reports, per rank, ``("ok", value)``, or
``("err", type name, message, code, traceback)``; ``None`` for a rank that never reported (it hung,
and was killed at the deadline, or it crashed). It never hangs:

- the parent owns a TCPStore on port 0 (the OS picks a free port: no race between finding one and
  binding it), which the children join as clients;
- the children are spawned, not forked (gloo's and torch's threads exist by then); ``fn`` is a
  module-level function that they import by name (tests/ and the repository are on their path);
- each sets a short collective timeout, runs ``fn``, puts its result on a queue and destroys its
  process group in ``finally``;
- the parent waits on the queue until the deadline, then terminates, kills and joins what is left.

`solo_mesh()` is a 1-D mesh of one rank in this process (a gloo group on a HashStore), made once and
destroyed at exit: DTensors of one rank run every lowering with no collective, in the fast tests.
"""

from __future__ import annotations

import atexit
import datetime
import multiprocessing
import os
import queue
import time
import traceback
from typing import Any


def _child(rank: int, world: int, port: int, fn: Any, args: tuple, results: Any, timeout: float) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # a thread per rank: the machine's cores are shared
    store = dist.TCPStore("127.0.0.1", port, world_size=world, is_master=False,
                          timeout=datetime.timedelta(seconds=timeout))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout))
    try:
        results.put((rank, ("ok", fn(rank, world, *args))))
    except BaseException as e:  # reported to the parent, which asserts on it
        results.put((rank, ("err", type(e).__name__, str(e), getattr(e, "code", None), traceback.format_exc())))
    finally:
        dist.destroy_process_group()


def run_ranks(fn: Any, *args: Any, world: int = 2, timeout: float = 120.0, collective_timeout: float = 30.0) -> list:
    """Each rank's report (above), within ``timeout`` seconds from the spawn, whatever the ranks do."""
    import torch.distributed as dist

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    store = dist.TCPStore("127.0.0.1", 0, world_size=world + 1, is_master=True, wait_for_workers=False)
    # (a spawned child starts with this process's sys.path: the repository and tests/, from conftest.py)
    procs = [context.Process(target=_child, args=(r, world, store.port, fn, args, results, collective_timeout),
                             daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    reports: list = [None] * world
    deadline, got = time.monotonic() + timeout, 0
    try:
        while got < world and time.monotonic() < deadline:
            try:
                rank, report = results.get(timeout=0.5)
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and results.empty():
                    break  # every child ended (a crash) without reporting
                continue
            reports[rank] = report
            got += 1
    finally:
        for p in procs:
            p.join(max(0.0, min(10.0, deadline - time.monotonic())))
            if p.is_alive():
                p.terminate()
                p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)
        results.close()
    return reports


def values(reports: list) -> list:
    """Each rank's value, after asserting that every rank reported one (else its traceback)."""
    for rank, report in enumerate(reports):
        assert report is not None, f"rank {rank} never reported (hung and killed, or crashed)"
        assert report[0] == "ok", f"rank {rank} raised {report[1]}: {report[2]}\n{report[4]}"
    return [report[1] for report in reports]


_SOLO: dict[str, Any] = {}


def solo_mesh() -> Any:
    """A mesh of this process alone (world size 1), made once; the process group is destroyed at exit."""
    mesh = _SOLO.get("mesh")
    if mesh is None:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        if not dist.is_initialized():
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
            atexit.register(dist.destroy_process_group)
        mesh = _SOLO["mesh"] = init_device_mesh("cpu", (1,))
    return mesh
