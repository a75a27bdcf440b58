"""jaxtyping annotations read from the source, for `rearr check`'s shape flow: nothing is imported.

``x: Float[Tensor, "b 3 h w"]`` says that x has 4 dimensions, the second of length 3. The shape
string is read by jaxtyping's own grammar (jaxtyping/_array_types.py): symbols separated by blanks,
each an int (a fixed length), a name (a length shared by the annotations that name it), ``_`` or
``_name`` (not checked), ``#name`` (that length or 1), ``?name`` (varies in a PyTree), ``doc=4``
(a documentation name for 4), an expression (``dim-1``), and at most one ``*name`` or ``...``
(any number of dimensions). Only fixed lengths are kept: every other symbol is an unknown length,
since a conflict needs two known lengths. A string that jaxtyping would refuse gives nothing.

Names are resolved per file, and only when every binding of the name in the file is the same
import: ``from jaxtyping import Float as F`` makes ``F`` jaxtyping's Float, but a name that is
also assigned, defined or imported from elsewhere anywhere in the file is not trusted.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

Length = int | None  # None: not known
# A shape: the dimensions before the variadic symbol, and those after it (None: there is none, so
# the rank is the first tuple's length).
Dims = tuple[tuple[Length, ...], tuple[Length, ...] | None]

# The dtype wrappers (jaxtyping/_array_types.py's _make_dtype), less Key: a PRNG key array's shape is not its data's.
DTYPES = frozenset({"Shaped", "Bool", "Num", "Inexact", "Float", "Complex", "Integer", "UInt", "Int", "Real"})
_PRECISE = re.compile(r"(?:B?Float|U?Int|Complex)\d+(?:e\d+m\d+[a-z0-9]*)?")  # Float32, BFloat16, Float8e4m3fn
# The array types whose annotation is the array itself (a jaxtyping alias such as Image = Float[Array, "c h w"]
# would prepend its own dimensions, so only these are read).
ARRAYS = frozenset({"torch.Tensor", "numpy.ndarray", "jax.Array", "jax.numpy.ndarray", "jaxtyping.Array",
                    "jaxtyping.ArrayLike", "tensorflow.Tensor"})
_AMBIGUOUS = ""  # a name bound in more than one way, or not by an import


def parse_dims(text: str) -> Dims | None:
    """A jaxtyping shape string as (dimensions before the variadic one, after it or None); None when
    jaxtyping would refuse the string."""
    head: list[Length] = []
    tail: list[Length] | None = None
    for elem in text.split():
        if ("," in elem and "(" not in elem) or elem.endswith("#"):
            return None
        length, variadic = _symbol(elem)
        if length is False:
            return None
        if variadic:
            if tail is not None:
                return None  # two variadic symbols
            tail = []
        else:
            (head if tail is None else tail).append(length)  # type: ignore[arg-type]
    return tuple(head), None if tail is None else tuple(tail)


def _symbol(elem: str) -> tuple[Length | bool, bool]:
    """(the length, or False when jaxtyping refuses the symbol; whether it is variadic)."""
    if "..." in elem:
        return (None, True) if elem == "..." else (False, False)
    seen: set[str] = set()
    while elem:
        first = elem[0]
        if first in "#*_?":
            if first in seen:
                return False, False
            seen.add(first)
            elem = elem[1:]
        elif elem.count("=") == 1:  # 'rows=4': a documentation name for 4
            elem = elem.partition("=")[2]
        else:
            break
    variadic = "*" in seen
    if elem == "" or elem.isidentifier():
        if "_" in seen and "#" in seen:
            return False, False
        return None, variadic
    if elem.isascii() and elem.isdigit():
        if seen & {"*", "_", "?"}:
            return False, False
        return (None if "#" in seen else int(elem)), False  # '#4': 4 or 1
    if seen & {"*", "_", "?"}:  # a symbolic expression cannot be variadic, anonymous or tree-dependent
        return False, False
    return None, False  # an expression ('dim-1', '+3'): not known here


class Annotations:
    """The jaxtyping annotations of one file's functions."""

    def __init__(self, tree: ast.Module) -> None:
        self.names = _bindings(tree)

    def qualified(self, node: ast.expr) -> str | None:
        """``F`` -> 'jaxtyping.Float' (after ``from jaxtyping import Float as F``), ``np.ndarray`` ->
        'numpy.ndarray'; None when the name is not bound by one import only."""
        if isinstance(node, ast.Name):
            found = self.names.get(node.id)
            return found or None
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def dims(self, annotation: ast.expr | None) -> tuple[Dims, str] | None:
        """The shape that an annotation gives, and its shape string; None unless it is certainly a
        jaxtyping array annotation of a plain array type. A string annotation is parsed first."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value.strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
        if not isinstance(annotation, ast.Subscript):
            return None
        dtype = self.qualified(annotation.value)
        if dtype is None or not dtype.startswith("jaxtyping.") or not _is_dtype(dtype.partition(".")[2]):
            return None
        args = annotation.slice
        if not (isinstance(args, ast.Tuple) and len(args.elts) == 2):
            return None
        array, shape = args.elts
        if self.qualified(array) not in ARRAYS or not _is_str(shape):
            return None
        dims = parse_dims(shape.value)
        return None if dims is None else (dims, shape.value)


def _is_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _is_dtype(name: str) -> bool:
    return name in DTYPES or _PRECISE.fullmatch(name) is not None


def _bindings(tree: ast.Module) -> dict[str, str]:
    """Each name bound in the file -> the full name of what its imports bind it to, or _AMBIGUOUS."""
    found: dict[str, str] = {}

    def bind(name: str, what: str) -> None:
        found[name] = what if found.get(name, what) == what else _AMBIGUOUS

    for node in ast.walk(tree):
        for name, what in _bound(node):
            bind(name, what)
    return found


def _bound(node: ast.AST) -> Iterator[tuple[str, str]]:
    """(name, what it is bound to) for each name that the node binds; _AMBIGUOUS but for imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname is None:
                top = alias.name.partition(".")[0]
                yield top, top
            else:
                yield alias.asname, alias.name
    elif isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if node.level or node.module is None:
                yield alias.asname or alias.name, _AMBIGUOUS
            elif alias.name == "*":  # what it binds is not written here: jaxtyping's own names are known
                if node.module == "jaxtyping":
                    yield from ((name, f"jaxtyping.{name}") for name in (*DTYPES, "Array", "ArrayLike"))
            else:
                yield alias.asname or alias.name, f"{node.module}.{alias.name}"
    elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        yield node.id, _AMBIGUOUS
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name, _AMBIGUOUS
    elif isinstance(node, ast.arg):
        yield node.arg, _AMBIGUOUS
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from ((name, _AMBIGUOUS) for name in node.names)
