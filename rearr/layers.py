"""torch ``nn.Module`` layers over rearr's functions: Rearrange, Reduce, Repeat, EinMix, Gather, Scatter.

Importing this module imports torch (``import rearr`` does not). Each layer checks its pattern and
lengths when it is built (a RearrError there, not at the first forward), keeps only plain values
(so it pickles and its ``state_dict`` holds EinMix's parameters and nothing else), and its
``forward`` calls the public function: the plan is made once per input shape and cached there,
and the call stays traceable by ``torch.compile``.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

try:
    import torch
    from torch import nn
except ModuleNotFoundError as e:
    if e.name != "torch":  # torch is there but something it needs is not: its own error says what
        raise
    raise ModuleNotFoundError(
        "rearr.layers are torch modules, and torch is not installed: pip install torch "
        "(or, in a checkout of rearr, pip install '.[torch]'); rearr's functions work without it",
        name="torch") from e

from . import api
from .errors import RearrError
from .rules import layer_recipe

if TYPE_CHECKING:
    from ._types import CheckBounds, Reduction, ScatterReduction

__all__ = ["EinMix", "Gather", "Rearrange", "Reduce", "Repeat", "Scatter"]


def _check(layer: str, pattern: object, reduction: object = None, lengths: dict | None = None,
           fill: object = 0, check_bounds: object = True) -> None:
    """Raise now the RearrError that the layer's arguments would (rules: rearr/rules/layer_recipe.py)."""
    err = layer_recipe.layer_error(layer, pattern, reduction, lengths, fill, check_bounds)
    if err is not None:
        raise err.with_context(op=layer)


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
        _check("Rearrange", pattern, None, lengths)
        self.pattern, self.lengths = pattern, dict(lengths)

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # einops' name: layer(input=x) works as there
        return api.rearrange(input, self.pattern, **self.lengths)


class Reduce(_Layer):
    """``rearr.reduce`` as a layer: ``Reduce("b c (h 2) (w 2) -> b c h w", "max")``."""

    def __init__(self, pattern: str, reduction: Reduction[torch.Tensor], **lengths: Any) -> None:
        super().__init__()
        _check("Reduce", pattern, reduction, lengths)
        self.pattern, self.reduction, self.lengths = pattern, reduction, dict(lengths)

    def _repr_args(self) -> str:
        return _args(self.pattern, self.reduction, lengths=self.lengths)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return api.reduce(input, self.pattern, self.reduction, **self.lengths)


class Repeat(_Layer):
    """``rearr.repeat`` as a layer: ``Repeat("b c -> b c r", r=3)``."""

    def __init__(self, pattern: str, **lengths: Any) -> None:
        super().__init__()
        _check("Repeat", pattern, None, lengths)
        self.pattern, self.lengths = pattern, dict(lengths)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return api.repeat(input, self.pattern, **self.lengths)


class Gather(_Layer):
    """A gather (``rearrange`` with an index bracket) as a layer; the index tensors come with each call:
    ``Gather("v[ids: b t] d -> b t d")(table, ids=tokens)``. ``check_bounds`` is rearrange's."""

    check_bounds: CheckBounds = True  # also what a layer pickled before the option existed reads

    def __init__(self, pattern: str, check_bounds: CheckBounds = True, **lengths: Any) -> None:
        super().__init__()
        _check("Gather", pattern, None, lengths, check_bounds=check_bounds)
        self.pattern, self.check_bounds, self.lengths = pattern, check_bounds, dict(lengths)

    def _repr_args(self) -> str:
        return _args(self.pattern, lengths=_with_check_bounds(self.check_bounds, self.lengths))

    def forward(self, x: torch.Tensor, /, **indices: torch.Tensor) -> torch.Tensor:
        return api.rearrange(x, self.pattern, check_bounds=self.check_bounds, **self.lengths, **indices)


def _with_check_bounds(check_bounds: CheckBounds, lengths: dict[str, Any]) -> dict[str, Any]:
    """The keywords a repr shows: check_bounds= where it is not the default."""
    return lengths if check_bounds is True else {"check_bounds": check_bounds, **lengths}


class Scatter(_Layer):
    """``rearr.scatter`` as a layer; the index tensors (and ``into=``) come with each call:
    ``Scatter("v[src: e] c -> v[dst: e] c", "mean")(x, src=s, dst=d)``.

    ``fill`` is the value of the positions that receive nothing; with ``into=`` every position
    starts from ``into``, so a layer built with a non-zero ``fill`` refuses ``into=``.
    ``check_bounds`` is scatter's.
    """

    check_bounds: CheckBounds = True  # as Gather's

    def __init__(self, pattern: str, reduction: ScatterReduction, fill: float = 0, check_bounds: CheckBounds = True,
                 **lengths: Any) -> None:
        super().__init__()
        _check("Scatter", pattern, reduction, lengths, fill, check_bounds)
        self.pattern, self.reduction, self.fill, self.lengths = pattern, reduction, fill, dict(lengths)
        self.check_bounds = check_bounds

    def _repr_args(self) -> str:
        lengths = {"fill": self.fill, **self.lengths} if self.fill != 0 else self.lengths
        return _args(self.pattern, self.reduction, lengths=_with_check_bounds(self.check_bounds, lengths))

    def forward(self, src: torch.Tensor, /, into: torch.Tensor | None = None, **indices: torch.Tensor) -> torch.Tensor:
        checks = self.check_bounds
        if into is None:
            return api.scatter(src, self.pattern, self.reduction, fill=self.fill, check_bounds=checks,
                               **self.lengths, **indices)
        if self.fill != 0:
            raise RearrError(f"this Scatter layer has fill={self.fill!r}, and into= gives every position a value",
                             code="RA500", pattern=self.pattern, op="Scatter",
                             hint="build the layer without fill=, or call it without into=")
        return api.scatter(src, self.pattern, self.reduction, into=into, check_bounds=checks, **self.lengths,
                           **indices)


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
        found = layer_recipe.validate_einmix(pattern, weight_shape, bias_shape, self.lengths, groups=True)
        if found is not None:
            raise found[1].with_context(op="EinMix")
        spec = layer_recipe.einmix_spec(pattern, weight_shape, bias_shape, self.lengths)
        self.einsum_pattern, self._post = spec.einsum, spec.post
        if not spec.weight_shape:
            warnings.warn("EinMix: weight has no dimensions (means multiplication by a number)", stacklevel=2)
        fan_in = max(spec.fan_in, 1)
        weight_bound, bias_bound = math.sqrt(3 / fan_in), math.sqrt(1 / fan_in)
        self.weight = nn.Parameter(torch.zeros(spec.weight_shape).uniform_(-weight_bound, weight_bound))
        if spec.bias_shape is None:
            self.register_parameter("bias", None)
        else:
            self.bias = nn.Parameter(torch.zeros(spec.bias_shape).uniform_(-bias_bound, bias_bound))

    def _repr_args(self) -> str:
        shapes = (self.weight_shape,) if self.bias_shape is None else (self.weight_shape, self.bias_shape)
        return _args(self.pattern, *shapes, lengths=self.lengths)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        y = api.einsum(input, self.weight, self.einsum_pattern, **self.lengths)
        if self.bias is not None:
            y = y + self.bias
        if self._post is not None:
            y = api.rearrange(y, self._post)
        return y
