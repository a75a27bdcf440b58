"""The torch backend's own autograd functions (imported when the backend is made, once torch is)."""

from __future__ import annotations

import math

import torch
import torch.autograd.forward_ad as _forward_ad
from torch._C._functorch import is_functorch_wrapped_tensor as _functorch_wrapped

from ..errors import RearrError
from ._torch_ops import writer


def refuse_forward_mode_prod(text: str, *tensors: torch.Tensor | None) -> None:
    """A 'prod' scatter of tensors that may carry a forward-mode tangent (a dual level is open:
    torch.func.jvp, jacfwd, a Hessian by jacfwd(jacrev(f)), torch.autograd.forward_ad) is refused:
    torch's scatter_reduce 'prod' gives a zero tangent, and its backward's forward derivative (a
    forward-over-reverse Hessian) reads the same op. A tensor without one (a constant) passes."""
    if _forward_ad._current_level >= 0 and any(
            t is not None and (_functorch_wrapped(t) or _forward_ad.unpack_dual(t).tangent is not None)
            for t in tensors):
        raise RearrError("forward-mode AD through a 'prod' scatter: torch's scatter_reduce 'prod' computes a "
                         "zero tangent, which rearr does not return", code="RA500", pattern=text,
                         hint="use reverse mode: torch.func.jacrev (a Hessian: jacrev(jacrev(f))) or "
                         "torch.autograd.grad, whose gradients of 'prod' are right")


class AddRows(torch.autograd.Function):
    """base (None: zeros of `rows` rows) plus the rows of x at flat, as index_add, with the backward that
    index_add has (the output's gradient to base, its rows at flat to x) but keeping only the index.
    torch's own index_add saves x for its backward (for x's shape): a source made on the way, such as
    message passing's gathered rows, then lives until the backward runs, which raises the peak memory
    of a step. scatter_add with an expanded index keeps only the index too, but is slower on
    large sources. Used only where x needs a gradient."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, flat: torch.Tensor, base: torch.Tensor | None, rows: int) -> torch.Tensor:
        if base is None:
            return x.new_zeros((rows, x.shape[1])).index_add(0, flat, x)
        return base.index_add(0, flat, x)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.rows = inputs[3]
        ctx.save_for_backward(inputs[1])
        ctx.save_for_forward(inputs[1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (flat,) = ctx.saved_tensors
        return (grad.index_select(0, flat) if ctx.needs_input_grad[0] else None, None,
                grad if ctx.needs_input_grad[2] else None, None)

    @staticmethod
    def jvp(ctx, x_t: torch.Tensor | None, _: None, base_t: torch.Tensor | None, *__: None) -> torch.Tensor:
        """Forward mode (a Hessian's forward-over-reverse): the same sum of the tangents."""
        (flat,) = ctx.saved_tensors
        if x_t is None:
            return base_t.clone()  # a new tensor: an output's tangent may not be an input's
        start = base_t if base_t is not None else x_t.new_zeros((ctx.rows, x_t.shape[1]))
        return start.index_add(0, flat, x_t)


def _written(target: torch.Tensor, method: str, *args: object) -> torch.Tensor:
    """target.method_(*args) on a fresh target, or out of place where torch.func.vmap batches an argument
    (_torch_ops.writer)."""
    return writer(*args)(target, method, *args)


class ScatterExtremum(torch.autograd.Function):
    """A max / min scatter of x onto a fresh tensor of `shape`: scatter_reduce onto the reduction's
    identity with include_self=True (one pass over the index), fill where nothing lands, and the
    backward of include_self=False with a base that takes no part: the k sources equal to a position's
    result share its gradient, 1/k each (NaN where the result is NaN, as torch's). torch's own backward
    of this forward counts the identity as one more tie where every source is that infinity (1/(k+1)).
    index: the flat row positions (1-d, x's rows onto dim 0: the index ops, cheaper than an expanded
    index) or an index shaped like x along dim. Used only where x needs a gradient."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, index: torch.Tensor, dim: int, shape: tuple, native: str,
                fill: object) -> tuple[torch.Tensor, torch.Tensor]:
        """The scatter and where something landed (for the backward; no gradient)."""
        rows = index.dim() != x.dim()
        start = -math.inf if native == "amax" else math.inf  # a tensor that needs a gradient is a float
        full = index[:, None].expand(x.shape) if rows else index
        out = _written(x.new_full(shape, start), "scatter_reduce", dim, full, x, native)
        hit = torch.zeros(shape[:1] if rows else shape, dtype=torch.bool, device=x.device)
        hit = _written(hit, "index_fill", 0, index, True) if rows else _written(hit, "scatter", dim, index, True)
        empty = ~hit[:, None] if rows else ~hit
        return out.masked_fill_(empty, fill), empty  # an input of -inf is a value: only empty places take fill

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, index, dim = inputs[:3]
        ctx.dim = dim
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(x, index, *output)
        ctx.save_for_forward(x, index, *output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _: None):
        x, index, out, empty = ctx.saved_tensors
        tie, counts = _ties(ctx.dim, x, index, out, empty, grad)
        share = (grad / counts).index_select(0, index) if index.dim() != x.dim() else \
            (grad / counts).gather(ctx.dim, index)
        return tie * share, None, None, None, None, None  # a product, as torch's: NaN where the result is

    @staticmethod
    def jvp(ctx, x_t: torch.Tensor, *_: None):
        """Forward mode (a Hessian's forward-over-reverse): the mean of the tied sources' tangents."""
        x, index, out, empty = ctx.saved_tensors
        tie, counts = _ties(ctx.dim, x, index, out, empty, x_t)
        tied = torch.where(tie, x_t, 0)
        sums = _written(torch.zeros_like(counts), "index_add", 0, index, tied) if index.dim() != x.dim() else \
            _written(torch.zeros_like(counts), "scatter_add", ctx.dim, index, tied)
        return sums / counts, None


def _ties(dim: int, x: torch.Tensor, index: torch.Tensor, out: torch.Tensor, empty: torch.Tensor,
          like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ScatterExtremum's ties (the sources equal to their place's result) and each place's count of
    them, in like's dtype; an empty place counts 1, as torch's base does there: its share stays finite
    (a double backward reads it)."""
    counts = _written(like.new_zeros(out.shape), "masked_fill", empty, 1)
    if index.dim() != x.dim():
        tie = x == out.index_select(0, index)
        return tie, _written(counts, "index_add", 0, index, tie.to(like.dtype))
    tie = x == out.gather(dim, index)
    return tie, _written(counts, "scatter_add", dim, index, tie.to(like.dtype))
