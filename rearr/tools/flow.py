"""Shapes followed from call to call within a function body, for `rearr check`: certain errors only.

What is known of a tensor (its rank, and the lengths of some of its dimensions) comes from:

- a followed call: ``y = rearrange(x, "b (h w) -> b h w", h=2)`` (or reduce, repeat) gives y the rank of
  the output side and the lengths known there (literal keywords, anonymous axes, and what the call's
  own input gave);
- a parameter or a local annotated with jaxtyping (``x: Float[Tensor, "b 3 h w"]``, jaxtyping.py), or
  described by a shape line of its function's docstring (docstrings.py: a soft source, named as such);
- the code itself: ``b, n, _ = x.shape`` (x has 3 dimensions), and ``if x.ndim == 3:`` (in its body),
  ``assert x.ndim == 3`` or ``if x.ndim != 3: raise ...`` (after it);
- a layer: in torch's ``nn.Sequential(a, b, ...)`` each layer is given what the one before makes, and
  in a method, ``y = self.to_patches(x)`` runs the layer (or Sequential) that ``__init__`` set as
  ``self.to_patches``; rearr's and einops' Rearrange, Reduce, Repeat and EinMix are followed, and torch's
  Linear, Conv1d/2d/3d, Embedding and the layers that keep the shape (norms, dropouts, activations)
  pass on what they make; any other layer ends what is known;
- a tensor attribute set once in ``__init__`` from ``nn.Parameter(torch.randn(1, 1, dim))`` (or
  ``torch.zeros`` and the other makers), used in a method as ``self.cls_token``.

A later call then fails whatever the tensors are when its input side has another rank (RA304), splits a
known length by lengths that do not divide it (RA302), or gives an axis another length than the known
one (RA303): the library's own length solver decides (planning/lengths.py), so the checker and the
library cannot disagree, and the finding is the library's message with where the shape came from.

What could change the tensor behind a name ends what is known of it: a statement that binds the name
anywhere in it (a branch, a loop, a ``with``, a walrus, ``del``, an import), a store into it
(``y.data = z``, ``y[0] = 1``), any use that lets it escape (passing it to a call that is not followed,
``z = y``, a method call other than a read of its shape), a test of it (but the rank tests above), a
nested function or lambda that names it, ``global`` or ``nonlocal``. An attribute is trusted only when
the file assigns it once, at the top of ``__init__``, and never stores into it, resizes it in place or
uses ``setattr``. Calls in the bodies of ``if``, ``with``, ``try`` and loops are checked from what is
certain when the body starts (for a loop, less what the loop changes anywhere); calls in
comprehensions, lambdas, nested functions and ``match`` cases are not, nor code after a ``return`` or
``raise``; patterns with index brackets give nothing.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import RearrError
from ..planning.lengths import Lengths, expand_ellipsis
from ..rules.recipe import ELLIPSIS, Dim, Recipe, analyze, operation
from . import docstrings, jaxtyping
from .jaxtyping import Length

FOLLOWED = ("rearrange", "reduce", "repeat")  # the functions and layers whose calls are followed
MIXES = ("einmix", "einops-einmix")  # EinMix layers, rearr's and einops'
_PLAIN = (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)
_NESTED = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# What may be read of a tensor without changing or sharing it: its shape, as an attribute or a method.
_READS = frozenset({"shape", "ndim", "dtype", "device", "size", "dim", "numel", "ndimension", "nelement"})
# Decorators that leave a function's arguments as they are, so that its annotations describe what it is given.
_PLAIN_DECORATORS = frozenset({"jaxtyped", "typechecked", "beartype", "typecheck", "staticmethod", "classmethod",
                               "abstractmethod", "override", "jit", "filter_jit", "no_grad", "inference_mode",
                               "enable_grad", "compile"})
_NOT_LENGTHS = (None, "pattern", "reduction", "check_bounds", "fill", "weight_shape", "bias_shape")

# torch's layers whose effect on the shape is known: those that keep it, and those that set the last
# dimensions (the argument that gives the new length: its position and keyword; how many dimensions
# after it are of unknown length).
_KEEP = frozenset({"Identity", "LayerNorm", "RMSNorm", "GroupNorm", "LocalResponseNorm", "BatchNorm1d", "BatchNorm2d",
                   "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Dropout", "Dropout1d",
                   "Dropout2d", "Dropout3d", "AlphaDropout", "ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "ELU",
                   "SELU", "CELU", "GELU", "SiLU", "Mish", "Tanh", "Tanhshrink", "Sigmoid", "LogSigmoid", "Hardtanh",
                   "Hardswish", "Hardsigmoid", "Softplus", "Softsign", "Softshrink", "Hardshrink", "Threshold",
                   "Softmax", "LogSoftmax", "Softmin"})
_SET_LAST = {"Linear": (1, "out_features", 0), "LazyLinear": (0, "out_features", 0),
             **{f"{kind}{k}d": (at, "out_channels", k) for k in (1, 2, 3)
                for kind, at in (("Conv", 1), ("ConvTranspose", 1), ("LazyConv", 0), ("LazyConvTranspose", 0))}}
_APPEND = {"Embedding": (1, "embedding_dim")}
_MAKERS = frozenset({"randn", "rand", "zeros", "ones", "empty"})  # torch.randn(1, 1, dim) and the like
# In-place methods that change a tensor's shape: an attribute that one of them is called on is not trusted.
_RESHAPING = frozenset({"resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_", "transpose_",
                        "t_", "swapdims_", "swapaxes_", "expand_", "reshape_"})

Calls = dict[ast.Call, tuple[str, str]]  # the valid calls of FOLLOWED (and layers: MIXES), with op and pattern
Finding = tuple[ast.Call, ast.Constant, RearrError]


@dataclass
class Stats:
    """What the flow had to work with (benchmarks/check_flow_counts.py): counts by kind (the sources of
    parameters' shapes, the calls and layers that met a known tensor, the findings by code), and the calls
    that met one."""

    counts: Counter[str] = field(default_factory=Counter)
    followed: list[ast.Call] = field(default_factory=list)


@dataclass(frozen=True)
class Shape:
    """What is known of a tensor: its dimensions' lengths, and where that knowledge comes from."""

    head: tuple[Length, ...]
    tail: tuple[Length, ...] | None  # None: the rank is len(head); else any number of dimensions between
    line: int
    side: str  # the output side, the annotation or the code that gives it, as written
    kind: str  # a key of _SOURCES

    @property
    def rank(self) -> int:
        """The rank, or the least rank when any number of dimensions may stand between head and tail."""
        return len(self.head) + len(self.tail or ())


# Where a shape comes from, as a finding says it after the library's message, and what a fix may change instead.
_SOURCES = {
    "call": (": {name} is '{side}' (from line {line})", "the output side of line {line}"),
    "annotation": (": {name} is '{side}' (its annotation on line {line})", "the annotation on line {line}"),
    "docstring": (": {name} is '{side}', as its docstring says on line {line}",
                  "the docstring on line {line}, if it is out of date"),
    "unpack": (": line {line} unpacks {name}'s shape ('{side}')", "line {line}"),
    "test": (": the test on line {line} says so ('{side}')", "the test on line {line}"),
    "attribute": (": {name} is '{side}' (set on line {line})", "line {line}"),
    "layer": (": {name} is what the layer on line {line} makes ('{side}')", "the layer on line {line}"),
    "torch": (": {name} is what '{side}' on line {line} makes", "the layer on line {line}"),
}


# --- function bodies -------------------------------------------------------------------------


def check_functions(tree: ast.Module, calls: Calls, source: str = "", layers: Calls | None = None,
                    stats: Stats | None = None) -> Iterator[Finding]:
    """The findings of each function that makes a followed call, or runs a layer attribute (RA302-RA304)."""
    flow = _File(tree, calls, layers or {}, source, stats)
    for function, attributes in flow.functions():
        yield from flow.body(function, attributes)


class _File:
    """One file's shape flow: its calls and layers, the names it binds to torch and jaxtyping, its classes'
    attributes."""

    def __init__(self, tree: ast.Module, calls: Calls, layers: Calls, source: str, stats: Stats | None):
        self.tree, self.calls, self.layers, self.source = tree, calls, layers, source
        self.stats = stats if stats is not None else Stats()
        self._names: jaxtyping.Annotations | None = None
        self._stores: tuple[Counter[str], bool] | None = None

    @property
    def names(self) -> jaxtyping.Annotations:
        """The file's bindings (read once, when some annotation or torch name is to be read)."""
        if self._names is None:
            self._names = jaxtyping.Annotations(self.tree)
        return self._names

    def functions(self) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, dict[str, _Attribute]]]:
        """Each function with a followed call directly in its body, and each method that may run a layer
        attribute, in source order, with the attributes its class sets (for a method)."""
        callers = _direct_callers(self.tree, self.calls)
        owners: dict[ast.AST, ast.ClassDef] = {}
        functions = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                owners.update((item, node) for item in node.body)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(node)
        attributes: dict[ast.ClassDef, dict[str, _Attribute]] = {}
        for function in sorted(functions, key=lambda f: (f.lineno, f.col_offset)):
            owner = owners.get(function)
            found: dict[str, _Attribute] = {}
            if (owner is not None and function.name != "__init__" and _self_name(function) is not None
                    and (function in callers or self.layers)):
                if owner not in attributes:
                    attributes[owner] = _attributes(owner, self)
                found = attributes[owner]
            if function in callers or any(a.layers for a in found.values()):
                yield function, found

    @property
    def stores(self) -> tuple[Counter[str], bool]:
        """The file's attribute stores (see `_attribute_stores`), counted once."""
        if self._stores is None:
            self._stores = _attribute_stores(self.tree)
        return self._stores

    def body(self, function: ast.FunctionDef | ast.AsyncFunctionDef, attributes: dict[str, _Attribute]
             ) -> Iterator[Finding]:
        if any(isinstance(s, (ast.Global, ast.Nonlocal)) for s in function.body):
            return  # names shared with other code: nothing is certain
        scope = _Scope(self, _named_in_nested(function), _self_name(function) if attributes else None, attributes)
        known = {n: s for n, s in self.parameters(function).items() if n not in scope.shared}
        self.stats.counts.update(s.kind for s in known.values())
        yield from _block(function.body, known, scope)

    def parameters(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Shape]:
        """The parameters whose jaxtyping annotation, or else their docstring's shape line, gives their shape,
        when no decorator may change them."""
        if not all(_plain_decorator(d) for d in function.decorator_list):
            return {}
        known = {}
        args = function.args
        if "jaxtyping" in self.source and _subscripted(function):
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                found = self.names.dims(arg.annotation)
                if found is not None:
                    (head, tail), text = found
                    known[arg.arg] = Shape(head, tail, arg.lineno, text, "annotation")
        for name, ((head, tail), text, line) in docstrings.parameter_shapes(function).items():
            known.setdefault(name, Shape(head, tail, line, text, "docstring"))
        return known

    def torch_layer(self, node: ast.expr) -> str | None:
        """The name of torch.nn's class that ``node`` (a call's function) names, or None."""
        qualified = self.names.qualified(node)
        if qualified is None:
            return None
        module, _, name = qualified.rpartition(".")
        return name if module in ("torch.nn", "torch.nn.modules") or module.startswith("torch.nn.modules.") else None


def _subscripted(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a parameter has an annotation that may be jaxtyping's (``F[...]``, or a string)."""
    args = function.args
    return any(isinstance(a.annotation, (ast.Subscript, ast.Constant))
               for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])


@dataclass(frozen=True)
class _Scope:
    """What the statements of one function body are read with."""

    file: _File
    shared: set[str]  # names that a nested function, lambda or class names: never followed
    self_name: str | None  # a method's first parameter, when its class sets attributes
    attributes: dict[str, _Attribute] = field(default_factory=dict)

    def attribute(self, node: ast.expr) -> _Attribute | None:
        """The trusted attribute that ``node`` reads (``self.to_patches``), or None."""
        if (self.self_name is not None and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == self.self_name):
            return self.attributes.get(node.attr)
        return None

    def application(self, call: ast.Call) -> _Attribute | None:
        """The layer attribute that ``self.X(t)`` runs (one tensor, nothing else), or None."""
        found = self.attribute(call.func)
        if found is None or found.layers is None or len(call.args) != 1 or call.keywords:
            return None
        return None if isinstance(call.args[0], ast.Starred) else found

    def follows(self, call: ast.Call) -> bool:
        return call in self.file.calls or self.application(call) is not None


def _direct_callers(tree: ast.Module, calls: Calls) -> set[ast.AST]:
    """The functions with a followed call directly in their body (not in a nested function)."""
    found: set[ast.AST] = set()
    stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node
        elif function is not None and node in calls:  # type: ignore[comparison-overlap]
            found.add(function)
        stack.extend((child, function) for child in ast.iter_child_nodes(node))
    return found


def _self_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """A method's first parameter (its self), unless it is a static or class method."""
    if any(_last_name(d) in ("staticmethod", "classmethod") for d in function.decorator_list):
        return None
    args = [*function.args.posonlyargs, *function.args.args]
    return args[0].arg if args else None


def _plain_decorator(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):  # @jaxtyped(typechecker=...), @partial(jax.jit, ...)
        if _last_name(node.func) == "partial":
            return bool(node.args) and _plain_decorator(node.args[0])
        node = node.func
    return _last_name(node) in _PLAIN_DECORATORS


def _last_name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _block(body: list[ast.stmt], known: dict[str, Shape], scope: _Scope) -> Iterator[Finding]:
    """The findings of statements run one after the other, from what is known before the first (which
    is updated as they run). A branch's or a loop's body is followed from what is certain when it starts."""
    for stmt in body:
        targets = _targets(stmt)
        changed = _changed(stmt, scope, targets)
        if isinstance(stmt, _PLAIN):
            now = {name: shape for name, shape in known.items() if name not in changed}
            results: dict[ast.Call, Shape | None] = {}
            for call in _direct_calls(stmt):
                if scope.follows(call):
                    yield from _checked(call, scope, now, results)
        else:
            for block, entry in _blocks(stmt, known, changed, scope):
                yield from _block(block, entry, scope)
        for name in changed | {t.id for t in targets}:
            known.pop(name, None)
        bound = _binding(stmt, known, scope)
        if bound is not None:
            known[bound[0]] = bound[1]
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            return  # what follows does not run


def _blocks(stmt: ast.stmt, known: dict[str, Shape], changed: set[str], scope: _Scope
            ) -> Iterator[tuple[list[ast.stmt], dict[str, Shape]]]:
    """The bodies of a compound statement, each with what is certain when it starts."""
    def minus(names: set[str]) -> dict[str, Shape]:
        return {name: shape for name, shape in known.items() if name not in names}

    if isinstance(stmt, ast.If):
        entry = _changed(stmt.test, scope, []) | _names(stmt.test)
        body, orelse = minus(entry), minus(entry)
        tested = _rank_test(stmt.test, scope)
        if tested is not None:  # `if x.ndim == 3:` -- x has 3 dimensions in the body (or in the else, for !=)
            name, shape, equal = tested
            (body if equal else orelse)[name] = shape
        yield stmt.body, body
        yield stmt.orelse, orelse
    elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):  # a second round sees what the first changed
        yield stmt.body, minus(changed)
        yield stmt.orelse, minus(changed)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        entry = set().union(*(_changed(item, scope, []) for item in stmt.items))
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


def _changed(stmt: ast.AST, scope: _Scope, targets: list[ast.Name]) -> set[str]:
    """The names whose tensor the statement may change, rebind or share (the targets of an assignment
    apart: they are bound after its value runs)."""
    names = set()
    skip = set(map(id, targets))
    stack: list[tuple[ast.AST, ast.AST | None]] = [(stmt, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, ast.Name):
            if id(node) not in skip and (not isinstance(node.ctx, ast.Load) or not _safe_use(node, parent, scope)):
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


def _safe_use(name: ast.Name, parent: ast.AST | None, scope: _Scope) -> bool:
    """Whether reading the name there leaves its tensor as it is and unshared."""
    if isinstance(parent, ast.Call):  # the tensor of a followed call, or of a layer attribute: read only
        return scope.follows(parent) and bool(parent.args) and parent.args[0] is name
    if isinstance(parent, ast.Attribute):
        if name.id == scope.self_name and scope.attribute(parent) is not None:
            return True  # self.to_patches: the attribute is trusted by the class's own rules
        return parent.attr in _READS  # y.shape, y.size(0); a method may change y in place
    if isinstance(parent, ast.Subscript):
        return parent.value is name  # y[0] is another tensor
    return isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.FormattedValue))


def _binding(stmt: ast.stmt, known: dict[str, Shape], scope: _Scope) -> tuple[str, Shape] | None:
    """What a statement makes known, after it runs: ``y = <a followed call>`` (or ``y: T = ...``),
    ``y: Float[Tensor, "b c"] = ...``, ``y = self.to_patches(x)``, ``b, n, _ = x.shape`` (x's rank), and
    ``assert x.ndim == 3`` or ``if x.ndim != 3: raise ...`` (x's rank): the name and what is then known."""
    if isinstance(stmt, ast.Assert):
        tested = _rank_test(stmt.test, scope)
        return (tested[0], tested[1]) if tested is not None and tested[2] else None
    if isinstance(stmt, ast.If):
        tested = _rank_test(stmt.test, scope)
        if tested is not None:  # the branch that does not have that rank leaves: what follows has it
            name, shape, equal = tested
            if _leaves(stmt.orelse if equal else stmt.body):
                return name, shape
        return None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    if isinstance(target, (ast.Tuple, ast.List)):
        return _unpacked(target, value, stmt.lineno, known, scope)
    if not isinstance(target, ast.Name) or target.id in scope.shared:
        return None
    if isinstance(value, ast.Call) and scope.follows(value):
        # The value's own input is read as it was before the statement (y = rearrange(y, ...)).
        shape = _result(value, scope, known, {})
        return None if shape is None else (target.id, shape)
    if isinstance(stmt, ast.AnnAssign) and "jaxtyping" in scope.file.source:  # a local's annotation
        found = scope.file.names.dims(stmt.annotation)
        if found is not None:
            (head, tail), text = found
            return target.id, Shape(head, tail, stmt.lineno, text, "annotation")
    return None


def _leaves(body: list[ast.stmt]) -> bool:
    """Whether a block always leaves what follows it: it ends with a return, a raise, a break or a continue."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Break, ast.Continue))


def _unpacked(target: ast.Tuple | ast.List, value: ast.expr, line: int, known: dict[str, Shape], scope: _Scope
              ) -> tuple[str, Shape] | None:
    """``b, n, _ = x.shape`` (or ``x.size()``, ``*_, h, w = x.shape``): x has that many dimensions (at least,
    with a starred name), when nothing more is known of it."""
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        value = value.func if isinstance(value.func, ast.Attribute) and value.func.attr == "size" else value
    if not (isinstance(value, ast.Attribute) and value.attr in ("shape", "size") and isinstance(value.value, ast.Name)):
        return None
    name = value.value.id
    if name in known or name in scope.shared or name in _names(target):
        return None
    starred = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
    if len(starred) > 1:
        return None
    side = f"{', '.join(map(ast.unparse, target.elts))} = {ast.unparse(value)}"
    if not starred:
        return name, Shape((None,) * len(target.elts), None, line, side, "unpack")
    at = starred[0]
    return name, Shape((None,) * at, (None,) * (len(target.elts) - at - 1), line, side, "unpack")


def _rank_test(test: ast.expr, scope: _Scope) -> tuple[str, Shape, bool] | None:
    """``x.ndim == 3`` (also ``x.dim()``, ``x.ndimension()``, ``len(x.shape)``, ``not (...)``, ``!=``): the name,
    the shape that rank gives, and whether the test holds when x has it."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        found = _rank_test(test.operand, scope)
        return None if found is None else (found[0], found[1], not found[2])
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    for a, b in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        name = _rank_of(a)
        if (name is not None and name not in scope.shared and isinstance(b, ast.Constant) and type(b.value) is int
                and b.value >= 0):
            shape = Shape((None,) * b.value, None, test.lineno, ast.unparse(test), "test")
            return name, shape, isinstance(test.ops[0], ast.Eq)
    return None


def _rank_of(node: ast.expr) -> str | None:
    """The name whose rank ``node`` reads: ``x.ndim``, ``x.dim()``, ``x.ndimension()``, ``len(x.shape)``."""
    if isinstance(node, ast.Call) and not node.keywords:
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1:
            arg = node.args[0]
            if isinstance(arg, ast.Call) and not arg.args:  # len(x.size())
                arg = arg.func
            if isinstance(arg, ast.Attribute) and arg.attr in ("shape", "size") and isinstance(arg.value, ast.Name):
                return arg.value.id
            return None
        if not node.args and isinstance(node.func, ast.Attribute) and node.func.attr in ("dim", "ndimension"):
            node = node.func
        else:
            return None
    elif not (isinstance(node, ast.Attribute) and node.attr == "ndim"):
        return None
    return node.value.id if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else None


def _tensor(call: ast.Call, scope: _Scope, known: dict[str, Shape], results: dict[ast.Call, Shape | None]
            ) -> tuple[str, Shape] | None:
    """What is known of the tensor that a call is given, and how to name it."""
    first = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
    if isinstance(first, ast.Name) and first.id in known:
        return first.id, known[first.id]
    if isinstance(first, ast.Call) and scope.follows(first):
        shape = _result(first, scope, known, results)
        return None if shape is None else (f"the result of line {first.lineno}", shape)
    attribute = scope.attribute(first) if first is not None else None
    if attribute is not None and attribute.tensor is not None:
        return attribute.name, attribute.tensor
    return None


def _result(call: ast.Call, scope: _Scope, known: dict[str, Shape], results: dict[ast.Call, Shape | None]
            ) -> Shape | None:
    """What is known of a followed call's result (None: nothing, or the call fails)."""
    if call not in results:
        results[call] = None  # no recursion through the same call
        given = _tensor(call, scope, known, results)
        results[call] = _run(call, scope, None if given is None else given[1], "")[1]
    return results[call]


def _run(call: ast.Call, scope: _Scope, given: Shape | None, name: str
         ) -> tuple[tuple[ast.Call, RearrError] | None, Shape | None]:
    """A followed call (or a layer attribute's run) on a tensor known as ``given``: its certain error, with
    the layer at fault, and what is known of its result."""
    application = scope.application(call) if call not in scope.file.calls else None
    if application is None:
        op, pattern = scope.file.calls[call]
        err, shape = _apply(_recipe(call, op, pattern), _lengths(call), given, call.lineno, "call", name)
        return (None if err is None else (call, err)), shape
    shape: Shape | None = given
    for layer in application.layers or ():
        err, shape, known_layer = _layer(layer, scope.file, shape, name if shape is given else "")
        if err is not None:
            return (layer, err), None
        if not known_layer:
            return None, None
    return None, shape


def _checked(call: ast.Call, scope: _Scope, known: dict[str, Shape], results: dict[ast.Call, Shape | None]
             ) -> Iterator[Finding]:
    given = _tensor(call, scope, known, results)
    if given is None:
        return
    scope.file.stats.counts["followed"] += 1
    scope.file.stats.followed.append(call)
    found, _ = _run(call, scope, given[1], given[0])
    if found is not None:
        at, err = found
        scope.file.stats.counts[err.code] += 1
        yield call, _pattern_literal(at), err


def _pattern_literal(call: ast.Call) -> ast.Constant:
    """The pattern literal of a followed call or layer (the first positional argument that is a string)."""
    literal = next((a for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)), None)
    if literal is None:
        literal = next(k.value for k in call.keywords if k.arg == "pattern")
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


def _lengths(call: ast.Call) -> dict[str, int | None]:
    """The call's length keywords: their literal values, or None for one that is given but not a literal."""
    found: dict[str, int | None] = {}
    for k in call.keywords:
        if k.arg not in _NOT_LENGTHS:
            value = k.value.value if isinstance(k.value, ast.Constant) else None
            literal = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            found[str(k.arg)] = value if literal else None
    return found


def _apply(recipe: Recipe | None, keywords: dict[str, int | None], given: Shape | None, line: int, kind: str,
           name: str = "") -> tuple[RearrError | None, Shape | None]:
    """The certain error of a call whose tensor is known as ``given`` (or not known: None), and what is
    known of its result when there is none."""
    if recipe is None:
        return None, None
    solved = _solve_input(recipe, keywords, given, name)
    if isinstance(solved, RearrError):
        return solved, None
    values, covered = solved
    side = recipe.text.partition("->")[2].strip()
    return None, _output(recipe.outputs[0], values, covered, line, side, kind)


def _solve_input(recipe: Recipe, keywords: dict[str, int | None], given: Shape | None, name: str
                 ) -> RearrError | tuple[dict[str, Length], tuple[Length, ...] | None]:
    """The lengths of the input side's axes that the keywords, the anonymous axes and the known shape give
    (None: given but not known), decided by the library's own solver, and the lengths that '...' stands for
    when known; or the certain error, the library's, with where the shape came from."""
    dims = recipe.inputs[0]
    lens = Lengths(recipe.text)
    literal = {n: v for n, v in keywords.items() if v is not None}
    lens.given(recipe, literal.items())
    variable = {n for n, v in keywords.items() if v is None}  # a keyword's name that has some length
    covered: tuple[Length, ...] | None = None
    if given is not None:
        err = _rank_error(recipe, dims, given, name)
        if err is not None:
            return err
        ellipsis = next((i for i, d in enumerate(dims) if ELLIPSIS in d.names), None)
        if ellipsis is not None and given.tail is None:
            covered = given.head[ellipsis: ellipsis + given.rank - len(dims) + 1]
        for dim, (at, length) in zip(dims, _given_lengths(dims, ellipsis, given)):
            if length is None:
                continue
            try:
                _fit(lens, dim, length, variable, _where(at, name, given))
            except RearrError as e:
                return _error(e, given, name)
    values: dict[str, Length] = {**lens.value, **dict.fromkeys(variable)}
    return values, covered


def _fit(lens: Lengths, dim: Dim, length: int, variable: set[str], where: str) -> None:
    """One dimension of known length against the pattern's lengths, by the library's solver. A keyword whose
    value is not a literal stands for any length: the others' must then divide the dimension (RA303 when
    they cannot, whatever it is: the library's code when the call runs with it)."""
    if not any(n in variable for n in dim.names):
        lens.fit(dim, length, where)
        return
    others = [n for n in dim.names if n not in variable]
    if any(n not in lens.value for n in others):
        return  # an unknown axis beside it: nothing certain
    stand_in = f"{'*'.join(n for n in dim.names if n in variable)}?"  # the product of the variable keywords
    try:
        lens.fit(Dim((*others, stand_in), dim.col), length, where)
    except RearrError as e:
        whatever = ", ".join(n for n in dim.names if n in variable)
        raise RearrError(f"{e.message}, so the group cannot make it whatever {whatever} "
                         f"{'is' if len(variable & set(dim.names)) == 1 else 'are'}", code="RA303",
                         pattern=e.pattern, col=e.col, hint=e.hint) from None
    finally:
        lens.value.pop(stand_in, None)


def _where(at: int, name: str, given: Shape) -> str:
    """The dimension, as the library's messages say where a length comes from."""
    return f"dimension {at} of {_whose(name, given)}"


def _whose(name: str, given: Shape) -> str:
    return name or ("the layer's input" if given.kind in ("layer", "torch") else "the tensor")


def _error(err: RearrError, given: Shape, name: str) -> RearrError:
    """The library's error, with where the shape it met came from, and what else a fix may change."""
    said, change = (text.format(line=given.line, name=_whose(name, given), side=given.side)
                    for text in _SOURCES[given.kind])
    return RearrError(f"{err.message}{said}", code=err.code, pattern=err.pattern, col=err.col,
                      hint=f"{err.hint}, or change {change}" if err.hint else None)


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


def _rank_error(recipe: Recipe, dims: tuple[Dim, ...], given: Shape, name: str) -> RearrError | None:
    """RA304 when the tensor's rank cannot match the input side: the library's own rule (expand_ellipsis)
    for a known rank; for a least rank, an input side without '...' that names fewer dimensions."""
    if given.tail is None:
        try:
            expand_ellipsis(recipe.text, dims, given.rank)
        except RearrError as e:
            return _error(e, given, name)
        return None
    have = len(dims)
    if any(ELLIPSIS in d.names for d in dims) or given.rank <= have:
        return None
    err = RearrError(f"the pattern has {have} input dimensions, the tensor has at least {given.rank}", code="RA304",
                     pattern=recipe.text, col=0, hint="write one entry per dimension (a group '(a b)' is one), or "
                     "use '...' for the rest")
    return _error(err, given, name)


def _output(dims: tuple[Dim, ...], values: dict[str, Length], covered: tuple[Length, ...] | None, line: int,
            side: str, kind: str) -> Shape:
    """What is known of the result: its rank, and each dimension's length where every axis's is known."""
    def length(names: tuple[str, ...]) -> Length:
        lengths = [values.get(n) for n in names if n != ELLIPSIS]
        if ELLIPSIS in names:
            lengths.extend(covered if covered is not None else [None])
        return None if any(v is None for v in lengths) else math.prod(lengths)  # type: ignore[arg-type]

    head: list[Length] = []
    tail: list[Length] | None = None
    for dim in dims:
        if dim.names == (ELLIPSIS,) and not dim.group:
            if covered is not None:
                head.extend(covered)
            else:
                tail = []  # any number of dimensions
            continue
        (head if tail is None else tail).append(length(dim.names))
    return Shape(tuple(head), None if tail is None else tuple(tail), line, side, kind)


# --- layers: ours, einops', and torch's ---------------------------------------------------------


def _layer(node: ast.expr, file: _File, before: Shape | None, name: str = ""
           ) -> tuple[RearrError | None, Shape | None, bool]:
    """A layer given what the one before makes (None: not known): its certain error, what it makes, and
    whether its effect is known at all (False: what follows it is not known)."""
    if not isinstance(node, ast.Call):
        return None, None, False
    if node in file.layers:
        op, pattern = file.layers[node]
        if op in MIXES:
            err, shape = _mix(node, pattern, before, name)
        else:
            err, shape = _apply(_recipe(node, op, pattern, layer=True), _lengths(node), before, node.lineno, "layer",
                                name)
        if before is not None:
            file.stats.counts["layers"] += 1
        return err, shape, True
    kind = file.torch_layer(node.func)
    if kind is None:
        return None, None, False
    if kind in _KEEP:
        return None, before, True
    if kind in _SET_LAST or kind in _APPEND:
        at, keyword, spatial = _SET_LAST[kind] if kind in _SET_LAST else (*_APPEND[kind], -1)
        arg = node.args[at] if len(node.args) > at and not any(isinstance(a, ast.Starred) for a in node.args[:at + 1]) \
            else next((k.value for k in node.keywords if k.arg == keyword), None)
        if arg is None and any(k.arg is None for k in node.keywords):
            return None, None, False  # **kwargs: the argument is not known
        value = arg.value if isinstance(arg, ast.Constant) and type(arg.value) is int else None
        side = ast.unparse(node)
        if spatial < 0:  # Embedding: one more dimension
            return None, _extended(before, (value,), 0, node.lineno, side), True
        return None, _extended(before, (value, *(None,) * spatial), spatial + 1, node.lineno, side), True
    return None, None, False


def _extended(before: Shape | None, last: tuple[Length, ...], replaced: int, line: int, side: str) -> Shape:
    """A shape whose last ``replaced`` dimensions become ``last`` (a Linear sets the last one, a Conv2d the
    last three, an Embedding adds one): the rest is kept when known, else any number of dimensions."""
    if before is not None and before.tail is None and before.rank >= replaced:
        return Shape(before.head[: before.rank - replaced] + last, None, line, side, "torch")
    return Shape((), last, line, side, "torch")


def _mix(node: ast.Call, pattern: str, before: Shape | None, name: str) -> tuple[RearrError | None, Shape | None]:
    """EinMix: its input side read as a rearrange's (a certain error there is what the layer raises), and
    its output side's lengths from the keywords and the input (an axis only the weight has: its keyword)."""
    left, arrow, right = pattern.partition("->")
    if not arrow or "[" in pattern:
        return None, None
    lengths = _lengths(node)
    in_names, out_names = (set(_WORD.findall(side)) for side in (left, right))
    try:  # each side as the input of an identity rearrange: its dimensions and the rules of its lengths
        inputs = analyze(f"{left} -> {left}", "rearrange", tuple(sorted(n for n in lengths if n in in_names)))
        outputs = analyze(f"{right} -> {right}", "rearrange", tuple(sorted(out_names)))
    except RearrError:
        return None, None
    solved = _solve_input(inputs, {n: v for n, v in lengths.items() if n in _axes(inputs)}, before, name)
    if isinstance(solved, RearrError):
        return solved, None
    values, covered = solved
    values = {**{n: v for n, v in lengths.items()}, **{n: v for n, v in values.items() if v is not None}}
    return None, _output(outputs.inputs[0], values, covered, node.lineno, right.strip(), "layer")


_WORD = re.compile(r"[A-Za-z_]\w*")


def _axes(recipe: Recipe) -> set[str]:
    return {n for d in recipe.inputs[0] for n in d.names}


# --- nn.Sequential ---------------------------------------------------------------------------


def check_sequential(tree: ast.Module, layers: Calls, source: str = "", stats: Stats | None = None
                     ) -> Iterator[Finding]:
    """The findings of each layer of torch's ``nn.Sequential(a, b, ...)`` (which feeds each layer's output to
    the next) that cannot take what the layers before it make: a run of layers whose effect is known is
    followed, and any other layer ends what is known."""
    file = _File(tree, {}, layers, source, stats)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _sequential(node, file)):
            continue
        shape: Shape | None = None
        for layer in node.args:
            err, shape, known = _layer(layer, file, shape)
            if err is not None:
                assert isinstance(layer, ast.Call)
                file.stats.counts[err.code] += 1
                yield layer, _pattern_literal(layer), err
            if not known:
                shape = None


def _sequential(node: ast.Call, file: _File) -> bool:
    """torch's ``nn.Sequential(a, b, ...)`` (flax's and keras' take a list, and are not followed)."""
    return (isinstance(node.func, (ast.Name, ast.Attribute)) and _last_name(node.func) == "Sequential"
            and file.torch_layer(node.func) == "Sequential" and not node.keywords)


# --- a class's attributes ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Attribute:
    """An attribute that ``__init__`` sets once: the layers it runs (a layer, or a Sequential's), or the
    shape of the tensor it is."""

    name: str  # as the code writes it: 'self.to_patches'
    layers: tuple[ast.expr, ...] | None
    tensor: Shape | None


def _attributes(owner: ast.ClassDef, file: _File) -> dict[str, _Attribute]:
    """The attributes of a class that may be trusted (see the module's docstring)."""
    init = next((f for f in owner.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.name == "__init__"), None)
    if init is None or (self_name := _self_name(init)) is None:
        return {}
    stores, untrusted = file.stores
    if untrusted:
        return {}
    found = {}
    for stmt in init.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == self_name and stores[target.attr] == 1):
            continue
        attribute = _attribute_value(f"{self_name}.{target.attr}", value, stmt.lineno, file)
        if attribute is not None:
            found[target.attr] = attribute
    return found


def _attribute_stores(tree: ast.Module) -> tuple[Counter[str], bool]:
    """How often the file stores each attribute name of any object (``a.b = ...``, ``a.b.c = ...`` counts b,
    as does a shape-changing in-place method ``a.b.resize_(...)``); and whether something may set any
    (``setattr``, ``__dict__``, ``__setattr__``)."""
    stores: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in ("__dict__", "__setattr__"):
                return stores, True
            if not isinstance(node.ctx, ast.Load):
                stores[node.attr] += 1
                inner = node.value
                while isinstance(inner, (ast.Attribute, ast.Subscript)):
                    if isinstance(inner, ast.Attribute):
                        stores[inner.attr] += 2  # a store into the attribute: never trusted
                    inner = inner.value
            elif node.attr in _RESHAPING and isinstance(node.value, ast.Attribute):
                stores[node.value.attr] += 2
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            inner = node.value
            while isinstance(inner, (ast.Attribute, ast.Subscript)):
                if isinstance(inner, ast.Attribute):
                    stores[inner.attr] += 2
                inner = inner.value
        elif isinstance(node, ast.Name) and node.id in ("setattr", "vars"):
            return stores, True
    return stores, False


def _attribute_value(name: str, value: ast.expr, line: int, file: _File) -> _Attribute | None:
    """What an attribute set to ``value`` is, when it is a followed layer, torch's layer or Sequential of
    layers, or a tensor made with a known shape (``nn.Parameter(torch.randn(1, 1, dim))``)."""
    if not isinstance(value, ast.Call):
        return None
    if value in file.layers:
        return _Attribute(name, (value,), None)
    kind = file.torch_layer(value.func)
    if kind == "Sequential":
        return _Attribute(name, tuple(value.args), None) if _sequential(value, file) else None
    if kind in _KEEP or kind in _SET_LAST or kind in _APPEND:
        return _Attribute(name, (value,), None)
    if kind == "Parameter" and len(value.args) == 1 and isinstance(value.args[0], ast.Call):
        value = value.args[0]
    shape = _made(value, file, line)  # type: ignore[arg-type]
    return None if shape is None else _Attribute(name, None, shape)


def _made(call: ast.Call, file: _File, line: int) -> Shape | None:
    """The shape of ``torch.randn(1, 1, dim)`` (or rand, zeros, ones, empty; dims as arguments or one tuple)."""
    qualified = file.names.qualified(call.func)
    if qualified is None or qualified.rpartition(".")[0] != "torch" or qualified.rpartition(".")[2] not in _MAKERS:
        return None
    dims = call.args
    if len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List)):
        dims = dims[0].elts
    if not dims or any(isinstance(d, ast.Starred) for d in dims) or any(k.arg in (None, "size") for k in call.keywords):
        return None
    lengths = tuple(d.value if isinstance(d, ast.Constant) and type(d.value) is int and d.value >= 0 else None
                    for d in dims)
    return Shape(lengths, None, line, ast.unparse(call), "attribute")

