"""numpy backend: each plan step as one or two native numpy calls, and the code explain prints for it.

`NumpyBackend` binds numpy on its instance (``self.np``) when the registry makes it, once the first
array arrives: the module imports without numpy, and explain reads its templates (``CODE``) so. Each
template is written next to the factory whose calls it prints.
"""

from __future__ import annotations

import math
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
from .contract import Backend, IndexEnv, native_calls

_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}
# The dtype that sum and prod accumulate in where numpy's own choice differs from torch's: float16 in
# float32, rounded once at the end (torch's "opmath"; numpy's own mean does it too), and the unsigned
# ints below 64 bits in int64, as torch does (numpy would give uint64). By dtype.char.
_REDUCE_DTYPE = {"e": "float32", "B": "int64", "H": "int64", "I": "int64"}
# Up to this many source elements a 'sum' along an axis is np.add.at with one index array per axis:
# faster than flat positions while small, slower when large (benchmarks/README.md has the crossing),
# and numpy checks each value against its axis itself.
_SMALL_SCATTER = 256
UFUNC_AT = {"sum": "add", "mean": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}


class NumpyBackend(Backend):
    """numpy's hooks."""

    name = "numpy"
    INDEXES_OTHER = True  # take / fancy indexing move datetime64, object and string arrays too
    READY_INDEXES = True
    EINSUM_MATMUL = False  # np.einsum's own loops: its results stay what they were (the tests' oracle)
    RESULTS = Results(repeat_copies=True)  # as einops' np.tile: a repeat is a new, writable array

    def __init__(self) -> None:
        super().__init__()
        import numpy as np

        try:  # what np.einsum(optimize=False) calls, without its Python wrapper's cost per call
            from numpy._core.multiarray import c_einsum
        except ImportError:  # numpy < 2
            c_einsum = np.einsum
        self.np = np
        self._c_einsum = c_einsum
        self.TENSOR = np.ndarray
        self._intp = np.dtype(np.intp)

    # --- arrays and dtypes ----------------------------------------------------------------------------

    def accepts(self, x: object) -> bool:
        if _common.masked(x):
            raise _common.masked_input("a masked array")
        if isinstance(x, self.np.matrix):  # its reshape keeps two dimensions: (2, 3) -> "a b -> a b 1" stayed (2, 3)
            raise RearrError("an np.matrix is not accepted: it stays 2-d whatever shape a call asks for",
                             code="RA500", hint="pass np.asarray(m)")
        return isinstance(x, self.np.ndarray | self.np.generic)

    def stack(self, xs: list) -> Any:
        return self.np.stack(list(xs))

    def concat(self, xs: list, axis: int) -> Any:
        return self.np.concatenate(list(xs), axis=axis)

    def einsum(self, spec: str, *xs: Any) -> Any:
        return self._c_einsum(spec, *xs) if len(xs) <= 2 else self.np.einsum(spec, *xs, optimize=True)

    def matmul(self, a: Any, b: Any) -> Any:
        return self.np.matmul(a, b)

    def to_numpy(self, x: Any) -> Any:
        return self.np.asarray(x)

    def dtype_kind(self, x: Any) -> str:
        return _KINDS.get(x.dtype.kind, "other")

    def dtype_range(self, x: Any) -> tuple:
        np = self.np
        if x.dtype.kind == "b":
            return 0, 1
        info = np.finfo(x.dtype) if x.dtype.kind in "fc" else np.iinfo(x.dtype)
        return info.min.item() if hasattr(info.min, "item") else info.min, \
            info.max.item() if hasattr(info.max, "item") else info.max

    def itemsize(self, x: Any) -> int:
        return x.dtype.itemsize

    # --- plain steps: array methods, not np.reshape / np.transpose, which cost more per call -------------

    def reshape(self, step: Reshape) -> Any:
        shape = step.shape
        return lambda x, env: x.reshape(shape)

    @staticmethod
    def code_reshape(step: Reshape, before: Any, n: CodeNames) -> list[str]:
        return [f"{n.x} = {n.x}.reshape({args(step.shape)})"]

    def permute(self, step: Permute) -> Any:
        perm = step.perm
        return lambda x, env: x.transpose(perm)

    @staticmethod
    def code_permute(step: Permute, before: Any, n: CodeNames) -> list[str]:
        return [f"{n.x} = {n.x}.transpose({tup(step.perm)})"]

    def expand(self, step: Expand) -> Any:
        shape, broadcast_to = step.shape, self.np.broadcast_to
        if not step.view:  # RESULTS.repeat_copies
            return self._repeat(shape)

        def run(x, env):
            try:
                return broadcast_to(x, shape)
            except ValueError as e:  # numpy's iterator refuses views of more than about 2**62 elements
                raise RearrError(f"numpy cannot make a view of shape {shape}: {e}", code="RA305",
                                 hint="use smaller lengths, or torch, whose expand has no such limit") from None

        return run

    def _repeat(self, shape: tuple[int, ...]) -> Any:
        """The repeats written out, as einops' np.tile writes them: np.repeat along each repeated axis, a
        C-contiguous array (faster than copying the stride-0 view, element by element), or a copy in x's
        own order where nothing repeats. The last axis is repeated as np.tile does it, as the rows of a
        (-1, 1) view: np.repeat along a last axis is slower."""
        repeat, last = self.np.repeat, len(shape) - 1

        def run(x, env):
            out = x
            for axis, (m, n) in enumerate(zip(x.shape, shape)):
                if m != n and axis == last:
                    out = repeat(out.reshape(-1, 1), n, axis=0).reshape(shape)
                elif m != n:
                    out = repeat(out, n, axis=axis)
            return x.copy(order="K") if out is x else out

        return run

    @staticmethod
    def code_expand(step: Expand, before: Any, n: CodeNames) -> list[str]:
        if step.view:
            return [f"{n.x} = np.broadcast_to({n.x}, {tup(step.shape)})"]
        last = len(step.shape) - 1
        repeats = [f"{n.x} = np.repeat({n.x}.reshape(-1, 1), {k}, axis=0).reshape({args(step.shape)})" if axis == last
                   else f"{n.x} = np.repeat({n.x}, {k}, axis={axis})"
                   for axis, (m, k) in enumerate(zip(before.shape, step.shape)) if m != k]
        return repeats or [f"{n.x} = {n.x}.copy(order='K')"]

    def reduce(self, step: Reduce) -> Any:
        run, generic, asarray = self._reduction(step), self.np.generic, self.np.asarray
        if step.axes or callable(step.reduction):
            return run

        def nothing(x, env):  # numpy reduces a 0-d array over no axis to a scalar: keep an array (dask's stays)
            out = run(x, env)
            return asarray(out) if isinstance(out, generic) else out

        return nothing

    def _reduction(self, step: Reduce) -> Any:
        np, r, axes = self.np, step.reduction, step.axes
        if callable(r):
            return lambda x, env: r(x, axes)
        if r == "mean":  # integer means are refused before; numpy's mean adds float16 in float32 itself
            return lambda x, env: x.mean(axis=axes)
        if r in ("sum", "prod"):
            fn, half = (np.sum if r == "sum" else np.prod), np.float16

            def total(x, env):
                accumulate = _REDUCE_DTYPE.get(x.dtype.char)
                if accumulate is None:
                    return fn(x, axis=axes)
                out = fn(x, axis=axes, dtype=accumulate)
                return out.astype(half) if x.dtype.char == "e" else out
            return total
        fn = {"max": np.amax, "min": np.amin, "any": np.any, "all": np.all}[r]
        return lambda x, env: fn(x, axis=axes)

    @staticmethod
    def code_reduce(step: Reduce, before: Any, n: CodeNames) -> list[str]:
        x, r, axes = n.x, step.reduction, step.axes
        if callable(r):  # the callable that was passed, bound to this name
            return [f"{x} = {n.reduction}({x}, {tup(axes)})"]
        dims = str(axes[0]) if len(axes) == 1 else tup(axes)
        if r == "mean":  # float16 in float32: numpy's own mean does it, dask's (which prints this too) does not
            return [f"{x} = {x}.mean(axis={dims}, dtype=np.float32).astype(np.float16) if {x}.dtype.name == "
                    f"'float16' else {x}.mean(axis={dims})"]
        if r in ("sum", "prod"):  # reduce()'s _REDUCE_DTYPE, read from x (explain has no dtype)
            out = n.out
            return ["# as torch: float16 accumulates in float32 and is rounded once at the end, uint8/16/32 in int64",
                    f"{out} = np.{r}({x}, axis={dims}, dtype={{'float16': np.float32, 'uint8': np.int64, "
                    f"'uint16': np.int64, 'uint32': np.int64}}.get({x}.dtype.name))",
                    f"{x} = {out}.astype(np.float16) if {x}.dtype.name == 'float16' else {out}"]
        fn = {"max": "amax", "min": "amin"}.get(r, r)
        return [f"{x} = np.{fn}({x}, axis={dims})"]

    # --- indices ----------------------------------------------------------------------------------------

    def checks_step_natively(self, step: object) -> bool:
        """take_along_axis and x[idx] refuse a value outside -n <= i < n themselves (IndexError) and count
        negative ones from the end, and so does the small 'sum' along an axis (np.add.at on per-axis index
        arrays); not the row steps nor a large ScatterAlong: they index flat positions, where a bad value
        lands in the neighbouring row (see rearr.run.indexed.natively_checked)."""
        return isinstance(step, GatherAlong | AdvancedIndex) or _sums_by_axes(step)

    def checks_natively(self, t: Any) -> bool:
        return True

    def ready_index(self, t: object, like: Any) -> bool:
        """An intp array: convert_index returns it as it is, and the native calls check it (checks_natively)."""
        return t.__class__ is self.TENSOR and t.dtype is self._intp  # type: ignore[attr-defined]

    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        # mode (check_bounds=): every mode reads the values here, in host memory, where a read costs no sync
        if value.__class__ is self.TENSOR and value.dtype is self._intp:  # type: ignore[attr-defined]
            return value  # the common case, without a call (numpy's built-in dtypes are singletons)
        np = self.np
        if _common.masked(value):  # np.asarray would drop the mask
            raise _common.masked_index(name, text)
        try:
            t = np.asarray(value)
        except (TypeError, ValueError):  # ragged lists
            raise _common.not_an_index(name, value, text) from None
        if t.dtype.kind not in "iu":  # np.issubdtype(t.dtype, np.integer), without its microsecond
            raise _common.bad_index_dtype(name, t.dtype, text)
        bits = 8 * self._intp.itemsize
        if _common.wraps(t.dtype, bits):  # report the value passed, not the wrapped one
            _common.refuse_beyond(name, text, t, bits)
        return t.astype(np.intp, copy=False)

    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        """Bounds check, and negative values counted from the end (the exact check in every mode: see
        convert_index)."""
        if t.size == 0:
            return t
        np, n = self.np, use.length
        # One reduction in the common case: read as unsigned, the values 0 <= i < n stay below n and the
        # negative ones become huge, so a maximum below n puts the whole index in range.
        if t.dtype == np.intp and int(t.view(np.uintp).max()) < n:
            return t
        lo, hi = int(t.min()), int(t.max())
        if lo < -n or hi >= n:
            _common.refuse_out_of_range(use, text, t)
        return np.where(t < 0, t + n, t) if lo < 0 else t

    # term and row_positions: numpy's own helpers, which dask's backend calls too.

    def term(self, c: IndexTerm) -> Any:
        """env -> the term's array: the index (or arange) viewed as c.shape, times the stride.
        Made once per plan: the layout is decided here, and an arange is made here once."""
        perm, shape, stride = *_common.term_layout(c), c.stride
        if c.index is None:
            const = self.np.arange(c.length).reshape(shape) * stride
            const.flags.writeable = False  # shared by every call
            return lambda env: const
        name = c.index
        if _common.index_as_passed(c):
            return lambda env: env.indices[name]

        def term(env: IndexEnv) -> Any:
            t = env.indices[name]
            if perm is not None:
                t = t.transpose(perm)
            if t.shape != shape:
                t = t.reshape(shape)
            return t * stride if stride != 1 else t

        return term

    def row_positions(self, terms: tuple[IndexTerm, ...], space: tuple[int, ...]) -> Any:
        """env -> the row that each point of the index space moves: the sum of the terms, as a 1-d array."""
        first, *rest = [self.term(c) for c in terms]
        broadcast_to = self.np.broadcast_to

        def rows(env: IndexEnv) -> Any:
            total = first(env)
            for f in rest:
                total = total + f(env)
            if total.shape != space:  # the terms span the index space between them, so this is rare
                total = broadcast_to(total, space)
            return total.reshape(-1)

        return rows

    # --- gathers ----------------------------------------------------------------------------------------

    def takerows(self, step: TakeRows) -> Any:
        rows, take = self.row_positions(step.terms, step.space), self.np.take
        return lambda x, env: take(x, rows(env), axis=0)

    @staticmethod
    def code_takerows(step: TakeRows, before: Any, n: CodeNames) -> list[str]:
        pre, flat = row_positions_code(step.terms, step.space, n)
        return pre + [f"{n.x} = np.take({n.x}, {flat}, axis=0)"]

    def gatheralong(self, step: GatherAlong) -> Any:
        dim, shape = step.dim, step.shape
        # np.take_along_axis(x, broadcast_to(index, shape), dim) is x[grid..., index, grid...]: the same
        # advanced indexing, with the grid made once here instead of on every call.
        grid, index = self._grid(shape), self.term(step.term)
        before, after = tuple(grid[:dim]), tuple(grid[dim + 1:])
        return lambda x, env: x[before + (index(env),) + after]

    @staticmethod
    def code_gatheralong(step: GatherAlong, before: Any, n: CodeNames) -> list[str]:
        grid = _grid_code(step.shape, step.dim)
        parts = grid[:step.dim] + [term_code(step.term, n)] + grid[step.dim:]
        return [f"{n.x} = {n.x}[{', '.join(parts)}]"]

    def _grid(self, shape: tuple[int, ...]) -> list[Any]:
        """arange(n) for each axis of shape, viewed to broadcast along that axis only."""
        arange = self.np.arange
        return [arange(n).reshape([n if k == d else 1 for k in range(len(shape))]) for d, n in enumerate(shape)]

    def advancedindex(self, step: AdvancedIndex) -> Any:
        terms = [self.term(c) for c in step.terms]
        return lambda x, env: x[tuple(c(env) for c in terms)]

    @staticmethod
    def code_advancedindex(step: AdvancedIndex, before: Any, n: CodeNames) -> list[str]:
        return [f"{n.x} = {n.x}[{', '.join(term_code(t, n) for t in step.terms)}]"]

    # --- scatters: one ufunc.at over element positions, around rearr.backends._xp.combine ---------------

    @_common.read_once
    def xp(self) -> Any:
        """The generic array code that the scatters share with dask (_xp), imported on the first scatter."""
        from . import _xp

        return _xp

    def scatterrows(self, step: ScatterRows) -> Any:
        reduction, rows, terms = step.reduction, step.rows, step.terms
        into_calls = native_calls(step.into, self)
        names = ",".join(c.index for c in terms if c.index)
        row_positions = self.row_positions(terms, step.space)

        def run(x, env):
            flat = row_positions(env)
            return self._combine_rows(reduction, x, flat, rows, _common.arranged_into(env, into_calls), env, names)

        return run

    @staticmethod
    def code_scatterrows(step: ScatterRows, before: Any, n: CodeNames) -> list[str]:
        pre, flat = row_positions_code(step.terms, step.space, n)
        return pre + _combine_rows_code(step.reduction, flat, step.rows, before.shape[1], n)

    def _combine_rows(self, reduction: str, x: Any, flat: Any, rows: int, base: Any, env: IndexEnv,
                      names: str) -> Any:
        """Combine the rows of x (n, width) into rows ``flat`` of a (rows, width) result."""
        np, width = self.np, x.shape[1]
        if reduction == "set" and flat.size > 1:
            s = np.sort(flat)
            if np.flatnonzero(s[1:] == s[:-1]).size:
                raise _common.duplicate_under_set(names, env.text)

        def put(out, reduction, values):
            if reduction == "set":
                out[flat] = values
            else:
                put_rows(np, reduction, out, flat, values)
            return out

        # (a copy in C order: into= is never modified, and out.reshape(-1) above must be a view of it)
        return self.xp.combine(np, reduction, x, base, env.fill, (rows, width), accumulator(np, x.dtype), put,
                           lambda: self._counts(flat, rows)[:, None], lambda b, dtype: b.astype(dtype, order="C"))

    def _counts(self, flat: Any, rows: int) -> Any:
        """How many of the flat rows land on each of ``rows`` rows. Under check_bounds=False a row may be
        out of range (ufunc.at before this refuses it, unless its element position wrapped around int64):
        bincount's refusal (negative), failed allocation (huge) or longer result is that index's fault."""
        try:
            counts = self.np.bincount(flat, minlength=rows)
        except (ValueError, MemoryError):
            counts = None
        if counts is None or counts.shape[0] != rows:
            raise IndexError(f"a row index is out of range for {rows} rows")
        return counts

    def scatteralong(self, step: ScatterAlong) -> Any:
        if _sums_by_axes(step):
            return self._sum_by_axes(step)
        np, reduction, dim, term, shape, src_shape = self.np, step.reduction, step.dim, step.term, step.shape, \
            step.src_shape
        into_calls = native_calls(step.into, self)
        # numpy has no scatter along an axis with a reduction: flat positions and ufunc.at. The
        # positions along the other axes do not depend on the index, so they are computed once here.
        strides, axes = _along_offsets(shape, dim)
        offset = sum((np.arange(m) * stride).reshape(unit) for m, stride, unit in axes)
        size = math.prod(shape)
        index = self.term(term.replace(stride=strides[dim]))

        def run(x, env):
            flat = offset + index(env)
            if flat.shape != src_shape:  # only without other axes (offset 0) or with a broadcast index
                flat = np.broadcast_to(flat, src_shape)
            flat = flat.reshape(-1)
            base = _common.arranged_into(env, into_calls)
            base = None if base is None else base.reshape(-1, 1)
            out = self._combine_rows(reduction, x.reshape(-1, 1), flat, size, base, env, term.index or "")
            return out.reshape(shape)

        return run

    def _sum_by_axes(self, step: ScatterAlong) -> Any:
        """A small 'sum' along an axis: np.add.at(out, (aranges..., index, aranges...), x)."""
        np, dim, shape, src_shape = self.np, step.dim, step.shape, step.src_shape
        into_calls = native_calls(step.into, self)
        before, after = self._axis_grid(shape, dim)
        index, expand = self.term(step.term), step.term.shape != src_shape
        zeros, add_at = np.zeros, np.add.at

        def run(x, env):
            idx = index(env)
            at = (*before, np.broadcast_to(idx, src_shape) if expand else idx, *after)
            if env.into is None and env.fill == 0 and x.dtype.char != "e":  # the common call, as written by hand
                out = zeros(shape, dtype=x.dtype)
                add_at(out, at, x)
                return out
            acc = accumulator(np, x.dtype)
            base = _common.arranged_into(env, into_calls)
            out = zeros(shape, dtype=acc) if base is None else base.astype(acc)  # a copy: into= stays as it is
            add_at(out, at, x)
            if acc != x.dtype:
                out = out.astype(x.dtype)  # rounded once, at the end
            if base is None and env.fill != 0:  # the positions that nothing writes hold fill
                hit = zeros(shape, dtype=bool)
                hit[at] = True
                out[~hit] = env.fill
            return out

        return run

    def _axis_grid(self, shape: tuple[int, ...], dim: int) -> tuple[list[Any], list[Any]]:
        """The positions along each axis of shape but dim, as open-grid aranges: those before dim, those after."""
        grid = []
        for d, m in enumerate(shape):
            if d != dim:  # (dim's length may be huge: the dtype check, which bounds it, runs after this)
                g = self.np.arange(m).reshape([m if k == d else 1 for k in range(len(shape))])
                g.flags.writeable = False  # shared by every call
                grid.append(g)
        return grid[:dim], grid[dim:]

    @staticmethod
    def code_scatteralong(step: ScatterAlong, before: Any, n: CodeNames) -> list[str]:
        x, shape = n.x, step.shape
        if _sums_by_axes(step):
            idx = term_code(step.term, n)
            if step.term.shape != step.src_shape:
                idx = f"np.broadcast_to({idx}, {tup(step.src_shape)})"
            grid = [idx if d == step.dim else _code.view(f"np.arange({m})", (m,), tuple(m if k == d else 1 for k in
                    range(len(shape))), "reshape") for d, m in enumerate(shape)]
            return [*_accumulator_code(f"np.zeros({tup(shape)}, ", x, n.out),
                    f"np.add.at({n.out}, ({', '.join(grid)}{',' if len(grid) == 1 else ''}), {x})",
                    _rounded_code(x, n.out), f"{x} = {n.out}"]
        strides, axes = _along_offsets(shape, step.dim)
        offset = " + ".join(_code.view(f"np.arange({m})", (m,), tuple(unit), "reshape") + (f" * {s}" if s != 1 else "")
                            for m, s, unit in axes)
        idx = term_code(step.term, n)
        idx = f"{_code.paren(idx)} * {strides[step.dim]}" if strides[step.dim] != 1 else idx
        size = math.prod(shape)
        lines = [f"{n.offset} = {offset}  # once per plan: the flat positions along the other axes"] if axes else []
        total = f"{n.offset} + {idx}" if axes else idx
        # As the backend: broadcast only where offset + index does not span the source's shape already.
        spans = tuple(max(a, b) for a, b in zip(step.term.shape, [1 if d == step.dim else m for d, m in
                                                                  enumerate(shape)] if axes else [1] * len(shape))
                      ) == tuple(step.src_shape)
        total = f"({total})" if spans else f"np.broadcast_to({total}, {tup(step.src_shape)})"
        lines += [f"{n.flat} = {total}.reshape(-1)", f"{x} = {x}.reshape(-1, 1)"]
        combine = _combine_rows_code(step.reduction, n.flat, size, 1, n)[:-1]  # the result stays in n.out
        return lines + combine + [f"{x} = {n.out}.reshape({args(shape)})"]

    @staticmethod
    def code_einsum(plan: Any, operands: tuple[str, ...]) -> list[str]:
        optimize = ", optimize=True" if len(operands) > 2 else ""  # as einsum above: c_einsum is optimize=False
        return _code.einsum_lines(plan, operands, lambda spec, ops: f"np.einsum({spec}, {ops}{optimize})")

    # Each step kind -> the code explain prints for it (the templates above, beside their factories).
    CODE = {Reshape: code_reshape, Permute: code_permute, Reduce: code_reduce, Expand: code_expand,
            TakeRows: code_takerows, GatherAlong: code_gatheralong, AdvancedIndex: code_advancedindex,
            ScatterRows: code_scatterrows, ScatterAlong: code_scatteralong, "einsum": code_einsum}


# --- the at-style update of a scatter: numpy's, and dask's on each block (where load() never ran, so
# the caller passes numpy) -----------------------------------------------------------------------------

def accumulator(np: Any, dtype: Any) -> Any:
    """The dtype a scatter accumulates in: float32 for float16, as torch does on CPU (its "opmath"
    type), so that 3000 ones sum to 3000 and not to float16's 2048 on every backend."""
    return np.dtype(np.float32) if dtype.char == "e" else dtype  # "e": float16, in either byte order


# Elements per ufunc.at call: made at once, the int64 element positions of a float32 source are twice
# its size; in runs of this many they stay at 8 MiB, and ufunc.at runs as fast (benchmarks/README.md).
_BATCH = 1 << 20


def put_rows(np: Any, reduction: str, out: Any, flat: Any, values: Any) -> None:
    """The rows of values (n, width) combined by reduction's ufunc into rows ``flat`` (n,) of out
    (rows, width, C order), in place: one 1-D ufunc.at over element positions (faster than on
    rows), in runs of about _BATCH elements. NaN propagates under max and min, as in torch."""
    ufunc, width, n = getattr(np, UFUNC_AT[reduction]), values.shape[1], flat.shape[0]
    target = out.reshape(-1)
    step = max(1, _BATCH // width) if width else n
    if reduction in ("max", "min"):
        with np.errstate(invalid="ignore"):  # numpy's 1-D loop would warn of the NaN
            _put_runs(np, ufunc, target, flat, values, width, n, step)
    else:
        _put_runs(np, ufunc, target, flat, values, width, n, step)


def _put_runs(np: Any, ufunc: Any, target: Any, flat: Any, values: Any, width: int, n: int, step: int) -> None:
    if n <= step:  # the common call: one ufunc.at
        ufunc.at(target, flat if width == 1 else (flat[:, None] * width + np.arange(width)).reshape(-1),
                 values.reshape(-1))
        return
    grid = np.arange(width)
    for s in range(0, n, step):
        rows = flat[s:s + step]
        ufunc.at(target, rows if width == 1 else (rows[:, None] * width + grid).reshape(-1),
                 values[s:s + step].reshape(-1))


# --- what the templates share (explain prints them without numpy) ---------------------------------------


def term_code(t: IndexTerm, n: CodeNames) -> str:
    if t.index is None:
        expr, have = f"np.arange({t.length})", (t.length,)
    else:
        expr, have = _code.index_expr(t, n, lambda e, perm: f"{_code.paren(e)}.transpose({tup(perm)})")
    expr = _code.view(expr, have, t.shape, "reshape")
    return f"{expr} * {t.stride}" if t.stride != 1 else expr


def row_positions_code(terms: tuple[IndexTerm, ...], space: tuple[int, ...], n: CodeNames) -> tuple[list[str], str]:
    return _code.row_positions(terms, space, n, term_code, lambda e, space: f"np.broadcast_to({e}, {tup(space)})")


def _grid_code(shape: tuple[int, ...], dim: int) -> list[str]:
    return [_code.view(f"np.arange({m})", (m,), tuple(m if k == d else 1 for k in range(len(shape))), "reshape")
            for d, m in enumerate(shape) if d != dim]


def _combine_rows_code(reduction: str, flat: str, rows: int, width: int, n: CodeNames) -> list[str]:
    """_combine_rows with fill 0 and no into=, as lines that leave the result in ``n.x``.

    explain has no dtype, so the start value and the accumulator are printed as expressions of x's."""
    x, out, counts = n.x, n.out, n.counts
    if reduction == "set":
        return ["# rearr first checks that flat holds no row twice ('set')",
                f"{out} = np.zeros(({rows}, {width}), dtype={x}.dtype)", f"{out}[{flat}] = {x}", f"{x} = {out}"]
    if reduction in ("max", "min"):  # _xp.identity: the dtype's own extreme (float16 in float32 gives the same values)
        extreme = {"max": "lowest: -inf, iinfo(dtype).min, False", "min": "highest: inf, iinfo(dtype).max, True"}
        lines = [f"{out} = np.full(({rows}, {width}), np.ma.{reduction}imum_fill_value({x}), dtype={x}.dtype)"
                 f"  # the dtype's {extreme[reduction]}"]
    else:
        lines = _accumulator_code(f"np.{'ones' if reduction == 'prod' else 'zeros'}(({rows}, {width}), ", x, out)
    pos = flat
    if width != 1:  # element positions of the rows: numpy's 1-d ufunc.at is the fast one
        pos = n.pos
        lines.append(f"{pos} = ({flat}[:, None] * {width} + np.arange({width})).reshape(-1)")
    lines.append(f"np.{UFUNC_AT[reduction]}.at({out}.reshape(-1), {pos}, {x}.reshape(-1))")
    if reduction not in ("max", "min"):
        lines.append(_rounded_code(x, out))
    if reduction != "sum":
        lines.append(f"{counts} = np.bincount({flat}, minlength={rows})")
    if reduction == "mean":
        lines.append(f"{out} /= np.maximum({counts}, 1)[:, None].astype({x}.dtype)")
    elif reduction != "sum":
        lines.append(f"{out}[{counts} == 0] = 0")
    return lines + [f"{x} = {out}"]


def _accumulator_code(call: str, x: str, out: str) -> list[str]:
    """``out = call dtype=...)`` in _accumulator's dtype for x (``.name``: float16 in either byte order)."""
    return ["# float16 accumulates in float32 and is rounded once at the end, as torch does",
            f"{out} = {call}dtype=np.float32 if {x}.dtype.name == 'float16' else {x}.dtype)"]


def _rounded_code(x: str, out: str) -> str:
    return f"{out} = {out}.astype({x}.dtype, copy=False)"


def _along_offsets(shape: tuple[int, ...], dim: int) -> tuple[list[int], list[tuple[int, int, list[int]]]]:
    """The row-major strides of ``shape``, and (length, stride, view shape) of each axis but ``dim``."""
    strides = [int(math.prod(shape[d + 1:])) for d in range(len(shape))]
    axes = [(n, strides[d], [n if k == d else 1 for k in range(len(shape))]) for d, n in enumerate(shape) if d != dim]
    return strides, axes


def _sums_by_axes(step: object) -> bool:
    """Whether scatteralong lowers step to np.add.at on one index array per axis (a small 'sum')."""
    return isinstance(step, ScatterAlong) and step.reduction == "sum" and math.prod(step.src_shape) <= _SMALL_SCATTER


BACKEND = NumpyBackend
