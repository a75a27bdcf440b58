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

The run stage turns these into one check that runs before a plan's native calls
(rearr.run.program.prelude), and only for plans that need it.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..errors import RearrError, shown_int
from ..rules.recipe import INT64_MAX

KINDS = ("bool", "int", "uint", "float", "complex", "other")
NUMBERS = frozenset(KINDS[:-1])


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
    shown = shown_int(fill) if isinstance(fill, numbers.Integral) and not isinstance(fill, bool) else repr(fill)
    return RearrError(f"fill={shown} cannot be held by a tensor of {dtype}: {why}", code="RA500",
                      hint="pass a fill= that the dtype holds, or convert the source to a dtype that holds it")


def check_bytes(elements: int, itemsize: int) -> None:
    if elements * itemsize > INT64_MAX:
        raise RearrError(f"a tensor of {shown_int(elements)} elements of {itemsize} bytes would need "
                         f"{shown_int(elements * itemsize)} bytes, more than int64 counts", code="RA305",
                         hint="use smaller lengths")
