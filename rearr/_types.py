"""The types of the public signatures, for type checkers; the names of the reductions and checking
modes, which rules/ reads from here (so that a type checker and the library take the same names).

Only those names exist at run time: the rest is read by type checkers alone (the public modules
import it under TYPE_CHECKING): building a Protocol and the unions cost a first call more than the
rest of this module (benchmarks/README.md, "The careful path")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

ReductionName = Literal["min", "max", "sum", "mean", "prod", "any", "all"]
ScatterReduction = Literal["sum", "mean", "max", "min", "prod", "set"]
CheckMode = Literal["sync", "async"]  # check_bounds= besides True and False

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol, TypeVar

    class Shaped(Protocol):
        """What every tensor that rearr takes has (numpy, torch, dask, jax and other Array API arrays):
        a shape. The bound lets a type checker tell a list of tensors (stacked) from one tensor."""

        @property
        def shape(self) -> Any: ...

    Tensor = TypeVar("Tensor", bound=Shaped)

    # reduce's reduction: a name, "rearrange" (einops' reduce that reduces nothing), or f(x, axes).
    Reduction = ReductionName | Literal["rearrange"] | Callable[[Tensor, tuple[int, ...]], Any]
    CheckBounds = bool | CheckMode
