"""Find pattern strings in Python source and check them without running anything.

`rearr check` reads each file with the stdlib ``ast``, finds calls of rearr's
functions (and, on request, einops') whose pattern is a string literal, and
hands each one to `rearr.rules.recipe.validate` -- the library's own checks, so the
checker and the library can never disagree. This module imports nothing of rearr
but rearr.rules.recipe and rearr.errors, and nothing that needs a tensor library:
checking a tree never imports torch.

Names are resolved per file, not per scope: a call uses the nearest import of its name above
it, wherever that import stands (the first one, when none is above).
"""

from __future__ import annotations

import ast
import errno
import io
import os
import re
import stat
import sys
import tokenize
import warnings
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from ..errors import RearrError
from ..rules.arguments import check_bounds_error
from ..rules.layer_recipe import layer_error, validate_einmix
from ..rules.recipe import UNKNOWN, analyze, einsum_operand_count, operation, swapped_arguments, validate
from . import flow


@dataclass(frozen=True)
class Signature:
    """Where a function takes its pattern and reduction, and which keywords are not lengths."""

    op: str  # whose rules apply: an operation of rearr.rules.recipe, "einmix" (rearr's) or "einops-einmix"
    pattern_at: int  # index among the positional arguments; -1: the last one (einsum)
    reduction_at: int | None = None
    options: frozenset[str] = frozenset()
    sizes_at: int | None = None  # flax layers: the lengths are one dict, `sizes=` or at this position
    layer: str | None = None  # a rearr.layers class: its constructor's rules (rearr.rules.layer_recipe) apply


SIGNATURES: dict[str, Signature] = {
    "rearrange": Signature("rearrange", 1, options=frozenset({"check_bounds"})),  # gathers check indices too
    "reduce": Signature("reduce", 1, 2),
    "repeat": Signature("repeat", 1),
    "scatter": Signature("scatter", 1, 2, frozenset({"fill", "into", "check_bounds"})),
    "einsum": Signature("einsum", -1),
    "pack": Signature("pack", 1),
    "unpack": Signature("unpack", 2),
    "parse_shape": Signature("parse_shape", 1),
}

# rearr.layers: the pattern comes first; Gather's and Scatter's index tensors (and Scatter's into=)
# come at forward time, so their names are not missing lengths.
_EINMIX = Signature("einmix", 0, options=frozenset({"weight_shape", "bias_shape"}))
LAYERS: dict[str, Signature] = {
    "Rearrange": Signature("rearrange", 0, layer="Rearrange"),
    "Reduce": Signature("reduce", 0, 1, layer="Reduce"),
    "Repeat": Signature("repeat", 0, layer="Repeat"),
    "EinMix": _EINMIX,
    "Gather": Signature("rearrange", 0, options=frozenset({"check_bounds"}), layer="Gather"),
    "Scatter": Signature("scatter", 0, 1, frozenset({"fill", "check_bounds"}), layer="Scatter"),
}
# einops' Rearrange takes no index brackets (they are not einops'), and its EinMix refuses groups in
# weight_shape and bias_shape, which rearr's takes.
_EINOPS_LAYERS = {"Rearrange": Signature("rearrange", 0), "Reduce": Signature("reduce", 0, 1),
                  "EinMix": Signature("einops-einmix", 0, options=_EINMIX.options)}
# flax's layers are dataclasses: Rearrange(pattern, sizes), Reduce(pattern, reduction, sizes),
# EinMix(pattern, weight_shape, bias_shape, sizes), and `name=`/`parent=` are flax's own.
_FLAX_LAYERS = {
    "Rearrange": Signature("rearrange", 0, sizes_at=1),
    "Reduce": Signature("reduce", 0, 1, sizes_at=2),
    "EinMix": Signature("einops-einmix", 0, sizes_at=3),
}

# What each module exports whose patterns rearr reads the same way, by the module's full name.
MODULES: dict[str, dict[str, Signature]] = {
    "rearr": SIGNATURES,
    "rearr.layers": LAYERS,
    "einops": {name: SIGNATURES[name] for name in
               ("rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape")},
    **{f"einops.layers.{fw}": _EINOPS_LAYERS for fw in ("torch", "tensorflow", "keras", "paddle", "oneflow")},
    "einops.layers.flax": _FLAX_LAYERS,
}

# The functions that say so when the pattern comes where the tensor goes (recipe.swapped_arguments).
_TENSOR_FIRST = ("rearrange", "reduce", "repeat", "scatter")

# Codes of files that could not be checked at all (as opposed to patterns found wrong): always reported,
# whatever is selected.
UNCHECKED = ("RA001", "RA002", "RA003")

# Lengths are incomplete when a call passes **kwargs: a missing length or index (RA301) may be a false
# alarm then. A keyword that the call does pass and that names nothing (RA300) is wrong whatever **kwargs holds.
_LENGTH_CODES = ("RA301",)

# Stand-ins for a reduction that is not a literal: validate accepts any callable for reduce,
# and scatter takes names only, so any valid one will do.
_UNKNOWN_REDUCTION: dict[str, object] = {"reduce": callable, "scatter": "sum"}

# The packages' names as words: a file without them cannot import them (`rearrange` alone is no import).
_NAMES = {True: re.compile(r"\b(?:rearr|einops)\b"), False: re.compile(r"\brearr\b")}
_IMPORTS_EINOPS = re.compile(r"^[ \t]*(?:from|import)[ \t]+einops\b", re.MULTILINE)
_NEWLINE = re.compile(r"\r\n|\r|\n")  # the line ends that ast counts (not \f, \v, \x1c ...)
_QUOTES = ('"""', "'''", '"', "'")

# Larger files are not read: no hand-written Python file comes near it, and input like /dev/zero
# must not exhaust the memory.
MAX_BYTES = 16 * 2**20
_TOO_LARGE = "rearr check reads hand-written source: leave generated files out"

PYTHON = "Python {}.{}.{}".format(*sys.version_info[:3])  # the Python that parses the files

# Syntax that a newer Python added, recognised where an older parser stops: (the first Python that
# parses it, 'line:' or 'msg:' and a regular expression on the error's line or message, what it is).
_NEWER_SYNTAX: tuple[tuple[tuple[int, int], str, str], ...] = (
    ((3, 12), r"line:^\s*type\s+[A-Za-z_]\w*\s*[\[=]", "a 'type' statement"),
    ((3, 12), r"line:^\s*(?:async\s+)?(?:def|class)\s+[A-Za-z_]\w*\s*\[", "a type parameter list"),
    ((3, 12), r"msg:^f-string", "this f-string (PEP 701)"),
    ((3, 14), r"msg:multiple exception types must be parenthesized", "'except' without parentheses"),
)


Edit = tuple[int, int, int, int, str]


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
    # The edits that apply the hint, when it is literal (`rearr check --fix`): (line, col, end_line, end_col,
    # text), columns as above.
    fix: tuple[Edit, ...] = ()
    # The lines where a noqa comment silences it, best first: its own, then the last and first of its call.
    noqa_lines: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        """The message with its fix, as every output format shows it."""
        return f"{self.message} (fix: {self.hint})" if self.hint else self.message


@dataclass
class Tally:
    """What a run looked at: the summary line's figures."""

    rearr: int = 0  # calls of rearr whose pattern is a literal
    einops: int = 0  # and of einops
    files: Counter[str] = field(default_factory=Counter)  # files that import each package
    einops_off: int = 0  # files that import einops, read with einops' checks off

    @property
    def patterns(self) -> int:
        return self.rearr + self.einops

    def why_none(self) -> str:
        """Why no pattern was found: what the files import, and what was not checked."""
        off = ""
        if self.einops_off:
            verb = "imports" if self.einops_off == 1 else "import"
            off = (f"{_count(self.einops_off, 'file')} {verb} einops, whose checks are off "
                   "(einops = false, or --no-einops)")
        read = self.files  # einops' imports count here only where its checks are on
        if not read:
            return off or "none of them imports rearr or einops"
        importing = " and ".join(f"{_count(n, 'file')} {'imports' if n == 1 else 'import'} {package}"
                                 for package, n in sorted(read.items(), reverse=True))
        return "; ".join(filter(None, [f"{importing}, but no call has a pattern written as a string literal", off]))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def check_source(
    source: str, path: str = "<string>", *, einops: bool = True, tally: Tally | None = None,
    unused_noqa: bool = False, stats: flow.Stats | None = None,
) -> list[Problem]:
    """Every problem in one file's source, in source order, less those that a `# noqa` (on its line) or a
    `# rearr: noqa` (for the file) silences; with ``unused_noqa``, each noqa code that silences nothing
    is a problem too (RA010).

    A file whose text does not name a checked package as a word cannot import it, and is not parsed
    (most files of a tree). One that does and that Python cannot parse is a problem: it may hold
    patterns that went unchecked.
    """
    tally = tally if tally is not None else Tally()
    packages = ["rearr", "einops"] if einops else ["rearr"]
    if not einops and _IMPORTS_EINOPS.search(source):
        tally.einops_off += 1
    if not any(package in source for package in packages) or not _NAMES[einops].search(source):
        return []  # the substring test first: it is cheaper than the regex
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences: not ours to report
            tree = ast.parse(source, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:  # deep nesting: MemoryError
        return [_syntax_problem(path, source, e)]
    lines: list[str] | None = None
    problems: list[Problem] = []
    followed: flow.Calls = {}  # function calls
    layers: flow.Calls = {}  # layer constructors
    for call, sig, package in _calls(tree, source, packages, tally):
        literal, found = _check_call(call, sig)
        if package == "einops":
            tally.einops += literal
        else:
            tally.rearr += literal
        if found is None and literal and sig.sizes_at is None and (
                sig.op in flow.FOLLOWED or sig.op in flow.MIXES and sig.pattern_at == 0):
            pattern = _argument(call, {k.arg: k.value for k in call.keywords if k.arg}, "pattern", sig.pattern_at)
            (layers if sig.pattern_at == 0 else followed)[call] = (sig.op, pattern.value)  # type: ignore[union-attr]
        if found is not None:
            lines = lines if lines is not None else _NEWLINE.split(source)
            problem = _problem(path, lines, *found)
            if package == "einops":
                problem = for_einops(problem)
            problems.append(_with_fix(_placed(problem, call), call, found[0], lines))
    chained = flow.check_sequential(tree, layers, source, stats) if layers else iter(())
    functions = flow.check_functions(tree, followed, source, layers, stats) if followed or layers else iter(())
    seen = set()
    for call, literal_node, err in [*chained, *functions]:  # a layer's finding once, if a method runs it too
        lines = lines if lines is not None else _NEWLINE.split(source)
        problem = _placed(_problem(path, lines, literal_node, err, None), call)
        if (problem.line, problem.col, problem.code, problem.message) not in seen:
            seen.add((problem.line, problem.col, problem.code, problem.message))
            problems.append(problem)
    if (problems or unused_noqa) and _MENTIONS_NOQA.search(source):
        directives = noqa_directives(source)
        used: dict[Noqa, set[str]] = {d: set() for d in directives}
        kept = []
        for problem in problems:
            silencing = [d for d in directives if d.silences(problem.code, problem.noqa_lines)]
            for d in silencing:
                used[d].add(problem.code)
            if not silencing:
                kept.append(problem)
        found_ = [*kept, *(_unused(path, d, used[d]) for d in directives)] if unused_noqa else kept
        return sorted((p for p in found_ if p is not None), key=lambda p: (p.line, p.col))
    return sorted(problems, key=lambda p: (p.line, p.col))


def _placed(problem: Problem, call: ast.Call) -> Problem:
    """The problem with the lines whose noqa silences it: its own, then the last and the first of its call."""
    return replace(problem, noqa_lines=tuple(dict.fromkeys([problem.line, call.end_lineno or call.lineno,
                                                            call.lineno])))


# A noqa comment, bare or with ":" and codes (separated by commas or blanks), anywhere in a comment, as ruff reads
# it; with "rearr:" before the noqa, the same for the whole file (as ruff's own file-wide form).
_CODES = r"(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?"
_NOQA = re.compile(rf"#\s*(?P<file>rearr\s*:\s*)?noqa{_CODES}", re.IGNORECASE)
_MENTIONS_NOQA = re.compile("noqa", re.IGNORECASE)


@dataclass(frozen=True)
class Noqa:
    """One noqa directive: where it is (1-based line, 0-based character columns of its text), and what it names."""

    line: int
    col: int
    end_col: int
    codes: frozenset[str] | None  # None: bare, every code
    whole_file: bool
    text: str
    # What surrounds it, to remove it cleanly: whether it opens its comment, whether the comment goes on
    # after it, and the blanks before it.
    opens_comment: bool
    more_after: bool
    blanks_before: int

    def silences(self, code: str, lines: tuple[int, ...]) -> bool:
        if self.codes is not None and code not in self.codes:
            return False
        return code not in UNCHECKED if self.whole_file else self.line in lines


def noqa_directives(source: str) -> list[Noqa]:
    """Every noqa directive, in source order. Comments are found by the tokenizer, so a '#' inside a string
    is not one."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            for m in _NOQA.finditer(token.string):
                codes = m["codes"]
                line, col = token.start
                before = token.line[: col + m.start()]
                found.append(Noqa(line, col + m.start(), col + m.end(),
                                  None if codes is None else frozenset(re.split(r"[,\s]+", codes.upper())),
                                  m["file"] is not None, m[0], m.start() == 0, m.end() < len(token.string),
                                  len(before) - len(before.rstrip(" \t"))))
    except (tokenize.TokenError, SyntaxError):  # ast parsed it; the comments seen so far stand
        pass
    return found


def _unused(path: str, d: Noqa, used: set[str]) -> Problem | None:
    """RA010 for the codes of a directive that silence nothing (a bare `# noqa` is left alone: it may be
    another tool's), with the edit that removes them."""
    if d.codes is None:
        if not d.whole_file or used:
            return None
        unused = ["# rearr: noqa"]
    else:
        if "RA010" in d.codes:  # it silences its own report
            return None
        unused = sorted(c for c in d.codes if c.startswith("RA") and c not in used)
        if not unused:
            return None
    where = "in this file" if d.whole_file else "on this line"
    kept = sorted((d.codes or set()) - set(unused))
    start = d.col
    if kept:  # the codes that silence something stay
        text = d.text[: d.text.index(":", d.text.lower().index("noqa")) + 1] + " " + ", ".join(kept)
        hint = f"remove {', '.join(unused)} from it"
    elif d.opens_comment and d.more_after:  # '# noqa: RA200 why' -> '# why'
        text, hint = "#", "remove it"
    else:  # the directive and the blanks before it go
        text, hint, start = "", "remove it", d.col - d.blanks_before
    what = f"{', '.join(unused)} {'silences' if len(unused) == 1 else 'silence'} nothing {where}"
    return Problem(path, d.line, d.col + 1, d.line, d.end_col + 1, "RA010", f"unused noqa: {what}", hint,
                   fix=((d.line, start + 1, d.line, d.end_col + 1, text),))


def check_file(path: str, *, einops: bool = True, tally: Tally | None = None) -> list[Problem]:
    """`check_source` on a file; a file that cannot be read or decoded is one RA002 problem.

    Only regular files are read (a FIFO would block, a device may never end), and at most MAX_BYTES.
    """
    text = read_text(path)
    if isinstance(text, Problem):
        return [text]
    return check_source(text.removeprefix("\ufeff"), path, einops=einops, tally=tally)


def check_bytes(data: bytes, path: str, *, einops: bool = True, tally: Tally | None = None) -> list[Problem]:
    """`check_source` on a file's bytes; bytes that are not UTF-8 are one RA002 problem."""
    text = decode(data, path)
    if isinstance(text, Problem):
        return [text]
    return check_source(text.removeprefix("\ufeff"), path, einops=einops, tally=tally)


def read_text(path: str) -> str | Problem:
    """A file's text (with its BOM, if it has one), or the RA002 problem that says why it cannot be read."""
    try:
        data = _read(path)
    except OSError as e:
        return Problem(path, 1, 1, 1, 1, "RA002", f"cannot read the file: {describe_os_error(e)}")
    except _NotRead as e:
        return Problem(path, 1, 1, 1, 1, "RA002", str(e), e.hint)
    return decode(data, path)


def decode(data: bytes, path: str) -> str | Problem:
    """Bytes as UTF-8 text (with its BOM, if it has one), or the RA002 problem that says why they are not."""
    if len(data) > MAX_BYTES:
        return Problem(path, 1, 1, 1, 1, "RA002", f"the file is larger than {MAX_BYTES // 2**20} MiB: not read",
                       _TOO_LARGE)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1  # in bytes: the line is not text
        message = f"the file is not UTF-8 (byte 0x{data[e.start]:02x})"
        return Problem(path, line, col, line, col + 1, "RA002", message, "save the file as UTF-8")


class _NotRead(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _read(path: str) -> bytes:
    # O_NONBLOCK: opening a FIFO that nobody writes to must not wait; fstat then says what was opened.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _NotRead(f"not a regular file ({file_kind(mode)}): not read",
                           "name Python source files; in folders, other files are skipped")
        f = os.fdopen(fd, "rb")  # owns fd from here on
    except BaseException:
        os.close(fd)
        raise
    with f:
        data = f.read(MAX_BYTES + 1)  # the file may grow after fstat: never read more than the cap
    if len(data) > MAX_BYTES:
        raise _NotRead(f"the file is larger than {MAX_BYTES // 2**20} MiB: not read", _TOO_LARGE)
    return data


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a plain file")


def describe_os_error(e: OSError) -> str:
    """An OSError in words; a symlink loop is named, since 'no such file' would send the reader astray."""
    if e.errno == errno.ELOOP:
        return "a symbolic link loop (too many levels of symbolic links)"
    return e.strerror or str(e)


def _syntax_problem(path: str, source: str, e: Exception) -> Problem:
    if not isinstance(e, SyntaxError):
        what = "it nests too deeply" if isinstance(e, MemoryError | RecursionError) else str(e)
        return Problem(path, 1, 1, 1, 2, "RA001", f"{PYTHON} cannot parse the file: {what}")
    line, col = e.lineno or 1, e.offset or 1
    end_line, end_col = e.end_lineno or line, e.end_offset or 0
    if (end_line, end_col) <= (line, col):  # unknown or empty span: mark one character
        end_line, end_col = line, col + 1
    newer = _newer_syntax(e, _NEWLINE.split(source)[line - 1:line])
    if newer is None:
        return Problem(path, line, col, end_line, end_col, "RA001", f"{PYTHON} cannot parse the file: {e.msg}")
    version = "{}.{}".format(*newer[0])
    return Problem(path, line, col, end_line, end_col, "RA003",
                   f"{newer[1]} needs Python {version}; {PYTHON} cannot parse the file",
                   f"run rearr check with Python {version} or newer")


def _newer_syntax(e: SyntaxError, line: list[str]) -> tuple[tuple[int, int], str] | None:
    """(the Python that added it, what it is) when the error is syntax newer than this Python's."""
    for version, rule, what in _NEWER_SYNTAX:
        where, _, regex = rule.partition(":")
        if sys.version_info < version and re.search(regex, "".join(line) if where == "line" else e.msg or ""):
            return version, what
    return None


def _calls(tree: ast.Module, source: str, packages: list[str], tally: Tally
           ) -> Iterator[tuple[ast.Call, Signature, str]]:
    """The calls of the packages' functions and layers, with the signature and the package of each."""
    # An import of a package spells its name, and a call of a function (or an import that binds
    # the name to something else) spells the name: only the parts of the tree on such lines are
    # looked into, and most files have none.
    names = _bindings(_imports(_nodes_on(tree, _lines_naming(source, packages))), packages)
    if not names.ours:
        return
    nodes = list(_nodes_on(tree, _lines_naming(source, [*packages, *names.ours])))
    names = _bindings(_imports(nodes), packages)
    tally.files.update(names.packages)
    for node in nodes:
        if isinstance(node, ast.Call) and (found := _operation(node.func, names, (node.lineno, node.col_offset))):
            yield node, *found


def _imports(nodes: Iterable[ast.AST]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements among the nodes, in source order."""
    found = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _operation(func: ast.expr, names: _Names, at: tuple[int, int]) -> tuple[Signature, str] | None:
    """What ``func(...)`` at ``at`` calls -- ``rearrange(...)``, ``rearr.rearrange(...)``,
    ``einops.layers.torch.Rearrange(...)``, ``L.Rearrange(...)`` -- and its package, or None."""
    if isinstance(func, ast.Name):
        module, function = names.at(func.id, at)
        return None if function is None or module is None else (function, module.partition(".")[0])
    attrs = []
    while isinstance(func, ast.Attribute):
        attrs.append(func.attr)
        func = func.value
    module, function = names.at(func.id, at) if attrs and isinstance(func, ast.Name) else (None, None)
    if module is None or function is not None:  # `rearrange.x(...)` is no call of a module's
        return None
    *path, name = [module, *reversed(attrs)]
    sig = MODULES.get(".".join(path), {}).get(name)
    return None if sig is None else (sig, module.partition(".")[0])


def _lines_naming(source: str, names: list[str]) -> list[int]:
    """The lines (1-based, ascending) on which one of the names ends a word.

    A superset of the lines where the name stands alone ('r' matches 'for'), which costs a
    closer look at those lines only; a leading \\b would make the search much slower.
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
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)


class _Names:
    """What each name is bound to by the imports, from where each import stands."""

    def __init__(self) -> None:
        # name -> [(position, module's full name or None, signature or None)], in source order
        self.imports: dict[str, list[tuple[tuple[int, int], str | None, Signature | None]]] = {}
        self.ours: set[str] = set()  # the names that some import binds to one of ours
        self.packages: set[str] = set()  # the packages whose names some import binds

    def bind(self, at: tuple[int, int], name: str, module: str | None = None,
             function: Signature | None = None) -> None:
        self.imports.setdefault(name, []).append((at, module, function))
        if module is not None or function is not None:
            self.ours.add(name)
            self.packages.add((module or "").partition(".")[0])

    def at(self, name: str, at: tuple[int, int]) -> tuple[str | None, Signature | None]:
        """The binding of the nearest import of the name above ``at`` (the first one, if none is
        above: an import at the end of the file, or in a function defined further down): the module
        it names or imports from, and the function or layer it is, if any."""
        found = self.imports.get(name)
        if not found:
            return None, None
        i = bisect_right([position for position, _, _ in found], at) - 1
        _, module, function = found[max(i, 0)]
        return module, function


def _bindings(imports: list[ast.Import | ast.ImportFrom], packages: list[str]) -> _Names:
    """Names bound to the packages' modules (the module's full name) and to their functions and
    layers (a signature); an import of a name that is not ours is recorded too: it unbinds it."""
    names = _Names()

    def ours(module: str | None) -> bool:
        return module is not None and module.partition(".")[0] in packages

    for node in imports:  # in source order
        at = (node.lineno, node.col_offset)
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if alias.asname is None:  # `import a.b` binds `a`
                    names.bind(at, top, top if ours(top) else None)
                else:  # `import a.b as c` binds c to a.b
                    names.bind(at, alias.asname, alias.name if ours(alias.name) else None)
        else:
            module = node.module if node.level == 0 and ours(node.module) else None
            exports = MODULES.get(module or "", {})
            for alias in node.names:
                if alias.name == "*":
                    for name, sig in exports.items():
                        names.bind(at, name, module, sig)
                elif alias.name in exports:  # a function or a layer
                    names.bind(at, alias.asname or alias.name, module, exports[alias.name])
                else:  # a submodule (`from einops.layers import torch`), or anything else
                    names.bind(at, alias.asname or alias.name, f"{module}.{alias.name}" if module else None)
    return names


# (the literal at fault, the error, the reduction literal when it is the fault)
Found = tuple[ast.Constant, RearrError, "ast.expr | None"]


def _check_call(call: ast.Call, sig: Signature) -> tuple[bool, Found | None]:
    """Whether the call's pattern is a literal, and what is wrong with the call then, if anything."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    open_kwargs = len(keywords) < len(call.keywords)
    pattern = _argument(call, keywords, "pattern", sig.pattern_at)
    if sig.op in _TENSOR_FIRST and _is_str(_positional(call.args, 0)) and pattern is not None and not _is_str(pattern):
        first = call.args[0]
        assert isinstance(first, ast.Constant)
        return True, (first, swapped_arguments(sig.op, first.value), None)  # rearrange('b c -> c b', x)
    if not _is_str(pattern):
        return False, None  # not a literal (an f-string is a JoinedStr): nothing to check without running
    if sig.op in ("einmix", "einops-einmix"):
        weight = _argument(call, keywords, "weight_shape", 1)
        bias = _argument(call, keywords, "bias_shape", 2)
        return True, _check_einmix(pattern, weight, bias, _lengths(call, sig, keywords, open_kwargs),
                                   groups=sig.op == "einmix")
    reduction = None if sig.reduction_at is None else _argument(call, keywords, "reduction", sig.reduction_at)
    return True, _check_op(call, sig, pattern, reduction, _lengths(call, sig, keywords, open_kwargs))


def _check_op(call: ast.Call, sig: Signature, pattern: ast.Constant, reduction_node: ast.expr | None,
              lengths: tuple[dict[str, object], bool]) -> Found | None:
    bounds = next((k.value for k in call.keywords if k.arg == "check_bounds"), None)
    if isinstance(bounds, ast.Constant) and "check_bounds" in sig.options:  # a literal mode: the api's rule
        err = check_bounds_error(bounds.value)
        if err is not None:
            return pattern, err.with_context(pattern=pattern.value), bounds
    reduction = None
    if isinstance(reduction_node, ast.Constant):
        reduction = reduction_node.value
    elif sig.reduction_at is not None and (reduction_node is not None or any(k.arg is None for k in call.keywords)
                                           or _has_star(call.args, sig.reduction_at)):
        reduction = _UNKNOWN_REDUCTION[sig.op]  # a variable, a lambda, or passed through *args/**kwargs
    if sig.layer is not None:
        fill = _argument(call, {k.arg: k.value for k in call.keywords if k.arg == "fill"}, "fill", 2)
        fill_value = 0 if fill is None else _literal(fill)
        err = layer_error(sig.layer, pattern.value, reduction, lengths[0], fill_value)
    else:
        err = validate(pattern.value, *operation(sig.op, reduction), lengths[0], complete=not lengths[1])
        if err is None and sig.op == "einsum" and not any(isinstance(a, ast.Starred) for a in call.args):
            r = analyze(pattern.value, "einsum", None, tuple(sorted(lengths[0])))
            err = einsum_operand_count(r, len(call.args) - 1)  # the tensors before the pattern
    if err is None or lengths[1] and err.code in _LENGTH_CODES:  # **kwargs: the lengths are incomplete
        return None
    at_reduction = err.code == "RA400" and isinstance(reduction_node, ast.Constant)
    return pattern, err, reduction_node if at_reduction else None


def _is_str(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _argument(call: ast.Call, keywords: dict[str, ast.expr], name: str, at: int) -> ast.expr | None:
    """The argument passed as ``name=`` (taken out of ``keywords``) or at position ``at``."""
    node = keywords.pop(name, None)
    return node if node is not None else _positional(call.args, at)


def _lengths(call: ast.Call, sig: Signature, keywords: dict[str, ast.expr],
             open_kwargs: bool) -> tuple[dict[str, object], bool]:
    """The lengths (name -> literal value, or UNKNOWN when not a literal), and whether there may be more."""
    if sig.sizes_at is None:
        return {n: _literal(v) for n, v in keywords.items() if n not in sig.options}, open_kwargs
    sizes = _argument(call, dict(keywords), "sizes", sig.sizes_at)  # flax: one dict; other keywords are flax's
    if sizes is None:
        return {}, open_kwargs or _has_star(call.args, sig.sizes_at)
    if isinstance(sizes, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                           for k in sizes.keys):
        return {k.value: _literal(v) for k, v in zip(sizes.keys, sizes.values)}, False  # type: ignore[union-attr]
    if (isinstance(sizes, ast.Call) and isinstance(sizes.func, ast.Name) and sizes.func.id == "dict"
            and not sizes.args and all(k.arg is not None for k in sizes.keywords)):
        return {str(k.arg): _literal(k.value) for k in sizes.keywords}, False
    return {}, True  # a variable: the lengths are not known


def _positional(args: list[ast.expr], at: int) -> ast.expr | None:
    """The positional argument at ``at`` (-1: the last), unless *args makes its place unknown."""
    if at < 0:
        return args[-1] if args and not isinstance(args[-1], ast.Starred) else None
    return None if _has_star(args, at) or at >= len(args) else args[at]


def _has_star(args: list[ast.expr], upto: int) -> bool:
    return any(isinstance(a, ast.Starred) for a in args[: upto + 1])


def _literal(node: ast.expr) -> object:
    """A length keyword's value when it is a literal (``4``, ``-1``, ``'x'``, ``None``), else UNKNOWN."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(_literal(e), (int, float)) for e in node.elts):
        return ast.literal_eval(node)  # h=[3], fill=(0,): the library refuses a container
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        if isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)):
            return ast.literal_eval(node)
    return UNKNOWN


# --- the fixes of --fix --------------------------------------------------------------------------
# A hint is literal when it quotes the whole fixed pattern (an axis renamed, a group written, a letter-style
# einsum spaced) or renames a keyword; one that asks for a value (a length, one of several names) is not.
_QUOTED_PATTERN = re.compile(r": '(?P<pattern>[^'\\]*->[^'\\]*)'$")
_RENAMED_KEYWORD = re.compile(r"(?:^|: )rename (?P<old>\w+)= to (?P<new>\w+)=(?: \(|$)"
                              r"|if (?P<index>\w+)= is the index, rename it to (?P<to>\w+)=$")


def _with_fix(problem: Problem, call: ast.Call, literal: ast.Constant, lines: list[str]) -> Problem:
    """The problem with the edits that apply its hint, when the hint is literal and the source can take them."""
    hint = problem.hint or ""
    if "its length" in hint:  # a value to choose
        return problem
    if m := _QUOTED_PATTERN.search(hint):
        offset = _pattern_offset(lines, literal, literal.value)
        if offset is None or literal.value != problem.pattern:
            return problem
        line, col, _, _ = _span(lines, literal)
        start = col + offset
        return replace(problem, fix=((line, start, line, start + len(literal.value), m["pattern"]),))
    if m := _RENAMED_KEYWORD.search(hint):
        old, new = (m["old"], m["new"]) if m["old"] else (m["index"], m["to"])
        keywords = {k.arg: k for k in call.keywords if k.arg is not None}
        if old not in keywords or new in keywords or any(k.arg is None for k in call.keywords):
            return problem  # renamed onto a keyword it has, or **kwargs may hold it
        k = keywords[old]
        line = k.lineno
        col = _char_col(lines[line - 1], k.col_offset) + 1
        if lines[line - 1][col - 1: col - 1 + len(old)] != old:
            return problem
        return replace(problem, fix=((line, col, line, col + len(old), new),))
    return problem


# The library's messages name its own functions; on einops' calls, the functions einops has are einops'.
_REARR_NAMES = re.compile(r"\brearr\.(rearrange|reduce|repeat|einsum|pack|unpack|parse_shape)\b")


def for_einops(problem: Problem) -> Problem:
    """A finding in an einops call, as its user writes the functions: `einops.reduce`, not `rearr.reduce`."""
    def fixed(text: str | None) -> str | None:
        return None if text is None else _REARR_NAMES.sub(r"einops.\1", text)

    return replace(problem, message=fixed(problem.message), hint=fixed(problem.hint))  # type: ignore[arg-type]


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


# --- EinMix ----------------------------------------------------------------------------------
# The rules are rearr.rules.layer_recipe's (einops' own, and rearr's EinMix's with groups=True).


def _check_einmix(pattern: ast.Constant, weight_node: ast.expr | None, bias_node: ast.expr | None,
                  lengths: tuple[dict[str, object], bool], groups: bool) -> Found | None:
    args: dict[str, object] = {}
    for name, node in (("weight_shape", weight_node), ("bias_shape", bias_node)):
        if isinstance(node, ast.Constant):  # a str, None (no bias), or a literal the layer refuses
            args[name] = node.value
        else:  # a variable, or hidden by *args; an absent weight_shape fails when the call runs
            args[name] = None if node is None and name == "bias_shape" else UNKNOWN
    found = validate_einmix(pattern.value, args["weight_shape"], args["bias_shape"], lengths[0], groups=groups)
    if found is None or lengths[1] and found[1].code in _LENGTH_CODES:  # **kwargs: the lengths are incomplete
        return None
    where, err = found
    node = {"pattern": pattern, "weight_shape": weight_node, "bias_shape": bias_node}[where]
    assert isinstance(node, ast.Constant)
    return node, err, None
