"""The jax backend's in-program checks of a traced index, on one device or on many (imported with the
backend, once jax is).

A check is a flag (is any value bad), reduced per shard and then once over the devices: XLA's
all-reduce of one bool under ``jit``, a ``pmax`` over the manual axes in ``shard_map`` and ``pmap``.
A ``lax.cond`` on it runs, only when it is set, a branch that finds the first bad value as a few
scalars (its position and the value) and calls back to Python, where the RearrError is raised. The
index itself never goes to the host, nor to one device.

On several devices the callback must raise on every one of them, at the same point, with the same
scalars: a device that did not raise would wait for the others in the program's next collective
until XLA aborts the process. Where it runs is decided while jax traces (`placement`):

- ``shard_map`` and ``pmap`` (every mesh axis manual): each device holds its own block; the flag and
  the scalars of the lowest shard with a bad value are agreed by collectives over the manual axes,
  and a ``pure_callback`` runs on each device;
- ``shard_map`` over some of the axes: the same, with the callback in a ``shard_map`` over the others;
- ``jit`` over a mesh that jax shows while tracing (``jax.set_mesh``, or an array committed to a
  NamedSharding): the scalars are replicated, and a ``pure_callback`` in a ``shard_map`` over that
  mesh runs once per device;
- one device in the process: a ``pure_callback``;
- several devices and no mesh in sight (``jit(in_shardings=...)`` called with uncommitted arrays, a
  one-device program on a machine with several): ``jax.debug.callback(partitioned=True)``, which runs
  on every device of whatever devices the program gets. It is an effect, which takes the program off
  jax's fast dispatch path (docs/scaling.md says how to stay on it).

A ``pure_callback``'s result is the 0 that the caller reads (the wrap of negative values): jax keeps
the callback for it, and the program has no effect. Under ``vmap`` the ``cond`` becomes a ``select``
that runs the branch on every call, so the host side raises only for the examples whose flag is set.
"""

from __future__ import annotations

import atexit
import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

Report = Callable[..., Exception]  # (*scalars as numpy values, shard: str | None) -> the error to raise


class Placement(NamedTuple):
    """Where the callback of a check runs (see the module's docstring)."""

    kind: str  # "single", "manual", "partial", "mesh" or "unknown"
    manual: tuple[str, ...] = ()  # the manual axes, whose devices each hold their own block
    sizes: tuple[int, ...] = ()  # their lengths
    auto: frozenset[str] = frozenset()  # partial: the other axes of the mesh
    mesh: Any = None  # "mesh": the abstract mesh of the program

    def shard(self, k: int) -> str | None:
        """The shard with linear number k over the manual axes, as "d=3" (None outside shard_map)."""
        if k < 0 or not self.manual:
            return None
        return ", ".join(f"{a}={int(c)}" for a, c in zip(self.manual, np.unravel_index(k, self.sizes)))


def placement(*arrays: Any) -> Placement:
    """Decided while jax traces: the context's mesh (shard_map, pmap, jax.set_mesh), else the mesh of an
    array's type (an argument committed to a NamedSharding, and what is computed from it), else one
    device if the process has one. No mesh in sight proves nothing on several devices: jit places the
    program after tracing it."""
    context = jax.sharding.get_abstract_mesh()
    if context.axis_names:
        manual = tuple(a for a, k in zip(context.axis_names, context.axis_types) if k == AxisType.Manual)
        if manual:
            auto = frozenset(context.axis_names) - frozenset(manual)
            return Placement("partial" if auto else "manual", manual, tuple(context.shape[a] for a in manual), auto)
        if context.size > 1:
            return Placement("mesh", mesh=context)
        return Placement("single")
    for a in arrays:
        mesh = jax.typeof(a).sharding.mesh
        if mesh.axis_names and mesh.size > 1:
            return Placement("mesh", mesh=mesh)
    return Placement("single" if jax.device_count() == 1 else "unknown")


def first_bad(t: Any, bad: Any) -> tuple[Any, Any]:
    """The row-major linear position of the first true element of bad (t's shape), and t's value there:
    elementwise ops and two reductions, each per shard then one scalar all-reduce (a reshape of a
    sharded array could move it)."""
    size = math.prod(t.shape)
    dtype = jnp.int32 if size < 2**31 else jnp.asarray(0).dtype
    lin = jnp.zeros(t.shape, dtype)
    for d in range(t.ndim):
        lin = lin + lax.broadcasted_iota(dtype, t.shape, d) * math.prod(t.shape[d + 1:])
    first = jnp.min(jnp.where(bad, lin, size))
    low = jnp.iinfo(t.dtype).min
    return first, jnp.max(jnp.where(lin == first, t, low))


def check(flag: Any, operands: tuple, found: Callable[..., tuple], report: Report, dtype: Any,
          effect: bool = False) -> Any:
    """A 0 of ``dtype`` for the caller to read, once the program knows that ``flag`` (a bool scalar: this
    shard's, in shard_map) is false everywhere; else the call fails on every device with
    ``report(*found(*operands), shard=...)``, raised on the host. ``found`` runs only then (in the
    cond's branch), on ``operands`` (the index: a cond operand without a copy). ``effect``: keep the
    check by an effect, where nothing reads the 0 (XLA would drop a pure callback with its result)."""
    where = placement(*operands)
    if where.manual:  # one bool per device: agreed by one scalar all-reduce, so every device takes the branch
        agreed = lax.pmax(flag.astype(jnp.int32), where.manual) > 0
    else:
        agreed = flag
    call = _effect(where, report, dtype) if effect or where.kind == "unknown" else _pure(where, report, dtype)

    def on_bad(*ops: Any) -> Any:
        scalars = found(*ops)
        shard = jnp.asarray(-1, jnp.int32)
        if where.manual:
            shard, scalars = _agree(flag, scalars, where.manual)
        return call(agreed, shard, *scalars)

    return lax.cond(agreed, on_bad, lambda *ops: jnp.zeros((), dtype), *operands)


def keep(*scalars: Any) -> None:
    """An effect that reads the scalars (one value of each checked index): where a result is empty, XLA
    drops what leads to it, the checks' pure callbacks included, unless something with an effect reads
    the values that passed through them."""
    where = placement(*scalars)
    _effect(where, _no_report, jnp.int32)(jnp.asarray(False), jnp.asarray(-1, jnp.int32), *scalars)


def _no_report(*scalars: Any, shard: str | None) -> Exception:
    raise AssertionError("keep()'s flag is false")  # never called: its flag is never set


def _agree(flag: Any, scalars: tuple, axes: tuple[str, ...]) -> tuple[Any, tuple]:
    """Over the manual axes: the lowest shard whose flag is set, and its scalars, on every device."""
    me = lax.axis_index(axes)
    shard = lax.pmin(jnp.where(flag, me, jnp.iinfo(jnp.int32).max), axes)
    mine = me == shard
    return shard, tuple(lax.psum(jnp.where(mine, s, jnp.zeros((), s.dtype)), axes) for s in scalars)


def _host(where: Placement, report: Report, dtype: Any) -> Callable[..., Any]:
    """The host side: raise report's error for the first example whose flag is set (vmap passes one
    value per example), else return 0 (one per example)."""
    def on_host(flag: Any, shard: Any, *scalars: Any) -> Any:
        arrays = np.broadcast_arrays(*(np.asarray(a) for a in (flag, shard, *scalars)))
        for f, s, *values in zip(*(a.reshape(-1) for a in arrays)):
            if f:
                _drain_at_exit()
                raise report(*values, shard=where.shard(int(s)))
        return np.zeros(arrays[0].shape, dtype)

    return on_host


def _pure(where: Placement, report: Report, dtype: Any) -> Callable[..., Any]:
    """The callback as a pure_callback whose 0 the caller reads, on every device of the program."""
    on_host = _host(where, report, dtype)

    def call(*args: Any) -> Any:
        return jax.pure_callback(on_host, jax.ShapeDtypeStruct((), dtype), *args, vmap_method="broadcast_all")

    if where.kind == "partial":  # callbacks need every axis manual: the others too, around it
        return jax.shard_map(call, in_specs=P(), out_specs=P(), axis_names=set(where.auto))
    if where.kind == "mesh":  # run once per device, on the replicated scalars
        return jax.shard_map(call, mesh=where.mesh, in_specs=P(), out_specs=P())
    return call


def _effect(where: Placement, report: Report, dtype: Any) -> Callable[..., Any]:
    """The callback as jax.debug.callback(partitioned=True), an effect, which runs on every device of the
    program (each with its own block of an array: here, the same scalars). Under vmap one callback for
    the batch, not one per example (jax's own rule unrolls it): custom_vmap passes it the first example
    whose flag is set."""
    on_host = _host(where, report, dtype)

    def callback(*args: Any) -> tuple:
        jax.debug.callback(on_host, *args, partitioned=True)
        return ()

    if where.kind == "partial":  # (with no result: XLA drops a manual computation whose results nothing reads)
        callback = jax.shard_map(callback, in_specs=P(), out_specs=(), axis_names=set(where.auto))

    def call(*args: Any) -> Any:
        callback(*args)
        return jnp.zeros((), dtype)

    one = jax.custom_batching.custom_vmap(call)

    @one.def_vmap
    def _batch(axis_size: int, batched: list, flag: Any, *rest: Any) -> tuple[Any, bool]:
        flags = flag if batched[0] else jnp.broadcast_to(flag, (axis_size,))
        b = jnp.argmax(flags)  # the first example whose flag is set (0 where none is)
        picked = [a[b] if is_batched else a for a, is_batched in zip(rest, batched[1:])]
        return jnp.broadcast_to(one(jnp.any(flags), *picked), (axis_size,)), True

    return one


@functools.cache
def _drain_at_exit() -> None:
    """Once a check has failed a call: before the interpreter exits, wait for the devices (see _drain)."""
    atexit.register(_drain)


def _drain() -> None:
    """Run a program with an effect on every local device and wait for it. The other devices of a failed
    call may still be running their callbacks when the caller has the error (an exit then can abort),
    and jax keeps the failed run's runtime token of each device, which it re-raises at exit ("Exception
    ignored in atexit callback"): this program waits behind them on each device, and its own tokens
    take their place."""
    try:
        devices = jax.local_devices()
        mesh = jax.sharding.Mesh(np.array(devices), ("devices",))
        x = jax.device_put(np.zeros(len(devices), np.int32), jax.sharding.NamedSharding(mesh, P("devices")))

        def wait(v: Any) -> Any:
            jax.debug.callback(lambda *_: None, v, partitioned=True)
            return v + 1

        jax.jit(wait)(x).block_until_ready()
    except Exception:  # noqa: BLE001 - at exit there is nothing left to tell
        pass
