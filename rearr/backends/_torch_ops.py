"""rearr under torch.compile and torch.jit.trace (imported only once torch is).

Two pieces, chosen so that the eager hot path is untouched:

- The public functions are registered with ``torch._dynamo.allow_in_graph``:
  dynamo writes each call into its graph as one node instead of tracing
  rearr's Python (lark, caches, the planner). The node runs rearr's own code
  with fake tensors to learn the output's shape (symbolic under dynamic
  shapes: the planner computes with torch.SymInt, uncached), and AOT autograd
  (``aot_eager``, inductor) runs it again to record the native calls. With the
  ``eager`` backend the node is the eager call itself.
- The data checks (bounds, duplicates under 'set') need the index values,
  which a tracer does not have. When the index is traced (a fake, functional
  or jit-traced tensor) they run as custom ops, ``rearr::check_index`` and
  ``rearr::check_unique``: opaque to the compiler, recorded in the graph, run
  at run time on the real values, raising rearr's RearrError. Eager calls check
  in plain Python, as before, without the cost of the op dispatcher.
"""

from __future__ import annotations

import threading

import torch

from ..plan import IndexUse
from . import _common


def traced(t: torch.Tensor) -> bool:
    """Whether t is seen by a tracer (dynamo's fakes, AOT's functional tensors, torch.jit.trace)."""
    return type(t) is not torch.Tensor or torch._C._get_tracing_state() is not None




def _check_index(idx: torch.Tensor, n: int, name: str, axis: str, col: int, text: str) -> torch.Tensor:
    """The bounds check of an index into an axis of length n; negative values count from the end."""
    if idx.numel() and idx.device.type != "meta":
        lo, hi = (v.item() for v in torch.aminmax(idx))
        if lo < -n or hi >= n:
            bad = ((idx < -n) | (idx >= n)).nonzero()[0]
            use = IndexUse(name, axis, n, (), tuple(idx.shape), None if col < 0 else col)  # type: ignore[arg-type]
            raise _common.out_of_range(use, text, int(idx[tuple(bad)]), tuple(bad.tolist()))
    # Negative values counted from the end, in one native call; a new tensor, as an op may not return
    # its input. (n == 0 here means an empty index: there is nothing to wrap, and no modulo by 0.)
    return idx.remainder(n) if n else idx.clone()


def refuse_duplicates(idx: torch.Tensor, dim: int, name: str, text: str) -> None:
    """The duplicate check of 'set', on real values: no two values of idx along dim are equal. The torch
    backend runs it eagerly, and the op rearr::check_unique at run time of a traced graph."""
    if idx.shape[dim] > 1 and idx.device.type != "meta":
        twice = _counted_twice(idx) if idx.dim() == 1 else None
        if twice is not None:
            if twice:
                raise _common.duplicate_under_set(name, text)
            return
        s = idx.sort(dim).values
        if (s.narrow(dim, 1, s.shape[dim] - 1) == s.narrow(dim, 0, s.shape[dim] - 1)).any():
            raise _common.duplicate_under_set(name, text)


def _counted_twice(idx: torch.Tensor) -> bool | None:
    """Whether a 1-d index holds a value twice, by counting (one pass, where a sort costs n log n);
    None where its values are not all in 0 <= i < 2n, which counting would have to allocate for
    (check_bounds=False lets any value through): the memory of the sort, at most."""
    lo, hi = (v.item() for v in torch.aminmax(idx))
    if lo < 0 or hi >= 2 * idx.shape[0]:
        return None
    return bool(torch.bincount(idx, minlength=hi + 1).max() > 1)


def _check_unique(idx: torch.Tensor, dim: int, name: str, text: str) -> torch.Tensor:
    """rearr::check_unique's kernel: the check, then a copy of idx (an op may not return its input)."""
    refuse_duplicates(idx, dim, name, text)
    return idx.clone()


def _like(idx: torch.Tensor, *args: object) -> torch.Tensor:  # the fake kernels: same shape and dtype
    return torch.empty_like(idx)


def check_index(idx: torch.Tensor, n: int, name: str, axis: str, col: int, text: str) -> torch.Tensor:
    """rearr::check_index, the op a tracer records."""
    return _define()[0](idx, n, name, axis, col, text)


def check_unique(idx: torch.Tensor, dim: int, name: str, text: str) -> torch.Tensor:
    """rearr::check_unique, the op a tracer records."""
    return _define()[1](idx, dim, name, text)


# torch.func.vmap: check the whole batch at once, the vmapped axis moved to the front (a bounds check
# is elementwise; the duplicate check looks along its dim, which moves one place right).
def _check_index_vmap(info, in_dims, idx, n, name, axis, col, text):
    if in_dims[0] is None:
        return check_index(idx, n, name, axis, col, text), None
    return check_index(idx.movedim(in_dims[0], 0), n, name, axis, col, text), 0  # a position: batch first


def _check_unique_vmap(info, in_dims, idx, dim, name, text):
    if in_dims[0] is None:
        return check_unique(idx, dim, name, text), None
    return check_unique(idx.movedim(in_dims[0], 0), dim + 1, name, text), 0


_OPS: tuple = ()
_LIB = None
_DEFINING = threading.Lock()


def _define() -> tuple:
    """The two ops, defined on the first traced call: registering them (register_fake reads this file's
    source) costs milliseconds that an eager program's first call should not pay."""
    global _OPS, _LIB
    if _OPS:
        return _OPS
    with _DEFINING:
        if not _OPS:
            # torch.library.Library rather than torch.library.custom_op: the same op for the compiler, but
            # a call costs a plain dispatch instead of custom_op's Python wrappers (about 8x less per call).
            lib = torch.library.Library("rearr", "DEF")
            lib.define("check_index(Tensor idx, SymInt n, str name, str axis, int col, str text) -> Tensor")
            lib.define("check_unique(Tensor idx, int dim, str name, str text) -> Tensor")
            lib.impl("check_index", _check_index, "CompositeExplicitAutograd")
            lib.impl("check_unique", _check_unique, "CompositeExplicitAutograd")
            torch.library.register_fake("rearr::check_index", _like, lib=lib)
            torch.library.register_fake("rearr::check_unique", _like, lib=lib)
            torch.library.register_vmap("rearr::check_index", _check_index_vmap, lib=lib)
            torch.library.register_vmap("rearr::check_unique", _check_unique_vmap, lib=lib)
            _LIB = lib  # the registrations live as long as the Library object
            _OPS = (torch.ops.rearr.check_index.default, torch.ops.rearr.check_unique.default)
    return _OPS


def allow_in_graph() -> None:
    """Register rearr's public functions with dynamo (torch._dynamo is imported: torch.compile is in use)."""
    import torch._dynamo
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    _define()  # the check ops exist before dynamo traces their first call

    from .. import api
    from . import _BY_TYPE, _load

    for fn in (api.rearrange, api.reduce, api.repeat, api.scatter, api.einsum, api.pack, api.unpack):
        torch._dynamo.allow_in_graph(fn)
    # torch's tensor types, the tracers' included, known up front: dynamo then reads the type registry
    # (parse_shape is traced) without importing the backend mid-trace, and it does not change mid-compile.
    backend = _load("rearr.backends.torch")  # imported, bound to torch (load()) and checked
    for cls in (torch.Tensor, torch.nn.Parameter, FakeTensor, FunctionalTensor):
        _BY_TYPE.setdefault(cls, backend)

