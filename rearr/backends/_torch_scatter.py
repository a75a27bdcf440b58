"""torch's scatters: one decision tree (`scatter`) for both step kinds, whose native calls come from a
geometry made once per plan: `Rows` (ScatterRows: x's rows at flat row positions, index_copy /
index_add / index_fill, and scatter_reduce with the row index expanded, a view: index_reduce is still
beta) or `Along` (ScatterAlong: scatter / scatter_add / scatter_reduce along an axis).

The tree: 'set' copies (after the duplicate check); 'sum', and 'mean' under training, add (mean then
divides by the counts); with into= the others reduce onto it with include_self=True; without, a single
scatter_reduce onto fill (include_self=False), or under training the lowerings whose backward is
cheaper (_training). TorchBackend's scatterrows and scatteralong make it; torch comes with the backend
(this module imports no framework).
"""

from __future__ import annotations

import math
from typing import Any

from ..planning.plan import ScatterAlong, ScatterRows
from ._common import SCATTER_NATIVE, arranged_into
from .contract import IndexEnv, native_calls

# elements: below this a tiny scatter's time is mostly calls, not work; at most 16 KiB kept per plan and dtype
_SMALL_ZEROS = 1024


def scatter(backend: Any, step: ScatterRows | ScatterAlong, g: Rows | Along) -> Any:
    """The step's call(x, env), its native calls from the geometry g."""
    torch, ops, autograd = backend.torch, backend.ops, backend.autograd
    reduction, native = step.reduction, SCATTER_NATIVE.get(step.reduction)
    into_calls = native_calls(step.into, backend)
    half = (torch.float16, torch.bfloat16)
    prod, kept, traced, writer, index = reduction == "prod", g.kept, ops.traced, ops.writer, g.index
    onto_kept = g.onto_kept if kept is not None else None  # (Along's, for a small 'sum')

    def run(x, env: IndexEnv):
        if prod:
            autograd.refuse_forward_mode_prod(env.text, x, env.into)
        if kept is not None and env.into is None and env.fill == 0 and x.is_cpu and not traced(x):
            out = onto_kept(x, env)
            if out is not None:
                return out
        idx = index(env, x)
        base = None if env.into is None else arranged_into(env, into_calls)
        write = writer(idx)  # a fresh tensor is written in place where vmap allows: no second copy
        fill = env.fill
        if reduction == "set":
            idx = ops.unique_along(idx, g.dim, g.names, env.text, env.checks)
            return g.copy(ops.out_of_place, base, idx, x) if base is not None else \
                g.copy(write, x.new_full(g.shape(x), fill), idx, x)
        training = reduction != "sum" and _training(torch, ops, x, base)
        # A float16 / bfloat16 mean stays scatter_reduce's: on a wide expanded index its kernel sums in
        # float32 and divides before it rounds, once; sums made first would be rounded twice.
        if reduction == "sum" or reduction == "mean" and training and x.dtype not in half:
            if reduction == "sum" and base is None and fill != 0:
                return g.sum_onto(write, x, idx, fill)
            sums = g.add(write, x, idx, base)
            if reduction == "sum":
                return sums
            return _divide(sums, g.count(write, x, idx, base), None if base is not None else fill)
        if base is not None:
            return g.reduce(ops.out_of_place, base, idx, x, native, True)
        if not training or reduction == "mean":  # one call, the faster forward; a float16 / bfloat16 mean
            return g.reduce(write, x.new_full(g.shape(x), fill), idx, x, native, False)
        if reduction != "prod":  # max, min: rearr's backward (ties share the gradient, 1/k each)
            return g.extremum(x, idx, native, fill)
        out = g.reduce(write, x.new_ones(g.shape(x)), idx, x, native, True)
        return out.masked_fill(~g.hit(write, x, idx), fill)  # out of place: the backward reads out

    return run


def _training(torch: Any, ops: Any, x: Any, base: Any) -> bool:
    """Whether a scatter records a backward. Then mean, max, min and prod take the lowerings whose
    backward is cheaper: the sums over the counts; _torch_autograd.ScatterExtremum for max and min; prod
    onto ones with include_self=True (no extra pass over the index) and a hit mask for fill. Without one,
    scatter_reduce's single call onto fill, the faster forward, whose values are the same bitwise.
    torch.jit.trace gets the single call always: it checks a trace by tracing again without grad, and
    the two graphs must agree."""
    return torch.is_grad_enabled() and (x.requires_grad or base is not None and base.requires_grad) \
        and not ops.jit_tracing()


def _divide(sums: Any, counts: Any, fill: object) -> Any:
    """A scatter's mean from its fresh sums and counts (both in x's dtype, as scatter_reduce counts), in
    place; fill where nothing landed (fill None: into= gave every position a value, counted once more).
    The values of scatter_reduce's own mean bitwise, with a backward of one division and the sums'
    gather, where its backward counts the hits again at the size of the output."""
    if fill is None:
        return sums.div_(counts)
    empty = counts == 0
    sums.div_(counts.masked_fill(empty, 1))
    return sums.masked_fill_(empty, fill) if fill != 0 else sums


class Rows:
    """The rows of x (n, width) at 1-d flat row positions of a (rows, width) result."""

    kept = None  # (Along's kept zeros)
    dim = 0

    def __init__(self, backend: Any, step: ScatterRows) -> None:
        self.torch, self.autograd, self.ops = backend.torch, backend.autograd, backend.ops
        self.rows = step.rows
        self.index = backend.row_positions(step.terms, step.space)  # (env, x) -> the flat rows
        self.names = ",".join(c.index for c in step.terms if c.index)

    def shape(self, x: Any) -> tuple:
        return self.rows, x.shape[1]

    def copy(self, write: Any, out: Any, flat: Any, x: Any) -> Any:
        return write(out, "index_copy", 0, flat, x)

    def add(self, write: Any, x: Any, flat: Any, base: Any) -> Any:
        """base (None: fresh zeros) plus the rows of x at flat: index_add, under autograd with a backward
        that keeps only the index (_torch_autograd.AddRows); torch.jit.trace records torch's own (a Python
        function is no node of a traced graph)."""
        if x.requires_grad and self.torch.is_grad_enabled() and not self.ops.jit_tracing():
            return self.autograd.AddRows.apply(x, flat, base, self.rows)
        return write(x.new_zeros((self.rows, x.shape[1])), "index_add", 0, flat, x) if base is None \
            else base.index_add(0, flat, x)

    def count(self, write: Any, x: Any, flat: Any, base: Any) -> Any:
        """How many rows land on each row (in x's dtype), +1 with into=, against the sums."""
        start = x.new_zeros(self.rows) if base is None else x.new_ones(self.rows)
        return write(start, "index_add", 0, flat, x.new_ones(()).expand(flat.shape[0]))[:, None]

    def sum_onto(self, write: Any, x: Any, flat: Any, fill: object) -> Any:
        return self.add(write, x, flat, None).masked_fill_(~self.hit(write, x, flat), fill)

    def reduce(self, write: Any, out: Any, flat: Any, x: Any, native: str, include_self: bool) -> Any:
        return write(out, "scatter_reduce", 0, flat[:, None].expand(x.shape), x, native, include_self=include_self)

    def hit(self, write: Any, x: Any, flat: Any) -> Any:
        """Where something lands, against the result."""
        hit = write(self.torch.zeros(self.rows, dtype=self.torch.bool, device=x.device), "index_fill", 0, flat, True)
        return hit[:, None]

    def extremum(self, x: Any, flat: Any, native: str, fill: object) -> Any:
        return self.autograd.ScatterExtremum.apply(x, flat, 0, (self.rows, x.shape[1]), native, fill)[0]


class Along:
    """x combined into a result of step.shape along step.dim, at an index shaped like x."""

    def __init__(self, backend: Any, step: ScatterAlong) -> None:
        self.torch, self.autograd, self.ops = backend.torch, backend.autograd, backend.ops
        self.dim, self._shape, self.src_shape = step.dim, step.shape, step.src_shape
        self.term = backend.term(step.term)
        self.expand = step.term.shape != step.src_shape
        self.index = backend.term(step.term, step.src_shape) if self.expand else self.term  # (env, x) -> idx
        self.names = step.term.index or ""
        self.tensor = backend.TENSOR
        # a small 'sum' on eager CPU tensors: a zero tensor per dtype, kept here (see onto_kept)
        small = step.reduction == "sum" and not self.expand and all(n.__class__ is int for n in step.shape) \
            and math.prod(step.shape) <= _SMALL_ZEROS  # (a symbolic shape: no guard, and no eager call)
        self.kept: dict | None = {} if small else None

    def shape(self, x: Any) -> tuple:
        return self._shape

    def copy(self, write: Any, out: Any, idx: Any, x: Any) -> Any:
        return write(out, "scatter", self.dim, idx, x)

    def add(self, write: Any, x: Any, idx: Any, base: Any) -> Any:
        # (the shape unpacked: torch parses new_zeros(4, 6) faster than new_zeros((4, 6)))
        return write(x.new_zeros(*self._shape), "scatter_add", self.dim, idx, x) if base is None \
            else base.scatter_add(self.dim, idx, x)

    def count(self, write: Any, x: Any, idx: Any, base: Any) -> Any:
        start = x.new_zeros(self._shape) if base is None else x.new_ones(self._shape)
        return write(start, "scatter_add", self.dim, idx, x.new_ones(()).expand(*self.src_shape))

    def sum_onto(self, write: Any, x: Any, idx: Any, fill: object) -> Any:
        return write(x.new_full(self._shape, fill), "scatter_reduce", self.dim, idx, x, "sum", include_self=False)

    def reduce(self, write: Any, out: Any, idx: Any, x: Any, native: str, include_self: bool) -> Any:
        return write(out, "scatter_reduce", self.dim, idx, x, native, include_self=include_self)

    def hit(self, write: Any, x: Any, idx: Any) -> Any:
        return write(self.torch.zeros(self._shape, dtype=self.torch.bool, device=x.device), "scatter", self.dim,
                     idx, True)

    def extremum(self, x: Any, idx: Any, native: str, fill: object) -> Any:
        return self.autograd.ScatterExtremum.apply(x, idx, self.dim, self._shape, native, fill)[0]

    def onto_kept(self, x: Any, env: IndexEnv) -> Any:
        """A small 'sum' onto the zeros this plan keeps for x's dtype, out of place: the copy costs less than
        creating zeros and adding in place (a good part of a tiny call), and the zeros stay as they are.
        None where no such zeros can be kept (below)."""
        zeros = self.kept.get(x.dtype)  # type: ignore[union-attr]
        if zeros is None:
            zeros = self._keep_zeros(x.dtype)
            if zeros is None:
                return None
        return zeros.scatter_add(self.dim, self.term(env, x), x)  # (the term is the index as passed: no expand)

    def _keep_zeros(self, dtype: Any) -> Any:
        """The zeros for dtype, made now and kept (at most 16 KiB). Made outside inference_mode, so that they
        may meet tensors that need grad, and on the CPU whatever torch's default device is (torch.device as a
        context or set_default_device). None, and nothing kept, when what torch.zeros made is not a plain
        CPU tensor: a mode active now (FakeTensorMode, a TorchFunctionMode that sends factories to meta)
        must not outlive its call."""
        torch = self.torch
        with torch.inference_mode(False):
            zeros = torch.zeros(self._shape, dtype=dtype, device="cpu")
        if zeros.__class__ is not self.tensor or not zeros.is_cpu:
            return None
        self.kept[dtype] = zeros  # type: ignore[index]
        return zeros
