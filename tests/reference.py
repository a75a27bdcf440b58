"""A reference interpreter for rearr patterns: slow, element by element, obvious.

It follows the *meaning* of a pattern (docs/language.md) and shares
no code with rearr's recipe, planner or backends; only rearr.syntax.parser.parse is
used, to turn the text into the IR.  Every operation is one loop:

    for every assignment of the loop axes (the input's elementary axes, with
    gathered axes replaced by the index axes they introduce, plus the output's
    new axes in repeat):
        input position  = row-major composition of each input dimension's axes,
                          a gathered axis taking idx[...] at that assignment
        output position = the same for the output dimensions, a scattered
                          axis taking idx[...] at that assignment
        out[output position] <- collect x[input position]

then every output position combines what it collected: exactly one value
(rearrange, repeat, gather), a reduction (reduce, scatter), or `fill` when it
collected nothing (scatter only).  Shapes are tiny in the tests, so the loop
over np.ndindex is fine.

`RefInvalid` means "this call is not valid": rearr must raise RearrError.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rearr.syntax import ir
from rearr.syntax.parser import parse

REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")
SCATTER_REDUCTIONS = ("sum", "mean", "max", "min", "prod", "set")
ELL = "…"  # prefix of the elementary names an ellipsis expands to


class RefInvalid(Exception):
    """The reference finds the call invalid; rearr must raise RearrError."""


# --- the pattern, as elementary axes -------------------------------------------------


@dataclass
class _Item:
    name: str  # elementary axis name (anonymous: '#value@col', ellipsis: '…0', '…1', ...)
    index: ir.Index | None = None


@dataclass
class _Side:
    dims: list[list[_Item]] = field(default_factory=list)  # each dim: its items, row-major
    ellipsis_dim: int | None = None  # position of a standalone '...' (before expansion)


def _side(operand: ir.Operand, anon: dict[str, int]) -> list[tuple[list[object], bool]]:
    """Raw dims: (items, is_group), an item being an ir.Axis, an anonymous axis' name or 'ELL'."""
    dims: list[tuple[list[object], bool]] = []
    for dim in operand.dims:
        if isinstance(dim, (ir.Star, ir.Skip)):
            raise RefInvalid("'*' and '_' are not for these operations")
        items = dim.items if isinstance(dim, ir.Group) else (dim,)
        out: list[object] = []
        for item in items:
            if isinstance(item, ir.Anon):
                if item.value == 0:
                    raise RefInvalid("a literal 0")
                if item.value == 1:
                    continue  # a unit: contributes no axis
                name = f"#{item.value}@{item.col}"
                anon[name] = item.value
                out.append(name)
            elif isinstance(item, ir.Ellipsis):
                out.append("ELL")
            else:
                out.append(item)
        dims.append((out, isinstance(dim, ir.Group)))
    return dims


def _expand(raw: list[tuple[list[object], bool]], n_ell: int) -> list[list[_Item]]:
    """Elementary items per dim; a standalone '...' becomes n_ell dims, '(...)' one dim."""
    dims: list[list[_Item]] = []
    for raw_dim, is_group in raw:
        if raw_dim == ["ELL"] and not is_group:
            dims.extend([_Item(f"{ELL}{i}")] for i in range(n_ell))
            continue
        items: list[_Item] = []
        for it in raw_dim:
            if it == "ELL":
                items.extend(_Item(f"{ELL}{i}") for i in range(n_ell))
            elif isinstance(it, str):
                items.append(_Item(it))
            else:
                assert isinstance(it, ir.Axis)
                items.append(_Item(it.name, it.index))
        dims.append(items)
    return dims


# --- the call --------------------------------------------------------------------------


def _as_array(x: object) -> np.ndarray:
    if isinstance(x, (list, tuple)):
        return np.stack([np.asarray(t) for t in x])
    return np.asarray(x)


def reference(
    op: str,
    x: object,
    pattern: str,
    reduction: str | Callable | None = None,
    /,
    *,
    fill: object = None,
    into: np.ndarray | None = None,
    into_combines: bool = True,
    **kwargs: object,
) -> np.ndarray:
    """The result of rearr.<op>(x, pattern, [reduction], **kwargs), element by element.

    ``op`` is rearrange, reduce, repeat or scatter.  kwargs hold lengths (ints)
    and index arrays (anything np.asarray takes).  ``into_combines``: whether a
    scatter into an existing tensor combines the tensor's values with what is
    scattered (torch's include_self=True) or only fills untouched positions.
    """
    x = _as_array(x)
    pat = parse(pattern)
    if pat.outputs is None or len(pat.inputs) != 1 or len(pat.outputs) != 1:
        raise RefInvalid("one operand on each side, with '->'")
    (left,), (right,) = pat.inputs, pat.outputs
    if op == "reduce":
        if not (callable(reduction) or reduction in REDUCTIONS):
            raise RefInvalid(f"reduction {reduction!r}")
    elif op == "scatter":
        if reduction not in SCATTER_REDUCTIONS:
            raise RefInvalid(f"reduction {reduction!r}")
    elif reduction is not None:
        raise RefInvalid("no reduction here")

    anon: dict[str, int] = {}
    raw_in = _side(left, anon)
    raw_out = _side(right, anon)
    n_ell_in = sum(1 for d, _ in raw_in for it in d if it == "ELL")
    n_ell_out = sum(1 for d, _ in raw_out for it in d if it == "ELL")
    if n_ell_in > 1 or n_ell_out > 1:
        raise RefInvalid("'...' twice")
    if n_ell_out and not n_ell_in:
        raise RefInvalid("'...' on the output only")
    if n_ell_in and not n_ell_out and op != "reduce":
        raise RefInvalid("'...' on the input only")
    if any("ELL" in d and (g or len(d) > 1) for d, g in raw_in):
        raise RefInvalid("'...' inside a group on the input side")
    n_fixed = len(raw_in) - n_ell_in
    if n_ell_in:
        if x.ndim < n_fixed:
            raise RefInvalid("too few dimensions for the pattern")
        n_ell = x.ndim - n_fixed
    elif x.ndim != len(raw_in):
        raise RefInvalid(f"pattern has {len(raw_in)} dimensions, input has {x.ndim}")
    else:
        n_ell = 0
    ins_flat_dims = _expand(raw_in, n_ell)  # one entry per dimension of x
    outs = _expand(raw_out, n_ell)
    in_lengths_of_dims = list(x.shape)
    assert len(ins_flat_dims) == x.ndim

    gathers = [(it.name, it.index) for d in ins_flat_dims for it in d if it.index is not None]
    scatters = [(it.name, it.index) for d in outs for it in d if it.index is not None]
    for d in ins_flat_dims + outs:
        if len(d) > 1 and any(it.index is not None for it in d):
            raise RefInvalid("index inside a group")
    if gathers and op not in ("rearrange", "scatter"):
        raise RefInvalid("gather only in rearrange and scatter")
    if scatters and op != "scatter":
        raise RefInvalid("scatter brackets only in scatter")
    if op == "scatter" and not scatters:
        raise RefInvalid("scatter needs a bracket on the output side")

    in_names = [it.name for d in ins_flat_dims for it in d]
    out_names = [it.name for d in outs for it in d]
    if len(set(in_names)) != len(in_names) or len(set(out_names)) != len(out_names):
        raise RefInvalid("duplicate axis")
    gathered = [g for g, _ in gathers]
    scattered = [s for s, _ in scatters]
    in_axes = [a for a in in_names if a not in gathered]
    out_axes = [a for a in out_names if a not in scattered]
    if gathers and scatters and not all(i.axes is not None for _, i in gathers + scatters):
        raise RefInvalid("both sides indexed: every index declares its axes")

    # Index axes.
    index_axes: dict[str, list[str]] = {}
    index_axis_of: dict[str, str] = {}
    for axis, idx in gathers:
        index_axes[idx.name] = list(idx.axes) if idx.axes is not None else list(out_axes)
        index_axis_of[idx.name] = axis
    introduced: list[str] = []
    for _axis, idx in gathers:
        for a in index_axes[idx.name]:
            if a not in in_axes and a not in introduced:
                introduced.append(a)
    middle = in_axes + introduced
    for axis, idx in scatters:
        if idx.name in index_axes:
            raise RefInvalid("index used twice")
        index_axes[idx.name] = list(idx.axes) if idx.axes is not None else list(middle)
        index_axis_of[idx.name] = axis
        if any(a not in middle for a in index_axes[idx.name]):
            raise RefInvalid("scatter index axis not in the source")
    for name, axes in index_axes.items():
        if len(set(axes)) != len(axes):
            raise RefInvalid("index axis twice")
        if name in set(in_names) | set(out_names) | set(middle):
            raise RefInvalid("index named like an axis")
    for s in scattered:
        if s in middle:
            raise RefInvalid("scattered axis also read")
    for g in gathered:
        if g in out_axes:
            raise RefInvalid("gathered axis also on the output")

    # Which axes may be where.
    only_in = [a for a in middle if a not in out_axes]
    only_out = [a for a in out_axes if a not in middle]
    scat_axes = {a for _, i in scatters for a in index_axes[i.name]}
    if op == "rearrange" and (only_in or only_out):
        raise RefInvalid("axis on one side only")
    if op == "reduce" and only_out:
        raise RefInvalid("output axis not in input")
    if op == "repeat" and only_in:
        raise RefInvalid("input axis not in output")
    if op == "scatter" and (only_out or any(a not in scat_axes for a in only_in)):
        raise RefInvalid("axis lost in scatter")
    for name in anon:
        side_in = name in in_names
        if not ((op == "reduce" and side_in) or (op == "repeat" and not side_in)):
            raise RefInvalid("anonymous axis not allowed here")

    # Lengths.
    index_names = set(index_axes)
    lengths: dict[str, int] = dict(anon)
    given: dict[str, int] = {}
    known_names = set(in_names) | set(out_names) | {a for ax in index_axes.values() for a in ax}
    for k, v in kwargs.items():
        if k in index_names:
            continue
        if k not in known_names or k.startswith(ELL):
            raise RefInvalid(f"length keyword {k}= names no axis")
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 0:
            raise RefInvalid(f"bad length {k}={v!r}")
        given[k] = int(v)
    for k in index_names:
        if k not in kwargs:
            raise RefInvalid(f"index {k} not given")
    lengths.update(given)

    def settle(name: str, value: int) -> None:
        if name in lengths and lengths[name] != value:
            raise RefInvalid(f"length of {name}: {lengths[name]} != {value}")
        lengths[name] = value

    indices: dict[str, np.ndarray] = {}
    for name in index_names:
        arr = _as_array(kwargs[name])
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise RefInvalid(f"index {name} has dtype {arr.dtype}")
        indices[name] = arr
    for d, n in zip(ins_flat_dims, in_lengths_of_dims, strict=True):
        if len(d) == 1:
            settle(d[0].name, n)
    for d, n in zip(ins_flat_dims, in_lengths_of_dims, strict=True):
        if len(d) != 1:
            unknown = [it.name for it in d if it.name not in lengths]
            known = math.prod(lengths[it.name] for it in d if it.name in lengths)
            if len(unknown) > 1:
                raise RefInvalid("cannot infer")
            if unknown:
                if known == 0 or n % known:
                    raise RefInvalid("does not divide")
                lengths[unknown[0]] = n // known
            elif known != n:
                raise RefInvalid("lengths disagree")
    # Index shapes give the lengths of the axes they introduce.
    for name in index_names:
        axes = index_axes[name]
        arr = indices[name]
        if arr.ndim != len(axes):
            raise RefInvalid(f"index {name} has {arr.ndim} dimensions, not {len(axes)}")
        for a, n in zip(axes, arr.shape, strict=True):
            settle(a, n)
    # The scattered axis: a keyword, `into`, or the gathered axis of the same name.
    if into is not None:
        into = np.asarray(into)
    for s in scattered:
        if s not in lengths:
            if s in gathered:
                lengths[s] = x.shape[[d[0].name for d in ins_flat_dims].index(s)]
            elif into is not None:
                k = [i for i, d in enumerate(outs) if d and d[0].name == s][0]
                if into.ndim != len(outs):
                    raise RefInvalid("into has the wrong number of dimensions")
                lengths[s] = into.shape[k]
            else:
                raise RefInvalid(f"length of {s} unknown")
    for d in outs:
        for it in d:
            if it.name not in lengths:
                raise RefInvalid(f"length of {it.name} unknown")

    out_shape = tuple(math.prod(lengths[it.name] for it in d) for d in outs)
    if into is not None and into.shape != out_shape:
        raise RefInvalid("into has the wrong shape")

    # The loop.
    loop = middle + [a for a in out_names if a not in middle and a not in scattered]
    loop_shape = tuple(lengths[a] for a in loop)
    collected: dict[tuple[int, ...], list[object]] = {}

    def index_value(name: str, env: dict[str, int]) -> int:
        axis_len = lengths[index_axis_of[name]]
        v = int(indices[name][tuple(env[a] for a in index_axes[name])])
        if not -axis_len <= v < axis_len:
            raise RefInvalid(f"index {name} value {v} out of range for length {axis_len}")
        return v + axis_len if v < 0 else v

    # Every index value is checked, even where no loop position reads it.
    for name in index_names:
        axis_len = lengths[index_axis_of[name]]
        arr = indices[name]
        if arr.size and not ((arr >= -axis_len) & (arr < axis_len)).all():
            raise RefInvalid(f"index {name} out of range")

    def compose(dims: list[list[_Item]], env: dict[str, int]) -> tuple[int, ...]:
        pos = []
        for d in dims:
            p = 0
            for it in d:
                v = index_value(it.index.name, env) if it.index is not None else env[it.name]
                p = p * lengths[it.name] + v
            pos.append(p)
        return tuple(pos)

    for values in np.ndindex(*loop_shape):
        env = dict(zip(loop, values, strict=True))
        src = compose(ins_flat_dims, env)
        dst = compose(outs, env)
        collected.setdefault(dst, []).append(x[src])

    # Combine.
    if op in ("rearrange", "repeat"):
        out = np.empty(out_shape, dtype=x.dtype)
        for pos in np.ndindex(*out_shape):
            vals = collected.get(pos, [])
            assert len(vals) == 1, (pattern, pos, vals)
            out[pos] = vals[0]
        return out
    if op == "reduce":
        return _reduce_all(x, out_shape, collected, reduction)
    return _scatter_all(x, out_shape, collected, reduction, fill, into, into_combines)


def _is_int(dtype: np.dtype) -> bool:
    return dtype == np.bool_ or np.issubdtype(dtype, np.integer)


def combine(values: Sequence[object], reduction: str, dtype: np.dtype) -> object:
    """One reduction over a non-empty list of scalars, in exact arithmetic for ints."""
    if reduction in ("any", "all"):
        fn = any if reduction == "any" else all
        return fn(bool(v) for v in values)
    if _is_int(dtype):
        ints = [int(v) for v in values]
        if reduction == "sum":
            return sum(ints)
        if reduction == "prod":
            return math.prod(ints)
        if reduction == "min":
            return min(ints)
        if reduction == "max":
            return max(ints)
        raise RefInvalid(f"{reduction} on {dtype}")
    if np.issubdtype(dtype, np.complexfloating):
        vals = [complex(v) for v in values]
    else:
        vals = [float(v) for v in values]
    if reduction == "sum":
        return math.fsum(vals) if not isinstance(vals[0], complex) else sum(vals)
    if reduction == "mean":
        return (math.fsum(vals) if not isinstance(vals[0], complex) else sum(vals)) / len(vals)
    if reduction == "prod":
        return math.prod(vals)
    order = (lambda v: (v.real, v.imag)) if isinstance(vals[0], complex) else None  # numpy's complex order
    if reduction == "min":
        return min(vals, key=order)
    if reduction == "max":
        return max(vals, key=order)
    raise AssertionError(reduction)


def _reduce_all(x: np.ndarray, out_shape: tuple[int, ...], collected: Mapping, reduction: object) -> np.ndarray:
    if callable(reduction):
        raise RefInvalid("the reference takes named reductions only; compare callables by hand")
    assert isinstance(reduction, str)
    if reduction == "mean" and _is_int(x.dtype):
        raise RefInvalid("mean of an integer or bool tensor")
    out = np.empty(out_shape, dtype=object)
    for pos in np.ndindex(*out_shape):
        vals = collected.get(pos, [])
        if not vals:
            out[pos] = _empty_reduction(reduction)
        else:
            out[pos] = combine(vals, reduction, x.dtype)
    return out


def _empty_reduction(reduction: str) -> object:
    # A reduction over a zero-length axis: the identity where there is one.
    identity = {"sum": 0, "prod": 1, "any": False, "all": True}
    if reduction in identity:
        return identity[reduction]
    if reduction == "mean":
        return math.nan
    raise RefInvalid(f"{reduction} over an empty axis")


def _scatter_all(
    x: np.ndarray,
    out_shape: tuple[int, ...],
    collected: Mapping,
    reduction: object,
    fill: object,
    into: np.ndarray | None,
    into_combines: bool,
) -> np.ndarray:
    assert isinstance(reduction, str)
    if reduction == "mean" and _is_int(x.dtype):
        raise RefInvalid("mean of an integer or bool tensor")
    out = np.empty(out_shape, dtype=object)
    for pos in np.ndindex(*out_shape):
        vals = list(collected.get(pos, []))
        if reduction == "set" and len(vals) > 1:
            raise RefInvalid(f"duplicate index under 'set' at output position {pos}")
        if into is not None and into_combines and vals and reduction != "set":
            vals = [into[pos]] + vals
        if not vals:
            if into is not None:
                out[pos] = into[pos]
            else:
                out[pos] = 0 if fill is None else fill
        elif reduction == "set":
            out[pos] = vals[0]
        else:
            out[pos] = combine(vals, reduction, x.dtype)
    return out


# --- comparing -------------------------------------------------------------------------


def to_numpy(result: object) -> np.ndarray:
    """A rearr result (numpy array or torch tensor) as a numpy array."""
    if type(result).__module__.startswith("torch"):
        return result.detach().cpu().numpy()  # type: ignore[attr-defined]
    return np.asarray(result)


def _plain(a: np.ndarray) -> np.ndarray:
    """An object array from the reference as a numeric one (bool, int64, float64 or complex128)."""
    if a.dtype != object:
        return a
    vals = list(a.flat)
    if all(isinstance(v, (bool, np.bool_)) for v in vals):
        kind = np.bool_
    elif all(isinstance(v, (bool, int, np.bool_, np.integer)) for v in vals):
        kind = np.int64
    elif any(isinstance(v, (complex, np.complexfloating)) for v in vals):
        kind = np.complex128
    else:
        kind = np.float64
    out = np.empty(a.shape, dtype=kind)
    for pos in np.ndindex(*a.shape):
        out[pos] = a[pos]
    return out


def assert_matches(result: object, expected: np.ndarray, *, rtol: float | None = None, what: str = "") -> None:
    """Shape exact; values equal (ints, bools) or close (floats)."""
    got = _plain(to_numpy(result))
    exp = _plain(np.asarray(expected))
    assert got.shape == exp.shape, f"{what}: shape {got.shape} != expected {exp.shape}"
    if got.size == 0:
        return
    if _is_int(got.dtype) and _is_int(exp.dtype):
        np.testing.assert_array_equal(got.astype(np.int64), exp.astype(np.int64), err_msg=what)
        return
    if rtol is None:
        low = (np.float16, np.float32, np.complex64)
        rtol = 1e-4 if got.dtype in low or exp.dtype in low else 1e-9
    np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind == "c" else np.float64),
                               exp.astype(np.complex128 if exp.dtype.kind == "c" else np.float64),
                               rtol=rtol, atol=rtol, equal_nan=True, err_msg=what)
