# pyright: strict
"""A typed user module with mistakes that the type checkers must flag, each on the line marked MISTAKE
and on no other (tests/test_type_checkers.py runs `mypy --strict` and pyright on it). The other
functions call rearr as documented and must pass: einsum's result is the operands' type, so
`return rearr.einsum(...)` passes mypy's no-any-return."""

import numpy as np
import numpy.typing as npt

import rearr

Array = npt.NDArray[np.float64]


def product(a: Array, b: Array) -> Array:
    return rearr.einsum(a, b, "i j, j k -> i k")


def pooled(x: Array) -> Array:
    return rearr.reduce(x, "b (h 2) -> b h", "max")


def by_keyword(x: Array) -> Array:
    return rearr.rearrange(tensor=x, pattern="a b -> b a")


def lengths(x: Array) -> dict[str, int]:
    return rearr.parse_shape(x=x, pattern="a b")


def gathered(x: Array, idx: npt.NDArray[np.int64]) -> Array:
    return rearr.rearrange(x, "b n[i: b k] -> b k", i=idx, check_bounds="sync")


def averaged(x: Array) -> Array:
    return rearr.reduce(x, "b (h 2) -> b h", "avg")  # MISTAKE


def added(x: Array, idx: npt.NDArray[np.int64]) -> Array:
    return rearr.scatter(x, "b k -> b n[i: b k]", "add", i=idx, n=4)  # MISTAKE


def always(x: Array, idx: npt.NDArray[np.int64]) -> Array:
    return rearr.rearrange(x, "b n[i: b k] -> b k", i=idx, check_bounds="always")  # MISTAKE
