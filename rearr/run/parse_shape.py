"""parse_shape: the lengths of a tensor's named axes, read with no plan (its docstring is rearr.api's;
the rule of which dimension each name reads is rearr.planning.parse_shape's)."""

from __future__ import annotations

from typing import Any

from ..errors import RearrError
from ..planning import parse_shape as rule
from ..planning.lengths import length_of, unknown_length, unknown_lengths
from ..rules import recipe
from ..rules.recipe import traced_length
from .call import shape_of, tensor_and_backend


def parse_shape(tensor: Any, pattern: str) -> dict[str, int]:
    try:
        x, _ = tensor_and_backend(tensor)
        shape = tuple(map(traced_length, x.shape))  # a length may stay unknown: no known_shape here
        if pattern.__class__ is not str:
            recipe.parse(pattern)  # the RearrError that says a pattern is a str (not a cache's TypeError)
        result: dict[str, int] = {}
        for k, name, want, col in rule.layout(pattern, len(shape)):
            n = shape[k]  # a skipped dimension ('_', '...') may stay unknown
            if unknown_length(n):
                raise unknown_lengths(f"dimension {k} of the input's shape {shape} is unknown", col=col)
            n = length_of(n)
            if name is not None:
                result[name] = n
            elif n != want:
                raise RearrError(f"dimension {k} has length {n}, the pattern says {want}", code="RA303",
                                 pattern=pattern, col=col, hint="use '_' to skip a dimension")
        return result
    except RearrError as e:
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None, shape=shape_of(tensor),
                             op="parse_shape") from None
