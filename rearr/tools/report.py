"""What `rearr check` prints: its findings in each output format, the summary line, and text made safe to print.

No output format ever writes a raw control character: a file name or a pattern may hold any of them
(an ESC sequence that a terminal would run, a newline that would forge a `path:line:col: CODE` line),
so text is passed through `printable` (backslash escapes) and JSON through `_dumps` (JSON escapes).
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from ..errors import CODES

if TYPE_CHECKING:
    from .lint import Problem, Tally

# Control characters (C0, DEL, C1), format characters (bidi overrides, zero-width), line and paragraph
# separators, and lone surrogates (a file name's bytes that are not UTF-8).
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` with every character that a terminal or a log could act on as a backslash escape
    ('\\n', '\\x1b', '\\u202e'; a byte of a file name that is not UTF-8 as '\\xff')."""
    if text.isprintable():
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _UNPRINTABLE else c for c in text)


def printable_path(path: str) -> str:
    """A file name as text output shows it: `printable`, and (where '/' separates folders) a
    backslash doubled, so that every name reads back to one ('a\\x1b.py' is not 'a<ESC>.py')."""
    return printable(path.replace("\\", "\\\\") if os.sep == "/" else path)


def _escape(c: str) -> str:
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # os.fsdecode's stand-in for a byte that is not UTF-8
        return f"\\x{o - 0xDC00:02x}"
    return _SHORT.get(c) or (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")


def _dumps(value: object, ascii_only: bool = False) -> str:
    """JSON with every character that `printable` escapes written as a JSON escape: the data is unchanged."""
    text = json.dumps(value, indent=2, ensure_ascii=ascii_only)
    if text.isprintable() or all(unicodedata.category(c) not in _UNPRINTABLE for c in text if c != "\n"):
        return text
    return "".join(c if c == "\n" or unicodedata.category(c) not in _UNPRINTABLE else _json_escape(c)
                   for c in text)


def _json_escape(c: str) -> str:
    o = ord(c)
    if o < 0x10000:
        return f"\\u{o:04x}"
    o -= 0x10000
    return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"


# --- the formats ---------------------------------------------------------------------------------


def format_text(problems: list[Problem]) -> str:
    return "\n".join(f"{printable_path(p.path)}:{p.line}:{p.col}: {printable(f'{p.code} {p.text}')}" for p in problems)


def format_github(problems: list[Problem]) -> str:
    """GitHub Actions workflow commands, one annotation per problem."""
    lines = []
    for p in problems:
        # The runner drops an annotation that has columns and spans several lines.
        one_line = p.end_line == p.line
        span = {"col": p.col, "endLine": p.end_line, "endColumn": p.end_col} if one_line else {"endLine": p.end_line}
        props = {"file": p.path, "line": p.line, **span, "title": f"rearr {p.code}"}
        joined = ",".join(f"{k}={_escape_property(str(v))}" for k, v in props.items())
        lines.append(printable(f"::error {joined}::{_escape_data(p.text)}"))
    return "\n".join(lines)


def _escape_data(text: str) -> str:
    # The escapes of GitHub's runner (toolkit/core command.ts): '%' first, so the others stay.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


JSON_KEYS = ("path", "line", "col", "end_line", "end_col", "code", "message", "hint", "pattern")
_EDIT_KEYS = ("line", "col", "end_line", "end_col", "text")


def format_json(problems: list[Problem], ascii_only: bool = False) -> str:
    """A list of objects: the keys of JSON_KEYS, and ``fix``: the edits of --fix, or null."""
    return _dumps([{**{k: getattr(p, k) for k in JSON_KEYS},
                    "fix": {"edits": [dict(zip(_EDIT_KEYS, edit)) for edit in p.fix]} if p.fix else None}
                   for p in problems], ascii_only)


def format_gitlab(problems: list[Problem]) -> str:
    """GitLab's code quality report: a list of issues, each with a fingerprint that stays while the finding does."""
    issues = []
    seen: Counter[str] = Counter()
    for p in problems:
        path = _repository_path(p.path)
        key = f"{p.code}\0{path}\0{p.message}\0{p.pattern}"
        seen[key] += 1
        issues.append({
            "description": f"{p.code} {p.text}",
            "check_name": p.code,
            "fingerprint": hashlib.sha256(f"{key}\0{seen[key]}".encode("utf-8", "surrogateescape")).hexdigest(),
            "severity": "major",
            "location": {"path": path, "positions": {"begin": {"line": p.line, "column": p.col},
                                                                "end": {"line": p.end_line, "column": p.end_col}}},
        })
    return _dumps(issues, ascii_only=True)


def _repository_path(path: str) -> str:
    """A file's path as GitLab maps it: relative to the root of its git work tree, whatever the current
    folder (outside git: as shown)."""
    found = _in_tree(path)
    return Path(found[0] if found is not None else os.path.normpath(path)).as_posix()


def format_sarif(problems: list[Problem]) -> str:
    """SARIF 2.1.0, as GitHub code scanning reads it: one run, every code as a rule, one result per problem.

    A file in a git work tree has a URI relative to the tree's root (`uriBaseId` %SRCROOT%, whose own
    URI is given), whatever the current folder; any other file, an absolute file:// URI."""
    from .._version import __version__
    from .codes import RULES, help_uri

    rules = [{"id": code, "name": rule.name, "shortDescription": {"text": CODES[code]},
              "fullDescription": {"text": rule.description}, "help": {"text": rule.description},
              "helpUri": help_uri(code), "defaultConfiguration": {"level": "error"}}
             for code, rule in RULES.items()]
    index = {code: i for i, code in enumerate(RULES)}
    roots: dict[str, str] = {}
    results = []
    for p in problems:
        location, root = _artifact(p.path)
        if root is not None:
            roots.setdefault("%SRCROOT%", root)
        results.append({
            "ruleId": p.code, "ruleIndex": index[p.code], "level": "error", "message": {"text": p.text},
            "locations": [{"physicalLocation": {
                "artifactLocation": location,
                "region": {"startLine": p.line, "startColumn": p.col, "endLine": p.end_line, "endColumn": p.end_col},
            }}],
        })
    driver = {"name": "rearr", "version": __version__, "informationUri": help_uri(None), "rules": rules}
    run: dict[str, object] = {"tool": {"driver": driver}, "results": results}
    if roots:
        run["originalUriBaseIds"] = {name: {"uri": uri} for name, uri in roots.items()}
    log = {"version": "2.1.0", "$schema": "https://json.schemastore.org/sarif-2.1.0.json", "runs": [run]}
    return _dumps(log, ascii_only=True)  # ASCII escapes: it prints on any stdout


def _in_tree(path: str) -> tuple[str, str] | None:
    """A file's path relative to the root of its git work tree, and that root; None outside git."""
    full = os.path.abspath(path)
    root = _tree(os.path.dirname(full))
    if root is None or len(root) > 1 and len(os.path.commonpath([full, root])) < len(root):
        return None
    return os.path.relpath(full, root), root


def _artifact(path: str) -> tuple[dict[str, str], str | None]:
    """A file's SARIF location, and the URI of the work tree it is relative to (None: it is absolute)."""
    found = _in_tree(path)
    if found is None:
        return {"uri": _file_uri(os.path.abspath(path))}, None
    rel, root = found
    base = _file_uri(root)
    return {"uri": quote(os.fsencode(Path(rel).as_posix())), "uriBaseId": "%SRCROOT%"}, base.rstrip("/") + "/"


def _file_uri(path: str) -> str:
    return "file://" + quote(os.fsencode(Path(path).as_posix()))


@lru_cache(maxsize=1024)
def _tree(folder: str) -> str | None:
    from .ignore import work_tree

    return work_tree(folder)


FORMATS: dict[str, Callable[[list[Problem]], str]] = {
    "text": format_text,
    "github": format_github,
    "json": format_json,
    "sarif": format_sarif,
    "gitlab": format_gitlab,
}


def format_statistics(problems: list[Problem], fmt: str) -> str:
    """The count of each code, most frequent first."""
    counts = sorted(Counter(p.code for p in problems).items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        return _dumps([{"code": c, "count": n, "meaning": CODES.get(c)} for c, n in counts])
    width = len(str(counts[0][1])) if counts else 1
    return "\n".join(f"{n:>{width}}  {c}  {CODES.get(c, '')}" for c, n in counts)


# --- the summary ---------------------------------------------------------------------------------


def summary(problems: list[Problem], files: int, tally: Tally, unreadable: int = 0, fixed: int = 0,
            unwritten: int = 0) -> str:
    """'Found 3 problems in 2 files (1,245 files, 1,776 einops and 12 rearr patterns checked).',
    'All checks passed (...).', or, when no file holds a pattern, what was looked at and why nothing was found;
    after --fix, 'Fixed 2 problems; ' before it.

    When some path could not be read (or fixed file written), a clean result is not 'All checks passed'."""
    if fixed:
        line = summary(problems, files, tally, unreadable, 0, unwritten)
        return f"Fixed {count(fixed, 'problem')}; {line[0].lower()}{line[1:]}"
    unread = f" {count(unreadable, 'path')} could not be read." if unreadable else ""
    if unwritten:
        unread += f" The fixes of {count(unwritten, 'file')} could not be written."
    patterns = tally.einops + tally.rearr
    if not patterns and not problems:
        return f"No pattern found in {count(files, 'file')}: {tally.why_none()}.{unread}"
    kinds = [f"{tally.einops:,} einops" if tally.einops else "", f"{tally.rearr:,} rearr" if tally.rearr else ""]
    checked = f"({count(files, 'file')}, {' and '.join(filter(None, kinds)) or '0'} " \
              f"{'pattern' if patterns == 1 else 'patterns'} checked)."
    if not problems:
        return f"{'No problem found' if unread else 'All checks passed'} {checked}{unread}"
    in_files = count(len({p.path for p in problems}), "file")
    return f"Found {count(len(problems), 'problem')} in {in_files} {checked}{unread}"


def count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
