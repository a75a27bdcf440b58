"""torch's DTensor (torch.distributed.tensor: tensor parallel, FSDP2's parameters): the torch backend's
steps on sharded tensors, and the index checks decided alike on every rank.

The registry keys on type(x), and a DTensor is a type of its own: `DTensorBackend`, a TorchBackend, is
the backend of DTensors only, so a plain tensor's call never passes through this module. What differs:

- The inputs: an index of a DTensor is a DTensor on the same mesh (refused, naming the index and the
  fix, before any collective); inside torch's ``implicit_replication()`` a plain index is taken as
  Replicate, as torch's ops take it.
- The checks: each index's least and greatest local value, all of a call's indexes in one small
  vector, reduced by MAX with one all-reduce over the mesh dims where some index is sharded (none
  where every index is Replicate). Every rank reads the same numbers and takes the same branch: a bad
  value is the same RA501 on every rank, with the first bad value of the whole index in row-major order
  and its position (found with one more all-gather of two numbers, on that path only). Under
  torch.compile the decision is the op rearr::dtensor_range, run on the reduced numbers at run time;
  under "async" (and True on CUDA) it is a device-side assertion of them.
- The writes: never in place into a fresh tensor. new_zeros of a DTensor is Replicate, and DTensor's
  in-place path relabels it when the op's strategy picks Shard without narrowing its local tensor
  (a DTensor whose local size is the global one).
- The scatters: 'set', 'sum' and 'mean' (as sums over counts) are torch's ops, whose sharding
  strategies place the result as the hand-written call would be placed; 'max', 'min' and 'prod'
  (scatter_reduce has no strategy) and a float16 / bfloat16 mean run the torch backend's own
  lowering on the local shards, in the placements that torch's scatter_add (along an axis) and
  index_reduce (rows) strategies pick.
- The aranges of index terms are Replicate DTensors (a plain arange cannot meet a DTensor index).

This module imports no framework: the backend binds torch and torch.distributed when it is made.
"""

from __future__ import annotations

from typing import Any

from ..errors import RearrError
from ..planning.plan import IndexTerm, IndexUse, ScatterAlong, ScatterRows
from . import _common
from .contract import IndexEnv, native_calls
from .torch import TorchBackend

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class DTensorBackend(TorchBackend):
    """torch's hooks, on DTensors."""

    # Every DTensor call takes the careful path: its checks are collective, and the cached path of
    # READY_INDEXES backends would check index by index.
    READY_INDEXES = False

    def __init__(self) -> None:
        super().__init__()
        import threading

        import torch.distributed as dist
        from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

        self.dist, self.DTensor, self.Partial, self.Replicate, self.Shard = dist, DTensor, Partial, Replicate, Shard
        self.TENSOR = DTensor
        self.plain = TorchBackend()  # the local shards' lowering
        self._decisions: tuple | None = None  # the two ops, defined by the first traced call
        self._defining = threading.Lock()
        self._groups: dict[str, Any] = {}  # process group name -> group, for the ops' error path

    def accepts(self, x: object) -> bool:
        return isinstance(x, self.DTensor)

    def to_numpy(self, x: Any) -> Any:
        """The whole tensor (full_tensor: a collective, which every rank calls) as numpy."""
        return self.plain.to_numpy(x.full_tensor())

    # --- the call's tensors -------------------------------------------------------------------------

    def ready_index(self, t: object, like: Any) -> bool:
        return False

    def checks_step_natively(self, step: object) -> bool:
        return False  # a native refusal happens on the ranks that hold the bad value only

    def checks_natively(self, t: Any) -> bool:
        return False

    def check_into(self, into: Any, x: Any) -> None:
        super().check_into(into, x)
        if into.device_mesh != x.device_mesh:
            raise RearrError(f"into= lives on {into.device_mesh}, the source on {x.device_mesh}", code="RA500",
                             hint="put both on one mesh: into=distribute_tensor(into.full_tensor(), "
                             "x.device_mesh, x.placements)")

    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        DTensor = self.DTensor
        if not isinstance(value, DTensor):
            if not DTensor._op_dispatcher._allow_implicit_replication:  # torch's implicit_replication()
                raise plain_index(name, value, text)
            t = self.plain.convert_index(value, like.to_local(), name, text, mode)
            return DTensor.from_local(t, like.device_mesh, self._replicate(like), run_check=False)
        if value.device_mesh != like.device_mesh:
            raise RearrError(f"index {name!r} lives on {value.device_mesh}, the input on {like.device_mesh}",
                             code="RA501", pattern=text, hint=f"put both on one mesh: {name}=distribute_tensor("
                             f"{name}.full_tensor(), x.device_mesh, [Replicate()] * x.device_mesh.ndim)")
        dtype = value.dtype
        if dtype is self._int64:
            return value
        if dtype not in self._int_dtypes:
            raise _common.bad_index_dtype(name, dtype, text)
        if dtype == self.torch.uint64:  # which .long() would wrap to negative values, counted from the end
            raise RearrError(f"index {name!r} is a uint64 DTensor, whose values of 2**63 or more int64 cannot "
                             "hold", code="RA501", pattern=text,
                             hint=f"convert it: {name}={name}.to(torch.int64), once its values are below 2**63")
        return value.long()

    def _replicate(self, x: Any) -> list:
        return [self.Replicate()] * x.device_mesh.ndim

    # --- the bounds check: one all-reduce for all of a call's indexes ---------------------------------

    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        return self.check_indexes([(t, use)], text, mode)[0]

    def check_indexes(self, items: list[tuple[Any, IndexUse]], text: str, mode: bool | str = True) -> list:
        """Every index of the call checked on every rank alike, negative values counted from the end."""
        torch, ops = self.torch, self.ops
        items = [(self._reduced(t), use) for t, use in items]
        traced = ops.traced(items[0][0].to_local())
        if traced:  # the error path's offsets are ints: a _StridedShard has none (see _offsets)
            items = [(self._unstrided(t), use) for t, use in items]
        mesh = items[0][0].device_mesh
        dims = self._sharded([t for t, _ in items])
        shards = [t.to_local() for t, _ in items]
        flags = self._max_over(torch.cat([self._extremes(s) for s in shards]), mesh, dims)
        if traced:
            decide = self._ops()[0]
            groups = self._group_names(mesh, dims)
            return [self._traced_range(decide, flags[2 * k:2 * k + 2], t, s, use, text, groups)
                    for k, ((t, use), s) in enumerate(zip(items, shards))]
        if ops.on_device(flags, mode):
            ops.can_assert(flags)
            return [self._asserted(flags[2 * k:2 * k + 2], t, use, text) for k, (t, use) in enumerate(items)]
        values = flags.tolist()  # the one host read: the same numbers on every rank
        out = []
        for k, ((t, use), s) in enumerate(zip(items, shards)):
            lo, hi, n = ~values[2 * k], values[2 * k + 1], use.length
            if lo < -n or hi >= n:
                value, position = self._first_bad(t, s, n, [mesh.get_group(d) for d in dims])
                raise _common.out_of_range(use, text, value, position)
            out.append(t.remainder(n) if lo < 0 else t)  # pointwise: the placement is kept, no collective
        return out

    def _reduced(self, t: Any) -> Any:
        """A Partial index holds its values nowhere until it is reduced (torch's ops reduce it too)."""
        if any(p.is_partial() for p in t.placements):
            return t.redistribute(t.device_mesh, [self.Replicate() if p.is_partial() else p for p in t.placements])
        return t

    def _unstrided(self, t: Any) -> Any:
        if all(p.is_replicate() or isinstance(p, self.Shard) for p in t.placements):
            return t
        return t.redistribute(t.device_mesh, self._replicate(t))

    def _sharded(self, ts: list) -> list[int]:
        """The mesh dims (of more than one rank) over which some of ts is not Replicate."""
        mesh = ts[0].device_mesh
        return sorted({d for t in ts for d, p in enumerate(t.placements) if not p.is_replicate() and mesh.size(d) > 1})

    def _extremes(self, local: Any) -> Any:
        """[~min, max] of a local shard in int64 (~lo rather than -lo: -(-2**63) overflows); an empty
        shard gives MAX's neutral element."""
        torch = self.torch
        if local.numel():
            lo, hi = torch.aminmax(local)
            return torch.stack((lo.bitwise_not(), hi))
        return torch.full((2,), _I64_MIN, dtype=torch.int64, device=local.device)

    def _max_over(self, flags: Any, mesh: Any, dims: list[int]) -> Any:
        """flags reduced by MAX over the mesh dims ``dims`` (one all-reduce per mesh dim; none when there is
        none), as DTensor's redistribution of Partial("max"): c10d in eager code, a functional collective
        under torch.compile."""
        if not dims:
            return flags
        partial = [self.Partial("max") if d in dims else self.Replicate() for d in range(mesh.ndim)]
        return self.DTensor.from_local(flags, mesh, partial, run_check=False).redistribute(
            mesh, [self.Replicate()] * mesh.ndim).to_local()

    def _asserted(self, flags: Any, t: Any, use: IndexUse, text: str) -> Any:
        """check_bounds="async" (and True on CUDA): the reduced numbers asserted on the device, on every rank
        alike (~lo < n is lo >= -n); negative values wrapped by remainder. No host read."""
        n = use.length
        self.torch._assert_async((flags[0] < n) & (flags[1] < n), self.ops.range_message(n, use.name, use.axis, text))
        return t.remainder(n) if n else t.clone()

    def _traced_range(self, decide: Any, flags: Any, t: Any, local: Any, use: IndexUse, text: str,
                      groups: list[str]) -> Any:
        """Under torch.compile: the op that decides at run time, on the local shard and the reduced numbers."""
        col = -1 if use.col is None else use.col
        out = decide(flags, local, use.length, use.name, use.axis, col, text, groups, list(self._offsets(t)),
                     list(t.shape))
        return self.DTensor.from_local(out, t.device_mesh, t.placements, run_check=False, shape=t.shape,
                                       stride=t.stride())

    def _range(self, flags: Any, local: Any, n: int, name: str, axis: str, col: int, text: str,
               groups: list[str], offset: list[int], shape: list[int]) -> Any:
        """rearr::dtensor_range's kernel: the decision on the reduced numbers, then a new tensor with the
        negative values counted from the end."""
        lo, hi = flags.tolist()
        if ~lo < -n or hi >= n:
            use = IndexUse(name, axis, n, (), tuple(shape), None if col < 0 else col)
            value, position = self._first(local, n, tuple(offset), tuple(shape), [self._groups[g] for g in groups])
            raise _common.out_of_range(use, text, value, position)
        return local.remainder(n) if n else local.clone()

    def _first_bad(self, t: Any, local: Any, n: int, groups: list) -> tuple[int, tuple[int, ...]]:
        if all(p.is_replicate() or isinstance(p, self.Shard) for p in t.placements):
            return self._first(local, n, self._offsets(t), tuple(t.shape), groups)
        # a _StridedShard (a reshaped sharded index) has no single offset: look in the whole index
        return self._first(t.full_tensor(), n, (0,) * t.ndim, tuple(t.shape), [])

    def _first(self, local: Any, n: int, offset: tuple, shape: tuple, groups: list) -> tuple[int, tuple[int, ...]]:
        """The first bad value of the whole index in row-major order, and its position: each rank's first
        (in global coordinates), then the least position over the groups of the sharded mesh dims (one
        all-gather of two int64 per group). Every rank returns the same."""
        import numpy as np  # only on a bad index

        torch, dist = self.torch, self.dist
        values = local.numpy(force=True)
        found = _common.first(values, (values < -n) | (values >= n))
        pos, value = _I64_MAX, 0
        if found is not None:
            value, pos = found[0], int(np.ravel_multi_index(tuple(a + o for a, o in zip(found[1], offset)), shape))
        mine = torch.tensor([pos, value], dtype=torch.int64, device=local.device)
        for group in groups:
            everyone = torch.empty(2 * dist.get_world_size(group), dtype=torch.int64, device=local.device)
            dist.all_gather_single(everyone, mine, group=group)
            pairs = everyone.view(-1, 2)
            mine = pairs[pairs[:, 0].argmin()]
        pos, value = mine.tolist()
        return value, tuple(int(p) for p in np.unravel_index(pos, shape))

    def _offsets(self, t: Any) -> tuple[int, ...]:
        """Where t's local shard starts in the whole index, in ints (torch's compute_local_shape_and_global_offset
        reads tensors, which torch.compile cannot): Shard placements nest in mesh-dim order, with
        torch.chunk's sizes."""
        size, offset = list(t.shape), [0] * t.ndim
        mesh = t.device_mesh
        coordinate = mesh.get_coordinate()
        for i, p in enumerate(t.placements):
            if isinstance(p, self.Shard):
                d = p.dim % t.ndim
                size[d], start = self.Shard.local_shard_size_and_offset(size[d], mesh.size(i), coordinate[i])
                offset[d] += start
        return tuple(offset)

    def _group_names(self, mesh: Any, dims: list[int]) -> list[str]:
        """The process groups of the sharded mesh dims by name (an op's argument), kept for its kernel."""
        names = []
        for d in dims:
            group = mesh.get_group(d)
            self._groups[group.group_name] = group
            names.append(group.group_name)
        return names

    # --- the duplicate check of 'set' --------------------------------------------------------------

    def _unique(self, idx: Any, dim: int, name: str, text: str, mode: bool | str) -> Any:
        """No two equal values of idx along dim, decided alike on every rank. An index sharded along dim is
        gathered there first (torch's scatter and index_copy keep dim whole, and would gather it too);
        each rank checks its whole lines; one all-reduce of one number over the mesh dims still sharded."""
        torch, ops = self.torch, self.ops
        idx = self._reduced(idx)
        mesh, ndim = idx.device_mesh, idx.ndim
        along = [i for i, p in enumerate(idx.placements) if not p.is_replicate() and p.dim % ndim == dim]
        if along:
            idx = idx.redistribute(mesh, [self.Replicate() if i in along else p for i, p in enumerate(idx.placements)])
        local = idx.to_local()
        length = local.shape[dim]
        if length > 1:
            s = local.sort(dim).values
            twice = (s.narrow(dim, 1, length - 1) == s.narrow(dim, 0, length - 1)).any()
        else:
            twice = torch.zeros((), dtype=torch.bool, device=local.device)
        flag = self._max_over(twice.to(torch.int64).reshape(1), mesh, self._sharded([idx]))
        if ops.traced(flag):
            out = self._ops()[1](flag, local, name, text)
            return self.DTensor.from_local(out, mesh, idx.placements, run_check=False, shape=idx.shape,
                                           stride=idx.stride())
        if ops.on_device(flag, mode):
            ops.can_assert(flag)
            torch._assert_async(flag[0] == 0, ops.unique_message(name, text))
        elif flag.item():
            raise _common.duplicate_under_set(name, text)
        return idx

    def _unique_kernel(self, flag: Any, idx: Any, name: str, text: str) -> Any:
        """rearr::dtensor_unique's kernel: the decision on the reduced flag, then a copy of idx."""
        if flag.item():
            raise _common.duplicate_under_set(name, text)
        return idx.clone()

    def _ops(self) -> tuple:
        """The two decisions as ops that a tracer records (defined by the first traced call, after the torch
        backend's own ops, whose namespace they join)."""
        if self._decisions is None:
            with self._defining:
                if self._decisions is None:
                    torch = self.torch
                    self.ops._define()
                    lib = torch.library.Library("rearr", "FRAGMENT")
                    lib.define("dtensor_range(Tensor flags, Tensor idx, SymInt n, str name, str axis, int col, "
                               "str text, str[] groups, SymInt[] offset, SymInt[] shape) -> Tensor")
                    lib.define("dtensor_unique(Tensor flag, Tensor idx, str name, str text) -> Tensor")
                    lib.impl("dtensor_range", self._range, "CompositeExplicitAutograd")
                    lib.impl("dtensor_unique", self._unique_kernel, "CompositeExplicitAutograd")
                    torch.library.register_fake("rearr::dtensor_range", _like_second, lib=lib)
                    torch.library.register_fake("rearr::dtensor_unique", _like_second, lib=lib)
                    self._library = lib  # the registrations live as long as the Library object
                    self._decisions = (torch.ops.rearr.dtensor_range.default, torch.ops.rearr.dtensor_unique.default)
        return self._decisions

    # --- the steps that differ ------------------------------------------------------------------------

    def term(self, c: IndexTerm, expand: tuple[int, ...] | None = None) -> Any:
        """The torch backend's term, its arange a Replicate DTensor on x's mesh."""
        if c.index is not None:
            return super().term(c, expand)
        torch, DTensor, n, stride, shape = self.torch, self.DTensor, c.length, c.stride, c.shape

        def arange(env, x):
            local = torch.arange(0, n * stride, stride, device=x.device)
            return DTensor.from_local(local, x.device_mesh, self._replicate(x), run_check=False).view(shape)

        if expand is not None:
            return lambda env, x: arange(env, x).expand(*expand)
        return arange

    def scatterrows(self, step: ScatterRows) -> Any:
        return self._scatter(step, self.scatters.Rows(self, step), True)

    def scatteralong(self, step: ScatterAlong) -> Any:
        return self._scatter(step, self.scatters.Along(self, step), False)

    def _scatter(self, step: ScatterRows | ScatterAlong, g: Any, rows: bool) -> Any:
        """The scatter tree on DTensors, every write out of place."""
        torch, autograd, write = self.torch, self.autograd, self.ops.out_of_place
        reduction = step.reduction
        into_calls = native_calls(step.into, self)
        half = (torch.float16, torch.bfloat16)

        def run(x, env: IndexEnv):
            if reduction == "prod":
                autograd.refuse_forward_mode_prod(env.text, x, env.into)
            idx = g.index(env, x)
            base = _common.arranged_into(env, into_calls)
            fill = env.fill
            if reduction == "set":
                idx = self._unique(idx, g.dim, g.names, env.text, env.checks)
                return g.copy(write, base if base is not None else x.new_full(g.shape(x), fill), idx, x)
            # a float16 / bfloat16 mean keeps scatter_reduce's rounding (once), on the shards, as without shards
            if reduction == "sum" or reduction == "mean" and x.dtype not in half:
                sums = g.add(write, x, idx, base)
                if reduction == "mean":
                    return _divide(sums, g.count(write, x, idx, base), None if base is not None else fill)
                if base is None and fill != 0:
                    return sums.masked_fill(~self._hit(g, x, idx, rows), fill)
                return sums
            return self._on_shards(step, x, idx, base, env, rows)

        return run

    def _hit(self, g: Any, x: Any, idx: Any, rows: bool) -> Any:
        """Where something lands, against the result (a mask made from x: a plain one cannot meet idx)."""
        bool_ = self.torch.bool
        if rows:
            return x.new_zeros(g.rows, dtype=bool_).index_fill(0, idx, True)[:, None]
        return x.new_zeros(g.shape(x), dtype=bool_).scatter(g.dim, idx, True)

    def _on_shards(self, step: ScatterRows | ScatterAlong, x: Any, idx: Any, base: Any, env: IndexEnv,
                   rows: bool) -> Any:
        """The torch backend's scatter of the local shards, in the placements of torch's strategies (rows:
        index_reduce's, the width sharded or not and the index whole; along an axis: scatter_add's),
        wrapped as one DTensor. to_local and from_local carry the gradient."""
        mesh = x.device_mesh
        placements = self._rows_placements(x) if rows else self._along_placements(x, idx, step.dim, step.shape)
        xl = x.redistribute(mesh, placements).to_local()
        il = idx.redistribute(mesh, self._replicate(x) if rows else placements).to_local()
        bl = None if base is None else base.redistribute(mesh, placements).to_local()
        if rows:
            n = il.shape[0]
            local = ScatterRows(step.reduction, step.rows, (IndexTerm("i", step.rows, (0,), (n,), 1, (n,)),), (n,))
            shape = (step.rows, x.shape[1])
            run = self.plain.scatterrows(local)
        else:
            sizes = tuple(xl.shape)
            split = {p.dim for p in placements if isinstance(p, self.Shard)}
            out = tuple(sizes[d] if d in split else s for d, s in enumerate(step.shape))
            term = IndexTerm("i", step.shape[step.dim], tuple(range(len(sizes))), sizes, 1, sizes)
            shape = step.shape
            run = self.plain.scatteralong(ScatterAlong(step.reduction, step.dim, term, out, sizes))
        result = run(xl, IndexEnv(env.text, {"i": il}, env.fill, bl, env.checks))
        return self.DTensor.from_local(result, mesh, placements, run_check=False, shape=self.torch.Size(shape),
                                       stride=_contiguous(shape))

    def _rows_placements(self, x: Any) -> list:
        Shard, Replicate = self.Shard, self.Replicate
        return [Shard(1) if isinstance(p, Shard) and p.dim % 2 == 1 else Replicate() for p in x.placements]

    def _along_placements(self, x: Any, idx: Any, dim: int, shape: tuple) -> list:
        """Per mesh dim, as torch's scatter_add strategy: Shard(d) for a d other than dim where x and the
        result agree in length (x's own first, then the index's), else Replicate."""
        Shard, out = self.Shard, []
        for own in zip(x.placements, idx.placements):
            pick = self.Replicate()
            for p in own:
                if isinstance(p, Shard) and p.dim % x.ndim != dim and x.shape[p.dim % x.ndim] == shape[p.dim % x.ndim]:
                    pick = Shard(p.dim % x.ndim)
                    break
            out.append(pick)
        return out


def _divide(sums: Any, counts: Any, fill: object) -> Any:
    """_torch_scatter's division of the sums by the counts, out of place (see the module's docstring)."""
    if fill is None:
        return sums / counts
    empty = counts == 0
    out = sums / counts.masked_fill(empty, 1)
    return out.masked_fill(empty, fill) if fill != 0 else out


def _like_second(first: Any, idx: Any, *args: object) -> Any:  # the ops' fake kernels: idx's shape and dtype
    return idx.new_empty(idx.shape)


def _contiguous(shape: tuple) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def plain_index(name: str, value: object, text: str) -> RearrError:
    return RearrError(f"index {name!r} is a {type(value).__name__} and the input a DTensor: torch's ops take "
                      "the indexes of a DTensor as DTensors on its mesh", code="RA501", pattern=text,
                      hint=f"pass {name}=DTensor.from_local(torch.as_tensor({name}, device=x.device), x.device_mesh, "
                      "[Replicate()] * x.device_mesh.ndim) (the same values on every rank), or distribute_tensor("
                      f"{name}, x.device_mesh, placements) (rank 0's values)")


BACKEND = DTensorBackend
