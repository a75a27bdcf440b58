"""Shape lines of a function's docstring, read for `rearr check`'s shape flow: a soft source.

A parameter described on a line of its function's docstring as ``x: (batch, seq, dim)``, ``x (Tensor):
(B, N, C)``, ``x: Tensor of shape (b, n, d)``, ``x (torch.Tensor): shape [b, c, h, w]`` or, numpy's way,
``x : ndarray, shape (n, d)`` has that many dimensions, and the lengths written as integers. A name or
an expression (``h*w``) is a dimension of unknown length, ``...`` any number of them. The line must say
nothing else (``x: (b, n, d) or (n, d)`` gives nothing), the name must be one of the function's
parameters, and a parameter described on two lines that disagree gives nothing. A docstring may be out
of date: a finding from one names it, so that the fix may be the docstring.
"""

from __future__ import annotations

import ast
import re

from .jaxtyping import Dims, Length

_LINE = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?:\((?P<type>[^()]*)\))?\s*:\s*(?P<rest>.+?)\s*$")
_SHAPE = re.compile(r"^(?:[\w.\[\]|]+(?:\s+of)?(?:\s+with)?\s*,?\s*)?(?:(?:of\s+|with\s+)?shape:?\s*)?"
                    r"(?P<dims>\([^()]*\)|\[[^\[\]]*\])\.?$", re.IGNORECASE)
_EXPRESSION = re.compile(r"^[\w\s*+\-/]+$")


def parameter_shapes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, tuple[Dims, str, int]]:
    """Each parameter that the docstring gives a shape: (its dims, the shape as written, its line number)."""
    docstring = function.body[0] if function.body else None
    if not (isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
            and isinstance(docstring.value.value, str)):
        return {}
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    found: dict[str, tuple[Dims, str, int]] = {}
    refused: set[str] = set()
    for offset, line in enumerate(docstring.value.value.splitlines()):
        m = _LINE.match(line)
        if m is None or m["name"] not in params:
            continue
        dims = _shape(m["rest"])
        if dims is None:
            continue
        name = m["name"]
        if name in found and found[name][0] != dims:
            refused.add(name)  # two lines that disagree
        found.setdefault(name, (dims, _SHAPE.match(m["rest"])["dims"], docstring.lineno + offset))  # type: ignore[index]
    return {name: value for name, value in found.items() if name not in refused}


def _shape(text: str) -> Dims | None:
    """The dims of a line's description, when it is a shape and nothing else."""
    m = _SHAPE.match(text)
    if m is None:
        return None
    items = [item.strip() for item in m["dims"][1:-1].split(",")]
    if items and items[-1] == "" and len(items) > 1:  # '(n,)'
        items.pop()
    if not items or any(item == "" for item in items):
        return None
    head: list[Length] = []
    tail: list[Length] | None = None
    for item in items:
        if item in ("...", "*"):
            if tail is not None:
                return None
            tail = []
        elif item.isascii() and item.isdigit():
            (head if tail is None else tail).append(int(item))
        elif _EXPRESSION.match(item):
            (head if tail is None else tail).append(None)
        else:
            return None
    return tuple(head), None if tail is None else tuple(tail)
