"""The types of the public signatures, for type checkers; the names of the reductions and checking
modes, which rules/ reads from here (so that a type checker and the library take the same names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypeVar


class Shaped(Protocol):
    """What every tensor that rearr takes has (numpy, torch, dask, jax and other Array API arrays):
    a shape. The bound lets a type checker tell a list of tensors (stacked) from one tensor."""

    @property
    def shape(self) -> Any: ...


Tensor = TypeVar("Tensor", bound=Shaped)

ReductionName = Literal["min", "max", "sum", "mean", "prod", "any", "all"]
# reduce's reduction: a name, "rearrange" (einops' reduce that reduces nothing), or f(x, axes).
Reduction = ReductionName | Literal["rearrange"] | Callable[[Tensor, tuple[int, ...]], Any]
ScatterReduction = Literal["sum", "mean", "max", "min", "prod", "set"]
CheckMode = Literal["sync", "async"]  # check_bounds= besides True and False
CheckBounds = bool | CheckMode
