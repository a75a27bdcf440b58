"""Edits of `rearr check --fix`, `--diff` and `--add-noqa`: the source changed in place, line ends and all.

An edit is (line, col, end_line, end_col, text): 1-based lines, 1-based character columns, the end
exclusive, as `Problem` counts them. Lines are split where ast splits them ('\\r\\n', '\\r', '\\n'), so
the columns of a finding are those of the text edited.
"""

from __future__ import annotations

import difflib
import io
import re
import tokenize
from collections.abc import Callable, Iterable

from .lint import Edit, Problem, noqa_directives

_LINE_END = re.compile(r"\r\n|\r|\n")


def _line_starts(source: str) -> list[int]:
    """The offset of each line's first character (index 0: line 1)."""
    return [0, *(m.end() for m in _LINE_END.finditer(source))]


def apply(source: str, fixes: Iterable[tuple[Edit, ...]]) -> tuple[str, int]:
    """``source`` with each fix applied whose edits overlap no other's (each fix all or nothing), and how
    many fixes were applied."""
    starts = _line_starts(source)

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col - 1

    chosen: list[tuple[int, int, str]] = []
    applied = 0
    for fix in fixes:
        spans = [(offset(line, col), offset(end_line, end_col), text) for line, col, end_line, end_col, text in fix]
        if any(a < e and s < b for a, b, _ in spans for s, e, _ in chosen):
            continue
        chosen += spans
        applied += 1
    for start, end, text in sorted(chosen, reverse=True):  # from the end: the offsets before stay
        source = source[:start] + text + source[end:]
    return source, applied


def fixed(source: str, check: Callable[[str], list[Problem]], rounds: int = 10) -> tuple[str, int, list[Problem]]:
    """The source with the fixes of its problems (``check(source)``) applied, checked again and fixed
    again while a fix applies (a fix may uncover another finding of the same call): the fixed source,
    how many fixes were applied, and the problems it has left."""
    problems = check(source)
    total = 0
    for _ in range(rounds):
        new, applied = apply(source, (p.fix for p in problems if p.fix))
        if not applied or new == source:
            break
        source, total = new, total + applied
        problems = check(source)
    return source, total, problems


def add_noqa(source: str, wanted: dict[tuple[int, ...], set[str]]) -> tuple[str, int]:
    """``source`` with a `# noqa: CODES` comment for each entry of ``wanted`` (the lines that may hold it,
    best first -> the codes), on the first of its lines that can end with a comment (not one inside a
    string, nor one that a backslash continues). The codes for one line are one comment; a line's noqa
    comment that names codes already is extended. Returns the source and how many lines were changed."""
    closed = _lines_without_comment(source)
    per_line: dict[int, set[str]] = {}
    for lines, codes in wanted.items():
        line = next((n for n in lines if n not in closed), None)
        if line is not None:
            per_line.setdefault(line, set()).update(codes)
    existing = {d.line: d for d in noqa_directives(source) if not d.whole_file and d.codes is not None}
    lines = _LINE_END.split(source)
    edits: list[tuple[Edit, ...]] = []
    for line, codes in per_line.items():
        d = existing.get(line)
        if d is not None:  # its codes extended: RA200 -> RA200, RA301
            prefix = d.text[: d.text.index(":", d.text.lower().index("noqa")) + 1]
            edits.append(((line, d.col + 1, line, d.end_col + 1, f"{prefix} {', '.join(sorted(d.codes | codes))}"),))
        else:
            end = len(lines[line - 1]) + 1
            edits.append(((line, end, line, end, f"  # noqa: {', '.join(sorted(codes))}"),))
    return apply(source, edits)


def _lines_without_comment(source: str) -> set[int]:
    """The lines that a trailing comment would break: inside a string that goes on to the next line (an
    f-string's parts too), or continued by a backslash."""
    closed: set[int] = set()
    fstrings: list[int] = []
    kinds = {getattr(tokenize, name, None): name for name in ("FSTRING_START", "FSTRING_END")}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            kind = kinds.get(token.type)
            if token.type == tokenize.STRING:
                closed.update(range(token.start[0], token.end[0]))
            elif kind == "FSTRING_START":
                fstrings.append(token.start[0])
            elif kind == "FSTRING_END" and fstrings:
                closed.update(range(fstrings.pop(), token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    closed.update(i for i, text in enumerate(_LINE_END.split(source), 1) if text.endswith("\\"))
    return closed


def diff(path: str, before: str, after: str) -> str:
    """A unified diff of one file's edit, as `git diff` shows it (a/PATH, b/PATH)."""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))
