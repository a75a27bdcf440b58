"""The public functions: look up the cached plan, run its native calls."""

from __future__ import annotations

import itertools
import numbers
from _thread import allocate_lock  # threading's lock without importing threading (which `import rearr` would pay for)
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ._record import Record
from ._types import Tensor
from .backends import _BY_TYPE, backend_for, compile_plan, compile_steps
from .errors import RearrError
from .planning import planner
from .planning.plan import AdvancedIndex, GatherAlong, IndexEnv, Reshape, ScatterAlong
from .rules import arguments, recipe

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .planning.einsum import EinsumPlan


class _Plans:
    """A bounded, thread-safe table from a call's key to its plan compiled to one function ``run(x, env)``.

    The key is (op, pattern, reduction, type(x), x.shape, keyword items, ...): what the public
    functions hold in hand, so that a call seen before costs one dict look-up. Reads take no
    lock (a dict read is atomic); additions do, and past ``maxsize`` the oldest entry goes.
    Like an lru_cache it has cache_info() and cache_clear() (api._CACHES lists it).
    """

    def __init__(self, name: str, maxsize: int = 1024) -> None:
        self.__name__, self.maxsize = name, maxsize
        self.table: dict = {}
        self._lock = allocate_lock()

    def get(self, key: tuple, make: Callable, *args: Any) -> Any:
        """The entry of key, made now by make(*args) and kept if there is none; an unhashable key
        raises TypeError (before make runs)."""
        entry = self.table.get(key)
        return entry if entry is not None else self.add(key, make(*args))

    def add(self, key: tuple, value: Any) -> Any:
        with self._lock:
            table = self.table
            if len(table) >= self.maxsize:
                del table[next(iter(table))]  # the oldest: first in, first out (no bookkeeping on a hit)
            table[key] = value
        return value

    def cache_info(self) -> _CacheInfo:
        return _CacheInfo(self.maxsize, len(self.table))

    def cache_clear(self) -> None:
        with self._lock:
            self.table.clear()


class _CacheInfo(Record):  # what lru_cache's cache_info() says of its size (a NamedTuple costs import time)
    maxsize: int
    currsize: int


_compiled = _Plans("_compiled")  # calls without index brackets
_RUNS = _compiled.table  # the public functions look up their call here first


def _plan(op: str, text: str, reduction: object, backend: Any, shape: tuple, lengths: tuple) -> Callable:
    """Plan a call without index brackets and compile the plan to one function run(x, env)."""
    r = _analyze(text, op, reduction, tuple(sorted(name for name, _ in lengths)))
    return _one_function(compile_plan(planner.plan(r, tuple(shape), lengths).steps, backend))


def _one_function(calls: tuple) -> Callable:
    """A plan's native calls as one function: most plans are one or two calls, run with no loop."""
    if len(calls) == 1:
        return calls[0]
    if len(calls) == 2:
        first, second = calls
        return lambda x, env: second(first(x, env), env)

    def run(x: Any, env: Any) -> Any:
        for f in calls:
            x = f(x, env)
        return x

    return run


def _int_lengths(kwargs: dict[str, Any]) -> tuple | None:
    """The keywords as a key of _RUNS when every value is an int, else None (no entry holds None):
    2.0 == 2 and True == 1, so another value would find an int's entry."""
    for value in kwargs.values():
        if value.__class__ is not int:
            return None
    return tuple(kwargs.items())


_indexed = _Plans("_indexed")  # calls with index brackets: see _indexed_plan
_INDEXED = _indexed.table


def _plan_indexed(
    op: str, text: str, reduction: object, backend: Any, shape: tuple, keywords: tuple, into_shape: tuple | None
) -> tuple[tuple, Callable, frozenset[str], Callable]:
    """Plan a call with index brackets; ``keywords`` holds lengths and the index tensors' shapes. The
    index uses, the plan as one function, the indexes whose native calls check them, and the plan's
    function without its dtype check (for _DIRECT, whose key holds a dtype that passed it)."""
    names = index_names(text)
    lengths = tuple((n, v) for n, v in keywords if n not in names)
    index_shapes = tuple((n, tuple(v)) for n, v in keywords if n in names)
    r = _analyze(text, op, reduction, tuple(sorted(n for n, _ in keywords)))
    p = planner.plan(r, tuple(shape), lengths, index_shapes, into_shape)
    calls, check = compile_steps(p.steps, backend)
    run = _one_function(calls if check is None else (check, *calls))
    return p.indices, run, _natively_checked(p, backend), _one_function(calls)


def _natively_checked(p: Any, backend: Any) -> frozenset[str]:
    """The indexes that only the backend's NATIVE_CHECKS steps (or those checks_step_natively names)
    read, each term the whole coordinate of one axis of its own length: the native call refuses a bad
    value there, so rearr need not look at the values first. Not under 'set', whose duplicate check
    must see the values counted from the end."""
    kinds, checks_step = backend.NATIVE_CHECKS, backend.checks_step_natively
    native, other = set(), set()
    for k, step in enumerate(p.steps):
        if isinstance(step, GatherAlong | ScatterAlong):
            axes = {step.dim: step.term}
            size = step.shape if isinstance(step, ScatterAlong) else p.layouts[k].shape if p.layouts else ()
        elif isinstance(step, AdvancedIndex):
            axes, size = dict(enumerate(step.terms)), p.layouts[k].shape if p.layouts else ()
        else:
            other.update(t.index for t in getattr(step, "terms", ()))
            continue
        for dim, term in axes.items():
            by_native_call = type(step) in kinds or checks_step(step)
            ok = (by_native_call and term.stride == 1 and dim < len(size) and size[dim] == term.length
                  and getattr(step, "reduction", None) != "set")
            (native if ok else other).add(term.index)
    return frozenset(native - other - {None})


# An indexed call seen before, with plain arguments: (op, pattern, reduction, type(x), x.shape, x.dtype,
# each keyword's (name, shape or int)) -> its plan as one function f(x, keywords), made by _direct once
# such a call has passed the careful path (_run_indexed): the dtype check passed for that dtype, so
# the function runs the native calls alone. Only calls with bounds checks on, fill 0 and no into=.
_direct_runs = _Plans("_direct_runs")
_DIRECT = _direct_runs.table
_CAREFUL = object()  # what a function of _DIRECT returns for a call that it leaves to the careful path


_SHAPE = itertools.repeat("shape")  # map(getattr, values, _SHAPE, values): each value's shape, or the value itself


def _direct_key(op: str, x: Any, pattern: str, reduction: object, kwargs: dict[str, Any]) -> tuple:
    """A _DIRECT key: the call, x's class, shape and dtype, the keyword names, then each keyword's shape
    (an index) or value (a length), read in C by map. A list index makes the key unhashable; a float
    length finds the int's entry, whose function then declines."""
    values = kwargs.values()
    return (op, pattern, reduction, x.__class__, x.shape, x.dtype, *kwargs, *map(getattr, values, _SHAPE, values))


def _direct(
    uses: tuple, steps: Callable, natively_checked: frozenset, backend: Any, pattern: str, names: tuple[str, ...]
) -> Callable:
    """An indexed plan as one function f(x, keywords) for the common call: every index a tensor that
    needs no conversion (backend.ready_index), every length an int. The indexes that the native calls
    check (see _natively_checked) are passed as they are; the others go through check_index. Anything
    else, or any failure, returns _CAREFUL: _run_indexed then does the call again and says why.
    ``names`` are the call's keywords, which the _DIRECT key fixes."""
    ready, check_index = backend.ready_index, backend.check_index
    index_names = tuple(u.name for u in uses)
    length_names = tuple(name for name in names if name not in index_names)
    checked = tuple(u for u in uses if u.name not in natively_checked)
    native_uses = tuple(u for u in uses if u.name in natively_checked)

    def call(x: Any, kwargs: dict[str, Any]) -> Any:
        for name in index_names:
            if not ready(kwargs[name], x):
                return _CAREFUL
        for name in length_names:
            if kwargs[name].__class__ is not int:
                return _CAREFUL
        indices = kwargs  # the steps read only the index names (IndexEnv keeps them apart from text/fill/into)
        if checked:
            indices = dict(kwargs)
            try:
                for use in checked:
                    indices[use.name] = check_index(indices[use.name], use, pattern)
            except Exception:  # a bad value: the careful path names it (nothing has run yet)
                return _CAREFUL
        env = IndexEnv(pattern, indices, 0, None)  # check_bounds=True: the only mode _DIRECT serves
        try:
            return steps(x, env)
        except Exception:
            out = _after_refusal(steps, x, env, native_uses, backend)
            if out is None:
                raise
            return out

    return call


@lru_cache(maxsize=1024)
def index_names(text: str) -> frozenset[str]:
    """The names of the index operands of a pattern (what its brackets hold)."""
    return frozenset(s.name for s in recipe.index_specs(recipe.parse(text)))


# _CACHES (at the end of this module) lists every plan table and cache.
# A key that cannot be hashed skips the tables: torch.compile's symbolic shapes and lengths
# (torch.SymInt, dynamic shapes: each is planned once per compile) and an unhashable reduce
# callable. _plan and _plan_indexed plan it: nothing differs but the look-up.


def _analyze(text: str, op: str, reduction: object, names: tuple) -> recipe.Recipe:
    try:
        return recipe.analyze(text, op, reduction, names)
    except TypeError:  # an unhashable reduction callable
        return recipe.analyze.__wrapped__(text, op, reduction, names)


def _tensor_and_backend(tensor: Any):
    if isinstance(tensor, list | tuple):
        if not tensor:
            raise RearrError("an empty list has no tensor to rearrange", code="RA500",
                             hint="pass at least one tensor")
        backend = backend_for(tensor[0])
        shape = tuple(tensor[0].shape)  # compared, not hashed: torch.compile's symbolic lengths do not hash
        same_shape = all(tuple(t.shape) == shape for t in tensor if backend.accepts(t))
        devices = {str(getattr(t, "device", "cpu")) for t in tensor if backend.accepts(t)}
        if not same_shape or len(devices) != 1 or not all(backend.accepts(t) for t in tensor):
            for k, t in enumerate(tensor):  # nan != nan: an unknown length is RA304, not "shapes differ"
                if backend.accepts(t):
                    planner.known_shape(t.shape, f"list item {k}")
            raise RearrError("a list input must hold tensors of one library, shape and device",
                             code="RA500", shape=tuple(tuple(getattr(t, "shape", ())) for t in tensor),
                             hint="stack only equal-shaped tensors of the same kind")
        return backend.stack(tensor), backend
    return tensor, backend_for(tensor)


def _run(
    op: str, tensor: Any, pattern: str, reduction: object, kwargs: dict[str, Any], check_bounds: bool | str = True
) -> Any:
    try:
        backend = _BY_TYPE.get(type(tensor))
        if backend is None:
            tensor, backend = _tensor_and_backend(tensor)
        if pattern.__class__ is str and "[" not in pattern:
            for value in kwargs.values():
                if value.__class__ is not int:  # 2.0 == 2 in a cache key: validate before the look-up
                    kwargs = {n: _length(op, pattern, reduction, kwargs, n, v) for n, v in kwargs.items()}
                    break
            return _plan_of(op, pattern, reduction, tensor, backend, kwargs)(tensor, None)
        return _run_indexed(op, tensor, backend, pattern, reduction, kwargs, None, 0, check_bounds)
    except Exception as e:
        _raise_in_context(e, op, tensor, pattern, kwargs)
        raise


def _raise_in_context(e: Exception, op: str, tensor: Any, pattern: object, kwargs: dict, *more: object) -> None:
    """What a failed call raises: a RearrError with the call's pattern, shape and op filled in; the
    RearrError that says why torch refused a sparse or nested tensor (policy.refuse_unusual); or, by
    returning, e itself for the caller to re-raise unchanged."""
    if isinstance(tensor, str) and not isinstance(pattern, str):  # rearrange('b c -> c b', x)
        raise recipe.swapped_arguments(op, tensor) from None
    if isinstance(e, RearrError):
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None,
                             shape=_shape_of(tensor), op=op) from None
    if isinstance(e, RuntimeError | NotImplementedError):
        from .planning import policy  # here: only a failed call needs it

        first = tensor[0] if isinstance(tensor, list | tuple) and tensor else tensor
        try:
            backend = _BY_TYPE.get(type(first)) or backend_for(first)
        except RearrError:  # not a tensor: e stands
            return
        policy.refuse_unusual(e, backend, (tensor, *more, *kwargs.values()))


def _plan_of(op: str, pattern: str, reduction: object, x: Any, backend: Any, lengths: dict) -> Callable:
    """The plan's function for a call without brackets (int lengths): from _compiled, else planned
    now and kept there, so that the public functions find it on the next call."""
    items = tuple(lengths.items())
    try:
        return _compiled.get((op, pattern, reduction, x.__class__, x.shape, items),
                             _plan, op, pattern, reduction, backend, x.shape, items)
    except TypeError:  # unhashable: see _CACHES
        return _plan(op, pattern, reduction, backend, x.shape, items)


def _length(op: str, pattern: str, reduction: object, kwargs: dict, name: str, value: object) -> object:
    """A length keyword that is not a plain int: an int it stands for, or the RearrError."""
    if planner.symbolic(value):  # torch.compile's dynamic length, e.g. c=x.shape[1] * 2
        return value
    r = _analyze(pattern, op, reduction, tuple(sorted(kwargs)))
    return value if name in r.index_names else recipe.check_length_value(r, name, value)


def _run_indexed(op, x, backend, pattern, reduction, kwargs, into, fill, check_bounds):
    if not isinstance(pattern, str):
        recipe.parse(pattern)  # raises the RearrError that says so
    into_shape = None
    if into is not None:
        _check_into(into, x, backend)
        into_shape = planner.known_shape(into.shape, "into=", "into")
    uses, run, natively_checked, steps = _indexed_plan(op, x, backend, pattern, reduction, kwargs, into_shape,
                                                       check_bounds)
    indices: dict[str, Any] = {}
    left_to_native = []
    native = check_bounds != "async"  # "async": device-side checks only, never a host read after a refusal
    for use in uses:
        t = backend.convert_index(kwargs[use.name], x, use.name, pattern, check_bounds)
        if check_bounds:
            if native and use.name in natively_checked and backend.checks_natively(t):
                left_to_native.append(use)
            else:
                t = backend.check_index(t, use, pattern, check_bounds)
        indices[use.name] = t
    env = IndexEnv(pattern, indices, fill, into, check_bounds)
    if left_to_native:
        try:
            out = run(x, env)
        except Exception:
            out = _after_refusal(run, x, env, left_to_native, backend)
            if out is None:
                raise
    elif check_bounds:
        out = run(x, env)
    else:
        try:
            return run(x, env)
        except (IndexError, RuntimeError) as e:
            if not _index_fault(e):
                raise
            raise RearrError(f"{backend.name} refused an index: {e}", code="RA501", pattern=pattern,
                             hint="check_bounds=False promises index values in 0 <= i < n; turn the check on "
                             "to find the bad one") from None
    if into is None and backend.READY_INDEXES:
        try:  # the dtype check passed: the next such call finds the plan's native calls in _DIRECT
            _direct_runs.get(_direct_key(op, x, pattern, reduction, kwargs),
                             _direct, uses, steps, natively_checked, backend, pattern, tuple(kwargs))
        except TypeError:  # unhashable: see _CACHES
            pass
    return out


def _after_refusal(run: Callable, x: Any, env: IndexEnv, left: Iterable, backend: Any) -> Any:
    """A plan failed whose indexes ``left`` rearr left to the native calls to check. rearr's own check
    now names a bad value (RA501, raised). An index whose values were all in range but negative ones
    (counted from the end by rearr; numpy's native calls count them too, torch's refuse them before any
    work) runs the plan with those counted: the one plan that did its work. Otherwise None: the
    plan's own error stands, raised by the caller."""
    indices, counted = dict(env.indices), False
    for use in left:
        t = indices[use.name]
        indices[use.name] = backend.check_index(t, use, env.text, env.checks)
        counted = counted or indices[use.name] is not t
    return run(x, IndexEnv(env.text, indices, env.fill, env.into, env.checks)) if counted else None


def _index_fault(e: Exception) -> bool:
    """Whether a backend's error is an index out of range (numpy's IndexError, torch's messages),
    not an unsupported dtype or a failed allocation, which keep their own type and message."""
    text = str(e)
    return isinstance(e, IndexError) or "out of bounds" in text or "index out of range" in text


def _indexed_plan(op, x, backend, pattern, reduction, kwargs, into_shape, checks) -> tuple[tuple, Callable, frozenset]:
    """The cached plan of an indexed call: keyed on the index tensors' shapes and the int lengths."""
    tensor = backend.TENSOR
    key = []
    for name, value in kwargs.items():
        kind = value.__class__
        if kind is tensor and value.ndim:  # a 0-d tensor may be a length: the careful path tells
            key.append((name, value.shape))
        elif kind is int:
            key.append((name, value))
        else:
            break  # a list index, a numpy int length, a bad value: the careful path below
    else:
        try:
            keywords = tuple(key)
            full_key = (op, pattern, reduction, backend, x.shape, keywords, into_shape)
            found = _INDEXED.get(full_key)
            if found is not None:  # the common call: one look-up
                return found
            return _indexed.get(full_key, _plan_indexed, op, pattern, reduction, backend, x.shape, keywords,
                                into_shape)
        except TypeError:  # unhashable, or an int where an index belongs: the careful path converts it
            pass
    names = index_names(pattern)
    key = []
    for name, value in kwargs.items():
        if name in names:
            key.append((name, backend.convert_index(value, x, name, pattern, checks).shape))
        else:
            if value.__class__ is not int:
                value = _length(op, pattern, reduction, kwargs, name, value)
            key.append((name, value))
    key = tuple(key)
    try:
        return _indexed.get((op, pattern, reduction, backend, x.shape, key, into_shape),
                            _plan_indexed, op, pattern, reduction, backend, x.shape, key, into_shape)
    except TypeError:  # unhashable: see _CACHES
        return _plan_indexed(op, pattern, reduction, backend, x.shape, key, into_shape)


def _check_bounds(value: object, op: str, pattern: object) -> None:
    """Raise the RearrError for a check_bounds= value that is not a mode (rules.arguments.CHECK_BOUNDS)."""
    err = arguments.check_bounds_error(value)
    if err is not None:
        raise err.with_context(pattern=pattern if isinstance(pattern, str) else None, op=op)


def _check_into(into: Any, x: Any, backend: Any) -> None:
    if backend_for(into) is not backend:
        raise RearrError("into= must be the same kind of tensor as the source", code="RA500",
                         hint="convert one of them")
    if into.dtype != x.dtype or getattr(into, "device", None) != getattr(x, "device", None):
        raise RearrError(f"into= is {into.dtype} on {getattr(into, 'device', 'cpu')}, the source "
                         f"{x.dtype} on {getattr(x, 'device', 'cpu')}", code="RA500",
                         hint="convert one of them, so that the result's dtype is not a guess")
    backend.check_into(into, x)


def _shape_of(tensor: Any) -> object:
    if isinstance(tensor, list | tuple):
        return tuple(tuple(getattr(t, "shape", ())) for t in tensor) if tensor else None
    shape = getattr(tensor, "shape", None)
    return tuple(shape) if shape is not None else None


# --- public functions ----------------------------------------------------------


def rearrange(
    tensor: Tensor | Sequence[Tensor], /, pattern: str, *, check_bounds: bool | str = True, **axes_lengths: Any
) -> Tensor:
    """Reorder, merge and split axes; gather through ``[index]`` brackets.

    Index tensors are passed as keywords, like lengths. ``check_bounds`` says how
    their values are checked: True (the exact error on the CPU, device-side
    assertions on CUDA), "sync" (the exact error everywhere), "async"
    (device-side assertions everywhere) or False (no range check, and no counting
    of negative values from the end).

    >>> rearrange(np.zeros((2, 3, 4)), "c b h -> b (c h)").shape
    (3, 8)
    """
    run = indexed = None
    if check_bounds is not True and check_bounds is not False:  # a mode to validate before any look-up
        _check_bounds(check_bounds, "rearrange", pattern)
    try:  # a call seen before: one look-up, then its plan's function (see _Plans)
        lengths = _int_lengths(axes_lengths) if axes_lengths else ()
        if lengths is not None:  # else an index tensor (or a length to validate): _run
            run = _RUNS.get(("rearrange", pattern, None, tensor.__class__, tensor.shape, lengths))
        elif check_bounds is True:  # an index tensor: see _DIRECT
            indexed = _DIRECT.get(_direct_key("rearrange", tensor, pattern, None, axes_lengths))
    except Exception:  # not hashable, or not a tensor: _run plans it, or raises the error that says why
        pass
    try:  # the plan runs once: what it raises is what the caller sees (with the call's context)
        if run is not None:
            return run(tensor, None)
        if indexed is not None:
            out = indexed(tensor, axes_lengths)
            if out is not _CAREFUL:  # else it declined before running: _run says why
                return out
    except Exception as e:
        _raise_in_context(e, "rearrange", tensor, pattern, axes_lengths)
        raise
    return _run("rearrange", tensor, pattern, None, axes_lengths, check_bounds)


def reduce(
    tensor: Tensor | Sequence[Tensor],
    /,
    pattern: str,
    reduction: str | Callable[[Tensor, tuple[int, ...]], Any],
    **axes_lengths: Any,
) -> Tensor:
    """Like rearrange, with the axes missing on the output side combined by ``reduction``:
    'min', 'max', 'sum', 'mean', 'prod', 'any', 'all', or a callable f(x, axes)."""
    run = None
    try:  # as in rearrange
        run = _RUNS.get(("reduce", pattern, reduction, tensor.__class__, tensor.shape,
                         _int_lengths(axes_lengths) if axes_lengths else ()))
    except Exception:
        pass
    if run is not None:
        try:
            return run(tensor, None)
        except Exception as e:
            _raise_in_context(e, "reduce", tensor, pattern, axes_lengths)
            raise
    err = arguments.reduction_error("reduce", reduction, pattern if isinstance(pattern, str) else None)
    if err is not None:
        raise err
    op, reduction = recipe.operation("reduce", reduction)  # "rearrange": a reduce that reduces nothing
    return _run(op, tensor, pattern, reduction, axes_lengths)


def repeat(tensor: Tensor | Sequence[Tensor], /, pattern: str, **axes_lengths: Any) -> Tensor:
    """Like rearrange, with new output axes repeating the input (lengths as keywords)."""
    run = None
    try:  # as in rearrange
        run = _RUNS.get(("repeat", pattern, None, tensor.__class__, tensor.shape,
                         _int_lengths(axes_lengths) if axes_lengths else ()))
    except Exception:
        pass
    if run is not None:
        try:
            return run(tensor, None)
        except Exception as e:
            _raise_in_context(e, "repeat", tensor, pattern, axes_lengths)
            raise
    return _run("repeat", tensor, pattern, None, axes_lengths)


def scatter(
    src: Tensor | Sequence[Tensor],
    /,
    pattern: str,
    reduction: str,
    *,
    fill: Any = None,
    into: Tensor | None = None,
    check_bounds: bool | str = True,
    **lengths_and_indices: Any,
) -> Tensor:
    """Write ``src`` into the output axis marked ``[index]``, combining duplicates by
    ``reduction`` ('sum', 'mean', 'max', 'min', 'prod', or 'set' for unique indices).

    Positions that receive nothing hold ``fill`` (default 0). With ``into=``, the
    result starts from a copy of ``into`` whose values take part in the reduction
    (torch's include_self=True) and ``fill`` is not used. No input is modified.
    ``check_bounds`` is rearrange's (the duplicate check of 'set' follows it, on
    the device's default where it is False).
    """
    if fill is None and into is None and check_bounds is True:  # a call seen before: see _DIRECT
        run = None
        try:
            run = _DIRECT.get(_direct_key("scatter", src, pattern, reduction, lengths_and_indices))
        except Exception:  # not hashable, or not a tensor: the careful path below
            pass
        if run is not None:
            try:
                out = run(src, lengths_and_indices)
            except Exception as e:  # as in rearrange: the plan ran once
                _raise_in_context(e, "scatter", src, pattern, lengths_and_indices)
                raise
            if out is not _CAREFUL:  # else it declined before running: the careful path says why
                return out
    try:
        if check_bounds is not True and check_bounds is not False:
            _check_bounds(check_bounds, "scatter", pattern)
        if fill is not None and into is not None:
            raise RearrError("fill= and into= exclude each other", code="RA500",
                             hint="into= gives every position a value; drop fill=")
        err = arguments.reduction_error("scatter", reduction, None)
        if err is not None:
            raise err
        if fill is not None:
            fill = arguments.fill_value(fill, None)
        x, backend = src, _BY_TYPE.get(type(src))
        if backend is None:
            x, backend = _tensor_and_backend(src)
        return _run_indexed("scatter", x, backend, pattern, reduction, lengths_and_indices, into,
                            0 if fill is None else fill, check_bounds)
    except Exception as e:
        _raise_in_context(e, "scatter", src, pattern, lengths_and_indices, into)
        raise


def einsum(*tensors_and_pattern: Any, **axes_lengths: Any) -> Any:
    """einsum with axis names, the pattern last: einsum(x, y, "b i, b j -> b i j").

    Groups such as ``(h w)`` may stand on either side (lengths as keywords where the operands do
    not give them), and ``1`` or ``()`` for unit axes: they become reshapes around the backend's
    einsum. On torch, a two-operand matrix product (batched or not) runs as permutes and reshapes
    around ``torch.matmul``, as one writes it by hand (docs/language.md, einsum).
    """
    try:
        if len(tensors_and_pattern) == 3:  # two operands, the common call: its overhead counts
            a, b, pattern = tensors_and_pattern
            lengths: tuple | None = ()
            if axes_lengths:  # plain ints only: 2.0 == 2 and True == 1 in a key (others: validated below)
                lengths = tuple(axes_lengths.items())
                for _, n in lengths:
                    if n.__class__ is not int:
                        lengths = None
                        break
            try:
                call = _EINSUM_CALLS.get((pattern, a.__class__, a.shape, b.__class__, b.shape, lengths))
            except (AttributeError, TypeError):  # not a tensor; a symbolic shape (torch.compile) does not hash
                call = None
            if call is not None:
                run, pre, arg, post = call
                if pre:
                    a = a if pre[0] is None else a.reshape(pre[0])
                    b = b if pre[1] is None else b.reshape(pre[1])
                try:
                    out = run(arg, a, b)
                except (RuntimeError, ValueError, TypeError) as e:
                    _einsum_refused(_BY_TYPE[a.__class__], e)
                return out if post is None else out.reshape(post)
        return _einsum_planned_call(tensors_and_pattern, axes_lengths)
    except RearrError as e:
        tensors = tensors_and_pattern[:-1]
        pattern = tensors_and_pattern[-1] if tensors_and_pattern else None
        shapes = tuple(_shape_of(t) for t in tensors)
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None,
                             shape=shapes if shapes and None not in shapes else None, op="einsum") from None


# (pattern, each operand's class and shape, lengths) -> _einsum_call's (run, pre, arg, post): the two-operand call's
# one look-up, a flat key that hashes faster than _einsum_plan's. Filled from _einsum_plan (the bounded LRU
# that planning goes through); a _Plans table, so bounded and thread-safe like the other calls' tables.
_einsum_calls = _Plans("_einsum_calls")
_EINSUM_CALLS = _einsum_calls.table


def _einsum_planned_call(tensors_and_pattern: tuple, axes_lengths: dict[str, Any]) -> Any:
    """Plan through _einsum_plan, remember a two-operand plan for einsum's look-up, run."""
    pattern = tensors_and_pattern[-1] if tensors_and_pattern else None
    tensors = tensors_and_pattern[:-1]
    if pattern.__class__ is str and tensors:
        backend = _BY_TYPE.get(tensors[0].__class__)
        if backend is not None:  # (an nn.Parameter is another class of the same backend)
            shapes = tuple([t.shape for t in tensors if _BY_TYPE.get(t.__class__) is backend])
            if len(shapes) == len(tensors):
                lengths = _einsum_key(pattern, axes_lengths) if axes_lengths else ()
                call = _einsum_call(backend, _einsum_planned(pattern, shapes, lengths))
                if len(tensors) == 2:
                    key = (pattern, tensors[0].__class__, shapes[0], tensors[1].__class__, shapes[1], lengths)
                    try:
                        _einsum_calls.add(key, call)
                    except TypeError:  # symbolic shapes: not remembered, planned on each call (one per trace)
                        pass
                return _einsum_run(backend, *call, tensors)
    return _einsum_careful(tensors_and_pattern, axes_lengths)


def _einsum_cache_clear() -> None:
    """Forget every einsum plan (tests count the planning)."""
    _einsum_calls.cache_clear()
    _einsum_plan.cache_clear()


def _einsum_call(backend: Any, plan: EinsumPlan) -> tuple:
    """(run, pre, arg, post): the einsum is ``run(arg, *operands)`` on the operands reshaped to pre, then
    reshaped to post. run is the backend's einsum, arg its spec; or, where the backend lowers a matrix
    product to matmul (EINSUM_MATMUL) and the plan is one, _matmul_run with the plan's steps as calls."""
    pre, spec, post, mm = plan
    if mm is None or not backend.EINSUM_MATMUL:
        return backend.einsum, pre, spec, post
    table = backend.STEPS
    a, b, out = (tuple(table[type(step)](step) for step in steps) for steps in (mm.a, mm.b, mm.out))
    return _matmul_run, (), (a, b, out, mm.swap, backend.matmul), None


def _matmul_run(arg: tuple, a: Any, b: Any) -> Any:
    """An EinsumMatmul's calls: each operand's steps, matmul (the operands swapped where it says so), the
    result's steps."""
    a_steps, b_steps, out_steps, swap, matmul = arg
    for step in a_steps:
        a = step(a, None)
    for step in b_steps:
        b = step(b, None)
    out = matmul(b, a) if swap else matmul(a, b)
    for step in out_steps:
        out = step(out, None)
    return out


def _einsum_run(backend: Any, run: Callable, pre: tuple, arg: Any, post: tuple | None, tensors: tuple) -> Any:
    if pre:
        tensors = tuple(t if shape is None else t.reshape(shape) for t, shape in zip(tensors, pre))
    try:
        out = run(arg, *tensors)
    except (RuntimeError, ValueError, TypeError) as e:
        _einsum_refused(backend, e)
    return out if post is None else out.reshape(post)


def _einsum_refused(backend: Any, e: Exception) -> None:
    if isinstance(e, RearrError):  # the backend's own refusal, already in rearr's words
        raise e
    # Shapes were checked before: what is left is dtype, device or memory, in the backend's words.
    raise RearrError(f"{backend.name} refused the einsum: {e}", code="RA500",
                     hint="give the operands one dtype and device") from None


def _einsum_careful(args: tuple, axes_lengths: dict[str, Any]) -> Any:
    """The slow path: every way the call can be wrong gets its RearrError, then the fast one runs."""
    if not args:
        raise RearrError("einsum needs tensors, then the pattern", code="RA206",
                         hint='einsum(x, y, "i j, j k -> i k")')
    *tensors, pattern = args
    if not isinstance(pattern, str):
        if isinstance(args[0], str):
            names = ", ".join(f"x{k}" for k in range(1, len(args)))
            raise RearrError("the pattern comes last in rearr.einsum (np.einsum puts it first)", code="RA206",
                             hint=f"einsum({names}, {args[0]!r})")
        recipe.parse(pattern)  # raises the RearrError that says the pattern must be a str
    if not tensors:
        raise RearrError("einsum needs tensors before the pattern", code="RA206",
                         hint=f"einsum(x, {pattern!r})")
    backend = backend_for(tensors[0])
    for k, t in enumerate(tensors):
        if backend_for(t) is not backend:
            raise RearrError(f"operand {k} is a {type(t).__name__}, operand 0 a {type(tensors[0]).__name__}",
                             code="RA500", hint="give einsum tensors of one library")
    lengths = _einsum_lengths(pattern, axes_lengths)
    plan = _einsum_planned(pattern, tuple(tuple(t.shape) for t in tensors), tuple(lengths.items()))
    return _einsum_run(backend, *_einsum_call(backend, plan), tuple(tensors))


def _einsum_key(pattern: str, axes_lengths: dict[str, Any]) -> tuple:
    """The lengths as a cache key: plain ints as they are, anything else validated first (2.0 == 2)."""
    for value in axes_lengths.values():
        if value.__class__ is not int:
            return tuple(_einsum_lengths(pattern, axes_lengths).items())
    return tuple(axes_lengths.items())


def _einsum_lengths(pattern: str, axes_lengths: dict[str, Any]) -> dict[str, int]:
    r = recipe.analyze(pattern, "einsum", None, tuple(sorted(axes_lengths)))
    return {name: recipe.check_length_value(r, name, value) for name, value in axes_lengths.items()}


def _einsum_planned(pattern: str, shapes: tuple, lengths: tuple) -> EinsumPlan:
    try:
        return _einsum_plan(pattern, shapes, lengths)
    except TypeError:  # symbolic shapes under torch.compile cannot be hashed: planned without the cache
        return _einsum_plan.__wrapped__(pattern, shapes, lengths)


@lru_cache(maxsize=1024)
def _einsum_plan(pattern: str, shapes: tuple, lengths: tuple) -> EinsumPlan:
    from .planning import einsum as planner_einsum  # here: only einsum needs it, not `import rearr`

    return planner_einsum.plan(pattern, shapes, lengths)


def pack(tensors: Sequence[Tensor], pattern: str) -> tuple[Tensor, list[tuple[int, ...]]]:
    """Flatten the '*' axes of each tensor and concatenate: pack([x, y], "b * c")."""
    try:
        before, after = _pack_split(pattern, "pack")
        if not isinstance(tensors, list | tuple) or not tensors:
            what = "an empty list" if isinstance(tensors, list | tuple) else f"a {type(tensors).__name__}"
            raise RearrError(f"pack takes a non-empty list of tensors, not {what}", code="RA500", pattern=pattern,
                             hint="pass a list, e.g. pack([x, y], ...); with nothing to pack there is no result")
        backend = backend_for(tensors[0])
        pieces, shapes = [], []
        for i, t in enumerate(tensors):
            if backend_for(t) is not backend:
                raise RearrError(f"tensor {i} is a {type(t).__name__}, tensor 0 a {type(tensors[0]).__name__}",
                                 code="RA500", pattern=pattern, hint="pack tensors of one library")
            shape = planner.known_shape(t.shape, f"tensor {i}")
            if len(shape) < before + after:
                raise RearrError(f"tensor {i} has {len(shape)} dimensions, the pattern needs at least "
                                 f"{before + after}", code="RA304", pattern=pattern, col=0,
                                 hint="every packed tensor has the named axes, in order")
            fixed = shape[:before] + shape[len(shape) - after:]
            first = tuple(tensors[0].shape)
            if fixed != first[:before] + first[len(first) - after:]:
                raise RearrError(f"tensor {i} has shape {shape}; its named axes differ from tensor 0's {first}",
                                 code="RA303", pattern=pattern, col=0,
                                 hint="the axes named in the pattern have one length in every packed tensor")
            packed = shape[before: len(shape) - after]
            shapes.append(packed)
            # The packed length written out, not -1: a zero-length named axis leaves -1 undefined.
            pieces.append(_reshape(backend, t, shape[:before] + (_prod(packed),) + shape[len(shape) - after:]))
        return backend.concat(pieces, before), shapes
    except RearrError as e:
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None, op="pack") from None


def unpack(tensor: Tensor, packed_shapes: Iterable[Sequence[int]], pattern: str) -> list[Tensor]:
    """The inverse of pack: split the '*' axis into tensors of the given shapes (one of them may
    hold a -1, inferred as in einops)."""
    try:
        before, after = _pack_split(pattern, "unpack")
        backend = backend_for(tensor)
        shape = planner.known_shape(tensor.shape, "the tensor")
        if len(shape) != before + after + 1:
            raise RearrError(f"the tensor has {len(shape)} dimensions, the pattern {before + after + 1}",
                             code="RA304", pattern=pattern, col=0, hint="unpack the tensor that pack made")
        shapes = _packed_shapes(packed_shapes, shape[before], pattern)
        out, start = [], 0
        for packed in shapes:
            n = _prod(packed)
            piece = tensor[(slice(None),) * before + (slice(start, start + n), ...)]
            out.append(_reshape(backend, piece, shape[:before] + packed + shape[before + 1:]))
            start += n
        return out
    except RearrError as e:
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None, shape=_shape_of(tensor),
                             op="unpack") from None


def _packed_shapes(packed_shapes: object, total: int, pattern: str) -> list[tuple[int, ...]]:
    """unpack's shapes, read once (a generator too), as tuples of ints; one -1 inferred."""
    fix = "pass the shapes that pack returned: a list of tuples of ints, e.g. [(), (4,)]"
    if isinstance(packed_shapes, str) or not isinstance(packed_shapes, Iterable):
        raise RearrError(f"the packed shapes must be a list of shapes, not {type(packed_shapes).__name__}",
                         code="RA305", pattern=pattern, hint=fix)
    shapes: list[list[int]] = []
    unknown: tuple[int, int] | None = None
    for k, s in enumerate(packed_shapes):
        if isinstance(s, str) or not isinstance(s, Iterable):
            raise RearrError(f"packed shape {k} is {s!r}, not a tuple of ints", code="RA305", pattern=pattern,
                             hint=f"write it as a tuple, e.g. ({s!r},)" if _is_length(s) else fix)
        shape = list(s)
        for j, n in enumerate(shape):
            if planner.symbolic(n):  # what pack returned under torch.compile's dynamic shapes
                continue
            if not _is_length(n) and not (_is_int(n) and n == -1):
                raise RearrError(f"packed shape {k} is {tuple(shape)}: {n!r} is not a length (an int >= 0, or "
                                 "-1 once to infer it)", code="RA305", pattern=pattern, hint=fix)
            if n == -1:
                if unknown is not None:
                    raise RearrError("more than one -1 in the packed shapes: the lengths cannot be inferred",
                                     code="RA301", pattern=pattern, hint="write out all lengths but one")
                unknown = (k, j)
        shapes.append([planner.length_of(n) for n in shape])
    known = sum(_prod(s) for k, s in enumerate(shapes) if unknown is None or k != unknown[0])
    if unknown is not None:
        k, j = unknown
        rest = _prod(n for i, n in enumerate(shapes[k]) if i != j)
        left = total - known
        if left < 0 or rest == 0 or left % rest:
            raise RearrError(f"packed shape {k} {tuple(shapes[k])}: {left} remaining elements along '*' do not "
                             f"fill it", code="RA302", pattern=pattern, hint="pass pack's shapes")
        shapes[k][j] = left // rest
    elif known != total:
        raise RearrError(f"the packed shapes hold {known} elements along '*', the tensor has {total}",
                         code="RA303", pattern=pattern, hint="pass pack's shapes")
    return [tuple(s) for s in shapes]


def _is_int(n: object) -> bool:
    return isinstance(n, numbers.Integral) and not isinstance(n, bool)


def _is_length(n: object) -> bool:
    return _is_int(n) and int(n) >= 0  # type: ignore[call-overload]


def _reshape(backend: Any, t: Any, shape: tuple[int, ...]) -> Any:
    """Through the backend's reshape step: Array API arrays have no .reshape method."""
    # A torch.SymInt stays symbolic under torch.compile: int() would specialize the graph to one length.
    return backend.STEPS[Reshape](Reshape(tuple(planner.length_of(n) for n in shape)))(t, None)


def _prod(shape: Iterable[int]) -> int:
    out = 1
    for n in shape:
        out *= planner.length_of(n)
    return out



def _pack_split(pattern: str, op: str) -> tuple[int, int]:
    if pattern.__class__ is not str:
        recipe.parse(pattern)  # the RearrError that says a pattern is a str (not a cache's TypeError)
    return _pack_split_cached(pattern, op)


@lru_cache(maxsize=256)
def _pack_split_cached(pattern: str, op: str) -> tuple[int, int]:
    (dims,) = recipe.analyze(pattern, op).inputs
    star = [d.names for d in dims].index(("*",))
    return star, len(dims) - star - 1


def asnumpy(tensor: Any) -> NDArray[Any]:
    """The tensor as a numpy array (detached and on the CPU for torch), as einops.asnumpy."""
    try:  # a backend refuses what numpy cannot hold with its own RearrError and fix; a lazy array's
        return backend_for(tensor).to_numpy(tensor)  # computation raises what it raises
    except RearrError as e:
        raise e.with_context(op="asnumpy") from None


def parse_shape(tensor: Any, pattern: str) -> dict[str, int]:
    """The lengths of the named axes: parse_shape(x, "b _ h w") -> {'b': 2, 'h': 5, 'w': 7}."""
    try:
        x, _ = _tensor_and_backend(tensor)
        shape = tuple(x.shape)
        if pattern.__class__ is not str:
            recipe.parse(pattern)  # the RearrError that says a pattern is a str (not a cache's TypeError)
        result: dict[str, int] = {}
        for k, name, want, col in _parse_shape_layout(pattern, len(shape)):
            n = shape[k]  # a skipped dimension ('_', '...') may stay unknown
            if planner.unknown_length(n):
                raise planner.unknown_lengths(f"dimension {k} of the input's shape {shape} is unknown", col=col)
            n = planner.length_of(n)
            if name is not None:
                result[name] = n
            elif n != want:
                raise RearrError(f"dimension {k} has length {n}, the pattern says {want}", code="RA303",
                                 pattern=pattern, col=col, hint="use '_' to skip a dimension")
        return result
    except RearrError as e:
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None, shape=_shape_of(tensor),
                             op="parse_shape") from None


def _parse_shape_layout(pattern: str, ndim: int) -> tuple[tuple[int, str | None, int, int], ...]:
    """(dimension, axis name or None for a unit/anonymous axis, its required length, column) per checked
    dimension. Needs only the pattern and the rank: torch.compile runs it once, as a constant."""
    (dims,) = recipe.analyze(pattern, "parse_shape").inputs
    ins, _ = planner.expand_ellipsis(pattern, dims, ndim)
    out = []
    for k, dim in enumerate(ins):
        names = dim.names
        if names == ("_",) or (names and names[0].startswith(recipe.ELLIPSIS)):
            continue
        anonymous = recipe.anonymous_length(names[0]) if names else 1
        out.append((k, names[0], 0, dim.col) if anonymous is None else (k, None, anonymous, dim.col))
    return tuple(out)


# torch.compile's dynamo calls these at trace time and keeps the result as a constant (the attribute
# that torch._dynamo.assume_constant_result sets; setting it needs no torch import).
_parse_shape_layout._dynamo_marked_constant = True  # type: ignore[attr-defined]


# Every plan table and cache, each bounded, with cache_info() and cache_clear() (tests check the bounds).
_CACHES = (recipe.analyze, _compiled, _indexed, _direct_runs, index_names, _einsum_calls, _einsum_plan)


