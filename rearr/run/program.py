"""A call's Plan compiled to its program: the backend's native calls after the plan's dtype check
(prelude), as one function run(x, env); for a call without index brackets, found in (or added to)
cache.unindexed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..backends.contract import native_calls
from ..planning import lengths, planner
from ..planning.plan import AdvancedIndex, Expand, GatherAlong, Reduce, Reshape, ScatterAlong, ScatterRows, TakeRows
from ..planning.policy import check_bytes, check_fill, check_reduction, not_numbers
from ..rules import arguments, recipe
from ..rules.arguments import symbolic_number
from . import cache


def unindexed_program(op: str, pattern: str, reduction: object, x: Any, backend: Any, lengths: dict,
                      key: tuple | None) -> Any:
    """The program of a call without brackets (int lengths): from cache.unindexed under key (the call's
    key there, cache.unindexed_key's), else compiled now and kept under key, where the public function
    looks it up on the next call."""
    items = tuple(lengths.items())
    try:
        if key is not None:  # else a symbolic length (torch.compile): planned for this call alone
            return cache.unindexed.get_or_make(key, compile_unindexed, op, pattern, reduction, backend, x.shape, items)
    except TypeError:  # unhashable: see rearr.run.cache
        pass
    return compile_unindexed(op, pattern, reduction, backend, x.shape, items)


def compile_unindexed(op: str, text: str, reduction: object, backend: Any, shape: tuple, lengths: tuple) -> Callable:
    """Plan a call without index brackets and compile the Plan to its program run(x, env)."""
    r = analyze(text, op, reduction, tuple(sorted(name for name, _ in lengths)))
    plan = planner.plan(r, tuple(shape), lengths, results=backend.RESULTS)
    return one_function(compile_plan(plan.steps, backend))


def one_function(calls: tuple) -> Callable:
    """A Plan's native calls as one function: most Plans are one or two calls, run with no loop."""
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


def analyze(text: str, op: str, reduction: object, names: tuple) -> recipe.Recipe:
    """The call's Recipe, for the operation it stands for (reduce's "rearrange" is a rearrange: the
    tables key the call as it was made, the Recipe is the operation's)."""
    op, reduction = recipe.operation(op, reduction)
    try:
        return recipe.analyze(text, op, reduction, names)
    except TypeError:  # an unhashable reduction callable
        return recipe.analyze.__wrapped__(text, op, reduction, names)


def length_value(op: str, pattern: str, reduction: object, kwargs: dict, name: str, value: object,
                 shape: tuple | None = None) -> object:
    """A keyword that is not a plain int: an index as it is, a length as the int it stands for (or
    torch.compile's symbolic length), else the RearrError, whose fix offers a length that fits the
    input's ``shape``."""
    if arguments.symbolic(value):  # torch.compile's dynamic length, e.g. c=x.shape[1] * 2
        return value
    r = analyze(pattern, op, reduction, tuple(sorted(kwargs)))
    if name in r.index_names:
        return value
    if shape is None:
        return recipe.check_length_value(r, name, value)

    def fits(n: int) -> object:
        return lengths.resolve(r, lengths.known_shape(shape), (*lengths.others(kwargs.items(), name), (name, n)))

    return recipe.check_length_value(r, name, value, lambda near: lengths.fitting_length(fits, shape, near))


def compile_plan(steps: tuple, backend: Any) -> tuple[Callable, ...]:
    """Each step as the backend's native call(s), ready to run, after the plan's dtype check if it needs one."""
    calls, check = compile_steps(steps, backend)
    return calls if check is None else (check, *calls)


def compile_steps(steps: tuple, backend: Any) -> tuple[tuple[Callable, ...], Callable | None]:
    """Each step as the backend's native call(s), and apart, the plan's dtype check (prelude) or None."""
    return native_calls(steps, backend), prelude(steps, backend)


# --- the dtype check (rearr.planning.policy's rules, asked of the call's tensor) --------------------

# Below this many elements no dtype (itemsize <= 2**20 bytes) can reach INT64_MAX bytes: no check needed.
_SMALL = 2**43
_GATHERS = (TakeRows, GatherAlong, AdvancedIndex)
_SCATTERS = (ScatterRows, ScatterAlong)


def prelude(steps: tuple, backend: Any) -> Callable[[Any, Any], Any] | None:
    """The one dtype check a plan needs before its native calls run, or None."""
    reductions = [s.reduction for s in steps if isinstance(s, Reduce) and isinstance(s.reduction, str)]
    scatter = next((s.reduction for s in steps if isinstance(s, _SCATTERS)), None)
    gather = any(isinstance(s, _GATHERS) for s in steps)
    largest = max((_elements(s) for s in steps), default=0)
    if not reductions and scatter is None and not gather and largest < _SMALL:
        return None
    kind_of, bounds_of, itemsize_of = backend.dtype_kind, backend.dtype_range, backend.itemsize
    moves_other = backend.INDEXES_OTHER
    # (Tensor class, dtype) pairs this plan has accepted: every rule but fill='s depends on the dtype alone (the plan
    # fixes the rest), so a repeated call costs one set look-up.
    passed: set = set()

    def check(x: Any, env: Any) -> Any:
        key = (x.__class__, x.dtype)  # the class first: dtypes of two libraries never meet in ==
        if key not in passed:
            kind = kind_of(x)
            for r in reductions:
                check_reduction(kind, x.dtype, r, f"reduce '{r}'")
            if gather and kind == "other" and not moves_other:
                raise not_numbers(x.dtype, f"a gather on {backend.name}")
            if scatter is not None:
                check_reduction(kind, x.dtype, scatter, f"scatter '{scatter}'", moves_other)
            if largest >= _SMALL:
                check_bytes(largest, itemsize_of(x))
            passed.add(key)
        if scatter is not None and not symbolic_number(env.fill) and env.fill != 0 and env.into is None \
                and kind_of(x) != "other":  # (a SymFloat fill under torch.compile: the backend's own rules)
            env.fill = check_fill(kind_of(x), bounds_of(x), x.dtype, env.fill)
        return x

    return check


def _elements(step: object) -> int:
    """The elements of the largest tensor a step makes (views included: numpy counts them in bytes too)."""
    if isinstance(step, Reshape | Expand):
        return math.prod(step.shape)
    if isinstance(step, ScatterRows):  # (rows, width): the whole result is the Reshape after it
        return step.rows
    if isinstance(step, ScatterAlong):
        return math.prod(step.shape)
    return 0
