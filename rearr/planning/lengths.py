"""Axis lengths from shapes, length keywords and anonymous axes: the one solver of every planner.

rearrange, reduce, repeat and scatter (planner.py), einsum (einsum.py) and explain's index shapes all
solve their lengths here, so a length that cannot be inferred (RA301), does not divide (RA302) or
disagrees (RA303) reads the same, points at the same column and offers the same fix in each.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence

from ..errors import RearrError
from ..rules.arguments import symbolic
from ..rules.recipe import (
    ELLIPSIS,
    INT64_MAX,
    Dim,
    Recipe,
    anonymous_length,
    check_length_value,
    traced_length,
    two_unknowns,
)

KEYWORD = "keyword"  # the source of a length passed as a keyword: the fixes change or drop those

# --- a tensor's lengths ------------------------------------------------------


def unknown_length(n: object) -> bool:
    """NaN: a length of a dask array whose chunk sizes are not known yet."""
    return not symbolic(n) and n != n


def length_of(n: object) -> int:
    """A length as an int, or as it is when symbolic (see `symbolic`). Not for a tensor's shape, which
    may hold unknown lengths: `known_shape` says so first."""
    return n if symbolic(n) else int(n)  # type: ignore[return-value, call-overload]


def known_shape(shape: Iterable[object], what: str = "the input", name: str = "x",
                col: int | None = None) -> tuple[int, ...]:
    """A tensor's shape as lengths (`length_of`). The one rule, used wherever a tensor's length becomes
    an int: an unknown length (a dask array after boolean masking) is RA304, whose fix computes it."""
    shape = tuple(shape)
    if all(n.__class__ is int for n in shape):  # the lengths of numpy's and torch's shapes: as they are
        return shape
    shape = tuple(map(traced_length, shape))
    if any(map(unknown_length, shape)):
        raise unknown_lengths(f"{what} has shape {shape}, with unknown lengths", name, col)
    return tuple(map(length_of, shape))


def unknown_lengths(message: str, name: str = "x", col: int | None = None) -> RearrError:
    return RearrError(message, code="RA304", col=col,
                      hint=f"compute them first: {name} = {name}.compute_chunk_sizes() (dask)")


def show(name: str, quote: bool = True) -> str:
    """An elementary axis as the errors write it: 'h' (h unquoted), ...[0] for the ellipsis, 3 for an
    anonymous axis."""
    if name.startswith(ELLIPSIS):
        return f"...[{name[len(ELLIPSIS):]}]"
    anonymous = anonymous_length(name)
    if anonymous is not None:
        return str(anonymous)
    return repr(name) if quote else name


def dimension(k: int, operand: int = 0, operands: int = 1) -> str:
    """Where a length comes from: 'input dimension 1', or 'operand 2's dimension 1' among several."""
    return f"input dimension {k}" if operands == 1 else f"operand {operand}'s dimension {k}"


# --- the solver --------------------------------------------------------------


class Lengths:
    """Known axis lengths with where each came from (for errors and explain)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.value: dict[str, int] = {}
        self.source: dict[str, str] = {}

    def _err(self, code: str, message: str, col: int | None, hint: str) -> RearrError:
        return RearrError(message, code=code, pattern=self.pattern, col=col, hint=hint)

    def given(self, recipe: Recipe, lengths: Iterable[tuple[str, object]],
              fitting: Callable[[str, int], int] | None = None) -> None:
        """The anonymous axes' lengths and the length keywords (checked: RA305, whose fix offers
        ``fitting(name, near)``, a length that fits the shapes); index keywords are skipped."""
        cols = dict(recipe.cols)
        for name, value in recipe.anon:
            self.set(name, value, "anonymous axis", cols.get(name))
        index_names = set(recipe.index_names)
        for name, value in lengths:
            if name not in index_names:
                if not symbolic(value):
                    fits = None if fitting is None else functools.partial(fitting, name)
                    value = check_length_value(recipe, name, value, fits)
                self.set(name, value, KEYWORD, cols.get(name))

    def set(self, name: str, value: int, source: str, col: int | None) -> None:
        """Record one axis's length; RA303 when it has another already."""
        if name not in self.value:
            self.value[name] = value
            self.source[name] = source
        elif self.value[name] != value:
            raise self._err("RA303", f"axis {show(name)} has length {self.value[name]} ({self.source[name]}) "
                            f"but {value} ({source})", col, self._agree_hint(name, value, source))

    def _agree_hint(self, name: str, value: int, source: str) -> str:
        if KEYWORD in (self.source[name], source):
            right = value if self.source[name] == KEYWORD else self.value[name]
            return f"pass {name}={right} instead, or drop {name}= to infer it"
        return f"pass tensors that give {show(name)} one length"

    def solve(self, dims: Sequence[tuple[Dim, int, str]]) -> None:
        """The lengths of the axes of dimensions of the given sizes ((dim, size, where) each): those of
        one axis first, then groups with one unknown axis left, until every one is solved; RA301 when
        some group keeps two unknown axes."""
        pending = []
        for dim, size, where in dims:
            if len(dim.names) == 1:
                self.set(dim.names[0], size, where, dim.col)
            else:
                pending.append((dim, size, where))
        while pending:
            rest = [d for d in pending if not self.fit(*d)]
            if len(rest) == len(pending):
                dim, size, where = rest[0]
                unknown = [n for n in dim.names if n not in self.value]
                known = math.prod(self.value[n] for n in dim.names if n in self.value)
                left = size // known if known and size % known == 0 else size
                raise two_unknowns(self.pattern, unknown, dim.col, f"{where} of length {size}",
                                   f"{unknown[0]}={_divisor(left, 2)}")
            pending = rest

    def fit(self, dim: Dim, size: int, where: str) -> bool:
        """Check a group or unit dimension, or solve its one unknown axis; False when it has two or more.
        (rearr check's shape flow asks this of each dimension whose length it knows.)"""
        unknown = [n for n in dim.names if n not in self.value]
        if len(unknown) > 1:
            return False
        known = math.prod(self.value[n] for n in dim.names if n in self.value)
        if not dim.names:
            if size != 1:
                raise self._err("RA303", f"{where} has length {size}, but the pattern has a unit axis there",
                                dim.col, "name the axis instead of '1' or '()', or pass a tensor with length 1 there")
        elif not unknown:
            if known != size:
                expr = " * ".join(f"{show(n)}={self.value[n]}" for n in dim.names)
                raise self._err("RA303", f"{where} has length {size}, but {expr} makes {known}", dim.col,
                                self._product_hint(dim, size, where, drop=True))
        elif known == 0 or size % known:
            names = " * ".join(show(n) for n in dim.names if n in self.value)
            names += f" = {known}" if names != str(known) else ""  # '3', not '3 = 3', for an anonymous axis
            raise self._err("RA302", f"{where} has length {size}, which {names} does not divide",
                            dim.col, self._product_hint(dim, size, where, drop=False))
        else:
            self.set(unknown[0], size // known, f"inferred: {where} / {known}" if known != 1 else where, dim.col)
        return True

    def _product_hint(self, dim: Dim, size: int, where: str, drop: bool) -> str:
        """A fix for a group whose known lengths do not fit its size: a keyword's length that fits."""
        for name in dim.names:
            if self.source.get(name) != KEYWORD:
                continue
            rest = math.prod(self.value[n] for n in dim.names if n in self.value and n != name)
            if rest == 0 or size % rest:
                continue
            if drop:  # every axis known: this one's length is what the others leave
                return f"pass {name}={size // rest}, or drop {name}= to infer it"
            return f"pass a length of {show(name)} that divides {size // rest}, e.g. {name}=" \
                   f"{_divisor(size // rest, self.value[name])}"
        known = math.prod(self.value[n] for n in dim.names if n in self.value)
        return f"pass a tensor whose {where} has length {known}" if drop else \
            f"pass a tensor whose {where} is a multiple of {known}"

    def need(self, name: str, what: str, col: int | None, also: str = "") -> int:
        """The length of an axis that nothing gave (an output or indexed axis): RA301, fixed by a keyword."""
        if name not in self.value:
            raise self._err("RA301", f"the length of {what} {show(name)} is unknown", col,
                            f"pass it as a keyword, e.g. {name}=10{also}")
        return self.value[name]


def _divisor(n: int, near: int) -> int:
    """The divisor of n nearest to ``near`` (the smaller on a tie): a length that a fix may offer."""
    if symbolic(n) or symbolic(near) or n == 0:  # every length divides 0
        return near if not symbolic(near) and near > 0 else 1
    return min(_divisors(n), key=lambda d: (abs(d - near), d))


# --- the input side: ellipsis, keywords, the input's shape -------------------


def expand_ellipsis(text: str, dims: tuple[Dim, ...], ndim: int) -> tuple[tuple[Dim, ...], tuple[str, ...]]:
    """Replace the ellipsis dim of an input by as many one-axis dims as it covers (text: the pattern,
    for the errors); also the names of those axes."""
    fixed = [d for d in dims if ELLIPSIS not in d.names]
    if len(fixed) == len(dims):
        if ndim != len(dims):
            raise RearrError(f"the pattern has {len(dims)} input dimensions, the tensor has {ndim}", code="RA304",
                             pattern=text, col=0,
                             hint="write one entry per dimension (a group '(a b)' is one), or use '...' for the rest")
        return dims, ()
    n = ndim - len(fixed)
    if n < 0:
        raise RearrError(f"the pattern needs at least {len(fixed)} dimensions, the tensor has {ndim}", code="RA304",
                         pattern=text, col=0, hint="pass a tensor with more dimensions, or name fewer axes")
    names = tuple(f"{ELLIPSIS}{i}" for i in range(n))
    out: list[Dim] = []
    for d in dims:
        if ELLIPSIS in d.names:
            out.extend(Dim((name,), d.col) for name in names)
        else:
            out.append(d)
    return tuple(out), names


def expand_names(names: tuple[str, ...], ellipsis_axes: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for n in names:
        out.extend(ellipsis_axes if n == ELLIPSIS else (n,))
    return tuple(out)


def expand_out(dims: tuple[Dim, ...], ellipsis_axes: tuple[str, ...]) -> tuple[Dim, ...]:
    if all(ELLIPSIS not in d.names for d in dims):  # no '...': the dims as they are
        return dims
    out: list[Dim] = []
    for d in dims:
        if d.names == (ELLIPSIS,) and not d.group:
            out.extend(Dim((n,), d.col) for n in ellipsis_axes)
        else:
            out.append(Dim(expand_names(d.names, ellipsis_axes), d.col))
    return tuple(out)


def resolve(recipe: Recipe, shape: tuple[int, ...], lengths: tuple[tuple[str, object], ...]):
    """A one-input recipe's expanded input and output dims, the axes '...' stands for, and the lengths
    that the anonymous axes, the keywords and the input's shape give."""
    (ins,), (outs,) = recipe.inputs, recipe.outputs
    ins, ellipsis_axes = expand_ellipsis(recipe.text, ins, len(shape))
    lens = Lengths(recipe.text)
    lens.given(recipe, lengths, lambda name, near: fitting_length(
        lambda n: resolve(recipe, shape, (*others(lengths, name), (name, n))), shape, near))
    lens.solve([(dim, size, dimension(k)) for k, (dim, size) in enumerate(zip(ins, shape))])
    return ins, expand_out(outs, ellipsis_axes), ellipsis_axes, lens


def fitting_length(fits: Callable[[int], object], sizes: Iterable[object], near: int) -> int:
    """The length nearest to ``near`` that ``fits`` takes without a RearrError (fits: the solver, asked
    with that length for the keyword and the call's other valid ones), among ``near`` and the divisors
    of ``sizes`` (the inputs' lengths); ``near`` where none fits (an error elsewhere). What a fix offers
    for a keyword whose value is no length."""
    candidates = {near} | {d for size in sizes if size.__class__ is int and 0 < size <= _DIVIDED  # type: ignore[operator]
                           for d in _divisors(size)}  # type: ignore[arg-type]
    for candidate in sorted(candidates, key=lambda d: (abs(d - near), d))[:_TRIES]:
        try:
            fits(candidate)
        except RearrError:
            continue
        return candidate
    return near


_DIVIDED = 2**48  # the largest length whose divisors a fix looks through (a loop to its square root)
_TRIES = 64


def others(lengths: Iterable[tuple[str, object]], name: str) -> tuple[tuple[str, int], ...]:
    """The keywords but ``name`` that are lengths as they are (plain ints that int64 holds): those that a
    fix for ``name`` keeps."""
    return tuple((n, v) for n, v in lengths if n != name and v.__class__ is int and 0 <= v <= INT64_MAX)  # type: ignore[operator]


def _divisors(n: int) -> list[int]:
    if symbolic(n) or n == 0:
        return []
    return [e for d in range(1, math.isqrt(n) + 1) if n % d == 0 for e in (d, n // d)]


def input_lengths(recipe: Recipe, shape: tuple[int, ...], lengths: tuple[tuple[str, object], ...] = ()
                  ) -> tuple[dict[str, int], tuple[str, ...]]:
    """The axis lengths that the input's shape, the keywords and the anonymous axes give, before any index
    shape is read; and the names of the axes that '...' stands for."""
    _, _, ellipsis_axes, lens = resolve(recipe, known_shape(shape), lengths)
    return dict(lens.value), ellipsis_axes


def index_shapes(recipe: Recipe, shape: tuple[int, ...], lengths: tuple[tuple[str, object], ...],
                 given: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Each index's shape: as given, or from the lengths of its axes (what explain plans with when it is
    shown no index)."""
    missing = [s for s in recipe.gathers + recipe.scatters if s.name not in given]
    if not missing:
        return given
    known, ellipsis = input_lengths(recipe, shape, lengths)  # the input side's own errors come first
    out = dict(given)
    for spec in missing:
        axes = expand_names(spec.axes, ellipsis)
        unknown = [a for a in axes if a not in known]
        if unknown:
            raise RearrError(f"the shape of index {spec.name!r} is unknown: the length of "
                             f"{show(unknown[0], False)} is not known", code="RA301", pattern=recipe.text,
                             col=spec.col, hint=f"pass its shape, e.g. {spec.name}=(...) with one length per axis "
                             f"({' '.join(show(a, False) for a in axes)}), or the length, e.g. {unknown[0]}=4")
        out[spec.name] = tuple(known[a] for a in axes)
    return out
