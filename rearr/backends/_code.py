"""What the backends' explain templates share: the names they write and a few text helpers.

A backend's ``CODE`` table maps each step kind to a template ``f(step, before,
names) -> lines``, written next to the function that runs the step, and prints
that function's native calls with the numbers of one plan (``before`` is the
plan's Layout of the tensor the step receives). tests/tools/test_explain.py runs
the printed lines and compares them with rearr's result. Nothing here imports a
framework: explain prints torch code without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._record import Record
from ..planning.plan import IndexTerm, Layout


class CodeNames(Record):
    """The variables the printed code uses, chosen by explain to differ from every axis and index name."""

    x: str  # the input, then each step's result
    out: str
    flat: str  # the rows (or flat positions) a gather/scatter moves
    pos: str  # numpy's scatter: the element positions of those rows
    counts: str
    sums: str
    offset: str
    reduction: str  # the callable passed as reduction
    index_shapes: dict[str, tuple[int, ...]]
    hit: str = "hit"  # a scatter's mask of the places something lands
    grad: bool = False  # the code that runs when the input records a backward (explain's requires_grad=)


Template = Callable[[object, Layout, CodeNames], list[str]]


def args(values: Sequence[int]) -> str:
    """Unpacked arguments: ``2, 3`` (``()`` for none)."""
    return ", ".join(map(str, values)) or "()"


def tup(values: Sequence[int]) -> str:
    """A tuple literal: ``(2,)``, ``(2, 3)``, ``()``."""
    return f"({values[0]},)" if len(values) == 1 else f"({', '.join(map(str, values))})"


def view(expr: str, have: tuple[int, ...], want: tuple[int, ...], method: str) -> str:
    """expr viewed as ``want`` with ``method`` (reshape / view), unless it has that shape already."""
    return expr if have == want else f"{paren(expr)}.{method}({', '.join(map(str, want))})"


def paren(expr: str) -> str:
    """expr, in parentheses where an operator outside any bracket would bind looser than a method call."""
    depth = 0
    for k, ch in enumerate(expr):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and expr[k:k + 3] in (" + ", " * "):
            return f"({expr})"
    return expr


def broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape that ``shapes`` broadcast to."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    return tuple(max(col) if min(col) != 0 else 0 for col in zip(*padded))


def einsum_lines(plan, operands: Sequence[str], call: Callable[[str, str], str]) -> list[str]:
    """explain's lines of an einsum that runs as the backend's einsum (planning.einsum.EinsumPlan): the
    operands' reshapes, ``x = call(spec literal, operands)``, the result's reshape; the first operand's
    name holds the result. rearr.run.einsum.run makes these calls."""
    lines = [f"{name} = {name}.reshape({args(shape)})" for name, shape in zip(operands, plan.pre) if shape is not None]
    x = operands[0]
    lines.append(f"{x} = {call(repr(plan.spec), ', '.join(operands))}")
    if plan.post is not None:
        lines.append(f"{x} = {x}.reshape({args(plan.post)})")
    return lines


def index_expr(t: IndexTerm, names: CodeNames, permute: Callable[[str, tuple[int, ...]], str]) -> tuple[str, tuple]:
    """An index term's index tensor, permuted as the term says: (expression, its shape)."""
    assert t.index is not None
    expr, have = t.index, names.index_shapes[t.index]
    if t.perm != tuple(range(len(t.perm))):
        have = tuple(have[p] for p in t.perm)
        expr = permute(expr, t.perm)
    return expr, have


def row_positions(
    terms: Sequence[IndexTerm], space: tuple[int, ...], names: CodeNames, term: Callable[[IndexTerm, CodeNames], str],
    broadcast_to: Callable[[str, tuple[int, ...]], str],
) -> tuple[list[str], str]:
    """(lines, expression) of a backend's _row_positions: the terms' sum, broadcast to the index space,
    flattened; the broadcast and the flattening are left out where they change nothing."""
    total = " + ".join(term(t, names) for t in terms)
    if broadcast([t.shape for t in terms]) != space:
        total = broadcast_to(total, space)
    if len(space) != 1:
        total = f"{paren(total)}.reshape(-1)"
    if total.replace(".reshape(-1)", "").isidentifier():
        return [], total
    return [f"{names.flat} = {total}"], names.flat
