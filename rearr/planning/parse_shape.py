"""parse_shape's rule: which dimension of the tensor each name of the pattern reads, and which
dimensions must have a given length (unit and anonymous axes). It needs only the pattern and the
rank, so torch.compile runs it once, as a constant."""

from __future__ import annotations

from ..rules import recipe
from .lengths import expand_ellipsis


def layout(pattern: str, ndim: int) -> tuple[tuple[int, str | None, int, int], ...]:
    """(dimension, axis name or None for a unit/anonymous axis, its required length, column) per checked
    dimension; '_' and the dimensions of '...' are not checked."""
    (dims,) = recipe.analyze(pattern, "parse_shape").inputs
    ins, _ = expand_ellipsis(pattern, dims, ndim)
    out = []
    for k, dim in enumerate(ins):
        names = dim.names
        if names == ("_",) or (names and names[0].startswith(recipe.ELLIPSIS)):
            continue
        anonymous = recipe.anonymous_length(names[0]) if names else 1
        out.append((k, names[0], 0, dim.col) if anonymous is None else (k, None, anonymous, dim.col))
    return tuple(out)


# torch.compile's dynamo calls it at trace time and keeps the result as a constant (the attribute
# that torch._dynamo.assume_constant_result sets; setting it needs no torch import).
layout._dynamo_marked_constant = True  # type: ignore[attr-defined]
