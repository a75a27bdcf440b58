"""The careful path of calls with index brackets: the indexes converted and checked, the program found
in (or compiled into) the indexed table, run; and, once a call has passed, its direct program for the
fast path (cache.DIRECT)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..backends import backend_for
from ..backends._common import one_dtype, refused_index
from ..backends.contract import DirectIndexEnv, IndexEnv
from ..errors import RearrError
from ..planning import planner
from ..planning.lengths import known_shape
from ..planning.plan import AdvancedIndex, GatherAlong, ScatterAlong
from ..rules import recipe
from . import cache
from .program import analyze, compile_steps, length_value, one_function


def run(op: str, x: Any, backend: Any, pattern: str, reduction: object, kwargs: dict[str, Any], into: Any,
        fill: object, check_bounds: bool | str, direct: tuple | None = None) -> Any:
    """Convert and check the indexes, find or compile the program, run it (once: a refusal by a native
    call that was left to check an index is named by rearr's own check, see after_refusal). direct: the
    call's key in cache.direct as its reader built it, under which the call's direct program is kept;
    None where the reader does not look the call up there."""
    if not isinstance(pattern, str):
        recipe.parse(pattern)  # raises the RearrError that says so
    into_shape = None
    if into is not None:
        check_into(into, x, backend)
        into_shape = known_shape(into.shape, "into=", "into")
    uses, program, natively_checked, unchecked = program_of(op, x, backend, pattern, reduction, kwargs,
                                                            into_shape, check_bounds)
    indices: dict[str, Any] = {}
    left_to_native, to_check = [], []
    native = check_bounds != "async"  # "async": device-side checks only, never a host read after a refusal
    for use in uses:
        t = indices[use.name] = backend.convert_index(kwargs[use.name], x, use.name, pattern, check_bounds)
        if check_bounds:
            if native and use.name in natively_checked and backend.checks_natively(t):
                left_to_native.append(use)
            else:
                to_check.append((t, use))
    if to_check:  # all at once: a sharded backend decides for every index with one exchange
        for (_, use), t in zip(to_check, backend.check_indexes(to_check, pattern, check_bounds)):
            indices[use.name] = t
    env = IndexEnv(pattern, indices, fill, into, check_bounds)
    if left_to_native:
        out = run_left_to_native(program, x, env, left_to_native, backend)
    elif check_bounds:
        out = program(x, env)
    else:
        out = unchecked_run(program, x, env, backend, uses)
    if direct is not None and backend.READY_INDEXES:
        # the dtype check passed: the next such call finds the Plan's native calls in DIRECT
        cache.direct.get_or_make(direct, direct_program, uses, unchecked, natively_checked, backend, pattern,
                         tuple(kwargs), check_bounds)
    return out


def unchecked_run(program: Callable, x: Any, env: IndexEnv, backend: Any, uses: tuple) -> Any:
    """program(x, env) under check_bounds=False: a native call's refusal of an index is RA501, which
    names the index of ``uses`` and the value that broke the promise; any other error is the program's own."""
    try:
        return program(x, env)
    except (IndexError, RuntimeError, ValueError) as e:
        if not backend.index_fault(e):
            raise
        raise refused_index(backend.name, e, env.text, uses, env.indices) from None


def program_of(op: str, x: Any, backend: Any, pattern: str, reduction: object, kwargs: dict[str, Any],
               into_shape: tuple | None, checks: bool | str) -> tuple[tuple, Callable, frozenset, Callable]:
    """The indexed table's entry for the call, found there or compiled and kept: keyed by
    cache.indexed_key on the index tensors' shapes and the int lengths."""
    keywords = ready_keywords(kwargs, backend.TENSOR)
    if keywords is not None:  # the common call: one look-up
        key = cache.indexed_key(op, pattern, reduction, backend, x.shape, keywords, into_shape)
        try:
            return cache.indexed.get_or_make(key, compile_indexed, *key)
        except TypeError:  # unhashable, or an int where an index belongs: read again below, converted
            pass
    names, read = cache.index_names(pattern), []
    for name, value in kwargs.items():
        if name in names:
            read.append((name, backend.convert_index(value, x, name, pattern, checks).shape))
        else:
            read.append((name, value if value.__class__ is int else length_value(op, pattern, reduction, kwargs,
                                                                                  name, value, x.shape)))
    key = cache.indexed_key(op, pattern, reduction, backend, x.shape, tuple(read), into_shape)
    try:
        return cache.indexed.get_or_make(key, compile_indexed, *key)
    except TypeError:  # unhashable: see rearr.run.cache
        return compile_indexed(*key)


def ready_keywords(kwargs: dict[str, Any], tensor: type) -> tuple | None:
    """Each keyword as the indexed key holds it, (name, the index's shape or the int length), where every
    value is a tensor of the backend's own class or an int; else None (a list index, a numpy int
    length, a 0-d tensor that may be a length: program_of reads them one by one)."""
    out = []
    for name, value in kwargs.items():
        kind = value.__class__
        if kind is tensor and value.ndim:
            out.append((name, value.shape))
        elif kind is int:
            out.append((name, value))
        else:
            return None
    return tuple(out)


def compile_indexed(
    op: str, text: str, reduction: object, backend: Any, shape: tuple, keywords: tuple, into_shape: tuple | None
) -> tuple[tuple, Callable, frozenset[str], Callable]:
    """Plan a call with index brackets and compile it; ``keywords`` holds lengths and the index tensors'
    shapes. The index uses, the program, the indexes whose native calls check them, and the program
    without its dtype check (for DIRECT, whose key holds a dtype that passed it)."""
    names = cache.index_names(text)
    lengths = tuple((n, v) for n, v in keywords if n not in names)
    if any(isinstance(v, tuple) for _, v in lengths):  # a tensor passed as a length, keyed by its shape:
        raise TypeError  # program_of's slower loop says what it is, by its value
    index_shapes = tuple((n, tuple(v)) for n, v in keywords if n in names)
    r = analyze(text, op, reduction, tuple(sorted(n for n, _ in keywords)))
    p = planner.plan(r, tuple(shape), lengths, index_shapes, into_shape, results=backend.RESULTS)
    calls, check = compile_steps(p.steps, backend)
    program = one_function(calls if check is None else (check, *calls))
    return p.indices, program, natively_checked(p, backend), one_function(calls)


def natively_checked(p: Any, backend: Any) -> frozenset[str]:
    """The indexes that only steps whose native call checks them (backend.checks_step_natively)
    read, each term the whole coordinate of one axis of its own length: the native call refuses a bad
    value there, so rearr need not look at the values first. Not under 'set', whose duplicate check
    must see the values counted from the end, nor where another axis has length 0: the native call then
    sees an empty (expanded) index and checks nothing."""
    checks_step = backend.checks_step_natively
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
        empty = 0 in size or bool(p.layouts) and 0 in p.layouts[k].shape
        by_native_call = checks_step(step) and getattr(step, "reduction", None) != "set" and not empty
        for dim, term in axes.items():
            ok = by_native_call and term.stride == 1 and dim < len(size) and size[dim] == term.length
            (native if ok else other).add(term.index)
    return frozenset(native - other - {None})


def direct_program(
    uses: tuple, unchecked: Callable, natively_checked: frozenset, backend: Any, pattern: str,
    names: tuple[str, ...], checks: bool = True,
) -> Callable:
    """An indexed program as one function f(x, keywords) for the common call: every index a tensor that
    needs no conversion (backend.ready_index), every length an int. With checks (check_bounds=True),
    the indexes that the native calls check (see natively_checked) are passed as they are, the others
    go through check_index; without, every index is passed as it is, as the careful path does. Anything
    else, or any failure before the program runs, returns cache.CAREFUL: run then does the call again
    and says why. ``names`` are the call's keywords, which the DIRECT key fixes."""
    ready, check_index, careful = backend.ready_index, backend.check_index, cache.CAREFUL
    index_names = tuple(u.name for u in uses)
    length_names = tuple(name for name in names if name not in index_names)
    checked = tuple(u for u in uses if u.name not in natively_checked) if checks else ()
    native_uses = tuple(u for u in uses if u.name in natively_checked)

    if checks and not checked and len(index_names) == 1:  # the common call: one index, the native calls check it
        (name,) = index_names

        def call_one(x: Any, kwargs: dict[str, Any]) -> Any:  # call's path for it, without loops
            if not ready(kwargs[name], x):
                return careful
            if length_names:
                for length in length_names:
                    if kwargs[length].__class__ is not int:
                        return careful
            env = DirectIndexEnv()  # IndexEnv(pattern, kwargs, 0, None, True)
            env.text, env.indices = pattern, kwargs
            try:  # run_left_to_native written out: its frame is a measurable part of a tiny gather
                return unchecked(x, env)
            except Exception:
                out = after_refusal(unchecked, x, env, native_uses, backend)
                if out is None:
                    raise
                return out

        return call_one

    def call(x: Any, kwargs: dict[str, Any]) -> Any:
        for name in index_names:
            if not ready(kwargs[name], x):
                return careful
        if length_names:  # most gathers have none: no loop
            for name in length_names:
                if kwargs[name].__class__ is not int:
                    return careful
        if not checks:
            return unchecked_run(unchecked, x, IndexEnv(pattern, kwargs, 0, None, False), backend, uses)
        indices = kwargs  # the steps read only the index names (IndexEnv keeps them apart from text/fill/into)
        if checked:
            indices = dict(kwargs)
            try:
                for use in checked:
                    indices[use.name] = check_index(indices[use.name], use, pattern)
            except Exception:  # a bad value: the careful path names it (nothing has run yet)
                return careful
        env = DirectIndexEnv()  # IndexEnv(pattern, indices, 0, None, True)
        env.text, env.indices = pattern, indices
        return run_left_to_native(unchecked, x, env, native_uses, backend)

    return call


def run_left_to_native(program: Callable, x: Any, env: IndexEnv, left: Iterable, backend: Any) -> Any:
    """program(x, env), where the indexes ``left`` are checked by the native calls alone; if it fails,
    after_refusal names a bad value or runs it once more with negative values counted, else the
    program's own error stands."""
    try:
        return program(x, env)
    except Exception:
        out = after_refusal(program, x, env, left, backend)
        if out is None:
            raise
        return out


def after_refusal(program: Callable, x: Any, env: IndexEnv, left: Iterable, backend: Any) -> Any:
    """A program failed whose indexes ``left`` rearr left to the native calls to check. rearr's own
    check now names a bad value (RA501, raised). An index whose values were all in range but negative
    ones (counted from the end by rearr; numpy's native calls count them too, torch's refuse them
    before any work) runs the program with those counted: the one run that did its work. Otherwise
    None: the program's own error stands, raised by the caller."""
    indices, counted = dict(env.indices), False
    items = [(indices[use.name], use) for use in left]
    for (t, use), checked in zip(items, backend.check_indexes(items, env.text, env.checks)):
        indices[use.name] = checked
        counted = counted or checked is not t
    return program(x, IndexEnv(env.text, indices, env.fill, env.into, env.checks)) if counted else None


def check_into(into: Any, x: Any, backend: Any) -> None:
    if backend_for(into) is not backend:
        raise RearrError("into= must be the same kind of tensor as the source", code="RA500",
                         hint="convert one of them")
    places = backend.place(into), backend.place(x)
    apart = None not in places and places[0] != places[1]
    same = one_dtype(into.dtype, x.dtype)  # a numpy dtype in either byte order is one
    if not same or apart:
        raise RearrError(f"into= is {into.dtype} on {getattr(into, 'device', 'cpu')}, the source "
                         f"{x.dtype} on {getattr(x, 'device', 'cpu')}", code="RA500",
                         hint="put into= where the source is: into.to(x.device) on torch, "
                         "jax.device_put(into, x.sharding) on jax (for an x sharded over a mesh: "
                         "jax.sharding.NamedSharding(x.sharding.mesh, jax.sharding.PartitionSpec()))" if same else
                         "convert into= to the source's dtype and device, e.g. into=into.astype(x.dtype) "
                         "(numpy, jax) or into=into.to(x) (torch); the result has the source's dtype")
    backend.check_into(into, x)
