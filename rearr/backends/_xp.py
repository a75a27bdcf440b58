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


def fills(reduction: str, fill: object, has_base: bool) -> bool:
    """Whether a scatter's finish writes fill where nothing landed: without a base (into=), unless the
    identity already is that fill (a 'sum' with fill 0)."""
    return not has_base and (fill != 0 or reduction != "sum")


def counts_needed(reduction: str, fill: object, has_base: bool) -> bool:
    """Whether a scatter's finish reads how many values landed on each position: 'mean' divides by
    it, and fill goes where it is 0."""
    return reduction == "mean" or fills(reduction, fill, has_base)


def start(xp: ModuleType, reduction: str, dtype: Any, base: Any, fill: object, shape: tuple, acc: Any,
          copy: Callable[[Any, Any], Any] = lambda base, dtype: base.astype(dtype)) -> Any:
    """The array a scatter's writes land in: a copy of base (into=, never modified) or, without one,
    fill in ``dtype`` for 'set' and the reduction's identity in the accumulator dtype ``acc`` otherwise."""
    if reduction == "set":
        return xp.full(shape, fill, dtype=dtype) if base is None else copy(base, dtype)
    if base is not None:
        return copy(base, acc)
    first = identity(reduction, acc)
    return xp.zeros(shape, dtype=acc) if first == 0 else xp.full(shape, first, dtype=acc)


def finish(xp: ModuleType, reduction: str, out: Any, dtype: Any, counts: Any, has_base: bool, fill: object) -> Any:
    """A reduction's accumulated writes (``out``, in the accumulator dtype) as the scatter's result in
    ``dtype``: rounded once; 'mean' divided by the counts (+1 with a base: into= counts as one value);
    where nothing landed (counts == 0: a count or a bool "written" mark), fill. ``counts`` is read only
    where counts_needed says so."""
    if out.dtype != dtype:
        out = out.astype(dtype)  # rounded once, at the end
    if reduction == "mean":  # as torch: the rounded sums divided by counts of the same dtype
        divisor = counts + 1 if has_base else xp.maximum(counts, 1)
        out = out / divisor.astype(dtype)
    if fills(reduction, fill, has_base):
        out = xp.where(counts == 0, xp.asarray(fill, dtype=dtype), out)
    return out if out.dtype == dtype else out.astype(dtype)  # numpy: the byte order x came in


def combine(xp: ModuleType, reduction: str, x: Any, base: Any, fill: object, shape: tuple, acc: Any,
            put: Callable[[Any, str, Any], Any], count: Callable[[], Any],
            copy: Callable[[Any, Any], Any] = lambda base, dtype: base.astype(dtype)) -> Any:
    """x combined by reduction into a result of ``shape``: start, the backend's at-style update, finish
    (above; dask's scatter calls the three apart, once per block and output chunk). The backend gives
    ``put(out, reduction, values) -> out`` and ``count()``: how many values land on each position,
    broadcastable against out."""
    out = start(xp, reduction, x.dtype, base, fill, shape, acc, copy)
    if reduction == "set":
        return put(out, "set", x)
    out = put(out, reduction, x.astype(acc) if acc != x.dtype else x)
    has_base = base is not None
    counts = count() if counts_needed(reduction, fill, has_base) else None
    return finish(xp, reduction, out, x.dtype, counts, has_base, fill)
