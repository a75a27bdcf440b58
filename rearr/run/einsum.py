"""einsum's careful path: the operands and pattern checked, the EinsumPlan found or made
(cache.einsum_plan), compiled to its program, a two-operand one kept for the fast path
(cache.EINSUM_PAIRS), run."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..backends import _BY_TYPE, backend_for
from ..errors import RearrError
from ..planning.einsum import fitting
from ..rules import recipe
from . import cache

if TYPE_CHECKING:
    from ..planning.einsum import EinsumPlan


def planned_call(tensors_and_pattern: tuple, axes_lengths: dict[str, Any], key: tuple | None = None) -> Any:
    """Plan through cache.einsum_plan, keep a two-operand program for einsum's look-up (under key, the
    call's key there as the look-up built it), run."""
    pattern = tensors_and_pattern[-1] if tensors_and_pattern else None
    tensors = tensors_and_pattern[:-1]
    if pattern.__class__ is str and tensors:
        backend = _BY_TYPE.get(tensors[0].__class__)
        if backend is not None:  # (an nn.Parameter is another class of the same backend)
            shapes = tuple([t.shape for t in tensors if _BY_TYPE.get(t.__class__) is backend])
            if len(shapes) == len(tensors):
                lengths = _plan_lengths(pattern, axes_lengths, shapes) if axes_lengths else ()
                entry = program(backend, _planned(pattern, shapes, lengths))
                if key is not None:  # else a call the look-up does not key: it never looks
                    cache.einsum_pairs.add(key, entry)
                return run(backend, *entry, tensors)
    return careful(tensors_and_pattern, axes_lengths)


def careful(args: tuple, axes_lengths: dict[str, Any]) -> Any:
    """The slow path: every way the call can be wrong gets its RearrError, then the program runs."""
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
        other = backend_for(t)
        if other is not backend:
            first, this = type(tensors[0]).__name__, type(t).__name__
            # one library, two kinds of its tensors (torch: a DTensor and a plain tensor or Parameter)
            hint = (f"make operand {k} a {first} as operand 0 is (or every operand a {this})"
                    if other.name == backend.name else "give einsum tensors of one library")
            raise RearrError(f"operand {k} is a {this}, operand 0 a {first}", code="RA500", hint=hint)
    shapes = tuple(tuple(t.shape) for t in tensors)
    plan = _planned(pattern, shapes, tuple(_lengths(pattern, axes_lengths, shapes).items()))
    return run(backend, *program(backend, plan), tuple(tensors))


def _plan_lengths(pattern: str, axes_lengths: dict[str, Any], shapes: tuple) -> tuple:
    """The lengths as einsum_plan's key: plain ints as they are, anything else validated first (2.0 == 2)."""
    for value in axes_lengths.values():
        if value.__class__ is not int:
            return tuple(_lengths(pattern, axes_lengths, shapes).items())
    return tuple(axes_lengths.items())


def _lengths(pattern: str, axes_lengths: dict[str, Any], shapes: tuple) -> dict[str, int]:
    """Each length keyword as its int, or RA305 with a fix that fits the operands' shapes."""
    r = recipe.analyze(pattern, "einsum", None, tuple(sorted(axes_lengths)))
    items = axes_lengths.items()
    return {name: recipe.check_length_value(r, name, value, functools.partial(fitting, pattern, shapes, items, name))
            for name, value in items}


def _planned(pattern: str, shapes: tuple, lengths: tuple) -> EinsumPlan:
    try:
        return cache.einsum_plan(pattern, shapes, lengths)
    except TypeError:  # symbolic shapes under torch.compile cannot be hashed: planned without the cache
        return cache.einsum_plan.__wrapped__(pattern, shapes, lengths)


def program(backend: Any, plan: EinsumPlan) -> tuple:
    """(run, pre, arg, post): the einsum is ``run(arg, *operands)`` on the operands reshaped to pre, then
    reshaped to post. run is the backend's einsum, arg its spec; or, where the backend lowers a matrix
    product to matmul (EINSUM_MATMUL) and the plan is one, matmul_run with the plan's steps as calls."""
    pre, spec, post, mm = plan
    if mm is None or not backend.EINSUM_MATMUL:
        return backend.einsum, pre, spec, post
    table = backend.STEPS
    a, b, out = (tuple(table[type(step)](step) for step in steps) for steps in (mm.a, mm.b, mm.out))
    return matmul_run, (), (a, b, out, mm.swap, backend.matmul), None


def matmul_run(arg: tuple, a: Any, b: Any) -> Any:
    """An EinsumMatmul's program: each operand's native calls (its steps compiled), matmul (the operands
    swapped where it says so), the result's calls."""
    a_calls, b_calls, out_calls, swap, matmul = arg
    for call in a_calls:
        a = call(a, None)
    for call in b_calls:
        b = call(b, None)
    out = matmul(b, a) if swap else matmul(a, b)
    for call in out_calls:
        out = call(out, None)
    return out


def run(backend: Any, call: Callable, pre: tuple, arg: Any, post: tuple | None, tensors: tuple) -> Any:
    if pre:
        tensors = tuple(t if shape is None else t.reshape(shape) for t, shape in zip(tensors, pre))
    try:
        out = call(arg, *tensors)
    except (RuntimeError, ValueError, TypeError) as e:
        refused(backend, e)
    return out if post is None else out.reshape(post)


def refused(backend: Any, e: Exception) -> None:
    """Raise the RearrError for an einsum the backend refused."""
    if isinstance(e, RearrError):  # the backend's own refusal, already in rearr's words
        raise e
    # Shapes were checked before: what is left is dtype, device or memory, in the backend's words.
    raise RearrError(f"{backend.name} refused the einsum: {e}", code="RA500",
                     hint="give the operands one dtype and device") from None
