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

import functools
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
from . import _code, _common, _xp
from ._code import CodeNames, args, tup
from .contract import Backend, native_calls
from .numpy import UFUNC_AT, NumpyBackend, accumulator, put_rows, row_positions_code, term_code


def _scatter_note(x: str) -> list[str]:
    """The lines explain's dask scatter begins with: the one call stands for a graph of many tasks."""
    return ["# dask has no at-style update: scatter_along builds a lazy graph of partial scatters, one for each",
            f"# block of {x} and output chunk it writes, combined over the blocks by a tree reduction",
            "from rearr.backends.dask import scatter_along"]


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

    # --- scatters: partial scatters per block, combined by a tree reduction (scatter_along, below) ---------

    def scatterrows(self, step: ScatterRows) -> Any:
        reduction, rows = step.reduction, step.rows
        positions = self.numpy.row_positions(step.terms, step.space)  # lazy where a term is a dask index
        into_calls = native_calls(step.into, self)  # dask's own reshapes bring into= to (rows, width)
        names = ",".join(c.index for c in step.terms if c.index)

        def run(x, env):
            into = _common.arranged_into(env, into_calls)
            return scatter_along(x, positions(env)[:, None], 0, rows, reduction, env.fill, into, names=names,
                                 text=env.text)

        return run

    @staticmethod
    def code_scatterrows(step: ScatterRows, before, n: CodeNames) -> list[str]:
        pre, flat = row_positions_code(step.terms, step.space, n)
        return [*_scatter_note(n.x), *pre,
                f"{n.x} = scatter_along({n.x}, {flat}[:, None], 0, {step.rows}, {step.reduction!r})"]

    def scatteralong(self, step: ScatterAlong) -> Any:
        reduction, dim, length = step.reduction, step.dim, step.shape[step.dim]
        index = self.numpy.term(step.term)
        into_calls = native_calls(step.into, self)
        names = step.term.index or ""

        def run(x, env):
            into = _common.arranged_into(env, into_calls)
            return scatter_along(x, index(env), dim, length, reduction, env.fill, into, names=names, text=env.text)

        return run

    @staticmethod
    def code_scatteralong(step: ScatterAlong, before, n: CodeNames) -> list[str]:
        return [*_scatter_note(n.x), f"{n.x} = scatter_along({n.x}, {term_code(step.term, n)}, {step.dim}, "
                f"{step.shape[step.dim]}, {step.reduction!r})"]

    # Each step kind -> the code explain prints for it; numpy's permute and reduce print dask's calls too.
    CODE = {Reshape: code_reshape, Permute: NumpyBackend.code_permute, Reduce: NumpyBackend.code_reduce,
            Expand: code_expand, TakeRows: code_takerows, GatherAlong: code_gatheralong,
            AdvancedIndex: code_advancedindex, ScatterRows: code_scatterrows, ScatterAlong: code_scatteralong,
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


# --- scatter: the graph (built where the call is made) ---------------------------------------------------


def scatter_along(x: Any, idx: Any, dim: int, n: int, reduction: str, fill: object = 0, into: Any = None, *,
                  names: str = "index", text: str = "", split_every: int | None = None) -> Any:
    """x (a dask array) combined by ``reduction`` along axis ``dim`` into a dask array of length n there:
    ``out[..., i, ...]`` combines the ``x[..., k, ...]`` whose ``idx[..., k, ...]`` is i. Nothing is computed.

    ``reduction``: 'sum', 'mean', 'max', 'min', 'prod' or 'set'. ``idx``: a numpy or dask integer array of x's
    shape, or of length 1 on the axes it is the same along; its values lie in 0 <= i < n (rearr checks
    and counts them from the end before), and a value outside is RA501 when the result is computed.
    ``fill``: the value of positions that nothing writes, without ``into``, the array (of x's dtype and
    the result's shape) that the result starts from. ``names`` and ``text`` name the index and the
    pattern in errors. ``split_every``: the tree's fan-in (dask's default otherwise, 4).

    The graph: for each block k of x along dim and each chunk r of the result along dim, a task scatters
    the values of block k that land in chunk r into a partial of chunk r (numpy's scatter, unrounded,
    with counts or "written" marks where the result needs them); da.reduction combines the partials of
    chunk r over k in a tree and finishes them as numpy's scatter does (float16 accumulated in float32
    and rounded once, the mean divided, fill and into= where nothing landed). The result's chunks are
    into='s, or dask's "auto" chunks along dim (array.chunk-size) and x's on the other axes. Under
    'set', a numpy index that writes a position twice is RA501 now, a dask index when computed.
    """
    import dask.array as da
    import numpy as np
    from dask.array.core import normalize_chunks

    nd, lazy = x.ndim, isinstance(idx, da.Array)
    idx = idx if lazy else np.asarray(idx)
    if idx.ndim < nd:
        idx = idx.reshape((1,) * (nd - idx.ndim) + idx.shape)
    reductions = (*UFUNC_AT, "set")
    if idx.ndim != nd or any(i not in (1, m) for i, m in zip(idx.shape, x.shape)) or reduction not in reductions:
        raise RearrError(f"scatter_along takes an index of x's shape {x.shape} (or 1 where it is the same) and one "
                         f"of {', '.join(reductions)}; it got {idx.shape} and {reduction!r}", code="RA500",
                         hint="broadcast the index to x's shape (or reshape it to 1 on the axes it is the same along)")
    if idx.shape[dim] != x.shape[dim]:  # the same position for every k: one index per block of x along dim
        idx = (da if lazy else np).broadcast_to(idx, idx.shape[:dim] + (x.shape[dim],) + idx.shape[dim + 1:])
    if reduction == "set" and not lazy:
        _refuse_duplicates(np, idx, dim, names, text)
    acc = x.dtype if reduction == "set" else accumulator(np, x.dtype)
    if into is not None:
        into = da.asarray(into)
        chunks = into.chunks[dim]
    else:  # dask's "auto" rule along dim; objects, which it cannot size, count as pointers
        spec = tuple("auto" if d == dim else c for d, c in enumerate(x.chunks))
        chunks = normalize_chunks(spec, shape=x.shape[:dim] + (n,) + x.shape[dim + 1:],
                                  dtype=np.dtype(np.intp) if acc.hasobject else acc)[dim]
    # the index in x's blocks (one chunk of 1 where it is broadcast: blockwise repeats it)
    blocks = tuple(c if idx.shape[d] == x.shape[d] else (1,) for d, c in enumerate(x.chunks))
    idx = idx.rechunk(blocks) if lazy else da.from_array(idx, chunks=blocks)
    starts = np.cumsum((0, *chunks[:-1]))
    spans = da.from_array(np.stack([starts, np.asarray(chunks)], axis=1).reshape(-1), chunks=2)  # r: (start, length)
    labels = tuple(range(nd))
    marks = "count" if reduction == "mean" else \
        "written" if reduction == "set" or _xp.fills(reduction, fill, into is not None) else None
    # P[k, ..., r, ...]: the partial of x's block k along dim for the result's chunk r (label nd)
    parts = da.blockwise(_scatter_block, (dim, *(nd if d == dim else d for d in labels)), x, labels, idx, labels,
                         spans, (nd,), adjust_chunks={dim: 1, nd: chunks},
                         align_arrays=False,  # aligned above (dask would warn that the pairs multiply chunks)
                         token="scatter-partial", meta=np.empty((0,) * (nd + 1), dtype=acc),  # never called on it
                         dim=dim, reduction=reduction, marks=marks, n=n, names=names, text=text)
    if into is not None:  # into= in front: the tree hands it to finish, which starts from it
        into = into.rechunk(tuple(chunks if d == dim else c for d, c in enumerate(x.chunks)))
        first = into.map_blocks(_into_part, dim, new_axis=0, meta=np.empty((0,) * (nd + 1), dtype=acc))
        parts = da.concatenate([first, parts], axis=0)
    combine = functools.partial(_combine_task, reduction=reduction, names=names, text=text)
    finish = functools.partial(_finish_task, reduction=reduction, out_dtype=x.dtype, acc=acc, fill=fill, dim=dim,
                               names=names, text=text)
    return da.reduction(parts, _same, finish, combine=combine, axis=0, keepdims=False, concatenate=False,
                        split_every=split_every, name=f"scatter-{reduction}", dtype=x.dtype,
                        meta=np.empty((0,) * nd, dtype=x.dtype))


def _refuse_duplicates(np: Any, idx: Any, dim: int, names: str, text: str) -> None:
    """RA501 now for a numpy index that writes a position twice under 'set', as on numpy. Its own
    elements say it: those along an axis it is broadcast over write other positions."""
    t = np.moveaxis(idx, dim, 0)
    t = t.reshape(t.shape[0], -1)
    width = t.shape[1]
    at = np.sort((t if width == 1 else t * width + np.arange(width)).reshape(-1))
    if at.size > 1 and (at[1:] == at[:-1]).any():
        raise _common.duplicate_under_set(names, text)


# --- scatter: what runs on the blocks. A partial is a dict: "shape" (rows, width) and "rest" (the other
# axes) of its output chunk; "v", the combined values (absent where the block writes nothing there);
# "n", the marks (counts for a mean, a bool "written" where fill, into= or 'set' needs them, (rows, 1)
# for whole rows: never a broadcast view, which pickles at full size); "into", into='s block. -------------


def _scatter_block(xb: Any, ib: Any, span: Any, *, dim: int, reduction: str, marks: str | None, n: int,
                   names: str, text: str) -> dict:
    """The values of x's block xb (and its index block ib) that land in the output chunk span = (start,
    length), as that chunk's partial."""
    import numpy as np

    # The accumulator from the block's own dtype, not one passed in the graph: ufunc.at takes its fast
    # loop only where the values' and the target's dtypes are one object, and a dtype that a worker
    # unpickles is a copy (numpy's slow loop; benchmarks/README.md has the figure).
    acc = xb.dtype if reduction == "set" else accumulator(np, xb.dtype)
    lo, rows = int(span[0]), int(span[1])
    xb, ib = np.moveaxis(xb, dim, 0), np.moveaxis(ib, dim, 0)
    b, rest = xb.shape[0], xb.shape[1:]
    width = math.prod(rest)
    part: dict = {"shape": (rows, width), "rest": rest}
    rowwise = all(m == 1 for m in ib.shape[1:])  # one index per row: whole rows move
    at = ib.reshape(b) if rowwise else np.broadcast_to(ib, xb.shape).reshape(b, width)
    above, below = at >= lo, at < lo + rows
    # a value in no chunk (check_bounds=False let it through) is refused where it would be dropped
    if (lo == 0 and not above.all()) or (lo + rows == n and not below.all()):
        raise _common.refused_index("dask", IndexError(f"index {names!r} holds a value outside 0 <= i < {n}"), text)
    keep = above & below
    if not keep.any():
        return part
    whole = bool(keep.all())
    if rowwise:
        values, at = xb.reshape(b, width), at - lo
        if not whole:
            values, at = values[keep], at[keep]
        part.update(_partial(np, reduction, values, at, rows, acc, marks, names, text))
        return part
    at = (at - lo) * width + np.arange(width)  # element positions in the chunk (rows, width), width 1
    values = xb.reshape(b * width, 1)
    at = at.reshape(-1) if whole else at[keep]
    if not whole:
        values = values[keep.reshape(-1)]
    found = _partial(np, reduction, values, at, rows * width, acc, marks, names, text)
    part["v"] = found["v"].reshape(rows, width)
    part["n"] = None if found["n"] is None else found["n"].reshape(rows, width)
    return part


def _partial(np: Any, reduction: str, values: Any, at: Any, rows: int, acc: Any, marks: str | None, names: str,
             text: str) -> dict:
    """values (m, width) combined into rows ``at`` (m,) of a (rows, width) partial: numpy's scatter from
    the reduction's identity in the accumulator dtype, not rounded, and its marks."""
    v = _xp.start(np, reduction, acc, None, 0, (rows, values.shape[1]), acc)
    counts = None if marks is None else np.bincount(at, minlength=rows)
    if reduction == "set":
        if at.size and counts.max() > 1:  # two writes of one position inside this block
            raise _common.duplicate_under_set(names, text)
        v[at] = values
    else:
        put_rows(np, reduction, v, at, values if values.dtype == acc else values.astype(acc))
    if counts is not None:
        counts = counts[:, None] if marks == "count" else (counts > 0)[:, None]
    return {"v": v, "n": counts}


def _into_part(block: Any, dim: int) -> dict:
    """A block of into= as a partial that carries it to finish (in the (rows, width) layout)."""
    import numpy as np

    b = np.moveaxis(block, dim, 0)
    return {"shape": (b.shape[0], math.prod(b.shape[1:])), "rest": b.shape[1:], "into": b.reshape(b.shape[0], -1)}


def _same(part: dict, axis: Any = None, keepdims: Any = None) -> dict:
    return part  # da.reduction's first step, per partial: the partials are made already


def _combine_task(parts: Any, axis: Any = None, keepdims: Any = None, *, reduction: str, names: str,
                  text: str) -> dict:
    import numpy as np

    return _combine(np, reduction, parts if isinstance(parts, list) else [parts], names, text)


def _combine(np: Any, reduction: str, parts: list, names: str, text: str) -> dict:
    """Partials of one output chunk as one, in new arrays (dask may hand one partial to several tasks)."""
    out = {"shape": parts[0]["shape"], "rest": parts[0]["rest"]}
    into = next((p["into"] for p in parts if "into" in p), None)
    if into is not None:
        out["into"] = into
    written = [p for p in parts if "v" in p]
    if not written:
        return out
    v, n = written[0]["v"], written[0]["n"]
    if reduction == "set" and len(written) > 1:
        v, n = v.copy(), n.copy()
        for p in written[1:]:
            if (n & p["n"]).any():  # two blocks write one position
                raise _common.duplicate_under_set(names, text)
            np.copyto(v, p["v"], where=p["n"])
            n |= p["n"]
    elif len(written) > 1:
        ufunc = getattr(np, UFUNC_AT[reduction])
        with np.errstate(invalid="ignore"):  # NaN propagates under max and min
            v = ufunc(v, written[1]["v"])
            for p in written[2:]:
                ufunc(v, p["v"], out=v)
        if n is not None:  # counts add; "written" marks (bool) add as "or"
            n = n + written[1]["n"]
            for p in written[2:]:
                n += p["n"]
    out["v"], out["n"] = v, n
    return out


def _finish_task(parts: Any, axis: Any = None, keepdims: Any = None, *, reduction: str, out_dtype: Any, acc: Any,
                 fill: object, dim: int, names: str, text: str) -> Any:
    """The tree's root for one output chunk: the partials combined, finished as numpy's scatter
    (_xp.finish), back in the block's own layout. (out_dtype: da.reduction passes its own to a dtype=.)"""
    import numpy as np

    part = _combine(np, reduction, parts if isinstance(parts, list) else [parts], names, text)
    (rows, width), into, v, n = part["shape"], part.get("into"), part.get("v"), part.get("n")
    if reduction == "set" or v is None:  # fill, or a copy of into=, with what was written
        out = _xp.start(np, "set", out_dtype, into, fill, (rows, width), out_dtype)
        if v is not None:
            np.copyto(out, v, where=n)
    else:
        if into is not None:  # into= starts the reduction (torch's include_self=True)
            with np.errstate(invalid="ignore"):
                v = getattr(np, UFUNC_AT[reduction])(into.astype(acc), v)
        out = _xp.finish(np, reduction, v, out_dtype, n, into is not None, fill)
    return np.moveaxis(out.reshape((rows, *part["rest"])), 0, dim)
