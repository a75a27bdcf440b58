"""Which files `rearr check` leaves out: gitignore-style globs, for `exclude` and for `.gitignore` files.

One matcher serves both. A glob without a '/' (other than a trailing one) matches a name at any
depth (`build`, `*_pb2.py`); one with a '/' is anchored at its base folder (`src/gen/*.py`, `/x.py`);
a trailing '/' matches folders only; `*` and `?` stay within a name, `**` spans folders, `[abc]`
is a class, a leading `!` re-includes what an earlier glob left out, and `#` starts a comment.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    dirs_only: bool


@dataclass(frozen=True)
class Globs:
    """Globs relative to ``base`` (an absolute folder); the last one that matches decides."""

    base: str
    rules: tuple[_Rule, ...]

    @classmethod
    def parse(cls, base: str, lines: list[str]) -> Globs:
        return cls(os.path.abspath(base), tuple(r for r in map(_rule, lines) if r is not None))

    def match(self, path: str, is_dir: bool) -> bool | None:
        """True: left out; False: re-included by a `!` glob; None: no glob matches ``path`` (absolute)."""
        rel = os.path.relpath(path, self.base)
        if rel.startswith(os.pardir):  # outside the base: only the unanchored globs can match
            rel = path.lstrip(os.sep)
        rel = rel.replace(os.sep, "/")
        decision = None
        for rule in self.rules:
            if (is_dir or not rule.dirs_only) and rule.regex.fullmatch(rel):
                decision = not rule.negated
        return decision


def left_out(globs: list[Globs], path: str, is_dir: bool) -> bool:
    """Whether the last of ``globs`` (in order of precedence, lowest first) that matches leaves ``path`` out."""
    decision = False
    for g in globs:
        found = g.match(path, is_dir)
        if found is not None:
            decision = found
    return decision


def gitignore(folder: str) -> Globs | None:
    """The globs of ``folder``'s .gitignore, if it has a readable one."""
    try:
        with open(os.path.join(folder, ".gitignore"), encoding="utf-8", errors="replace") as f:
            return Globs.parse(folder, f.read().splitlines())
    except OSError:
        return None


def work_tree(folder: str) -> str | None:
    """The root of the git work tree that holds ``folder`` (the nearest folder with a `.git`), or None."""
    folder = os.path.abspath(folder)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _rule(line: str) -> _Rule | None:
    line = line.rstrip("\n\r")
    if not line.endswith("\\ "):
        line = line.rstrip(" ")
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated or line.startswith("\\"):
        line = line[1:]
    dirs_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    body = _translate(line.lstrip("/"))
    return _Rule(re.compile(body if anchored else f"(?:.*/)?{body}"), negated, dirs_only)


def _translate(glob: str) -> str:
    """A glob as a regular expression on '/'-separated relative paths."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) != -1:
            inner = glob[i + 1 : end]
            inner = "^" + inner[1:] if inner.startswith("!") else inner
            out.append(f"[{inner.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        elif glob[i] == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)
