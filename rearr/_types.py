"""The type of the tensors in the public signatures, for type checkers."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar


class Shaped(Protocol):
    """What every tensor that rearr takes has (numpy, torch, dask, jax and other Array API arrays):
    a shape. The bound lets a type checker tell a list of tensors (stacked) from one tensor."""

    @property
    def shape(self) -> Any: ...


Tensor = TypeVar("Tensor", bound=Shaped)
