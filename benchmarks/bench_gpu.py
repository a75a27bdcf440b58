"""rearr's checked gathers and scatters on a CUDA GPU: the tests there, sync against no-sync, CUDA graphs.

On CUDA the default check_bounds=True checks index values by device-side assertions, which
read nothing back to the host; check_bounds="sync" reads them once per index (the exact RearrError).
This script, on a CUDA device:

1. runs the device tests on it: ``REARR_TEST_DEVICE=cuda pytest tests/backends/test_no_host_sync.py
   tests/test_compile.py`` (conftest.py keeps the tests that take the ``on_test_device`` fixture:
   every indexed op under the host-read recorder, the compiled ops, their gradients and layers);
2. counts the host reads of each timed call (tests/backends/test_no_host_sync.py's recorder): none for the
   no-sync mode, one or more for "sync";
3. times each gather and scatter with "sync", with the device-side checks (the default) and with
   check_bounds=False: interleaved rounds, wall clock, a synchronize after each loop of calls, medians;
4. captures a checked gather and scatter in a CUDA graph (torch.cuda.graph, then replayed and compared
   with the eager result) and compiles them with torch.compile(mode="reduce-overhead"), printing
   whether each capture succeeded ("sync" is expected to fail: a host read is not allowed while the
   stream captures).

Without a CUDA device it prints "no CUDA device: skipped" and exits 0. ``--device cpu`` runs the same
code on the CPU with check_bounds="async" in place of the default (the CPU's default is the exact
check), and skips what only CUDA has (graph capture; reduce-overhead then compiles without graphs).

    python benchmarks/bench_gpu.py [--device cuda|cpu] [--rounds N] [--small] [--no-tests]

Exit status: 0 when skipped or when the tests pass and every no-sync capture succeeds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable

import _harness  # benchmarks/_harness.py: interleaved rounds, the clock

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout
sys.path.insert(1, str(_harness.ROOT / "tests"))  # the host-read recorder of test_no_host_sync.py

import torch  # noqa: E402

import rearr  # noqa: E402

TESTS = ("tests/backends/test_no_host_sync.py", "tests/test_compile.py")


def no_sync_mode(device: str) -> bool | str:
    """The check_bounds= that reads nothing back: the default on CUDA, "async" on the CPU."""
    return "async" if device == "cpu" else True


def cases(device: str, small: bool) -> dict[str, tuple[Callable, dict]]:
    """name -> (f(check_bounds), sizes): the gathers and scatters that are timed and captured."""
    edges = 1_000 if small else 100_000
    rows, width = max(edges // 10, 8), 64
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(rows, width, generator=g).to(device)
    src = torch.randn(edges, width, generator=g).to(device)
    ids = torch.randint(0, rows, (edges,), generator=g).to(device)  # in range: check_bounds=False runs them too
    along = torch.randint(0, 64, (32, edges // 32), generator=g).to(device)
    table = torch.randn(32, 64, width, generator=g).to(device)
    perm = torch.randperm(rows, generator=g).to(device)  # 'set': each row written once
    sizes = {"E": edges, "V": rows, "C": width}
    return {
        "gather rows  v[ids: e] c -> e c": (lambda m: rearr.rearrange(x, "v[ids: e] c -> e c", ids=ids,
                                                                      check_bounds=m), sizes),
        "gather along b n[idx: b k] c -> b k c": (lambda m: rearr.rearrange(
            table, "b n[idx: b k] c -> b k c", idx=along, check_bounds=m), {"b": 32, "k": edges // 32, "C": width}),
        "scatter sum  e c -> v[dst: e] c": (lambda m: rearr.scatter(src, "e c -> v[dst: e] c", "sum", dst=ids,
                                                                    v=rows, check_bounds=m), sizes),
        "scatter mean e c -> v[dst: e] c": (lambda m: rearr.scatter(src, "e c -> v[dst: e] c", "mean", dst=ids,
                                                                     v=rows, check_bounds=m), sizes),
        "scatter set  e c -> v[dst: e] c": (lambda m: rearr.scatter(x, "e c -> v[dst: e] c", "set", dst=perm,
                                                                    v=rows, check_bounds=m), {"V": rows, "C": width}),
    }


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_tests(device: str) -> bool:
    """The device tests in a subprocess (REARR_TEST_DEVICE=device); prints pytest's last line."""
    env = {**os.environ, "REARR_TEST_DEVICE": device}
    tests = TESTS if device != "cpu" else TESTS[:1]  # on the CPU the whole suite runs test_compile.py
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                         cwd=_harness.ROOT, env=env, capture_output=True, text=True)
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    print(f"tests on {device} ({' '.join(tests)}): {lines[-1] if lines else run.stderr[-500:]}")
    if run.returncode != 0:
        print("\n".join(lines[-40:]))
    return run.returncode == 0


def host_reads(f: Callable, mode: bool | str) -> int:
    """How many host reads one call makes (the recorder of tests/backends/test_no_host_sync.py)."""
    from test_no_host_sync import recording

    f(mode)  # planned outside the recorder
    with recording() as reads:
        f(mode)
    return len(reads)


def _loop(f: Callable, mode: bool | str, calls: int, device: str) -> Callable[[], None]:
    """calls of f(mode), then a synchronize: the device's work is inside the timed loop."""
    def run() -> None:
        for _ in range(calls):
            f(mode)
        synchronize(device)
    return run


def time_modes(device: str, all_cases: dict, rounds: int, small: bool) -> None:
    """Median us per call of each case under "sync", the no-sync mode and False, interleaved."""
    _harness.set_clock("wall")  # the device's time, which no CPU clock sees: a synchronize ends each loop
    quiet = no_sync_mode(device)
    print(f"\n{'case':40} {'sizes':24} {'reads sync/no-sync':>18} {'sync us':>10} {'no-sync us':>11} "
          f"{'unchecked us':>13} {'sync/no-sync':>13}")
    calls = 4 if not small else 2
    for name, (f, sizes) in all_cases.items():
        loops = {"sync": _loop(f, "sync", calls, device), "no-sync": _loop(f, quiet, calls, device),
                 "unchecked": _loop(f, False, calls, device)}
        for warm_up in loops.values():  # plans, kernels
            warm_up()
        t = _harness.interleaved(loops, rounds, 0.01 if small else 0.05)
        us = {k: v / calls * 1e6 for k, v in t.items()}
        reads = f"{host_reads(f, 'sync')}/{host_reads(f, quiet)}"
        shown = " ".join(f"{k}={v}" for k, v in sizes.items())
        print(f"{name:40} {shown:24} {reads:>18} {us['sync']:10.1f} {us['no-sync']:11.1f} {us['unchecked']:13.1f} "
              f"{us['sync'] / us['no-sync']:12.2f}x")


def capture_cuda_graph(f: Callable, mode: bool | str) -> str:
    """Capture f(mode) in a CUDA graph, replay it and compare with the eager result."""
    expected = f(mode)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graphs asks
        for _ in range(2):
            f(mode)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            out = f(mode)
    except Exception as e:  # a host read while capturing: the expected failure of "sync"
        torch.cuda.synchronize()
        return f"failed ({type(e).__name__}: {str(e).splitlines()[0][:80]})"
    graph.replay()
    torch.cuda.synchronize()
    return "ok, replay equals eager" if torch.allclose(out, expected, equal_nan=True) else "ok, but replay DIFFERS"


def compile_reduce_overhead(f: Callable, mode: bool | str, device: str) -> str:
    """f(mode) under torch.compile(mode="reduce-overhead"): whether inductor used CUDA graphs for it."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    g = torch.compile(lambda: f(mode), mode="reduce-overhead", fullgraph=True)
    try:
        for _ in range(3):  # cudagraph trees record on the second call, replay from the third
            out = g()
        synchronize(device)
    except Exception as e:
        return f"failed ({type(e).__name__}: {str(e).splitlines()[0][:80]})"
    same = torch.allclose(out, f(mode), equal_nan=True)
    skips = dict(counters["inductor"]).get("cudagraph_skips", 0)
    if device == "cpu":
        return f"compiled (no CUDA graphs on the CPU), {'equals' if same else 'DIFFERS from'} eager"
    return ("CUDA graphs used" if not skips else f"CUDA graphs skipped ({skips})") + \
        (", equals eager" if same else ", DIFFERS from eager")


def captures(device: str, all_cases: dict) -> bool:
    """Each case captured in a CUDA graph and under reduce-overhead: every case with the no-sync mode
    first, then with "sync", whose failed captures may leave the stream unusable for what follows."""
    quiet = no_sync_mode(device)
    ok = True
    print()
    for mode in (quiet, "sync"):
        for name, (f, _) in all_cases.items():
            graph = capture_cuda_graph(f, mode) if device != "cpu" else "needs CUDA (skipped on cpu)"
            compiled = compile_reduce_overhead(f, mode, device)
            print(f"{name:40} check_bounds={mode!r:7}  torch.cuda.graph: {graph:50}  reduce-overhead: {compiled}")
            if mode == quiet:
                ok &= not graph.startswith("failed") and "skipped (" not in compiled and "failed" not in compiled \
                    and "DIFFERS" not in graph + compiled
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (the same code, "
                        "check_bounds='async')")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--small", action="store_true", help="small sizes and few rounds: a smoke run")
    parser.add_argument("--no-tests", action="store_true", help="skip the pytest run")
    args = parser.parse_args()
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: skipped (run with --device cpu to exercise the same code on the CPU)")
        return 0
    torch.set_num_threads(1)
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    print(f"bench_gpu: {name}, torch {torch.__version__}; {_harness.tree_state()}; {_harness.machine_state()}")
    ok = True if args.no_tests else run_tests(device)
    all_cases = cases(device, args.small)
    time_modes(device, all_cases, 3 if args.small else args.rounds, args.small)
    ok &= captures(device, all_cases)
    print(f"\n{'all met' if ok else 'MISSED: a test failed or a no-sync capture did not succeed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
