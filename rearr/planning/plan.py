"""The plan: the steps a backend runs, as plain data (planner.py makes it, backends run it).

A Plan is a tuple of steps (reshape, permute, reduce, expand, gather, scatter);
each backend turns each step kind into one or two native calls. The plan pairs
with the planner as the ir pairs with the parser: the planner decides, and the
plan is all that the backends, explain and api read.
"""

from __future__ import annotations

from typing import get_args

from .._record import Record
from ..rules.recipe import IndexSpec

# --- steps -------------------------------------------------------------------


class Reshape(Record):
    shape: tuple[int, ...]
    view: bool = True  # False: the backend copies (for a contiguous input)


class Permute(Record):
    perm: tuple[int, ...]
    view: bool = True


class Reduce(Record):
    reduction: object  # a name from recipe.REDUCTIONS or a callable f(x, axes)
    axes: tuple[int, ...]
    view: bool = False


class Expand(Record):
    shape: tuple[int, ...]
    view: bool = True


class IndexTerm(Record):
    """One term of a gather/scatter's flat position: ``index`` (or an arange) times ``stride``.

    The rows that TakeRows / ScatterRows move are the sum of their terms,
    broadcast over the index space; AdvancedIndex and the *Along steps use each
    term (stride 1) as the position along one axis. ``index`` names the index
    tensor (its axes permuted by ``perm`` and viewed as ``shape``); None means
    ``arange(length)`` viewed as ``shape``.
    """

    index: str | None
    length: int
    perm: tuple[int, ...]
    shape: tuple[int, ...]
    stride: int = 1
    source: tuple[int, ...] = ()  # the index tensor's own shape

    @property
    def permuted(self) -> tuple[int, ...]:
        """The index's shape after ``perm`` (before the view as ``shape``)."""
        return tuple(self.source[p] for p in self.perm) if self.index is not None else (self.length,)


class TakeRows(Record):
    """x is (rows, width); take the rows at sum(term * stride): index_select / take."""

    terms: tuple[IndexTerm, ...]
    space: tuple[int, ...]  # the index space's shape
    view: bool = False


class GatherAlong(Record):
    """torch.gather / np.take_along_axis on ``dim`` with the index expanded to ``shape``."""

    dim: int
    term: IndexTerm
    shape: tuple[int, ...]
    view: bool = False


class AdvancedIndex(Record):
    """x[c0, c1, ...] with broadcast coordinates for the leading axes."""

    terms: tuple[IndexTerm, ...]
    view: bool = False


class ScatterRows(Record):
    """out is (rows, width); combine the rows of x (n, width) into rows sum(term * stride)."""

    reduction: str
    rows: int
    terms: tuple[IndexTerm, ...]
    space: tuple[int, ...]
    into: tuple = ()  # steps that bring `into` to (rows, width)
    view: bool = False


class ScatterAlong(Record):
    """torch.scatter_reduce on ``dim``: x and the index have the same shape."""

    reduction: str
    dim: int
    term: IndexTerm
    shape: tuple[int, ...]  # the output's shape (in x's axis order)
    src_shape: tuple[int, ...] = ()  # x's shape, which the index is expanded to
    into: tuple = ()
    view: bool = False


Step = Reshape | Permute | Reduce | Expand | TakeRows | GatherAlong | AdvancedIndex | ScatterRows | ScatterAlong
STEP_KINDS: tuple[type, ...] = get_args(Step)  # what every backend's STEPS table covers


class Results(Record):
    """What a backend's native calls make of a result, where the backends differ: the planner plans
    around it so that every result is laid out as einops' is on that backend (contract.Backend.RESULTS).
    einops repeats, then reduces after its permute; rearr's plan reduces before the permute (a
    reduction of a permuted view is far slower in torch) and marks the steps that must
    then write their result out."""

    # repeat writes the repeated values out (einops' np.tile on numpy: a new, writable array), where
    # otherwise it is a stride-0 view (torch's expand): the planner's Expand steps are view=False
    repeat_copies: bool = False
    # a reduction's result is contiguous in its own axis order (torch), where otherwise it is laid out
    # in its input's memory order (numpy's order='K'): the permute after a reduction is view=False
    reduction_contiguous: bool = False


PLAIN = Results()  # repeats are views, reductions laid out as their input: jax, dask, the Array API


class Layout(Record):
    """A tensor's shape and strides (in elements) between two steps, for a contiguous input."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]


class IndexUse(Record):
    """An index tensor: the axis it indexes (with its length) and its shape."""

    name: str
    axis: str
    length: int
    axes: tuple[str, ...]
    shape: tuple[int, ...]
    col: int


class Plan(Record):
    op: str
    text: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    steps: tuple[Step, ...]
    in_dims: tuple[tuple[str, ...], ...]  # elementary axes of each input dim
    out_dims: tuple[tuple[str, ...], ...]
    lengths: tuple[tuple[str, int, str], ...]  # (axis, length, where it came from)
    indices: tuple[IndexUse, ...] = ()
    gathers: tuple[IndexSpec, ...] = ()
    scatters: tuple[IndexSpec, ...] = ()
    reduction: object = None
    into_shape: tuple[int, ...] | None = None
    layouts: tuple[Layout, ...] = ()  # the tensor before each step and after the last (the planner's tracker)

    @property
    def is_view(self) -> bool:
        """Whether the result shares memory with a contiguous input."""
        return all(step.view for step in self.steps)
