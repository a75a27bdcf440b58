"""numpy backend: each plan step as one or two native numpy calls, and the code explain prints for it.

numpy is bound by load(), which the registry calls when the first array
arrives: explain reads the code templates (the CODE table) without numpy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

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
from ._code import CodeNames, args, tup
from .contract import Backend, IndexEnv
from .contract import native_calls as _compile

if TYPE_CHECKING:
    import numpy as np

name = "numpy"


def load() -> None:
    """Bind numpy and what is made of it (the registry calls this once numpy is imported)."""
    global np, TENSOR, _UFUNC, _c_einsum, _INTP, _FLOAT32
    import numpy as np

    try:  # what np.einsum(optimize=False) calls, without its Python wrapper's cost per call
        from numpy._core.multiarray import c_einsum as _c_einsum
    except ImportError:  # numpy < 2
        _c_einsum = np.einsum

    TENSOR = np.ndarray
    _INTP = np.dtype(np.intp)
    _FLOAT32 = np.dtype(np.float32)
    _UFUNC = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def accepts(x: object) -> bool:
    if _common.masked(x):
        raise _common.masked_input("a masked array")
    if isinstance(x, np.matrix):  # its reshape keeps two dimensions: (2, 3) -> "a b -> a b 1" stayed (2, 3)
        raise RearrError("an np.matrix is not accepted: it stays 2-d whatever shape a call asks for",
                         code="RA500", hint="pass np.asarray(m)")
    return isinstance(x, np.ndarray | np.generic)


def stack(xs: list) -> np.ndarray:
    return np.stack(list(xs))


def concat(xs: list, axis: int) -> np.ndarray:
    return np.concatenate(list(xs), axis=axis)




def einsum(spec: str, *xs: np.ndarray) -> np.ndarray:
    return _c_einsum(spec, *xs) if len(xs) <= 2 else np.einsum(spec, *xs, optimize=True)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a, b)


def code_einsum(plan, operands: tuple[str, ...]) -> list[str]:
    optimize = ", optimize=True" if len(operands) > 2 else ""  # as einsum above: c_einsum is optimize=False
    return _code.einsum_lines(plan, operands, lambda spec, ops: f"np.einsum({spec}, {ops}{optimize})")


def to_numpy(x: np.ndarray) -> np.ndarray:
    return np.asarray(x)


def is_float(x: np.ndarray) -> bool:
    return x.dtype.kind in "fc"  # np.issubdtype(dtype, np.inexact), without its microsecond


INDEXES_OTHER = True  # take / fancy indexing move datetime64, object and string arrays too
EINSUM_MATMUL = False  # np.einsum's own loops: its results stay what they were (the tests' oracle)
_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}


def dtype_kind(x: np.ndarray) -> str:
    """The dtype's kind for rearr.planning.policy: bool, int, uint, float, complex or other."""
    return _KINDS.get(x.dtype.kind, "other")


def dtype_range(x: np.ndarray) -> tuple:
    """The least and greatest finite value of the dtype (of a number kind)."""
    if x.dtype.kind == "b":
        return 0, 1
    info = np.finfo(x.dtype) if x.dtype.kind in "fc" else np.iinfo(x.dtype)
    return info.min.item() if hasattr(info.min, "item") else info.min, \
        info.max.item() if hasattr(info.max, "item") else info.max


def itemsize(x: np.ndarray) -> int:
    return x.dtype.itemsize


# --- plain steps -------------------------------------------------------------


# Array methods, not np.reshape / np.transpose: several times less overhead per call.


def reshape(step: Reshape):
    shape = step.shape
    return lambda x, env: x.reshape(shape)


def code_reshape(step: Reshape, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = {n.x}.reshape({args(step.shape)})"]


def permute(step: Permute):
    perm = step.perm
    return lambda x, env: x.transpose(perm)


def code_permute(step: Permute, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = {n.x}.transpose({tup(step.perm)})"]


def expand(step: Expand):
    shape = step.shape

    def run(x, env):
        try:
            return np.broadcast_to(x, shape)
        except ValueError as e:  # numpy's iterator refuses views of more than about 2**62 elements
            raise RearrError(f"numpy cannot make a view of shape {shape}: {e}", code="RA305",
                             hint="use smaller lengths, or torch, whose expand has no such limit") from None

    return run


def code_expand(step: Expand, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = np.broadcast_to({n.x}, {tup(step.shape)})"]


def reduce(step: Reduce):
    r, axes = step.reduction, step.axes
    if callable(r):
        return lambda x, env: r(x, axes)
    if r == "mean":  # rearr.planning.policy refuses integer means; numpy's mean adds float16 in float32 itself
        return lambda x, env: x.mean(axis=axes)
    if r in ("sum", "prod"):
        fn = np.sum if r == "sum" else np.prod

        def total(x, env):
            accumulate = _REDUCE_DTYPE.get(x.dtype.char)
            if accumulate is None:
                return fn(x, axis=axes)
            out = fn(x, axis=axes, dtype=accumulate)
            return out.astype(np.float16) if x.dtype.char == "e" else out
        return total
    fn = {"max": np.amax, "min": np.amin, "any": np.any, "all": np.all}[r]
    return lambda x, env: fn(x, axis=axes)


# The dtype that sum and prod accumulate in where numpy's own choice differs from torch's: float16 in
# float32, rounded once at the end (torch's "opmath"; numpy's own mean does it too), and the unsigned
# ints below 64 bits in int64, as torch does (numpy would give uint64). By dtype.char.
_REDUCE_DTYPE = {"e": "float32", "B": "int64", "H": "int64", "I": "int64"}


def code_reduce(step: Reduce, before, n: CodeNames) -> list[str]:
    x, r, axes = n.x, step.reduction, step.axes
    if callable(r):  # the callable that was passed, bound to this name
        return [f"{x} = {n.reduction}({x}, {tup(axes)})"]
    dims = str(axes[0]) if len(axes) == 1 else tup(axes)
    if r == "mean":  # float16 in float32: numpy's own mean does it, dask's (which prints this too) does not
        return [f"{x} = {x}.mean(axis={dims}, dtype=np.float32).astype(np.float16) if {x}.dtype.name == 'float16' "
                f"else {x}.mean(axis={dims})"]
    if r in ("sum", "prod"):  # reduce()'s _REDUCE_DTYPE, read from x (explain has no dtype)
        out = n.out
        return ["# as torch: float16 accumulates in float32 and is rounded once at the end, uint8/16/32 in int64",
                f"{out} = np.{r}({x}, axis={dims}, dtype={{'float16': np.float32, 'uint8': np.int64, "
                f"'uint16': np.int64, 'uint32': np.int64}}.get({x}.dtype.name))",
                f"{x} = {out}.astype(np.float16) if {x}.dtype.name == 'float16' else {out}"]
    fn = {"max": "amax", "min": "amin"}.get(r, r)
    return [f"{x} = np.{fn}({x}, axis={dims})"]


# --- indices -----------------------------------------------------------------


# The step kinds whose native call checks an index itself with rearr's rule: advanced indexing takes
# -n <= i < n, negative values counting from the end, and raises IndexError for any other value
# (see rearr.run.indexed.run). Not the row steps, nor a large ScatterAlong: they index flat positions,
# where a bad value lands in the neighbouring row.


def checks_natively(t: np.ndarray) -> bool:
    """Whether the native calls may check index t (checks_step_natively): always, on numpy."""
    return True


def ready_index(t: object, like: np.ndarray) -> bool:
    """Whether t is an index that convert_index returns as it is: rearr.run's path for a call seen
    before (numpy's native calls check every index: see checks_natively)."""
    return t.__class__ is np.ndarray and t.dtype is _INTP


def convert_index(value: object, like: np.ndarray, name: str, text: str, mode: bool | str = True) -> np.ndarray:
    # mode (check_bounds=): every mode reads the values here, in host memory, where a read costs no sync
    if value.__class__ is np.ndarray and value.dtype is _INTP:
        return value  # the common case, without a call (numpy's built-in dtypes are singletons)
    if _common.masked(value):  # np.asarray would drop the mask
        raise _common.masked_index(name, text)
    try:
        t = np.asarray(value)
    except (TypeError, ValueError):  # ragged lists
        raise _common.not_an_index(name, value, text) from None
    if t.dtype.kind not in "iu":  # np.issubdtype(t.dtype, np.integer), without its microsecond
        raise _common.bad_index_dtype(name, t.dtype, text)
    i = t.astype(np.intp, copy=False)
    at = wrapped_at(t, i)
    if at is not None:  # report the value passed, not the wrapped one
        raise _common.beyond_index_range(name, text, int(t[at]), at, 8 * i.dtype.itemsize)
    return i


def wrapped_at(t, cast) -> tuple[int, ...] | None:
    """The position of the first value of the integer array t that the cast to ``cast`` (t.astype(...))
    changed, or None: uint64 to int64 turns values >= 2**63 negative, int64 to int32 wraps. Also run
    on dask's blocks, on workers where load() has not run: numpy is imported here."""
    import numpy as np

    if t.dtype.kind == "u" and t.dtype.itemsize >= cast.dtype.itemsize:
        changed = cast < 0
    elif t.dtype.itemsize > cast.dtype.itemsize:
        changed = cast != t
    else:
        return None  # the cast's dtype holds every value of t's
    if not changed.any():
        return None
    return tuple(int(k) for k in np.argwhere(changed)[0])


def check_index(t: np.ndarray, use: IndexUse, text: str, mode: bool | str = True) -> np.ndarray:
    """Bounds check, and negative values counted from the end (the exact check in every mode: see
    convert_index)."""
    if t.size == 0:
        return t
    n = use.length
    # One reduction in the common case: read as unsigned, the values 0 <= i < n stay below n and the
    # negative ones become huge, so a maximum below n puts the whole index in range.
    if t.dtype == np.intp and int(t.view(np.uintp).max()) < n:
        return t
    lo, hi = int(t.min()), int(t.max())
    if lo < -n or hi >= n:
        bad = np.argwhere((t < -n) | (t >= n))[0]
        raise _common.out_of_range(use, text, int(t[tuple(bad)]), tuple(int(b) for b in bad))
    return np.where(t < 0, t + n, t) if lo < 0 else t


def _term(c: IndexTerm):
    """env -> the term's array: the index (or arange) viewed as c.shape, times the stride.
    Made once per plan: the layout is decided here, and an arange is made here once."""
    perm, shape, stride = *_common.term_layout(c), c.stride
    if c.index is None:
        const = np.arange(c.length).reshape(shape) * stride
        const.flags.writeable = False  # shared by every call
        return lambda env: const
    name = c.index
    if _common.index_as_passed(c):
        return lambda env: env.indices[name]

    def term(env: IndexEnv) -> np.ndarray:
        t = env.indices[name]
        if perm is not None:
            t = t.transpose(perm)
        if t.shape != shape:
            t = t.reshape(shape)
        return t * stride if stride != 1 else t

    return term


def _term_code(t: IndexTerm, n: CodeNames) -> str:
    if t.index is None:
        expr, have = f"np.arange({t.length})", (t.length,)
    else:
        expr, have = _code.index_expr(t, n, lambda e, perm: f"{_code.paren(e)}.transpose({tup(perm)})")
    expr = _code.view(expr, have, t.shape, "reshape")
    return f"{expr} * {t.stride}" if t.stride != 1 else expr


def _row_positions(terms: tuple[IndexTerm, ...], space: tuple[int, ...]):
    """env -> the row that each point of the index space moves: the sum of the terms, as a 1-d array."""
    first, *rest = [_term(c) for c in terms]

    def rows(env: IndexEnv) -> np.ndarray:
        total = first(env)
        for f in rest:
            total = total + f(env)
        if total.shape != space:  # the terms span the index space between them, so this is rare
            total = np.broadcast_to(total, space)
        return total.reshape(-1)

    return rows


def _row_positions_code(terms: tuple[IndexTerm, ...], space: tuple[int, ...], n: CodeNames) -> tuple[list[str], str]:
    return _code.row_positions(terms, space, n, _term_code, lambda e, space: f"np.broadcast_to({e}, {tup(space)})")


def takerows(step: TakeRows):
    rows = _row_positions(step.terms, step.space)
    return lambda x, env: np.take(x, rows(env), axis=0)


def code_takerows(step: TakeRows, before, n: CodeNames) -> list[str]:
    pre, flat = _row_positions_code(step.terms, step.space, n)
    return pre + [f"{n.x} = np.take({n.x}, {flat}, axis=0)"]


def _grid(shape: tuple[int, ...]) -> list[np.ndarray]:
    """arange(n) for each axis of shape, viewed to broadcast along that axis only."""
    return [np.arange(n).reshape([n if k == d else 1 for k in range(len(shape))]) for d, n in enumerate(shape)]


def _grid_code(shape: tuple[int, ...], dim: int) -> list[str]:
    return [_code.view(f"np.arange({m})", (m,), tuple(m if k == d else 1 for k in range(len(shape))), "reshape")
            for d, m in enumerate(shape) if d != dim]


def gatheralong(step: GatherAlong):
    dim, shape = step.dim, step.shape
    # np.take_along_axis(x, broadcast_to(index, shape), dim) is x[grid..., index, grid...]: the same
    # advanced indexing, with the grid made once here instead of on every call.
    grid, index = _grid(shape), _term(step.term)
    before, after = tuple(grid[:dim]), tuple(grid[dim + 1:])
    return lambda x, env: x[before + (index(env),) + after]


def code_gatheralong(step: GatherAlong, before, n: CodeNames) -> list[str]:
    grid = _grid_code(step.shape, step.dim)
    parts = grid[:step.dim] + [_term_code(step.term, n)] + grid[step.dim:]
    return [f"{n.x} = {n.x}[{', '.join(parts)}]"]


def advancedindex(step: AdvancedIndex):
    terms = [_term(c) for c in step.terms]
    return lambda x, env: x[tuple(c(env) for c in terms)]


def code_advancedindex(step: AdvancedIndex, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = {n.x}[{', '.join(_term_code(t, n) for t in step.terms)}]"]


def _identity(reduction: str, dtype: np.dtype):
    if reduction == "prod":
        return 1
    if reduction == "sum" or reduction == "mean" or reduction == "set":
        return 0
    big = reduction == "min"
    if np.issubdtype(dtype, np.floating):
        return np.inf if big else -np.inf
    if dtype == np.bool_:
        return big
    info = np.iinfo(dtype)
    return info.max if big else info.min


def _accumulator(dtype: np.dtype) -> np.dtype:
    """The dtype a scatter accumulates in: float32 for float16, as torch does on CPU (its "opmath"
    type), so that 3000 ones sum to 3000 and not to float16's 2048 on both backends."""
    return _FLOAT32 if dtype.char == "e" else dtype  # "e": float16, in either byte order


def _combine_rows(reduction: str, x: np.ndarray, flat: np.ndarray, rows: int, base, env: IndexEnv, names: str):
    """Combine rows of x (n, width) into rows `flat` of a (rows, width) result."""
    fill = env.fill
    width = x.shape[1]
    if reduction == "set":
        if flat.size > 1:
            s = np.sort(flat)
            dup = np.flatnonzero(s[1:] == s[:-1])
            if dup.size:
                raise _common.duplicate_under_set(names, env.text)
        out = np.full((rows, width), fill, dtype=x.dtype) if base is None else np.array(base)
        out[flat] = x
        return out
    acc = _accumulator(x.dtype)
    if base is not None:
        out = base.astype(acc, order="C")  # a copy (into= is never modified), flat-indexable as out.reshape(-1)
    else:
        start = _identity(reduction, acc)
        out = np.zeros((rows, width), dtype=acc) if start == 0 else np.full((rows, width), start, dtype=acc)
    # One ufunc.at over element positions: numpy's 1-D ufunc.at is several times faster than on rows.
    pos = flat if width == 1 else (flat[:, None] * width + np.arange(width)).reshape(-1)
    ufunc = _UFUNC["sum" if reduction == "mean" else reduction]
    target, values = out.reshape(-1), x.reshape(-1).astype(acc, copy=False)
    if reduction in ("max", "min"):
        with np.errstate(invalid="ignore"):  # NaN propagates, as in torch; numpy's 1-D loop would warn
            ufunc.at(target, pos, values)
    else:
        ufunc.at(target, pos, values)
    untouched_matter = base is None and (fill != 0 or reduction != "sum")
    counts = _counts(flat, rows) if (reduction == "mean" or untouched_matter) else None
    if acc != x.dtype:
        out = out.astype(x.dtype)  # rounded once, at the end
    if reduction == "mean":
        # As torch: the rounded sums divided by counts of the same dtype; into= counts once more.
        divisor = counts + 1 if base is not None else np.maximum(counts, 1)
        out /= divisor[:, None].astype(x.dtype)
    if untouched_matter:
        out[counts == 0] = fill
    return out


def _counts(flat: np.ndarray, rows: int) -> np.ndarray:
    """How many of the flat rows land on each of ``rows`` rows. Under check_bounds=False a row may be
    out of range (ufunc.at before this refuses it, unless its element position wrapped around int64):
    bincount's refusal (negative), failed allocation (huge) or longer result is that index's fault."""
    try:
        counts = np.bincount(flat, minlength=rows)
    except (ValueError, MemoryError):
        counts = None
    if counts is None or counts.shape[0] != rows:
        raise IndexError(f"a row index is out of range for {rows} rows")
    return counts


def _combine_rows_code(reduction: str, flat: str, rows: int, width: int, n: CodeNames) -> list[str]:
    """_combine_rows with fill 0 and no into=, as lines that leave the result in ``n.x``.

    explain has no dtype, so the start value and the accumulator are printed as expressions of x's."""
    x, out, counts = n.x, n.out, n.counts
    if reduction == "set":
        return ["# rearr first checks that flat holds no row twice ('set')",
                f"{out} = np.zeros(({rows}, {width}), dtype={x}.dtype)", f"{out}[{flat}] = {x}", f"{x} = {out}"]
    ufunc = {"sum": "add", "mean": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}[reduction]
    if reduction in ("max", "min"):  # _identity: the dtype's own extreme (float16 in float32 gives the same values)
        extreme = {"max": "lowest: -inf, iinfo(dtype).min, False", "min": "highest: inf, iinfo(dtype).max, True"}
        lines = [f"{out} = np.full(({rows}, {width}), np.ma.{reduction}imum_fill_value({x}), dtype={x}.dtype)"
                 f"  # the dtype's {extreme[reduction]}"]
    else:
        lines = _accumulator_code(f"np.{'ones' if reduction == 'prod' else 'zeros'}(({rows}, {width}), ", x, out)
    pos = flat
    if width != 1:  # element positions of the rows: numpy's 1-d ufunc.at is the fast one
        pos = n.pos
        lines.append(f"{pos} = ({flat}[:, None] * {width} + np.arange({width})).reshape(-1)")
    lines.append(f"np.{ufunc}.at({out}.reshape(-1), {pos}, {x}.reshape(-1))")
    if reduction not in ("max", "min"):
        lines.append(_rounded_code(x, out))
    if reduction != "sum":
        lines.append(f"{counts} = np.bincount({flat}, minlength={rows})")
    if reduction == "mean":
        lines.append(f"{out} /= np.maximum({counts}, 1)[:, None].astype({x}.dtype)")
    elif reduction != "sum":
        lines.append(f"{out}[{counts} == 0] = 0")
    return lines + [f"{x} = {out}"]


def _accumulator_code(call: str, x: str, out: str) -> list[str]:
    """``out = call dtype=...)`` in _accumulator's dtype for x (``.name``: float16 in either byte order)."""
    return ["# float16 accumulates in float32 and is rounded once at the end, as torch does",
            f"{out} = {call}dtype=np.float32 if {x}.dtype.name == 'float16' else {x}.dtype)"]


def _rounded_code(x: str, out: str) -> str:
    return f"{out} = {out}.astype({x}.dtype, copy=False)"


def scatterrows(step: ScatterRows):
    reduction, rows, terms, space = step.reduction, step.rows, step.terms, step.space
    into_calls = _compile(step.into, BACKEND)
    names = ",".join(c.index for c in terms if c.index)
    row_positions = _row_positions(terms, space)

    def run(x, env):
        flat = row_positions(env)
        return _combine_rows(reduction, x, flat, rows, _common.arranged_into(env, into_calls), env, names)

    return run


def code_scatterrows(step: ScatterRows, before, n: CodeNames) -> list[str]:
    pre, flat = _row_positions_code(step.terms, step.space, n)
    return pre + _combine_rows_code(step.reduction, flat, step.rows, before.shape[1], n)


def _along_offsets(shape: tuple[int, ...], dim: int) -> tuple[list[int], list[tuple[int, int, list[int]]]]:
    """The row-major strides of ``shape``, and (length, stride, view shape) of each axis but ``dim``."""
    strides = [int(math.prod(shape[d + 1:])) for d in range(len(shape))]
    axes = [(n, strides[d], [n if k == d else 1 for k in range(len(shape))]) for d, n in enumerate(shape) if d != dim]
    return strides, axes


# Up to this many source elements a 'sum' along an axis is np.add.at with one index array per axis:
# faster than the flat positions below while small, slower when large (benchmarks/README.md has the
# crossing), and numpy checks each value against its axis itself.
_SMALL_SCATTER = 256


def _sums_by_axes(step: object) -> bool:
    """Whether scatteralong lowers step to np.add.at on one index array per axis (a small 'sum')."""
    return isinstance(step, ScatterAlong) and step.reduction == "sum" and math.prod(step.src_shape) <= _SMALL_SCATTER


def checks_step_natively(step: object) -> bool:
    """Whether step's native call refuses every bad value of its index itself: take_along_axis and
    x[idx], and the small 'sum' along an axis (np.add.at on per-axis index arrays); not the large
    ScatterAlong, which writes flat positions (see rearr.run.indexed.natively_checked)."""
    return isinstance(step, GatherAlong | AdvancedIndex) or _sums_by_axes(step)


def _axis_grid(shape: tuple[int, ...], dim: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The positions along each axis of shape but dim, as open-grid aranges: those before dim, those after."""
    grid = []
    for d, m in enumerate(shape):
        if d != dim:  # (dim's length may be huge: the dtype check, which bounds it, runs after this)
            g = np.arange(m).reshape([m if k == d else 1 for k in range(len(shape))])
            g.flags.writeable = False  # shared by every call
            grid.append(g)
    return grid[:dim], grid[dim:]


def _sum_by_axes(step: ScatterAlong):
    """A small 'sum' along an axis: np.add.at(out, (aranges..., index, aranges...), x)."""
    dim, shape, src_shape = step.dim, step.shape, step.src_shape
    into_calls = _compile(step.into, BACKEND)
    before, after = _axis_grid(shape, dim)
    index, expand = _term(step.term), step.term.shape != src_shape

    def run(x, env):
        idx = index(env)
        at = (*before, np.broadcast_to(idx, src_shape) if expand else idx, *after)
        if env.into is None and env.fill == 0 and x.dtype.char != "e":  # the common call, as written by hand
            out = np.zeros(shape, dtype=x.dtype)
            np.add.at(out, at, x)
            return out
        acc = _accumulator(x.dtype)
        base = _common.arranged_into(env, into_calls)
        out = np.zeros(shape, dtype=acc) if base is None else base.astype(acc)  # a copy: into= stays as it is
        np.add.at(out, at, x)
        if acc != x.dtype:
            out = out.astype(x.dtype)  # rounded once, at the end
        if base is None and env.fill != 0:  # the positions that nothing writes hold fill
            hit = np.zeros(shape, dtype=bool)
            hit[at] = True
            out[~hit] = env.fill
        return out

    return run


def scatteralong(step: ScatterAlong):
    if _sums_by_axes(step):
        return _sum_by_axes(step)
    reduction, dim, term, shape, src_shape = step.reduction, step.dim, step.term, step.shape, step.src_shape
    into_calls = _compile(step.into, BACKEND)
    # numpy has no scatter along an axis with a reduction: flat positions and ufunc.at. The
    # positions along the other axes do not depend on the index, so they are computed once here.
    strides, axes = _along_offsets(shape, dim)
    offset = sum((np.arange(m) * stride).reshape(unit) for m, stride, unit in axes)
    size = int(np.prod(shape))
    index = _term(term.replace(stride=strides[dim]))

    def run(x, env):
        flat = offset + index(env)
        if flat.shape != src_shape:  # only without other axes (offset 0) or with a broadcast index
            flat = np.broadcast_to(flat, src_shape)
        flat = flat.reshape(-1)
        base = _common.arranged_into(env, into_calls)
        base = None if base is None else base.reshape(-1, 1)
        out = _combine_rows(reduction, x.reshape(-1, 1), flat, size, base, env, term.index or "")
        return out.reshape(shape)

    return run


def code_scatteralong(step: ScatterAlong, before, n: CodeNames) -> list[str]:
    x, shape = n.x, step.shape
    if _sums_by_axes(step):
        idx = _term_code(step.term, n)
        if step.term.shape != step.src_shape:
            idx = f"np.broadcast_to({idx}, {tup(step.src_shape)})"
        grid = [idx if d == step.dim else _code.view(f"np.arange({m})", (m,), tuple(m if k == d else 1 for k in
                range(len(shape))), "reshape") for d, m in enumerate(shape)]
        return [*_accumulator_code(f"np.zeros({tup(shape)}, ", x, n.out),
                f"np.add.at({n.out}, ({', '.join(grid)}{',' if len(grid) == 1 else ''}), {x})",
                _rounded_code(x, n.out), f"{x} = {n.out}"]
    strides, axes = _along_offsets(shape, step.dim)
    offset = " + ".join(_code.view(f"np.arange({m})", (m,), tuple(unit), "reshape") + (f" * {s}" if s != 1 else "")
                        for m, s, unit in axes)
    idx = _term_code(step.term, n)
    idx = f"{_code.paren(idx)} * {strides[step.dim]}" if strides[step.dim] != 1 else idx
    size = math.prod(shape)
    lines = [f"{n.offset} = {offset}  # once per plan: the flat positions along the other axes"] if axes else []
    total = f"{n.offset} + {idx}" if axes else idx
    # As the backend: broadcast only where offset + index does not span the source's shape already.
    spans = tuple(max(a, b) for a, b in zip(step.term.shape, [1 if d == step.dim else m for d, m in enumerate(shape)]
                                            if axes else [1] * len(shape))) == tuple(step.src_shape)
    total = f"({total})" if spans else f"np.broadcast_to({total}, {tup(step.src_shape)})"
    lines += [f"{n.flat} = {total}.reshape(-1)", f"{x} = {x}.reshape(-1, 1)"]
    combine = _combine_rows_code(step.reduction, n.flat, size, 1, n)[:-1]  # the result stays in n.out
    return lines + combine + [f"{x} = {n.out}.reshape({args(shape)})"]


# --- the contract ----------------------------------------------------------------

# Each step kind of rearr.planning.plan -> the factory above that lowers it (checked by backends.contract).
STEPS = {
    Reshape: reshape,
    Permute: permute,
    Reduce: reduce,
    Expand: expand,
    TakeRows: takerows,
    GatherAlong: gatheralong,
    AdvancedIndex: advancedindex,
    ScatterRows: scatterrows,
    ScatterAlong: scatteralong,
}

# Each step kind -> the code explain prints for it, written next to the factory that runs it.
CODE = {
    Reshape: code_reshape,
    Permute: code_permute,
    Reduce: code_reduce,
    Expand: code_expand,
    TakeRows: code_takerows,
    GatherAlong: code_gatheralong,
    AdvancedIndex: code_advancedindex,
    ScatterRows: code_scatterrows,
    ScatterAlong: code_scatteralong,
    "einsum": code_einsum,  # (plan of rearr.planning.einsum, operand names) -> lines
}


class NumpyBackend(Backend):
    """numpy's hooks: the functions above (dask's backend is this one with what dask does differently)."""

    name = name
    STEPS, CODE, INDEXES_OTHER, READY_INDEXES = STEPS, CODE, INDEXES_OTHER, True
    accepts, stack, concat, einsum, to_numpy = map(staticmethod, (accepts, stack, concat, einsum, to_numpy))
    matmul, EINSUM_MATMUL = staticmethod(matmul), EINSUM_MATMUL
    convert_index, check_index, ready_index = map(staticmethod, (convert_index, check_index, ready_index))
    checks_natively, checks_step_natively = map(staticmethod, (checks_natively, checks_step_natively))
    dtype_kind, dtype_range, itemsize = map(staticmethod, (dtype_kind, dtype_range, itemsize))

    def load(self) -> None:
        load()
        self.TENSOR = TENSOR


BACKEND = NumpyBackend()
