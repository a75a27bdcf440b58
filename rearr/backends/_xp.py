"""Array code written once against a namespace ``xp``, as array-api-compat writes it: the Array API
backend and jax call it with their namespace (array_api_strict, jax.numpy), numpy's scatters with numpy.

Nothing here imports a framework; the caller passes the namespace, and explain's templates of the same
code take the name the printed code gives it (``xp``, ``jnp``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..planning.plan import IndexTerm
from ._code import CodeNames, index_expr, tup
from ._common import term_layout

_INDEX_DTYPE: dict[str, object] = {}


def index_dtype(xp: ModuleType) -> Any:
    """The namespace's default integer dtype (int64, or int32 for jax without x64): one per library."""
    dtype = _INDEX_DTYPE.get(xp.__name__)
    if dtype is None:
        # asarray of an int, not arange: under jax.jit it is a constant, where arange is an op of the program
        dtype = _INDEX_DTYPE[xp.__name__] = xp.asarray(0).dtype
    return dtype


def device(x: Any) -> Any:
    """x's device, as array_api_compat reads it for any library."""
    import array_api_compat

    return array_api_compat.device(x)


# --- index terms: an index (or an arange) viewed as the term's shape, times its stride -------------------


def term(c: IndexTerm, indices: dict, xp: ModuleType, like: Any) -> Any:
    """The term's array: its index (permuted, viewed as c.shape), or an arange on like's device, times c.stride."""
    perm, shape = term_layout(c)
    if c.index is None:
        t = xp.arange(c.length, dtype=index_dtype(xp), device=device(like))
    else:
        t = indices[c.index]
        if perm is not None:
            t = xp.permute_dims(t, perm)
    if t.shape != shape:
        t = xp.reshape(t, shape)
    return t * c.stride if c.stride != 1 else t


def term_code(t: IndexTerm, n: CodeNames, xp: str = "xp") -> str:
    if t.index is None:  # the namespace's default integer dtype is index_dtype's
        expr, have = f"{xp}.arange({t.length}, device={n.x}.device)", (t.length,)
    else:
        expr, have = index_expr(t, n, lambda e, perm: f"{xp}.permute_dims({e}, {tup(perm)})")
    if have != t.shape:
        expr = f"{xp}.reshape({expr}, {tup(t.shape)})"
    return f"{expr} * {t.stride}" if t.stride != 1 else expr


def rows(terms: tuple[IndexTerm, ...], strides: tuple[int, ...], space: tuple[int, ...], indices: dict,
         xp: ModuleType, like: Any) -> Any:
    """The flat row numbers sum(term * stride) over the index space, as a 1-d array."""
    total = None
    for c, stride in zip(terms, strides):
        t = term(c, indices, xp, like)
        t = t * stride if stride != 1 else t
        total = t if total is None else total + t
    return xp.reshape(xp.broadcast_to(total, space), (-1,))


def rows_code(terms: tuple[IndexTerm, ...], strides: tuple[int, ...], space: tuple[int, ...], n: CodeNames,
              xp: str = "xp") -> str:
    """rows() as the line that leaves the row numbers in ``n.flat``."""
    total = " + ".join(term_code(c, n, xp) + (f" * {stride}" if stride != 1 else "")
                       for c, stride in zip(terms, strides))
    return f"{n.flat} = {xp}.reshape({xp}.broadcast_to({total}, {tup(space)}), (-1,))"


# --- a scatter's combine: what numpy's and jax's scatters do around their at-style update ---------------


def identity(reduction: str, dtype: Any) -> object:
    """Where a scatter's accumulation starts for the reduction, in a numpy dtype (jax's dtypes are)."""
    import numpy as np

    if reduction == "prod":
        return 1
    if reduction in ("sum", "mean", "set"):
        return 0
    big = reduction == "min"
    if np.issubdtype(dtype, np.floating):
        return np.inf if big else -np.inf
    if dtype == np.bool_:
        return big
    info = np.iinfo(dtype)
    return info.max if big else info.min


def combine(xp: ModuleType, reduction: str, x: Any, base: Any, fill: object, shape: tuple, acc: Any,
            put: Callable[[Any, str, Any], Any], count: Callable[[], Any],
            copy: Callable[[Any, Any], Any] = lambda base, dtype: base.astype(dtype)) -> Any:
    """x combined by reduction into a result of ``shape``: from a copy of base (into=, never modified)
    or the reduction's identity, in the accumulator dtype ``acc`` (float16 in float32), rounded once at
    the end; 'mean' divides by the counts (+1 with into=: into counts as one value); the positions that
    nothing writes hold fill. The backend gives the at-style update, ``put(out, reduction, values) ->
    out``, and ``count()``: how many values land on each position, broadcastable against out."""
    if reduction == "set":
        out = xp.full(shape, fill, dtype=x.dtype) if base is None else copy(base, x.dtype)
        return put(out, "set", x)
    if base is not None:
        out = copy(base, acc)
    else:
        start = identity(reduction, acc)
        out = xp.zeros(shape, dtype=acc) if start == 0 else xp.full(shape, start, dtype=acc)
    out = put(out, reduction, x.astype(acc) if acc != x.dtype else x)
    untouched_matter = base is None and (fill != 0 or reduction != "sum")
    counts = count() if reduction == "mean" or untouched_matter else None
    if acc != x.dtype:
        out = out.astype(x.dtype)  # rounded once, at the end
    if reduction == "mean":  # as torch: the rounded sums divided by counts of the same dtype
        divisor = counts + 1 if base is not None else xp.maximum(counts, 1)
        out = out / divisor.astype(x.dtype)
    if untouched_matter:
        out = xp.where(counts == 0, xp.asarray(fill, dtype=x.dtype), out)
    return out if out.dtype == x.dtype else out.astype(x.dtype)  # numpy: the byte order x came in
