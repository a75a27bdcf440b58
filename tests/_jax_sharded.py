"""rearr's ops on several jax devices, one case after another: the child process of
tests/backends/test_jax_sharded.py (it needs XLA_FLAGS=--xla_force_host_platform_device_count=4 set
before jax is imported, so it runs in a process of its own).

usage: python tests/_jax_sharded.py CONTEXT:OP [CONTEXT:OP ...]

Each case calls the op once with good values and compares the result with rearr's numpy backend on
the same data (per device block in shard_map and pmap, where each device indexes its own block),
then, if the op takes an index, once with a bad value on the last device (out of range, a duplicate
under 'set', an unsigned value beyond int32), timed from the call to the error, whose RA501 line must
be the one jax gives on one device (plus the device, in shard_map and pmap). Programs end with a
collective that reads the op's result: a device left waiting in it would hang. Every call is waited
for (XLA:CPU's forced devices can deadlock with many multi-device calls in flight on a small machine).

It prints "START case" before a case and "CASE {json}" after it.
"""

from __future__ import annotations

import faulthandler
import json
import re
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import rearr

D = jax.device_count()
V, E, C, B, T, K = 8 * D, 4 * D, 2, 2 * D, 4, 3  # rows, index entries, columns; batch, axis, entries along
REPLICATED = {"w"}  # inputs every device holds whole
FLOATS = {"x", "src", "x3", "src3", "w", "y", "x0"}


class Op:
    """fn(a): the rearr call on a dict of arrays; bad: (input, how) for the bad call; grad_of: the float
    input that grad differentiates."""

    def __init__(self, fn, inputs, bad=None, grad_of=None):
        self.fn, self.inputs, self.bad, self.grad_of = fn, inputs, bad, grad_of


def _scatter(reduction, **kw):
    return lambda a: rearr.scatter(a["src"], "e c -> v[ids: e] c", reduction, ids=a["ids"], v=a["x"].shape[0], **kw)


OPS = {
    "rearrange": Op(lambda a: rearr.rearrange(a["x"], "(v two) c -> v (two c)", two=2), ["x"]),
    "reduce": Op(lambda a: rearr.reduce(a["x"], "v c -> v", "max"), ["x"]),
    "repeat": Op(lambda a: rearr.repeat(a["x"], "v c -> v c r", r=3), ["x"]),
    "einsum": Op(lambda a: rearr.einsum(a["x"], a["w"], "v c, c d -> v d"), ["x", "w"]),
    "pack": Op(lambda a: (lambda p: (p[0], *rearr.unpack(p[0], p[1], "v *")))(rearr.pack([a["x"], a["y"]], "v *")),
               ["x", "y"]),
    "gather": Op(lambda a: rearr.rearrange(a["x"], "v[ids: e] c -> e c", ids=a["ids"]), ["x", "ids"],
                 ("ids", "out"), "x"),
    "gather_along": Op(lambda a: rearr.rearrange(a["x3"], "b t[idx: b k] c -> b k c", idx=a["idx"]), ["x3", "idx"],
                       ("idx", "out")),
    "advanced": Op(lambda a: rearr.rearrange(a["x"], "v[ids: e] c[cols: e] -> e", ids=a["ids"], cols=a["cols"]),
                   ["x", "ids", "cols"], ("cols", "out")),
    **{f"scatter_{r}": Op(_scatter(r), ["x", "src", "ids"], ("ids", "out"), "src" if r == "sum" else None)
       for r in ("sum", "mean", "max", "min", "prod")},
    "scatter_set": Op(lambda a: rearr.scatter(a["src"], "e c -> v[uids: e] c", "set", uids=a["uids"],
                                              v=a["x"].shape[0]), ["x", "src", "uids"], ("uids", "dup")),
    "scatter_along": Op(lambda a: rearr.scatter(a["src3"], "b k c -> b t[idx: b k] c", "sum", idx=a["idx"], t=T),
                        ["src3", "idx"], ("idx", "out")),
    "message": Op(lambda a: rearr.scatter(a["x"], "v[ids: e] c -> v[dst: e] c", "mean", ids=a["ids"], dst=a["dst"]),
                  ["x", "ids", "dst"], ("ids", "out")),
    "fill": Op(_scatter("max", fill=-1.0), ["x", "src", "ids"], ("ids", "out")),
    "into": Op(lambda a: rearr.scatter(a["src"], "e c -> v[ids: e] c", "sum", ids=a["ids"], into=a["x"]),
               ["x", "src", "ids"], ("ids", "out")),
    "unsigned": Op(lambda a: rearr.rearrange(a["x"], "v[ids: e] c -> e c", ids=a["u32"]), ["x", "u32"], ("u32", "u32")),
    "empty": Op(lambda a: rearr.rearrange(a["x0"], "v[ids: e] c -> e c", ids=a["ids"]), ["x0", "ids"], ("ids", "out")),
}
LENGTH = {"ids": "rows", "dst": "rows", "uids": "rows", "u32": "rows", "idx": T, "cols": C}


def data(blocks: int) -> dict[str, np.ndarray]:
    """Every input, global; blocks > 1: each block of the leading axis indexes its own block of rows."""
    rng = np.random.default_rng(0)
    rows, entries = V // blocks, E // blocks
    each = [rng.permutation(rows)[:entries] for _ in range(blocks)]
    a = {"x": rng.standard_normal((V, C)).astype(np.float32), "w": rng.standard_normal((C, 3)).astype(np.float32),
         "y": rng.standard_normal((V, 1)).astype(np.float32), "src": rng.standard_normal((E, C)).astype(np.float32),
         "x3": rng.standard_normal((B, T, C)).astype(np.float32),
         "src3": rng.standard_normal((B, K, C)).astype(np.float32), "x0": np.zeros((V, 0), np.float32),
         "ids": rng.integers(0, rows, E).astype(np.int32), "dst": rng.integers(0, rows, E).astype(np.int32),
         "uids": np.concatenate(each).astype(np.int32), "idx": rng.integers(0, T, (B, K)).astype(np.int32),
         "cols": rng.integers(0, C, E).astype(np.int32)}
    a["ids"][:2] = [-1, -rows]  # negative values count from the end
    a["u32"] = a["ids"].astype(np.uint32) % rows
    return a


def spoiled(a: dict, op: Op, blocks: int) -> dict:
    """a with the op's bad value at the last position of its input (on the last device)."""
    name, how = op.bad
    a = dict(a)
    bad = a[name].copy().reshape(-1)
    length = V // blocks if LENGTH[name] == "rows" else LENGTH[name]
    bad[-1] = {"out": length + 5, "dup": bad[-2], "u32": 2**32 - 1}[how]
    a[name] = bad.reshape(a[name].shape).astype(a[name].dtype)
    return a


def block(a: dict, k: int, blocks: int) -> dict:
    return {n: v if n in REPLICATED else np.split(v, blocks)[k] for n, v in a.items()}


def reference(op: Op, a: dict, blocks: int) -> list[np.ndarray]:
    """The op on numpy, per block, joined along the leading axis."""
    parts = [jax.tree.leaves(op.fn(block(a, k, blocks))) for k in range(blocks)]
    return [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))]


def one_device_message(op: Op, a: dict, blocks: int, where: str | None) -> str:
    """The RearrError that jax raises on one device, eagerly, for the bad block (the last), as the RA501
    line reads it (numpy's, but for an unsigned value that jax's int32 index cannot hold)."""
    try:
        op.fn({n: jnp.asarray(v) for n, v in block(a, blocks - 1, blocks).items()})
    except rearr.RearrError as e:
        shard = f", in the block of the device at {where} (shard_map, pmap)" if where else ""
        return f"{e.code}: {e.message}{shard}"
    raise AssertionError("jax on one device did not refuse the bad value")


def with_sum(out):
    """The result, and a sum over it: a collective after the check."""
    return out, sum(jnp.sum(leaf.astype(jnp.float32)) for leaf in jax.tree.leaves(out))


# --- contexts: each returns (call(a) -> the op's result as numpy leaves, blocks, the shard's name) ----

def mesh1():
    return Mesh(np.array(jax.devices()), ("d",))


def mesh2():
    return Mesh(np.array(jax.devices()).reshape(2, D // 2), ("a", "b"))


def spec1(name, a):
    return P() if name in REPLICATED or a[name].shape[0] % D else P("d")


def spec2(name, a):
    if name in REPLICATED:
        return P()
    shape = a[name].shape
    return P("a", "b") if len(shape) > 1 and shape[1] % (D // 2) == 0 and shape[1] else P("a")


def leaves(out):
    return [np.asarray(leaf) for leaf in jax.tree.leaves(out)]


def committed(a, mesh, spec):
    return {n: jax.device_put(v, NamedSharding(mesh, spec(n, a))) for n, v in a.items()}


def made(make):
    """call(a): the function make(a) builds on the first call, then reused (compiled once: the bad call's
    time is the run's, not a compile's)."""
    built = []

    def call(a):
        if not built:
            built.append(make(a))
        return leaves(built[0](a))

    return call


def context(name: str, op: Op):
    mesh = mesh1()
    if name == "eager":
        return (lambda a: leaves(op.fn(committed(a, mesh, spec1)))), 1, None
    if name == "jit":
        f = jax.jit(lambda a: with_sum(op.fn(a)))
        return (lambda a: leaves(f(committed(a, mesh, spec1))[0])), 1, None
    if name == "jit_in_shardings":  # uncommitted arguments: no mesh while jax traces
        def in_shardings(a):
            f = jax.jit(lambda a: with_sum(op.fn(a)), in_shardings=({n: NamedSharding(mesh, spec1(n, a)) for n in a},))
            return lambda a: f(a)[0]

        return made(in_shardings), 1, None
    if name == "set_mesh":  # the mesh in jax's context while it traces; the arguments uncommitted
        f = jax.jit(lambda a: with_sum(op.fn(a)))

        def call(a):
            with jax.set_mesh(mesh):
                return leaves(f(a)[0])

        return call, 1, None
    if name == "auto_axes":  # an Explicit mesh (jax.make_mesh's default): rearr inside jax.sharding.auto_axes
        emesh = jax.make_mesh((D,), ("d",))
        f = jax.jit(jax.sharding.auto_axes(lambda a: with_sum(op.fn(a)), out_sharding=(P("d"), P())))

        def call(a):
            with jax.set_mesh(emesh):
                return leaves(f(committed(a, emesh, spec1))[0])

        return call, 1, None
    if name == "jit_2d":
        f = jax.jit(lambda a: with_sum(op.fn(a)))
        return (lambda a: leaves(f(committed(a, mesh2(), spec2))[0])), 1, None
    if name == "one_device":  # a one-device program in a process with several
        f = jax.jit(lambda a: with_sum(op.fn(a)))
        return (lambda a: leaves(f({n: jnp.asarray(v) for n, v in a.items()})[0])), 1, None
    if name == "shard_map":
        def shard_mapped(a):
            body = jax.shard_map(lambda a: (lambda o: (o, lax.psum(with_sum(o)[1], "d")))(op.fn(a)), mesh=mesh,
                                 in_specs=({n: spec1(n, a) for n in a},), out_specs=(P("d"), P()))
            f = jax.jit(body)
            return lambda a: f(a)[0]

        return made(shard_mapped), D, "d=3"
    if name == "shard_map_partial":  # manual over 'a' only; 'b' stays automatic
        m2 = mesh2()

        def spec(n, a):
            return P() if n in REPLICATED else P("a")

        def partial(a):
            body = jax.shard_map(lambda a: (lambda o: (o, lax.psum(with_sum(o)[1], "a")))(op.fn(a)), mesh=m2,
                                 in_specs=({n: spec(n, a) for n in a},), out_specs=(P("a"), P()), axis_names={"a"})
            f = jax.jit(body)
            return lambda a: f(committed(a, m2, spec))[0]

        return made(partial), 2, "a=1"
    if name == "pmap":
        def pmapped(a):
            f = jax.pmap(lambda a: (lambda o: (o, lax.psum(with_sum(o)[1], "d")))(op.fn(a)), axis_name="d",
                         in_axes=({n: None if n in REPLICATED else 0 for n in a},))

            def call(a):
                split = {n: v if n in REPLICATED else v.reshape(D, v.shape[0] // D, *v.shape[1:]) for n, v in a.items()}
                return [o.reshape(-1, *o.shape[2:]) for o in jax.tree.leaves(f(split)[0])]

            return call

        return made(pmapped), D, "d=3"
    raise SystemExit(f"unknown context {name}")


# --- transforms of a gather and a scatter: vmap, grad, lax.scan, jax.checkpoint -----------------------

def transformed(name: str, op: Op, opname: str):
    """(call(a) -> numpy leaves, want(a) -> numpy leaves): the op under a transform, over committed
    arguments ('_jit') or uncommitted ones with in_shardings ('_in_shardings')."""
    kind, how = name.rsplit("_", 1) if not name.endswith("_in_shardings") else (name[:-len("_in_shardings")], "in")
    mesh = mesh1()
    index = [n for n in op.inputs if n in LENGTH] if kind in ("vmap", "scan") else []
    wrt = op.grad_of

    def sharding(n, a):
        return NamedSharding(mesh, P(None, "d") if n in index else spec1(n, a))

    def jit(f, a):
        if how == "jit":
            g = jax.jit(f)
            return lambda a: g({n: jax.device_put(v, sharding(n, a)) for n, v in a.items()})
        return jax.jit(f, in_shardings=({n: sharding(n, a) for n in a},))

    def program(a):
        if kind == "vmap":
            axes = {n: 0 if n in index else None for n in a}
            return jit(lambda a: with_sum(jax.vmap(op.fn, in_axes=(axes,))(a))[0], a)
        if kind == "scan":
            def scan(a):
                def step(carry, rows):
                    out = op.fn({**a, **rows})
                    return carry + with_sum(out)[1], out
                return lax.scan(step, 0.0, {n: a[n] for n in index})[1]
            return jit(scan, a)

        def loss(value, a):
            return jnp.sum(op.fn({**a, wrt: value}) ** 2)

        g = jax.grad(jax.checkpoint(loss) if kind == "checkpoint" else loss)
        return jit(lambda a: (lambda d: (d, jnp.sum(d)))(g(a[wrt], a))[0], a)

    run = made(program)

    def call(a):  # vmap and scan: two examples (the same twice)
        return run({n: np.stack([v, v]) if n in index else v for n, v in a.items()})

    def want(a):
        out = reference(op, a, 1)
        if index:
            return [np.stack([r, r]) for r in out]
        if opname == "gather":  # d/dx sum(x[ids]**2): 2 x[ids] added back at ids
            return [rearr.scatter(2 * out[0], "e c -> v[ids: e] c", "sum", ids=a["ids"], v=V)]
        return [2 * rearr.rearrange(out[0], "v[ids: e] c -> e c", ids=a["ids"])]  # d/dsrc sum(scatter(src)**2)

    return call, want


TRANSFORMS = {f"{k}_{h}" for k in ("vmap", "scan", "grad", "checkpoint") for h in ("jit", "in_shardings")}


def refused(kind: str) -> dict:
    """An index, or into=, committed to another mesh than the tensor's: RA500 before anything runs."""
    d = jax.devices()
    x = jax.device_put(np.zeros((V, C), np.float32), NamedSharding(mesh1(), P("d")))
    ids = np.arange(E, dtype=np.int32) % V
    half = NamedSharding(Mesh(np.array(d[:2]), ("d",)), P("d"))
    report: dict = {"right": True, "want": "RA500"}
    t0 = time.perf_counter()
    try:
        if kind == "index_mesh":
            rearr.rearrange(x, "v[ids: e] c -> e c", ids=jax.device_put(ids, half))
        elif kind == "into_mesh":
            rearr.scatter(x[:E], "e c -> v[ids: e] c", "sum", ids=ids, into=jax.device_put(np.zeros((V, C), np.float32),
                                                                                            half))
        report["message"] = None
    except rearr.RearrError as e:
        report["seconds"] = time.perf_counter() - t0
        report["message"], report["fix"] = e.code, bool(e.hint)
        report["detail"] = str(e)[:1500]
    report["healthy"] = healthy()
    return report


def docs_block(k: int) -> dict:
    """Block k of the JSON file $REARR_DOCS_BLOCKS (docs blocks marked <!-- devices: 4 -->), run as a
    script: what it prints."""
    import contextlib
    import io
    import os

    where, body = json.loads(open(os.environ["REARR_DOCS_BLOCKS"], encoding="utf-8").read())[k]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(body, where, "exec"), {"__name__": "__main__"})  # noqa: S102 - the docs' own code
    except Exception as e:  # noqa: BLE001 - reported to the parent
        return {"right": False, "detail": "".join(traceback.format_exception(e))[-3000:], "printed": printed.getvalue()}
    return {"right": True, "printed": printed.getvalue()}


def run(case: str) -> dict:
    ctx, opname = case.split(":")
    if ctx == "refused":
        return {"case": case, **refused(opname)}
    if ctx == "docs":
        return {"case": case, **docs_block(int(opname))}
    op = OPS[opname]
    report: dict = {"case": case}
    if ctx in TRANSFORMS:
        call, want = transformed(ctx, op, opname)
        blocks, where = 1, None
    else:
        call, blocks, where = context(ctx, op)
        want = lambda a: reference(op, a, blocks)  # noqa: E731
    a = {n: v for n, v in data(blocks).items() if n in op.inputs}
    try:
        got, expected = call(a), want(a)
        report["right"] = len(got) == len(expected) and all(
            g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)
            for g, w in zip(got, expected))
        if not report["right"]:
            report["detail"] = f"got {[g.tolist() for g in got]}, want {[w.tolist() for w in expected]}"[:2000]
    except Exception as e:  # noqa: BLE001 - reported to the parent
        report["right"] = False
        report["detail"] = "".join(traceback.format_exception(e))[-3000:]
        return report
    if op.bad is None:
        return report
    bad = spoiled(a, op, blocks)
    report["want"] = one_device_message(op, bad, blocks, where)
    t0 = time.perf_counter()
    try:
        call(bad)
        report["message"] = None
    except Exception as e:  # noqa: BLE001 - the error is what the case checks
        report["seconds"] = time.perf_counter() - t0
        text = str(e)
        found = re.search(r"RA50\d: [^\n]*", text)
        report["message"] = found[0] if found else text[:1500]
        report["fix"] = "fix: " in text
    report["healthy"] = healthy()
    return report


def healthy() -> bool:
    """A program on every device still runs (and waits behind what the failed call left running)."""
    mesh = mesh1()
    v = jax.device_put(np.arange(D, dtype=np.float32), NamedSharding(mesh, P("d")))
    return float(jax.jit(jnp.sum)(v)) == D * (D - 1) / 2


if __name__ == "__main__":
    for case in sys.argv[1:]:
        print("START", case, flush=True)
        faulthandler.dump_traceback_later(90, exit=True)  # a case that hangs: the stacks, then the end
        print("CASE", json.dumps(run(case)), flush=True)
        faulthandler.cancel_dump_traceback_later()
