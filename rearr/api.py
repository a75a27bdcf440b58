"""The public functions: each its signature, its docstring and one call into rearr.run."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import run as _run
from ._types import Tensor
from .run._front_doors import front_door as _front_door
from .run._front_doors import transform as _transform
from .run.call import einsum as _einsum
from .run.call import scatter as _scatter

if TYPE_CHECKING:
    from numpy.typing import NDArray


@_front_door
def rearrange(
    tensor: Tensor | Sequence[Tensor], /, pattern: str, *, check_bounds: bool | str = True, **axes_lengths: Any
) -> Tensor:
    """Reorder, merge and split axes; gather through ``[index]`` brackets.

    Index tensors are passed as keywords, like lengths. ``check_bounds`` says how
    their values are checked: True (the exact error on the CPU, device-side
    assertions on CUDA), "sync" (the exact error everywhere), "async"
    (device-side assertions everywhere) or False (no range check, and no counting
    of negative values from the end).

    >>> rearrange(np.zeros((2, 3, 4)), "c b h -> b (c h)").shape
    (3, 8)
    """
    return _transform("rearrange", tensor, pattern, None, axes_lengths, check_bounds)


@_front_door
def reduce(
    tensor: Tensor | Sequence[Tensor],
    /,
    pattern: str,
    reduction: str | Callable[[Tensor, tuple[int, ...]], Any],
    **axes_lengths: Any,
) -> Tensor:
    """Like rearrange, with the axes missing on the output side combined by ``reduction``:
    'min', 'max', 'sum', 'mean', 'prod', 'any', 'all', or a callable f(x, axes)."""
    return _transform("reduce", tensor, pattern, reduction, axes_lengths)


@_front_door
def repeat(tensor: Tensor | Sequence[Tensor], /, pattern: str, **axes_lengths: Any) -> Tensor:
    """Like rearrange, with new output axes repeating the input (lengths as keywords)."""
    return _transform("repeat", tensor, pattern, None, axes_lengths)


def scatter(
    src: Tensor | Sequence[Tensor],
    /,
    pattern: str,
    reduction: str,
    *,
    fill: Any = None,
    into: Tensor | None = None,
    check_bounds: bool | str = True,
    **lengths_and_indices: Any,
) -> Tensor:
    """Write ``src`` into the output axis marked ``[index]``, combining duplicates by
    ``reduction`` ('sum', 'mean', 'max', 'min', 'prod', or 'set' for unique indices).

    Positions that receive nothing hold ``fill`` (default 0). With ``into=``, the
    result starts from a copy of ``into`` whose values take part in the reduction
    (torch's include_self=True) and ``fill`` is not used. No input is modified.
    ``check_bounds`` is rearrange's (the duplicate check of 'set' follows it, on
    the device's default where it is False).
    """
    return _scatter(src, pattern, reduction, fill, into, check_bounds, lengths_and_indices)


def einsum(*tensors_and_pattern: Any, **axes_lengths: Any) -> Any:
    """einsum with axis names, the pattern last: einsum(x, y, "b i, b j -> b i j").

    Groups such as ``(h w)`` may stand on either side (lengths as keywords where the operands do
    not give them), and ``1`` or ``()`` for unit axes: they become reshapes around the backend's
    einsum. On torch, a two-operand matrix product (batched or not) runs as permutes and reshapes
    around ``torch.matmul``, as one writes it by hand (docs/language.md, einsum).
    """
    return _einsum(tensors_and_pattern, axes_lengths)


def pack(tensors: Sequence[Tensor], pattern: str) -> tuple[Tensor, list[tuple[int, ...]]]:
    """Flatten the '*' axes of each tensor and concatenate: pack([x, y], "b * c")."""
    return _run.packing.pack(tensors, pattern)


def unpack(tensor: Tensor, packed_shapes: Iterable[Sequence[int]], pattern: str) -> list[Tensor]:
    """The inverse of pack: split the '*' axis into tensors of the given shapes (one of them may
    hold a -1, inferred as in einops)."""
    return _run.packing.unpack(tensor, packed_shapes, pattern)


def asnumpy(tensor: Any) -> NDArray[Any]:
    """The tensor as a numpy array (detached and on the CPU for torch), as einops.asnumpy."""
    return _run.packing.asnumpy(tensor)


def parse_shape(tensor: Any, pattern: str) -> dict[str, int]:
    """The lengths of the named axes: parse_shape(x, "b _ h w") -> {'b': 2, 'h': 5, 'w': 7}."""
    return _run.packing.parse_shape(tensor, pattern)
