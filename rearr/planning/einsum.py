"""einsum's planning: (pattern, operand shapes, lengths) -> EinsumPlan, the planner stage of rearr.einsum.

An einsum is one native call, with reshapes around it where the pattern has groups ``(h w)`` or
unit axes: the plan is those reshapes and the backend's spec, as plain data, and rearr/run/ caches
it and runs it. Its lengths come from the one solver (lengths.py), as rearrange's do; it has its own
module because it shares nothing with planner.py's steps (no layout tracking, no index terms): its
product is a spec string, not a Plan of steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from ..errors import RearrError
from ..rules.arguments import symbolic
from ..rules.recipe import ELLIPSIS, analyze, einsum_operand_count
from .lengths import Lengths, dimension, fitting_length, known_shape, length_of, others
from .plan import Permute, Reshape


class EinsumPlan(NamedTuple):
    """A tuple, so that the hot path unpacks it as one: ``pre, spec, post, mm = plan``."""

    pre: tuple  # () when no operand needs a reshape, else per operand its new shape or None
    spec: str  # the backend's einsum spec, e.g. "bxc,cd->bxd"
    post: tuple | None  # the output's reshape (to its groups, '...' and unit axes), or None
    mm: EinsumMatmul | None = None  # the same einsum as one matmul, where it is a (batched) matrix product


class EinsumMatmul(NamedTuple):
    """A two-operand einsum that is a (batched) matrix product, written as a person writes it with
    matmul: each operand's steps (the plan's reshape, a permute to (batch, free, summed) or (batch,
    summed, free), a reshape where a role holds several axes or none), ``matmul(first, second)``,
    then the result's steps to the output's dims. Backends whose EINSUM_MATMUL is true run this."""

    a: tuple  # operand 0's steps (Reshape, Permute records of rearr.planning.plan)
    b: tuple  # operand 1's steps
    swap: bool  # matmul(b, a): the output lists operand 1's free axes before operand 0's
    out: tuple  # the steps of matmul's result, to the einsum's output (its groups included)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def fitting(pattern: str, shapes: tuple, lengths: Iterable[tuple[str, object]], name: str, near: int) -> int:
    """The length of keyword ``name`` nearest to ``near`` that the operands' shapes take (lengths.fitting_length):
    what RA305's fix offers."""
    kept = others(lengths, name)
    return fitting_length(lambda n: plan(pattern, shapes, (*kept, (name, n))), (n for s in shapes for n in s), near)


def plan(pattern: str, shapes: tuple, lengths: tuple) -> EinsumPlan:
    """(pattern, operand shapes, lengths as (name, int) pairs) -> EinsumPlan. Every shape rule is
    checked here, naming the user's axes: the backend sees only a spec that fits. Shapes may hold
    torch.compile's symbolic lengths (they stay symbolic)."""
    r = analyze(pattern, "einsum", None, tuple(sorted(name for name, _ in lengths)))
    count = einsum_operand_count(r, len(shapes))
    if count is not None:
        raise count
    lens = Lengths(pattern)
    lens.given(r, lengths, lambda name, near: fitting(pattern, shapes, lengths, name, near))  # plain ints come
    # as they were passed (api's look-up key): -3 is RA305 here
    ellipses: list[tuple[int, ...]] = []
    dims_sizes = []  # every named dimension of every operand, with its length and where it is
    for k, (dims, shape) in enumerate(zip(r.inputs, shapes)):
        shape = known_shape(shape, f"operand {k}", col=dims[0].col if dims else None)
        has_ell = any(d.names == (ELLIPSIS,) for d in dims)
        n_fixed = len(dims) - has_ell
        if len(shape) != n_fixed and not (has_ell and len(shape) >= n_fixed):
            need = f"at least {n_fixed}" if has_ell else str(n_fixed)
            raise RearrError(f"operand {k} has {len(shape)} dimensions, the pattern gives it {need}", code="RA304",
                             pattern=pattern, col=dims[0].col if dims else None,
                             hint="write one entry per dimension (a group '(a b)' is one), or use '...' for the rest")
        pos = 0
        for d in dims:
            if d.names == (ELLIPSIS,):
                n_ell = len(shape) - n_fixed
                ellipses.append(shape[pos: pos + n_ell])
                pos += n_ell
                continue
            dims_sizes.append((d, shape[pos], dimension(pos, k, len(shapes))))
            pos += 1
    lens.solve(dims_sizes)
    known = lens.value
    ell_shape = _broadcast(pattern, ellipses)  # checked here: the backend's message would name its letters
    sides = list(r.inputs) + [r.outputs[0]]
    units = _units(sides)
    if len(units) > len(_LETTERS):
        raise RearrError(f"einsum supports at most {len(_LETTERS)} distinct axes", code="RA206", pattern=pattern,
                         hint="rearrange some axes together first")
    letter, unit_of = {}, {}
    for k, unit in enumerate(units):
        for name in unit:
            letter[name], unit_of[name] = _LETTERS[k], unit
    spec_parts: list[str] = []
    reshapes: list[tuple | None] = []
    sizes: dict[str, int] = {}  # each einsum letter's length
    for dims, shape in zip(sides, [s for s in shapes] + [None]):
        text, target, fits = "", [], True
        pos = 0
        for d in dims:
            if d.names == (ELLIPSIS,):
                n_ell = len(ell_shape) if shape is None else len(shape) - (len(dims) - 1)
                text += "..."
                target.extend(ell_shape if shape is None else (length_of(n) for n in shape[pos: pos + n_ell]))
                pos += n_ell
                continue
            pos += 1
            fits = fits and bool(d.names) and unit_of[d.names[0]] == d.names  # the dim is one einsum axis
            for name in d.names:
                unit = unit_of[name]
                if unit[0] == name:  # an einsum axis starts here (a fused one may end in a later dim)
                    text += letter[name]
                    if shape is not None:
                        target.append(math.prod(known[a] for a in unit))
        spec_parts.append(text)
        if shape is not None and "." not in text:
            sizes.update(zip(text, target))
        if shape is None:  # the output: its own dims' lengths, when they are not the einsum's
            post = None
            if not fits:
                post = ()
                for d in dims:
                    post += ell_shape if d.names == (ELLIPSIS,) else (math.prod(known[a] for a in d.names),)
        else:
            reshapes.append(None if fits else tuple(target))
    spec = ",".join(spec_parts[:-1]) + "->" + spec_parts[-1]
    return EinsumPlan(tuple(reshapes) if any(p is not None for p in reshapes) else (), spec, post,
                      _matmul(spec_parts, sizes, reshapes, post))


def _matmul(parts: list[str], sizes: dict, pre: list, post: tuple | None) -> EinsumMatmul | None:
    """The einsum ``a,b->out`` (one letter per axis) as one matmul, or None where it is not a matrix
    product: another number of operands, '...', a repeated letter (a diagonal), nothing summed (an
    outer product is a multiplication), a letter summed within one operand, or an unbatched product
    with an operand that has no free axis of its own (a matrix-vector or dot product: inductor's
    einsum sums such a long contraction in a tree, where its matmul adds it up in one sequence, less
    precisely, and there is no attention pattern to fuse)."""
    if len(parts) != 3 or "." in "".join(parts):
        return None
    a, b, out = parts
    summed = [c for c in a if c in b and c not in out]
    if (not summed or len(set(a)) < len(a) or len(set(b)) < len(b)
            or any(c not in out and c not in summed for c in a + b)
            or not any(c in a and c in b for c in out)
            and not (any(c in out and c not in b for c in a) and any(c in out and c not in a for c in b))):
        return None
    if not any(symbolic(sizes[c]) for c in summed) and all(sizes[c] == 1 for c in summed):
        return None  # nothing is summed: torch.einsum multiplies, and its result has that product's layout
    pre_a, pre_b = (None if p is None else Reshape(tuple(p)) for p in pre)
    straight = _matmul_steps(a, b, summed, out, sizes, pre_a, pre_b, post)
    swapped = _matmul_steps(b, a, summed, out, sizes, pre_b, pre_a, post)
    if _cost(b, a, out, sizes, swapped) < _cost(a, b, out, sizes, straight):  # the output puts b's axes first
        return EinsumMatmul(swapped[1], swapped[0], True, swapped[2])
    return EinsumMatmul(*straight[:2], False, straight[2])


def _cost(x: str, y: str, out: str, sizes: dict, steps: tuple) -> tuple[bool, bool, int]:
    """matmul(x, y)'s cost, where its result should have torch.einsum's layout: whether the result's
    axes need reordering (it is then not contiguous; an operand's permute is read by matmul as it is),
    whether x's free axes come after y's in the output (torch.einsum's result holds the free axes in
    output order), then the steps. Axes of length 1, which torch.einsum drops, do not count."""
    long = [c for c in out if symbolic(sizes[c]) or sizes[c] != 1]
    batch = [c for c in long if c in x and c in y]
    left, right = [c for c in long if c not in y], [c for c in long if c not in x]
    late = bool(left and right) and long.index(left[0]) > long.index(right[0])
    return batch + left + right != long, late, sum(map(len, steps))


def _matmul_steps(x: str, y: str, summed: list[str], out: str, sizes: dict, pre_x: Reshape | None,
                  pre_y: Reshape | None, post: tuple | None) -> tuple[tuple, tuple, tuple]:
    """The steps of matmul(x, y) for the einsum x,y->out: x as (batch..., free of x, summed), y as
    (batch..., summed, free of y), each role one dimension. Without batch axes, x keeps its free axes
    apart (matmul broadcasts over them, as ``x @ w`` does) and a role without axes is no dimension
    (matmul's vector cases)."""
    batch = [c for c in out if c in x and c in y]
    left, right = [c for c in out if c in x and c not in y], [c for c in out if c in y and c not in x]
    k = tuple(summed)
    if batch:
        x_dims, y_dims = [(c,) for c in batch] + [tuple(left), k], [(c,) for c in batch] + [k, tuple(right)]
    else:
        x_dims, y_dims = [(c,) for c in left] + [k], [k] + ([tuple(right)] if right else [])
    res_dims = x_dims[:-1] + y_dims[len(batch) + 1:]
    flat = [c for d in res_dims for c in d]
    permute = flat != list(out)
    steps: list = []
    if any(len(d) != 1 for d in res_dims) and (permute or post is None):  # else post's reshape does it
        steps.append(Reshape(tuple(sizes[c] for c in flat)))
    if permute:
        steps.append(Permute(tuple(flat.index(c) for c in out)))
    if post is not None:
        steps.append(Reshape(post))
    return _operand_steps(x, x_dims, sizes, pre_x), _operand_steps(y, y_dims, sizes, pre_y), tuple(steps)


def _operand_steps(have: str, dims: list[tuple], sizes: dict, pre: Reshape | None) -> tuple:
    """An operand's steps to matmul's dims: its plan reshape, a permute, a reshape that merges each role."""
    steps = [] if pre is None else [pre]
    order = [c for d in dims for c in d]
    if order != list(have):
        steps.append(Permute(tuple(have.index(c) for c in order)))
    if any(len(d) != 1 for d in dims):
        steps.append(Reshape(tuple(math.prod(sizes[c] for c in d) for d in dims)))
    return tuple(steps)


def _units(sides: list) -> list[tuple[str, ...]]:
    """The einsum's axes. A group such as ``(h w)`` whose axes stand together, in that order, in every
    operand where any of them stands becomes one einsum axis (no reshape where it stays grouped),
    unless that costs more reshapes than it saves; every other axis is its own."""
    flats = [[n for d in dims for n in d.names] for dims in sides]
    fused: dict[str, tuple[str, ...]] = {}
    for run in dict.fromkeys(d.names for dims in sides for d in dims if len(d.names) > 1):
        if ELLIPSIS in run or len(set(run)) < len(run) or any(n in fused for n in run):
            continue
        together = True
        for flat in flats:
            at = [k for k, n in enumerate(flat) if n in run]
            together = together and (not at or flat[at[0]: at[0] + len(run)] == list(run) == [flat[k] for k in at])
        if together and _reshapes(sides, run, True) <= _reshapes(sides, run, False):
            fused.update((n, run) for n in run)
    units: list[tuple[str, ...]] = []
    for n in dict.fromkeys(n for flat in flats for n in flat if n != ELLIPSIS):
        unit = fused.get(n, (n,))
        if unit[0] == n:
            units.append(unit)
    return units


def _reshapes(sides: list, run: tuple[str, ...], fused: bool) -> int:
    """How many operands need a reshape for ``run``, fused into one einsum axis or not."""
    count = 0
    for dims in sides:
        holding = [d for d in dims if set(d.names) & set(run)]
        if holding:
            count += not (len(holding) == 1 and holding[0].names == run) if fused else any(len(d.names) > 1 for d in
                                                                                          holding)
    return count


def _broadcast(pattern: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape that '...' stands for on the output: the inputs' '...' shapes broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1 and out[i] not in (1, n):
                raise RearrError(f"the operands' '...' shapes {' and '.join(map(str, shapes))} do not broadcast",
                                 code="RA303", pattern=pattern, hint="give '...' equal (or length-1) dimensions")
            out[i] = n if n != 1 else out[i]  # 0 too: a 0-length '...' dimension stays 0 (max would make it 1)
    return tuple(out)
