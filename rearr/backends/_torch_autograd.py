"""The torch backend's own autograd functions (imported by its load(), once torch is)."""

from __future__ import annotations

import torch


class AddRows(torch.autograd.Function):
    """base (None: zeros of `rows` rows) plus the rows of x at flat, as index_add, with the backward that
    index_add has (the output's gradient to base, its rows at flat to x) but keeping only the index.
    torch's own index_add saves x for its backward (for x's shape): a source made on the way, such as
    message passing's gathered rows, then lives until the backward runs, which nearly doubles the peak
    memory of a step. scatter_add with an expanded index keeps only the index too, but is slower on
    large sources. Used only where x needs a gradient."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, flat: torch.Tensor, base: torch.Tensor | None, rows: int) -> torch.Tensor:
        if base is None:
            return x.new_zeros((rows, x.shape[1])).index_add(0, flat, x)
        return base.index_add(0, flat, x)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (flat,) = ctx.saved_tensors
        return (grad.index_select(0, flat) if ctx.needs_input_grad[0] else None, None,
                grad if ctx.needs_input_grad[2] else None, None)
