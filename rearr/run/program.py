"""A call's Plan compiled to its program: one function run(x, env) over the backend's native calls;
for a call without index brackets, found in (or added to) cache.plain."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..backends import compile_plan
from ..planning import planner
from ..rules import arguments, recipe
from . import cache


def plain_entry(op: str, pattern: str, reduction: object, x: Any, backend: Any, lengths: dict) -> Any:
    """The program of a call without brackets (int lengths): from cache.plain, else compiled now and
    kept there, so that the fast path (rearr.run._front_doors) finds it on the next call."""
    items = tuple(lengths.items())
    key = cache.plain_key(op, pattern, reduction, x, lengths)
    try:
        if key is not None:  # else a symbolic length (torch.compile): planned for this call alone
            return cache.plain.get(key, plain, op, pattern, reduction, backend, x.shape, items)
    except TypeError:  # unhashable: see rearr.run.cache
        pass
    return plain(op, pattern, reduction, backend, x.shape, items)


def plain(op: str, text: str, reduction: object, backend: Any, shape: tuple, lengths: tuple) -> Callable:
    """Plan a call without index brackets and compile the Plan to its program run(x, env)."""
    r = analyze(text, op, reduction, tuple(sorted(name for name, _ in lengths)))
    return one_function(compile_plan(planner.plan(r, tuple(shape), lengths).steps, backend))


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


def length_value(op: str, pattern: str, reduction: object, kwargs: dict, name: str, value: object) -> object:
    """A keyword that is not a plain int: an index as it is, a length as the int it stands for (or
    torch.compile's symbolic length), else the RearrError."""
    if arguments.symbolic(value):  # torch.compile's dynamic length, e.g. c=x.shape[1] * 2
        return value
    r = analyze(pattern, op, reduction, tuple(sorted(kwargs)))
    return value if name in r.index_names else recipe.check_length_value(r, name, value)
