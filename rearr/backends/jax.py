"""jax backend: the Array API backend's steps, with gathers and scatters in jax's own terms.

jax arrays (and jax's tracers, under ``jax.jit``, ``jax.vmap``, ``jax.grad``) come
here rather than to the generic Array API backend, for three things the standard
does not give: scatter, through ``x.at[...]``; a gather along an axis that keeps
the index at its own shape (``take_along_axis`` broadcasts it, so XLA moves rows,
not elements); and index checks that work on a traced index, which has no
values while jax traces. An indexed plan is one ``jax.jit`` program (see
program()), made once per plan: an eager call is one dispatch, and inside a
user's ``jit`` it is inlined into the user's program.

The checks (docs/backends.md, "jax"): an index with values (eager, or a
constant inside a trace) is read on the host and a bad value is the RearrError
that numpy gives. A traced index is checked inside the program: a reduction
finds whether any value is out of range (or, under 'set', any position written
twice), and a ``lax.cond`` calls back to Python only then, where the same
RearrError is raised; jax reports it as a ``JaxRuntimeError`` from the call.
The callback is a ``jax.pure_callback`` whose result (a 0) the wrap of negative
values reads, so that jax keeps it: a ``debug.callback`` is an effect, and an
effect takes every call of the jitted program off jax's fast dispatch path. Only
where no result reads the index (an axis of length 0, an empty result: XLA drops
that work, and the pure callback with it) is the check kept by an effect, an
``io_callback`` (_on_host_always, _keep_checks). A traced unsigned index that
the cast to the index dtype could wrap is checked the same way before the cast
(convert_index), and the error names the value passed.

With check_bounds=False nothing is checked: the promise of every backend
(docs/language.md, "Index values"). The gathers fill (``mode="fill"``) and the
scatters drop (``mode="drop"``) what lies outside the positions they index, so a
broken promise reads and writes nothing outside the arrays; where a plan indexes
flat rows, a value beyond its axis is a position of the next row.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

from ..errors import RearrError
from ..planning.plan import (
    AdvancedIndex,
    Expand,
    GatherAlong,
    IndexTerm,
    IndexUse,
    Permute,
    Reduce,
    Reshape,
    ScatterAlong,
    ScatterRows,
    TakeRows,
)
from . import _code, _common
from . import array_api as _aa
from . import numpy as _numpy
from ._code import CodeNames, tup
from .array_api import ArrayApiBackend
from .contract import IndexEnv
from .contract import native_calls as _compile

name = "jax"
TENSOR: type = type(None)  # jax's concrete array class, bound by load()
INDEXES_OTHER = False



def load() -> None:
    """Bind jax (the registry calls this once, when the first jax array arrives)."""
    global jax, jnp, lax, np, io_callback, TENSOR, _Tracer, _autodiff
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.experimental import io_callback

    from . import _jax_autodiff as _autodiff  # imports jax

    _aa.load()
    TENSOR = type(jnp.zeros(()))
    _Tracer = jax.core.Tracer


def accepts(x: object) -> bool:
    module = type(x).__module__
    return module.startswith(("jax.", "jaxlib.")) and hasattr(type(x), "__array_namespace__")


def to_numpy(x: Any) -> Any:
    try:
        return np.asarray(x)
    except (TypeError, ValueError, AttributeError, RuntimeError) as e:  # a tracer, a PRNG key array ...
        if "key<" in str(getattr(x, "dtype", "")):
            raise RearrError(f"a jax PRNG key array holds no numbers: {str(e)[:200]}", code="RA500",
                             hint="asnumpy(jax.random.key_data(key))") from None
        raise _aa.not_for_numpy("jax", x, e) from None


def _has_values(t: Any) -> bool:
    """Whether t holds values that Python can read now (not a tracer of jit, vmap or grad)."""
    return not isinstance(t, _Tracer)


# --- the run-time check of a traced index -------------------------------------------


def _each_example(check: Callable, seen: tuple) -> Callable:
    """The host function that runs ``check`` on each example of the arrays that stand for ``seen``
    (vmap adds leading axes to them)."""
    shapes = [tuple(a.shape) for a in seen]

    def on_host(*arrays) -> None:
        arrays = [np.asarray(a).reshape((-1, *shape)) for a, shape in zip(arrays, shapes)]
        for example in zip(*arrays):
            check(*example)

    return on_host


def _on_host_if(bad: Any, keep: Any, check: Callable, *seen: Any) -> Any:
    """``keep``, passed through Python on the host when ``bad`` (a traced scalar) is true, where
    ``check(*seen)`` (numpy arrays; keep itself when seen is empty) raises the RearrError.

    check returns None for values that are fine: under ``vmap`` jax runs both branches of the cond,
    and check sees every example. The result takes keep's place in the caller's computation, which
    keeps the callback in the program."""
    seen = seen or (keep,)
    check_each = _each_example(check, seen)

    def on_host(k, *arrays):
        check_each(*arrays)
        return np.asarray(k)

    def call(k, *arrays):
        return jax.pure_callback(on_host, jax.ShapeDtypeStruct(k.shape, k.dtype), k, *arrays,
                                 vmap_method="broadcast_all")

    return lax.cond(bad, call, lambda k, *arrays: k, keep, *seen)


def _on_host_always(check: Callable, *seen: Any) -> None:
    """``check(*seen)`` on the host on every run, as an effect: for a check whose result nothing would
    read (XLA drops what an empty result does not need, a pure callback with it). An effect takes the
    program off jax's fast dispatch path, so only such programs have one."""
    io_callback(_each_example(check, seen), None, *seen, ordered=False)


def _first_where(a, bad) -> tuple[int, tuple[int, ...]] | None:
    """The value of a at the first position where bad holds, and that position; None if none. len(),
    not .size: argwhere of a 0-d array (an example of a 0-d index) has one row of no coordinates."""
    at = np.argwhere(bad)
    if not len(at):
        return None
    position = tuple(int(b) for b in at[0])
    return int(a[position]), position


def _raise_out_of_range(use: IndexUse, text: str, a) -> None:
    n = use.length
    found = _first_where(a, (a < -n) | (a >= n))
    if found:
        raise _common.out_of_range(use, text, *found)


def _raise_beyond(name: str, text: str, bits: int, a) -> None:
    found = _first_where(a, a > 2 ** (bits - 1) - 1)
    if found:
        raise _common.beyond_index_range(name, text, *found, bits)


def convert_index(value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
    """The Array API backend's conversion. A traced unsigned index whose values the cast to the index
    dtype could wrap (uint32 to int32 without x64, uint64 to int64) is checked before it, inside the
    program, and the error names the value as passed; with check_bounds=False it is cast as it is."""
    if isinstance(value, _Tracer) and mode and jnp.issubdtype(value.dtype, jnp.unsignedinteger):
        dtype = _aa._index_dtype(jnp)
        have, want = jnp.iinfo(value.dtype), jnp.iinfo(dtype)
        if have.max > want.max:
            # The cast reads the check's 0: a check that the program drops is no check.
            zero = _on_host_if(jnp.any(value > want.max), jnp.zeros((), dtype),
                               functools.partial(_raise_beyond, name, text, want.bits), value)
            return value.astype(dtype) + zero
    return _aa.convert_index(value, like, name, text, mode)


def check_index(t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
    """Bounds check, and negative values counted from the end: on the host when t has values,
    else inside the program (see the module's docstring). Every mode checks so: jax's arrays are
    read on the host only when they already have values there."""
    n = use.length
    if math.prod(t.shape) == 0:
        return t
    if _has_values(t):
        a = np.asarray(t)  # no copy on the CPU
        # One reduction in the common case: read as unsigned, negative values become huge.
        if int(a.view(f"u{a.itemsize}").max()) < n:
            return t
        return t if _numpy.check_index(a, use, text) is a else jnp.where(t < 0, t + n, t)
    if n == 0:  # every value is out of range, and nothing that XLA keeps reads one: see _on_host_always
        _on_host_always(functools.partial(_raise_out_of_range, use, text), t)
        return t
    # The check's result is the 0 that the wrap of negative values compares with (the cond keeps it only
    # where it is used): a scalar through the cond, and no copy of the index, which XLA makes for an
    # array that passes through one.
    zero = _on_host_if(jnp.any((t < -n) | (t >= n)), jnp.zeros((), t.dtype),
                       functools.partial(_raise_out_of_range, use, text), t)
    return jnp.where(t < zero, t + n, t)


def _raise_duplicates(names: str, text: str, flat) -> None:
    if np.unique(flat).size != flat.size:
        raise _common.duplicate_under_set(names, text)


def _unique(keep: Any, flat: Any, names: str, text: str) -> Any:
    """keep, once flat (the 1-d positions that 'set' writes) is known to hold no position twice."""
    if flat.shape[0] < 2:
        return keep
    check = functools.partial(_raise_duplicates, names, text)
    if _has_values(flat):
        check(np.asarray(flat))
        return keep
    s = jnp.sort(flat)
    return _on_host_if(jnp.any(s[1:] == s[:-1]), keep, check, flat)


# --- gathers -------------------------------------------------------------------


def _index_of(c: IndexTerm, arrays: dict, like) -> Any:
    """The term's array (the index, or an arange, viewed as c.shape, times its stride)."""
    return _aa._term(c, IndexEnv("", arrays), jnp, like)


def _broadcasts(step: GatherAlong, before_shape: tuple) -> bool:
    """Whether the gather's index must be broadcast to the result's shape (an axis of its own that
    is neither 1 nor x's): take_along_axis broadcasts length-1 axes itself."""
    return any(i not in (1, before_shape[d]) for d, i in enumerate(step.term.shape) if d != step.dim)


def _gather(step: GatherAlong):
    """take_along_axis with the index at its own shape (its length-1 axes broadcast): one gather of rows."""
    dim, term, shape = step.dim, step.term, step.shape

    def run(x, env):
        idx = _index_of(term, env.indices, x)
        if _broadcasts(step, x.shape):
            idx = jnp.broadcast_to(idx, shape)
        return jnp.take_along_axis(x, idx, axis=dim, mode="fill")

    return run


# --- scatters ------------------------------------------------------------------

_AT = {"sum": "add", "mean": "add", "prod": "multiply", "max": "max", "min": "min", "set": "set"}
_BOOL_AT = {"sum": "max", "prod": "min"}  # jax adds and multiplies no bools: or and and, as numpy's ufuncs do


def _accumulator(dtype) -> Any:
    """float16 and bfloat16 accumulate in float32, as numpy's and torch's scatters do."""
    return jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype


def _combine(reduction: str, x, at: tuple, shape: tuple, count_at: tuple, count_shape: tuple, base, fill):
    """out.at[at] combines x into an array of ``shape`` (from base, or the reduction's identity), as
    numpy's backend does: 'mean' divides by the counts (+1 with into=), and the positions that nothing
    writes hold fill. The counts live at ``count_at`` in an array of ``count_shape`` that broadcasts
    against shape."""
    if reduction == "set":
        out = jnp.full(shape, fill, x.dtype) if base is None else base
        return out.at[at].set(x, mode="drop")
    acc = _accumulator(x.dtype)
    start = _numpy._identity(reduction, np.dtype(acc))  # where numpy's scatter starts, for the same values
    out = base.astype(acc) if base is not None else jnp.full(shape, start, acc)
    if reduction == "prod" and jnp.issubdtype(acc, jnp.inexact):  # jax's own has no derivative here
        out = _autodiff.product_at(out, at, x.astype(acc))
    else:
        op = _BOOL_AT.get(reduction, _AT[reduction]) if x.dtype == jnp.bool_ else _AT[reduction]
        out = getattr(out.at[at], op)(x.astype(acc), mode="drop")
    untouched_matter = base is None and (fill != 0 or reduction != "sum")
    counts = None
    if reduction == "mean" or untouched_matter:
        counts = jnp.zeros(count_shape, jnp.int32).at[count_at].add(1, mode="drop")
    out = out.astype(x.dtype)  # rounded once, at the end
    if reduction == "mean":
        divisor = counts + 1 if base is not None else jnp.maximum(counts, 1)
        out = out / divisor.astype(x.dtype)
    if untouched_matter:
        out = jnp.where(counts == 0, jnp.asarray(fill, x.dtype), out)
    return out


def _compile_into(steps: tuple) -> tuple:
    """The steps that bring into= to the scatter's layout, on this backend."""
    return _compile(steps, BACKEND)


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


def _scatter_call(core, into_calls: tuple, names: tuple[str, ...], dup_names: str, positions=None):
    """The step's call(x, env): core(x, arrays, base, fill=, text=, checked=) jitted, those three static.
    Under 'set' (``positions(x, arrays)`` gives the 1-d positions written), indices with values are
    checked for duplicates here, on the host, where the error is numpy's; core checks the others."""
    def unwrapped(x, arrays, base, *, fill, text, checked):
        return core(x, arrays, base, fill=fill.value, text=text, checked=checked)

    jitted = jax.jit(unwrapped, static_argnames=("fill", "text", "checked"))

    def run(x, env):
        arrays = {k: env.indices[k] for k in names}
        base = _common.arranged_into(env, into_calls)
        checked = positions is not None and all(_has_values(a) for a in arrays.values())
        if checked:
            _unique(None, positions(x, arrays), dup_names, env.text)
        return jitted(x, arrays, base, fill=_Static(env.fill), text=env.text, checked=checked)

    return run


def scatterrows(step: ScatterRows):
    reduction, rows, terms, space = step.reduction, step.rows, step.terms, step.space
    into_calls = _compile_into(step.into)
    names = tuple(dict.fromkeys(c.index for c in terms if c.index is not None))
    dup_names = ",".join(c.index for c in terms if c.index)  # as numpy's error names them
    ones = (1,) * len(terms)

    def positions(x, arrays):
        return _aa._rows(terms, ones, space, IndexEnv("", arrays), jnp, x)

    def core(x, arrays, base, *, fill, text, checked):
        flat = positions(x, arrays)
        if reduction == "set" and not checked:
            flat = _unique(flat, flat, dup_names, text)
        return _combine(reduction, x, (flat,), (rows, x.shape[1]), (flat,), (rows, 1), base, fill)

    return _scatter_call(core, into_calls, names, dup_names, positions if reduction == "set" else None)


def _along_at(step: ScatterAlong, x, arrays: dict) -> tuple:
    """The index tuple of out.at[...] for a scatter along step.dim: an arange for each axis before dim,
    the index, and the axes after dim left whole where the index does not vary along them (then the
    scatter moves rows, as code written by hand does), else an arange for each of them too."""
    dim, src, last = step.dim, step.src_shape, _along_axes(step)
    idx = _index_of(step.term, arrays, x)
    grid = [jnp.reshape(jnp.arange(src[d]), tuple(src[d] if k == d else 1 for k in range(last)))
            for d in range(last) if d != dim]
    return (*grid[:dim], jnp.reshape(idx, idx.shape[:last]), *grid[dim:])


def _along_axes(step: ScatterAlong) -> int:
    """How many leading axes _along_at indexes: up to dim where the index does not vary after it (the
    scatter then moves rows), else all."""
    dim, shape, src = step.dim, step.shape, step.src_shape
    rows = all(n == 1 for n in step.term.shape[dim + 1:]) and tuple(src[dim + 1:]) == tuple(shape[dim + 1:])
    return dim + 1 if rows else len(shape)


def _along_positions(step: ScatterAlong, at: tuple) -> Any:
    """The flat position in the output of each element that the scatter writes (for 'set'), 1-d;
    positions of whole rows stand for the row."""
    strides = [math.prod(step.shape[d + 1:len(at)]) for d in range(len(at))]
    total = sum(a * s for a, s in zip(at, strides))
    return jnp.reshape(jnp.broadcast_to(total, tuple(step.src_shape[:len(at)])), (-1,))


def scatteralong(step: ScatterAlong):
    reduction, shape, dim = step.reduction, step.shape, step.dim
    into_calls = _compile_into(step.into)
    names = (step.term.index,) if step.term.index is not None else ()
    dup_names = step.term.index or ""

    def positions(x, arrays):
        return _along_positions(step, _along_at(step, x, arrays))

    def core(x, arrays, base, *, fill, text, checked):
        at = _along_at(step, x, arrays)
        if reduction == "set" and not checked:
            at = (*at[:dim], _unique(at[dim], _along_positions(step, at), dup_names, text), *at[dim + 1:])
        return _combine(reduction, x, at, shape, at, shape, base, fill)

    return _scatter_call(core, into_calls, names, dup_names, positions if reduction == "set" else None)


# --- the plan as one program ----------------------------------------------------------

_INDEXING = (TakeRows, GatherAlong, AdvancedIndex, ScatterRows, ScatterAlong)


def _nothing(*arrays: Any) -> None:
    """The host side of _keep_checks' effect: the checks have run by then."""


def _keep_checks(x: Any, env: IndexEnv) -> Any:
    """x, the plan's result. An empty result reads no index, so XLA would drop the in-program checks
    of the traced indices (pure callbacks) with the work that led to it: an effect that reads each
    checked index keeps them. Decided while jax traces; a non-empty result, or check_bounds=False,
    has no effect added. (jax.checkpoint refuses an effect: a checkpointed function whose result is
    empty cannot take a traced, checked index.)"""
    if env.checks and math.prod(x.shape) == 0:
        traced = [t for t in env.indices.values() if isinstance(t, _Tracer) and math.prod(t.shape)]
        if traced:
            io_callback(_nothing, None, *traced, ordered=False)
    return x


def program(steps: tuple, calls: tuple) -> tuple:
    """An indexed plan as one jax.jit program of x and the call's values: an eager call is one dispatch,
    and the reshapes between its steps are not copies. Not a plan that scatters with 'set' (an eager
    call reads its positions on the host, for numpy's error) or reduces with a callable (which may
    not trace), nor one without indices."""
    if not any(isinstance(s, _INDEXING) for s in steps):
        return calls
    for s in steps:
        if isinstance(s, ScatterRows | ScatterAlong) and s.reduction == "set" or \
                isinstance(s, Reduce) and callable(s.reduction):
            return (*calls, _keep_checks)  # run op by op: a tracer here is the caller's

    def run_all(x, indices, into, *, fill, text, checks, keep):
        env = IndexEnv(text, indices, fill.value, into, checks)
        for f in calls:
            x = f(x, env)
        return _keep_checks(x, env) if keep else x

    jitted = jax.jit(run_all, static_argnames=("fill", "text", "checks", "keep"))

    def run(x: Any, env: IndexEnv) -> Any:
        # keep: the caller traces an index, whose check runs in the program (an eager call's indices were
        # checked on the host, and an effect would only cost it, and refuse jax.checkpoint)
        keep = bool(env.checks) and any(isinstance(t, _Tracer) for t in env.indices.values())
        return jitted(x, env.indices, env.into, fill=_Static(env.fill), text=env.text, checks=env.checks,
                      keep=keep)

    return (run,)


# --- the code explain prints --------------------------------------------------------
# jnp is jax.numpy. The plain steps print the Array API backend's code with jnp for its namespace.


def _jnp(template):
    def code(step, before, n: CodeNames) -> list[str]:
        return [re.sub(r"\bxp\.", "jnp.", line) for line in template(step, before, n)]

    return code


def code_einsum(plan, operands: tuple[str, ...]) -> list[str]:
    return _code.einsum_lines(plan, operands, lambda spec, ops: f"jnp.einsum({spec}, {ops})")


def _term_code(t: IndexTerm, n: CodeNames) -> str:
    return re.sub(r"\bxp\.", "jnp.", _aa._term_code(t, n))


def code_gatheralong(step: GatherAlong, before, n: CodeNames) -> list[str]:
    idx = _term_code(step.term, n)
    if _broadcasts(step, before.shape):
        idx = f"jnp.broadcast_to({idx}, {tup(step.shape)})"
    return [f"{n.x} = jnp.take_along_axis({n.x}, {idx}, axis={step.dim})"]


_START = {"sum": "0", "mean": "0", "prod": "1",
          "max": "-jnp.inf if jnp.issubdtype({x}.dtype, jnp.inexact) else jnp.iinfo({x}.dtype).min",
          "min": "jnp.inf if jnp.issubdtype({x}.dtype, jnp.inexact) else jnp.iinfo({x}.dtype).max"}


def _combine_code(reduction: str, at: str, shape: tuple, count_shape: tuple, n: CodeNames) -> list[str]:
    """_combine with fill 0 and no into=, as lines that leave the result in ``n.x``."""
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


def code_scatterrows(step: ScatterRows, before, n: CodeNames) -> list[str]:
    flat = _jnp(lambda s, b, names: [_aa._rows_code(s.terms, (1,) * len(s.terms), s.space, names)])(step, before, n)
    return flat + _combine_code(step.reduction, n.flat, (step.rows, before.shape[1]), (step.rows, 1), n)


def code_scatteralong(step: ScatterAlong, before, n: CodeNames) -> list[str]:
    dim, src, last = step.dim, step.src_shape, _along_axes(step)
    grid = [_code.view(f"jnp.arange({src[d]})", (src[d],), tuple(src[d] if k == d else 1 for k in range(last)),
                       "reshape") for d in range(last) if d != dim]
    idx = _code.view(_term_code(step.term, n), step.term.shape, step.term.shape[:last], "reshape")
    at = ", ".join((*grid[:dim], idx, *grid[dim:])) + ("," if last == 1 else "")
    return _combine_code(step.reduction, at, step.shape, step.shape, n)


# --- the contract ----------------------------------------------------------------

STEPS = {
    Reshape: _aa.reshape,
    Permute: _aa.permute,
    Reduce: _aa.reduce,
    Expand: _aa.expand,
    TakeRows: _aa.takerows,
    GatherAlong: _gather,
    AdvancedIndex: _aa.advancedindex,
    ScatterRows: scatterrows,
    ScatterAlong: scatteralong,
}

# Each step kind -> the code explain prints for it, written next to the factory that runs it.
CODE = {
    Reshape: _jnp(_aa.code_reshape),
    Permute: _jnp(_aa.code_permute),
    Reduce: _jnp(_aa.code_reduce),
    Expand: _jnp(_aa.code_expand),
    TakeRows: _jnp(_aa.code_takerows),
    GatherAlong: code_gatheralong,
    AdvancedIndex: _jnp(_aa.code_advancedindex),
    ScatterRows: code_scatterrows,
    ScatterAlong: code_scatteralong,
    "einsum": code_einsum,  # (plan of rearr.planning.einsum, operand names) -> lines
}


class JaxBackend(ArrayApiBackend):
    """The Array API backend (dtype questions, index conversion, the plain steps, stack, concat,
    einsum, matmul) with jax's own gathers, scatters, checks and one program per indexed plan."""

    name = name
    STEPS, CODE, INDEXES_OTHER = STEPS, CODE, INDEXES_OTHER
    accepts, to_numpy, convert_index, check_index, program = map(
        staticmethod, (accepts, to_numpy, convert_index, check_index, program))

    def load(self) -> None:
        load()
        self.TENSOR = TENSOR


BACKEND = JaxBackend()
