"""numpy backend: each plan step as one or two native numpy calls, and the code explain prints for it.

numpy is bound by load(), which the registry calls when the first array
arrives: explain reads the code templates (the CODE table) without numpy.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

from ..errors import RearrError
from ..plan import (
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
from . import compile_plan as _compile
from ._code import Names, args, tup
from .contract import IndexEnv

if TYPE_CHECKING:
    import numpy as np

name = "numpy"


def load() -> None:
    """Bind numpy and what is made of it (the registry calls this once numpy is imported)."""
    global np, TENSOR, _UFUNC, _c_einsum
    import numpy as np

    try:  # what np.einsum(optimize=False) calls, without its Python wrapper (~0.7 us a call)
        from numpy._core.multiarray import c_einsum as _c_einsum
    except ImportError:  # numpy < 2
        _c_einsum = np.einsum

    TENSOR = np.ndarray
    _UFUNC = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def accepts(x: object) -> bool:
    if isinstance(x, np.ma.MaskedArray):
        raise masked_input("a masked array")
    return isinstance(x, np.ndarray | np.generic)


def masked_input(what: str) -> RearrError:
    # numpy's own functions honour a mask in some calls (x.sum) and drop it in others (np.add.at,
    # np.asarray): rather than a result that depends on which one a plan uses, refuse it.
    return RearrError(
        f"{what} is not accepted: numpy honours masks in some of the calls a plan uses and drops "
        "them in others",
        code="RA500",
        hint="pass x.filled(v) with the value masked entries should count as (0 for a sum), or "
        "np.ma.getdata(x); to keep a mask, run the pattern on np.ma.getmaskarray(x) as well and "
        "rebuild with np.ma.array(data, mask=mask)",
    )


def stack(xs: list) -> np.ndarray:
    return np.stack(list(xs))


def concat(xs: list, axis: int) -> np.ndarray:
    return np.concatenate(list(xs), axis=axis)




def einsum(spec: str, *xs: np.ndarray) -> np.ndarray:
    return _c_einsum(spec, *xs) if len(xs) <= 2 else np.einsum(spec, *xs, optimize=True)


def to_numpy(x: np.ndarray) -> np.ndarray:
    return np.asarray(x)


def is_float(x: np.ndarray) -> bool:
    return np.issubdtype(x.dtype, np.inexact)


INDEXES_OTHER = True  # take / fancy indexing move datetime64, object and string arrays too
_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}


def dtype_kind(x: np.ndarray) -> str:
    """The dtype's kind for rearr.policy: bool, int, uint, float, complex or other."""
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


def code_reshape(step: Reshape, before, n: Names) -> list[str]:
    return [f"{n.x} = {n.x}.reshape({args(step.shape)})"]


def permute(step: Permute):
    perm = step.perm
    return lambda x, env: x.transpose(perm)


def code_permute(step: Permute, before, n: Names) -> list[str]:
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


def code_expand(step: Expand, before, n: Names) -> list[str]:
    return [f"{n.x} = np.broadcast_to({n.x}, {tup(step.shape)})"]


def reduce(step: Reduce):
    r, axes = step.reduction, step.axes
    if callable(r):
        return lambda x, env: r(x, axes)
    if r == "mean":  # rearr.policy refuses integer means before the plan runs
        return lambda x, env: x.mean(axis=axes)
    fn = {"sum": np.sum, "max": np.amax, "min": np.amin, "prod": np.prod, "any": np.any, "all": np.all}[r]
    return lambda x, env: fn(x, axis=axes)


def code_reduce(step: Reduce, before, n: Names) -> list[str]:
    x, r, axes = n.x, step.reduction, step.axes
    if callable(r):  # the callable that was passed, bound to this name
        return [f"{x} = {n.reduction}({x}, {tup(axes)})"]
    dims = str(axes[0]) if len(axes) == 1 else tup(axes)
    if r == "mean":
        return [f"{x} = {x}.mean(axis={dims})"]
    fn = {"max": "amax", "min": "amin"}.get(r, r)
    return [f"{x} = np.{fn}({x}, axis={dims})"]


# --- indices -----------------------------------------------------------------


def convert_index(value: object, like: np.ndarray, name: str, text: str) -> np.ndarray:
    if isinstance(value, np.ma.MaskedArray):  # np.asarray would drop the mask
        raise masked_input(f"a masked index {name!r}")
    try:
        t = np.asarray(value)
    except (TypeError, ValueError):  # ragged lists
        raise _common.not_an_index(name, value, text) from None
    if not np.issubdtype(t.dtype, np.integer):
        raise _common.bad_index_dtype(name, t.dtype, text)
    i = t.astype(np.intp, copy=False)
    if t.dtype.kind == "u" and t.dtype.itemsize >= i.dtype.itemsize and t.size and (i < 0).any():
        at = tuple(int(k) for k in np.argwhere(i < 0)[0])  # values >= 2**63 wrapped: report the one passed
        raise _common.beyond_int64(name, text, int(t[at]), at)
    return i


def check_index(t: np.ndarray, use: IndexUse, text: str) -> np.ndarray:
    """Bounds check, and negative values counted from the end."""
    if t.size == 0:
        return t
    n = use.length
    lo, hi = int(t.min()), int(t.max())
    if lo < -n or hi >= n:
        bad = np.argwhere((t < -n) | (t >= n))[0]
        raise _common.out_of_range(use, text, int(t[tuple(bad)]), tuple(int(b) for b in bad))
    return np.where(t < 0, t + n, t) if lo < 0 else t


def _term(c: IndexTerm, env: IndexEnv) -> np.ndarray:
    perm, shape = _common.term_layout(c)
    if c.index is None:
        t = np.arange(c.length)
    else:
        t = env.indices[c.index]
        if perm is not None:
            t = np.transpose(t, perm)
    if t.shape != shape:
        t = t.reshape(shape)
    return t * c.stride if c.stride != 1 else t


def _term_code(t: IndexTerm, n: Names) -> str:
    if t.index is None:
        expr, have = f"np.arange({t.length})", (t.length,)
    else:
        expr, have = _code.index_expr(t, n, lambda e, perm: f"np.transpose({e}, {tup(perm)})")
    expr = _code.view(expr, have, t.shape, "reshape")
    return f"{expr} * {t.stride}" if t.stride != 1 else expr


def _row_positions(terms: tuple[IndexTerm, ...], space: tuple[int, ...], env: IndexEnv) -> np.ndarray:
    """The row that each point of the index space moves: the sum of the terms, as a 1-d array."""
    total = None
    for c in terms:
        t = _term(c, env)
        total = t if total is None else total + t
    assert total is not None
    return np.broadcast_to(total, space).reshape(-1)


def _row_positions_code(terms: tuple[IndexTerm, ...], space: tuple[int, ...], n: Names) -> tuple[list[str], str]:
    return _code.row_positions(terms, space, n, _term_code, lambda e, space: f"np.broadcast_to({e}, {tup(space)})")


def takerows(step: TakeRows):
    terms, space = step.terms, step.space
    return lambda x, env: np.take(x, _row_positions(terms, space, env), axis=0)


def code_takerows(step: TakeRows, before, n: Names) -> list[str]:
    pre, flat = _row_positions_code(step.terms, step.space, n)
    return pre + [f"{n.x} = np.take({n.x}, {flat}, axis=0)"]


def gatheralong(step: GatherAlong):
    dim, term, shape = step.dim, step.term, step.shape
    return lambda x, env: np.take_along_axis(x, np.broadcast_to(_term(term, env), shape), axis=dim)


def code_gatheralong(step: GatherAlong, before, n: Names) -> list[str]:
    return [f"{n.x} = np.take_along_axis({n.x}, np.broadcast_to({_term_code(step.term, n)}, {tup(step.shape)}), "
            f"axis={step.dim})"]


def advancedindex(step: AdvancedIndex):
    terms = step.terms
    return lambda x, env: x[tuple(_term(c, env) for c in terms)]


def code_advancedindex(step: AdvancedIndex, before, n: Names) -> list[str]:
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


def _combine_rows(reduction: str, x: np.ndarray, flat: np.ndarray, rows: int, base, env: IndexEnv, names: str):
    """Combine rows of x (n, width) into rows `flat` of a (rows, width) result."""
    fill = env.fill
    if reduction == "set":
        if flat.size > 1:
            s = np.sort(flat)
            dup = np.flatnonzero(s[1:] == s[:-1])
            if dup.size:
                raise _common.duplicate_under_set(names, env.text)
        out = np.full((rows, x.shape[1]), fill, dtype=x.dtype) if base is None else np.array(base)
        out[flat] = x
        return out
    untouched_matter = base is None and (fill != 0 or reduction != "sum")
    counts = np.bincount(flat, minlength=rows) if (reduction == "mean" or untouched_matter) else None
    if reduction == "mean":
        sums = np.zeros((rows, x.shape[1]), dtype=x.dtype)
        np.add.at(sums, flat, x)
        if base is not None:
            return (base + sums) / (counts + 1)[:, None].astype(x.dtype)
        out = sums / np.maximum(counts, 1)[:, None].astype(x.dtype)
    else:
        out = np.array(base) if base is not None else np.full((rows, x.shape[1]), _identity(reduction, x.dtype),
                                                               dtype=x.dtype)
        _UFUNC[reduction].at(out, flat, x)
    if untouched_matter:
        out[counts == 0] = fill
    return out


def _combine_rows_code(reduction: str, flat: str, rows: int, width: int, n: Names) -> list[str]:
    """_combine_rows with fill 0 and no into=, as lines that leave the result in ``n.x``."""
    x, out, counts = n.x, n.out, n.counts
    full = f"np.full(({rows}, {width}), {{}}, dtype={x}.dtype)"
    if reduction == "set":
        return ["# rearr first checks that flat holds no row twice ('set')",
                f"{out} = {full.format(0)}", f"{out}[{flat}] = {x}", f"{x} = {out}"]
    lines = [] if reduction == "sum" else [f"{counts} = np.bincount({flat}, minlength={rows})"]
    if reduction == "mean":
        lines += [f"{n.sums} = np.zeros(({rows}, {width}), dtype={x}.dtype)",
                  f"np.add.at({n.sums}, {flat}, {x})",
                  f"{out} = {n.sums} / np.maximum({counts}, 1)[:, None].astype({x}.dtype)"]
    else:
        start = {"sum": "0", "prod": "1", "max": "-np.inf", "min": "np.inf"}[reduction]
        ufunc = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}[reduction]
        note = {"max": "  # (integers: the dtype's lowest value)", "min": "  # (integers: the dtype's highest value)"}
        lines += [f"{out} = {full.format(start)}{note.get(reduction, '')}", f"np.{ufunc}.at({out}, {flat}, {x})"]
    if reduction != "sum":
        lines.append(f"{out}[{counts} == 0] = 0")
    return lines + [f"{x} = {out}"]


def scatterrows(step: ScatterRows):
    reduction, rows, terms, space = step.reduction, step.rows, step.terms, step.space
    into_calls = _compile(step.into, sys.modules[__name__])
    names = ",".join(c.index for c in terms if c.index)

    def run(x, env):
        flat = _row_positions(terms, space, env)
        return _combine_rows(reduction, x, flat, rows, _common.arranged_into(env, into_calls), env, names)

    return run


def code_scatterrows(step: ScatterRows, before, n: Names) -> list[str]:
    pre, flat = _row_positions_code(step.terms, step.space, n)
    return pre + _combine_rows_code(step.reduction, flat, step.rows, before.shape[1], n)


def _along_offsets(shape: tuple[int, ...], dim: int) -> tuple[list[int], list[tuple[int, int, list[int]]]]:
    """The row-major strides of ``shape``, and (length, stride, view shape) of each axis but ``dim``."""
    strides = [int(math.prod(shape[d + 1:])) for d in range(len(shape))]
    axes = [(n, strides[d], [n if k == d else 1 for k in range(len(shape))]) for d, n in enumerate(shape) if d != dim]
    return strides, axes


def scatteralong(step: ScatterAlong):
    reduction, dim, term, shape, src_shape = step.reduction, step.dim, step.term, step.shape, step.src_shape
    into_calls = _compile(step.into, sys.modules[__name__])
    # numpy has no scatter along an axis with a reduction: flat positions and ufunc.at. The
    # positions along the other axes do not depend on the index, so they are computed once here.
    strides, axes = _along_offsets(shape, dim)
    offset = sum((np.arange(n) * stride).reshape(unit) for n, stride, unit in axes)
    size = int(np.prod(shape))

    def run(x, env):
        flat = np.broadcast_to(offset + _term(term, env) * strides[dim], src_shape).reshape(-1)
        base = _common.arranged_into(env, into_calls)
        base = None if base is None else base.reshape(-1, 1)
        out = _combine_rows(reduction, x.reshape(-1, 1), flat, size, base, env, term.index or "")
        return out.reshape(shape)

    return run


def code_scatteralong(step: ScatterAlong, before, n: Names) -> list[str]:
    x, shape = n.x, step.shape
    strides, axes = _along_offsets(shape, step.dim)
    offset = " + ".join(_code.view(f"np.arange({m})", (m,), tuple(unit), "reshape") + (f" * {s}" if s != 1 else "")
                        for m, s, unit in axes)
    idx = _term_code(step.term, n)
    idx = f"{_code.paren(idx)} * {strides[step.dim]}" if strides[step.dim] != 1 else idx
    size = math.prod(shape)
    lines = [f"{n.offset} = {offset}  # once per plan: the flat positions along the other axes"] if axes else []
    total = f"{n.offset} + {idx}" if axes else idx
    lines += [f"{n.flat} = np.broadcast_to({total}, {tup(step.src_shape)}).reshape(-1)", f"{x} = {x}.reshape(-1, 1)"]
    combine = _combine_rows_code(step.reduction, n.flat, size, 1, n)[:-1]  # the result stays in n.out
    return lines + combine + [f"{x} = {n.out}.reshape({args(shape)})"]


# --- the contract ----------------------------------------------------------------

# Each step kind of rearr.plan -> the factory above that lowers it (checked by backends.contract).
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
}
