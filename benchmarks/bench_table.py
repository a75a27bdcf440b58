"""Issue 9's table: every row with rearr, einops where it applies, hand-written code and the floor.

Per-call rows (one process, variants interleaved by _harness.interleaved, the
median over rounds of this thread's CPU time per call):

    rearr        the public call, bounds checks on
    einops       the same call in einops 0.8, where einops has it
    hand         the native call(s) a careful person writes, as a complete call
    floor        the least a pattern library can do: one dict look-up keyed on
                 (pattern, type, shape, lengths), then the hand-written call

Cold rows (fresh processes, rearr and einops alternating, the median over
--cold-repeats of each child's own CPU time for the measured statement):

    import            `import rearr` / `import einops` with numpy loaded, bytecode warm
    first call        the first rearrange in a process that has torch loaded
                      (bytecode warm, as after an install; a second row with no
                      bytecode at all, as in a checkout under PYTHONDONTWRITEBYTECODE)
    new pattern       the first call of a pattern not seen yet, in a warm process

torch runs on one thread. Results are checked against the hand-written ones
first. No figure is a pass or fail here: the ratios print next to issue 9's
bounds, to be judged by a person.

    python benchmarks/bench_table.py [--rounds N] [--cold-repeats N] [--target-ms T] [--small]
                                     [--clock cpu|wall] [--malloc warm|fresh]

--small shrinks the large cases 16x and, with --rounds 1 --cold-repeats 1, makes
the smoke test that CI runs.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _harness  # benchmarks/_harness.py: the clock, interleaved rounds, malloc pinning

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

import einops  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import rearr  # noqa: E402

torch.set_num_threads(1)


def floor(hand):
    """The floor: one dict look-up keyed on (pattern, type, shape, lengths and index shapes), then hand.
    The key is built the cheapest way known (map reads each keyword's shape or value in C): a
    generator over kw.items(), as before 2026-11-30, cost some 0.3 us more per call."""
    table: dict = {}
    shape = itertools.repeat("shape")

    def call(x, pattern, **kw):
        values = kw.values()
        key = (pattern, x.__class__, x.shape, *kw, *map(getattr, values, shape, values))
        fn = table.get(key)
        if fn is None:
            fn = table[key] = hand
        return fn(x, **kw)

    return call


def _check(name: str, results: dict) -> None:
    ref = results["hand"]
    ref = ref.numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    for label, out in results.items():
        got = out.numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        assert got.shape == ref.shape, (name, label, got.shape, ref.shape)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=f"{name}: {label}")


def cases(small: bool) -> list[tuple[str, str, dict, bool]]:
    """(row, bound, {variant: fn}, large) for the per-call rows."""
    rng = np.random.default_rng(0)
    rows = []

    # cached rearrange / reduce, tiny
    xn = rng.standard_normal((2, 3, 4, 5), dtype=np.float32)
    xt = torch.from_numpy(xn.copy())
    flat = "b c h w -> b (c h w)"
    for lib, x, hand in (("torch", xt, lambda x: x.view(x.shape[0], -1)),
                         ("numpy", xn, lambda x: x.reshape(x.shape[0], -1))):
        fl = floor(hand)
        rows.append((f"{lib} `{flat}`, per call", "<= 1.2x floor", {
            "rearr": lambda x=x: rearr.rearrange(x, flat),
            "einops": lambda x=x: einops.rearrange(x, flat),
            "hand": lambda x=x, hand=hand: hand(x),
            "floor": lambda x=x, fl=fl: fl(x, flat),
        }, False))
    mean = "b c h w -> b c"
    fl = floor(lambda x: x.mean(axis=(2, 3)))
    rows.append((f"numpy mean `{mean}`", "<= 1.2x floor", {
        "rearr": lambda: rearr.reduce(xn, mean, "mean"),
        "einops": lambda: einops.reduce(xn, mean, "mean"),
        "hand": lambda: xn.mean(axis=(2, 3)),
        "floor": lambda fl=fl: fl(xn, mean),
    }, False))

    # tiny gather and scatter: B=2 N=8 K=3
    B, N, K = 2, 8, 3
    gn = rng.standard_normal((B, N), dtype=np.float32)
    idx_n = rng.integers(0, N, (B, K))
    gt, idx_t = torch.from_numpy(gn.copy()), torch.from_numpy(idx_n.copy())
    gather = "b n[idx] -> b k"
    fl_t = floor(lambda x, idx: torch.gather(x, 1, idx))
    rows.append((f"torch gather `{gather}`, tiny", "<= 1.5x hand", {
        "rearr": lambda: rearr.rearrange(gt, gather, idx=idx_t),
        "hand": lambda: torch.gather(gt, 1, idx_t),
        "floor": lambda fl_t=fl_t: fl_t(gt, gather, idx=idx_t),
    }, False))
    fl_n = floor(lambda x, idx: np.take_along_axis(x, idx, 1))
    rows.append((f"numpy gather `{gather}`, tiny", "<= 1.5x hand", {
        "rearr": lambda: rearr.rearrange(gn, gather, idx=idx_n),
        "hand": lambda: np.take_along_axis(gn, idx_n, 1),
        "floor": lambda fl_n=fl_n: fl_n(gn, gather, idx=idx_n),
    }, False))
    sn = rng.standard_normal((B, K), dtype=np.float32)
    st = torch.from_numpy(sn.copy())
    scatter = "b k -> b n[idx]"

    def add_at(x, idx, n=N):
        out = np.zeros((x.shape[0], n), dtype=x.dtype)
        np.add.at(out, (np.arange(x.shape[0])[:, None], idx), x)
        return out

    def scatter_add(x, idx, n=N):
        return torch.zeros(x.shape[0], n).scatter_add_(1, idx, x)

    fl_t, fl_n = floor(scatter_add), floor(add_at)
    rows.append((f"torch scatter-sum `{scatter}`, tiny", "<= 1.5x hand", {
        "rearr": lambda: rearr.scatter(st, scatter, "sum", idx=idx_t, n=N),
        "hand": lambda: scatter_add(st, idx_t),
        "floor": lambda fl_t=fl_t: fl_t(st, scatter, idx=idx_t),
    }, False))
    rows.append((f"numpy scatter-sum `{scatter}`, tiny", "<= 1.5x hand", {
        "rearr": lambda: rearr.scatter(sn, scatter, "sum", idx=idx_n, n=N),
        "hand": lambda: add_at(sn, idx_n),
        "floor": lambda fl_n=fl_n: fl_n(sn, scatter, idx=idx_n),
    }, False))

    # large numpy scatter-sum and message passing
    BL, NL, CL, KL = (64, 4096, 64, 1024) if not small else (16, 1024, 16, 256)
    src = rng.standard_normal((BL, KL, CL), dtype=np.float32)
    idx = rng.integers(0, NL, (BL, KL))
    pattern = "b k c -> b n[idx: b k] c"

    def flat_add_at(src, idx):  # 1-d np.add.at on element positions: the fastest numpy variant
        pos = (((idx + np.arange(BL)[:, None] * NL) * CL)[:, :, None] + np.arange(CL)).reshape(-1)
        out = np.zeros(BL * NL * CL, dtype=src.dtype)
        np.add.at(out, pos, src.reshape(-1))
        return out.reshape(BL, NL, CL)

    fl = floor(flat_add_at)
    rows.append((f"numpy scatter-sum `{pattern}`, {BL}x{NL}x{CL} K={KL}", "<= 1.1x hand", {
        "rearr": lambda: rearr.scatter(src, pattern, "sum", idx=idx, n=NL),
        "hand": lambda: flat_add_at(src, idx),
        "floor": lambda fl=fl: fl(src, pattern, idx=idx),
    }, True))
    V, E, C = (100_000, 1_000_000, 32) if not small else (6_250, 62_500, 32)
    xv = rng.standard_normal((V, C), dtype=np.float32)
    s, d = rng.integers(0, V, E), rng.integers(0, V, E)
    mp = "v[src: e] c -> v[dst: e] c"

    def mp_numpy(x, src, dst):  # take rows, 1-d add.at on element positions, bincount for counts
        sums = np.zeros(V * C, dtype=x.dtype)
        np.add.at(sums, (dst[:, None] * C + np.arange(C)).reshape(-1), np.take(x, src, axis=0).reshape(-1))
        counts = np.bincount(dst, minlength=V)
        return sums.reshape(V, C) / np.maximum(counts, 1)[:, None].astype(x.dtype)

    fl = floor(mp_numpy)
    rows.append((f"numpy message-passing mean, V={V} E={E} C={C}", "<= 1.1x hand", {
        "rearr": lambda: rearr.scatter(xv, mp, "mean", src=s, dst=d),
        "hand": lambda: mp_numpy(xv, s, d),
        "floor": lambda fl=fl: fl(xv, mp, src=s, dst=d),
    }, True))
    xt, st_, dt_ = torch.from_numpy(xv), torch.from_numpy(s), torch.from_numpy(d)

    def mp_torch(x, src, dst):  # index_select + scatter_reduce, the reference
        return torch.zeros(V, C).scatter_reduce_(0, dst.unsqueeze(1).expand(E, C), x.index_select(0, src), "mean",
                                                 include_self=False)

    fl = floor(mp_torch)
    rows.append((f"torch message-passing mean, V={V} E={E} C={C}", "<= 1.1x hand", {
        "rearr": lambda: rearr.scatter(xt, mp, "mean", src=st_, dst=dt_),
        "hand": lambda: mp_torch(xt, st_, dt_),
        "floor": lambda fl=fl: fl(xt, mp, src=st_, dst=dt_),
    }, True))

    # einsum, tiny
    a, b = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    spec = "b i d, b j d -> b i j"
    fl = floor(lambda x, y: torch.einsum("bid,bjd->bij", x, y))
    rows.append((f"torch einsum `{spec}`, tiny", "<= 1.0x hand", {
        "rearr": lambda: rearr.einsum(a, b, spec),
        "einops": lambda: einops.einsum(a, b, spec),
        "hand": lambda: torch.einsum("bid,bjd->bij", a, b),
        "floor": lambda fl=fl: fl(a, spec, y=b),
    }, False))
    return rows


def run_rows(rows, rounds: int, target: float) -> list[tuple[str, str, dict]]:
    out = []
    for name, bound, fns, large in rows:
        _check(name, {k: f() for k, f in fns.items()})
        out.append((name, bound, _harness.interleaved(fns, rounds, target * (5 if large else 1))))
        print_row(*out[-1])
    return out


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return f"{'-':>10}"
    us = seconds * 1e6
    return f"{us / 1000:8.2f}ms" if us >= 1000 else f"{us:8.2f}us"


def print_row(name: str, bound: str, t: dict) -> None:
    hand = t["hand"]
    ratio_floor = t["rearr"] / t["floor"] if "floor" in t else None
    extra = ""
    if "einops" in t and t["einops"] > hand:
        extra = f"  above-hand rearr/einops {(t['rearr'] - hand) / (t['einops'] - hand):.2f} (goal <= 0.35)"
    print(f"{name:58} {fmt(t['rearr'])} {fmt(t.get('einops'))} {fmt(hand)} {fmt(t.get('floor'))}"
          f"  /hand {t['rearr'] / hand:5.2f}  /floor {ratio_floor:5.2f}  [{bound}]{extra}", flush=True)


# --- cold rows: fresh processes -------------------------------------------------------------


def _child_env(bare: str | None = None) -> dict:
    """rearr's bytecode warm (an installed package has its .pyc), or none at all: a copy of the package
    without __pycache__ in the folder ``bare``, under PYTHONDONTWRITEBYTECODE (numpy's and torch's stay warm)."""
    env = dict(os.environ, PYTHONPATH=str(_harness.ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if bare is not None:
        shutil.copytree(_harness.ROOT / "rearr", Path(bare) / "rearr", ignore=shutil.ignore_patterns("__pycache__"))
        env.update(PYTHONPATH=bare, PYTHONDONTWRITEBYTECODE="1")
    return env


def _cpu_ms(code: str, env: dict) -> float:
    """Run code in a fresh interpreter (cwd: a neutral folder); it prints the CPU seconds it measured."""
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tempfile.gettempdir(), capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child failed:\n{code}\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1]) * 1e3


IMPORT = "import numpy, time; t = time.thread_time(); import {lib}; print(time.thread_time() - t)"
FIRST = ("import time, torch, numpy, {lib}; x = torch.zeros(2, 3, 4, 5); t = time.thread_time(); "
         "{lib}.rearrange(x, 'b c h w -> b (c h w)'); print(time.thread_time() - t)")


def cold_rows(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        env = _child_env()
        for lib in ("rearr", "einops"):  # warm the bytecode
            _cpu_ms(FIRST.format(lib=lib), env)
        figures: dict[str, dict[str, list[float]]] = {}
        for _ in range(repeats):
            for row, code in (("import (numpy loaded)", IMPORT), ("first call, torch loaded", FIRST)):
                for lib in ("rearr", "einops"):
                    figures.setdefault(row, {}).setdefault(lib, []).append(_cpu_ms(code.format(lib=lib), env))
            cold = _child_env(tempfile.mkdtemp(dir=scratch))
            figures.setdefault("first call, no bytecode", {}).setdefault("rearr", []).append(
                _cpu_ms(FIRST.format(lib="rearr"), cold))
        bounds = {"import (numpy loaded)": "rearr <= 1.2x einops", "first call, torch loaded": "rearr <= 10 ms",
                  "first call, no bytecode": "information"}
        for row, libs in figures.items():
            med = {lib: statistics.median(v) for lib, v in libs.items()}
            ein = f"{med['einops']:8.2f}ms" if "einops" in med else f"{'-':>10}"
            ratio = f"  rearr/einops {med['rearr'] / med['einops']:5.2f}" if "einops" in med else ""
            print(f"{row:58} {med['rearr']:8.2f}ms {ein}{ratio}  [{bounds[row]}]", flush=True)


def new_pattern_row(repeats: int) -> None:
    """The first call of patterns never seen before, in this warm process (axis names made unique)."""
    x = np.zeros((2, 3, 4, 5))
    times: dict[str, list[float]] = {"rearr": [], "einops": []}
    for i in range(max(repeats, 5) * 4):
        pattern = f"b c{i} h w -> b (c{i} h w)"
        for lib, fn in (("rearr", rearr.rearrange), ("einops", einops.rearrange))[:: 1 if i % 2 else -1]:
            t = _harness.CLOCK[0]()
            fn(x, pattern)
            times[lib].append(_harness.CLOCK[0]() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'first call of a new pattern, warm process':58} {fmt(med['rearr'])} {fmt(med['einops'])}"
          f"  rearr/einops {med['rearr'] / med['einops']:5.2f}  [rearr < 1 ms]", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds per per-call row")
    parser.add_argument("--cold-repeats", type=int, default=9, help="fresh processes per cold row and library")
    parser.add_argument("--target-ms", type=float, default=10.0, help="length of one variant's loop per round")
    parser.add_argument("--small", action="store_true", help="large cases 16x smaller (the CI smoke test)")
    parser.add_argument("--only", metavar="TEXT", help="only the per-call rows whose name contains TEXT "
                        "(e.g. tiny); no cold rows")
    _harness.add_options(parser)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} thread), "
          f"numpy {np.__version__}, einops {einops.__version__}, {platform.machine()}, {_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    print(f"{'row':58} {'rearr':>10} {'einops':>10} {'hand':>10} {'floor':>10}")
    rows = cases(args.small)
    if args.only is not None:
        run_rows([r for r in rows if args.only in r[0]], args.rounds, args.target_ms / 1000)
        return 0
    run_rows(rows, args.rounds, args.target_ms / 1000)
    new_pattern_row(args.cold_repeats)
    cold_rows(args.cold_repeats)
    print(f"load average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
