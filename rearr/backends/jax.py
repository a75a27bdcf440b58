"""jax backend: the Array API backend's steps, with gathers and scatters in jax's own terms.

jax arrays (and jax's tracers, under ``jax.jit``, ``jax.vmap``, ``jax.grad``) come
here rather than to the generic Array API backend, for three things the standard
does not give: scatter, through ``x.at[...]``; a gather along an axis that keeps
the index at its own shape (``take_along_axis`` broadcasts it, so XLA moves rows,
not elements); and index checks that work on a traced index, which has no
values while jax traces. An indexed plan is one ``jax.jit`` program (see
program()), made once per plan: an eager call is one dispatch, and inside a
user's ``jit`` it is inlined into the user's program.

The checks (docs/backends.md, "jax"; docs/scaling.md for several devices): an
index with values (eager, or a constant inside a trace) is read on the host and a
bad value is the RearrError that numpy gives. A traced index is checked inside
the program (rearr.backends._jax_checks): a reduction finds whether any value is
out of range (or, under 'set', any position written twice), per shard and then
once over the devices, and a ``lax.cond`` calls back to Python only then, on
every device with the same few scalars, where the same RearrError is raised; jax
reports it as a ``JaxRuntimeError`` from the call. The callback is a
``jax.pure_callback`` whose result (a 0) the wrap of negative values reads, so
that jax keeps it with no effect, which would take every call of the jitted
program off jax's fast dispatch path. Only where no result reads the index (an
axis of length 0, an empty result: XLA drops that work, and the pure callback
with it), or where jit shows no mesh on a machine with several devices, is the
check an effect. A traced unsigned index that the cast to the index dtype could
wrap is checked the same way before the cast (convert_index), and the error
names the value passed.

With check_bounds=False nothing is checked: the promise of every backend
(docs/language.md, "Index values"). The gathers fill (``mode="fill"``) and the
scatters drop (``mode="drop"``) what lies outside the positions they index, so a
broken promise reads and writes nothing outside the arrays; where a plan indexes
flat rows, a value beyond its axis is a position of the next row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import RearrError
from ..planning.plan import (
    AdvancedIndex,
    GatherAlong,
    IndexUse,
    Reduce,
    ScatterAlong,
    ScatterRows,
    TakeRows,
)
from . import _code, _common, _xp
from ._code import CodeNames, tup
from .array_api import ArrayApiBackend, not_for_numpy, templates
from .contract import IndexEnv, native_calls

_INDEXING = (TakeRows, GatherAlong, AdvancedIndex, ScatterRows, ScatterAlong)
_AT = {"sum": "add", "mean": "add", "prod": "multiply", "max": "max", "min": "min", "set": "set"}
_BOOL_AT = {"sum": "max", "prod": "min"}  # jax adds and multiplies no bools: or and and, as numpy's ufuncs do


class JaxBackend(ArrayApiBackend):
    """The Array API backend (dtype questions, index conversion, the plain steps, stack, concat,
    einsum, matmul) with jax's own gathers, scatters, checks and one program per indexed plan."""

    name = "jax"
    INDEXES_OTHER = False

    def __init__(self) -> None:
        super().__init__()
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax import lax

        from . import _jax_autodiff, _jax_checks  # import jax

        self.jax, self.jnp, self.lax, self.np = jax, jnp, lax, np
        self._autodiff, self._checks = _jax_autodiff, _jax_checks
        with jax.ensure_compile_time_eval():  # a backend first made under jit: an array, not jit's tracer
            self.TENSOR = type(jnp.zeros(()))
        self._Tracer = jax.core.Tracer

    def accepts(self, x: object) -> bool:
        module = str(type(x).__module__)  # a class may set __module__ to anything
        return module.startswith(("jax.", "jaxlib.")) and hasattr(type(x), "__array_namespace__")

    def to_numpy(self, x: Any) -> Any:
        try:
            return self.np.asarray(x)
        except (TypeError, ValueError, AttributeError, RuntimeError) as e:  # a tracer, a PRNG key array ...
            if "key<" in str(getattr(x, "dtype", "")):
                raise RearrError(f"a jax PRNG key array holds no numbers: {str(e)[:200]}", code="RA500",
                                 hint="asnumpy(jax.random.key_data(key))") from None
            raise not_for_numpy("jax", x, e) from None

    def _has_values(self, t: Any) -> bool:
        """Whether t holds values that Python can read now: not a tracer of jit, vmap or grad, nor an array
        with shards on other processes (checked inside the program, as a tracer is). A numpy array has."""
        return not isinstance(t, self._Tracer) and (not isinstance(t, self.TENSOR) or t.is_fully_addressable)

    def place(self, t: Any) -> object:
        """The mesh of an array committed to a NamedSharding over several devices, else its devices; None
        for a tracer or an uncommitted array, which jax moves to the devices of the others. One program
        takes arrays on one mesh (or one set of devices) only."""
        if isinstance(t, self._Tracer) or not t.committed:
            return None
        sharding = t.sharding
        devices = sharding.device_set
        return sharding.mesh if len(devices) > 1 and isinstance(sharding, self.jax.sharding.NamedSharding) \
            else devices

    # --- the run-time check of a traced index: rearr.backends._jax_checks ---------------------------------

    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        """The Array API backend's conversion. A traced unsigned index whose values the cast to the index
        dtype could wrap (uint32 to int32 without x64, uint64 to int64) is checked before it, inside the
        program, and the error names the value as passed; with check_bounds=False it is cast as it is.
        A jax array committed elsewhere than x (other devices, another mesh) is refused: one program
        cannot take both."""
        jnp = self.jnp
        if isinstance(value, self.TENSOR) and isinstance(like, self.TENSOR):
            _same_place(self.place(value), self.place(like), name, text)
        if isinstance(value, self._Tracer) and mode and jnp.issubdtype(value.dtype, jnp.unsignedinteger):
            dtype = _xp.index_dtype(jnp)
            have, want = jnp.iinfo(value.dtype), jnp.iinfo(dtype)
            if have.max > want.max:
                shape = tuple(value.shape)

                def beyond(first, found, shard):
                    error = _common.beyond_index_range(name, text, int(found), _position(first, shape), want.bits)
                    return _in_shard(error, shard)

                if math.prod(shape) == 0:
                    return value.astype(dtype)
                # The cast reads the check's 0: a check that the program drops is no check.
                zero = self._checks.check(jnp.any(value > want.max), (value,),
                                         lambda v: self._checks.first_bad(v, v > want.max), beyond, dtype)
                return value.astype(dtype) + zero
        if isinstance(value, self.TENSOR) and self._has_values(value):
            bits = jnp.iinfo(_xp.index_dtype(jnp)).bits
            # read on the host, as numpy: no eager jax op on its shards (other dtypes: refused below)
            if jnp.issubdtype(value.dtype, jnp.integer) and _common.wraps(value.dtype, bits):
                _common.refuse_beyond(name, text, self.np.asarray(value), bits)
        return super().convert_index(value, like, name, text, mode)

    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        """Bounds check, and negative values counted from the end: on the host when t has values,
        else inside the program (see the module's docstring). Every mode checks so: jax's arrays are
        read on the host only when they already have values there."""
        jnp, n, shape = self.jnp, use.length, tuple(t.shape)
        if math.prod(shape) == 0:
            return t
        if self._has_values(t):
            a = self.np.asarray(t)  # no copy on the CPU
            # One reduction in the common case: read as unsigned, negative values become huge.
            if int(a.view(f"u{a.itemsize}").max()) < n:
                return t
            return t if self.numpy.check_index(a, use, text) is a else jnp.where(t < 0, t + n, t)

        def bad(t):
            return (t < -n) | (t >= n)

        def outside(first, value, shard):
            error = _common.out_of_range(use, text, int(value), _position(first, shape))
            return _in_shard(error, shard, f"in shard_map and pmap each device indexes its own block of the "
                             f"tensor, so an index holds positions in that block ({-n} <= i < {n} here); to index "
                             "the whole axis, pass the tensor unsplit (shard_map's in_specs=P(), pmap's "
                             "in_axes=None)")

        def found(t):  # the mask again, in the branch: the cond's operand is the index alone, not a mask
            return self._checks.first_bad(t, bad(t))

        if n == 0:  # every value is out of range, and nothing that XLA keeps reads one: an effect keeps the check
            self._checks.check(jnp.any(bad(t)), (t,), found, outside, t.dtype, effect=True)
            return t
        # The check's result is the 0 that the wrap of negative values compares with (the cond keeps it only
        # where it is used): a scalar through the cond, and no copy of the index, which XLA makes for an
        # array that passes through one.
        zero = self._checks.check(jnp.any(bad(t)), (t,), found, outside, t.dtype)
        return jnp.where(t < zero, t + n, t)

    def _unique(self, keep: Any, flat: Any, names: str, text: str) -> Any:
        """keep, once flat (the 1-d positions that 'set' writes) is known to hold no position twice."""
        if flat.shape[0] < 2:
            return keep
        if self._has_values(flat):
            a = self.np.asarray(flat)
            if self.np.unique(a).size != a.size:
                raise _common.duplicate_under_set(names, text)
            return keep
        jnp = self.jnp
        s = jnp.sort(flat)  # under jit over several devices XLA gathers the positions, as its scatter does
        big = jnp.iinfo(flat.dtype).max
        twice = jnp.min(jnp.where(s[1:] == s[:-1], s[1:], big))  # the least position written twice, or big

        def duplicate(position, shard):
            return _in_shard(_common.duplicate_under_set(names, text), shard)

        # keep reads the 0: invariant in shard_map, where keep varies by device
        zero = self._checks.check(twice != big, (twice,), lambda p: (p,), duplicate, keep.dtype)
        return keep + zero

    # --- gathers: take_along_axis with the index at its own shape (its length-1 axes broadcast) ------------

    def gatheralong(self, step: GatherAlong) -> Any:
        dim, term, shape, jnp = step.dim, step.term, step.shape, self.jnp

        def run(x, env):
            idx = _xp.term(term, env.indices, jnp, x)
            if _broadcasts(step, x.shape):
                idx = jnp.broadcast_to(idx, shape)
            return jnp.take_along_axis(x, idx, axis=dim, mode="fill")

        return run

    @staticmethod
    def code_gatheralong(step: GatherAlong, before: Any, n: CodeNames) -> list[str]:
        idx = _xp.term_code(step.term, n, "jnp")
        if _broadcasts(step, before.shape):
            idx = f"jnp.broadcast_to({idx}, {tup(step.shape)})"
        return [f"{n.x} = jnp.take_along_axis({n.x}, {idx}, axis={step.dim})"]

    # --- scatters: out.at[...], around rearr.backends._xp.combine -------------------------------------------

    def _combine(self, reduction: str, x: Any, at: tuple, shape: tuple, count_at: tuple, count_shape: tuple,
                 base: Any, fill: object) -> Any:
        """out.at[at] combines x into an array of ``shape``, as numpy's backend does (_xp.combine). The
        counts live at ``count_at`` in an array of ``count_shape`` that broadcasts against shape."""
        jnp, autodiff = self.jnp, self._autodiff

        def put(out, reduction, values):
            if reduction == "prod" and jnp.issubdtype(out.dtype, jnp.inexact):  # jax's own has no derivative
                return autodiff.product_at(out, at, values)
            if reduction in ("max", "min") and jnp.issubdtype(out.dtype, jnp.floating):  # torch's derivative
                return autodiff.extremum_at(out, at, values, _AT[reduction], base is not None)
            op = _BOOL_AT.get(reduction, _AT[reduction]) if values.dtype == jnp.bool_ else _AT[reduction]
            return getattr(out.at[at], op)(values, mode="drop")

        def count():
            return jnp.zeros(count_shape, jnp.int32).at[count_at].add(1, mode="drop")

        # float16 and bfloat16 accumulate in float32, as numpy's and torch's scatters do
        acc = jnp.float32 if x.dtype in (jnp.float16, jnp.bfloat16) else x.dtype
        return _xp.combine(jnp, reduction, x, base, fill, shape, acc, put, count)

    def _scatter_call(self, core: Callable, into_calls: tuple, names: tuple[str, ...], dup_names: str,
                      positions: Callable | None = None) -> Any:
        """The step's call(x, env): core(x, arrays, base, fill=, text=, checked=) jitted, those three static.
        Under 'set' (``positions(x, arrays)`` gives the 1-d positions written), indices with values are
        checked for duplicates here, on the host, where the error is numpy's; core checks the others."""
        def unwrapped(x, arrays, base, *, fill, text, checked):
            return core(x, arrays, base, fill=fill.value, text=text, checked=checked)

        jitted = self.jax.jit(unwrapped, static_argnames=("fill", "text", "checked"))

        def run(x, env):
            arrays = {k: env.indices[k] for k in names}
            base = _common.arranged_into(env, into_calls)
            checked = positions is not None and all(self._has_values(a) for a in arrays.values())
            if checked:
                self._unique(None, positions(x, arrays), dup_names, env.text)
            return jitted(x, arrays, base, fill=_Static(env.fill), text=env.text, checked=checked)

        return run

    def scatterrows(self, step: ScatterRows) -> Any:
        reduction, rows, terms, space, jnp = step.reduction, step.rows, step.terms, step.space, self.jnp
        into_calls = native_calls(step.into, self)
        names = tuple(dict.fromkeys(c.index for c in terms if c.index is not None))
        dup_names = ",".join(c.index for c in terms if c.index)  # as numpy's error names them
        ones = (1,) * len(terms)

        def positions(x, arrays):
            return _xp.rows(terms, ones, space, arrays, jnp, x)

        def core(x, arrays, base, *, fill, text, checked):
            flat = positions(x, arrays)
            if reduction == "set" and not checked:
                flat = self._unique(flat, flat, dup_names, text)
            return self._combine(reduction, x, (flat,), (rows, x.shape[1]), (flat,), (rows, 1), base, fill)

        return self._scatter_call(core, into_calls, names, dup_names, positions if reduction == "set" else None)

    @staticmethod
    def code_scatterrows(step: ScatterRows, before: Any, n: CodeNames) -> list[str]:
        flat = _xp.rows_code(step.terms, (1,) * len(step.terms), step.space, n, "jnp")
        return [flat, *_combine_code(step.reduction, n.flat, (step.rows, before.shape[1]), (step.rows, 1), n)]

    def _along_at(self, step: ScatterAlong, x: Any, arrays: dict) -> tuple:
        """The index tuple of out.at[...] for a scatter along step.dim: an arange for each axis before dim,
        the index, and the axes after dim left whole where the index does not vary along them (then the
        scatter moves rows, as code written by hand does), else an arange for each of them too."""
        jnp, dim, src, last = self.jnp, step.dim, step.src_shape, _along_axes(step)
        idx = _xp.term(step.term, arrays, jnp, x)
        grid = [jnp.reshape(jnp.arange(src[d]), tuple(src[d] if k == d else 1 for k in range(last)))
                for d in range(last) if d != dim]
        return (*grid[:dim], jnp.reshape(idx, idx.shape[:last]), *grid[dim:])

    def _along_positions(self, step: ScatterAlong, at: tuple) -> Any:
        """The flat position in the output of each element that the scatter writes (for 'set'), 1-d;
        positions of whole rows stand for the row."""
        strides = [math.prod(step.shape[d + 1:len(at)]) for d in range(len(at))]
        total = sum(a * s for a, s in zip(at, strides))
        return self.jnp.reshape(self.jnp.broadcast_to(total, tuple(step.src_shape[:len(at)])), (-1,))

    def scatteralong(self, step: ScatterAlong) -> Any:
        reduction, shape, dim = step.reduction, step.shape, step.dim
        into_calls = native_calls(step.into, self)
        names = (step.term.index,) if step.term.index is not None else ()
        dup_names = step.term.index or ""

        def positions(x, arrays):
            return self._along_positions(step, self._along_at(step, x, arrays))

        def core(x, arrays, base, *, fill, text, checked):
            at = self._along_at(step, x, arrays)
            if reduction == "set" and not checked:
                at = (*at[:dim], self._unique(at[dim], self._along_positions(step, at), dup_names, text),
                      *at[dim + 1:])
            return self._combine(reduction, x, at, shape, at, shape, base, fill)

        return self._scatter_call(core, into_calls, names, dup_names, positions if reduction == "set" else None)

    @staticmethod
    def code_scatteralong(step: ScatterAlong, before: Any, n: CodeNames) -> list[str]:
        dim, src, last = step.dim, step.src_shape, _along_axes(step)
        grid = [_code.view(f"jnp.arange({src[d]})", (src[d],), tuple(src[d] if k == d else 1 for k in range(last)),
                           "reshape") for d in range(last) if d != dim]
        idx = _code.view(_xp.term_code(step.term, n, "jnp"), step.term.shape, step.term.shape[:last], "reshape")
        at = ", ".join((*grid[:dim], idx, *grid[dim:])) + ("," if last == 1 else "")
        return _combine_code(step.reduction, at, step.shape, step.shape, n)

    # --- the plan as one program ----------------------------------------------------------------------

    def keep_checks(self, x: Any, env: IndexEnv) -> Any:
        """x, the plan's result. An empty result reads no index, so XLA would drop the in-program checks
        of the traced indices (pure callbacks) with the work that led to it: an effect that reads one value
        of each checked index keeps them. Decided while jax traces; a non-empty result, or
        check_bounds=False, has no effect added."""
        if env.checks and math.prod(x.shape) == 0:
            traced = [t for t in env.indices.values() if isinstance(t, self._Tracer) and math.prod(t.shape)]
            if traced:
                self._checks.keep(*(t[(0,) * t.ndim] for t in traced))
        return x

    def program(self, steps: tuple, calls: tuple) -> tuple:
        """An indexed plan as one jax.jit program of x and the call's values: an eager call is one dispatch,
        and the reshapes between its steps are not copies. Not a plan that scatters with 'set' (an eager
        call reads its positions on the host, for numpy's error) or reduces with a callable (which may
        not trace), nor one without indices."""
        if not any(isinstance(s, _INDEXING) for s in steps):
            return calls
        keep_checks, tracer = self.keep_checks, self._Tracer
        for s in steps:
            if isinstance(s, ScatterRows | ScatterAlong) and s.reduction == "set" or \
                    isinstance(s, Reduce) and callable(s.reduction):
                return (*calls, keep_checks)  # run op by op: a tracer here is the caller's

        def run_all(x, indices, into, *, fill, text, checks, keep):
            env = IndexEnv(text, indices, fill.value, into, checks)
            for f in calls:
                x = f(x, env)
            return keep_checks(x, env) if keep else x

        jitted = self.jax.jit(run_all, static_argnames=("fill", "text", "checks", "keep"))

        def run(x: Any, env: IndexEnv) -> Any:
            # keep: the caller traces an index, whose check runs in the program (an eager call's indices were
            # checked on the host, and an effect would only cost it, and refuse jax.checkpoint)
            keep = bool(env.checks) and any(isinstance(t, tracer) for t in env.indices.values())
            return jitted(x, env.indices, env.into, fill=_Static(env.fill), text=env.text, checks=env.checks,
                          keep=keep)

        return (run,)

    # The Array API backend's templates with jnp for the namespace, and jax's own gathers and scatters.
    CODE = {**templates("jnp"), GatherAlong: code_gatheralong, ScatterRows: code_scatterrows,
            ScatterAlong: code_scatteralong}


# --- what the host callbacks and the templates share ---------------------------------------------------


def _same_place(have: object, want: object, name: str, text: str) -> None:
    """Refuse an index whose committed devices or mesh are not x's (a place of JaxBackend.place)."""
    if have is None or want is None or have == want:
        return

    def said(place: Any) -> str:
        devices = ", ".join(str(d.id) for d in sorted(place.devices.flat if hasattr(place, "shape") else place,
                                                       key=lambda d: d.id))
        return f"the mesh {dict(place.shape)} of devices {devices}" if hasattr(place, "shape") else f"devices {devices}"

    raise RearrError(f"index {name!r} is committed to {said(have)}, and x to {said(want)}: one jax program "
                     "takes arrays of one mesh", code="RA500", pattern=text,
                     hint=f"put {name} on x's devices: jax.device_put({name}, x.sharding) where x is on one "
                     f"device, jax.device_put({name}, jax.sharding.NamedSharding(x.sharding.mesh, "
                     "jax.sharding.PartitionSpec())) where x is sharded over a mesh")


def _position(first: Any, shape: tuple) -> tuple[int, ...]:
    """The row-major linear position first as the index's position tuple."""
    import numpy as np

    return tuple(int(p) for p in np.unravel_index(int(first), shape))


def _in_shard(error: RearrError, shard: str | None, hint: str | None = None) -> RearrError:
    """error, said of the block of the device at ``shard`` in shard_map or pmap (None: the whole array)."""
    if shard is None:
        return error
    return RearrError(f"{error.message}, in the block of the device at {shard} (shard_map, pmap)", code=error.code,
                      pattern=error.pattern, col=error.col, hint=hint or error.hint)


def _broadcasts(step: GatherAlong, before_shape: tuple) -> bool:
    """Whether the gather's index must be broadcast to the result's shape (an axis of its own that
    is neither 1 nor x's): take_along_axis broadcasts length-1 axes itself."""
    return any(i not in (1, before_shape[d]) for d, i in enumerate(step.term.shape) if d != step.dim)


def _along_axes(step: ScatterAlong) -> int:
    """How many leading axes _along_at indexes: up to dim where the index does not vary after it (the
    scatter then moves rows), else all."""
    dim, shape, src = step.dim, step.shape, step.src_shape
    rows = all(n == 1 for n in step.term.shape[dim + 1:]) and tuple(src[dim + 1:]) == tuple(shape[dim + 1:])
    return dim + 1 if rows else len(shape)


class _Static:
    """A value passed to jax.jit as a static argument (fill=): compared by type and repr, so that a NaN
    finds the program compiled for it."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def _key(self) -> tuple:
        return type(self.value), repr(self.value)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Static) and self._key() == other._key()


_START = {"sum": "0", "mean": "0", "prod": "1",
          "max": "-jnp.inf if jnp.issubdtype({x}.dtype, jnp.inexact) else jnp.iinfo({x}.dtype).min",
          "min": "jnp.inf if jnp.issubdtype({x}.dtype, jnp.inexact) else jnp.iinfo({x}.dtype).max"}


def _combine_code(reduction: str, at: str, shape: tuple, count_shape: tuple, n: CodeNames) -> list[str]:
    """JaxBackend._combine with fill 0 and no into=, as lines that leave the result in ``n.x``."""
    x, out, counts = n.x, n.out, n.counts
    if reduction == "set":
        return ["# rearr first checks that no position is written twice ('set')",
                f"{x} = jnp.zeros({tup(shape)}, dtype={x}.dtype).at[{at}].set({x})"]
    acc = f"(jnp.float32 if {x}.dtype in (jnp.float16, jnp.bfloat16) else {x}.dtype)"  # as numpy's and torch's
    combine = f"{out}.at[{at}].{_AT[reduction]}"
    if reduction in _BOOL_AT:  # explain has no dtype: the choice that _combine makes, as a condition
        combine = f"({out}.at[{at}].{_BOOL_AT[reduction]} if {x}.dtype == jnp.bool_ else {combine})"
    lines = [f"{out} = jnp.full({tup(shape)}, {_START[reduction].format(x=x)}, dtype={acc})",
             f"{out} = {combine}({x}.astype({acc})).astype({x}.dtype)"]
    if reduction != "sum":  # the positions that nothing writes hold fill (0)
        lines.append(f"{counts} = jnp.zeros({tup(count_shape)}, jnp.int32).at[{at}].add(1)")
    if reduction == "mean":
        lines.append(f"{out} = {out} / jnp.maximum({counts}, 1).astype({x}.dtype)")
    if reduction != "sum":
        lines.append(f"{out} = jnp.where({counts} == 0, jnp.asarray(0, {x}.dtype), {out})")
    return lines + [f"{x} = {out}"]


BACKEND = JaxBackend
