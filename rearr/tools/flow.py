"""Ranks followed from call to call within a function body, for `rearr check`: certain errors only.

A name bound by ``y = rearrange(x, "b c h w -> b (c h w)")`` (or reduce, repeat), as a plain
statement of a function's body, has the rank of that pattern's output side; a later plain
statement's call ``rearrange(y, PATTERN)`` whose input side has another rank fails whatever the
tensors are (RA304, as the library raises it). What could change the tensor behind a name ends what
is known of it: a statement that binds the name anywhere in it (a branch, a loop, a ``with``, a
nested function), a method call on it (``y.unsqueeze_()``), passing it to a call that is not
rearr's, ``global`` or ``nonlocal``. Calls inside branches, loops and nested functions are not
checked; patterns with ``...`` or index brackets give no rank.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import RearrError
from ..rules.recipe import ELLIPSIS, analyze, operation

FOLLOWED = ("rearrange", "reduce", "repeat")
_PLAIN = (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)


@dataclass(frozen=True)
class Known:
    rank: int
    line: int
    side: str  # the output side that gives the rank, as written


Calls = dict[ast.Call, tuple[str, str]]  # the valid calls of FOLLOWED, with their operation and pattern


def check_functions(tree: ast.Module, calls: Calls) -> Iterator[tuple[ast.Call, ast.Constant, RearrError]]:
    """RA304 for each of the calls whose input rank cannot be its tensor's."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _body(node.body, calls)


def _body(body: list[ast.stmt], calls: Calls) -> Iterator[tuple[ast.Call, ast.Constant, RearrError]]:
    known: dict[str, Known] = {}
    for stmt in body:
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            return  # names shared with other code: nothing is certain
        if isinstance(stmt, _PLAIN):
            for call in _direct_calls(stmt):
                if call in calls and (found := _mismatch(call, *calls[call], known)) is not None:
                    yield found
        for name in _touched(stmt, calls):
            known.pop(name, None)
        bound = _binding(stmt, calls)
        if bound is not None:
            known[bound[0]] = bound[1]


def _direct_calls(stmt: ast.stmt) -> Iterator[ast.Call]:
    """The calls that the statement makes when it runs (not those of a lambda or a nested def)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            yield node
        stack.extend(c for c in ast.iter_child_nodes(node)
                     if not isinstance(c, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def _touched(stmt: ast.stmt, calls: Calls) -> set[str]:
    """The names whose tensor the statement may change or rebind."""
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):  # in a nested def: shared from here on
            names.update(node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                names.add(func.value.id)  # y.unsqueeze_(): a method may change its tensor in place
            if node not in calls:  # a call rearr does not know may change what it is given
                names.update(n.id for a in [*node.args, *(k.value for k in node.keywords)]
                              for n in ast.walk(a) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
    return names


def _binding(stmt: ast.stmt, calls: Calls) -> tuple[str, Known] | None:
    """``y = <a followed call>`` (or ``y: T = ...``): y and the rank it then has."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    if not isinstance(target, ast.Name) or not isinstance(value, ast.Call) or value not in calls:
        return None
    sides = _sides(value, *calls[value])
    if sides is None or sides[1] is None:
        return None
    return target.id, Known(sides[1], value.lineno, calls[value][1].partition("->")[2].strip())


def _mismatch(call: ast.Call, op: str, pattern: str, known: dict[str, Known]
              ) -> tuple[ast.Call, ast.Constant, RearrError] | None:
    first = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
    if not isinstance(first, ast.Name) or first.id not in known:
        return None
    sides = _sides(call, op, pattern)
    have = known[first.id]
    if sides is None or sides[0] is None or sides[0] == have.rank:
        return None
    literal = call.args[1] if len(call.args) > 1 else next(k.value for k in call.keywords if k.arg == "pattern")
    assert isinstance(literal, ast.Constant)
    inputs = pattern.partition("->")[0].strip()
    err = RearrError(
        f"{first.id} has {have.rank} dimensions ('{have.side}', from line {have.line}), "
        f"and the input side '{inputs}' has {sides[0]}",
        code="RA304", pattern=pattern,
        hint=f"give the input side the {have.rank} dimensions that line {have.line} makes ('{have.side}'), "
             f"or change the output side of line {have.line}",
    )
    return call, literal, err


def _sides(call: ast.Call, op: str, pattern: str, layer: bool = False) -> tuple[int | None, int | None] | None:
    """The ranks of the pattern's input and output sides (None: not certain, with '...')."""
    if "[" in pattern:
        return None
    at = 1 if layer else 2  # a layer takes no tensor: its reduction comes right after the pattern
    given = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "reduction"),
                                                           None)
    reduction = given.value if isinstance(given, ast.Constant) else "sum" if op == "reduce" else None
    lengths = tuple(sorted(k.arg for k in call.keywords if k.arg not in (None, "pattern", "reduction", "check_bounds")))
    try:
        recipe = analyze(pattern, *operation(op, reduction), lengths)  # type: ignore[arg-type]
    except RearrError:
        return None
    return tuple(None if any(ELLIPSIS in d.names for d in dims) else len(dims)  # type: ignore[return-value]
                 for dims in (recipe.inputs[0], recipe.outputs[0]))


def check_sequential(tree: ast.Module, layers: Calls) -> Iterator[tuple[ast.Call, ast.Constant, RearrError]]:
    """RA304 for each layer of ``nn.Sequential(a, b, ...)`` (torch's, which feeds each layer's output to
    the next) whose input rank cannot be its neighbour's output rank; both layers are among ``layers``."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _torch_sequential(node.func)):
            continue
        for before, after in zip(node.args, node.args[1:]):
            if before in layers and after in layers:  # type: ignore[comparison-overlap]
                found = _chain(before, after, layers)  # type: ignore[arg-type]
                if found is not None:
                    yield found


def _torch_sequential(func: ast.expr) -> bool:
    """``nn.Sequential`` or ``torch.nn.Sequential`` (flax's and keras' take a list, and are not followed)."""
    return (isinstance(func, ast.Attribute) and func.attr == "Sequential" and
            (isinstance(func.value, ast.Name) and func.value.id == "nn" or
             isinstance(func.value, ast.Attribute) and func.value.attr == "nn" and
             isinstance(func.value.value, ast.Name) and func.value.value.id == "torch"))


def _chain(before: ast.Call, after: ast.Call, layers: Calls) -> tuple[ast.Call, ast.Constant, RearrError] | None:
    first, second = _sides(before, *layers[before], layer=True), _sides(after, *layers[after], layer=True)
    if first is None or second is None or first[1] is None or second[0] is None or first[1] == second[0]:
        return None
    literal = after.args[0] if after.args else next(k.value for k in after.keywords if k.arg == "pattern")
    assert isinstance(literal, ast.Constant)
    made, wanted = layers[before][1].partition("->")[2].strip(), layers[after][1].partition("->")[0].strip()
    err = RearrError(
        f"the layer before (line {before.lineno}) makes {first[1]} dimensions ('{made}'), and this layer's "
        f"input side '{wanted}' has {second[0]}", code="RA304", pattern=layers[after][1],
        hint=f"give the input side the {first[1]} dimensions that the layer before makes ('{made}'), "
             f"or change that layer's output side")
    return after, literal, err
