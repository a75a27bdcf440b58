"""pack and unpack: a list of tensors joined along one axis and split again, with no plan (their
docstrings are rearr.api's)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from ..backends import backend_for
from ..errors import RearrError
from ..planning.lengths import known_shape, length_of
from ..planning.plan import Reshape
from ..rules import arguments, recipe
from ..rules.recipe import traced_length
from .call import shape_of


def pack(tensors: Sequence[Any], pattern: str) -> tuple[Any, list[tuple[int, ...]]]:
    try:
        before, after = _pack_split(pattern, "pack")
        if not isinstance(tensors, list | tuple) or not tensors:
            what = "an empty list" if isinstance(tensors, list | tuple) else f"a {type(tensors).__name__}"
            raise RearrError(f"pack takes a non-empty list of tensors, not {what}", code="RA500", pattern=pattern,
                             hint="pass a list, e.g. pack([x, y], ...); with nothing to pack there is no result")
        backend = backend_for(tensors[0])
        pieces, shapes = [], []
        for i, t in enumerate(tensors):
            if backend_for(t) is not backend:
                raise RearrError(f"tensor {i} is a {type(t).__name__}, tensor 0 a {type(tensors[0]).__name__}",
                                 code="RA500", pattern=pattern, hint="pack tensors of one library")
            shape = known_shape(t.shape, f"tensor {i}")
            if len(shape) < before + after:
                raise RearrError(f"tensor {i} has {len(shape)} dimensions, the pattern needs at least "
                                 f"{before + after}", code="RA304", pattern=pattern, col=0,
                                 hint="every packed tensor has the named axes, in order")
            fixed = shape[:before] + shape[len(shape) - after:]
            first = known_shape(tensors[0].shape, "tensor 0")
            if fixed != first[:before] + first[len(first) - after:]:
                raise RearrError(f"tensor {i} has shape {shape}; its named axes differ from tensor 0's {first}",
                                 code="RA303", pattern=pattern, col=0,
                                 hint="the axes named in the pattern have one length in every packed tensor")
            packed = shape[before: len(shape) - after]
            shapes.append(t.shape[before: len(shape) - after])  # the tensor's own shape type, as einops: torch.Size
            # The packed length written out, not -1: a zero-length named axis leaves -1 undefined.
            pieces.append(_reshape(backend, t, shape[:before] + (_prod(packed),) + shape[len(shape) - after:]))
        return backend.concat(pieces, before), shapes
    except RearrError as e:
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None, op="pack") from None


def unpack(tensor: Any, packed_shapes: Iterable[Sequence[int]], pattern: str) -> list[Any]:
    try:
        before, after = _pack_split(pattern, "unpack")
        backend = backend_for(tensor)
        shape = known_shape(tensor.shape, "the tensor")
        if len(shape) != before + after + 1:
            raise RearrError(f"the tensor has {len(shape)} dimensions, the pattern {before + after + 1}",
                             code="RA304", pattern=pattern, col=0, hint="unpack the tensor that pack made")
        shapes = _packed_shapes(packed_shapes, shape[before], pattern)
        out, start = [], 0
        for packed in shapes:
            n = _prod(packed)
            piece = tensor[(slice(None),) * before + (slice(start, start + n), ...)]
            out.append(_reshape(backend, piece, shape[:before] + packed + shape[before + 1:]))
            start += n
        return out
    except RearrError as e:
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None, shape=shape_of(tensor),
                             op="unpack") from None


def _packed_shapes(packed_shapes: object, total: int, pattern: str) -> list[tuple[int, ...]]:
    """unpack's shapes, read once (a generator too), as tuples of ints; one -1 inferred."""
    fix = "pass the shapes that pack returned: a list of tuples of ints, e.g. [(), (4,)]"
    if isinstance(packed_shapes, str) or not isinstance(packed_shapes, Iterable):
        raise RearrError(f"the packed shapes must be a list of shapes, not {type(packed_shapes).__name__}",
                         code="RA305", pattern=pattern, hint=fix)
    shapes: list[list[int]] = []
    unknown: tuple[int, int] | None = None
    for k, s in enumerate(packed_shapes):
        if isinstance(s, str) or not isinstance(s, Iterable):
            raise RearrError(f"packed shape {k} is {s!r}, not a tuple of ints", code="RA305", pattern=pattern,
                             hint=f"write it as a tuple, e.g. ({s!r},)" if _is_length(s) else fix)
        shape = list(map(traced_length, s))  # pack's torch.Size, under torch.jit.trace, holds 0-d tensors
        for j, n in enumerate(shape):
            if arguments.symbolic(n):  # what pack returned under torch.compile's dynamic shapes
                continue
            if not _is_length(n) and not (_is_int(n) and n == -1):
                raise RearrError(f"packed shape {k} is {tuple(shape)}: {n!r} is not a length (an int >= 0, or "
                                 "-1 once to infer it)", code="RA305", pattern=pattern, hint=fix)
            if n == -1:
                if unknown is not None:
                    raise RearrError("more than one -1 in the packed shapes: the lengths cannot be inferred",
                                     code="RA301", pattern=pattern, hint="write out all lengths but one")
                unknown = (k, j)
        shapes.append([length_of(n) for n in shape])
    known = sum(_prod(s) for k, s in enumerate(shapes) if unknown is None or k != unknown[0])
    if unknown is not None:
        k, j = unknown
        rest = _prod(n for i, n in enumerate(shapes[k]) if i != j)
        left = total - known
        if left < 0 or rest == 0 or left % rest:
            raise RearrError(f"packed shape {k} {tuple(shapes[k])}: {left} remaining elements along '*' do not "
                             f"fill it", code="RA302", pattern=pattern, hint="pass pack's shapes")
        shapes[k][j] = left // rest
    elif known != total:
        raise RearrError(f"the packed shapes hold {known} elements along '*', the tensor has {total}",
                         code="RA303", pattern=pattern, hint="pass pack's shapes")
    return [tuple(s) for s in shapes]


def _is_int(n: object) -> bool:
    return isinstance(n, numbers.Integral) and not isinstance(n, bool)


def _is_length(n: object) -> bool:
    return _is_int(n) and int(n) >= 0  # type: ignore[call-overload]


def _reshape(backend: Any, t: Any, shape: tuple[int, ...]) -> Any:
    """Through the backend's reshape step: Array API arrays have no .reshape method."""
    # A torch.SymInt stays symbolic under torch.compile: int() would specialize the graph to one length.
    return backend.STEPS[Reshape](Reshape(tuple(length_of(n) for n in shape)))(t, None)


def _prod(shape: Iterable[int]) -> int:
    out = 1
    for n in shape:
        out *= length_of(n)
    return out


def _pack_split(pattern: str, op: str) -> tuple[int, int]:
    if pattern.__class__ is not str:
        recipe.parse(pattern)  # the RearrError that says a pattern is a str (not a cache's TypeError)
    return _pack_split_cached(pattern, op)


@lru_cache(maxsize=256)
def _pack_split_cached(pattern: str, op: str) -> tuple[int, int]:
    (dims,) = recipe.analyze(pattern, op).inputs
    star = [d.names for d in dims].index(("*",))
    return star, len(dims) - star - 1
