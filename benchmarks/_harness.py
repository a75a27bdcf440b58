"""The timing harness that the scripts in benchmarks/ share.

The scripts are run as `python benchmarks/bench_x.py`, which puts this folder
first on sys.path, so they import this module as plain `import _harness`.
It holds no benchmark of its own and imports neither torch nor rearr: only the
clock, the interleaved-rounds timer, the malloc pinning, the peak-memory probe
(a child process) and the lines of the report's header that say under which
conditions the figures were taken.

How a figure is made (see benchmarks/README.md, "Method"): each variant's calls
are looped, the loop sized by calibrate() to a target time; interleaved() runs
every variant once per round, in alternating order, and reports the median
time per call over the rounds; the clock is this thread's CPU time unless
--clock wall; glibc's malloc is pinned in one regime for every variant.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout: benchmarks/..

# The clock, one slot so that set_clock() can swap it for every timer at once.
# Default: this thread's CPU time (time.thread_time: user + system, page faults
# included), so that time spent descheduled on a busy shared machine is not
# counted; the scripts run torch on one thread, so all the measured work is on
# this one. --clock wall: time.perf_counter.
CLOCK: list[Callable[[], float]] = [time.thread_time]
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.thread_time, "wall": time.perf_counter}
CLOCK_LINES = {"cpu": "this thread's CPU time (time.thread_time)", "wall": "wall (perf_counter)"}


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the harness's own options, --clock cpu|wall and --malloc warm|fresh, to a script's parser."""
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: this thread's CPU time (default; robust on a shared machine); wall: perf_counter")
    parser.add_argument("--malloc", choices=("warm", "fresh"), default="warm",
                        help="glibc regime for large buffers: warm heap pages (default) or fresh mmapped pages")


def set_clock(name: str) -> None:
    """Make CLOCK time.thread_time ("cpu") or time.perf_counter ("wall") for every later timing."""
    CLOCK[0] = CLOCKS[name]


def calibrate(fn: Callable[[], object], target_s: float) -> int:
    """Calls of fn per round so that a round takes about target_s (at least one call).

    The call count grows by 4x until a loop takes at least a quarter of the
    target (or reaches 2**20 calls), then is scaled to the target and rounded
    to the nearest whole call: a loop long enough makes the clock's resolution
    and the loop's own start-up negligible, while a call that alone takes
    longer than the target is still timed once per round.
    """
    n = 1
    while True:
        t0 = CLOCK[0]()
        for _ in range(n):
            fn()
        dt = CLOCK[0]() - t0
        if dt >= target_s / 4 or n >= 1 << 20:
            return max(1, round(n * target_s / max(dt, 1e-9)))
        n *= 4


def interleaved(fns: Mapping[str, Callable[[], object]], rounds: int, target_s: float) -> dict[str, float]:
    """Median seconds per call of each fn, over rounds that alternate forward / reversed order.

    Each round runs every fn once (a loop sized by calibrate), in the dict's
    order on even rounds and reversed on odd ones, so that a drift in the
    machine's speed, and whatever one variant leaves behind for the next
    (caches, heap pages), hits every variant alike; the median discards the
    rounds a neighbour on a shared machine disturbed.
    """
    names = list(fns)
    reps = {k: calibrate(fns[k], target_s) for k in names}
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            f, n = fns[k], reps[k]
            t0 = CLOCK[0]()
            for _ in range(n):
                f()
            samples[k].append((CLOCK[0]() - t0) / n)
    return {k: statistics.median(v) for k, v in samples.items()}


def pin_malloc(mode: str = "warm") -> str:
    """Give every variant the same memory regime from glibc's malloc; returns the line to print.

    Left alone, glibc's dynamic mmap threshold lets one variant reuse heap pages
    that an earlier variant warmed while another gets fresh, page-faulting
    pages: large timings moved by up to 2x with the order of the variants.
    warm (default): never mmap, never trim, so every large buffer reuses warm
    heap pages, as in the steady state of a hot loop; fresh: mmap every block
    >= 128 KiB and unmap it on free, so every large buffer is fresh pages
    (page faults, the kernel zeroing them) on every call. Set through
    mallopt(3) with ctypes; without glibc it leaves malloc as it is.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return "malloc: not glibc, left as is"
    m_trim_threshold, m_mmap_threshold, m_mmap_max = -1, -3, -4
    if mode == "warm":
        ok = libc.mallopt(m_mmap_max, 0) and libc.mallopt(m_trim_threshold, 1 << 30)
        what = "warm: no mmap, no trim, large buffers reuse warm heap pages"
    else:
        ok = libc.mallopt(m_mmap_threshold, 128 * 1024) and libc.mallopt(m_trim_threshold, 128 * 1024)
        what = "fresh: blocks >= 128 KiB mmapped and unmapped on free, fresh pages every call"
    return f"malloc: glibc, {what}" if ok else "malloc: mallopt refused, left as is"


def tree_state(root: Path = ROOT) -> str:
    """The commit measured, and whether rearr/ differs from it (others edit it while we measure)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "rearr"],
                               capture_output=True, text=True, check=True).stdout.split("\n")
        dirty = [line[3:] for line in dirty if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        return "rearr: not a git checkout"
    return f"rearr at commit {head}" + (f", with uncommitted changes in {', '.join(dirty)}" if dirty else "")


def load_average() -> str:
    """The 1-minute load average, 2 decimals: how busy the (shared) machine was."""
    return f"{os.getloadavg()[0]:.2f}"


def machine_state() -> str:
    """'N CPUs, load average L; date': the end of a script's first header line."""
    return f"{os.cpu_count()} CPUs, load average {load_average()}; {time.strftime('%Y-%m-%d %H:%M')}"


def setup(clock: str, malloc: str) -> None:
    """Set the clock and pin malloc, printing the header lines that say so (after the tree's state).

    Call it once, after the script's own versions line and before any timing.
    """
    set_clock(clock)
    print(tree_state())
    print(pin_malloc(malloc))
    print("clock: " + CLOCK_LINES[clock])


# --- peak memory, measured in a child process -------------------------------------------

# The child's malloc: blocks >= 128 KiB mmapped and unmapped on free, so that a freed buffer goes back to
# the kernel and a later call cannot hide its own buffers in pages that an earlier one left behind.
CHILD_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072", "OMP_NUM_THREADS": "1"}


def _status(*keys: str) -> dict[str, int]:
    text = Path("/proc/self/status").read_text()
    return {k: int(re.search(rf"^{k}:\s+(\d+) kB", text, re.M).group(1)) * 1024 for k in keys}


def touched(fn: Callable[[], object]) -> tuple[int, object, str]:
    """(bytes of pages one call of fn touched at its peak, its result, how that was measured).

    fn runs once first (imports, plan caches, first-touch of code pages), then the kernel's RSS
    high-water mark is reset (5 into /proc/self/clear_refs) and fn runs again: the figure is VmHWM
    minus the RSS just before that call, the result included. Run it in a child started with
    CHILD_ENV (see peak_in_child). tracemalloc does not see torch's allocations, torch's CPU
    allocator keeps no statistics outside the profiler, and ru_maxrss cannot be reset.
    """
    out = fn()
    del out
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM
        method = "VmHWM after clear_refs"
    except OSError:
        method = "VmHWM (not reset: an upper bound)"
    before = _status("VmRSS")["VmRSS"]
    out = fn()
    return _status("VmHWM")["VmHWM"] - before, out, method


def peak_in_child(script: str, payload: object) -> object:
    """Run `python script --mem-child JSON(payload)` with CHILD_ENV; return the JSON its last line prints."""
    env = dict(os.environ, **CHILD_ENV)
    cmd = [sys.executable, script, "--mem-child", json.dumps(payload)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe failed for {payload}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])
