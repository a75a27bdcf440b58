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

The exact checks read the index's values on the host: on an accelerator each
is a sync that stalls the stream (and breaks CUDA graph capture). The
device-side checks (``check_bounds="async"``, and the default on CUDA) read
nothing back: the range and the duplicates become ``torch._assert_async``
assertions, and negative values are wrapped by arithmetic. A failed assertion
names the index, the axis and the pattern, but not the value; on CUDA it is
reported at a later sync and leaves the context unusable, on the CPU it raises
RuntimeError at once. Under torch.compile they are plain ops of the graph,
which inductor fuses; under torch.func.vmap, whose batching has no rule for
``_assert_async``, and torch.jit.trace, whose tracer drops it (it has no
output), they run as the ops above with ``exact=False``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch._C._functorch import is_functorch_wrapped_tensor as _functorch_wrapped

from ..errors import RearrError
from ..planning.plan import IndexUse
from . import _common

_TENSOR = torch.Tensor
_tracing_state = torch._C._get_tracing_state  # not None inside torch.jit.trace


def jit_tracing() -> bool:
    """Whether torch.jit.trace is recording: its tracer sees every op, and keeps no Python function."""
    return _tracing_state() is not None


def traced(t: torch.Tensor) -> bool:
    """Whether t is seen by a tracer (dynamo's fakes, AOT's functional tensors, torch.jit.trace): then
    its values are not there to read, and a check of them is an op of the graph."""
    return t.__class__ is not _TENSOR or _tracing_state() is not None


def in_place(out: torch.Tensor, method: str, *args: object, **kwargs: object) -> torch.Tensor:
    return getattr(out, method + "_")(*args, **kwargs)


def out_of_place(out: torch.Tensor, method: str, *args: object, **kwargs: object) -> torch.Tensor:
    return getattr(out, method)(*args, **kwargs)


def writer(first: object, *others: object) -> Callable:
    """How a tensor made for a result is written, ``write(out, method, *args)``: in place
    (out.method_(...)), or out of place (out.method(...), one more copy) where torch.func.vmap batches
    one of the tensors given: vmap refuses to write batched values in place into a tensor not batched at the
    same level, and a fresh tensor made from x (or from nothing) may not be (x shared across the batch,
    or wrapped by torch.func.grad only)."""
    if isinstance(first, _TENSOR) and _functorch_wrapped(first):
        return out_of_place
    for t in others:
        if isinstance(t, _TENSOR) and _functorch_wrapped(t):
            return out_of_place
    return in_place




def on_device(t: torch.Tensor, mode: bool | str) -> bool:
    """Whether index t is checked by device-side assertions: asked for (check_bounds="async"), or by
    default (True, and False for the duplicate check of 'set') on a CUDA device (ROCm's included).
    Other accelerators (mps, xpu) have no _assert_async kernel: there the default is the exact check."""
    return mode == "async" or mode != "sync" and t.is_cuda


# The device types whose tensors torch._assert_async runs on (kernels for CPU and CUDA; meta's is a no-op).
_ASSERTING = frozenset({"cpu", "cuda", "meta"})


def can_assert(t: torch.Tensor) -> None:
    """The RearrError for check_bounds="async" on a device that has no device-side assertion."""
    if t.device.type not in _ASSERTING:
        raise RearrError(f"check_bounds='async' needs torch._assert_async, which torch has no kernel for on "
                         f"{t.device.type}", code="RA500",
                         hint="pass check_bounds='sync' (the exact check, one host read per index) or False")


def range_message(n: int, name: str, axis: str, text: str) -> str:
    # a symbolic length (torch.compile's dynamic shapes) is a name at trace time, not the number it will be
    length, bounds = (f"of length {n}", f"{-n} <= i < {n}") if n.__class__ is int else ("of length n", "-n <= i < n")
    return (f"rearr RA501: index {name!r} holds a value outside axis {axis!r} {length} (values lie in {bounds}), "
            f"in {text!r}; check_bounds='sync' names the value and its position")


def assert_in_range(idx: torch.Tensor, n: int, name: str, axis: str, text: str) -> torch.Tensor:
    """The bounds check as a device-side assertion, and negative values counted from the end by
    arithmetic: no value is read back to the host."""
    # torch.func.vmap: the op, whose vmap rule hands it the whole batch. torch.jit.trace: the op, whose
    # output the graph uses; the tracer drops a bare _assert_async, which has none.
    if _functorch_wrapped(idx) or jit_tracing():
        return check_index(idx, n, name, axis, -1, text, False)
    return _asserted_in_range(idx, n, name, axis, text)


def _asserted_in_range(idx: torch.Tensor, n: int, name: str, axis: str, text: str) -> torch.Tensor:
    can_assert(idx)
    if idx.numel():
        lo, hi = torch.aminmax(idx)  # one pass; the comparisons are of two 0-d tensors
        torch._assert_async((lo >= -n) & (hi < n), range_message(n, name, axis, text))
    # remainder: one call that counts negatives from the end (i + n) and keeps 0 <= i < n; a new tensor
    # (an op may not return its input). n == 0: an empty index, or one that the assertion refuses.
    return idx.remainder(n) if n else idx.clone()


def unique_message(name: str, text: str) -> str:
    return (f"rearr RA501: index {name!r} writes the same position more than once under 'set', in {text!r}; "
            "check_bounds='sync' raises the exact error")


def assert_unique(idx: torch.Tensor, dim: int, name: str, text: str) -> torch.Tensor:
    """The duplicate check of 'set' as a device-side assertion: sorted along dim, no two neighbours equal."""
    if _functorch_wrapped(idx) or jit_tracing():  # see assert_in_range
        return check_unique(idx, dim, name, text, False)
    return _asserted_unique(idx, dim, name, text)


def _asserted_unique(idx: torch.Tensor, dim: int, name: str, text: str) -> torch.Tensor:
    can_assert(idx)
    length = idx.shape[dim]
    if length > 1:
        s = idx.sort(dim).values
        same = s.narrow(dim, 1, length - 1) == s.narrow(dim, 0, length - 1)
        torch._assert_async(same.any().logical_not(), unique_message(name, text))
    return idx


def check_exact(idx: torch.Tensor, use: IndexUse, text: str, fresh: bool = False) -> torch.Tensor:
    """The exact bounds check (one host read: the min and max in one transfer; on a bad value, RA501 with
    the first one and its position), and negative values counted from the end. ``fresh``: a new tensor
    always (an op may not return its input); else idx itself where no value is negative. torch.func.vmap
    cannot read values: .item() raises RuntimeError there."""
    n = use.length
    if idx.numel() and not idx.is_meta:
        least, most = torch.aminmax(idx)  # one pass; read as ints, off the CPU in one transfer (one sync, not two)
        lo, hi = (least.item(), most.item()) if least.is_cpu else torch.stack((least, most)).tolist()
        if lo < -n or hi >= n:
            _common.refuse_out_of_range(use, text, idx.numpy(force=True))
        if lo >= 0 and not fresh:
            return idx
    elif not fresh:
        return idx
    # remainder: one native call that counts negatives from the end (i + n) and keeps 0 <= i < n. (n == 0
    # here means an empty index: there is nothing to wrap, and no modulo by 0.)
    return idx.remainder(n) if n else idx.clone()


def _check_index(idx: torch.Tensor, n: int, name: str, axis: str, col: int, text: str,
                 exact: bool = True) -> torch.Tensor:
    """rearr::check_index's kernel: the check of an index into an axis of length n (exact=False: the
    device-side one, assert_in_range's), then a new tensor with negative values counted from the end."""
    if not exact:
        return _asserted_in_range(idx, n, name, axis, text)
    use = IndexUse(name, axis, n, (), tuple(idx.shape), None if col < 0 else col)  # type: ignore[arg-type]
    return check_exact(idx, use, text, fresh=True)


def unique_along(idx: torch.Tensor, dim: int, name: str, text: str, mode: bool | str) -> torch.Tensor:
    """The duplicate check of 'set' along dim, exact or device-side as the call's check_bounds= says
    (on_device); the index to use (traced: the op's output)."""
    if on_device(idx, mode):
        return assert_unique(idx, dim, name, text)
    if traced(idx) or _functorch_wrapped(idx):
        return check_unique(idx, dim, name, text)
    refuse_duplicates(idx, dim, name, text)
    return idx


def refuse_duplicates(idx: torch.Tensor, dim: int, name: str, text: str) -> None:
    """The duplicate check of 'set', on real values: no two values of idx along dim are equal. The torch
    backend runs it eagerly, and the op rearr::check_unique at run time of a traced graph."""
    if idx.shape[dim] > 1 and not idx.is_meta:
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


def _check_unique(idx: torch.Tensor, dim: int, name: str, text: str, exact: bool = True) -> torch.Tensor:
    """rearr::check_unique's kernel: the check (exact=False: assert_unique's), then a copy of idx
    (an op may not return its input)."""
    if exact:
        refuse_duplicates(idx, dim, name, text)
    else:
        _asserted_unique(idx, dim, name, text)
    return idx.clone()


def _like(idx: torch.Tensor, *args: object) -> torch.Tensor:  # the fake kernels: same shape and dtype
    return torch.empty_like(idx)


def check_index(idx: torch.Tensor, n: int, name: str, axis: str, col: int, text: str,
                exact: bool = True) -> torch.Tensor:
    """rearr::check_index, the op a tracer records."""
    return _define()[0](idx, n, name, axis, col, text, exact)


def check_unique(idx: torch.Tensor, dim: int, name: str, text: str, exact: bool = True) -> torch.Tensor:
    """rearr::check_unique, the op a tracer records."""
    return _define()[1](idx, dim, name, text, exact)


# torch.func.vmap: check the whole batch at once, the vmapped axis moved to the front (a bounds check
# is elementwise; the duplicate check looks along its dim, which moves one place right).
def _check_index_vmap(info, in_dims, idx, n, name, axis, col, text, exact=True):
    if in_dims[0] is None:
        return check_index(idx, n, name, axis, col, text, exact), None
    return check_index(idx.movedim(in_dims[0], 0), n, name, axis, col, text, exact), 0  # a position: batch first


def _check_unique_vmap(info, in_dims, idx, dim, name, text, exact=True):
    if in_dims[0] is None:
        return check_unique(idx, dim, name, text, exact), None
    return check_unique(idx.movedim(in_dims[0], 0), dim + 1, name, text, exact), 0


_DEFINED: dict[str, object] = {}  # "ops": the two ops; "lib": the Library that holds their registrations
_DEFINING = threading.Lock()


def _define() -> tuple:
    """The two ops, defined on the first traced call: registering them (register_fake reads this file's
    source) costs milliseconds that an eager program's first call should not pay."""
    ops = _DEFINED.get("ops")
    if ops is not None:
        return ops  # type: ignore[return-value]
    with _DEFINING:
        if "ops" not in _DEFINED:
            # torch.library.Library rather than torch.library.custom_op: the same op for the compiler, but
            # a call costs a plain dispatch instead of custom_op's Python wrappers.
            lib = torch.library.Library("rearr", "DEF")
            lib.define("check_index(Tensor idx, SymInt n, str name, str axis, int col, str text, bool exact=True)"
                       " -> Tensor")
            lib.define("check_unique(Tensor idx, int dim, str name, str text, bool exact=True) -> Tensor")
            lib.impl("check_index", _check_index, "CompositeExplicitAutograd")
            lib.impl("check_unique", _check_unique, "CompositeExplicitAutograd")
            torch.library.register_fake("rearr::check_index", _like, lib=lib)
            torch.library.register_fake("rearr::check_unique", _like, lib=lib)
            torch.library.register_vmap("rearr::check_index", _check_index_vmap, lib=lib)
            torch.library.register_vmap("rearr::check_unique", _check_unique_vmap, lib=lib)
            _DEFINED["lib"] = lib  # the registrations live as long as the Library object
            _DEFINED["ops"] = (torch.ops.rearr.check_index.default, torch.ops.rearr.check_unique.default)
    return _DEFINED["ops"]  # type: ignore[return-value]
