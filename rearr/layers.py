"""torch ``nn.Module`` layers over rearr's functions: Rearrange, Reduce, Repeat, EinMix, Gather, Scatter.

Importing this module imports torch (``import rearr`` does not). Each layer checks its pattern and
lengths when it is built (a RearrError there, not at the first forward), keeps only plain values
(so it pickles and its ``state_dict`` holds EinMix's parameters and nothing else), and its
``forward`` calls the public function: the plan is made once per input shape and cached there,
and the call stays traceable by ``torch.compile``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from . import api, ir, recipe
from .errors import RearrError

__all__ = ["EinMix", "Gather", "Rearrange", "Reduce", "Repeat", "Scatter"]


def _check(layer: str, pattern: object, op: str, reduction: object = None, lengths: dict | None = None) -> Any:
    """The pattern's Recipe, or the RearrError a call would raise, now."""
    if not isinstance(pattern, str):
        raise _pattern_error(pattern, layer)
    err = recipe.validate(pattern, op, reduction, lengths)  # type: ignore[arg-type]
    if err is not None:
        raise err.with_context(op=layer)
    return recipe.analyze(pattern, op, reduction, tuple(sorted(lengths or ())))  # type: ignore[arg-type]


def _pattern_error(pattern: object, layer: str) -> RearrError:
    try:
        recipe.parse(pattern)
    except RearrError as e:
        return e.with_context(op=layer)
    raise AssertionError("unreachable: only a str parses")  # pragma: no cover


def _args(*values: object, lengths: dict[str, Any]) -> str:
    return ", ".join([repr(v) for v in values] + [f"{k}={v!r}" for k, v in lengths.items()])


class _Layer(nn.Module):
    pattern: str
    lengths: dict[str, Any]

    def _repr_args(self) -> str:
        return _args(self.pattern, lengths=self.lengths)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._repr_args()})"


class Rearrange(_Layer):
    """``rearr.rearrange`` as a layer: ``Rearrange("b c h w -> b (c h w)")``."""

    def __init__(self, pattern: str, **lengths: Any) -> None:
        super().__init__()
        r = _check("Rearrange", pattern, "rearrange", None, lengths)
        if r.gathers:
            raise RearrError("Rearrange takes no index brackets: their tensors come with each call",
                             code="RA204", pattern=pattern, col=r.gathers[0].col - 1, op="Rearrange",
                             hint=f"use rearr.layers.Gather({pattern!r}) and pass the index to forward")
        self.pattern, self.lengths = pattern, dict(lengths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return api.rearrange(x, self.pattern, **self.lengths)


class Reduce(_Layer):
    """``rearr.reduce`` as a layer: ``Reduce("b c (h 2) (w 2) -> b c h w", "max")``."""

    def __init__(self, pattern: str, reduction: str | Callable, **lengths: Any) -> None:
        super().__init__()
        if not (callable(reduction) or isinstance(reduction, str)):
            raise RearrError(f"the reduction must be a name or a callable, not {type(reduction).__name__}",
                             code="RA400", pattern=pattern if isinstance(pattern, str) else None, op="Reduce",
                             hint=f"one of {', '.join(recipe.REDUCTIONS)}")
        if reduction == "rearrange":  # as einops: a Reduce that reduces nothing
            _check("Reduce", pattern, "rearrange", None, lengths)
        else:
            _check("Reduce", pattern, "reduce", reduction, lengths)
        self.pattern, self.reduction, self.lengths = pattern, reduction, dict(lengths)

    def _repr_args(self) -> str:
        return _args(self.pattern, self.reduction, lengths=self.lengths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return api.reduce(x, self.pattern, self.reduction, **self.lengths)


class Repeat(_Layer):
    """``rearr.repeat`` as a layer: ``Repeat("b c -> b c r", r=3)``."""

    def __init__(self, pattern: str, **lengths: Any) -> None:
        super().__init__()
        _check("Repeat", pattern, "repeat", None, lengths)
        self.pattern, self.lengths = pattern, dict(lengths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return api.repeat(x, self.pattern, **self.lengths)


class Gather(_Layer):
    """A gather (``rearrange`` with an index bracket) as a layer; the index tensors come with each call:
    ``Gather("v[ids: b t] d -> b t d")(table, ids=tokens)``."""

    def __init__(self, pattern: str, **lengths: Any) -> None:
        super().__init__()
        r = _check("Gather", pattern, "rearrange", None, lengths)
        if not r.gathers:
            raise RearrError("Gather needs an index bracket on the input side", code="RA204", pattern=pattern,
                             op="Gather", col=0, hint="write the axis that is read with its index, e.g. "
                             "'b n[idx] -> b'; without one, use rearr.layers.Rearrange")
        _no_index_lengths("Gather", pattern, r, lengths)
        self.pattern, self.lengths = pattern, dict(lengths)

    def forward(self, x: torch.Tensor, /, **indices: torch.Tensor) -> torch.Tensor:
        return api.rearrange(x, self.pattern, **self.lengths, **indices)


class Scatter(_Layer):
    """``rearr.scatter`` as a layer; the index tensors (and ``into=``) come with each call:
    ``Scatter("v[src: e] c -> v[dst: e] c", "mean")(x, src=s, dst=d)``.

    ``fill`` is the value of the positions that receive nothing; with ``into=`` every position
    starts from ``into``, so a layer built with a non-zero ``fill`` refuses ``into=``.
    """

    def __init__(self, pattern: str, reduction: str, fill: float = 0, **lengths: Any) -> None:
        super().__init__()
        if not isinstance(reduction, str):
            raise RearrError("scatter's reduction is a name", code="RA400", op="Scatter",
                             pattern=pattern if isinstance(pattern, str) else None,
                             hint=f"one of {', '.join(recipe.SCATTER_REDUCTIONS)}")
        r = _check("Scatter", pattern, "scatter", reduction, lengths)
        if isinstance(fill, bool) or not isinstance(fill, numbers.Number):
            raise RearrError(f"fill= must be a number, not {type(fill).__name__}", code="RA500", pattern=pattern,
                             op="Scatter", hint="pass a Python number, e.g. fill=0.0")
        _no_index_lengths("Scatter", pattern, r, lengths)
        self.pattern, self.reduction, self.fill, self.lengths = pattern, reduction, fill, dict(lengths)

    def _repr_args(self) -> str:
        lengths = {"fill": self.fill, **self.lengths} if self.fill != 0 else self.lengths
        return _args(self.pattern, self.reduction, lengths=lengths)

    def forward(self, src: torch.Tensor, /, into: torch.Tensor | None = None, **indices: torch.Tensor) -> torch.Tensor:
        if into is None:
            return api.scatter(src, self.pattern, self.reduction, fill=self.fill, **self.lengths, **indices)
        if self.fill != 0:
            raise RearrError(f"this Scatter layer has fill={self.fill!r}, and into= gives every position a value",
                             code="RA500", pattern=self.pattern, op="Scatter",
                             hint="build the layer without fill=, or call it without into=")
        return api.scatter(src, self.pattern, self.reduction, into=into, **self.lengths, **indices)


def _no_index_lengths(layer: str, pattern: str, r: recipe.Recipe, lengths: dict) -> None:
    for name in r.index_names:
        if name in lengths:
            raise RearrError(f"{name!r} is an index: its tensor comes with each call, not to the constructor",
                             code="RA204", pattern=pattern, col=r.col(name), op=layer,
                             hint=f"drop {name}= here and call the layer with {name}=tensor")


class EinMix(_Layer):
    """einops' EinMix: an einsum of the input with a weight that the layer owns, plus an optional bias.

    ``EinMix("b t c -> b t cout", weight_shape="c cout", bias_shape="cout", c=16, cout=32)`` is a
    linear layer over ``c``. Semantics and initialisation are einops': the weight is uniform in
    ±sqrt(3 / fan_in) and the bias in ±sqrt(1 / fan_in), where fan_in is the product of the weight's
    axes that are not on the output. Beyond einops, groups may stand anywhere, the weight's and the
    bias's shapes included: ``EinMix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", h=4, w=4, h2=2, w2=2)``
    mixes tokens with a weight stored as one (16, 4) matrix.
    """

    def __init__(self, pattern: str, weight_shape: str, bias_shape: str | None = None, **lengths: Any) -> None:
        super().__init__()
        self.pattern, self.weight_shape, self.bias_shape = pattern, weight_shape, bias_shape
        self.lengths = dict(lengths)
        try:
            spec = _einmix_spec(pattern, weight_shape, bias_shape, self.lengths)
        except RearrError as e:
            raise e.with_context(op="EinMix") from None
        self.einsum_pattern, self._post, weight_dims, bias_dims, fan_in = spec
        if not weight_dims:
            warnings.warn("EinMix: weight has no dimensions (means multiplication by a number)", stacklevel=2)
        fan_in = max(fan_in, 1)
        weight_bound, bias_bound = math.sqrt(3 / fan_in), math.sqrt(1 / fan_in)
        self.weight = nn.Parameter(torch.zeros(weight_dims).uniform_(-weight_bound, weight_bound))
        if bias_dims is None:
            self.register_parameter("bias", None)
        else:
            self.bias = nn.Parameter(torch.zeros(bias_dims).uniform_(-bias_bound, bias_bound))

    def _repr_args(self) -> str:
        shapes = (self.weight_shape,) if self.bias_shape is None else (self.weight_shape, self.bias_shape)
        return _args(self.pattern, *shapes, lengths=self.lengths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = api.einsum(x, self.weight, self.einsum_pattern, **self.lengths)
        if self.bias is not None:
            y = y + self.bias
        if self._post is not None:
            y = api.rearrange(y, self._post)
        return y


def _side(text: object, what: str) -> tuple[ir.Dim, ...]:
    """One side of EinMix's arguments as IR dims (no '->', no ',')."""
    if not isinstance(text, str):
        raise RearrError(f"the {what} must be a string of axis names, not {type(text).__name__}", code="RA100",
                         hint="e.g. weight_shape='c cout'")
    p = recipe.parse(text)
    if p.outputs is not None or len(p.inputs) != 1:
        raise RearrError(f"the {what} is one list of axes (no '->', no ',')", code="RA206", pattern=text,
                         col=p.arrow if p.arrow is not None else p.inputs[1].col, hint="e.g. 'c cout'")
    for dim in p.inputs[0].dims:
        for item in dim.items if isinstance(dim, ir.Group) else (dim,):
            if isinstance(item, ir.Ellipsis):
                raise RearrError(f"'...' is not allowed in the {what}: its shape is fully specified", code="RA202",
                                 pattern=text, col=item.col, hint="name every axis and pass its length")
    return p.inputs[0].dims


def _names(dims: tuple) -> list[str]:
    out = []
    for dim in dims:
        for item in dim.items if isinstance(dim, ir.Group) else (dim,):
            if isinstance(item, ir.Axis):
                out.append(item.name)
            elif isinstance(item, ir.Ellipsis):
                out.append("...")
    return out


def _einmix_spec(pattern: object, weight_shape: object, bias_shape: object, lengths: dict[str, Any]) -> tuple:
    """(einsum pattern to a flat output, flat -> output rearrange or None, weight dims, bias dims or None,
    fan_in), with einops' checks, as RearrErrors."""
    if not isinstance(pattern, str):
        recipe.parse(pattern)  # raises: a pattern is a str
    assert isinstance(pattern, str)
    p = recipe.parse(pattern)
    if p.outputs is None or len(p.inputs) != 1 or len(p.outputs) != 1:
        col = p.inputs[1].col if len(p.inputs) > 1 else (p.arrow if p.outputs is not None else len(pattern))
        raise RearrError("EinMix's pattern is one input operand, '->', one output operand", code="RA206",
                         pattern=pattern, col=col, hint="e.g. 'b t c -> b t cout', with weight_shape='c cout'")
    weight = _side(weight_shape, "weight shape")
    left_names, right_names, weight_names = _names(p.inputs[0].dims), _names(p.outputs[0].dims), _names(weight)
    if ("..." in left_names) != ("..." in right_names):
        raise RearrError("'...' must be on both sides of EinMix's pattern, or on neither", code="RA202",
                         pattern=pattern, hint="add '...' to the other side")
    flat_right = " ".join(right_names)
    right_text = pattern[p.arrow + 2:]  # type: ignore[operator]
    einsum_pattern = f"{pattern[:p.arrow].strip()}, {weight_shape} -> {flat_right}"
    # The einsum's own checks: every output axis is on some input, lengths name axes, groups divide.
    r = recipe.analyze(einsum_pattern, "einsum", None, tuple(sorted(lengths)))
    for name, value in lengths.items():
        recipe.check_length_value(r, name, value)
    missing = [a for a in weight_names if a not in lengths]
    if missing:
        raise RearrError(f"the weight's axis {missing[0]!r} has no length", code="RA301", pattern=weight_shape,
                         col=weight_shape.index(missing[0]) if isinstance(weight_shape, str) else None,
                         hint=f"pass it as a keyword, e.g. {missing[0]}=8")
    redundant = [a for a in weight_names if a not in left_names and a not in right_names]
    if redundant:
        raise RearrError(f"the weight's axis {redundant[0]!r} is on neither side of the pattern", code="RA200",
                         pattern=pattern, hint=f"drop {redundant[0]!r} from weight_shape, or add it to the pattern")
    weight_dims = [math.prod(lengths[a] for a in _names((d,))) for d in weight]
    fan_in = math.prod(lengths[a] for a in weight_names if a not in right_names)
    bias_dims = None
    if bias_shape is not None:
        bias_names = _names(_side(bias_shape, "bias shape"))
        for name in bias_names:
            if name not in right_names:
                raise RearrError(f"the bias's axis {name!r} is not on the output side", code="RA200",
                                 pattern=bias_shape, hint="the bias is added to the output: use output axes")
            if name not in lengths:
                raise RearrError(f"the bias's axis {name!r} has no length", code="RA301", pattern=bias_shape,
                                 hint=f"pass it as a keyword, e.g. {name}=8")
        # Aligned with the flat output, trailing '...'s axes broadcast: the bias's axes come after '...'.
        bias_dims = []  # as einops: a 1 for each output axis that is not the bias's, none for '...'
        for name in right_names:
            if name == "...":
                if any(n != 1 for n in bias_dims):
                    raise RearrError("all the bias's axes must come after '...' on the output side", code="RA202",
                                     pattern=pattern, hint="move '...' before the bias's axes")
            else:
                bias_dims.append(lengths[name] if name in bias_names else 1)
    grouped = any(isinstance(d, ir.Group) or isinstance(d, ir.Anon) for d in p.outputs[0].dims)
    post = f"{flat_right} ->{right_text}" if grouped else None
    return einsum_pattern, post, weight_dims, bias_dims, fan_in
