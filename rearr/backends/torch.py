"""torch backend: each plan step as one or two native torch calls, and the code explain prints for it.

`TorchBackend` binds torch on its instance (``self.torch``) when the registry makes it, once the first
tensor arrives: the module imports without torch, and explain reads its templates (``CODE``) so. The
scatters, of rows and along an axis, are one decision tree in rearr/backends/_torch_scatter.py; the
checks as custom ops (torch.compile, jit.trace, vmap) and the device-side assertions are in
_torch_ops.py, the autograd functions in _torch_autograd.py (both import torch, on the first indexed
call: `ops` and `autograd` below).
"""

from __future__ import annotations

import sys
from typing import Any

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
    Results,
    ScatterAlong,
    ScatterRows,
    TakeRows,
)
from . import _code, _common
from ._code import CodeNames, args, tup
from .contract import Backend

# torch's messages for an index its kernels refuse (gather, scatter_*, index_select, index_add, x[idx])
_INDEX_FAULTS = ("out of bounds", "index out of range")


class TorchBackend(Backend):
    """torch's hooks."""

    name = "torch"
    READY_INDEXES = True
    # torch stores uint16/32/64 and float8 but has few kernels for them, not even index_select: 'other'.
    INDEXES_OTHER = False
    # matmul where einsum is a matrix product: torch.einsum's C++ parses its spec on every call, and inductor
    # fuses an attention block written with matmul into one scaled-dot-product kernel, not one with einsum.
    EINSUM_MATMUL = True
    # torch's reductions give contiguous results: the permute after one is written out (einops reduces a
    # permuted view, which torch does far more slowly; benchmarks/README.md)
    RESULTS = Results(reduction_contiguous=True)

    def __init__(self) -> None:
        super().__init__()
        import torch
        from torch import _VF
        from torch.overrides import has_torch_function

        self.torch = torch
        self._jit_tracing = torch._C._is_tracing  # inside torch.jit.trace (a bool: cheaper than its state)
        self._VF, self._has_torch_function = _VF, has_torch_function
        self._functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor  # torch.func.vmap's batches
        self.TENSOR = torch.Tensor
        self._int64 = torch.int64
        self._int_dtypes = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.uint16,
                            torch.uint32, torch.uint64)
        self._kinds = {torch.bool: "bool", torch.uint8: "uint",
                       **{d: "int" for d in (torch.int8, torch.int16, torch.int32, torch.int64)},
                       **{d: "float" for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)},
                       **{d: "complex" for d in (torch.complex32, torch.complex64, torch.complex128)}}

    # The pieces that only indexed calls use, imported on the first one (the first index conversion,
    # check or step factory that reads them), not by a plain reshape's first call.

    @_common.read_once
    def ops(self) -> Any:
        """The checks as custom ops (torch.compile, jit.trace, vmap) and the device-side assertions."""
        from . import _torch_ops

        return _torch_ops

    @_common.read_once
    def autograd(self) -> Any:
        """The autograd functions of the scatters (sums of rows, max and min)."""
        from . import _torch_autograd

        return _torch_autograd

    @_common.read_once
    def scatters(self) -> Any:
        """The one decision tree of the scatters (_torch_scatter)."""
        from . import _torch_scatter

        return _torch_scatter

    # --- arrays and dtypes ----------------------------------------------------------------------------

    def accepts(self, x: object) -> bool:
        return isinstance(x, self.torch.Tensor)

    def stack(self, xs: list) -> Any:
        return self.torch.stack(list(xs))

    def concat(self, xs: list, axis: int) -> Any:
        return self.torch.cat(list(xs), dim=axis)

    def einsum(self, spec: str, *xs: Any) -> Any:
        # torch.einsum's own path for <= 2 operands without its Python wrapper; the wrapper stays for
        # __torch_function__ overrides, opt_einsum's contraction order, and torch.compile (which traces it).
        torch = self.torch
        if len(xs) <= 2 and not torch.compiler.is_compiling() and not self._has_torch_function(xs):
            return self._VF.einsum(spec, xs)
        return torch.einsum(spec, *xs)

    def matmul(self, a: Any, b: Any) -> Any:
        if self._reorders(a, b):
            a, b = _in_memory_order(a), _in_memory_order(b)
        return self.torch.matmul(a, b)

    def _reorders(self, a: Any, b: Any) -> bool:
        """Whether matmul's operands go through _in_memory_order: always in eager code; compiled, only in a
        CPU training graph. Inductor's attention fusion matches matmul's own graph (a copy before it hides
        the pattern), and on the CPU it fuses inference graphs only."""
        torch = self.torch
        if not torch.compiler.is_compiling():
            return True
        return a.device.type == "cpu" and torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)

    @staticmethod
    def code_einsum(plan: Any, operands: tuple[str, ...]) -> list[str]:
        """explain's lines: a matrix product as rearr.run.einsum.matmul_run runs it (the STEPS calls of its
        Reshape and Permute steps around matmul), any other einsum as torch.einsum."""
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

    def to_numpy(self, x: Any) -> Any:
        """Detached, on the CPU, with a conj or neg view resolved (numpy(force=True)); a tensor numpy cannot
        hold is the RearrError with the conversion that fits it."""
        try:
            return x.numpy(force=True)
        except (RuntimeError, TypeError) as e:
            raise self._not_for_numpy(x, e) from None

    def _not_for_numpy(self, x: Any, e: Exception) -> RearrError:
        if x.is_meta:
            fix = "a meta tensor holds no values: run the computation on a real device"
        elif x.is_nested:
            fix = "x.to_padded_tensor(0) or x.unbind() first"
        elif x.is_sparse or x.layout is not self.torch.strided:
            fix = "x.to_dense() first"
        elif self._functorch_wrapped(x) or self.ops.traced(x):
            fix = "call asnumpy outside torch.compile, torch.func transforms and tracing (the tensor has no values yet)"
        elif x.is_complex():
            fix = "x.to(torch.complex64) first: numpy has no complex32"
        else:
            fix = "x.float() first: numpy has no " + str(x.dtype).removeprefix("torch.")
        return RearrError(f"torch cannot give this {x.dtype} tensor to numpy: {str(e)[:200]}", code="RA500", hint=fix)

    def dtype_kind(self, x: Any) -> str:
        return self._kinds.get(x.dtype, "other")

    def dtype_range(self, x: Any) -> tuple:
        torch = self.torch
        if x.dtype == torch.bool:
            return 0, 1
        dtype = x.dtype.to_real() if x.is_complex() else x.dtype
        info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
        return info.min, info.max

    def itemsize(self, x: Any) -> int:
        return x.element_size()

    def unusual(self, x: object) -> str | None:
        """What makes x a tensor that torch runs few ops on (sparse, nested), or None. Asked only after
        torch has failed, so the hot path never pays for it."""
        if not isinstance(x, self.torch.Tensor):
            return None
        if x.is_nested:
            return "a nested tensor"
        if x.layout != self.torch.strided:
            return f"a tensor of layout {x.layout}"
        return None

    def check_into(self, into: Any, x: Any) -> None:
        if into.is_inference() and x.requires_grad and self.torch.is_grad_enabled():
            raise RearrError("into= is an inference tensor, which autograd cannot save for the gradient of src",
                             code="RA500", hint="pass into=into.clone() made outside torch.inference_mode(), "
                             "or run the scatter inside it")

    # --- plain steps: shapes passed unpacked (torch parses x.reshape(4, 6) faster than x.reshape((4, 6))) ---

    def reshape(self, step: Reshape) -> Any:
        shape = step.shape
        if not shape:
            return lambda x, env: x.reshape(())
        return lambda x, env: x.reshape(*shape)

    @staticmethod
    def code_reshape(step: Reshape, before: Any, n: CodeNames) -> list[str]:
        # x.reshape is x.view where a view is possible, else x.contiguous().view: print which, so that a copy shows.
        return [f"{n.x} = {n.x}.view({args(step.shape)})" if step.view
                else f"{n.x} = {n.x}.contiguous().view({args(step.shape)})"]

    def permute(self, step: Permute) -> Any:
        perm = step.perm
        if not step.view:  # after a reduction (RESULTS): written out, as einops' result is contiguous
            return lambda x, env: x.permute(*perm).contiguous()
        return lambda x, env: x.permute(*perm)

    @staticmethod
    def code_permute(step: Permute, before: Any, n: CodeNames) -> list[str]:
        return [f"{n.x} = {n.x}.permute({args(step.perm)}){'' if step.view else '.contiguous()'}"]

    def expand(self, step: Expand) -> Any:
        shape = step.shape
        return lambda x, env: x.expand(*shape)

    @staticmethod
    def code_expand(step: Expand, before: Any, n: CodeNames) -> list[str]:
        return [f"{n.x} = {n.x}.expand({args(step.shape)})"]

    def reduce(self, step: Reduce) -> Any:
        torch, r, axes = self.torch, step.reduction, step.axes
        if callable(r):
            return lambda x, env: r(x, axes)
        if not axes:  # torch reads dim=() as every dim: reduce nothing by hand, with numpy's dtypes
            return self._reduce_nothing(r)
        if r == "mean":  # integer means are refused before the plan runs
            return lambda x, env: x.mean(axes)
        if r == "prod":  # torch.prod takes one dim at a time
            float16, bfloat16, float32 = torch.float16, torch.bfloat16, torch.float32

            def prod(x, env):
                dtype = x.dtype
                half = dtype is float16 or dtype is bfloat16  # in float32, rounded once: as numpy
                for a in sorted(axes, reverse=True):
                    x = x.prod(a, dtype=float32) if half and x.dtype is dtype else x.prod(a)
                return x.to(dtype) if half else x
            return prod
        fn = {"sum": torch.sum, "max": torch.amax, "min": torch.amin, "any": torch.any, "all": torch.all}[r]
        if r in ("any", "all"):  # torch keeps uint8 for uint8 input; numpy gives bool
            return lambda x, env: fn(x, axes).bool()
        return lambda x, env: fn(x, axes)

    def _reduce_nothing(self, r: str) -> Any:
        int64 = self.torch.int64

        def run(x, env):
            if r in ("any", "all"):
                return x != 0
            if r in ("sum", "prod") and not (x.is_floating_point() or x.is_complex()):  # ints and bools in int64
                return x.to(int64, copy=True)
            return x.clone()

        return run

    @staticmethod
    def code_reduce(step: Reduce, before: Any, n: CodeNames) -> list[str]:
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

    # --- indices ----------------------------------------------------------------------------------------

    def checks_step_natively(self, step: object) -> bool:
        """torch.gather, scatter_add_ / scatter_reduce_ and x[idx] refuse on the CPU an index value outside
        0 <= i < n, each value against the axis it indexes: for an index used only there, rearr's pre-check
        is left to them (see rearr.run.indexed.run). The value that torch refuses, a negative one included,
        then runs again through check_index: rearr's RA501, or the negative values counted from the end.
        Not the row steps: there a bad row lands in the next batch."""
        return isinstance(step, GatherAlong | ScatterAlong | AdvancedIndex)

    def checks_natively(self, t: Any) -> bool:
        """An eager CPU tensor. A traced one keeps the check_index op in the graph, and CUDA reports a bad
        index as a device-side assert."""
        return t.is_cpu and not self.ops.traced(t)

    def ready_index(self, t: object, like: Any) -> bool:
        """Whether t is an index that convert_index returns as it is and the native calls may check
        (checks_natively), in one call: rearr.run's path for a call seen before."""
        return t.__class__ is self.TENSOR and t.dtype is self._int64 and t.is_cpu and like.is_cpu \
            and not self._jit_tracing()

    def index_fault(self, e: Exception) -> bool:
        """IndexError (x[idx]), or a kernel's RuntimeError that names an index out of bounds or range."""
        return isinstance(e, IndexError) or isinstance(e, RuntimeError) and any(m in str(e) for m in _INDEX_FAULTS)

    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        torch = self.torch
        if type(value) is torch.Tensor and value.dtype is torch.int64 and (
            value.is_cpu and like.is_cpu or value.device == like.device  # is_cpu: no device objects made
        ):
            return value  # the common case, without a call
        if _common.masked(value):  # torch.as_tensor would drop the mask
            raise _common.masked_index(name, text)
        if value.__class__ is not torch.Tensor and _is_dtensor(value):  # (a plain input: this backend's)
            raise RearrError(f"index {name!r} is a DTensor and the input a plain tensor", code="RA501",
                             pattern=text, hint=f"make the input a DTensor on {name}.device_mesh (distribute_tensor("
                             f"x, {name}.device_mesh, placements) or DTensor.from_local), or pass "
                             f"{name}={name}.full_tensor()")
        try:
            t = value if isinstance(value, torch.Tensor) else torch.as_tensor(_common.native_order(value))
        except (TypeError, ValueError, RuntimeError):
            raise _common.not_an_index(name, value, text) from None
        if t.dtype not in self._int_dtypes:
            raise _common.bad_index_dtype(name, t.dtype, text)
        if t.device != like.device:
            if t.device.type == "meta":
                raise RearrError(f"index {name!r} is on the meta device: it has no values to index with",
                                 code="RA500", pattern=text, hint=f"pass {name}= with real values, on {like.device}")
            t = t.to(like.device)
        if t.dtype == torch.uint64 and t.numel() and t.device.type != "meta":
            self._refuse_beyond_int64(t, name, text, mode)
        return t if t.dtype == torch.int64 else t.long()

    def _refuse_beyond_int64(self, t: Any, name: str, text: str, mode: bool | str) -> None:
        """A uint64 index's values of 2**63 or more, which .long() would turn negative: RA501, or a
        device-side assertion where the checks make no host read (_torch_ops.on_device)."""
        torch, ops = self.torch, self.ops
        wrapped = t.view(torch.int64) < 0
        if ops.on_device(t, mode):
            ops.can_assert(t)
            torch._assert_async(wrapped.any().logical_not(), f"rearr RA501: index {name!r} holds a value of "
                                f"2**63 or more, larger than any axis can be, in {text!r}")
        elif wrapped.any():
            _common.refuse_beyond(name, text, t.numpy(force=True), 64)

    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        """Bounds check, and negative values counted from the end: exact on the host, or as device-side
        assertions (mode "async", or True on CUDA: _torch_ops.on_device)."""
        ops, cpu = self.ops, t.is_cpu
        if (mode is not True or not cpu) and ops.on_device(t, mode):  # the first test: the CPU hot path
            return ops.assert_in_range(t, use.length, use.name, use.axis, text)
        if ops.traced(t):  # torch.compile / jit.trace: the check is a node of the graph, run on the real values
            return ops.check_index(t, use.length, use.name, use.axis, -1 if use.col is None else use.col, text)
        try:
            return ops.check_exact(t, use, text)
        except RuntimeError:  # torch.func.vmap cannot read values: the check as an op, which has a vmap rule
            if not self._functorch_wrapped(t):
                raise
            return ops.check_index(t, use.length, use.name, use.axis, -1 if use.col is None else use.col, text)

    # term and row_positions: the index terms as this backend's scatters (_torch_scatter) read them too.

    def term(self, c: IndexTerm, expand: tuple[int, ...] | None = None) -> Any:
        """A function (env, x) -> this coordinate's tensor, with only the calls it needs (expand: then
        expanded to that shape, a view)."""
        torch, shape, stride = self.torch, c.shape, c.stride
        if c.index is None and expand is not None:
            arange = self.term(c)
            return lambda env, x: arange(env, x).expand(*expand)
        if c.index is None:
            n = c.length
            if stride != 1:
                return lambda env, x: torch.arange(0, n * stride, stride, device=x.device).view(shape)
            return lambda env, x: torch.arange(n, device=x.device).view(shape)
        name, perm = c.index, c.perm
        permute = not _common.identity_perm(perm)
        view = c.permuted != shape
        if _common.index_as_passed(c):
            if expand is not None:
                return lambda env, x: env.indices[name].expand(*expand)
            return lambda env, x: env.indices[name]

        def term(env, x):
            t = env.indices[name]
            if permute:
                t = t.permute(*perm)
            if view:
                t = t.reshape(*shape) if shape else t.reshape(())
            if stride != 1:
                t = t * stride
            return t if expand is None else t.expand(*expand)

        return term

    def row_positions(self, terms: tuple[IndexTerm, ...], space: tuple[int, ...]) -> Any:
        """A function (env, x) -> the row that each point of the index space moves: the sum of the terms, 1-d."""
        fns = [self.term(c) for c in terms]
        full = tuple(max(c.shape[d] for c in terms) for d in range(len(space))) == space

        def flat(env, x):
            total = fns[0](env, x)
            for f in fns[1:]:
                total = total + f(env, x)
            return total.reshape(-1) if full else total.expand(space).reshape(-1)

        return flat

    # --- gathers ----------------------------------------------------------------------------------------

    def takerows(self, step: TakeRows) -> Any:
        flat = self.row_positions(step.terms, step.space)
        return lambda x, env: x.index_select(0, flat(env, x))

    @staticmethod
    def code_takerows(step: TakeRows, before: Any, n: CodeNames) -> list[str]:
        pre, flat = row_positions_code(step.terms, step.space, n)
        return pre + [f"{n.x} = {n.x}.index_select(0, {flat})"]

    def gatheralong(self, step: GatherAlong) -> Any:
        dim, shape, gather = step.dim, step.shape, self.torch.gather
        term = self.term(step.term)
        if step.term.shape == shape and _common.index_as_passed(step.term):  # the common tiny gather: no term call
            name = step.term.index
            return lambda x, env: gather(x, dim, env.indices[name])
        if step.term.shape == shape:
            return lambda x, env: gather(x, dim, term(env, x))
        return lambda x, env: gather(x, dim, term(env, x).expand(*shape))

    @staticmethod
    def code_gatheralong(step: GatherAlong, before: Any, n: CodeNames) -> list[str]:
        idx = term_code(step.term, n)
        if step.term.shape != step.shape:
            idx = f"{_code.paren(idx)}.expand({args(step.shape)})"
        return [f"{n.x} = torch.gather({n.x}, {step.dim}, {idx})"]

    def advancedindex(self, step: AdvancedIndex) -> Any:
        terms = [_contiguous(self.term(c)) if not _common.identity_perm(c.perm) else self.term(c) for c in step.terms]
        if all(c.shape == () for c in step.terms):
            # torch reads 0-d tensor indices as ints (.item(): a host read, a sync on a GPU) and returns a view:
            # 1-element indices read nothing and make a new tensor, whose leading axis of 1 is dropped
            return lambda x, env: x[tuple(c(env, x).reshape(1) for c in terms)].squeeze(0)
        return lambda x, env: x[tuple(c(env, x) for c in terms)]

    @staticmethod
    def code_advancedindex(step: AdvancedIndex, before: Any, n: CodeNames) -> list[str]:
        terms = [term_code(t, n) + ("" if _common.identity_perm(t.perm) else ".contiguous()") for t in step.terms]
        if all(t.shape == () for t in step.terms):  # see advancedindex: 1-element indices, not ints
            return [f"{n.x} = {n.x}[{', '.join(_code.paren(t) + '.reshape(1)' for t in terms)}].squeeze(0)"]
        return [f"{n.x} = {n.x}[{', '.join(terms)}]"]

    # --- scatters: one decision tree, of rows or along an axis (rearr/backends/_torch_scatter.py) ----------

    def scatterrows(self, step: ScatterRows) -> Any:
        return self.scatters.scatter(self, step, self.scatters.Rows(self, step))

    @staticmethod
    def code_scatterrows(step: ScatterRows, before, n: CodeNames) -> list[str]:
        """The scatter with fill 0 and no into=, on a tensor that records no backward (_torch_scatter._training), or
        (n.grad) on one that records a backward."""
        pre, flat = row_positions_code(step.terms, step.space, n)
        x, rows, width, r = n.x, step.rows, before.shape[1], step.reduction
        if r == "set":
            return pre + ["# rearr first checks that flat holds no row twice ('set')",
                          f"{x} = {x}.new_full(({rows}, {width}), 0).index_copy_(0, {flat}, {x})"]
        if r == "sum":
            return pre + [f"{x} = {x}.new_zeros(({rows}, {width})).index_add_(0, {flat}, {x})"]
        idx = f"{_code.paren(flat)}[:, None].expand({args(before.shape)})"
        return pre + _reduce_code(r, n, f"({rows}, {width})", 0, idx, f"index_add_(0, {flat}, {{}})", f"({rows},)",
                                  str(before.shape[0]), "[:, None]", f"index_fill_(0, {flat}, True)")

    def scatteralong(self, step: ScatterAlong) -> Any:
        return self.scatters.scatter(self, step, self.scatters.Along(self, step))

    @staticmethod
    def code_scatteralong(step: ScatterAlong, before, n: CodeNames) -> list[str]:
        """The scatter with fill 0 and no into=, on a tensor that records no backward (_torch_scatter._training), or
        (n.grad) on one that records a backward; its kept-zeros branch computes the same, one call fewer."""
        x, dim, shape, r = n.x, step.dim, step.shape, step.reduction
        idx = term_code(step.term, n)
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

    # Each step kind -> the code explain prints for it (the templates above, and the scatters' beside theirs).
    CODE = {Reshape: code_reshape, Permute: code_permute, Reduce: code_reduce, Expand: code_expand,
            TakeRows: code_takerows, GatherAlong: code_gatheralong, AdvancedIndex: code_advancedindex,
            ScatterRows: code_scatterrows, ScatterAlong: code_scatteralong,
            "einsum": code_einsum}


# --- what the steps and the templates share --------------------------------------------------------------


def _is_dtensor(t: object) -> bool:
    """Whether t is a DTensor, without importing torch.distributed.tensor (none exists before it is)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(t, module.DTensor)


def _in_memory_order(t: Any) -> Any:
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


def _contiguous(fn: Any) -> Any:
    """torch lays out an advanced-indexing result like its index: keep that row-major."""
    return lambda env, x: fn(env, x).contiguous()


def term_code(t: IndexTerm, n: CodeNames) -> str:
    if t.index is None:
        if t.stride != 1:  # the stride goes into arange
            return _code.view(f"torch.arange(0, {t.length} * {t.stride}, {t.stride}, device={n.x}.device)",
                              (t.length,), t.shape, "view")
        return _code.view(f"torch.arange({t.length}, device={n.x}.device)", (t.length,), t.shape, "view")
    expr, have = _code.index_expr(t, n, lambda e, perm: f"{e}.permute({args(perm)})")
    expr = _code.view(expr, have, t.shape, "reshape")
    return f"{expr} * {t.stride}" if t.stride != 1 else expr


def row_positions_code(terms: tuple[IndexTerm, ...], space: tuple[int, ...], n: CodeNames) -> tuple[list[str], str]:
    return _code.row_positions(terms, space, n, term_code, lambda e, space: f"{_code.paren(e)}.expand({args(space)})")


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


BACKEND = TorchBackend
