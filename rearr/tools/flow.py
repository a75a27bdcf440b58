"""Shapes followed from call to call within a function body, for `rearr check`: certain errors only.

A name bound by ``y = rearrange(x, "b (h w) -> b h w", h=2)`` (or reduce, repeat) in a function's
body has the rank of that pattern's output side and the lengths known there (literal keywords,
anonymous axes, and the lengths that the call's own input gave); a parameter or a local annotated
with jaxtyping (``x: Float[Tensor, "b 3 h w"]``, rearr/tools/jaxtyping.py) has the annotation's rank
and literal lengths. A later call ``rearrange(y, PATTERN)`` then fails whatever the tensors are when
its input side has another rank (RA304), splits a known length by lengths that do not divide it
(RA302), or gives an axis another length than the known one (RA303) -- the codes the library raises
when it runs. nn.Sequential's layers are followed the same way, each given what the one before makes.

What could change the tensor behind a name ends what is known of it: a statement that binds the name
anywhere in it (a branch, a loop, a ``with``, a walrus, ``del``, an import), a store into it
(``y.data = z``, ``y[0] = 1``), any use that lets it escape (passing it to a call that is not rearr's,
``z = y``, a method call other than a read of its shape), a test of it (``if y.ndim == 3:``), a nested
function or lambda that names it, ``global`` or ``nonlocal``. Calls in the bodies of ``if``, ``with``,
``try`` and loops are checked from what is certain when the body starts (for a loop, less what the
loop changes anywhere); calls in comprehensions, lambdas, nested functions and ``match`` cases are
not, nor code after a ``return`` or ``raise``; patterns with index brackets give nothing.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import RearrError
from ..rules.recipe import ELLIPSIS, Dim, Recipe, analyze, operation
from . import jaxtyping
from .jaxtyping import Length

FOLLOWED = ("rearrange", "reduce", "repeat")
_PLAIN = (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)
_NESTED = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# What may be read of a tensor without changing or sharing it: its shape, as an attribute or a method.
_READS = frozenset({"shape", "ndim", "dtype", "device", "size", "dim", "numel", "ndimension", "nelement"})
# Decorators that leave a function's arguments as they are, so that its annotations describe what it is given.
_PLAIN_DECORATORS = frozenset({"jaxtyped", "typechecked", "beartype", "typecheck", "staticmethod", "classmethod",
                               "abstractmethod", "override", "jit", "filter_jit", "no_grad", "inference_mode",
                               "enable_grad", "compile"})
_NOT_LENGTHS = (None, "pattern", "reduction", "check_bounds", "fill")

Calls = dict[ast.Call, tuple[str, str]]  # the valid calls of FOLLOWED, with their operation and pattern
Finding = tuple[ast.Call, ast.Constant, RearrError]


@dataclass(frozen=True)
class Shape:
    """What is known of a tensor: its dimensions' lengths, and where that knowledge comes from."""

    head: tuple[Length, ...]
    tail: tuple[Length, ...] | None  # None: the rank is len(head); else any number of dimensions between
    line: int
    side: str  # the output side or the annotation that gives it, as written
    kind: str  # "call", "annotation" or "layer"

    @property
    def rank(self) -> int:
        """The rank, or the least rank when any number of dimensions may stand between head and tail."""
        return len(self.head) + len(self.tail or ())


# --- function bodies -------------------------------------------------------------------------


def check_functions(tree: ast.Module, calls: Calls, source: str = "") -> Iterator[Finding]:
    """The findings of each function that makes a followed call (RA302, RA303, RA304)."""
    typed = _Typed(tree) if "jaxtyping" in source else None
    if len(calls) < 2 and typed is None:
        return  # one call and no annotation: nothing to follow
    for function in _functions_calling(tree, calls):
        known: dict[str, Shape] = {}
        if typed is not None and _subscripted(function):
            known = _parameters(function, typed.annotations())
        yield from _body(function, known, calls, typed)


def _subscripted(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a parameter has an annotation that may be jaxtyping's (``F[...]``, or a string)."""
    args = function.args
    return any(isinstance(a.annotation, (ast.Subscript, ast.Constant))
               for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])


class _Typed:
    """A file that names jaxtyping: its annotations, read once when some annotation is to be read."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.read: jaxtyping.Annotations | None = None

    def annotations(self) -> jaxtyping.Annotations:
        if self.read is None:
            self.read = jaxtyping.Annotations(self.tree)
        return self.read


@dataclass(frozen=True)
class _Scope:
    """What the statements of one function body are read with."""

    calls: Calls
    shared: set[str]  # names that a nested function, lambda or class names: never followed
    typed: _Typed | None


def _functions_calling(tree: ast.Module, calls: Calls) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions with a followed call directly in their body (not in a nested function)."""
    found: dict[ast.AST, None] = {}
    stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node
        elif function is not None and node in calls:  # type: ignore[comparison-overlap]
            found[function] = None
        stack.extend((child, function) for child in ast.iter_child_nodes(node))
    return list(found)  # type: ignore[arg-type]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef, annotations: jaxtyping.Annotations
                ) -> dict[str, Shape]:
    """The parameters whose jaxtyping annotation gives their shape, when no decorator may change them."""
    if not all(_plain_decorator(d) for d in function.decorator_list):
        return {}
    known = {}
    args = function.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        found = annotations.dims(arg.annotation)
        if found is not None:
            (head, tail), text = found
            known[arg.arg] = Shape(head, tail, arg.lineno, text, "annotation")
    return known


def _plain_decorator(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):  # @jaxtyped(typechecker=...), @partial(jax.jit, ...)
        if _last_name(node.func) == "partial":
            return bool(node.args) and _plain_decorator(node.args[0])
        node = node.func
    return _last_name(node) in _PLAIN_DECORATORS


def _last_name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _body(function: ast.FunctionDef | ast.AsyncFunctionDef, known: dict[str, Shape], calls: Calls,
          typed: _Typed | None) -> Iterator[Finding]:
    if any(isinstance(s, (ast.Global, ast.Nonlocal)) for s in function.body):
        return  # names shared with other code: nothing is certain
    scope = _Scope(calls, _named_in_nested(function), typed)
    yield from _block(function.body, {n: s for n, s in known.items() if n not in scope.shared}, scope)


def _block(body: list[ast.stmt], known: dict[str, Shape], scope: _Scope) -> Iterator[Finding]:
    """The findings of statements run one after the other, from what is known before the first (which
    is updated as they run). A branch's or a loop's body is followed from what is certain when it starts."""
    calls = scope.calls
    for stmt in body:
        targets = _targets(stmt)
        changed = _changed(stmt, calls, targets)
        if isinstance(stmt, _PLAIN):
            now = {name: shape for name, shape in known.items() if name not in changed}
            results: dict[ast.Call, Shape | None] = {}
            for call in _direct_calls(stmt):
                if call in calls:
                    yield from _checked(call, calls, now, results)
        else:
            for block, entry in _blocks(stmt, known, changed, calls):
                yield from _block(block, entry, scope)
        for name in changed | {t.id for t in targets}:
            known.pop(name, None)
        bound = _binding(stmt, known, scope)
        if bound is not None:
            known[bound[0]] = bound[1]
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            return  # what follows does not run


def _blocks(stmt: ast.stmt, known: dict[str, Shape], changed: set[str], calls: Calls
            ) -> Iterator[tuple[list[ast.stmt], dict[str, Shape]]]:
    """The bodies of a compound statement, each with what is certain when it starts."""
    def minus(names: set[str]) -> dict[str, Shape]:
        return {name: shape for name, shape in known.items() if name not in names}

    if isinstance(stmt, ast.If):
        entry = _changed(stmt.test, calls, []) | _names(stmt.test)
        yield stmt.body, minus(entry)
        yield stmt.orelse, minus(entry)
    elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):  # a second round sees what the first changed
        yield stmt.body, minus(changed)
        yield stmt.orelse, minus(changed)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        entry = set().union(*(_changed(item, calls, []) for item in stmt.items))
        yield stmt.body, minus(entry)
    elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        yield stmt.body, minus(set())  # type: ignore[attr-defined]
        for block in (*(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):  # type: ignore[attr-defined]
            yield block, minus(changed)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _named_in_nested(function: ast.AST) -> set[str]:
    """The names that a nested function, lambda or class of the function names: it may change them when called."""
    names: set[str] = set()
    for node in ast.walk(function):
        if node is not function and isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return names


def _targets(stmt: ast.stmt) -> list[ast.Name]:
    """The names that an assignment statement binds as its targets (bound after its value has run)."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign):
        targets = [stmt.target]
    else:
        return []
    return [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _direct_calls(stmt: ast.stmt) -> Iterator[ast.Call]:
    """The calls that the statement makes when it runs, each once (not those of a lambda, a nested def
    or a comprehension, which run later, or not at all, or with names of their own)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _NESTED))


def _changed(stmt: ast.stmt, calls: Calls, targets: list[ast.Name]) -> set[str]:
    """The names whose tensor the statement may change, rebind or share (the targets of an assignment
    apart: they are bound after its value runs)."""
    names = set()
    skip = set(map(id, targets))
    stack: list[tuple[ast.AST, ast.AST | None]] = [(stmt, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, ast.Name):
            if id(node) not in skip and (not isinstance(node.ctx, ast.Load) or not _safe_use(node, parent, calls)):
                names.add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)) and not isinstance(node.ctx, ast.Load):
            root = node
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Starred)):
                root = root.value
            if isinstance(root, ast.Name):  # y.data = z, y[0] = 1: a store into y
                names.add(root.id)
        elif isinstance(node, (ast.If, ast.While, ast.Assert, ast.IfExp)):
            names.update(_names(node.test))  # code that tests a tensor does not take its shape for certain
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler,
                               ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        stack.extend((child, node) for child in ast.iter_child_nodes(node))
    return names


def _safe_use(name: ast.Name, parent: ast.AST | None, calls: Calls) -> bool:
    """Whether reading the name there leaves its tensor as it is and unshared."""
    if isinstance(parent, ast.Call):
        return parent in calls and bool(parent.args) and parent.args[0] is name
    if isinstance(parent, ast.Attribute):
        return parent.attr in _READS  # y.shape, y.size(0); a method may change y in place
    if isinstance(parent, ast.Subscript):
        return parent.value is name  # y[0] is another tensor
    return isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.FormattedValue))


def _binding(stmt: ast.stmt, known: dict[str, Shape], scope: _Scope) -> tuple[str, Shape] | None:
    """``y = <a followed call>`` (or ``y: T = ...``), or ``y: Float[Tensor, "b c"] = ...``: y and what is
    then known of its tensor."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    if not isinstance(target, ast.Name) or target.id in scope.shared:
        return None
    if isinstance(value, ast.Call) and value in scope.calls:
        # The value's own input is read as it was before the statement (y = rearrange(y, ...)).
        shape = _result(value, scope.calls, known, {})
        return None if shape is None else (target.id, shape)
    if isinstance(stmt, ast.AnnAssign) and scope.typed is not None:  # a local's annotation, as a parameter's
        found = scope.typed.annotations().dims(stmt.annotation)
        if found is not None:
            (head, tail), text = found
            return target.id, Shape(head, tail, stmt.lineno, text, "annotation")
    return None


def _tensor(call: ast.Call, calls: Calls, known: dict[str, Shape], results: dict[ast.Call, Shape | None]
            ) -> tuple[str, Shape] | None:
    """What is known of the tensor that a call is given, and how to name it."""
    first = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
    if isinstance(first, ast.Name) and first.id in known:
        return first.id, known[first.id]
    if isinstance(first, ast.Call) and first in calls:
        shape = _result(first, calls, known, results)
        return None if shape is None else (f"the result of line {first.lineno}", shape)
    return None


def _result(call: ast.Call, calls: Calls, known: dict[str, Shape], results: dict[ast.Call, Shape | None]
            ) -> Shape | None:
    """What is known of a followed call's result (None: nothing, or the call fails)."""
    if call not in results:
        results[call] = None  # no recursion through the same call
        op, pattern = calls[call]
        given = _tensor(call, calls, known, results)
        results[call] = _apply(_recipe(call, op, pattern), _lengths(call), None if given is None else given[1],
                               call.lineno, "call")[1]
    return results[call]


def _checked(call: ast.Call, calls: Calls, known: dict[str, Shape], results: dict[ast.Call, Shape | None]
             ) -> Iterator[Finding]:
    given = _tensor(call, calls, known, results)
    if given is None:
        return
    err = _apply(_recipe(call, *calls[call]), _lengths(call), given[1], call.lineno, "call", given[0])[0]
    if err is not None:
        yield call, _pattern_literal(call, 1), err


def _pattern_literal(call: ast.Call, at: int) -> ast.Constant:
    literal = call.args[at] if len(call.args) > at else next(k.value for k in call.keywords if k.arg == "pattern")
    assert isinstance(literal, ast.Constant)
    return literal


# --- what one call does to what is known -----------------------------------------------------


def _recipe(call: ast.Call, op: str, pattern: str, layer: bool = False) -> Recipe | None:
    """The call's recipe, when it is valid and has no index bracket."""
    if "[" in pattern:
        return None
    at = 1 if layer else 2  # a layer takes no tensor: its reduction comes right after the pattern
    given = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "reduction"),
                                                           None)
    reduction = given.value if isinstance(given, ast.Constant) else "sum" if op == "reduce" else None
    names = tuple(sorted(k.arg for k in call.keywords if k.arg not in _NOT_LENGTHS))  # type: ignore[type-var]
    try:
        return analyze(pattern, *operation(op, reduction), names)  # type: ignore[arg-type]
    except RearrError:
        return None


_GIVEN = -1  # a length keyword whose value is not a literal


def _lengths(call: ast.Call) -> dict[str, int]:
    """The call's length keywords: their literal values, or _GIVEN."""
    found = {}
    for k in call.keywords:
        if k.arg not in _NOT_LENGTHS:
            value = k.value.value if isinstance(k.value, ast.Constant) else None
            literal = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            found[str(k.arg)] = value if literal else _GIVEN  # type: ignore[assignment]
    return found


def _apply(recipe: Recipe | None, keywords: dict[str, int], given: Shape | None, line: int, kind: str,
           name: str = "") -> tuple[RearrError | None, Shape | None]:
    """The certain error of a call whose tensor is known as ``given`` (or not known: None), and
    what is known of its result when there is none."""
    if recipe is None:
        return None, None
    dims = recipe.inputs[0]
    ellipsis = next((i for i, d in enumerate(dims) if ELLIPSIS in d.names), None)
    values: dict[str, int] = {**dict(recipe.anon), **keywords}
    covered: tuple[Length, ...] | None = None  # the lengths that '...' stands for, when known
    if given is not None:
        err = _rank_error(recipe, dims, ellipsis, given, name)
        if err is not None:
            return err, None
        if ellipsis is not None and given.tail is None:
            covered = given.head[ellipsis: ellipsis + given.rank - len(dims) + 1]
        for dim, (at, length) in zip(dims, _given_lengths(dims, ellipsis, given)):
            err = _solve(recipe, dim, at, length, values, given, name)
            if err is not None:
                return err, None
    return None, _output(recipe, values, covered, line, kind)


def _given_lengths(dims: tuple[Dim, ...], ellipsis: int | None, given: Shape) -> list[tuple[int, Length]]:
    """For each dimension of the pattern: which of the tensor's it is (negative: from the end) and its
    known length (None: not known, or '...')."""
    head, tail = given.head, given.tail
    found: list[tuple[int, Length]] = []
    for i in range(len(dims)):
        j = len(dims) - 1 - i  # from the end
        if i == ellipsis:
            found.append((i, None))
        elif ellipsis is None or i < ellipsis:
            if i < len(head):
                found.append((i, head[i]))
            elif tail is not None and ellipsis is None and j < len(tail):
                found.append((-1 - j, tail[len(tail) - 1 - j]))
            else:
                found.append((i, None))
        elif tail is None:
            found.append((len(head) - 1 - j, head[len(head) - 1 - j]))
        else:
            found.append((-1 - j, tail[len(tail) - 1 - j] if j < len(tail) else None))
    return found


def _rank_error(recipe: Recipe, dims: tuple[Dim, ...], ellipsis: int | None, given: Shape, name: str
                ) -> RearrError | None:
    inputs = recipe.text.partition("->")[0].strip()
    whose = "this layer's" if given.kind == "layer" else "the"
    side = f"{whose} input side '{inputs}'"
    n, have = given.rank, len(dims) - (ellipsis is not None)
    if ellipsis is None and given.tail is None and n != have:
        return _error(given, name, "RA304", recipe.text, f"{n} dimensions", f"{side} has {have}",
                      f"give the input side the {n} dimensions {_source(given)}")
    if ellipsis is None and given.tail is not None and n > have:
        return _error(given, name, "RA304", recipe.text, f"at least {n} dimensions", f"{side} has {have}",
                      f"give the input side at least the {n} dimensions {_source(given)}, or a '...'")
    if ellipsis is not None and given.tail is None and n < have:
        return _error(given, name, "RA304", recipe.text, f"{n} dimensions", f"{side} needs at least {have}",
                      f"name at most {n} dimensions besides '...', as many as {_source(given)[5:]}")
    return None


def _source(given: Shape) -> str:
    """Where the known dimensions come from, as a fix says it."""
    if given.kind == "annotation":
        return f"that its annotation gives ('{given.side}')"
    if given.kind == "layer":
        return f"that the layer before makes ('{given.side}')"
    return f"that line {given.line} makes ('{given.side}')"


def _change(given: Shape) -> str:
    """The other place that a fix may change."""
    if given.kind == "annotation":
        return f"the annotation on line {given.line}"
    if given.kind == "layer":
        return "the layer before's output side"
    return f"the output side of line {given.line}"


def _error(given: Shape, name: str, code: str, pattern: str, has: str, but: str, fix: str) -> RearrError:
    """'NAME has HAS ('SIDE', from line N), and BUT': the place of both calls, in the message and the fix."""
    if given.kind == "layer":
        message = f"the layer before (line {given.line}) makes {has} ('{given.side}'), and {but}"
    elif given.kind == "annotation":
        message = f"{name} has {has} ('{given.side}', its annotation on line {given.line}), and {but}"
    else:
        message = f"{name} has {has} ('{given.side}', from line {given.line}), and {but}"
    return RearrError(message, code=code, pattern=pattern, hint=f"{fix}, or change {_change(given)}")


def _solve(recipe: Recipe, dim: Dim, at: int, length: Length, values: dict[str, int], given: Shape, name: str
           ) -> RearrError | None:
    """The certain conflict of one input dimension of known length with the pattern's lengths (RA302,
    RA303), as the library's solver finds it; else the axis length that the dimension gives, into values."""
    if length is None:
        return None
    has = f"dimension {at} of length {length}"
    if not dim.names:
        if length != 1:
            return _error(given, name, "RA303", recipe.text, has, "the pattern has a unit axis there",
                          "name the axis instead of '1' or '()'")
        return None
    literal = [n for n in dim.names if values.get(n, _GIVEN) != _GIVEN]
    variable = [n for n in dim.names if values.get(n) == _GIVEN]
    missing = [n for n in dim.names if n not in values]
    known = math.prod(values[n] for n in literal)
    written = " * ".join(f"{_show(n)}={values[n]}" if n in literal else _show(n) for n in dim.names if n in values)
    if missing:  # one at most: the pattern is valid
        if known == 0 or length % known:
            return _error(given, name, "RA302", recipe.text, has, f"{written} does not divide it",
                          _divisors_fix(literal, values, length))
        if not variable:
            values[missing[0]] = length // known
        return None
    if not variable and known != length:
        return _error(given, name, "RA303", recipe.text, has, f"{written} makes {known}",
                      _agree_fix(dim, literal, length))
    if variable and (length % known if known else length):
        whatever = ", ".join(variable)
        return _error(given, name, "RA303", recipe.text, has,
                      f"{written} cannot make it, whatever {whatever} {'is' if len(variable) == 1 else 'are'}",
                      _divisors_fix(literal, values, length))
    return None


def _show(name: str) -> str:
    """An axis as the pattern writes it (an anonymous axis is its length)."""
    value, at, _ = name.partition("@")
    return value if at else name


def _divisors_fix(literal: list[str], values: dict[str, int], length: int) -> str:
    keywords = [n for n in literal if "@" not in n]
    if len(keywords) == 1:
        rest = math.prod(values[n] for n in literal if n != keywords[0])
        if rest and length % rest == 0:
            room = length // rest
            fits = [d for d in range(2, room) if room % d == 0][:3] or sorted({1, room})
            return f"use {' or '.join(f'{keywords[0]}={d}' for d in fits)} (a length that divides {room})"
    return f"make the lengths written in the group divide {length}"


def _agree_fix(dim: Dim, literal: list[str], length: int) -> str:
    if len(dim.names) == 1 and "@" not in dim.names[0]:
        return f"use {dim.names[0]}={length}, or leave {dim.names[0]}= out to infer it"
    return f"make the lengths written in the group multiply to {length}"


def _output(recipe: Recipe, values: dict[str, int], covered: tuple[Length, ...] | None, line: int, kind: str
            ) -> Shape:
    """What is known of the result: its rank, and each dimension's length where every axis's is known."""
    side = recipe.text.partition("->")[2].strip()

    def length(names: tuple[str, ...]) -> Length:
        lengths = [values.get(n, _GIVEN) for n in names if n != ELLIPSIS]
        if ELLIPSIS in names:
            lengths.extend(covered if covered is not None else [_GIVEN])  # type: ignore[arg-type]
        return None if any(v is None or v == _GIVEN for v in lengths) else math.prod(lengths)  # type: ignore[misc]

    head: list[Length] = []
    tail: list[Length] | None = None
    for dim in recipe.outputs[0]:
        if dim.names == (ELLIPSIS,) and not dim.group:
            if covered is not None:
                head.extend(covered)
            else:
                tail = []  # any number of dimensions
            continue
        (head if tail is None else tail).append(length(dim.names))
    return Shape(tuple(head), None if tail is None else tuple(tail), line, side, kind)


# --- nn.Sequential ---------------------------------------------------------------------------


def check_sequential(tree: ast.Module, layers: Calls) -> Iterator[Finding]:
    """The findings of each layer of ``nn.Sequential(a, b, ...)`` (torch's, which feeds each layer's
    output to the next) that cannot take what the layers before it make: a run of layers among
    ``layers`` is followed, and anything else between them ends what is known."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _torch_sequential(node.func)):
            continue
        shape: Shape | None = None
        for layer in node.args:
            if layer not in layers:  # type: ignore[comparison-overlap]
                shape = None
                continue
            assert isinstance(layer, ast.Call)
            err, shape = _chain(layer, layers, shape)
            if err is not None:
                yield layer, _pattern_literal(layer, 0), err


def _torch_sequential(func: ast.expr) -> bool:
    """``nn.Sequential`` or ``torch.nn.Sequential`` (flax's and keras' take a list, and are not followed)."""
    return (isinstance(func, ast.Attribute) and func.attr == "Sequential" and
            (isinstance(func.value, ast.Name) and func.value.id == "nn" or
             isinstance(func.value, ast.Attribute) and func.value.attr == "nn" and
             isinstance(func.value.value, ast.Name) and func.value.value.id == "torch"))


def _chain(layer: ast.Call, layers: Calls, before: Shape | None) -> tuple[RearrError | None, Shape | None]:
    """The certain error of a layer given what the layer before makes, and what it makes itself."""
    op, pattern = layers[layer]
    return _apply(_recipe(layer, op, pattern, layer=True), _lengths(layer), before, layer.lineno, "layer")
