"""bench_training.py's torch section: scatter reductions and message passing, forward + backward.

Every scatter reduction (sum, mean, max, min, prod, set) of `scatter(x, "e c -> v[dst: e] c", r, dst=d, v=V)`
and message passing `scatter(h, "v[src: e] c -> v[dst: e] c", r, src=s, dst=d)` (sum, mean, max),
C = 64 float32, V = E / 10 (set: V = E, dst a permutation), torch on one thread, E = 1e5 and 1e6
(--small: E = 500). A call is the forward and the backward: torch.autograd.grad of the output
with a fixed random output gradient, to the source. Each rearr row runs against every hand-written
variant, interleaved (benchmarks/_harness.py), medians; every variant's values (on the places that
receive something) and gradients are checked against rearr's first.

Peak memory: one child process per E measures every variant in turn (_harness.touched: the pages
one forward + backward touched at its peak, its gradient included), with malloc returning freed
blocks to the kernel.

Goals: rearr <= 1.1x the fastest hand-written variant in time, and its peak <= 1.1x the smallest
hand-written peak (+ 1 MiB of page noise), at each E.

    python benchmarks/_training_torch.py [--small] [--rounds N] [--clock cpu|wall] [--case NAME ...] [--sizes E ...]

``--case`` and ``--sizes`` run some rows alone (e.g. ``--case "scatter prod" --sizes 1e6 --rounds 9``):
a row that a whole run, on a shared machine, read as missed is rerun so.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness  # noqa: E402

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

import torch  # noqa: E402

import rearr  # noqa: E402

pyg_scatter = None  # torch_geometric.utils.scatter, set by use_pyg() where it imports (pure Python)


def use_pyg() -> None:
    """Compare with torch_geometric's scatter where it imports (not under --small: its import takes seconds)."""
    global pyg_scatter
    try:
        from torch_geometric.utils import scatter
    except ImportError:
        return
    pyg_scatter = scatter

C = 64
SIZES = {False: (100_000, 1_000_000), True: (500,)}  # by --small
SLACK = 1.1
ROWS = "e c -> v[dst: e] c"
PASSING = "v[src: e] c -> v[dst: e] c"
REARR = "rearr"

Variant = Callable[[], torch.Tensor]


def _inputs(E: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    V = E // 10
    return {
        "E": E, "V": V,
        "x": torch.randn(E, C, generator=g).requires_grad_(),
        "h": torch.randn(V, C, generator=g).requires_grad_(),
        "src": torch.randint(0, V, (E,), generator=g),
        "dst": torch.randint(0, V, (E,), generator=g),
        "perm": torch.randperm(E, generator=g),
        "go": torch.randn(V, C, generator=g),
        "go_set": torch.randn(E, C, generator=g),
    }


def _hit(dst: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.zeros(rows, dtype=torch.bool).index_fill_(0, dst, True).unsqueeze(1)


def _hand(reduction: str, dst: torch.Tensor, rows: int) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """The hand-written scatters of messages m (E, C) onto `rows` rows at dst, each m -> out."""
    E = dst.shape[0]
    full = lambda m: dst.unsqueeze(1).expand(m.shape)  # noqa: E731
    out: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
    if reduction == "sum":
        out["index_add_"] = lambda m: m.new_zeros(rows, C).index_add_(0, dst, m)
        out["scatter_add_, index expanded"] = lambda m: m.new_zeros(rows, C).scatter_add_(0, full(m), m)
    elif reduction == "mean":
        out["index_add_ / bincount"] = lambda m: m.new_zeros(rows, C).index_add_(0, dst, m) / torch.bincount(
            dst, minlength=rows).clamp_(min=1).unsqueeze(1)
        out["index_add_ / index_add_ of ones"] = lambda m: m.new_zeros(rows, C).index_add_(0, dst, m) / m.new_zeros(
            rows).index_add_(0, dst, m.new_ones(()).expand(E)).clamp_(min=1).unsqueeze(1)
        out["scatter_reduce mean, include_self=False"] = lambda m: m.new_zeros(rows, C).scatter_reduce_(
            0, full(m), m, "mean", include_self=False)
    elif reduction in ("max", "min"):
        native, start = ("amax", float("-inf")) if reduction == "max" else ("amin", float("inf"))
        out[f"scatter_reduce {native}, include_self=False"] = lambda m: m.new_zeros(rows, C).scatter_reduce_(
            0, full(m), m, native, include_self=False)
        out[f"scatter_reduce {native} onto {start}, include_self=True, empty rows 0"] = \
            lambda m: m.new_full((rows, C), start).scatter_reduce_(0, full(m), m, native, include_self=True) \
            .masked_fill(~_hit(dst, rows), 0)
    elif reduction == "prod":
        out["scatter_reduce prod, include_self=False"] = lambda m: m.new_zeros(rows, C).scatter_reduce_(
            0, full(m), m, "prod", include_self=False)
        out["scatter_reduce prod onto ones, include_self=True, empty rows 0"] = \
            lambda m: m.new_ones(rows, C).scatter_reduce_(0, full(m), m, "prod", include_self=True) \
            .masked_fill(~_hit(dst, rows), 0)
    elif reduction == "set":
        out["index_copy_"] = lambda m: m.new_zeros(rows, C).index_copy_(0, dst, m)
        out["scatter_, index expanded"] = lambda m: m.new_zeros(rows, C).scatter_(0, full(m), m)
        out["out[dst] = m (index_put_)"] = lambda m: m.new_zeros(rows, C).index_put_((dst,), m)
    if pyg_scatter is not None and reduction != "set":
        name = {"prod": "mul"}.get(reduction, reduction)
        out[f"torch_geometric.utils.scatter '{name}'"] = lambda m: pyg_scatter(m, dst, 0, rows, name)
    return out


def cases(E: int) -> dict[str, dict[str, Variant]]:
    """Each row's variants (rearr first), every one a forward + backward that returns the source's gradient."""
    d = _inputs(E)
    V, x, h, src, dst = d["V"], d["x"], d["h"], d["src"], d["dst"]

    def fb(forward: Callable[[], torch.Tensor], wrt: torch.Tensor, go: torch.Tensor) -> Variant:
        return lambda: torch.autograd.grad(forward(), wrt, go)[0]

    out: dict[str, dict[str, Variant]] = {}
    for r in ("sum", "mean", "max", "min", "prod", "set"):
        rows, idx, go = (E, d["perm"], d["go_set"]) if r == "set" else (V, dst, d["go"])
        row = {REARR: fb(lambda r=r, rows=rows, idx=idx: rearr.scatter(x, ROWS, r, dst=idx, v=rows), x, go)}
        for name, f in _hand(r, idx, rows).items():
            row[name] = fb(lambda f=f: f(x), x, go)
        out[f"scatter {r}"] = row
    for r in ("sum", "mean", "max"):
        row = {REARR: fb(lambda r=r: rearr.scatter(h, PASSING, r, src=src, dst=dst), h, d["go"])}
        for name, f in _hand(r, dst, V).items():
            row[f"index_select, {name}"] = fb(lambda f=f: f(h.index_select(0, src)), h, d["go"])
            if r != "max":
                row[f"x[src], {name}"] = fb(lambda f=f: f(h[src]), h, d["go"])
        out[f"message passing {r}"] = row
    return out


def _forwards(E: int) -> dict[str, dict[str, torch.Tensor]]:
    """Each variant's forward result, for the value check (no gradient)."""
    d = _inputs(E)
    V, x, h, src, dst = d["V"], d["x"].detach(), d["h"].detach(), d["src"], d["dst"]
    out: dict[str, dict[str, torch.Tensor]] = {}
    for r in ("sum", "mean", "max", "min", "prod", "set"):
        rows, idx = (E, d["perm"]) if r == "set" else (V, dst)
        res = {REARR: rearr.scatter(x, ROWS, r, dst=idx, v=rows)}
        res.update({k: f(x) for k, f in _hand(r, idx, rows).items()})
        out[f"scatter {r}"] = res
    for r in ("sum", "mean", "max"):
        m = h.index_select(0, src)
        res = {REARR: rearr.scatter(h, PASSING, r, src=src, dst=dst)}
        res.update({f"index_select, {k}": f(m) for k, f in _hand(r, dst, V).items()})
        out[f"message passing {r}"] = res
    return out


def check(E: int, rows: dict[str, dict[str, Variant]]) -> None:
    """Every variant equals rearr: values on the places that receive something, and the gradient."""
    d = _inputs(E)
    for case, results in _forwards(E).items():
        hit = _hit(d["perm"] if case == "scatter set" else d["dst"], E if case == "scatter set" else d["V"])
        want = results[REARR]
        for name, got in results.items():
            label = f"{case} {name}"
            torch.testing.assert_close(got * hit, want * hit, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, label=label: f"{label}: {m}")
    for case, variants in rows.items():
        want = variants[REARR]()
        for name, f in variants.items():
            label = f"{case} {name}, gradient"
            torch.testing.assert_close(f(), want, rtol=1e-4, atol=1e-5, msg=lambda m, label=label: f"{label}: {m}")


def mem_child(E: int, pyg: bool, small: bool = False) -> None:
    """Print every variant's peak as JSON; small (a smoke run): the first case's only, which exercises
    the probe without its cost (each probe resets the kernel's high-water mark and collects garbage)."""
    if pyg:
        use_pyg()
    rows = cases(E)
    peaks = {case: {name: _harness.touched(f)[0] for name, f in variants.items()}
             for case, variants in list(rows.items())[:1 if small else None]}
    print(json.dumps(peaks))


def _fmt(s: float) -> str:
    return f"{s * 1e3:9.2f} ms" if s >= 1e-3 else f"{s * 1e6:9.2f} us"


def run(args: argparse.Namespace) -> list[str]:
    """Print the section's rows; return the goals missed."""
    torch.set_num_threads(1)
    _harness.set_clock(args.clock)
    if not args.small:
        use_pyg()
    pyg = "yes" if pyg_scatter is not None else "not under --small" if args.small else "not installed"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, C={C} float32, V=E/10; torch_geometric: {pyg}")
    missed: list[str] = []
    summary = getattr(args, "summary", [])  # bench_training's table of every section's rows
    only = set(getattr(args, "case", None) or ())
    for E in getattr(args, "sizes", None) or SIZES[args.small]:
        rows = {k: v for k, v in cases(E).items() if not only or k in only}
        check(E, rows)
        peaks = _harness.peak_in_child(__file__, [E, pyg_scatter is not None, args.small])
        target = 0.002 if args.small else 0.05
        for case, variants in rows.items():
            med = _harness.interleaved(variants, args.rounds, target)
            hand = {k: v for k, v in med.items() if k != REARR}
            best = min(hand, key=hand.get)
            mem = peaks.get(case)  # None: not measured (--small measures the first case only)
            least = min(v for k, v in mem.items() if k != REARR) if mem else 0
            print(f"\n{case}, E={E:.0e}, forward + backward, median of {args.rounds} rounds "
                  f"(fastest hand-written: {best})")
            print(f"  {'variant':66} {'time':>12} {'/fastest':>9} {'peak MiB':>9} {'/least':>7}")
            for k, t in med.items():  # a peak of 0: the call fit in pages already touched (tiny E)
                share = f"{mem[k] / least:7.2f}" if least else f"{'-':>7}"
                peak = f"{mem[k] / 2**20:9.1f}" if mem else f"{'-':>9}"
                print(f"  {k:66} {_fmt(t)} {t / med[best]:9.2f} {peak} {share}")
            ratio = med[REARR] / med[best]
            mratio = mem[REARR] / least if least else None
            heavy = bool(mem) and mem[REARR] > least * SLACK + 2**20
            summary.append(("torch", case, f"E={E:.0e}", med[REARR], best, med[best], mratio, SLACK,
                            ratio <= SLACK and not heavy))
            if ratio > SLACK:
                missed.append(f"{case} E={E:.0e}: time {ratio:.2f}x {best}")
            if heavy:
                missed.append(f"{case} E={E:.0e}: peak memory {mem[REARR] / max(least, 1):.2f}x the least hand-written")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="E = 500 and short loops: a smoke run")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--case", action="append", help="run this row only (repeatable), e.g. 'scatter prod'")
    parser.add_argument("--sizes", type=lambda v: int(float(v)), nargs="+", help="E values, e.g. 1e6")
    parser.add_argument("--mem-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mem_child:
        torch.set_num_threads(1)
        mem_child(*json.loads(args.mem_child))
        return 0
    print(f"python {platform.python_version()}; {_harness.machine_state()}")
    print(_harness.tree_state())
    print(_harness.pin_malloc("warm"))
    missed = run(args)
    for m in missed:
        print(f"  [MISSED] {m}")
    return 1 if missed and not args.small else 0


if __name__ == "__main__":
    raise SystemExit(main())
