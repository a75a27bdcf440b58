"""The bodies that tests/backends/test_dtensor.py runs on 2 gloo ranks (tests/_gloo.py): each is a
module-level function ``body(rank, world, ...)`` that a spawned process imports by name, runs many
cases, and returns what the test asserts on (plain Python values, the same on every rank where the
rule says so). Inputs are made alike on every rank (one seed), outside the counted blocks.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import torch

REDUCTIONS = ("sum", "mean", "max", "min", "prod")


def _comms(mode: Any) -> dict[str, int]:
    """CommDebugMode's counts by the collective's short name (all_reduce, all_gather_into_tensor ...)."""
    return {str(k).rsplit(".", 1)[-1]: v for k, v in mode.get_comm_counts().items()}


def _counted(fn: Any) -> tuple[Any, dict[str, int]]:
    from torch.distributed.tensor.debug import CommDebugMode

    with CommDebugMode() as mode:
        out = fn()
    return out, _comms(mode)


def _placements(t: Any) -> tuple[str, ...]:
    return tuple(str(p) for p in t.placements)


# --- every op and reduction against the unsharded call and the hand-written ops ------------------------


def _cases() -> list[tuple]:
    """(name, op, pattern, reductions, x shape, {index: (shape, high, unique)}, lengths, hand): hand holds,
    by reduction, the torch code that explain prints for the case, written out of place (an in-place
    write into new_zeros corrupts a DTensor), and a mean as its sums over its counts (explain's code
    for a source that requires grad: scatter_reduce has no DTensor strategy)."""
    def mean(zeros, add, ones):
        return add(zeros()) / add(zeros(), ones).clamp(min=1)

    return [
        ("gather along", "rearrange", "b n[idx] -> b k", (None,), (8, 6), {"idx": ((8, 3), 6, False)}, {},
         {None: lambda x, idx: torch.gather(x, 1, idx)}),
        ("gather rows", "rearrange", "n[idx: k] c -> k c", (None,), (8, 6), {"idx": ((10,), 8, False)}, {},
         {None: lambda x, idx: torch.gather(x, 0, idx.reshape(10, 1).expand(10, 6))}),
        ("gather rows, batched", "rearrange", "b n[idx: b k] c -> b k c", (None,), (8, 64, 16),
         {"idx": ((8, 4), 64, False)}, {},
         {None: lambda x, idx: torch.gather(x, 1, idx.reshape(8, 4, 1).expand(8, 4, 16))}),
        ("gather rows + arange", "rearrange", "b n[idx: k] c -> b k c", (None,), (8, 64, 16),
         {"idx": ((4,), 64, False)}, {},
         {None: lambda x, idx: torch.gather(x, 1, idx.reshape(1, 4, 1).expand(8, 4, 16))}),
        ("gather advanced", "rearrange", "n[i: k] c[j: k] -> k", (None,), (8, 6),
         {"i": ((10,), 8, False), "j": ((10,), 6, False)}, {},
         {None: lambda x, i, j: x.view(48, 1).index_select(0, i * 6 + j).view(10)}),
        ("gather big rows", "rearrange", "n[idx: k] c -> k c", (None,), (64, 128), {"idx": ((300,), 64, False)}, {},
         {None: lambda x, idx: x.index_select(0, idx)}),
        ("scatter along", "scatter", "r c -> r m[idx: c]", REDUCTIONS, (8, 6), {"idx": ((6,), 4, False)}, {"m": 4},
         {"sum": lambda x, idx: x.new_zeros(8, 4).scatter_add(1, idx.reshape(1, 6).expand(8, 6), x),
          "mean": lambda x, idx: mean(lambda: x.new_zeros(8, 4), lambda z, v=x: z.scatter_add(
              1, idx.reshape(1, 6).expand(8, 6), v), x.new_ones(()).expand(8, 6))}),
        ("scatter along, 2-d index", "scatter", "b k -> b n[idx]", REDUCTIONS, (8, 6), {"idx": ((8, 6), 5, False)},
         {"n": 5}, {"sum": lambda x, idx: x.new_zeros(8, 5).scatter_add(1, idx, x)}),
        ("scatter small rows", "scatter", "e c -> v[dst: e] c", REDUCTIONS, (8, 6), {"dst": ((8,), 5, False)},
         {"v": 5}, {"sum": lambda x, dst: x.new_zeros(5, 6).scatter_add(0, dst.reshape(8, 1).expand(8, 6), x)}),
        ("scatter rows", "scatter", "e c -> v[dst: e] c", REDUCTIONS, (256, 128), {"dst": ((256,), 5, False)},
         {"v": 5}, {"sum": lambda x, dst: x.new_zeros(5, 128).index_add(0, dst, x),
                    "mean": lambda x, dst: x.new_zeros(5, 128).index_add(0, dst, x) / x.new_zeros(5).index_add(
                        0, dst, x.new_ones(()).expand(256)).clamp(min=1)[:, None]}),
        ("message passing", "scatter", "v[src: e] c -> v[dst: e] c", REDUCTIONS, (8, 6),
         {"src": ((10,), 8, False), "dst": ((10,), 8, False)}, {},
         {"sum": lambda x, src, dst: _then(torch.gather(x, 0, src.reshape(10, 1).expand(10, 6)), lambda m: m.new_zeros(
             8, 6).scatter_add(0, dst.reshape(10, 1).expand(10, 6), m))}),
        ("message passing, rows", "scatter", "v[src: e] c -> v[dst: e] c", ("sum", "mean", "max"), (64, 128),
         {"src": ((300,), 64, False), "dst": ((300,), 64, False)}, {},
         {"sum": lambda x, src, dst: _then(x.index_select(0, src),
                                           lambda m: m.new_zeros(64, 128).index_add(0, dst, m))}),
        # 'set': the duplicate check first gathers the index along the axis it writes (_whole), where
        # torch's scatter would gather it too, and the scatter is given the gathered index
        ("scatter along (set)", "scatter", "r c -> r m[idx: c]", ("set",), (8, 6), {"idx": ((6,), 8, True)},
         {"m": 8}, {"set": lambda x, idx: x.new_zeros(8, 8).scatter(1, _whole(idx.reshape(1, 6).expand(8, 6), 1), x)}),
        ("scatter along, 2-d index (set)", "scatter", "b k -> b n[idx]", ("set",), (8, 6),
         {"idx": ((8, 6), 7, True)}, {"n": 7}, {"set": lambda x, idx: x.new_zeros(8, 7).scatter(1, _whole(idx, 1), x)}),
        ("scatter small rows (set)", "scatter", "e c -> v[dst: e] c", ("set",), (8, 6), {"dst": ((8,), 10, True)},
         {"v": 10},
         {"set": lambda x, dst: x.new_zeros(10, 6).scatter(0, _whole(dst.reshape(8, 1).expand(8, 6), 0), x)}),
        ("scatter rows (set)", "scatter", "e c -> v[dst: e] c", ("set",), (256, 128), {"dst": ((256,), 300, True)},
         {"v": 300}, {"set": lambda x, dst: x.new_zeros(300, 128).index_copy(0, _whole(dst, 0), x)}),
    ]


def _whole(t: Any, dim: int) -> Any:
    """t gathered along dim (where it is sharded there), its other placements kept."""
    from torch.distributed.tensor import Replicate

    return t.redistribute(t.device_mesh, [Replicate() if not p.is_replicate() and p.dim % t.ndim == dim else p
                                          for p in t.placements])


def _then(m: Any, f: Any) -> Any:  # explain's `x = ...; x = f(x)`: the next call made on the result
    return f(m)


def _index(shape: tuple, high: int, unique: bool, generator: Any) -> torch.Tensor:
    if not unique:
        return torch.randint(0, high, shape, generator=generator)
    if len(shape) == 1:
        return torch.randperm(high, generator=generator)[:shape[0]]
    return torch.stack([torch.randperm(high, generator=generator)[:shape[1]] for _ in range(shape[0])])


def cases(rank: int, world: int, grad: bool) -> list[dict]:
    """Each case on DTensors (x: Shard of each dim, Replicate, Partial; each index Shard(0) or Replicate, a
    2-d one Shard(1) too): the result against the unsharded call, the placement against the hand-written
    ops', the collectives of the checked call, the unchecked one and the hand-written one; with grad,
    x's gradient too. The inputs are compared after the calls (none is modified)."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor, init_device_mesh

    import rearr

    mesh = init_device_mesh("cpu", (world,))
    rows = []
    for name, op, pattern, reductions, shape, specs, lengths, hands in _cases():
        generator = torch.Generator().manual_seed(0)
        X = torch.randn(*shape, dtype=torch.float64, generator=generator)
        for reduction in reductions:
            plain = {k: _index(s, high, unique, generator) for k, (s, high, unique) in specs.items()}
            for px in [f"S{d}" for d in range(len(shape))] + ["R", "P"]:
                if grad and px == "P":
                    continue
                two_d = any(len(v.shape) == 2 for v in plain.values())
                for pi in ("S0", "R", "S1") if two_d else ("S0", "R"):
                    label = f"{name} {reduction or ''} x={px} index={pi}".replace("  ", " ")

                    def place(t, p):
                        if p == "P":  # a Partial whose sum is t
                            return DTensor.from_local(t / world, mesh, [Partial()], run_check=False)
                        return distribute_tensor(t, mesh, [Replicate()] if p == "R" else [Shard(int(p[1]))])

                    x = place(X, px)
                    if grad:
                        x = x.detach().requires_grad_(True)
                    idx = {k: place(v, pi if v.ndim > int(pi[1:] or 0) else "R") for k, v in plain.items()}
                    before = [t.full_tensor() for t in (x, *idx.values())]

                    def call(checks, x=x, idx=idx, reduction=reduction, pattern=pattern, lengths=lengths, op=op):
                        if op == "rearrange":
                            return rearr.rearrange(x, pattern, check_bounds=checks, **idx, **lengths)
                        return rearr.scatter(x, pattern, reduction, check_bounds=checks, **idx, **lengths)

                    try:
                        out, checked = _counted(partial(call, True))
                        _, unchecked = _counted(partial(call, False))
                        want = rearr.rearrange(X, pattern, **plain, **lengths) if op == "rearrange" else \
                            rearr.scatter(X, pattern, reduction, **plain, **lengths)
                        row = {"case": label, "equal": bool(torch.allclose(out.full_tensor(), want)),
                               "placement": _placements(out), "checked": checked, "unchecked": unchecked,
                               "sharded index": pi != "R"}
                        hand = hands.get(reduction)
                        if hand is not None:
                            made, row["hand"] = _counted(partial(hand, x, **idx))
                            row["hand placement"] = _placements(made)
                        if grad:
                            (out.square() if reduction == "prod" else out).sum().backward()
                            Xg = X.clone().requires_grad_(True)
                            ref = rearr.rearrange(Xg, pattern, **plain, **lengths) if op == "rearrange" else \
                                rearr.scatter(Xg, pattern, reduction, **plain, **lengths)
                            (ref.square() if reduction == "prod" else ref).sum().backward()
                            row["grad equal"] = bool(torch.allclose(x.grad.full_tensor(), Xg.grad))
                        row["inputs kept"] = all(torch.equal(b, t.full_tensor()) for b, t in
                                                 zip(before, (x.detach(), *idx.values())))
                    except Exception as e:  # noqa: BLE001 - the test names the case and the error
                        row = {"case": label, "error": f"{type(e).__name__}: {str(e)[:300]}"}
                    rows.append(row)
    return rows if grad else rows + _more(mesh, world)


def _more(mesh: Any, world: int) -> list[dict]:
    """into=, fill=, the ops without an index, a list input, einsum, and a 2-D mesh."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh

    import rearr

    generator = torch.Generator().manual_seed(1)
    X = torch.randn(8, 6, dtype=torch.float64, generator=generator)
    Y = torch.randn(6, 4, dtype=torch.float64, generator=generator)
    dst = torch.randint(0, 5, (8,), generator=generator)
    into = torch.randn(5, 6, dtype=torch.float64, generator=generator)
    rows = []

    def check(label, fn, want):
        try:
            out = fn()
            rows.append({"case": label, "equal": bool(torch.allclose(out.full_tensor(), want)),
                         "placement": _placements(out)})
        except Exception as e:  # noqa: BLE001
            rows.append({"case": label, "error": f"{type(e).__name__}: {str(e)[:300]}"})

    S0, S1, R = [Shard(0)], [Shard(1)], [Replicate()]
    rows_pattern = "e c -> v[dst: e] c"
    for px in (S0, S1, R):
        x, d = distribute_tensor(X, mesh, px), distribute_tensor(dst, mesh, S0)
        for r in (*REDUCTIONS, "set"):
            dd, plain_d = (distribute_tensor(torch.arange(8) % 8, mesh, S0), torch.arange(8) % 8) if r == "set" \
                else (d, dst)
            v = 8 if r == "set" else 5
            start = torch.cat([into] * 2)[:v]
            check(f"into= {r} x={px[0]}", partial(rearr.scatter, x, rows_pattern, r, dst=dd, v=v,
                                                  into=distribute_tensor(start, mesh, S1)),
                  rearr.scatter(X, rows_pattern, r, dst=plain_d, v=v, into=start))
            check(f"fill=-1 {r} x={px[0]}", partial(rearr.scatter, x, rows_pattern, r, dst=dd, v=v + 2, fill=-1),
                  rearr.scatter(X, rows_pattern, r, dst=plain_d, v=v + 2, fill=-1))
        check(f"rearrange x={px[0]}", partial(rearr.rearrange, x, "a (b c) -> (a b) c", c=2),
              rearr.rearrange(X, "a (b c) -> (a b) c", c=2))
        for r in ("sum", "mean", "max", "min", "prod"):
            check(f"reduce {r} x={px[0]}", partial(rearr.reduce, x, "a b -> b", r), rearr.reduce(X, "a b -> b", r))
        check(f"repeat x={px[0]}", partial(rearr.repeat, x, "a b -> a b k", k=3), rearr.repeat(X, "a b -> a b k", k=3))
        check(f"einsum x={px[0]}", partial(rearr.einsum, x, distribute_tensor(Y, mesh, R), "a b, b c -> a c"),
              rearr.einsum(X, Y, "a b, b c -> a c"))
        check(f"list input x={px[0]}", partial(rearr.rearrange, [x, x], "l a b -> a (l b)"),
              rearr.rearrange([X, X], "l a b -> a (l b)"))
        check(f"float16 mean x={px[0]}", partial(rearr.scatter, x.half(), "e c -> v[dst: e] c", "mean", dst=d, v=5),
              rearr.scatter(X.half(), "e c -> v[dst: e] c", "mean", dst=dst, v=5))
    m2 = init_device_mesh("cpu", (1, world), mesh_dim_names=("dp", "tp"))
    idx = torch.randint(0, 6, (8, 3), generator=generator)
    for placements in ([Replicate(), Shard(0)], [Shard(0), Shard(0)], [Shard(0), Shard(1)]):
        x2 = distribute_tensor(X, m2, [Replicate(), Shard(1)])
        i2 = distribute_tensor(idx, m2, placements)
        label = f"2-D mesh gather, index {[str(p) for p in placements]}"
        try:
            out, comms = _counted(partial(rearr.rearrange, x2, "b n[idx] -> b k", idx=i2))
            _, unchecked = _counted(partial(rearr.rearrange, x2, "b n[idx] -> b k", idx=i2, check_bounds=False))
            rows.append({"case": label, "equal": bool(torch.equal(out.full_tensor(), torch.gather(X, 1, idx))),
                         "placement": _placements(out), "checked": comms, "unchecked": unchecked,
                         "sharded index": True})
        except Exception as e:  # noqa: BLE001
            rows.append({"case": label, "error": f"{type(e).__name__}: {str(e)[:300]}"})
    return rows


def everything(rank: int, world: int, pages: list[tuple[str, str]]) -> dict:
    """The case matrix without and with gradients, the bad inputs, then the docs' examples for ranks
    (``pages``: where each is and its code): one spawn for the four."""
    return {"cases": cases(rank, world, False), "grad": cases(rank, world, True), "bad": bad_inputs(rank, world),
            "pages": [page_example(where, code) for where, code in pages]}


def page_example(where: str, code: str) -> str:
    """What a docs block marked `<!-- ranks: N -->` prints on this rank, run alone as a script (or the
    traceback it ended with)."""
    import contextlib
    import io
    import traceback

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, where, "exec"), {"__name__": "__main__"})
    except Exception:  # noqa: BLE001 - the test shows it
        return out.getvalue() + traceback.format_exc()
    return out.getvalue()


# --- bad input: the same RearrError on every rank, and no rank left waiting --------------------------------


def bad_inputs(rank: int, world: int) -> list[tuple]:
    """Each scenario's outcome on this rank: (scenario, what it raised or returned, its collectives), then
    whether the process group still works (an all-reduce right after)."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor, init_device_mesh
    from torch.distributed.tensor.experimental import implicit_replication

    import rearr

    mesh = init_device_mesh("cpu", (world,))
    other = init_device_mesh("cpu", (1, world), mesh_dim_names=("dp", "tp"))
    X = torch.arange(48.0).reshape(8, 6)
    gather = "b n[idx] -> b k"

    def index(bad=()):
        idx = torch.zeros(8, 3, dtype=torch.long)
        for at, v in dict(bad).items():
            idx[at] = v
        return idx

    S0, S1, R = [Shard(0)], [Shard(1)], [Replicate()]
    x0, x1, xr = distribute_tensor(X, mesh, S0), distribute_tensor(X, mesh, S1), distribute_tensor(X, mesh, R)
    d256 = torch.zeros(256, dtype=torch.long)
    d256[200] = 5
    x256 = distribute_tensor(torch.randn(256, 128), mesh, S1)
    src, dst = torch.randint(0, 8, (10,)), torch.randint(0, 8, (10,))
    src[7] = 8
    dup = distribute_tensor(torch.tensor([0, 1, 2, 3, 4, 5, 6, 0]), mesh, S0)  # the 0 of rank 0 and of rank 1
    into_other = distribute_tensor(torch.zeros(5, 6), other, [Replicate(), Shard(1)])
    i0 = {k: distribute_tensor(index(bad), mesh, S0) for k, bad in (
        ("rank 1", {(6, 2): 9, (7, 0): -10}), ("one", {(6, 2): 9}), ("min", {(7, 2): -2**63}), ("good", {}))}
    x6, scatter_rows = distribute_tensor(torch.arange(6.0), mesh, R), "e c -> v[dst: e] c"
    zeros8 = distribute_tensor(torch.zeros(8, dtype=torch.long), mesh, R)
    partial_index = DTensor.from_local(index({(2, 0): 2}) if rank == 0 else index({(2, 0): 3}), mesh, [Partial()])
    scenarios = {
        "bad value on rank 1's shard": partial(rearr.rearrange, x0, gather, idx=i0["rank 1"]),
        "bad values on both shards": partial(rearr.rearrange, xr, gather,
                                             idx=distribute_tensor(index({(5, 2): 7, (0, 1): 6}), mesh, S1)),
        "bad value, Replicate index": partial(rearr.rearrange, x0, gather,
                                              idx=distribute_tensor(index({(3, 1): 6}), mesh, R)),
        "async, bad value on rank 1": partial(rearr.rearrange, x0, gather, idx=i0["one"], check_bounds="async"),
        "sync, scatter mean rows, bad on rank 1": partial(rearr.scatter, x256, scatter_rows, "mean",
                                                          dst=distribute_tensor(d256, mesh, S0), v=5,
                                                          check_bounds="sync"),
        "value -2**63": partial(rearr.rearrange, x0, gather, idx=i0["min"]),
        "uneven, an empty shard, bad": partial(rearr.rearrange, x6, "n[idx: k] -> k",
                                               idx=distribute_tensor(torch.tensor([6]), mesh, S0)),
        "uneven, good": partial(_listed, rearr.rearrange, x6, "n[idx: k] -> k",
                                idx=distribute_tensor(torch.tensor([5, -1, 2]), mesh, S0)),
        "message passing, bad src": partial(rearr.scatter, x1, "v[src: e] c -> v[dst: e] c", "sum",
                                            src=distribute_tensor(src, mesh, S0), dst=distribute_tensor(dst, mesh, S0)),
        "duplicates across ranks under 'set'": partial(rearr.scatter, xr, scatter_rows, "set", dst=dup, v=8),
        "duplicates across ranks under 'set', check_bounds=False": partial(
            rearr.scatter, xr, scatter_rows, "set", dst=dup, v=8, check_bounds=False),
        "plain index, DTensor input": partial(rearr.rearrange, x0, gather, idx=index()),
        "list index, DTensor input": partial(rearr.rearrange, x0, "n[idx: k] c -> k c", idx=[0, 1]),
        "DTensor index, plain input": partial(rearr.rearrange, X, gather, idx=i0["good"]),
        "meshes differ": partial(rearr.rearrange, distribute_tensor(X, other, [R[0], S0[0]]), gather, idx=i0["good"]),
        "into= on another mesh": partial(rearr.scatter, x1, scatter_rows, "sum", dst=zeros8, v=5, into=into_other),
        "into= plain, source DTensor": partial(rearr.scatter, x1, scatter_rows, "sum", dst=zeros8, v=5,
                                               into=torch.zeros(5, 6)),
        "plain index under implicit_replication": partial(_implicit, implicit_replication, x0, gather,
                                                          index({(1, 1): 5})),
        "check_bounds=False, bad value on rank 1": partial(_local_sum, rearr.rearrange, x0, gather, idx=i0["one"],
                                                           check_bounds=False),
        "a Partial index": partial(_listed, rearr.rearrange, xr, gather, idx=partial_index),
    }
    from torch.distributed.tensor.debug import CommDebugMode

    out = []
    for label, fn in scenarios.items():
        with CommDebugMode() as mode:
            try:
                value = fn()
                outcome = ("returned", value if isinstance(value, int | float | list) else type(value).__name__)
            except Exception as e:  # noqa: BLE001 - what each rank raised is the test's subject
                outcome = ("raised", type(e).__name__, getattr(e, "code", None), str(e).split("\n")[0])
        t = torch.ones(1)
        dist.all_reduce(t)  # no rank left in a collective: the group still works
        out.append((label, outcome, _comms(mode), t.item() == world))
    return out


def _listed(fn: Any, *args: Any, **kwargs: Any) -> list:
    """fn's DTensor result, whole, as a list (the same on every rank)."""
    return fn(*args, **kwargs).full_tensor().tolist()


def _local_sum(fn: Any, *args: Any, **kwargs: Any) -> float:
    """The sum of this rank's shard of fn's result: no collective."""
    return fn(*args, **kwargs).to_local().sum().item()


def _implicit(context: Any, x: Any, pattern: str, idx: torch.Tensor) -> list:
    import rearr

    with context():
        return rearr.rearrange(x, pattern, idx=idx).full_tensor().tolist()


# --- training: FSDP2 and tensor parallel against the unsharded model ------------------------------------------

V, E, C, H = 8, 12, 4, 8


def _model() -> Any:
    """rearr's layers (Rearrange, EinMix), a gather of the senders and a scatter mean at the receivers."""
    from torch import nn

    import rearr
    from rearr.layers import EinMix, Rearrange

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(C, H)
            self.split = Rearrange("v (g c) -> v g c", g=2)
            self.merge = Rearrange("v g c -> v (g c)")
            self.out = nn.Linear(H, C)
            self.mix = EinMix("v c -> v d", weight_shape="c d", bias_shape="d", c=C, d=C)

        def forward(self, x, src, dst):
            h = self.inp(x)  # tensor parallel: a DTensor, Shard(1)
            m = rearr.rearrange(h, "v[src: e] c -> e c", src=src)
            h = h + rearr.scatter(m, "e c -> v[dst: e] c", "mean", dst=dst, v=V)
            h = self.merge(torch.tanh(self.split(h)))
            return self.mix(self.out(h))

    torch.manual_seed(0)
    return Net().double()


def train(rank: int, world: int, setup: str, compiled: bool, steps: int = 4) -> dict:
    """The model trained sharded (FSDP2: fully_shard; tp: colwise then rowwise, DTensor activations, the
    indexes Replicate or Shard(0)) and unsharded side by side, float64, SGD: each step's two losses,
    and whether every weight is equal after the last; compiled: fullgraph (no graph break) and frames."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor, init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(V, C, dtype=torch.float64, generator=generator)
    src, dst = torch.randint(0, V, (E,), generator=generator), torch.randint(0, V, (E,), generator=generator)
    target = torch.randn(V, C, dtype=torch.float64, generator=generator)
    ref = _model()
    model = copy.deepcopy(ref)
    if setup == "fsdp":
        from torch.distributed.fsdp import fully_shard

        fully_shard(model, mesh=mesh)
        s, d = src, dst
    else:
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        parallelize_module(model, mesh, {"inp": ColwiseParallel(use_local_output=False), "out": RowwiseParallel()})
        placement = [Replicate()] if setup == "tp" else [Shard(0)]  # "tp sharded": the indexes too
        s, d = distribute_tensor(src, mesh, placement), distribute_tensor(dst, mesh, placement)
    forward, counter = model, None
    if compiled:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("aot_eager")
        forward = torch.compile(model, backend=counter, fullgraph=True)
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        loss = ((forward(x, s, d) - target) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = ((ref(x, src, dst) - target) ** 2).mean()
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        losses.append(((loss.full_tensor() if isinstance(loss, DTensor) else loss).item(), ref_loss.item()))
    mine = dict(model.named_parameters())
    weights = {k: bool(torch.allclose(mine[k].full_tensor() if isinstance(mine[k], DTensor) else mine[k], v))
               for k, v in ref.named_parameters()}
    out: dict[str, Any] = {"losses": losses, "weights equal": weights}
    if compiled:
        out["frames"] = counter.frame_count
        bad = dst.clone()
        bad[E - 2] = V + 3  # in the last rank's shard
        if setup != "fsdp":
            bad = distribute_tensor(bad, mesh, [Replicate()] if setup == "tp" else [Shard(0)])
        try:
            forward(x, s, bad)
            out["bad index"] = "no error"
        except Exception as e:  # noqa: BLE001
            out["bad index"] = (type(e).__name__, getattr(e, "code", None), str(e).split("\n")[0])
        out["frames after"] = counter.frame_count
    return out


def trainings(rank: int, world: int) -> dict:
    """train() under FSDP2 and tensor parallel, eager, and compiled with the indexes Replicate and Shard(0)."""
    return {f"{setup}{' compiled' if compiled else ''}": train(rank, world, setup, compiled)
            for setup, compiled in (("fsdp", False), ("fsdp", True), ("tp", False), ("tp", True),
                                    ("tp sharded", True))}
