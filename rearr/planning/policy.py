"""Dtype rules that do not depend on the backend, decided once before the backend runs.

Each backend answers two small questions about a tensor: ``dtype_kind(x)`` (one
of KINDS) and ``dtype_range(x)`` (the least and greatest finite value its dtype
holds). From those answers this module decides, the same way for every backend:

- 'mean' needs a floating or complex dtype (numpy would give float64, torch refuses);
- 'min' / 'max' of complex numbers is undefined (numpy orders them lexicographically);
- reduce (other than any/all) and scatter's arithmetic take numbers only: bool,
  int, uint, float, complex. 'other' is datetime64, object, strings, and the
  torch dtypes that torch stores but has few kernels for (uint16/32/64, float8,
  quantized). Gather and scatter 'set' only move values: they take 'other'
  where the backend can index it (``backend.INDEXES_OTHER``: numpy yes, torch no);
- a scatter's ``fill=`` must be a value the dtype holds exactly;
- no tensor of the plan may need more bytes than int64 counts.

`prelude(steps, backend)` turns these into one check ``f(x, env) -> x`` that
runs first, and only for plans that need it: a named reduction, an index, or
lengths so large that the byte count matters. Plain rearrange and repeat plans
get none, so their hot path is unchanged.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from ..errors import RearrError
from ..rules.arguments import symbolic_number
from ..rules.recipe import INT64_MAX
from .plan import AdvancedIndex, Expand, GatherAlong, Reduce, Reshape, ScatterAlong, ScatterRows, TakeRows

KINDS = ("bool", "int", "uint", "float", "complex", "other")
NUMBERS = frozenset(KINDS[:-1])
# Below this many elements no dtype (itemsize <= 2**20 bytes) can reach INT64_MAX bytes: no check needed.
_SMALL = 2**43


def mean_of_integers(dtype: object) -> RearrError:
    return RearrError(
        f"'mean' of a tensor of {dtype} is ambiguous (numpy would give float64, torch refuses)",
        code="RA400",
        hint="cast to a floating dtype first: x.astype(np.float32) or x.float()",
    )


def complex_order(reduction: str) -> RearrError:
    return RearrError(
        f"'{reduction}' of complex numbers is undefined (numpy orders them lexicographically, torch refuses)",
        code="RA400",
        hint="reduce the real part, the magnitude (abs) or the angle instead",
    )


def not_numbers(dtype: object, what: str) -> RearrError:
    return RearrError(
        f"{what} takes numbers (bool, integer, floating, complex); {dtype} is not one rearr computes with",
        code="RA500",
        hint="convert first: datetime64 with x.view('i8'), torch's uint16/32/64 with x.to(torch.int64), "
        "float8 with x.float(); rearrange and repeat take any dtype",
    )


def check_reduction(kind: str, dtype: object, reduction: str, what: str, moves_other: bool = False) -> None:
    """The dtype rules of a named reduction ('set' and the rest of scatter's included)."""
    if kind == "other" and reduction not in ("any", "all") and not (reduction == "set" and moves_other):
        raise not_numbers(dtype, what)
    if reduction == "mean" and kind not in ("float", "complex"):
        raise mean_of_integers(dtype)
    if kind == "complex" and reduction in ("max", "min"):
        raise complex_order(reduction)


def check_fill(kind: str, bounds: tuple[Any, Any], dtype: object, fill: Any) -> Any:
    """``fill`` as a plain Python number that the dtype holds (numpy scalars, Fraction and Decimal
    included, as float(), int() or complex() read them), or the RearrError when it cannot hold it:
    an imaginary part in a real dtype, a fraction, nan or inf in an integer one, a value out of range."""
    if isinstance(fill, numbers.Complex) and not isinstance(fill, numbers.Real):  # complex, np.complex64
        fill = complex(fill)
        if kind == "complex":
            return fill
        if fill.imag != 0:
            raise _bad_fill(fill, dtype, "it has an imaginary part")
        fill = fill.real
    if kind in ("float", "complex"):
        try:
            value = float(fill)
        except OverflowError:  # an int beyond any float
            raise _bad_fill(fill, dtype, "it is beyond any float") from None
        lo, hi = bounds
        if math.isfinite(value) and not lo <= value <= hi:
            raise _bad_fill(fill, dtype, f"it lies outside {lo} .. {hi} and would become inf")
        return value
    try:
        whole = int(fill)
    except (ValueError, OverflowError):  # nan, inf
        raise _bad_fill(fill, dtype, "it is not a whole number") from None
    if whole != fill:  # 2.5, np.float32(2.5), Fraction(5, 2), Decimal("2.5")
        raise _bad_fill(fill, dtype, "it is not a whole number")
    lo, hi = bounds
    if not lo <= whole <= hi:
        raise _bad_fill(fill, dtype, f"it lies outside {lo} .. {hi}")
    return whole


def _bad_fill(fill: Any, dtype: object, why: str) -> RearrError:
    return RearrError(f"fill={fill!r} cannot be held by a tensor of {dtype}: {why}", code="RA500",
                      hint="pass a fill= that the dtype holds, or convert the source to a dtype that holds it")


def refuse_unusual(error: Exception, backend: Any, values: Any) -> None:
    """Raise the RearrError for a backend failure caused by an input the backend runs few ops on
    (torch's sparse and nested tensors); return when no input is one (the caller re-raises).
    ``backend``: a rearr.backends.contract.Backend (planning sits below the backends: not imported)."""
    for v in values:
        what = backend.unusual(v)
        if what is not None:
            raise RearrError(f"{backend.name} cannot run this pattern on {what}: {error}"[:400], code="RA500",
                             hint="convert it to a dense tensor first: x.to_dense(), or "
                             "x.to_padded_tensor(0) for a nested one") from error


def check_bytes(elements: int, itemsize: int) -> None:
    if elements * itemsize > INT64_MAX:
        raise RearrError(f"a tensor of {elements} elements of {itemsize} bytes would need "
                         f"{elements * itemsize} bytes, more than int64 counts", code="RA305",
                         hint="use smaller lengths")


_GATHERS = (TakeRows, GatherAlong, AdvancedIndex)
_SCATTERS = (ScatterRows, ScatterAlong)


def prelude(steps: tuple, backend: Any) -> Callable[[Any, Any], Any] | None:
    """The one dtype check a plan needs before its native calls run, or None."""
    reductions = [s.reduction for s in steps if isinstance(s, Reduce) and isinstance(s.reduction, str)]
    scatter = next((s.reduction for s in steps if isinstance(s, _SCATTERS)), None)
    gather = any(isinstance(s, _GATHERS) for s in steps)
    largest = max((_elements(s) for s in steps), default=0)
    if not reductions and scatter is None and not gather and largest < _SMALL:
        return None
    kind_of, bounds_of, itemsize_of = backend.dtype_kind, backend.dtype_range, backend.itemsize
    moves_other = backend.INDEXES_OTHER
    # (Tensor class, dtype) pairs this plan has accepted: every rule but fill='s depends on the dtype alone (the plan
    # fixes the rest), so a repeated call costs one set look-up.
    passed: set = set()

    def check(x: Any, env: Any) -> Any:
        key = (x.__class__, x.dtype)  # the class first: dtypes of two libraries never meet in ==
        if key not in passed:
            kind = kind_of(x)
            for r in reductions:
                check_reduction(kind, x.dtype, r, f"reduce '{r}'")
            if gather and kind == "other" and not moves_other:
                raise not_numbers(x.dtype, f"a gather on {backend.name}")
            if scatter is not None:
                check_reduction(kind, x.dtype, scatter, f"scatter '{scatter}'", moves_other)
            if largest >= _SMALL:
                check_bytes(largest, itemsize_of(x))
            passed.add(key)
        if scatter is not None and not symbolic_number(env.fill) and env.fill != 0 and env.into is None \
                and kind_of(x) != "other":  # (a SymFloat fill under torch.compile: the backend's own rules)
            env.fill = check_fill(kind_of(x), bounds_of(x), x.dtype, env.fill)
        return x

    return check


def _elements(step: object) -> int:
    """The elements of the largest tensor a step makes (views included: numpy counts them in bytes too)."""
    if isinstance(step, Reshape | Expand):
        return math.prod(step.shape)
    if isinstance(step, ScatterRows):  # (rows, width): the whole result is the Reshape after it
        return step.rows
    if isinstance(step, ScatterAlong):
        return math.prod(step.shape)
    return 0
