"""The call path of every op past its public function (rearr.api): a look-up in the op's table of
calls seen before (the direct table of indexed calls, einsum's table of two-operand calls), then the
careful path (every check the look-up skipped, then the program found or made: by rearr.run.program,
indexed or einsum), errors in the call's context. A program runs at most once per call: what it
raises is what the caller sees.

Each table's key is built once, by the function of rearr.run.cache that its reader calls, and passed
down the careful path to the writer, which keeps the program under that same key."""

from __future__ import annotations

from functools import cache as _once
from types import ModuleType
from typing import Any

from ..backends import _BY_TYPE, backend_for
from ..errors import RearrError
from . import cache
from .cache import CAREFUL, direct_key, einsum_key, unindexed_key

# Assigned, not imported: the look-ups are method calls (see rearr.api's _UNINDEXED).
DIRECT, EINSUM_PAIRS = cache.DIRECT, cache.EINSUM_PAIRS


# The careful path's modules, each imported by the first call that needs it and held from then on:
# `import rearr` loads no rule and no planner, and an import statement in a function body runs
# importlib's machinery each time it runs (CPython 3.11), on every careful call (a scatter with
# fill= takes the careful path on every call).


@_once
def _program() -> ModuleType:
    from . import program

    return program


@_once
def _indexed() -> ModuleType:
    from . import indexed

    return indexed


@_once
def _einsum() -> ModuleType:
    from . import einsum

    return einsum


@_once
def _arguments() -> ModuleType:
    from ..rules import arguments

    return arguments


def scatter(src: Any, pattern: str, reduction: str, fill: Any, into: Any, check_bounds: bool | str,
            kwargs: dict[str, Any]) -> Any:
    """scatter: the direct program of a call seen before, else the careful path."""
    direct = None
    if fill is None and into is None and (check_bounds is True or check_bounds is False):  # see cache.DIRECT
        try:
            direct = direct_key("scatter", src, pattern, reduction, check_bounds, kwargs)
            run = DIRECT.get(direct)
        except Exception:  # not hashable, or not a tensor: the careful path
            direct = run = None
        if run is not None:
            try:
                out = run(src, kwargs)
            except Exception as e:  # as in transform: the program ran once
                raise_in_context(e, "scatter", src, pattern, kwargs)
                raise
            if out is not CAREFUL:  # else it declined before running: the careful path says why
                return out
    arguments = _arguments()
    try:
        if check_bounds is not True and check_bounds is not False:
            check_bounds_mode(check_bounds, "scatter", pattern)
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
            x, backend = tensor_and_backend(src)
        return _indexed().run("scatter", x, backend, pattern, reduction, kwargs, into, 0 if fill is None else fill,
                              check_bounds, direct)
    except Exception as e:
        raise_in_context(e, "scatter", src, pattern, kwargs, into)
        raise


def einsum(args: tuple, lengths: dict[str, Any]) -> Any:
    """einsum: a two-operand call seen before runs from cache.EINSUM_PAIRS, others take the careful path."""
    try:
        key = None
        if len(args) == 3:  # two operands, the common call: its overhead counts
            a, b, pattern = args
            try:
                key = einsum_key(pattern, a, b, lengths)
                entry = EINSUM_PAIRS.get(key)
            except (AttributeError, TypeError):  # not a tensor; a symbolic shape (torch.compile) does not hash
                key = entry = None
            if entry is not None:
                run, pre, arg, post = entry
                if pre:
                    a = a if pre[0] is None else a.reshape(pre[0])
                    b = b if pre[1] is None else b.reshape(pre[1])
                try:
                    out = run(arg, a, b)
                except (RuntimeError, ValueError, TypeError) as e:
                    _einsum().refused(_BY_TYPE[a.__class__], e)
                return out if post is None else out.reshape(post)
        return _einsum().planned_call(args, lengths, key)
    except RearrError as e:
        tensors = args[:-1]
        pattern = args[-1] if args else None
        shapes = tuple(shape_of(t) for t in tensors)
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None,
                             shape=shapes if shapes and None not in shapes else None, op="einsum") from None


def transform(op: str, tensor: Any, pattern: str, reduction: object, lengths: dict[str, Any],
              check_bounds: bool | str = True, key: tuple | None = None, direct: tuple | None = None) -> Any:
    """The careful path of rearrange, reduce and repeat, past their look-ups (rearr.api): the arguments
    checked, the program found in or compiled into its table, run. key and direct: the call's keys in
    the unindexed and the direct table as the look-ups built them, under which the program is kept (None
    where a look-up had none: a list input, a length that is not an int, a call that is not a gather
    with check_bounds True or False)."""
    program = _program()
    if op == "reduce":
        err = _arguments().reduction_error("reduce", reduction, pattern if isinstance(pattern, str) else None)
        if err is not None:
            raise err
    try:
        backend = _BY_TYPE.get(type(tensor))
        if backend is None:
            tensor, backend = tensor_and_backend(tensor)
        if pattern.__class__ is not str or "[" in pattern:
            return _indexed().run(op, tensor, backend, pattern, reduction, lengths, None, 0, check_bounds, direct)
        if key is None:  # the look-up could not key the call as made: key it as it runs
            for value in lengths.values():
                if value.__class__ is not int:  # 2.0 == 2 in a key: validate before the look-up
                    lengths = {n: program.length_value(op, pattern, reduction, lengths, n, v, tensor.shape)
                               for n, v in lengths.items()}
                    break
            key = unindexed_key(op, pattern, reduction, tensor, lengths)
        return program.unindexed_program(op, pattern, reduction, tensor, backend, lengths, key)(tensor, None)
    except Exception as e:
        raise_in_context(e, op, tensor, pattern, lengths)
        raise


def raise_in_context(e: Exception, op: str, tensor: Any, pattern: object, kwargs: dict, *more: object) -> None:
    """What a failed call raises: a RearrError with the call's pattern, shape and op filled in; the
    RearrError that says why torch refused a sparse or nested tensor (refuse_unusual); or, by
    returning, e itself for the caller to re-raise unchanged."""
    if isinstance(tensor, str) and not isinstance(pattern, str):  # rearrange('b c -> c b', x)
        from ..rules import recipe

        raise recipe.swapped_arguments(op, tensor) from None
    if isinstance(e, RearrError):
        text = pattern if isinstance(pattern, str) else None
        col = index_col(e, text) if e.col is None and text is not None and "index '" in e.message else None
        raise e.with_context(pattern=text, shape=shape_of(tensor), op=op, col=col) from None
    if isinstance(e, RuntimeError | NotImplementedError):
        first = tensor[0] if isinstance(tensor, list | tuple) and tensor else tensor
        try:
            backend = _BY_TYPE.get(type(first)) or backend_for(first)
        except RearrError:  # not a tensor: e stands
            return
        refuse_unusual(e, backend, (tensor, *more, *kwargs.values()))


def refuse_unusual(error: Exception, backend: Any, values: Any) -> None:
    """Raise the RearrError for a backend failure caused by an input the backend runs few ops on
    (torch's sparse and nested tensors); return when no input is one (the caller re-raises)."""
    for v in values:
        what = backend.unusual(v)
        if what is not None:
            raise RearrError(f"{backend.name} cannot run this pattern on {what}: {error}"[:400], code="RA500",
                             hint="convert it to a dense tensor first: x.to_dense(), or "
                             "x.to_padded_tensor(0) for a nested one") from error


def index_col(e: RearrError, pattern: str) -> int | None:
    """Where in its pattern the index that e names (its dtype, a duplicate under 'set', a value that is
    not an index) sits: the column of its name in its bracket; None where the pattern has no such index."""
    from ..rules import recipe  # here: only a failed call needs it

    try:
        specs = recipe.index_specs(recipe.parse(e.pattern if e.pattern is not None else pattern))
    except RearrError:
        return None
    return next((spec.col for spec in specs if f"index {spec.name!r}" in e.message), None)


def check_bounds_mode(value: object, op: str, pattern: object) -> None:
    """Raise the RearrError for a check_bounds= value that is not a mode (rules.arguments.CHECK_BOUNDS)."""
    err = _arguments().check_bounds_error(value)
    if err is not None:
        raise err.with_context(pattern=pattern if isinstance(pattern, str) else None, op=op)


def tensor_and_backend(tensor: Any) -> tuple[Any, Any]:
    """The tensor (a list or tuple of equal-shaped tensors stacked) and its backend."""
    if isinstance(tensor, list | tuple):
        if not tensor:
            raise RearrError("an empty list has no tensor to rearrange", code="RA500",
                             hint="pass at least one tensor")
        backend = backend_for(tensor[0])
        shape = tuple(tensor[0].shape)  # compared, not hashed: torch.compile's symbolic lengths do not hash
        same_shape = all(tuple(t.shape) == shape for t in tensor if backend.accepts(t))
        devices = {str(getattr(t, "device", "cpu")) for t in tensor if backend.accepts(t)}
        if not same_shape or len(devices) != 1 or not all(backend.accepts(t) for t in tensor):
            from ..planning.lengths import known_shape

            for k, t in enumerate(tensor):  # nan != nan: an unknown length is RA304, not "shapes differ"
                if backend.accepts(t):
                    known_shape(t.shape, f"list item {k}")
            raise RearrError("a list input must hold tensors of one library, shape and device",
                             code="RA500", shape=tuple(tuple(getattr(t, "shape", ())) for t in tensor),
                             hint="stack only equal-shaped tensors of the same kind")
        return backend.stack(tensor), backend
    return tensor, backend_for(tensor)


def shape_of(tensor: Any) -> object:
    if isinstance(tensor, list | tuple):
        return tuple(tuple(getattr(t, "shape", ())) for t in tensor) if tensor else None
    shape = getattr(tensor, "shape", None)
    return tuple(shape) if shape is not None else None


def asnumpy(tensor: Any) -> Any:
    try:  # a backend refuses what numpy cannot hold with its own RearrError and fix; a lazy array's
        return backend_for(tensor).to_numpy(tensor)  # computation raises what it raises
    except RearrError as e:
        raise e.with_context(op="asnumpy") from None
