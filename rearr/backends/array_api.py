"""Array API backend: any array with ``__array_namespace__`` that numpy, torch and dask do not claim.

jax, array-api-strict, cupy, mlx ...: each step is one call of the array's own
namespace (found through ``array_api_compat``, imported on the first such array),
so the result is the input's own array type. Gather works through ``take`` and
``take_along_axis``; scatter needs an at-style update that the standard does not
have, so it is refused with a RearrError that names the library (explain refuses
such a plan with the same error). The code explain prints calls the namespace
``xp``: the input's own, ``array_api_compat.array_namespace(x)``.
"""

from __future__ import annotations

import math
from types import ModuleType

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
from . import numpy as _numpy
from ._code import CodeNames, tup
from .contract import Backend, IndexEnv

name = "array_api"
# rearr.run.indexed's look-up compares an index's class with TENSOR; these arrays have many classes (one per
# library), so none matches and each index takes the careful path (convert_index, then its shape).
TENSOR = None
_FRAMEWORKS_WITH_OWN_BACKEND = ("numpy", "torch", "dask")
_NS: dict[type, ModuleType] = {}


def load() -> None:
    """The registry calls this once: indexes of other libraries are read through numpy's backend."""
    _numpy.load()


def accepts(x: object) -> bool:
    # numpy 2 arrays and torch tensors have __array_namespace__ too: they keep their own backends.
    return hasattr(type(x), "__array_namespace__") and \
        type(x).__module__.partition(".")[0] not in _FRAMEWORKS_WITH_OWN_BACKEND


def namespace(x: object) -> ModuleType:
    """The array's Array API namespace (jax.numpy, array_api_strict ...), once per type."""
    xp = _NS.get(type(x))
    if xp is None:
        import array_api_compat  # the optional extra: rearr[array-api]

        xp = _NS[type(x)] = array_api_compat.array_namespace(x)
    return xp


def library(x: object) -> str:
    return namespace(x).__name__


def stack(xs: list):
    return namespace(xs[0]).stack(list(xs))


def concat(xs: list, axis: int):
    return namespace(xs[0]).concat(list(xs), axis=axis)


def einsum(spec: str, *xs):
    xp = namespace(xs[0])
    if not hasattr(xp, "einsum"):
        raise RearrError(f"{xp.__name__} has no einsum (the Array API standard does not define one)",
                         code="RA500",
                         hint="write the product with xp.matmul / xp.tensordot, or convert to numpy with "
                         "np.from_dlpack(x), call rearr.einsum there and convert back with xp.asarray")
    return xp.einsum(spec, *xs)


def to_numpy(x):
    """Through DLPack (no copy where the array is on the CPU), else the library's own __array__."""
    import numpy as np

    try:
        return np.from_dlpack(x)
    except (TypeError, BufferError, RuntimeError, ValueError, AttributeError):
        pass
    try:
        return np.asarray(x)
    except (TypeError, BufferError, RuntimeError, ValueError, AttributeError) as e:
        raise not_for_numpy(library(x), x, e) from None


def not_for_numpy(lib: str, x: object, e: Exception) -> RearrError:
    """asnumpy's refusal of an array numpy cannot take: a tracer (jax.jit, vmap, grad) has no values yet."""
    traced = "Tracer" in type(x).__name__ or "Tracer" in type(e).__name__
    fix = ("call asnumpy outside jax.jit / vmap / grad: a traced array has no values yet" if traced else
           f"convert it with {lib} first (a plain numeric array on the CPU), then call asnumpy")
    return RearrError(f"{lib} cannot give this {getattr(x, 'dtype', '')} array to numpy: {str(e)[:200]}",
                      code="RA500", hint=fix)


def matmul(a, b):
    return namespace(a).matmul(a, b)


def code_einsum(plan, operands: tuple[str, ...]) -> list[str]:
    return _code.einsum_lines(plan, operands, lambda spec, ops: f"xp.einsum({spec}, {ops})")


def is_float(x) -> bool:
    return namespace(x).isdtype(x.dtype, ("real floating", "complex floating"))


# --- dtype questions (rearr.planning.policy asks them) ----------------------------------

INDEXES_OTHER = False  # the standard's dtypes are all numbers
EINSUM_MATMUL = False  # the namespace's own einsum where it has one (jax's is one XLA dot_general)


def dtype_kind(x) -> str:
    xp = namespace(x)
    for kind, names in (("bool", "bool"), ("int", "signed integer"), ("uint", "unsigned integer"),
                        ("float", "real floating"), ("complex", "complex floating")):
        if xp.isdtype(x.dtype, names):
            return kind
    return "other"


def dtype_range(x) -> tuple:
    xp = namespace(x)
    if xp.isdtype(x.dtype, "bool"):
        return 0, 1
    if xp.isdtype(x.dtype, "complex floating"):
        real = xp.float64 if x.dtype == xp.complex128 else xp.float32
        info = xp.finfo(real)
    else:
        info = xp.finfo(x.dtype) if xp.isdtype(x.dtype, "real floating") else xp.iinfo(x.dtype)
    return info.min, info.max


def itemsize(x) -> int:
    xp = namespace(x)
    if xp.isdtype(x.dtype, "bool"):
        return 1
    info = xp.iinfo(x.dtype) if xp.isdtype(x.dtype, "integral") else xp.finfo(x.dtype)
    return info.bits // 8 * (2 if xp.isdtype(x.dtype, "complex floating") else 1)


# --- plain steps -------------------------------------------------------------


def reshape(step: Reshape):
    shape = step.shape
    return lambda x, env: namespace(x).reshape(x, shape)


def code_reshape(step: Reshape, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = xp.reshape({n.x}, {tup(step.shape)})"]


def permute(step: Permute):
    perm = step.perm
    return lambda x, env: namespace(x).permute_dims(x, perm)


def code_permute(step: Permute, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = xp.permute_dims({n.x}, {tup(step.perm)})"]


def expand(step: Expand):
    shape = step.shape
    return lambda x, env: namespace(x).broadcast_to(x, shape)


def code_expand(step: Expand, before, n: CodeNames) -> list[str]:
    return [f"{n.x} = xp.broadcast_to({n.x}, {tup(step.shape)})"]


_BOOL_EXTREMES = {"max": "any", "min": "all"}


def reduce(step: Reduce):
    r, axes = step.reduction, step.axes
    if callable(r):
        return lambda x, env: r(x, axes)

    def run(x, env):
        xp = namespace(x)  # rearr.planning.policy has refused integer means and complex min/max already
        if x.dtype == xp.bool:  # the standard reduces numbers only; numpy and torch take bools too
            if r in ("sum", "prod"):  # they count
                x = xp.astype(x, _index_dtype(xp))
            elif r in _BOOL_EXTREMES:  # and keep bools: max is any, min is all
                return getattr(xp, _BOOL_EXTREMES[r])(x, axis=axes)
        elif r in ("sum", "prod") and _small_unsigned(xp, x.dtype):  # numpy and torch: int64, not uint64
            return getattr(xp, r)(x, axis=axes, dtype=_index_dtype(xp))
        return getattr(xp, r)(x, axis=axes)

    return run


def code_reduce(step: Reduce, before, n: CodeNames) -> list[str]:
    x, r, axes = n.x, step.reduction, step.axes
    if callable(r):  # the callable that was passed, bound to this name
        return [f"{x} = {n.reduction}({x}, {tup(axes)})"]
    call = f"xp.{r}({x}, axis={tup(axes)})"
    # explain does not know the dtype: the bool case that run() above takes is printed as a condition.
    if r in ("sum", "prod"):
        return [f"if {x}.dtype == xp.bool:  # the standard counts numbers only",
                f"    {x} = xp.astype({x}, xp.arange(1).dtype)",
                f"if {x}.dtype in (xp.uint8, xp.uint16, xp.uint32):  # as numpy and torch: a signed result",
                f"    {x} = xp.{r}({x}, axis={tup(axes)}, dtype=xp.arange(1).dtype)",
                "else:", f"    {x} = {call}"]
    if r in _BOOL_EXTREMES:
        return [f"{x} = xp.{_BOOL_EXTREMES[r]}({x}, axis={tup(axes)}) if {x}.dtype == xp.bool else {call}"]
    return [f"{x} = {call}"]


def _small_unsigned(xp: ModuleType, dtype: object) -> bool:
    """uint8/16/32, which the standard sums into an unsigned dtype and numpy and torch into int64."""
    return xp.isdtype(dtype, "unsigned integer") and xp.iinfo(dtype).bits < 64


# --- indices -----------------------------------------------------------------


_INDEX_DTYPE: dict[str, object] = {}


def _index_dtype(xp: ModuleType):
    """The namespace's default integer dtype (int64, or int32 for jax without x64): one per library."""
    dtype = _INDEX_DTYPE.get(xp.__name__)
    if dtype is None:
        # asarray of an int, not arange: under jax.jit it is a constant, where arange is an op of the program
        dtype = _INDEX_DTYPE[xp.__name__] = xp.asarray(0).dtype
    return dtype


def _device(x):
    import array_api_compat

    return array_api_compat.device(x)


def convert_index(value: object, like, name: str, text: str, mode: bool | str = True):
    """The index as an array of the input's library in its index dtype. A value that the cast would wrap
    is RA501 with the value passed: jax without x64 casts to int32, and its asarray narrows numpy's
    int64 silently, so anything not of the library is read by numpy first."""
    xp = namespace(like)
    dtype = _index_dtype(xp)
    if type(value) is not type(like) and not (accepts(value) and namespace(value) is xp):
        i = _numpy.convert_index(value, None, name, text)  # numpy's rules: dtype, masks, uint64
        bits = xp.iinfo(dtype).bits
        narrowed = i.astype(f"int{bits}")
        at = _numpy.wrapped_at(i, narrowed)
        if at is not None:
            raise _common.beyond_index_range(name, text, int(i[at]), at, bits)
        return xp.asarray(narrowed, device=_device(like))
    if not xp.isdtype(value.dtype, "integral"):
        raise _common.bad_index_dtype(name, value.dtype, text)
    if value.dtype == dtype:
        return value
    _refuse_wrapping(xp, value, dtype, name, text)
    return xp.astype(value, dtype)


def _refuse_wrapping(xp: ModuleType, t, dtype, name: str, text: str) -> None:
    """RA501 for a value of t that the cast to dtype would wrap (uint64 to int64, uint32 or int64 to
    int32). A traced index (jax.jit) has no values: check_index refuses it, or check_bounds=False
    promised values in range, which every index dtype holds."""
    have, want = xp.iinfo(t.dtype), xp.iinfo(dtype)
    if have.min >= want.min and have.max <= want.max:
        return
    try:
        lo, hi = int(xp.min(t)), int(xp.max(t))
    except TypeError:  # jax under jit: ConcretizationTypeError
        return
    if lo < want.min or hi > want.max:
        flat = xp.reshape(t, (-1,))
        bad = flat > want.max if hi > want.max else flat < want.min  # each bound fits t's dtype
        first = int(xp.nonzero(bad)[0][0])
        position = tuple(int(k) for k in _unravel(first, t.shape))
        raise _common.beyond_index_range(name, text, int(flat[first]), position, want.bits)


def check_index(t, use: IndexUse, text: str, mode: bool | str = True):
    """Bounds check, and negative values counted from the end (the exact check in every mode)."""
    if math.prod(t.shape) == 0:
        return t
    xp, n = namespace(t), use.length
    try:
        lo, hi = int(xp.min(t)), int(xp.max(t))
    except TypeError:  # jax under jit: a traced index has no values yet (ConcretizationTypeError)
        raise RearrError(f"index {use.name!r} has no values to check yet (a traced {xp.__name__} array)",
                         code="RA501", pattern=text, col=use.col,
                         hint="pass check_bounds=False inside jax.jit, and keep the values in 0 <= i < n") from None
    if lo < -n or hi >= n:
        flat = xp.reshape(t, (-1,))
        first = int(xp.nonzero((flat < -n) | (flat >= n))[0][0])
        position = tuple(int(i) for i in _unravel(first, t.shape))
        raise _common.out_of_range(use, text, int(flat[first]), position)
    return xp.where(t < 0, t + n, t) if lo < 0 else t


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for n in reversed(shape):
        out.append(flat % n)
        flat //= n
    return out[::-1]


def _term(c: IndexTerm, env: IndexEnv, xp: ModuleType, like):
    perm, shape = _common.term_layout(c)
    if c.index is None:
        t = xp.arange(c.length, dtype=_index_dtype(xp), device=_device(like))
    else:
        t = env.indices[c.index]
        if perm is not None:
            t = xp.permute_dims(t, perm)
    if t.shape != shape:
        t = xp.reshape(t, shape)
    return t * c.stride if c.stride != 1 else t


def _term_code(t: IndexTerm, n: CodeNames) -> str:
    if t.index is None:  # the namespace's default integer dtype is _index_dtype's
        expr, have = f"xp.arange({t.length}, device={n.x}.device)", (t.length,)
    else:
        expr, have = _code.index_expr(t, n, lambda e, perm: f"xp.permute_dims({e}, {tup(perm)})")
    if have != t.shape:
        expr = f"xp.reshape({expr}, {tup(t.shape)})"
    return f"{expr} * {t.stride}" if t.stride != 1 else expr


def _rows(terms: tuple[IndexTerm, ...], strides: tuple[int, ...], space: tuple[int, ...], env: IndexEnv, xp, like):
    """The flat row numbers sum(term * stride) over the index space, as a 1-d array."""
    total = None
    for c, stride in zip(terms, strides):
        t = _term(c, env, xp, like)
        t = t * stride if stride != 1 else t
        total = t if total is None else total + t
    return xp.reshape(xp.broadcast_to(total, space), (-1,))


def _rows_code(terms: tuple[IndexTerm, ...], strides: tuple[int, ...], space: tuple[int, ...], n: CodeNames) -> str:
    """_rows as lines that leave the row numbers in ``n.flat``."""
    total = " + ".join(_term_code(c, n) + (f" * {stride}" if stride != 1 else "") for c, stride in zip(terms, strides))
    return f"{n.flat} = xp.reshape(xp.broadcast_to({total}, {tup(space)}), (-1,))"


def takerows(step: TakeRows):
    terms, space = step.terms, step.space
    ones = (1,) * len(terms)  # TakeRows' terms carry their strides already

    def run(x, env):
        xp = namespace(x)
        return xp.take(x, _rows(terms, ones, space, env, xp, x), axis=0)

    return run


def code_takerows(step: TakeRows, before, n: CodeNames) -> list[str]:
    return [_rows_code(step.terms, (1,) * len(step.terms), step.space, n), f"{n.x} = xp.take({n.x}, {n.flat}, axis=0)"]


def gatheralong(step: GatherAlong):
    dim, term, shape = step.dim, step.term, step.shape

    def run(x, env):
        xp = namespace(x)
        idx = xp.broadcast_to(_term(term, env, xp, x), shape)
        # array-api-strict keeps the function but refuses it below its version: read the version too.
        if hasattr(xp, "take_along_axis") and getattr(xp, "__array_api_version__", "9999") >= "2024.12":
            return xp.take_along_axis(x, idx, axis=dim)
        return _take_along(xp, x, idx, dim)

    return run


def code_gatheralong(step: GatherAlong, before, n: CodeNames) -> list[str]:
    x, dim = n.x, step.dim
    return ["# (a namespace before Array API 2024.12 lacks take_along_axis: rearr takes flat positions instead)",
            f"{x} = xp.take_along_axis({x}, xp.broadcast_to({_term_code(step.term, n)}, {tup(step.shape)}), "
            f"axis={dim})"]


def _take_along(xp: ModuleType, x, idx, dim: int):
    """take_along_axis for namespaces before Array API 2024.12: one take of flat positions."""
    strides = [math.prod(x.shape[d + 1:]) for d in range(x.ndim)]
    flat = idx * strides[dim]
    for d, n in enumerate(idx.shape):
        if d != dim:
            offsets = xp.arange(n, dtype=_index_dtype(xp), device=_device(x)) * strides[d]
            flat = flat + xp.reshape(offsets, tuple(n if k == d else 1 for k in range(x.ndim)))
    return xp.reshape(xp.take(xp.reshape(x, (-1,)), xp.reshape(flat, (-1,)), axis=0), idx.shape)


def _as_rows(step: AdvancedIndex) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The leading axes' lengths, each term's stride among them (row numbers of x viewed as (leading, rest)),
    and the index space."""
    terms = step.terms
    lead = tuple(c.length for c in terms)
    strides = tuple(math.prod(lead[i + 1:]) for i in range(len(lead)))
    return lead, strides, tuple(max(c.shape[d] for c in terms) for d in range(len(terms[0].shape)))


def advancedindex(step: AdvancedIndex):
    """x[c0, c1, ...] as one take of rows: integer-array indexing of several axes is optional in the standard."""
    terms = step.terms
    lead, strides, space = _as_rows(step)

    def run(x, env):
        xp = namespace(x)
        rest = tuple(x.shape[len(lead):])
        rows = xp.reshape(x, (math.prod(lead), math.prod(rest)))
        return xp.reshape(xp.take(rows, _rows(terms, strides, space, env, xp, x), axis=0), space + rest)

    return run


def code_advancedindex(step: AdvancedIndex, before, n: CodeNames) -> list[str]:
    lead, strides, space = _as_rows(step)
    rest = before.shape[len(lead):]
    return [f"{n.x} = xp.reshape({n.x}, ({math.prod(lead)}, {math.prod(rest)}))",
            _rows_code(step.terms, strides, space, n),
            f"{n.x} = xp.reshape(xp.take({n.x}, {n.flat}, axis=0), {tup(space + rest)})"]


def _scatter_refused(lib: str, pattern: str | None = None) -> RearrError:
    return RearrError(f"{lib} arrays cannot be scattered: the Array API standard has no at-style update "
                      "(index_add, scatter_reduce, x.at[i].add)", code="RA500", pattern=pattern,
                      hint="scatter on numpy or torch: convert with np.from_dlpack(x) (and the indices), "
                      "call rearr.scatter there, and convert back with xp.asarray")


def _no_scatter(step: ScatterRows | ScatterAlong):
    def run(x, env):
        raise _scatter_refused(library(x), env.text)

    return run


def code_no_scatter(step: ScatterRows | ScatterAlong, before, n: CodeNames) -> list[str]:
    """explain refuses the plan with the error that running it raises (for any library): no code to print."""
    raise _scatter_refused("Array API")


scatterrows = scatteralong = _no_scatter


# --- the contract ----------------------------------------------------------------

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
    ScatterRows: code_no_scatter,
    ScatterAlong: code_no_scatter,
    "einsum": code_einsum,  # (plan of rearr.planning.einsum, operand names) -> lines
}


class ArrayApiBackend(Backend):
    """The Array API's hooks: the functions above, for any namespace."""

    name = name
    STEPS, CODE, INDEXES_OTHER = STEPS, CODE, INDEXES_OTHER
    accepts, stack, concat, einsum, to_numpy = map(staticmethod, (accepts, stack, concat, einsum, to_numpy))
    matmul, EINSUM_MATMUL = staticmethod(matmul), EINSUM_MATMUL
    convert_index, check_index = map(staticmethod, (convert_index, check_index))
    dtype_kind, dtype_range, itemsize = map(staticmethod, (dtype_kind, dtype_range, itemsize))

    def load(self) -> None:
        load()


BACKEND = ArrayApiBackend()
