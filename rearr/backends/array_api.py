"""Array API backend: any array with ``__array_namespace__`` that numpy, torch and dask do not claim.

array-api-strict, cupy, mlx ...: each step is one call of the array's own namespace (found through
``array_api_compat``, imported on the first such array), so the result is the input's own array type.
Gather works through ``take`` and ``take_along_axis``; scatter needs an at-style update that the
standard does not have, so it is refused with a RearrError that names the library (explain refuses
such a plan with the same error). jax's backend (jax.py) is this one with jax's own gathers, scatters
and checks.

The code explain prints calls the namespace by a name: ``xp`` here, the input's own
(``array_api_compat.array_namespace(x)``); `templates` gives the table for another name (jax's ``jnp``).
"""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

from ..errors import RearrError
from ..planning.plan import (
    AdvancedIndex,
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
from . import _code, _common, _xp
from ._code import CodeNames, tup
from .contract import Backend
from .numpy import NumpyBackend

_FRAMEWORKS_WITH_OWN_BACKEND = ("numpy", "torch", "dask")
_BOOL_EXTREMES = {"max": "any", "min": "all"}


def _scatter_refused(x: object, pattern: str | None) -> RearrError:
    lib = "Array API" if x is None else ArrayApiBackend.namespace(x).__name__
    return RearrError(f"{lib} arrays cannot be scattered: the Array API standard has no at-style update "
                      "(index_add, scatter_reduce, x.at[i].add)", code="RA500", pattern=pattern,
                      hint="scatter on numpy or torch: convert with np.from_dlpack(x) (and the indices), "
                      "call rearr.scatter there, and convert back with xp.asarray")


# The refusal of both scatter kinds, by the step and by explain.
_no_scatter, _code_no_scatter = _common.no_scatter(_scatter_refused)


class ArrayApiBackend(Backend):
    """The Array API's hooks, for any namespace."""

    name = "array_api"
    # TENSOR stays None: these arrays have many classes (one per library), so each index takes the careful
    # path (convert_index, then its shape).
    INDEXES_OTHER = False  # the standard's dtypes are all numbers
    EINSUM_MATMUL = False  # the namespace's own einsum where it has one (jax's is one XLA dot_general)

    _NS: dict[type, ModuleType] = {}

    def __init__(self) -> None:
        super().__init__()
        self.numpy = NumpyBackend()  # indexes of other libraries (lists, numpy arrays) are read as numpy reads them

    @classmethod
    def namespace(cls, x: object) -> ModuleType:
        """The array's Array API namespace (jax.numpy, array_api_strict ...), once per type."""
        xp = cls._NS.get(type(x))
        if xp is None:
            import array_api_compat  # the optional extra: rearr[array-api]

            xp = cls._NS[type(x)] = array_api_compat.array_namespace(x)
        return xp

    # --- arrays and dtypes ----------------------------------------------------------------------------

    def accepts(self, x: object) -> bool:
        # numpy 2 arrays and torch tensors have __array_namespace__ too: they keep their own backends.
        return hasattr(type(x), "__array_namespace__") and \
            str(type(x).__module__).partition(".")[0] not in _FRAMEWORKS_WITH_OWN_BACKEND

    def stack(self, xs: list) -> Any:
        return self.namespace(xs[0]).stack(list(xs))

    def concat(self, xs: list, axis: int) -> Any:
        return self.namespace(xs[0]).concat(list(xs), axis=axis)

    def einsum(self, spec: str, *xs: Any) -> Any:
        xp = self.namespace(xs[0])
        if not hasattr(xp, "einsum"):
            raise RearrError(f"{xp.__name__} has no einsum (the Array API standard does not define one)",
                             code="RA500",
                             hint="write the product with xp.matmul / xp.tensordot, or convert to numpy with "
                             "np.from_dlpack(x), call rearr.einsum there and convert back with xp.asarray")
        return xp.einsum(spec, *xs)

    @staticmethod
    def code_einsum(plan: Any, operands: tuple[str, ...], xp: str = "xp") -> list[str]:
        return _code.einsum_lines(plan, operands, lambda spec, ops: f"{xp}.einsum({spec}, {ops})")

    def matmul(self, a: Any, b: Any) -> Any:
        return self.namespace(a).matmul(a, b)

    def to_numpy(self, x: Any) -> Any:
        """Through DLPack (no copy where the array is on the CPU), else the library's own __array__."""
        import numpy as np

        try:
            return np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError, ValueError, AttributeError):
            pass
        try:
            return np.asarray(x)
        except (TypeError, BufferError, RuntimeError, ValueError, AttributeError) as e:
            raise not_for_numpy(self.namespace(x).__name__, x, e) from None

    def dtype_kind(self, x: Any) -> str:
        xp = self.namespace(x)
        for kind, names in (("bool", "bool"), ("int", "signed integer"), ("uint", "unsigned integer"),
                            ("float", "real floating"), ("complex", "complex floating")):
            if xp.isdtype(x.dtype, names):
                return kind
        return "other"

    def dtype_range(self, x: Any) -> tuple:
        xp = self.namespace(x)
        if xp.isdtype(x.dtype, "bool"):
            return 0, 1
        if xp.isdtype(x.dtype, "complex floating"):
            real = xp.float64 if x.dtype == xp.complex128 else xp.float32
            info = xp.finfo(real)
        else:
            info = xp.finfo(x.dtype) if xp.isdtype(x.dtype, "real floating") else xp.iinfo(x.dtype)
        return info.min, info.max

    def itemsize(self, x: Any) -> int:
        xp = self.namespace(x)
        if xp.isdtype(x.dtype, "bool"):
            return 1
        info = xp.iinfo(x.dtype) if xp.isdtype(x.dtype, "integral") else xp.finfo(x.dtype)
        return info.bits // 8 * (2 if xp.isdtype(x.dtype, "complex floating") else 1)

    # --- plain steps ------------------------------------------------------------------------------------

    def reshape(self, step: Reshape) -> Any:
        shape, namespace = step.shape, self.namespace
        return lambda x, env: namespace(x).reshape(x, shape)

    @staticmethod
    def code_reshape(step: Reshape, before: Any, n: CodeNames, xp: str = "xp") -> list[str]:
        return [f"{n.x} = {xp}.reshape({n.x}, {tup(step.shape)})"]

    def permute(self, step: Permute) -> Any:
        perm, namespace = step.perm, self.namespace
        return lambda x, env: namespace(x).permute_dims(x, perm)

    @staticmethod
    def code_permute(step: Permute, before: Any, n: CodeNames, xp: str = "xp") -> list[str]:
        return [f"{n.x} = {xp}.permute_dims({n.x}, {tup(step.perm)})"]

    def expand(self, step: Expand) -> Any:
        shape, namespace = step.shape, self.namespace
        return lambda x, env: namespace(x).broadcast_to(x, shape)

    @staticmethod
    def code_expand(step: Expand, before: Any, n: CodeNames, xp: str = "xp") -> list[str]:
        return [f"{n.x} = {xp}.broadcast_to({n.x}, {tup(step.shape)})"]

    def reduce(self, step: Reduce) -> Any:
        r, axes, namespace = step.reduction, step.axes, self.namespace
        if callable(r):
            return lambda x, env: r(x, axes)

        def run(x, env):
            xp = namespace(x)  # integer means and complex min/max are refused before the plan runs
            if x.dtype == xp.bool:  # the standard reduces numbers only; numpy and torch take bools too
                if r in ("sum", "prod"):  # they count
                    x = xp.astype(x, _xp.index_dtype(xp))
                elif r in _BOOL_EXTREMES:  # and keep bools: max is any, min is all
                    return getattr(xp, _BOOL_EXTREMES[r])(x, axis=axes)
            elif r in ("sum", "prod") and _small_unsigned(xp, x.dtype):  # numpy and torch: int64, not uint64
                return getattr(xp, r)(x, axis=axes, dtype=_xp.index_dtype(xp))
            return getattr(xp, r)(x, axis=axes)

        return run

    @staticmethod
    def code_reduce(step: Reduce, before: Any, n: CodeNames, xp: str = "xp") -> list[str]:
        x, r, axes = n.x, step.reduction, step.axes
        if callable(r):  # the callable that was passed, bound to this name
            return [f"{x} = {n.reduction}({x}, {tup(axes)})"]
        call = f"{xp}.{r}({x}, axis={tup(axes)})"
        # explain does not know the dtype: the bool case that run() above takes is printed as a condition.
        if r in ("sum", "prod"):
            return [f"if {x}.dtype == {xp}.bool:  # the standard counts numbers only",
                    f"    {x} = {xp}.astype({x}, {xp}.arange(1).dtype)",
                    f"if {x}.dtype in ({xp}.uint8, {xp}.uint16, {xp}.uint32):  # as numpy and torch: a signed result",
                    f"    {x} = {xp}.{r}({x}, axis={tup(axes)}, dtype={xp}.arange(1).dtype)",
                    "else:", f"    {x} = {call}"]
        if r in _BOOL_EXTREMES:
            return [f"{x} = {xp}.{_BOOL_EXTREMES[r]}({x}, axis={tup(axes)}) if {x}.dtype == {xp}.bool else {call}"]
        return [f"{x} = {call}"]

    # --- indices ----------------------------------------------------------------------------------------

    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        """The index as an array of the input's library in its index dtype. A value that the cast would wrap
        is RA501 with the value passed: jax without x64 casts to int32, and its asarray narrows numpy's
        int64 silently, so anything not of the library is read by numpy first."""
        xp = self.namespace(like)
        dtype = _xp.index_dtype(xp)
        bits = xp.iinfo(dtype).bits
        if type(value) is not type(like) and not (self.accepts(value) and self.namespace(value) is xp):
            i = self.numpy.convert_index(value, None, name, text)  # numpy's rules: dtype, masks, uint64
            if _common.wraps(i.dtype, bits):
                _common.refuse_beyond(name, text, i, bits)
            return xp.asarray(i.astype(f"int{bits}"), device=_xp.device(like))
        if not xp.isdtype(value.dtype, "integral"):
            raise _common.bad_index_dtype(name, value.dtype, text)
        if value.dtype == dtype:
            return value
        have = xp.iinfo(value.dtype)
        if have.max > 2 ** (bits - 1) - 1 or have.min < -(2 ** (bits - 1)):
            try:
                wrapped = int(xp.max(value)) > 2 ** (bits - 1) - 1 or int(xp.min(value)) < -(2 ** (bits - 1))
            except TypeError:  # jax under jit (ConcretizationTypeError): no values; jax's backend checks them
                wrapped = False
            if wrapped:
                _common.refuse_beyond(name, text, value, bits, xp)
        return xp.astype(value, dtype)

    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        """Bounds check, and negative values counted from the end (the exact check in every mode)."""
        if math.prod(t.shape) == 0:
            return t
        xp, n = self.namespace(t), use.length
        try:
            lo, hi = int(xp.min(t)), int(xp.max(t))
        except TypeError:  # jax under jit: a traced index has no values yet (ConcretizationTypeError)
            raise RearrError(f"index {use.name!r} has no values to check yet (a traced {xp.__name__} array)",
                             code="RA501", pattern=text, col=use.col,
                             hint="pass check_bounds=False inside jax.jit, and keep the values in 0 <= i < n") from None
        if lo < -n or hi >= n:
            _common.refuse_out_of_range(use, text, t, xp)
        return xp.where(t < 0, t + n, t) if lo < 0 else t

    # --- gathers ----------------------------------------------------------------------------------------

    def takerows(self, step: TakeRows) -> Any:
        terms, space, namespace = step.terms, step.space, self.namespace
        ones = (1,) * len(terms)  # TakeRows' terms carry their strides already

        def run(x, env):
            xp = namespace(x)
            return xp.take(x, _xp.rows(terms, ones, space, env.indices, xp, x), axis=0)

        return run

    @staticmethod
    def code_takerows(step: TakeRows, before: Any, n: CodeNames, xp: str = "xp") -> list[str]:
        return [_xp.rows_code(step.terms, (1,) * len(step.terms), step.space, n, xp),
                f"{n.x} = {xp}.take({n.x}, {n.flat}, axis=0)"]

    def gatheralong(self, step: GatherAlong) -> Any:
        dim, term, shape, namespace = step.dim, step.term, step.shape, self.namespace

        def run(x, env):
            xp = namespace(x)
            idx = xp.broadcast_to(_xp.term(term, env.indices, xp, x), shape)
            # array-api-strict keeps the function but refuses it below its version: read the version too.
            if hasattr(xp, "take_along_axis") and getattr(xp, "__array_api_version__", "9999") >= "2024.12":
                return xp.take_along_axis(x, idx, axis=dim)
            return _take_along(xp, x, idx, dim)

        return run

    @staticmethod
    def code_gatheralong(step: GatherAlong, before: Any, n: CodeNames, xp: str = "xp") -> list[str]:
        x, dim = n.x, step.dim
        return ["# (a namespace before Array API 2024.12 lacks take_along_axis: rearr takes flat positions instead)",
                f"{x} = {xp}.take_along_axis({x}, {xp}.broadcast_to({_xp.term_code(step.term, n, xp)}, "
                f"{tup(step.shape)}), axis={dim})"]

    def advancedindex(self, step: AdvancedIndex) -> Any:
        """x[c0, c1, ...] as one take of rows: integer-array indexing of several axes is optional in the standard."""
        terms, namespace = step.terms, self.namespace
        lead, strides, space = _as_rows(step)

        def run(x, env):
            xp = namespace(x)
            rest = tuple(x.shape[len(lead):])
            rows = xp.reshape(x, (math.prod(lead), math.prod(rest)))
            return xp.reshape(xp.take(rows, _xp.rows(terms, strides, space, env.indices, xp, x), axis=0), space + rest)

        return run

    @staticmethod
    def code_advancedindex(step: AdvancedIndex, before: Any, n: CodeNames, xp: str = "xp") -> list[str]:
        lead, strides, space = _as_rows(step)
        rest = before.shape[len(lead):]
        return [f"{n.x} = {xp}.reshape({n.x}, ({math.prod(lead)}, {math.prod(rest)}))",
                _xp.rows_code(step.terms, strides, space, n, xp),
                f"{n.x} = {xp}.reshape({xp}.take({n.x}, {n.flat}, axis=0), {tup(space + rest)})"]

    # --- scatters: refused (the standard has no at-style update) -----------------------------------------

    def scatterrows(self, step: ScatterRows) -> Any:
        return _no_scatter(step)

    def scatteralong(self, step: ScatterAlong) -> Any:
        return _no_scatter(step)

    code_no_scatter = staticmethod(_code_no_scatter)


def templates(xp: str) -> dict:
    """The Array API backend's explain templates with the namespace printed as ``xp`` (jax: "jnp")."""
    b = ArrayApiBackend
    code = {Reshape: b.code_reshape, Permute: b.code_permute, Reduce: b.code_reduce, Expand: b.code_expand,
            TakeRows: b.code_takerows, GatherAlong: b.code_gatheralong, AdvancedIndex: b.code_advancedindex,
            "einsum": b.code_einsum}
    return {**{k: functools.partial(f, xp=xp) for k, f in code.items()},
            ScatterRows: b.code_no_scatter, ScatterAlong: b.code_no_scatter}


ArrayApiBackend.CODE = templates("xp")


def not_for_numpy(lib: str, x: object, e: Exception) -> RearrError:
    """asnumpy's refusal of an array numpy cannot take: a tracer (jax.jit, vmap, grad) has no values yet."""
    traced = "Tracer" in type(x).__name__ or "Tracer" in type(e).__name__
    fix = ("call asnumpy outside jax.jit / vmap / grad: a traced array has no values yet" if traced else
           f"convert it with {lib} first (a plain numeric array on the CPU), then call asnumpy")
    return RearrError(f"{lib} cannot give this {getattr(x, 'dtype', '')} array to numpy: {str(e)[:200]}",
                      code="RA500", hint=fix)


def _small_unsigned(xp: ModuleType, dtype: object) -> bool:
    """uint8/16/32, which the standard sums into an unsigned dtype and numpy and torch into int64."""
    return xp.isdtype(dtype, "unsigned integer") and xp.iinfo(dtype).bits < 64


def _take_along(xp: ModuleType, x: Any, idx: Any, dim: int) -> Any:
    """take_along_axis for namespaces before Array API 2024.12: one take of flat positions."""
    strides = [math.prod(x.shape[d + 1:]) for d in range(x.ndim)]
    flat = idx * strides[dim]
    for d, n in enumerate(idx.shape):
        if d != dim:
            offsets = xp.arange(n, dtype=_xp.index_dtype(xp), device=_xp.device(x)) * strides[d]
            flat = flat + xp.reshape(offsets, tuple(n if k == d else 1 for k in range(x.ndim)))
    return xp.reshape(xp.take(xp.reshape(x, (-1,)), xp.reshape(flat, (-1,)), axis=0), idx.shape)


def _as_rows(step: AdvancedIndex) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The leading axes' lengths, each term's stride among them (row numbers of x viewed as (leading, rest)),
    and the index space."""
    terms = step.terms
    lead = tuple(c.length for c in terms)
    strides = tuple(math.prod(lead[i + 1:]) for i in range(len(lead)))
    return lead, strides, tuple(max(c.shape[d] for c in terms) for d in range(len(terms[0].shape)))


BACKEND = ArrayApiBackend
