"""numpy backend: each plan step as one or two native numpy calls."""

from __future__ import annotations

import sys

import numpy as np

from ..errors import RearrError
from ..planner import (
    AdvancedIndex,
    Coord,
    Expand,
    GatherAlong,
    IndexUse,
    Permute,
    Reduce,
    Reshape,
    ScatterAlong,
    ScatterRows,
    TakeRows,
)
from . import _common
from . import compile_plan as _compile

name = "numpy"
TENSOR = np.ndarray


def accepts(x: object) -> bool:
    return isinstance(x, np.ndarray | np.generic)


def stack(xs: list) -> np.ndarray:
    return np.stack(list(xs))


def concat(xs: list, axis: int) -> np.ndarray:
    return np.concatenate(list(xs), axis=axis)


def einsum(spec: str, *xs: np.ndarray) -> np.ndarray:
    return np.einsum(spec, *xs, optimize=len(xs) > 2)


def is_float(x: np.ndarray) -> bool:
    return x.dtype.kind in "fc"  # np.issubdtype(dtype, np.inexact), without its microsecond


# --- plain steps -------------------------------------------------------------


# Array methods, not np.reshape / np.transpose: several times less overhead per call.


def reshape(step: Reshape):
    shape = step.shape
    return lambda x, env: x.reshape(shape)


def permute(step: Permute):
    perm = step.perm
    return lambda x, env: x.transpose(perm)


def expand(step: Expand):
    shape = step.shape

    def run(x, env):
        try:
            return np.broadcast_to(x, shape)
        except ValueError as e:  # numpy's iterator refuses views of more than about 2**62 elements
            raise RearrError(f"numpy cannot make a view of shape {shape}: {e}", code="RA305",
                             hint="use smaller lengths, or torch, whose expand has no such limit") from None

    return run


def reduce(step: Reduce):
    r, axes = step.reduction, step.axes
    if callable(r):
        return lambda x, env: r(x, axes)
    if r == "mean":
        def mean(x, env):
            if not is_float(x):
                raise _common.mean_of_integers(x.dtype)
            return x.mean(axis=axes)
        return mean
    if r == "sum":
        def total(x, env):
            if x.dtype == np.float16:  # accumulate in float32, as torch does (numpy's own mean does too)
                return np.sum(x, axis=axes, dtype=np.float32).astype(np.float16)
            return np.sum(x, axis=axes)
        return total
    fn = {"max": np.amax, "min": np.amin, "prod": np.prod, "any": np.any, "all": np.all}[r]
    if r in ("max", "min"):
        def extreme(x, env):
            if np.iscomplexobj(x):
                raise _common.complex_order(r)
            return fn(x, axis=axes)
        return extreme
    return lambda x, env: fn(x, axis=axes)


# --- indices -----------------------------------------------------------------


def convert_index(value: object, like: np.ndarray, name: str, text: str) -> np.ndarray:
    try:
        t = np.asarray(value)
    except (TypeError, ValueError):  # ragged lists
        raise _common.not_an_index(name, value, text) from None
    if not np.issubdtype(t.dtype, np.integer):
        raise _common.bad_index_dtype(name, t.dtype, text)
    return t.astype(np.intp, copy=False)


def check_index(t: np.ndarray, use: IndexUse, text: str) -> np.ndarray:
    """Bounds check, and negative values counted from the end."""
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


def _coord(c: Coord):
    """env -> the coordinate's array: the index (or arange) viewed as c.shape, times the stride.
    Made once per plan: the layout is decided here, and an arange is made here once."""
    perm, shape, stride = *_common.coord_layout(c), c.stride
    if c.index is None:
        const = np.arange(c.length).reshape(shape) * stride
        const.flags.writeable = False  # shared by every call
        return lambda env: const
    name = c.index

    def coord(env: dict) -> np.ndarray:
        t = env[name]
        if perm is not None:
            t = t.transpose(perm)
        if t.shape != shape:
            t = t.reshape(shape)
        return t * stride if stride != 1 else t

    return coord


def _flat(coords: tuple[Coord, ...], space: tuple[int, ...]):
    """env -> the flat row positions (1-d) over the index space: the sum of the coordinates."""
    first, *rest = [_coord(c) for c in coords]

    def flat(env: dict) -> np.ndarray:
        total = first(env)
        for f in rest:
            total = total + f(env)
        if total.shape != space:  # the coordinates span the index space between them, so this is rare
            total = np.broadcast_to(total, space)
        return total.reshape(-1)

    return flat


def takerows(step: TakeRows):
    flat = _flat(step.coords, step.space)
    return lambda x, env: np.take(x, flat(env), axis=0)


def _grid(shape: tuple[int, ...]) -> list[np.ndarray]:
    """arange(n) for each axis of shape, viewed to broadcast along that axis only."""
    return [np.arange(n).reshape([n if k == d else 1 for k in range(len(shape))]) for d, n in enumerate(shape)]


def gatheralong(step: GatherAlong):
    dim, coord, shape = step.dim, step.coord, step.shape
    # np.take_along_axis(x, broadcast_to(index, shape), dim) is x[grid..., index, grid...]: the same
    # advanced indexing, with the grid made once here instead of on every call.
    grid, index = _grid(shape), _coord(coord)
    before, after = tuple(grid[:dim]), tuple(grid[dim + 1:])
    return lambda x, env: x[before + (index(env),) + after]


def advancedindex(step: AdvancedIndex):
    coords = [_coord(c) for c in step.coords]
    return lambda x, env: x[tuple(c(env) for c in coords)]


_UFUNC = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


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
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _scatter_flat(reduction: str, x: np.ndarray, flat: np.ndarray, rows: int, base, env: dict, names: str):
    """Combine rows of x (n, width) into rows `flat` of a (rows, width) result."""
    if reduction == "mean" and not is_float(x):
        raise _common.mean_of_integers(x.dtype)
    fill = env.get("fill", 0)
    width = x.shape[1]
    if reduction == "set":
        if flat.size > 1:
            s = np.sort(flat)
            dup = np.flatnonzero(s[1:] == s[:-1])
            if dup.size:
                raise _common.duplicate_under_set(names, env["text"])
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
    counts = np.bincount(flat, minlength=rows) if (reduction == "mean" or untouched_matter) else None
    if acc != x.dtype:
        out = out.astype(x.dtype)  # rounded once, at the end
    if reduction == "mean":
        # As torch: the rounded sums divided by counts of the same dtype; into= counts once more.
        divisor = counts + 1 if base is not None else np.maximum(counts, 1)
        out /= divisor[:, None].astype(x.dtype)
    if untouched_matter:
        out[counts == 0] = fill
    return out


def scatterrows(step: ScatterRows):
    reduction, rows, coords, space = step.reduction, step.rows, step.coords, step.space
    into_calls = _compile(step.into, sys.modules[__name__])
    names = ",".join(c.index for c in coords if c.index)
    flat_fn = _flat(coords, space)

    def run(x, env):
        flat = flat_fn(env)
        return _scatter_flat(reduction, x, flat, rows, _common.arranged_into(env, into_calls), env, names)

    return run


def scatteralong(step: ScatterAlong):
    reduction, dim, coord, shape, src_shape = step.reduction, step.dim, step.coord, step.shape, step.src_shape
    into_calls = _compile(step.into, sys.modules[__name__])
    # numpy has no scatter along an axis with a reduction: flat positions and ufunc.at. The
    # positions along the other axes do not depend on the index, so they are computed once here.
    strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
    offset = sum(g * strides[d] for d, g in enumerate(_grid(shape)) if d != dim)
    size = int(np.prod(shape))
    index = _coord(coord.replace(stride=strides[dim]))

    def run(x, env):
        flat = offset + index(env)
        if flat.shape != src_shape:  # only without other axes (offset 0) or with a broadcast index
            flat = np.broadcast_to(flat, src_shape)
        flat = flat.reshape(-1)
        base = _common.arranged_into(env, into_calls)
        base = None if base is None else base.reshape(-1, 1)
        out = _scatter_flat(reduction, x.reshape(-1, 1), flat, size, base, env, coord.index or "")
        return out.reshape(shape)

    return run
