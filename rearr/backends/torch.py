"""torch backend: each plan step as one or two native torch calls."""

from __future__ import annotations

import sys

import torch

from ..errors import RearrError
from ..planner import (
    AdvancedIndex,
    Coord,
    Expand,
    GatherAlong,
    IndexUse,
    Permute,
    Reduce,
    Reshape,
    ScatterAlong,
    ScatterRows,
    TakeRows,
)
from . import _common
from . import _torch_ops as _ops
from . import compile_plan as _compile

name = "torch"
TENSOR = torch.Tensor
_tracing_state = torch._C._get_tracing_state  # not None inside torch.jit.trace
_aminmax = torch.aminmax
_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor  # torch.func.vmap's batched tensors
_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def accepts(x: object) -> bool:
    return isinstance(x, torch.Tensor)


def stack(xs: list) -> torch.Tensor:
    return torch.stack(list(xs))


def concat(xs: list, axis: int) -> torch.Tensor:
    return torch.cat(list(xs), dim=axis)


def einsum(spec: str, *xs: torch.Tensor) -> torch.Tensor:
    return torch.einsum(spec, *xs)


def is_float(x: torch.Tensor) -> bool:
    return x.is_floating_point() or x.is_complex()


# --- plain steps -------------------------------------------------------------


# Shapes are passed unpacked: torch parses x.reshape(4, 6) about 0.5 us faster than x.reshape((4, 6)).


def reshape(step: Reshape):
    shape = step.shape
    if not shape:
        return lambda x, env: x.reshape(())
    return lambda x, env: x.reshape(*shape)


def permute(step: Permute):
    perm = step.perm
    return lambda x, env: x.permute(*perm)


def expand(step: Expand):
    shape = step.shape
    return lambda x, env: x.expand(*shape)


def reduce(step: Reduce):
    r, axes = step.reduction, step.axes
    if callable(r):
        return lambda x, env: r(x, axes)
    if not axes:  # torch reads dim=() as every dim: reduce nothing by hand, with numpy's dtypes
        return _reduce_nothing(r)
    if r == "mean":
        def mean(x, env):
            if not is_float(x):
                raise _common.mean_of_integers(x.dtype)
            return x.mean(axes)
        return mean
    if r == "prod":  # torch.prod takes one dim at a time
        def prod(x, env):
            for a in sorted(axes, reverse=True):
                x = x.prod(a)
            return x
        return prod
    fn = {"sum": torch.sum, "max": torch.amax, "min": torch.amin, "any": torch.any, "all": torch.all}[r]
    if r in ("max", "min"):
        def extreme(x, env):
            if x.is_complex():
                raise _common.complex_order(r)
            return fn(x, axes)
        return extreme
    if r in ("any", "all"):  # torch keeps uint8 for uint8 input; numpy gives bool
        return lambda x, env: fn(x, axes).bool()
    return lambda x, env: fn(x, axes)


def _reduce_nothing(r: str):
    def run(x, env):
        if r == "mean" and not is_float(x):
            raise _common.mean_of_integers(x.dtype)
        if r in ("max", "min") and x.is_complex():
            raise _common.complex_order(r)
        if r in ("any", "all"):
            return x != 0
        if r in ("sum", "prod") and not is_float(x):  # torch sums integers and bools in int64
            return x.to(torch.int64, copy=True)
        return x.clone()

    return run


# --- indices -----------------------------------------------------------------


def convert_index(value: object, like: torch.Tensor, name: str, text: str) -> torch.Tensor:
    if type(value) is torch.Tensor and value.dtype is torch.int64 and value.device == like.device:
        return value  # the common case, without a call
    try:
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise _common.not_an_index(name, value, text) from None
    if t.dtype not in _INT_DTYPES:
        raise _common.bad_index_dtype(name, t.dtype, text)
    if t.device != like.device:
        if t.device.type == "meta":
            raise RearrError(f"index {name!r} is on the meta device: it has no values to index with",
                             code="RA500", pattern=text, hint=f"pass {name}= with real values, on {like.device}")
        t = t.to(like.device)
    return t if t.dtype == torch.int64 else t.long()


def check_index(t: torch.Tensor, use: IndexUse, text: str) -> torch.Tensor:
    """Bounds check, and negative values counted from the end."""
    if t.__class__ is not TENSOR or _tracing_state() is not None:  # _ops.traced(t), inline: the hot path
        # torch.compile / jit.trace: the check is a node of the graph, run on the real values
        return _ops.check_index(t, use.length, use.name, use.axis, -1 if use.col is None else use.col, text)
    if t.is_meta or not t.numel():
        return t
    n = use.length
    lo, hi = _aminmax(t)  # two tensors, read without a generator: the eager hot path
    try:
        lo, hi = lo.item(), hi.item()
    except RuntimeError:  # torch.func.vmap cannot read values: the check as an op, which has a vmap rule
        return _ops.check_index(t, n, use.name, use.axis, -1 if use.col is None else use.col, text)
    if lo < -n or hi >= n:
        bad = ((t < -n) | (t >= n)).nonzero()[0]
        raise _common.out_of_range(use, text, int(t[tuple(bad)]), tuple(bad.tolist()))
    return torch.where(t < 0, t + n, t) if lo < 0 else t


def _coord(c: Coord):
    """A function (env, x) -> this coordinate's tensor, with only the calls it needs."""
    shape, stride = c.shape, c.stride
    if c.index is None:
        n = c.length
        if stride != 1:
            return lambda env, x: torch.arange(0, n * stride, stride, device=x.device).view(shape)
        return lambda env, x: torch.arange(n, device=x.device).view(shape)
    name, perm = c.index, c.perm
    permute = not _common.identity_perm(perm)
    view = c.permuted != shape
    if not permute and not view and stride == 1:
        return lambda env, x: env[name]

    def coord(env, x):
        t = env[name]
        if permute:
            t = t.permute(*perm)
        if view:
            t = t.reshape(*shape) if shape else t.reshape(())
        return t * stride if stride != 1 else t

    return coord


def _flat(coords: tuple[Coord, ...], space: tuple[int, ...]):
    """A function (env, x) -> the flat row index sum(coord * stride), as a 1-d tensor."""
    fns = [_coord(c) for c in coords]
    full = tuple(max(c.shape[d] for c in coords) for d in range(len(space))) == space

    def flat(env, x):
        total = fns[0](env, x)
        for f in fns[1:]:
            total = total + f(env, x)
        return total.reshape(-1) if full else total.expand(space).reshape(-1)

    return flat


def takerows(step: TakeRows):
    flat = _flat(step.coords, step.space)
    return lambda x, env: x.index_select(0, flat(env, x))


def gatheralong(step: GatherAlong):
    dim, shape = step.dim, step.shape
    coord = _coord(step.coord)
    if step.coord.shape == shape:
        return lambda x, env: torch.gather(x, dim, coord(env, x))
    return lambda x, env: torch.gather(x, dim, coord(env, x).expand(*shape))


def advancedindex(step: AdvancedIndex):
    coords = [_contiguous(_coord(c)) if not _common.identity_perm(c.perm) else _coord(c) for c in step.coords]
    if all(c.shape == () for c in step.coords):  # torch reads 0-d tensor indices as ints: a view
        return lambda x, env: x[tuple(c(env, x) for c in coords)].clone()
    return lambda x, env: x[tuple(c(env, x) for c in coords)]


def _contiguous(fn):
    """torch lays out an advanced-indexing result like its index: keep that row-major."""
    return lambda env, x: fn(env, x).contiguous()


def _check_unique(flat: torch.Tensor, name: str, text: str) -> torch.Tensor:
    """The duplicate check of 'set' on a flat index; returns the index to use (traced: the op's output)."""
    if _ops.traced(flat) or _functorch_wrapped(flat):
        return _ops.check_unique(flat, 0, name, text)
    if flat.numel() > 1 and flat.device.type != "meta":
        s = flat.sort().values
        dup = (s[1:] == s[:-1]).nonzero()
        if dup.numel():
            raise _common.duplicate_under_set(name, text)
    return flat


def scatterrows(step: ScatterRows):
    reduction, rows = step.reduction, step.rows
    into_calls = _compile(step.into, sys.modules[__name__])
    native = _common.SCATTER_NATIVE.get(reduction)
    names = ",".join(c.index for c in step.coords if c.index)
    flat_fn = _flat(step.coords, step.space)

    def run(x, env):
        if reduction == "mean" and not is_float(x):
            raise _common.mean_of_integers(x.dtype)
        flat = flat_fn(env, x)
        base = _common.arranged_into(env, into_calls)
        fill = env.get("fill", 0)
        width = x.shape[1]
        if reduction == "set":
            flat = _check_unique(flat, names, env["text"])
            if base is None:  # fresh tensors are written in place: no second copy
                return x.new_full((rows, width), fill).index_copy_(0, flat, x)
            return base.index_copy(0, flat, x)
        if base is not None:
            if reduction == "sum":
                return base.index_add(0, flat, x)
            return base.scatter_reduce(0, flat[:, None].expand(x.shape), x, native, include_self=True)
        if reduction == "sum":
            out = x.new_zeros((rows, width)).index_add_(0, flat, x)
            if fill != 0:
                hit = torch.zeros(rows, dtype=torch.bool, device=x.device).index_fill_(0, flat, True)
                out = torch.where(hit[:, None], out, fill)
            return out
        # scatter_reduce (a stable API) with the row index expanded, a view: index_reduce is still beta.
        return x.new_full((rows, width), fill).scatter_reduce_(0, flat[:, None].expand(x.shape), x, native,
                                                               include_self=False)

    return run


def scatteralong(step: ScatterAlong):
    reduction, dim, shape, src_shape = step.reduction, step.dim, step.shape, step.src_shape
    into_calls = _compile(step.into, sys.modules[__name__])
    native = _common.SCATTER_NATIVE.get(reduction)
    coord, name = _coord(step.coord), step.coord.index or ""
    expand = step.coord.shape != src_shape

    def run(x, env):
        if reduction == "mean" and not is_float(x):
            raise _common.mean_of_integers(x.dtype)
        idx = coord(env, x)
        if expand:
            idx = idx.expand(*src_shape)
        base = _common.arranged_into(env, into_calls)
        if reduction == "set":
            idx = _check_unique_along(idx, dim, name, env["text"])
            if base is None:
                return x.new_full(shape, env["fill"]).scatter_(dim, idx, x)
            return base.scatter(dim, idx, x)
        if base is not None:
            return base.scatter_reduce(dim, idx, x, native, include_self=True)
        if reduction == "sum" and env["fill"] == 0:  # the hand-written scatter_add_, on a fresh tensor
            return x.new_zeros(*shape).scatter_add_(dim, idx, x)
        return x.new_full(shape, env["fill"]).scatter_reduce_(dim, idx, x, native, include_self=False)

    return run


def _check_unique_along(idx: torch.Tensor, dim: int, name: str, text: str) -> torch.Tensor:
    if _ops.traced(idx) or _functorch_wrapped(idx):
        return _ops.check_unique(idx, dim, name, text)
    if idx.shape[dim] > 1 and idx.device.type != "meta":
        s = idx.sort(dim).values
        if (s.narrow(dim, 1, s.shape[dim] - 1) == s.narrow(dim, 0, s.shape[dim] - 1)).any():
            raise _common.duplicate_under_set(name, text)
    return idx
