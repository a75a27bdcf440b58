"""dask backend: each plan step as a lazy dask.array call; nothing is computed, nothing becomes numpy.

Chunks are handled on purpose (docs/backends.md says the same for users):
- reshape is dask's own: a merge keeps the chunks of the merge's first chunked axis and needs the
  axes inside it as one chunk each (unless the outer ones are already split into 1s); a split keeps
  the chunks where they fall on whole rows of the inner axes and moves the others to the nearest
  row. Axes outside the merge or split keep their chunks.
- permute and reduce never rechunk (a reduction is dask's tree reduction per chunk).
- a repeated (new) axis is one chunk when every later axis is one chunk, and chunks of 1 otherwise,
  so that the merge that usually follows ('(c h) w') moves whole blocks instead of rechunking h.
- a gather along an axis needs that whole axis in each block (an index may point anywhere on it):
  that axis becomes one chunk, the others keep theirs, and the index is chunked to match.

`DaskBackend` composes numpy's backend (``self.numpy``): its permute and reduce factories (and their
templates) serve dask, since they call array methods or numpy functions, which dask arrays implement
lazily (NEP 18), and so do its dtype questions. reduce wraps numpy's for dask's own float16 mean and
max/min of an array with no elements, and einsum casts back to numpy's result dtype.

The registry makes the backend when the first dask array arrives; its __init__ binds dask and numpy,
so that explain reads the templates (CODE) without either. Where the calls a step makes depend on the
input's chunks, which explain does not know, its template says so in a comment. What runs on the
blocks (the checks, the gather along an axis) is a module function: a distributed worker imports
this module fresh, and calls it without the backend.
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
    ScatterAlong,
    ScatterRows,
    TakeRows,
)
from . import _code, _common
from ._code import CodeNames, args, tup
from .contract import Backend
from .numpy import NumpyBackend, row_positions_code, term_code


def _scatter_refused(x: object, pattern: str | None) -> RearrError:
    return RearrError("dask arrays cannot be scattered by rearr: a scatter may write any block from any "
                      "other, and dask has no lazy at-style update", code="RA500", pattern=pattern,
                      hint="compute the source first (src.compute()) and scatter the numpy array (explain it "
                      "with backend='numpy'), or, when every index stays inside its block, scatter per block "
                      "with src.map_blocks")


# The refusal of both scatter kinds, by the step and by explain.
_no_scatter, _code_no_scatter = _common.no_scatter(_scatter_refused)


class DaskBackend(Backend):
    """dask's hooks: lazy steps, and numpy's backend for what dask arrays do as numpy does. No native
    index checks and no cached indexed path (the contract's defaults): an index may be a lazy dask array."""

    name = "dask"
    INDEXES_OTHER = True  # numpy's take_along_axis and indexing run on each block
    EINSUM_MATMUL = False  # da.einsum, as numpy's einsum on each block

    def __init__(self) -> None:
        super().__init__()
        import dask.array as da
        import numpy as np
        from dask.array.reshape import reshape_blockwise

        self.da, self.np, self._reshape_blockwise = da, np, reshape_blockwise
        self.numpy = NumpyBackend()
        self.TENSOR = da.Array

    # --- arrays and dtypes ----------------------------------------------------------------------------

    def accepts(self, x: object) -> bool:
        return isinstance(x, self.da.Array)

    def to_numpy(self, x: Any) -> Any:
        """Computed (what the graph raises passes through as it is), then as numpy's asnumpy would: a
        masked result is refused as numpy's backend refuses a masked input, never unmasked silently."""
        np = self.np
        out = x.compute()
        if isinstance(out, np.ma.MaskedArray):
            raise _common.masked_input("a masked dask array")
        return self.numpy.to_numpy(out) if isinstance(out, np.ndarray) else np.asarray(out)  # cupy blocks ...

    def stack(self, xs: list) -> Any:
        return self.da.stack(list(xs))

    def concat(self, xs: list, axis: int) -> Any:
        return self.da.concatenate(list(xs), axis=axis)

    def einsum(self, spec: str, *xs: Any) -> Any:
        # dask adds the blocks' products with sum(), which makes small ints int64 and bools counts: back to
        # the dtype numpy's einsum keeps (modular and boolean arithmetic make the cast exact)
        out = self.da.einsum(spec, *xs)
        dtype = self.np.result_type(*xs)
        return out if out.dtype == dtype else out.astype(dtype)

    @staticmethod
    def code_einsum(plan, operands: tuple[str, ...]) -> list[str]:
        # astype of the dtype it has is the array itself: einsum above casts only where dask's sum promoted
        return _code.einsum_lines(plan, operands,
                                  lambda spec, ops: f"da.einsum({spec}, {ops}).astype(np.result_type({ops}))")

    def matmul(self, a: Any, b: Any) -> Any:
        return self.da.matmul(a, b)

    def dtype_kind(self, x: Any) -> str:
        return self.numpy.dtype_kind(x)

    def dtype_range(self, x: Any) -> tuple:
        return self.numpy.dtype_range(x)

    def itemsize(self, x: Any) -> int:
        return self.numpy.itemsize(x)

    # --- plain steps ------------------------------------------------------------------------------------

    def reshape(self, step: Reshape) -> Any:
        shape, reshape_blockwise = step.shape, self._reshape_blockwise

        def run(x, env):
            if x.shape == shape:
                return x
            if 0 in shape:  # dask refuses to merge a 0-length axis with chunked ones: one empty chunk, nothing moved
                return x.rechunk(-1).reshape(shape)
            if not _moves_whole_blocks(x.shape, x.chunks, shape):
                # dask's rule: a merge makes its inner axes one chunk, a split cuts on rows. dask refuses a
                # reshape that splits and merges one axis at once ((6, 4) -> (2, 12)): split first, then merge.
                refined = _common_refinement(x.shape, shape)
                if refined is not None and refined not in (tuple(x.shape), shape):
                    x = x.reshape(refined)
                return x.reshape(shape)
            # Each block is one block of the result: reshape block by block. Unit axes are dropped and put
            # back by dask's reshape, which does that without a rechunk.
            core = x.reshape(tuple(n for n in x.shape if n != 1))
            return reshape_blockwise(core, tuple(n for n in shape if n != 1)).reshape(shape)

        return run

    @staticmethod
    def code_reshape(step: Reshape, before, n: CodeNames) -> list[str]:
        x, old, shape = n.x, before.shape, step.shape
        if old == shape:
            return [f"# {x} already has shape {tup(shape)}: rearr returns it as it is"]
        lines = []
        if _moves_whole_blocks(old, tuple((m,) for m in old), shape):  # a merge: blockwise for some chunks
            core, new_core = tuple(m for m in old if m != 1), tuple(m for m in shape if m != 1)
            blockwise = f"reshape_blockwise({_code.view(x, old, core, 'reshape')}, {tup(new_core)})"
            lines += [f"# where each block of {x} is a run of the result (explain does not know {x}'s chunks), "
                      "rearr runs",
                      f"#   {x} = {_code.view(blockwise, new_core, shape, 'reshape')}",
                      "# instead (dask.array.reshape.reshape_blockwise: the same values, no rechunk); else:"]
        refined = _common_refinement(old, shape)
        if refined is not None and refined not in (old, shape):
            lines += ["# dask refuses to split and merge one axis at once: split first, then merge",
                      f"{x} = {x}.reshape({args(refined)})"]
        return lines + [f"{x} = {x}.reshape({args(shape)})"]

    def permute(self, step: Permute) -> Any:
        return self.numpy.permute(step)

    def expand(self, step: Expand) -> Any:
        shape, broadcast_to = step.shape, self.da.broadcast_to

        def run(x, env):
            chunks: list[tuple[int, ...]] = []
            split_after = False  # does some later axis have more than one chunk?
            for d in reversed(range(len(shape))):
                n = shape[d]
                if x.shape[d] == n:
                    c = x.chunks[d]
                else:
                    c = (1,) * n if split_after and n else (n,)
                chunks.append(c)
                split_after = split_after or len(c) > 1
            return broadcast_to(x, shape, chunks=tuple(reversed(chunks)))

        return run

    @staticmethod
    def code_expand(step: Expand, before, n: CodeNames) -> list[str]:
        first = next((d for d, (a, b) in enumerate(zip(before.shape, step.shape)) if a != b), len(step.shape))
        call = [f"{n.x} = da.broadcast_to({n.x}, {tup(step.shape)})"]
        if all(m <= 1 for m in before.shape[first + 1:]):  # no later axis that may have several chunks: dask's default
            return call
        return ["# rearr passes chunks=: the repeated axes in chunks of 1 where a later axis has several chunks",
                f"# (explain does not know {n.x}'s chunks; the values are the same)"] + call

    def reduce(self, step: Reduce) -> Any:
        """numpy's reduce factory, but where dask's own call differs from numpy's: the mean of float16,
        which dask adds in float16 (numpy in float32), and max/min of an array with no elements, which dask
        computes to a wrong shape ((2, 0, 3) -> (1, 1, 0) over no axis): such a result holds nothing, an
        empty array of the planned shape. (A 0-length reduced axis never reaches here: RA400.)"""
        run, axes, np, da = self.numpy.reduce(step), step.axes, self.np, self.da
        if step.reduction == "mean":
            def mean(x, env):
                if x.dtype == np.float16:
                    return x.mean(axis=axes, dtype=np.float32).astype(np.float16)
                return run(x, env)
            return mean
        if step.reduction not in ("max", "min"):
            return run

        def run_dask(x, env):
            if 0 in x.shape:
                return da.empty(tuple(n for k, n in enumerate(x.shape) if k not in axes), dtype=x.dtype)
            return run(x, env)

        return run_dask

    # --- indices ----------------------------------------------------------------------------------------

    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        """A dask index stays lazy (its dtype is known without computing); anything else becomes numpy."""
        np = self.np
        if isinstance(value, self.da.Array):
            if not np.issubdtype(value.dtype, np.integer):
                raise _common.bad_index_dtype(name, value.dtype, text)
            if value.dtype == np.intp:
                return value
            # the cast runs block by block where the values are known, refusing one that it would wrap
            return value.map_blocks(_intp_block, name, text, dtype=np.intp)
        return self.numpy.convert_index(value, like, name, text)

    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        """numpy indices are checked now; dask ones when their blocks are computed, with the same error
        (in every mode: the values are in host memory, read without a device sync)."""
        if not isinstance(t, self.da.Array):
            return self.numpy.check_index(t, use, text)
        return t.map_blocks(_check_block, use, text, dtype=t.dtype)

    def takerows(self, step: TakeRows) -> Any:
        rows = self.numpy.row_positions(step.terms, step.space)
        return lambda x, env: x[rows(env)]

    @staticmethod
    def code_takerows(step: TakeRows, before, n: CodeNames) -> list[str]:
        pre, flat = row_positions_code(step.terms, step.space, n)
        return pre + [f"{n.x} = {n.x}[{flat}]"]

    def advancedindex(self, step: AdvancedIndex) -> Any:
        """x[c0, c1, ...] as one take of rows of x viewed as (leading axes, the rest)."""
        lead, terms, space = _as_rows(step)
        positions = self.numpy.row_positions(terms, space)

        def run(x, env):
            rest = x.shape[len(lead):]
            rows = x.reshape((math.prod(lead), math.prod(rest)))
            return rows[positions(env)].reshape(space + rest)

        return run

    @staticmethod
    def code_advancedindex(step: AdvancedIndex, before, n: CodeNames) -> list[str]:
        lead, terms, space = _as_rows(step)
        rest = before.shape[len(lead):]
        pre, flat = row_positions_code(terms, space, n)
        return [f"{n.x} = {n.x}.reshape({math.prod(lead)}, {math.prod(rest)})"] + pre + \
            [f"{n.x} = {n.x}[{flat}].reshape({args(space + rest)})"]

    def gatheralong(self, step: GatherAlong) -> Any:
        dim, shape, da = step.dim, step.shape, self.da
        index = self.numpy.term(step.term)

        def run(x, env):
            x = x.rechunk({dim: -1})  # an index may point anywhere along dim: the whole axis in each block
            idx = da.broadcast_to(da.asarray(index(env)), shape).rechunk(
                x.chunks[:dim] + ((shape[dim],),) + x.chunks[dim + 1:])  # the index in x's blocks
            return da.map_blocks(_take_along_block, x, idx, dim, env.text, dtype=x.dtype, chunks=idx.chunks)

        return run

    @staticmethod
    def code_gatheralong(step: GatherAlong, before, n: CodeNames) -> list[str]:
        x, dim, shape = n.x, step.dim, step.shape
        return [f"{x} = {x}.rechunk({{{dim}: -1}})  # the whole axis {dim} in each block",
                f"{n.flat} = da.broadcast_to(da.asarray({term_code(step.term, n)}), {tup(shape)}).rechunk("
                f"{x}.chunks[:{dim}] + (({shape[dim]},),) + {x}.chunks[{dim + 1}:])",
                f"{x} = da.map_blocks(np.take_along_axis, {x}, {n.flat}, axis={dim}, dtype={x}.dtype, "
                f"chunks={n.flat}.chunks)"]

    # --- scatters: refused (a scatter may write any block from any other) --------------------------------

    def scatterrows(self, step: ScatterRows) -> Any:
        return _no_scatter(step)

    def scatteralong(self, step: ScatterAlong) -> Any:
        return _no_scatter(step)

    # Each step kind -> the code explain prints for it; numpy's permute and reduce print dask's calls too.
    CODE = {Reshape: code_reshape, Permute: NumpyBackend.code_permute, Reduce: NumpyBackend.code_reduce,
            Expand: code_expand, TakeRows: code_takerows, GatherAlong: code_gatheralong,
            AdvancedIndex: code_advancedindex, ScatterRows: _code_no_scatter, ScatterAlong: _code_no_scatter,
            "einsum": code_einsum}


# --- what the templates and the steps share ------------------------------------------------------------


def _common_refinement(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...] | None:
    """The coarsest shape that both ``old`` and ``new`` merge from (a pattern's reshapes always have one:
    its elementary axes), or None. (6, 4) and (2, 12) -> (2, 3, 4)."""
    if 0 in old or 0 in new:
        return None  # nothing to move: dask reshapes an empty array as it is
    old, new = [n for n in old if n != 1], [n for n in new if n != 1]
    out: list[int] = []
    i = j = 0
    a = old[0] if old else 1
    b = new[0] if new else 1
    while i < len(old) and j < len(new):
        if a == b:
            out.append(a)
            i, j = i + 1, j + 1
            a = old[i] if i < len(old) else 1
            b = new[j] if j < len(new) else 1
        elif a % b == 0:
            out.append(b)
            a //= b
            j += 1
            b = new[j] if j < len(new) else 1
        elif b % a == 0:
            out.append(a)
            b //= a
            i += 1
            a = old[i] if i < len(old) else 1
        else:
            return None
    return tuple(out)


def _moves_whole_blocks(shape: tuple[int, ...], chunks: tuple[tuple[int, ...], ...], new: tuple[int, ...]) -> bool:
    """Whether a reshape only merges axes whose blocks already follow each other in row-major order.

    In each merged group, the axes before the innermost split one are in chunks of 1 and the axes
    after it are one chunk each: then every block is a run of the result, in order. (dask's reshape
    asks chunks of 1 of every axis before the group too, and rechunks otherwise.)
    """
    if 0 in shape:
        return False
    axes = [(n, c) for n, c in zip(shape, chunks) if n != 1]
    out = [n for n in new if n != 1]
    if len(out) >= len(axes):
        return False
    i = 0
    for n in out:
        group, size = [], 1
        while size < n and i < len(axes):
            group.append(axes[i])
            size *= axes[i][0]
            i += 1
        if size != n or not group:
            return False  # a split, or a mix of both: dask's own reshape
        split = [k for k, (_, c) in enumerate(group) if len(c) > 1]
        if split and any(len(c) != m for m, c in group[:split[-1]]):
            return False
    return i == len(axes)


def _as_rows(step: AdvancedIndex) -> tuple[tuple[int, ...], tuple[IndexTerm, ...], tuple[int, ...]]:
    """The leading axes' lengths, the terms as row numbers of x viewed as (leading axes, the rest), the space."""
    lead = tuple(c.length for c in step.terms)
    terms = tuple(c.replace(stride=math.prod(lead[i + 1:])) for i, c in enumerate(step.terms))
    return lead, terms, tuple(max(c.shape[d] for c in terms) for d in range(len(terms[0].shape)))


# --- what runs on the blocks: on a distributed worker this module is imported fresh, and the numpy that
# these import is in sys.modules there (a dict look-up) ------------------------------------------------


def _start(block_info: Any, ndim: int) -> tuple[int, ...]:
    """Where the block begins in the whole array (dask's block_info), for the position an error names."""
    return tuple(lo for lo, _ in block_info[0]["array-location"]) if block_info else (0,) * ndim


def _intp_block(block: Any, name: str, text: str, block_info: Any = None) -> Any:
    import numpy as np

    bits = 8 * np.dtype(np.intp).itemsize
    if _common.wraps(block.dtype, bits):
        _common.refuse_beyond(name, text, block, bits, start=_start(block_info, block.ndim))
    return block.astype(np.intp)


def _check_block(block: Any, use: IndexUse, text: str, block_info: Any = None) -> Any:
    import numpy as np

    n = use.length
    _common.refuse_out_of_range(use, text, block, start=_start(block_info, block.ndim))
    return np.where(block < 0, block + n, block)


def _take_along_block(block: Any, idx: Any, dim: int, text: str) -> Any:
    """np.take_along_axis on a block; numpy's refusal of a value that check_bounds=False let through is
    RA501, as an eager call's (raised when the block is computed)."""
    import numpy as np

    try:
        return np.take_along_axis(block, idx, axis=dim)
    except IndexError as e:
        raise _common.refused_index("dask", e, text) from None


BACKEND = DaskBackend
