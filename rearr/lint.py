"""Find pattern strings in Python source and check them without running anything.

`rearr check` reads each file with the stdlib ``ast``, finds calls of rearr's
functions (and, on request, einops') whose pattern is a string literal, and
hands each one to `rearr.recipe.validate` -- the library's own checks, so the
checker and the library can never disagree. This module imports nothing of rearr
but rearr.recipe and rearr.errors, and nothing that needs a tensor library:
checking a tree never imports torch.

Names are resolved per file, not per scope: an ``import`` anywhere in the file
binds the name for the whole file (a later import of the same name wins).
"""

from __future__ import annotations

import ast
import re
import warnings
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .errors import RearrError
from .recipe import validate


@dataclass(frozen=True)
class Signature:
    """Where a function takes its pattern and reduction, and which keywords are not lengths."""

    pattern_at: int  # index among the positional arguments; -1: the last one (einsum)
    reduction_at: int | None = None
    options: frozenset[str] = frozenset()


SIGNATURES: dict[str, Signature] = {
    "rearrange": Signature(1, options=frozenset({"check_bounds"})),  # gathers check their indices too
    "reduce": Signature(1, 2),
    "repeat": Signature(1),
    "scatter": Signature(1, 2, frozenset({"fill", "into", "check_bounds"})),
    "einsum": Signature(-1),
    "pack": Signature(1),
    "unpack": Signature(2),
    "parse_shape": Signature(1),
}

# The functions each package exports whose patterns rearr reads the same way.
PACKAGES: dict[str, tuple[str, ...]] = {
    "rearr": tuple(SIGNATURES),
    "einops": ("rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape"),
}

# Codes of files that could not be checked at all (as opposed to patterns found wrong).
UNCHECKED = ("RA001", "RA002")

# Lengths are incomplete when a call passes **kwargs: these errors may be false alarms then.
_LENGTH_CODES = ("RA300", "RA301")

# Stand-ins for a reduction that is not a literal: validate accepts any callable for reduce,
# and scatter takes names only, so any valid one will do.
_UNKNOWN_REDUCTION: dict[str, object] = {"reduce": callable, "scatter": "sum"}

_NEWLINE = re.compile(r"\r\n|\r|\n")  # the line ends that ast counts (not \f, \v, \x1c ...)
_QUOTES = ('"""', "'''", '"', "'")


@dataclass(frozen=True)
class Problem:
    """One finding. Lines and columns are 1-based; columns count characters; ``end_col`` is exclusive."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    message: str
    hint: str | None = None
    pattern: str | None = None

    @property
    def text(self) -> str:
        """The message with its fix, as every output format shows it."""
        return f"{self.message} (fix: {self.hint})" if self.hint else self.message


def check_source(source: str, path: str = "<string>", *, einops: bool = False) -> list[Problem]:
    """Every problem in one file's source, in source order."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences: not ours to report
            tree = ast.parse(source, path)
    except (SyntaxError, ValueError, RecursionError) as e:
        return [_syntax_problem(path, e)]
    packages = [p for p in PACKAGES if p == "rearr" or einops]
    lines: list[str] | None = None
    problems = []
    for call, op in _calls(tree, source, packages):
        found = _check_call(call, op)
        if found is not None:
            lines = lines if lines is not None else _NEWLINE.split(source)
            problems.append(_problem(path, lines, *found))
    return sorted(problems, key=lambda p: (p.line, p.col))


def check_file(path: str, *, einops: bool = False) -> list[Problem]:
    """`check_source` on a file; a file that cannot be read or decoded is one RA002 problem."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return [Problem(path, 1, 1, 1, 1, "RA002", f"cannot read the file: {e.strerror or e}")]
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1  # in bytes: the line is not text
        message = f"the file is not UTF-8 (byte 0x{data[e.start]:02x})"
        return [Problem(path, line, col, line, col + 1, "RA002", message, "save the file as UTF-8")]
    return check_source(source.removeprefix("\ufeff"), path, einops=einops)


def _syntax_problem(path: str, e: Exception) -> Problem:
    if not isinstance(e, SyntaxError):
        return Problem(path, 1, 1, 1, 1, "RA001", f"Python cannot parse the file: {e}")
    line, col = e.lineno or 1, e.offset or 1
    end_line, end_col = e.end_lineno or line, e.end_offset or 0
    if (end_line, end_col) <= (line, col):  # unknown or empty span: mark one character
        end_line, end_col = line, col + 1
    return Problem(path, line, col, end_line, end_col, "RA001", f"Python syntax error: {e.msg}")


def _calls(tree: ast.Module, source: str, packages: list[str]) -> Iterator[tuple[ast.Call, str]]:
    """The calls of the packages' functions, with the operation each one is."""
    # An import of a package spells its name, and a call of a function (or an import that binds
    # the name to something else) spells the name: only the parts of the tree on such lines are
    # looked into, and most files have none.
    modules, functions = _bindings(_imports(_nodes_on(tree, _lines_naming(source, packages))), packages)
    if not (modules or functions):
        return
    nodes = list(_nodes_on(tree, _lines_naming(source, [*packages, *modules, *functions])))
    modules, functions = _bindings(_imports(nodes), packages)
    for node in nodes:
        if isinstance(node, ast.Call) and (op := _operation(node.func, modules, functions)):
            yield node, op


def _imports(nodes: Iterable[ast.AST]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements among the nodes, in source order."""
    found = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _operation(func: ast.expr, modules: dict[str, str], functions: dict[str, str]) -> str | None:
    """The operation that ``func(...)`` calls: ``rearrange(...)``, ``rearr.rearrange(...)``, or None."""
    if isinstance(func, ast.Name):
        return functions.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules:
        return func.attr if func.attr in PACKAGES[modules[func.value.id]] else None
    return None


def _lines_naming(source: str, names: list[str]) -> list[int]:
    """The lines (1-based, ascending) on which one of the names ends a word.

    A superset of the lines where the name stands alone ('r' matches 'for'), which costs a
    closer look at those lines only; a leading \\b would make the search twenty times slower.
    """
    if "\r" in source:  # ast also ends a line at a lone '\r'
        source = _NEWLINE.sub("\n", source)
    lines, line, pos = [], 1, 0
    for match in re.finditer(rf"(?:{'|'.join(map(re.escape, names))})\b", source):
        line += source.count("\n", pos, match.start())
        pos = match.start()
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def _nodes_on(tree: ast.AST, lines: list[int]) -> Iterator[ast.AST]:
    """Every node of the subtrees that span one of ``lines`` (ascending).

    A node spans its children, so the subtrees that span none of the lines need no look.
    """
    stack = [tree] if lines else []
    while stack:
        node = stack.pop()
        end = getattr(node, "end_lineno", None)
        if end is not None:
            decorators = getattr(node, "decorator_list", None)  # they stand above the 'def' line
            start = decorators[0].lineno if decorators else node.lineno
            i = bisect_left(lines, start)
            if i == len(lines) or lines[i] > end:
                continue
        yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)


def _bindings(
    imports: list[ast.Import | ast.ImportFrom], packages: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Names bound to the packages (name -> package) and to their functions (name -> operation)."""
    modules: dict[str, str] = {}
    functions: dict[str, str] = {}

    def bind(name: str, module: str | None = None, function: str | None = None) -> None:
        # Any import of a name unbinds what an earlier import bound it to.
        modules.pop(name, None)
        functions.pop(name, None)
        if module is not None:
            modules[name] = module
        if function is not None:
            functions[name] = function

    for node in imports:  # in source order: a later import of a name wins
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if alias.asname is None:  # `import a.b` binds `a`
                    bind(top, top if top in packages else None)
                else:  # `import a.b as c` binds c to a.b, which is not the package
                    bind(alias.asname, alias.name if alias.name in packages else None)
        else:
            package = node.module if node.level == 0 and node.module in packages else None
            for alias in node.names:
                if alias.name == "*":
                    for name in PACKAGES[package] if package else ():
                        bind(name, function=name)
                else:
                    known = package is not None and alias.name in PACKAGES[package]
                    bind(alias.asname or alias.name, function=alias.name if known else None)
    return modules, functions


def _check_call(call: ast.Call, op: str) -> tuple[ast.Constant, RearrError, ast.expr | None] | None:
    """(pattern literal, the error, the reduction literal if it is the fault) when the call is wrong."""
    sig = SIGNATURES[op]
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    open_kwargs = len(keywords) < len(call.keywords)
    pattern = keywords.pop("pattern", None) or _positional(call.args, sig.pattern_at)
    if not (isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)):
        return None  # not a literal (an f-string is a JoinedStr): nothing to check without running
    reduction_node, reduction = None, None
    if sig.reduction_at is not None:
        reduction_node = keywords.pop("reduction", None) or _positional(call.args, sig.reduction_at)
        if isinstance(reduction_node, ast.Constant):
            reduction = reduction_node.value
        elif reduction_node is not None or open_kwargs or _has_star(call.args, sig.reduction_at):
            reduction = _UNKNOWN_REDUCTION[op]  # a variable, a lambda, or passed through *args/**kwargs
    lengths = {name: _literal(value) for name, value in keywords.items() if name not in sig.options}
    err = validate(pattern.value, op, reduction, lengths)
    if err is None or (open_kwargs and err.code in _LENGTH_CODES):
        return None
    at_reduction = err.code == "RA400" and isinstance(reduction_node, ast.Constant)
    return pattern, err, reduction_node if at_reduction else None


def _positional(args: list[ast.expr], at: int) -> ast.expr | None:
    """The positional argument at ``at`` (-1: the last), unless *args makes its place unknown."""
    if at < 0:
        return args[-1] if args and not isinstance(args[-1], ast.Starred) else None
    return None if _has_star(args, at) or at >= len(args) else args[at]


def _has_star(args: list[ast.expr], upto: int) -> bool:
    return any(isinstance(a, ast.Starred) for a in args[: upto + 1])


def _literal(node: ast.expr) -> object:
    """A length keyword's value when it is a literal (``4``, ``-1``, ``'x'``), else None: unknown."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        if isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)):
            return ast.literal_eval(node)
    return None


def _problem(path: str, lines: list[str], literal: ast.Constant, err: RearrError, other: ast.expr | None) -> Problem:
    text = literal.value
    line, col, end_line, end_col = _span(lines, other or literal)
    if other is None and err.col is not None:
        offset = _pattern_offset(lines, literal, text)
        if offset is not None:  # the fault's own character, in the source line
            line, col = literal.lineno, col + offset + err.col
            end_line, end_col = line, col + 1
    return Problem(path, line, col, end_line, end_col, err.code, err.message, err.hint, text)


def _span(lines: list[str], node: ast.expr) -> tuple[int, int, int, int]:
    """A node's start and end as 1-based character columns (ast counts UTF-8 bytes)."""
    end_line, end_col = node.end_lineno, node.end_col_offset
    assert end_line is not None and end_col is not None  # ast.parse sets them on every expression
    col = _char_col(lines[node.lineno - 1], node.col_offset)
    return node.lineno, col + 1, end_line, _char_col(lines[end_line - 1], end_col) + 1


def _char_col(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def _pattern_offset(lines: list[str], literal: ast.Constant, text: str) -> int | None:
    """Characters from the literal's start to its pattern's first character, when the literal
    is a plain one-line string (no escapes, no concatenation) so that the pattern's columns map
    one to one onto the source line; otherwise None."""
    if literal.end_lineno != literal.lineno or literal.end_col_offset is None:
        return None
    source = lines[literal.lineno - 1].encode("utf-8")[literal.col_offset : literal.end_col_offset].decode("utf-8")
    prefix = source[: len(source) - len(source.lstrip("rRuU"))]
    quote = next((q for q in _QUOTES if source.startswith(q, len(prefix))), None)
    if quote is None or source != f"{prefix}{quote}{text}{quote}":
        return None
    return len(prefix) + len(quote)
