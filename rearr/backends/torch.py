"""torch backend: each plan step as one or two native torch calls, and the code explain prints for it.

torch is bound by load(), which the registry calls when the first tensor
arrives: explain reads the code templates (the CODE table) without torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import RearrError
from ..planning.plan import (
    AdvancedIndex,
    Expand,
    GatherAlong,
    IndexTerm,
    IndexUse,
    Permute,
    Reduce,
    Reshape,
    ScatterAlong,
    ScatterRows,
    TakeRows,
)
from . import _code, _common
from ._code import CodeNames, args, tup
from .contract import Backend, IndexEnv
from .contract import native_calls as _compile

if TYPE_CHECKING:
    import torch

name = "torch"


def load() -> None:
    """Bind torch and what is made of it (the registry calls this once torch is imported)."""
    global torch, TENSOR, _INT64, _INT_DTYPES, _KINDS, _VF, _has_torch_function, _ops
    global _tracing_state, _aminmax, _functorch_wrapped, _HALF, _autograd
    import torch
    from torch import _VF
    from torch.overrides import has_torch_function as _has_torch_function

    from . import _torch_autograd as _autograd  # the backward of a row sum (imports torch)
    from . import _torch_ops as _ops  # the checks as custom ops under tracing (imports torch)

    _tracing_state = torch._C._get_tracing_state  # not None inside torch.jit.trace
    _aminmax = torch.aminmax
    _functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor  # torch.func.vmap's batched tensors

    TENSOR = torch.Tensor
    _HALF = frozenset({torch.float16, torch.bfloat16})
    _INT64 = torch.int64
    _INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.uint16, torch.uint32,
                   torch.uint64)
    _KINDS = {torch.bool: "bool", torch.uint8: "uint",
              **{d: "int" for d in (torch.int8, torch.int16, torch.int32, torch.int64)},
              **{d: "float" for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)},
              **{d: "complex" for d in (torch.complex32, torch.complex64, torch.complex128)}}


def accepts(x: object) -> bool:
    return isinstance(x, torch.Tensor)


def stack(xs: list) -> torch.Tensor:
    return torch.stack(list(xs))


def concat(xs: list, axis: int) -> torch.Tensor:
    return torch.cat(list(xs), dim=axis)


def einsum(spec: str, *xs: torch.Tensor) -> torch.Tensor:
    # torch.einsum's own path for <= 2 operands without its Python wrapper; the wrapper stays for
    # __torch_function__ overrides, opt_einsum's contraction order, and torch.compile (which traces it).
    if len(xs) <= 2 and not torch.compiler.is_compiling() and not _has_torch_function(xs):
        return _VF.einsum(spec, xs)
    return torch.einsum(spec, *xs)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if _reorders(a, b):
        a, b = _in_memory_order(a), _in_memory_order(b)
    return torch.matmul(a, b)


def _reorders(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether matmul's operands go through _in_memory_order: always in eager code; compiled, only in a
    CPU training graph. Inductor's attention fusion matches matmul's own graph (a copy before it hides
    the pattern), and on the CPU it fuses inference graphs only."""
    if not torch.compiler.is_compiling():
        return True
    return a.device.type == "cpu" and torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)


def _in_memory_order(t: torch.Tensor) -> torch.Tensor:
    """t; or, where matmul must copy t to fold its batch dims into one and t's last two dims are
    transposed in memory (k.transpose(-2, -1) of split heads), that copy made in memory order: then
    matmul's fold is a view and the product reads the transpose for free, instead of a transposing copy
    (inductor makes the same copy for a compiled matmul). The values, and torch's result, are the same."""
    if t.dim() < 4:  # 3-D: matmul runs bmm on it as it is
        return t
    strides = t.stride()
    if strides[-2] != 1 or strides[-1] == 1:
        return t
    sizes = t.shape
    if all(strides[i] == strides[i + 1] * sizes[i + 1] for i in range(len(sizes) - 3) if sizes[i + 1] != 1):
        return t  # the batch dims merge: matmul's fold is a view already
    return t.mT.contiguous().mT


def code_einsum(plan, operands: tuple[str, ...]) -> list[str]:
    """explain's lines: a matrix product as rearr.run.einsum.matmul_run runs it (the STEPS calls of its Reshape and
    Permute steps around matmul), any other einsum as torch.einsum."""
    mm = plan.mm
    if mm is None:
        return _code.einsum_lines(plan, operands, lambda spec, ops: f"torch.einsum({spec}, {ops})")
    x, y = operands

    def step(name: str, s) -> str:
        return f"{name} = {name}.permute({args(s.perm)})" if isinstance(s, Permute) else \
            f"{name} = {name}.reshape({args(s.shape)})"

    lines = [step(name, s) for name, steps in ((x, mm.a), (y, mm.b)) for s in steps]
    lines.append(f"{x} = torch.matmul({y}, {x})" if mm.swap else f"{x} = torch.matmul({x}, {y})")
    return lines + [step(x, s) for s in mm.out]


def to_numpy(x: torch.Tensor):
    """Detached, on the CPU, with a conj or neg view resolved (numpy(force=True)); a tensor numpy cannot
    hold is the RearrError with the conversion that fits it."""
    try:
        return x.numpy(force=True)
    except (RuntimeError, TypeError) as e:
        raise _not_for_numpy(x, e) from None


def _not_for_numpy(x: torch.Tensor, e: Exception) -> RearrError:
    if x.is_meta:
        fix = "a meta tensor holds no values: run the computation on a real device"
    elif x.is_nested:
        fix = "x.to_padded_tensor(0) or x.unbind() first"
    elif x.is_sparse or x.layout is not torch.strided:
        fix = "x.to_dense() first"
    elif _functorch_wrapped(x) or _tracing_state() is not None or x.__class__ is not TENSOR:
        fix = "call asnumpy outside torch.compile, torch.func transforms and tracing (the tensor has no values yet)"
    elif x.is_complex():
        fix = "x.to(torch.complex64) first: numpy has no complex32"
    else:
        fix = "x.float() first: numpy has no " + str(x.dtype).removeprefix("torch.")
    return RearrError(f"torch cannot give this {x.dtype} tensor to numpy: {str(e)[:200]}", code="RA500", hint=fix)


def is_float(x: torch.Tensor) -> bool:
    return x.is_floating_point() or x.is_complex()


# torch stores uint16/32/64 and float8 but has few kernels for them, not even index_select: 'other'.
INDEXES_OTHER = False
# matmul where einsum is a matrix product: torch.einsum's C++ parses its spec on every call, and inductor
# fuses an attention block written with matmul into one scaled-dot-product kernel, not one with einsum.
EINSUM_MATMUL = True


def dtype_kind(x: torch.Tensor) -> str:
    """The dtype's kind for rearr.planning.policy: bool, int, uint, float, complex or other."""
    return _KINDS.get(x.dtype, "other")


def dtype_range(x: torch.Tensor) -> tuple:
    """The least and greatest finite value of the dtype (of a number kind)."""
    if x.dtype == torch.bool:
        return 0, 1
    dtype = x.dtype.to_real() if x.is_complex() else x.dtype
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return info.min, info.max


def itemsize(x: torch.Tensor) -> int:
    return x.element_size()


def unusual(x: object) -> str | None:
    """What makes x a tensor that torch runs few ops on (sparse, nested), or None.

    Asked only after torch has failed, so the hot path never pays for it.
    """
    if not isinstance(x, torch.Tensor):
        return None
    if x.is_nested:
        return "a nested tensor"
    if x.layout != torch.strided:
        return f"a tensor of layout {x.layout}"
    return None


def check_into(into: torch.Tensor, x: torch.Tensor) -> None:
    if into.is_inference() and x.requires_grad and torch.is_grad_enabled():
        raise RearrError("into= is an inference tensor, which autograd cannot save for the gradient of src",
                         code="RA500", hint="pass into=into.clone() made outside torch.inference_mode(), "
                         "or run the scatter inside it")


# --- plain steps -------------------------------------------------------------


# Shapes are passed unpacked: torch parses x.reshape(4, 6) faster than x.reshape((4, 6)).


def reshape(step: Reshape):
    shape = step.shape
    if not shape:
        return lambda x, env: x.reshape(())
    return lambda x, env: x.reshape(*shape)


def code_reshape(step: Reshape, before, n: CodeNames) -> list[str]:
    # x.reshape is x.view where a view is possible, else x.contiguous().view: print which, so that a copy shows.
    return [f"{n.x} = {n.x}.view({args(step.shape)})" if step.view
            else f"{n.x} = {n.x}.contiguous().view({args(step.shape)})"]


def permute(step: Permute):
    perm = step.perm
    return lambda x, env: x.permute(*perm)


def code_permute(step: Permute, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = {n.x}.permute({args(step.perm)})"]


def expand(step: Expand):
    shape = step.shape
    return lambda x, env: x.expand(*shape)


def code_expand(step: Expand, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = {n.x}.expand({args(step.shape)})"]


def reduce(step: Reduce):
    r, axes = step.reduction, step.axes
    if callable(r):
        return lambda x, env: r(x, axes)
    if not axes:  # torch reads dim=() as every dim: reduce nothing by hand, with numpy's dtypes
        return _reduce_nothing(r)
    if r == "mean":  # rearr.planning.policy refuses integer means before the plan runs
        return lambda x, env: x.mean(axes)
    if r == "prod":  # torch.prod takes one dim at a time
        def prod(x, env):
            dtype = x.dtype
            half = dtype is torch.float16 or dtype is torch.bfloat16  # in float32, rounded once: as numpy
            for a in sorted(axes, reverse=True):
                x = x.prod(a, dtype=torch.float32) if half and x.dtype is dtype else x.prod(a)
            return x.to(dtype) if half else x
        return prod
    fn = {"sum": torch.sum, "max": torch.amax, "min": torch.amin, "any": torch.any, "all": torch.all}[r]
    if r in ("any", "all"):  # torch keeps uint8 for uint8 input; numpy gives bool
        return lambda x, env: fn(x, axes).bool()
    return lambda x, env: fn(x, axes)


def _reduce_nothing(r: str):
    def run(x, env):
        if r in ("any", "all"):
            return x != 0
        if r in ("sum", "prod") and not is_float(x):  # torch sums integers and bools in int64
            return x.to(torch.int64, copy=True)
        return x.clone()

    return run


def code_reduce(step: Reduce, before, n: CodeNames) -> list[str]:
    x, r, axes = n.x, step.reduction, step.axes
    if callable(r):  # the callable that was passed, bound to this name
        return [f"{x} = {n.reduction}({x}, {tup(axes)})"]
    if not axes:  # _reduce_nothing
        if r in ("any", "all"):
            return [f"{x} = {x} != 0"]
        if r in ("sum", "prod"):
            return [f"{x} = {x}.clone() if {x}.is_floating_point() or {x}.is_complex() else {x}.to(torch.int64)"]
        return [f"{x} = {x}.clone()"]
    if r == "prod":  # one dim at a time; float16/bfloat16 in float32, rounded once at the end, as reduce() does
        dims = sorted(axes, reverse=True)
        plain = "".join(f".prod({a})" for a in dims)
        wide = f".prod({dims[0]}, dtype=torch.float32)" + "".join(f".prod({a})" for a in dims[1:])
        return [f"{x} = {x}{wide}.to({x}.dtype) if {x}.dtype in (torch.float16, torch.bfloat16) else {x}{plain}"]
    dims = str(axes[0]) if len(axes) == 1 else tup(axes)
    call = f"{x} = {x}.{ {'max': 'amax', 'min': 'amin'}.get(r, r) }(dim={dims})"
    if r in ("any", "all"):
        return ["# .bool(): torch keeps uint8 for uint8 input; numpy gives bool", f"{call}.bool()"]
    return [call]


# --- indices -----------------------------------------------------------------


# The step kinds whose CPU kernels refuse an index value outside 0 <= i < n, each value against the
# axis it indexes (torch.gather, scatter_add_ / scatter_reduce_, x[idx]): for an index used only
# there, rearr's pre-check is left to them (see rearr.run.indexed.run). The value that torch
# refuses, a negative one included, then runs again through check_index: rearr's RA501, or the
# negative values counted from the end. Not the row steps: there a bad row lands in the next batch.
def checks_step_natively(step: object) -> bool:
    """Whether step's native call refuses every bad value of its index itself (above)."""
    return isinstance(step, GatherAlong | ScatterAlong | AdvancedIndex)


def checks_natively(t: torch.Tensor) -> bool:
    """Whether the native calls may check index t (checks_step_natively): an eager CPU tensor. A traced one
    keeps the check_index op in the graph, and CUDA reports a bad index as a device-side assert."""
    return t.__class__ is TENSOR and t.is_cpu and _tracing_state() is None


def ready_index(t: object, like: torch.Tensor) -> bool:
    """Whether t is an index that convert_index returns as it is and the native calls may check
    (checks_natively), in one call: rearr.run's path for a call seen before."""
    return (t.__class__ is TENSOR and t.dtype is _INT64 and t.is_cpu and like.is_cpu
            and _tracing_state() is None)


def convert_index(value: object, like: torch.Tensor, name: str, text: str, mode: bool | str = True) -> torch.Tensor:
    if type(value) is torch.Tensor and value.dtype is torch.int64 and (
        value.is_cpu and like.is_cpu or value.device == like.device  # is_cpu: no device objects made
    ):
        return value  # the common case, without a call
    if _common.masked(value):  # torch.as_tensor would drop the mask
        raise _common.masked_index(name, text)
    try:
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(_common.native_order(value))
    except (TypeError, ValueError, RuntimeError):
        raise _common.not_an_index(name, value, text) from None
    if t.dtype not in _INT_DTYPES:
        raise _common.bad_index_dtype(name, t.dtype, text)
    if t.device != like.device:
        if t.device.type == "meta":
            raise RearrError(f"index {name!r} is on the meta device: it has no values to index with",
                             code="RA500", pattern=text, hint=f"pass {name}= with real values, on {like.device}")
        t = t.to(like.device)
    if t.dtype == torch.uint64 and t.numel() and t.device.type != "meta":
        wrapped = t.view(torch.int64) < 0  # values >= 2**63, which .long() would turn negative
        if _ops.on_device(t, mode):  # no host read: an assertion (see rearr.backends._torch_ops)
            _ops.can_assert(t)
            torch._assert_async(wrapped.any().logical_not(), f"rearr RA501: index {name!r} holds a value of "
                                f"2**63 or more, larger than any axis can be, in {text!r}")
        elif wrapped.any():
            at = tuple(wrapped.nonzero()[0].tolist())
            raise _common.beyond_index_range(name, text, int(t.view(torch.int64)[at]) + 2**64, at)
    return t if t.dtype == torch.int64 else t.long()


def check_index(t: torch.Tensor, use: IndexUse, text: str, mode: bool | str = True) -> torch.Tensor:
    """Bounds check, and negative values counted from the end: exact on the host, or as device-side
    assertions (mode "async", or True on CUDA: _ops.on_device)."""
    cpu = t.is_cpu
    if (mode is not True or not cpu) and _ops.on_device(t, mode):  # the first test: the CPU hot path
        return _ops.assert_in_range(t, use.length, use.name, use.axis, text)
    if t.__class__ is not TENSOR or _tracing_state() is not None:  # _ops.traced(t), inline: the hot path
        # torch.compile / jit.trace: the check is a node of the graph, run on the real values
        return _ops.check_index(t, use.length, use.name, use.axis, -1 if use.col is None else use.col, text)
    if t.is_meta or not t.numel():
        return t
    n = use.length
    lo, hi = _aminmax(t)  # two tensors, read without a generator: the eager hot path
    try:
        lo, hi = (lo.item(), hi.item()) if cpu else _ops.read_both(lo, hi)
    except RuntimeError:  # torch.func.vmap cannot read values: the check as an op, which has a vmap rule
        return _ops.check_index(t, n, use.name, use.axis, -1 if use.col is None else use.col, text)
    if lo < -n or hi >= n:
        bad = ((t < -n) | (t >= n)).nonzero()[0]
        raise _common.out_of_range(use, text, int(t[tuple(bad)]), tuple(bad.tolist()))
    return torch.where(t < 0, t + n, t) if lo < 0 else t


def _term(c: IndexTerm):
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
    if _common.index_as_passed(c):
        return lambda env, x: env.indices[name]

    def term(env, x):
        t = env.indices[name]
        if permute:
            t = t.permute(*perm)
        if view:
            t = t.reshape(*shape) if shape else t.reshape(())
        return t * stride if stride != 1 else t

    return term


def _term_code(t: IndexTerm, n: CodeNames) -> str:
    if t.index is None:
        if t.stride != 1:  # the stride goes into arange
            return _code.view(f"torch.arange(0, {t.length} * {t.stride}, {t.stride}, device={n.x}.device)",
                              (t.length,), t.shape, "view")
        return _code.view(f"torch.arange({t.length}, device={n.x}.device)", (t.length,), t.shape, "view")
    expr, have = _code.index_expr(t, n, lambda e, perm: f"{e}.permute({args(perm)})")
    expr = _code.view(expr, have, t.shape, "reshape")
    return f"{expr} * {t.stride}" if t.stride != 1 else expr


def _row_positions(terms: tuple[IndexTerm, ...], space: tuple[int, ...]):
    """A function (env, x) -> the row that each point of the index space moves: the sum of the terms, 1-d."""
    fns = [_term(c) for c in terms]
    full = tuple(max(c.shape[d] for c in terms) for d in range(len(space))) == space

    def flat(env, x):
        total = fns[0](env, x)
        for f in fns[1:]:
            total = total + f(env, x)
        return total.reshape(-1) if full else total.expand(space).reshape(-1)

    return flat


def _row_positions_code(terms: tuple[IndexTerm, ...], space: tuple[int, ...], n: CodeNames) -> tuple[list[str], str]:
    return _code.row_positions(terms, space, n, _term_code, lambda e, space: f"{_code.paren(e)}.expand({args(space)})")


def takerows(step: TakeRows):
    flat = _row_positions(step.terms, step.space)
    return lambda x, env: x.index_select(0, flat(env, x))


def code_takerows(step: TakeRows, before, n: CodeNames) -> list[str]:
    pre, flat = _row_positions_code(step.terms, step.space, n)
    return pre + [f"{n.x} = {n.x}.index_select(0, {flat})"]


def gatheralong(step: GatherAlong):
    dim, shape = step.dim, step.shape
    term = _term(step.term)
    if step.term.shape == shape and _common.index_as_passed(step.term):  # the common tiny gather: no term call
        name = step.term.index
        return lambda x, env: torch.gather(x, dim, env.indices[name])
    if step.term.shape == shape:
        return lambda x, env: torch.gather(x, dim, term(env, x))
    return lambda x, env: torch.gather(x, dim, term(env, x).expand(*shape))


def code_gatheralong(step: GatherAlong, before, n: CodeNames) -> list[str]:
    idx = _term_code(step.term, n)
    if step.term.shape != step.shape:
        idx = f"{_code.paren(idx)}.expand({args(step.shape)})"
    return [f"{n.x} = torch.gather({n.x}, {step.dim}, {idx})"]


def advancedindex(step: AdvancedIndex):
    terms = [_contiguous(_term(c)) if not _common.identity_perm(c.perm) else _term(c) for c in step.terms]
    if all(c.shape == () for c in step.terms):
        # torch reads 0-d tensor indices as ints (.item(): a host read, a sync on a GPU) and returns a view:
        # 1-element indices read nothing and make a new tensor, whose leading axis of 1 is dropped
        return lambda x, env: x[tuple(c(env, x).reshape(1) for c in terms)].squeeze(0)
    return lambda x, env: x[tuple(c(env, x) for c in terms)]


def code_advancedindex(step: AdvancedIndex, before, n: CodeNames) -> list[str]:
    terms = [_term_code(t, n) + ("" if _common.identity_perm(t.perm) else ".contiguous()") for t in step.terms]
    if all(t.shape == () for t in step.terms):  # see advancedindex: 1-element indices, not ints
        return [f"{n.x} = {n.x}[{', '.join(_code.paren(t) + '.reshape(1)' for t in terms)}].squeeze(0)"]
    return [f"{n.x} = {n.x}[{', '.join(terms)}]"]


def _contiguous(fn):
    """torch lays out an advanced-indexing result like its index: keep that row-major."""
    return lambda env, x: fn(env, x).contiguous()


def scatterrows(step: ScatterRows):
    reduction, rows = step.reduction, step.rows
    into_calls = _compile(step.into, BACKEND)
    native = _common.SCATTER_NATIVE.get(reduction)
    names = ",".join(c.index for c in step.terms if c.index)
    flat_fn = _row_positions(step.terms, step.space)
    prod = reduction == "prod"

    def run(x, env):
        if prod:
            _autograd.refuse_forward_mode_prod(env.text, x, env.into)
        flat = flat_fn(env, x)
        base = _common.arranged_into(env, into_calls)
        fill = env.fill
        width = x.shape[1]
        fresh = _in_place(flat)  # fresh tensors are written in place: no second copy
        if reduction == "set":
            flat = _check_unique_along(flat, 0, names, env)
            if base is None:
                return fresh(x.new_full((rows, width), fill), "index_copy", 0, flat, x)
            return base.index_copy(0, flat, x)
        if reduction == "sum":
            out = _add_rows(base, fresh, flat, x, rows)
            if base is None and fill != 0:
                hit = fresh(torch.zeros(rows, dtype=torch.bool, device=x.device), "index_fill", 0, flat, True)
                out = out.masked_fill_(~hit[:, None], fill)
            return out
        training = _training(x, base)
        if reduction == "mean" and training and x.dtype not in _HALF:
            sums = _add_rows(base, fresh, flat, x, rows)
            counts = fresh(x.new_zeros(rows) if base is None else x.new_ones(rows), "index_add", 0, flat,
                           x.new_ones(()).expand(flat.shape[0]))
            return _divide(sums, counts[:, None], None if base is not None else fill)
        # scatter_reduce (a stable API) with the row index expanded, a view: index_reduce is still beta.
        idx = flat[:, None].expand(x.shape)
        if base is not None:
            return base.scatter_reduce(0, idx, x, native, include_self=True)
        if not training or reduction == "mean":  # one call; a float16 / bfloat16 mean (see _HALF)
            return fresh(x.new_full((rows, width), fill), "scatter_reduce", 0, idx, x, native, include_self=False)
        if reduction != "prod":
            return _autograd.ScatterExtremum.apply(x, flat, 0, (rows, width), native, fill)[0]
        out = fresh(x.new_ones((rows, width)), "scatter_reduce", 0, idx, x, native, include_self=True)  # prod
        hit = fresh(torch.zeros(rows, dtype=torch.bool, device=x.device), "index_fill", 0, flat, True)
        return out.masked_fill(~hit[:, None], fill)  # out of place: the backward reads out

    return run


def _training(x: torch.Tensor, base: torch.Tensor | None) -> bool:
    """Whether a scatter records a backward. Then mean, max, min and prod take the lowerings whose
    backward is cheaper: the sums over the counts; _autograd.ScatterExtremum for max and min; prod onto
    ones with include_self=True (no extra pass over the index) and a hit mask for fill. Without one,
    scatter_reduce's single call onto fill, the faster forward, whose values are the same bitwise.
    torch.jit.trace gets the single call always: it checks a trace by tracing again without grad, and
    the two graphs must agree."""
    return torch.is_grad_enabled() and (x.requires_grad or base is not None and base.requires_grad) \
        and _tracing_state() is None


def _add_rows(base: torch.Tensor | None, fresh: Callable, flat: torch.Tensor, x: torch.Tensor,
              rows: int) -> torch.Tensor:
    """base (None: fresh zeros) plus the rows of x at flat: index_add, under autograd with a backward
    that keeps only the index (_autograd.AddRows); torch.jit.trace records torch's own (a Python
    function is no node of a traced graph)."""
    if x.requires_grad and torch.is_grad_enabled() and _tracing_state() is None:
        return _autograd.AddRows.apply(x, flat, base, rows)
    return fresh(x.new_zeros((rows, x.shape[1])), "index_add", 0, flat, x) if base is None \
        else base.index_add(0, flat, x)


# A float16 / bfloat16 mean stays scatter_reduce's: on a wide expanded index its kernel sums in float32
# and divides before it rounds, once; sums made first would be rounded twice.
_HALF: frozenset = frozenset()


def _divide(sums: torch.Tensor, counts: torch.Tensor, fill: object) -> torch.Tensor:
    """A scatter's mean from its fresh sums and counts (both in x's dtype, as scatter_reduce counts), in
    place; fill where nothing landed (fill None: into= gave every position a value, counted once more).
    The values of scatter_reduce's own mean bitwise, with a backward of one division and the sums'
    gather, where its backward counts the hits again at the size of the output."""
    if fill is None:
        return sums.div_(counts)
    empty = counts == 0
    sums.div_(counts.masked_fill(empty, 1))
    return sums.masked_fill_(empty, fill) if fill != 0 else sums


def code_scatterrows(step: ScatterRows, before, n: CodeNames) -> list[str]:
    """run() above with fill 0 and no into=, on a tensor that records no backward (see _training), or
    (n.grad) on one that records a backward."""
    pre, flat = _row_positions_code(step.terms, step.space, n)
    x, rows, width, r = n.x, step.rows, before.shape[1], step.reduction
    if r == "set":
        return pre + ["# rearr first checks that flat holds no row twice ('set')",
                      f"{x} = {x}.new_full(({rows}, {width}), 0).index_copy_(0, {flat}, {x})"]
    if r == "sum":
        return pre + [f"{x} = {x}.new_zeros(({rows}, {width})).index_add_(0, {flat}, {x})"]
    idx = f"{_code.paren(flat)}[:, None].expand({args(before.shape)})"
    return pre + _reduce_code(r, n, f"({rows}, {width})", 0, idx, f"index_add_(0, {flat}, {{}})", f"({rows},)",
                              str(before.shape[0]), "[:, None]", f"index_fill_(0, {flat}, True)")


def _reduce_code(r: str, n: CodeNames, shape: str, dim: int, idx: str, add: str, count_shape: str, ones: str,
                 per_row: str, hit: str) -> list[str]:
    """A mean / max / min / prod scatter onto a fresh tensor of shape: the single scatter_reduce onto 0,
    or (n.grad) what runs under autograd. add: the call that adds its argument at the positions
    (index_add_ of rows, scatter_add_ along dim); count_shape, ones: the shapes of the counts and of
    the ones they add; per_row: the counts' view against the sums; hit: the call that marks the
    positions in a bool tensor of count_shape."""
    x = n.x
    if not n.grad:
        return [_training_note(r), f"{x} = {x}.new_full({shape}, 0).scatter_reduce_({dim}, {idx}, {x}, "
                f"\"{_common.SCATTER_NATIVE[r]}\", include_self=False)"]
    if r == "mean":
        return ["# float16 / bfloat16 keep scatter_reduce's mean, as without a backward",
                f"{n.sums} = {x}.new_zeros({shape}).{add.format(x)}",
                f"{n.counts} = {x}.new_zeros({count_shape}).{add.format(f'{x}.new_ones(()).expand({ones})')}",
                f"{x} = {n.sums} / {n.counts}.clamp(min=1){per_row}"]
    mask = f"{n.hit} = torch.zeros({count_shape}, dtype=torch.bool, device={x}.device).{hit}"
    return _training_code(r, n, shape, dim, idx, mask, f"~{n.hit}{per_row}")


def _training_note(reduction: str) -> str:
    """The comment explain prints above a mean / max / min / prod scatter: what runs under autograd."""
    if reduction == "mean":
        what = "the sums divided by the counts"
    else:
        what = f"onto {_START[reduction]} with include_self=True, then fill where nothing lands"
    return f"# a source that requires grad runs {what}: explain(..., requires_grad=True) prints it"


_START = {"max": "-inf", "min": "+inf", "prod": "1"}


def _training_code(r: str, n: CodeNames, shape: str, dim: int, idx: str, hit: str, empty: str) -> list[str]:
    """The lines of a max / min / prod scatter that records a backward: onto the reduction's identity
    with include_self=True, the hit mask, fill (0) where nothing lands; out of place, as the backward
    of scatter_reduce reads its result."""
    x = n.x
    start = {"max": 'float("-inf")', "min": 'float("inf")', "prod": "1"}[r]
    lines = [hit, f"{x} = {x}.new_full({shape}, {start}).scatter_reduce_({dim}, {idx}, {x}, "
             f"\"{_common.SCATTER_NATIVE[r]}\", include_self=True)", f"{x} = {x}.masked_fill({empty}, 0)"]
    if r == "prod":
        return lines
    return [f"# the backward is rearr's own: the k sources equal to a result share its gradient, 1/k each "
            f"(torch's of these lines counts the {_START[r]} start too where all k are {_START[r]})"] + lines


def scatteralong(step: ScatterAlong):
    reduction, dim, shape, src_shape = step.reduction, step.dim, step.shape, step.src_shape
    into_calls = _compile(step.into, BACKEND)
    native = _common.SCATTER_NATIVE.get(reduction)
    term, name = _term(step.term), step.term.index or ""
    expand = step.term.shape != src_shape
    # a small 'sum' on eager CPU tensors: a zero tensor per dtype, kept here (see _small_zeros)
    zeros = {} if reduction == "sum" and not expand and all(n.__class__ is int for n in shape) \
        and math.prod(shape) <= _SMALL_ZEROS else None  # (a symbolic shape: no guard, and no eager call)

    prod = reduction == "prod"

    def run(x, env):
        if prod:
            _autograd.refuse_forward_mode_prod(env.text, x, env.into)
        if zeros is not None and env.into is None and env.fill == 0 and x.is_cpu and x.__class__ is TENSOR \
                and _tracing_state() is None:
            base = zeros.get(x.dtype)
            if base is None:
                base = _small_zeros(zeros, shape, x.dtype)
            if base is not None:
                return base.scatter_add(dim, term(env, x), x)  # out of place: one call fewer, the zeros stay
        idx = term(env, x)
        if expand:
            idx = idx.expand(*src_shape)
        base = _common.arranged_into(env, into_calls)
        fresh = _in_place(idx)
        if reduction == "set":
            idx = _check_unique_along(idx, dim, name, env)
            if base is None:
                return fresh(x.new_full(shape, env.fill), "scatter", dim, idx, x)
            return base.scatter(dim, idx, x)
        training = reduction != "sum" and _training(x, base)
        if reduction == "mean" and training and x.dtype not in _HALF:
            sums = fresh(x.new_zeros(shape), "scatter_add", dim, idx, x) if base is None \
                else base.scatter_add(dim, idx, x)
            counts = fresh(x.new_zeros(shape) if base is None else x.new_ones(shape), "scatter_add", dim, idx,
                           x.new_ones(()).expand(*src_shape))
            return _divide(sums, counts, None if base is not None else env.fill)
        if base is not None:
            return base.scatter_reduce(dim, idx, x, native, include_self=True)
        if reduction == "sum" and env.fill == 0:  # the hand-written scatter_add_, on a fresh tensor
            return fresh(x.new_zeros(*shape), "scatter_add", dim, idx, x)
        if not training or reduction == "mean":  # one call; a float16 / bfloat16 mean (see _HALF)
            return fresh(x.new_full(shape, env.fill), "scatter_reduce", dim, idx, x, native, include_self=False)
        if reduction != "prod":
            return _autograd.ScatterExtremum.apply(x, idx, dim, shape, native, env.fill)[0]
        out = fresh(x.new_ones(shape), "scatter_reduce", dim, idx, x, native, include_self=True)  # prod
        hit = fresh(torch.zeros(shape, dtype=torch.bool, device=x.device), "scatter", dim, idx, True)
        return out.masked_fill(~hit, env.fill)  # out of place: the backward reads out

    return run


def _in_place(index: torch.Tensor) -> Callable:
    """How a scatter writes into the fresh tensor it made: in place (out.method_(...)), or out of place
    (out.method(...), one more copy) where torch.func.vmap batches the index: vmap refuses to write
    batched values into a tensor not batched at the same level in place, and a fresh tensor made from
    x (or from nothing) may not be (x shared across the batch, or wrapped by torch.func.grad only)."""
    return _out_of_place if _functorch_wrapped(index) else _in_place_write


def _in_place_write(out: torch.Tensor, method: str, *args: object, **kwargs: object) -> torch.Tensor:
    return getattr(out, method + "_")(*args, **kwargs)


def _out_of_place(out: torch.Tensor, method: str, *args: object, **kwargs: object) -> torch.Tensor:
    return getattr(out, method)(*args, **kwargs)


# elements: below this a tiny scatter's time is mostly calls, not work; at most 16 KiB kept per plan and dtype
_SMALL_ZEROS = 1024


def _small_zeros(kept: dict, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor | None:
    """A small zero tensor that one plan keeps per dtype and shares by every call on eager CPU tensors:
    the out-of-place scatter_add copies it, which costs less than creating zeros and adding in place
    (a good part of a tiny call). Nothing writes to it. Made outside inference_mode, so that it may
    meet tensors that need grad, and on the CPU whatever torch's default device is (torch.device as a
    context or set_default_device); a traced or fake tensor never sees it (the caller checks).
    None, and nothing kept, when what torch.zeros made is not a plain CPU tensor: a mode active now
    (FakeTensorMode, a TorchFunctionMode that sends factories to meta) must not outlive its call."""
    with torch.inference_mode(False):
        base = torch.zeros(shape, dtype=dtype, device="cpu")
    if base.__class__ is not TENSOR or not base.is_cpu:
        return None
    kept[dtype] = base
    return base


def code_scatteralong(step: ScatterAlong, before, n: CodeNames) -> list[str]:
    """run() above with fill 0 and no into=, on a tensor that records no backward (see _training), or
    (n.grad) on one that records a backward; its kept-zeros branch computes the same, one call fewer."""
    x, dim, shape, r = n.x, step.dim, step.shape, step.reduction
    idx = _term_code(step.term, n)
    if step.term.shape != step.src_shape:
        idx = f"{_code.paren(idx)}.expand({args(step.src_shape)})"
    if r == "set":
        return ["# rearr first checks that no two writes meet ('set')",
                f"{x} = {x}.new_full({tup(shape)}, 0).scatter_({dim}, {idx}, {x})"]
    if r == "sum":
        return [f"{x} = {x}.new_zeros({args(shape)}).scatter_add_({dim}, {idx}, {x})"]
    pre = [] if idx.isidentifier() or not n.grad else [f"{n.flat} = {idx}"]  # used more than once below
    idx = n.flat if pre else idx
    return pre + _reduce_code(r, n, tup(shape), dim, idx, f"scatter_add_({dim}, {idx}, {{}})", tup(shape),
                              args(step.src_shape), "", f"scatter_({dim}, {idx}, True)")


def _check_unique_along(idx: torch.Tensor, dim: int, name: str, env: IndexEnv) -> torch.Tensor:
    """The duplicate check of 'set' along dim, exact or device-side as env.checks says (_ops.on_device);
    returns the index to use (traced: the op's output)."""
    text = env.text
    if _ops.on_device(idx, env.checks):
        return _ops.assert_unique(idx, dim, name, text)
    if _ops.traced(idx) or _functorch_wrapped(idx):
        return _ops.check_unique(idx, dim, name, text)
    _ops.refuse_duplicates(idx, dim, name, text)
    return idx


# --- the contract ----------------------------------------------------------------

# Each step kind of rearr.planning.plan -> the factory above that lowers it (checked by backends.contract).
STEPS = {
    Reshape: reshape,
    Permute: permute,
    Reduce: reduce,
    Expand: expand,
    TakeRows: takerows,
    GatherAlong: gatheralong,
    AdvancedIndex: advancedindex,
    ScatterRows: scatterrows,
    ScatterAlong: scatteralong,
}

# Each step kind -> the code explain prints for it, written next to the factory that runs it.
CODE = {
    Reshape: code_reshape,
    Permute: code_permute,
    Reduce: code_reduce,
    Expand: code_expand,
    TakeRows: code_takerows,
    GatherAlong: code_gatheralong,
    AdvancedIndex: code_advancedindex,
    ScatterRows: code_scatterrows,
    ScatterAlong: code_scatteralong,
    "einsum": code_einsum,  # (plan of rearr.planning.einsum, operand names) -> lines
}


class TorchBackend(Backend):
    """torch's hooks: the functions above."""

    name = name
    STEPS, CODE, INDEXES_OTHER, READY_INDEXES = STEPS, CODE, INDEXES_OTHER, True
    accepts, stack, concat, einsum, to_numpy = map(staticmethod, (accepts, stack, concat, einsum, to_numpy))
    matmul, EINSUM_MATMUL = staticmethod(matmul), EINSUM_MATMUL
    convert_index, check_index, ready_index = map(staticmethod, (convert_index, check_index, ready_index))
    checks_natively, check_into, unusual = map(staticmethod, (checks_natively, check_into, unusual))
    checks_step_natively = staticmethod(checks_step_natively)
    dtype_kind, dtype_range, itemsize = map(staticmethod, (dtype_kind, dtype_range, itemsize))

    def load(self) -> None:
        load()
        self.TENSOR = TENSOR


BACKEND = TorchBackend()
