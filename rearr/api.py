"""The public functions: each its signature and docstring, then its call into rearr.run.

rearrange, reduce and repeat first look the call up in the table of calls without index brackets
(rearr.run.cache.unindexed), and rearrange a gather in the direct table (cache.DIRECT): a call seen before
runs its program from there. Anything else goes on to the careful path, rearr.run.call.transform,
with the keys of those look-ups, under which it keeps the program it makes. The unindexed key is built
here, as rearr.run.cache.unindexed_key builds it, rather than by calling it, and so is rearrange's direct
key (rearr.run.cache.direct_key's): a Python frame is a part of a tiny call that bench_ab.py and
count_tiny_gather.py measure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, overload

from . import run as _run
from .run import cache as _cache
from .run.cache import CAREFUL as _CAREFUL
from .run.cache import SHAPE as _SHAPE
from .run.call import asnumpy as _asnumpy
from .run.call import check_bounds_mode as _check_bounds_mode
from .run.call import einsum as _einsum
from .run.call import raise_in_context as _raise_in_context
from .run.call import scatter as _scatter
from .run.call import transform as _transform

if TYPE_CHECKING:  # annotations only: `import rearr` does not build the type aliases (rules/ does, on a first call)
    from numpy.typing import NDArray

    from ._types import CheckBounds, Reduction, ScatterReduction, Tensor

# Assigned, not imported: CPython 3.11 compiles a method call on a name that an import binds as a
# module attribute's (a new bound method each call), on an assigned name as a method call.
_UNINDEXED, _DIRECT = _cache.UNINDEXED, _cache.DIRECT


def rearrange(
    tensor: Tensor | Sequence[Tensor], pattern: str, *, check_bounds: CheckBounds = True, **axes_lengths: Any
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
    if check_bounds is not True and check_bounds is not False:  # a mode to validate, seen before or not
        _check_bounds_mode(check_bounds, "rearrange", pattern)
    try:  # a call seen before, without brackets: its program (the key: rearr.run.cache.unindexed_key's, built here)
        key = run = None
        items = ()
        if axes_lengths:
            values = axes_lengths.values()
            for value in values:
                if value.__class__ is not int:  # an index, or a length to validate first (2.0 == 2)
                    items = None
                    break
            else:
                items = tuple(axes_lengths.items())
        if items is not None:
            key = ("rearrange", pattern, None, tensor.__class__, tensor.shape, items)
            run = _UNINDEXED.get(key)
    except Exception:  # not a tensor, or not hashable: the careful path says why, or keys it itself
        key = run = None
    if run is not None:
        try:  # the program runs once: what it raises is what the caller sees
            return run(tensor, None)
        except Exception as e:
            _raise_in_context(e, "rearrange", tensor, pattern, axes_lengths)
            raise
    direct = None
    if items is None and (check_bounds is True or check_bounds is False):  # an index (in values): a gather seen before?
        try:  # see rearr.run.cache.DIRECT (the key: rearr.run.cache.direct_key's, built here)
            direct = ("rearrange", pattern, None, check_bounds, tensor.__class__, tensor.shape, tensor.dtype,
                      *axes_lengths, *map(getattr, values, _SHAPE, values))
            run = _DIRECT.get(direct)
        except Exception:  # not a tensor, or not hashable: the careful path
            direct = None
        if run is not None:
            try:
                out = run(tensor, axes_lengths)
            except Exception as e:
                _raise_in_context(e, "rearrange", tensor, pattern, axes_lengths)
                raise
            if out is not _CAREFUL:  # else it declined before running: the careful path says why
                return out
    return _transform("rearrange", tensor, pattern, None, axes_lengths, check_bounds, key, direct)


def reduce(
    tensor: Tensor | Sequence[Tensor],
    pattern: str,
    reduction: Reduction[Tensor],
    **axes_lengths: Any,
) -> Tensor:
    """Like rearrange, with the axes missing on the output side combined by ``reduction``:
    'min', 'max', 'sum', 'mean', 'prod', 'any', 'all', or a callable f(x, axes)."""
    try:  # as in rearrange
        key = run = None
        items = ()
        if axes_lengths:
            for value in axes_lengths.values():
                if value.__class__ is not int:  # an index, or a length to validate first (2.0 == 2)
                    items = None
                    break
            else:
                items = tuple(axes_lengths.items())
        if items is not None:
            key = ("reduce", pattern, reduction, tensor.__class__, tensor.shape, items)
            run = _UNINDEXED.get(key)
    except Exception:
        key = run = None
    if run is not None:
        try:
            return run(tensor, None)
        except Exception as e:
            _raise_in_context(e, "reduce", tensor, pattern, axes_lengths)
            raise
    return _transform("reduce", tensor, pattern, reduction, axes_lengths, True, key)


def repeat(tensor: Tensor | Sequence[Tensor], pattern: str, **axes_lengths: Any) -> Tensor:
    """Like rearrange, with new output axes repeating the input (lengths as keywords)."""
    try:  # as in rearrange
        key = run = None
        items = ()
        if axes_lengths:
            for value in axes_lengths.values():
                if value.__class__ is not int:  # an index, or a length to validate first (2.0 == 2)
                    items = None
                    break
            else:
                items = tuple(axes_lengths.items())
        if items is not None:
            key = ("repeat", pattern, None, tensor.__class__, tensor.shape, items)
            run = _UNINDEXED.get(key)
    except Exception:
        key = run = None
    if run is not None:
        try:
            return run(tensor, None)
        except Exception as e:
            _raise_in_context(e, "repeat", tensor, pattern, axes_lengths)
            raise
    return _transform("repeat", tensor, pattern, None, axes_lengths, True, key)


def scatter(
    src: Tensor | Sequence[Tensor],
    /,
    pattern: str,
    reduction: ScatterReduction,
    *,
    fill: Any = None,
    into: Tensor | None = None,
    check_bounds: CheckBounds = True,
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


@overload
def einsum(tensor: Tensor, pattern: str, /, **axes_lengths: Any) -> Tensor: ...
@overload
def einsum(tensor1: Tensor, tensor2: Tensor, pattern: str, /, **axes_lengths: Any) -> Tensor: ...
@overload
def einsum(tensor1: Tensor, tensor2: Tensor, tensor3: Tensor, pattern: str, /, **axes_lengths: Any) -> Tensor: ...
@overload
def einsum(tensor1: Tensor, tensor2: Tensor, tensor3: Tensor, tensor4: Tensor, pattern: str, /,
           **axes_lengths: Any) -> Tensor: ...
@overload
def einsum(*tensors_and_pattern: Tensor | str, **axes_lengths: Any) -> Tensor: ...
def einsum(*tensors_and_pattern: Any, **axes_lengths: Any) -> Any:
    """einsum with axis names, the pattern last: einsum(x, y, "b i, b j -> b i j").

    Groups such as ``(h w)`` may stand on either side (lengths as keywords where the operands do
    not give them), and ``1`` or ``()`` for unit axes: they become reshapes around the backend's
    einsum. On torch, a two-operand matrix product (batched or not) runs as permutes and reshapes
    around ``torch.matmul``, as one writes it by hand (docs/language.md, einsum). The result is of
    the operands' tensor type.
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
    return _asnumpy(tensor)


def parse_shape(x: Any, pattern: str) -> dict[str, int]:
    """The lengths of the named axes: parse_shape(x, "b _ h w") -> {'b': 2, 'h': 5, 'w': 7}."""
    return _run.parse_shape.parse_shape(x, pattern)
