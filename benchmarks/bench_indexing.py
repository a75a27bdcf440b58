"""rearr's gather and scatter-sum against the hand-written torch (and numpy) variants.

The setup of issue 3 ("Speed and memory"): torch CPU, one thread, float32;
B=64, N=4096, C=64, K=1024, an index idx of shape (B, K) shared across C.

    gather   out[b, k, c] = x[b, idx[b, k], c]      x: (B, N, C)  ->  (B, K, C)
    scatter  out[b, idx[b, k], c] += src[b, k, c]   src: (B, K, C) -> (B, N, C)

Each variant is a complete call as a user would write it: the index's
offsets (arange(B)[:, None] * N), expands and output buffers are made inside
the call, as rearr makes them inside its own. The hand-written torch code
inserts unit axes with .unsqueeze(d), about 1 us cheaper per call than
[:, :, None] in torch 2.13, so that the tiny baselines are the strict ones.
Before timing, every variant's result is compared with a reference computed
independently in numpy (gather exactly; scatter-sum against a float64
np.add.at, with a float32 tolerance, since the order of the additions
differs).

Time: for each table, rounds that run every variant once in alternating order
(forward, then reversed); a variant's sample in a round is a loop of calls
sized to about 40 ms (tiny) or 50 ms (large, at least one call); the figure is
the median over rounds (default: 9 large, 15 tiny; at least 6). The clock
is the thread's CPU time (time.thread_time: user + system, page faults
included), so that time spent descheduled on a busy shared machine is not
counted; --clock wall uses time.perf_counter. glibc's malloc is put in one
regime for all variants (see _harness.pin_malloc): by default large buffers reuse warm
heap pages, as in a hot loop's steady state (--malloc fresh: fresh mmapped,
page-faulting pages on every call, which adds the same few ms to every
variant).

Peak memory: each large variant runs in a fresh subprocess that builds the
inputs, runs the variant once (warm-up: imports, plan caches), frees it,
resets the kernel's RSS high-water mark (writing 5 to /proc/self/clear_refs),
runs it once more and reads VmHWM from /proc/self/status: the figure is
VmHWM minus the RSS just before the call, i.e. every page the call touched at
its peak, output included. glibc's malloc is pinned to mmap large blocks
(MALLOC_MMAP_THRESHOLD_=128 KiB) so that freed buffers go back to the kernel
and the second call cannot hide its buffers in pages kept from the first.
(tracemalloc does not see torch's allocations; torch's CPU allocator keeps
no statistics without the profiler; ru_maxrss cannot be reset, so it would
count the setup's own peak.)

    python benchmarks/bench_indexing.py [--rounds N] [--tiny-rounds N] [--no-memory] [--no-numpy]
                                        [--profile] [--clock cpu|wall] [--malloc warm|fresh]

Goals (issue 3), printed as met / MISSED at the end:
  large: rearr (bounds check on) <= 1.1x the fastest hand-written variant, gather and scatter;
  large: rearr's peak memory <= the expand variant's (torch.gather / scatter_add_ with an expanded index);
  tiny:  rearr with check_bounds=False <= 1.5x torch.gather / scatter_add_ per call;
  and the bounds check's own cost (check on - check off).
Exit status: 0 when every goal is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import platform
import pstats
import sys

import _harness  # benchmarks/_harness.py: the clock, interleaved rounds, malloc pinning

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rearr  # noqa: E402

torch.set_num_threads(1)

SIZES = {"large": (64, 4096, 64, 1024), "tiny": (2, 8, 4, 3)}  # B, N, C, K
GATHER = "b n[idx: b k] c -> b k c"
SCATTER = "b k c -> b n[idx: b k] c"
OBVIOUS = {"gather": "torch.gather, index expanded", "scatter": "scatter_add_, index expanded"}
REARR_ON, REARR_OFF = "rearr", "rearr check_bounds=False"


# --- inputs and variants ---------------------------------------------------------


def inputs(size: str, seed: int = 0):
    """x (B, N, C), idx (B, K) int64, src (B, K, C): numpy arrays (torch tensors share them)."""
    B, N, C, K = SIZES[size]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, N, C), dtype=np.float32)
    idx = rng.integers(0, N, (B, K), dtype=np.int64)
    src = rng.standard_normal((B, K, C), dtype=np.float32)
    return x, idx, src


def reference(kind: str, size: str, x, idx, src):
    B, N, C, K = SIZES[size]
    if kind == "gather":
        return x[np.arange(B)[:, None], idx]
    out = np.zeros((B, N, C), dtype=np.float64)
    np.add.at(out, (np.arange(B)[:, None], idx), src.astype(np.float64))
    return out


def torch_variants(kind: str, size: str, x, idx, src) -> dict:
    B, N, C, K = SIZES[size]
    if kind == "gather":
        return {
            "torch.gather, index expanded": lambda: torch.gather(x, 1, idx.unsqueeze(2).expand(B, K, C)),
            "torch.gather, index repeated": lambda: torch.gather(x, 1, idx.unsqueeze(2).repeat(1, 1, C)),
            "advanced indexing x[arange(B)[:, None], idx]": lambda: x[torch.arange(B).unsqueeze(1), idx],
            "index_select on the (B*N, C) view, flat index": lambda: x.view(B * N, C).index_select(
                0, (idx + torch.arange(B).unsqueeze(1) * N).view(-1)).view(B, K, C),
            REARR_ON: lambda: rearr.rearrange(x, GATHER, idx=idx),
            REARR_OFF: lambda: rearr.rearrange(x, GATHER, idx=idx, check_bounds=False),
        }
    return {
        "scatter_add_, index expanded": lambda: torch.zeros(B, N, C).scatter_add_(
            1, idx.unsqueeze(2).expand(B, K, C), src),
        "index_put_(accumulate=True)": lambda: torch.zeros(B, N, C).index_put_(
            (torch.arange(B).unsqueeze(1), idx), src, accumulate=True),
        "index_add_ on the (B*N, C) view, flat index": lambda: torch.zeros(B * N, C).index_add_(
            0, (idx + torch.arange(B).unsqueeze(1) * N).view(-1), src.view(B * K, C)).view(B, N, C),
        REARR_ON: lambda: rearr.scatter(src, SCATTER, "sum", idx=idx, n=N),
        REARR_OFF: lambda: rearr.scatter(src, SCATTER, "sum", idx=idx, n=N, check_bounds=False),
    }


def numpy_variants(kind: str, size: str, x, idx, src) -> dict:
    B, N, C, K = SIZES[size]
    if kind == "gather":
        return {
            "np.take_along_axis(x, idx[:, :, None], 1)": lambda: np.take_along_axis(x, idx[:, :, None], axis=1),
            "take on the (B*N, C) view, flat index": lambda: x.reshape(B * N, C).take(
                (idx + np.arange(B)[:, None] * N).reshape(-1), axis=0).reshape(B, K, C),
            REARR_ON: lambda: rearr.rearrange(x, GATHER, idx=idx),
            REARR_OFF: lambda: rearr.rearrange(x, GATHER, idx=idx, check_bounds=False),
        }

    def add_at():
        out = np.zeros((B, N, C), dtype=src.dtype)
        np.add.at(out, (np.arange(B)[:, None], idx), src)
        return out

    def add_at_flat():
        out = np.zeros((B * N, C), dtype=src.dtype)
        np.add.at(out, (idx + np.arange(B)[:, None] * N).reshape(-1), src.reshape(B * K, C))
        return out.reshape(B, N, C)

    def bincount():
        flat = ((idx + np.arange(B)[:, None] * N)[:, :, None] * C + np.arange(C)).reshape(-1)
        return np.bincount(flat, weights=src.reshape(-1), minlength=B * N * C).astype(src.dtype).reshape(B, N, C)

    return {
        "np.add.at(out, (arange(B)[:, None], idx), src)": add_at,
        "np.add.at on the (B*N, C) view, flat index": add_at_flat,
        "np.bincount on flat element positions": bincount,
        REARR_ON: lambda: rearr.scatter(src, SCATTER, "sum", idx=idx, n=N),
        REARR_OFF: lambda: rearr.scatter(src, SCATTER, "sum", idx=idx, n=N, check_bounds=False),
    }


def variants(lib: str, kind: str, size: str, seed: int = 0) -> dict:
    x, idx, src = inputs(size, seed)
    if lib == "torch":
        x, idx, src = torch.from_numpy(x), torch.from_numpy(idx), torch.from_numpy(src)
        return torch_variants(kind, size, x, idx, src)
    return numpy_variants(kind, size, x, idx, src)


# --- correctness and timing ----------------------------------------------------------


def check(lib: str, kind: str, size: str, fns: dict) -> None:
    x, idx, src = inputs(size)
    ref = reference(kind, size, x, idx, src)
    for name, fn in fns.items():
        out = fn()
        out = out.numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        assert out.shape == ref.shape, (lib, kind, size, name, out.shape, ref.shape)
        if kind == "gather":
            np.testing.assert_array_equal(out, ref, err_msg=f"{lib} {kind} {size}: {name}")
        else:
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg=f"{lib} {kind} {size}: {name}")


# --- peak memory in a fresh process ------------------------------------------------------


def mem_child(lib: str, kind: str, size: str, name: str) -> None:
    peak, out, method = _harness.touched(variants(lib, kind, size)[name])
    nbytes = out.numel() * out.element_size() if isinstance(out, torch.Tensor) else out.nbytes
    print(json.dumps({"peak": peak, "out": nbytes, "method": method}))


def peak_memory(lib: str, kind: str, size: str, name: str) -> dict:
    return _harness.peak_in_child(__file__, [lib, kind, size, name])


# --- report ----------------------------------------------------------------------------


def fmt_time(s: float) -> str:
    return f"{s * 1e3:9.2f} ms" if s >= 1e-3 else f"{s * 1e6:9.2f} us"


def table(lib: str, kind: str, size: str, rounds: int, memory: bool) -> dict:
    fns = variants(lib, kind, size)
    check(lib, kind, size, fns)
    target = 0.04 if size == "tiny" else 0.05
    med = _harness.interleaved(fns, rounds, target)
    hand = {k: v for k, v in med.items() if not k.startswith("rearr")}
    fastest = min(hand, key=hand.get)
    obvious = OBVIOUS[kind] if lib == "torch" else next(iter(hand))
    mem = {k: peak_memory(lib, kind, size, k) for k in fns} if memory else {}
    B, N, C, K = SIZES[size]
    print(f"\n{lib} {kind}, {size}: B={B} N={N} C={C} K={K}, median of {rounds} rounds"
          f" (fastest hand-written: {fastest}; obvious: {obvious})")
    head = f"  {'variant':48} {'time':>12} {'/fastest':>9} {'/obvious':>9}"
    if memory:
        head += f" {'peak MB':>9} {'/expand':>8}"
    print(head)
    base_mem = mem.get(obvious, {}).get("peak")
    for k, t in med.items():
        line = f"  {k:48} {fmt_time(t)} {t / med[fastest]:9.2f} {t / med[obvious]:9.2f}"
        if memory:
            p = mem[k]["peak"]
            line += f" {p / 2**20:9.1f} {p / base_mem:8.2f}" if base_mem else f" {p / 2**20:9.1f}"
        print(line)
    if memory:
        out = next(iter(mem.values()))["out"]
        print(f"  (peak = pages touched during one call, output of {out / 2**20:.1f} MB included; "
              f"{next(iter(mem.values()))['method']})")
    if REARR_OFF in med:
        print(f"  bounds check's own cost: {fmt_time(med[REARR_ON] - med[REARR_OFF]).strip()} per call "
              f"({med[REARR_ON] / med[REARR_OFF]:.2f}x)")
    return {"time": med, "fastest": fastest, "obvious": obvious, "mem": mem}


def profile_tiny() -> None:
    """Where the time of a tiny rearr call goes (cProfile, 20000 calls each)."""
    for kind in ("gather", "scatter"):
        for name in (REARR_ON, REARR_OFF):
            fn = variants("torch", kind, "tiny")[name]
            fn()
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20000):
                fn()
            prof.disable()
            print(f"\n--- cProfile: torch {kind} tiny, {name} (20000 calls) ---")
            pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def goal(met: bool, text: str) -> bool:
    """Print one of issue 3's goals as '[met] text' or '[MISSED] text'; return met."""
    print(f"  [{'met' if met else 'MISSED'}] {text}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds for the large tables (>= 6)")
    parser.add_argument("--tiny-rounds", type=int, default=15)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--no-numpy", action="store_true", help="skip the numpy tables (information only)")
    parser.add_argument("--profile", action="store_true", help="cProfile rearr's tiny calls at the end")
    parser.add_argument("--mem-child", help=argparse.SUPPRESS)
    _harness.add_options(parser)
    args = parser.parse_args()
    if args.mem_child:
        mem_child(*json.loads(args.mem_child))
        return 0

    print(f"python {platform.python_version()}, torch {torch.__version__} on CPU, "
          f"torch.set_num_threads(1) -> {torch.get_num_threads()} thread, numpy {np.__version__}, float32; "
          f"{_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    results = {}
    for kind in ("gather", "scatter"):
        results[("torch", kind, "large")] = table("torch", kind, "large", args.rounds, not args.no_memory)
    for kind in ("gather", "scatter"):
        results[("torch", kind, "tiny")] = table("torch", kind, "tiny", args.tiny_rounds, False)
    if not args.no_numpy:
        for size, rounds in (("large", max(5, args.rounds // 2)), ("tiny", args.tiny_rounds)):
            for kind in ("gather", "scatter"):
                results[("numpy", kind, size)] = table("numpy", kind, size, rounds, False)

    print("\nGoals (issue 3):")
    ok = True
    for kind in ("gather", "scatter"):
        r = results[("torch", kind, "large")]
        t = r["time"]
        ratio = t[REARR_ON] / t[r["fastest"]]
        ok &= goal(ratio <= 1.1, f"large {kind}: rearr {ratio:.2f}x the fastest ({r['fastest']}), goal <= 1.10x; "
                                 f"{t[r['obvious']] / t[REARR_ON]:.1f}x ahead of {r['obvious']}")
        if r["mem"]:
            mine, base = r["mem"][REARR_ON]["peak"], r["mem"][r["obvious"]]["peak"]
            ok &= goal(mine <= base * 1.02 + 2**20,  # 2 % + 1 MB: page-granular noise
                       f"large {kind} peak memory: rearr {mine / 2**20:.1f} MB, expand version {base / 2**20:.1f} MB")
    for kind in ("gather", "scatter"):
        r = results[("torch", kind, "tiny")]
        t = r["time"]
        ratio = t[REARR_OFF] / t[r["obvious"]]
        ok &= goal(ratio <= 1.5, f"tiny {kind}: rearr check_bounds=False {t[REARR_OFF] * 1e6:.1f} us = {ratio:.2f}x "
                                 f"{r['obvious']} ({t[r['obvious']] * 1e6:.1f} us), goal <= 1.50x; the bounds check "
                                 f"adds {(t[REARR_ON] - t[REARR_OFF]) * 1e6:.1f} us")
    print(f"  load average at the end: {_harness.load_average()}")
    if args.profile:
        profile_tiny()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
