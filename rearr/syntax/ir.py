"""The pattern as data: immutable records (rearr._record), no shapes, no backend.

Columns (``col``) are 0-based character offsets into the pattern text, kept on
every node so that any later stage can point at the fault.
"""

from __future__ import annotations

from .._record import Record


class Index(Record):
    """``[idx]`` or ``[idx: b k]`` after an axis: the axis is read (input side)
    or written (output side) at the positions held in the index tensor."""

    name: str
    col: int
    axes: tuple[str, ...] | None = None  # None: the other side's axes, in order
    axes_cols: tuple[int, ...] = ()


class Axis(Record):
    name: str
    col: int
    index: Index | None = None


class Anon(Record):
    """An integer axis: ``1`` is a unit axis, ``n > 1`` an anonymous axis."""

    value: int
    col: int


class Ellipsis(Record):  # noqa: A001 - the pattern's own word for it
    col: int


class Star(Record):
    """``*`` in pack/unpack: the packed axes."""

    col: int


class Skip(Record):
    """``_`` in parse_shape: a dimension that is not named."""

    col: int


Item = Axis | Anon | Ellipsis


class Group(Record):
    """``(a b ...)``: a dimension made of several axes, row-major."""

    items: tuple[Item, ...]
    col: int


Entry = Axis | Anon | Ellipsis | Group | Star | Skip  # one dimension as written (rules.recipe.Dim: its axes)


class Operand(Record):
    dims: tuple[Entry, ...]
    col: int  # where the operand starts (or would start, when empty)


class Pattern(Record):
    text: str
    inputs: tuple[Operand, ...]
    outputs: tuple[Operand, ...] | None  # None when the pattern has no '->'
    arrow: int | None = None  # column of '->'
