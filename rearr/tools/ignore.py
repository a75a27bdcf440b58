"""Which files `rearr check` leaves out: `.gitignore` files, and the globs of `exclude`, read as git reads them.

The matcher is git's own, ported line by line (wildmatch.c for a glob, dir.c for a line of a
.gitignore and for which line decides), so that rearr leaves out exactly what git does, byte for
byte: a UTF-8 BOM, POSIX classes (`[[:alpha:]]`), backslash escapes, ranges that match nothing
(`[z-a]`), `**`, anchoring, negation and folder-only lines included. tests/tools/test_check_gitignore.py
compares its choices with `git check-ignore` on generated trees.

Paths are compared as bytes (``os.fsencode``), as git compares them: ``?`` matches one byte.
A glob that git reads but that can never match anything (an unclosed ``[``, a trailing ``\\``,
an unknown ``[:class:]``, a backwards range such as ``[z-a]``) is silently inert in a
.gitignore, as in git; in rearr's own settings it is refused (`glob_error`), since it is a typo.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

_STAR, _QUESTION, _BRACKET, _BACKSLASH, _SLASH = b"*?[\\/"
_SPECIAL = frozenset(b"*?[\\")  # git's is_glob_special
_MATCH, _NOMATCH, _ABORT_ALL, _ABORT_TO_STARSTAR = 0, 1, -1, -2
_BOM = b"\xef\xbb\xbf"
MAX_GITIGNORE = 100 * 2**20  # git ignores a larger .gitignore

# git's sane_ctype classes (ASCII only: a byte above 127 is in none of them).
_DIGIT = frozenset(b"0123456789")
_LOWER = frozenset(b"abcdefghijklmnopqrstuvwxyz")
_UPPER = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_PUNCT = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": _DIGIT | _LOWER | _UPPER,
    b"alpha": _LOWER | _UPPER,
    b"blank": frozenset(b" \t"),
    b"cntrl": frozenset([*range(32), 127]),
    b"digit": _DIGIT,
    b"graph": frozenset(range(33, 127)),
    b"lower": _LOWER,
    b"print": frozenset(range(32, 127)),
    b"punct": _PUNCT,
    b"space": frozenset(b" \t\n\r"),  # git's isspace: not \v nor \f
    b"upper": _UPPER,  # the same set: _in_class knows it by identity
    b"xdigit": _DIGIT | frozenset(b"abcdefABCDEF"),
}


def wildmatch(pattern: bytes, text: bytes, pathname: bool, casefold: bool = False) -> bool:
    """git's wildmatch(): whether ``text`` matches the glob; with ``pathname`` (WM_PATHNAME), ``*``,
    ``?`` and classes do not match '/', and only ``**`` between slashes spans folders; with
    ``casefold`` (WM_CASEFOLD, git's core.ignorecase), ASCII letters match in either case as git's do."""
    try:
        return _dowild(pattern, 0, text, 0, pathname, casefold) == _MATCH
    except RecursionError:  # a line with hundreds of separate '*': no real .gitignore has one
        return False


def _lower(c: int) -> int:
    return c + 32 if 65 <= c <= 90 else c  # ASCII only, as git's tolower


def _dowild(p: bytes, start: int, text: bytes, ti: int, pathname: bool, casefold: bool) -> int:
    """wildmatch.c's dowild() on p[start:] and text[ti:]: a MATCH, a NOMATCH or one of the aborts."""
    pi, end, tend = start, len(p), len(text)
    while pi < end:
        p_ch = p[pi]
        t_ch = text[ti] if ti < tend else 0
        if t_ch == 0 and p_ch != _STAR:
            return _ABORT_ALL
        if casefold:  # as git: both lowered here, but not a bracket's items nor an escaped byte
            t_ch, p_ch = _lower(t_ch), _lower(p_ch)
        if p_ch == _QUESTION:
            if pathname and t_ch == _SLASH:
                return _NOMATCH
        elif p_ch == _STAR:
            pi += 1
            if pi < end and p[pi] == _STAR:
                before = pi - 2
                while pi < end and p[pi] == _STAR:
                    pi += 1
                after = p[pi] if pi < end else 0
                if (before < start or p[before] == _SLASH) and (
                        after in (0, _SLASH) or after == _BACKSLASH and p[pi + 1: pi + 2] == b"/"):
                    if after == _SLASH and _dowild(p, pi + 1, text, ti, pathname, casefold) == _MATCH:
                        return _MATCH  # 'a/**/b' matches 'a/b'
                    match_slash = True
                else:
                    match_slash = False
            else:
                match_slash = not pathname
            if pi == end:  # a trailing '**' matches everything, a trailing '*' no further slash
                return _MATCH if match_slash or text.find(b"/", ti) < 0 else _NOMATCH
            if not match_slash and p[pi] == _SLASH:  # '*/' matches the rest of this folder's name
                slash = text.find(b"/", ti)
                if slash < 0:
                    return _NOMATCH
                ti, pi = slash + 1, pi + 1
                continue
            return _star(p, start, pi, text, ti, pathname, match_slash, casefold)
        elif p_ch == _BRACKET:
            found = _bracket(p, pi)
            if found is None:
                return _ABORT_ALL
            pi, negated, items = found
            if _in_class(t_ch, items, casefold) == negated or pathname and t_ch == _SLASH:
                return _NOMATCH
        else:
            if p_ch == _BACKSLASH:  # the next byte, literally (a trailing '\' matches nothing)
                pi += 1
                p_ch = p[pi] if pi < end else 0
            if t_ch != p_ch:
                return _NOMATCH
        pi += 1
        ti += 1
    return _MATCH if ti >= tend else _NOMATCH


def _star(p: bytes, start: int, pi: int, text: bytes, ti: int, pathname: bool, match_slash: bool,
          casefold: bool) -> int:
    """The loop of dowild()'s '*': try the rest of the pattern from each place in the text."""
    tend = len(text)
    t_ch = text[ti] if ti < tend else 0
    while t_ch:
        if p[pi] not in _SPECIAL:  # a literal next: skip to where it stands
            literal = _lower(p[pi]) if casefold else p[pi]
            while ti < tend and (match_slash or text[ti] != _SLASH) and (
                    _lower(text[ti]) if casefold else text[ti]) != literal:
                ti += 1
            t_ch = text[ti] if ti < tend else 0
            if (_lower(t_ch) if casefold else t_ch) != literal:
                return _ABORT_ALL
        matched = _dowild(p, pi, text, ti, pathname, casefold)
        if matched != _NOMATCH:
            if not match_slash or matched != _ABORT_TO_STARSTAR:
                return matched
        elif not match_slash and t_ch == _SLASH:
            return _ABORT_TO_STARSTAR
        ti += 1
        t_ch = text[ti] if ti < tend else 0
    return _ABORT_ALL


# A bracket expression's items: a byte, a range (low, high) or a class's set of bytes.
_Item = int | tuple[int, int] | frozenset[int]


def _bracket(p: bytes, pi: int) -> tuple[int, bool, list[_Item]] | None:
    """The bracket expression that starts at p[pi] ('['): the index of its ']', whether it is
    negated, and its items; None where dowild() aborts (no ']', an unknown class)."""
    end = len(p)

    def at(i: int) -> int:
        return p[i] if i < end else 0

    pi += 1
    p_ch = at(pi)
    negated = p_ch in b"!^"
    if negated:
        pi += 1
        p_ch = at(pi)
    items: list[_Item] = []
    prev = 0
    while True:
        if not p_ch:
            return None
        if p_ch == _BACKSLASH:
            pi += 1
            p_ch = at(pi)
            if not p_ch:
                return None
            items.append(p_ch)
        elif p_ch == ord("-") and prev and at(pi + 1) and at(pi + 1) != ord("]"):
            pi += 1
            p_ch = at(pi)
            if p_ch == _BACKSLASH:
                pi += 1
                p_ch = at(pi)
                if not p_ch:
                    return None
            items.append((prev, p_ch))
            p_ch = 0  # the range's end cannot start another range
        elif p_ch == _BRACKET and at(pi + 1) == ord(":"):
            close = p.find(b"]", pi + 2)
            if close < 0:
                return None
            if close - (pi + 2) >= 1 and p[close - 1] == ord(":"):  # '[:name:]'
                name = p[pi + 2: close - 1]
                if name not in _CLASSES:
                    return None
                items.append(_CLASSES[name])
                pi, p_ch = close, 0
            else:  # no ':]': the '[' is a plain byte, and the ':' after it too
                items.append(_BRACKET)
        else:
            items.append(p_ch)
        prev = p_ch
        pi += 1
        p_ch = at(pi)
        if p_ch == ord("]"):
            return pi, negated, items


def _in_class(t_ch: int, items: list[_Item], casefold: bool = False) -> bool:
    """Whether a bracket expression's items hold ``t_ch`` (lowered already under ``casefold``: then a
    range and [:upper:] also take its upper case, as git's do; a single item is compared as written)."""
    upper = t_ch - 32 if casefold and 97 <= t_ch <= 122 else t_ch
    for item in items:
        if isinstance(item, int):
            if t_ch == item:
                return True
        elif isinstance(item, tuple):
            if item[0] <= t_ch <= item[1] or item[0] <= upper <= item[1]:
                return True
        elif t_ch in item or item is _UPPER and upper in item:
            return True
    return False


# --- one line of a .gitignore (dir.c) ------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """One line, parsed as dir.c's parse_path_pattern() does."""

    pattern: bytes  # without the '!' and the trailing '/'
    negative: bool
    must_be_dir: bool
    no_dir: bool  # no '/' in it: it matches a name at any depth
    literal: int  # the length of its start without a glob character
    ends_with: bool  # '*literal': a suffix test

    def matches(self, path: bytes, is_dir: bool, casefold: bool = False) -> bool:
        """Whether it matches ``path`` (relative to its file's folder, '/'-separated); with ``casefold``
        (core.ignorecase), the literal parts compare as git's fspathcmp does, ASCII case aside."""
        if self.must_be_dir and not is_dir:
            return False
        pattern = self.pattern
        same = _same_folded if casefold else bytes.__eq__
        if self.no_dir:  # match_basename()
            name = path[path.rfind(b"/") + 1:]
            if self.literal == len(pattern):
                return same(name, pattern)
            if self.ends_with:
                return len(name) >= len(pattern) - 1 and same(name[len(name) - len(pattern) + 1:], pattern[1:])
            return wildmatch(pattern, name, False, casefold)
        literal = self.literal  # match_pathname()
        if pattern.startswith(b"/"):
            pattern, literal = pattern[1:], literal - 1
        if literal:
            if not same(path[:literal], pattern[:literal]):
                return False
            if literal == len(pattern) and literal == len(path):
                return True
            pattern, path = pattern[literal:], path[literal:]
        return wildmatch(pattern, path, True, casefold)


def _same_folded(a: bytes, b: bytes) -> bool:
    return a.lower() == b.lower()  # bytes.lower folds ASCII only, as strcasecmp in the C locale


def parse_line(line: bytes) -> Pattern | None:
    """A line of a .gitignore (its line end removed) as git reads it; None for a blank line or a comment."""
    line = line.split(b"\0", 1)[0]
    if not line or line.startswith(b"#"):
        return None
    line = _trim_trailing_spaces(line)
    negative = line.startswith(b"!")
    if negative:
        line = line[1:]
    must_be_dir = line.endswith(b"/")
    pattern = line[:-1] if must_be_dir else line
    literal = next((i for i, c in enumerate(line) if c in _SPECIAL), len(line))
    ends_with = line.startswith(b"*") and not any(c in _SPECIAL for c in line[1:])
    return Pattern(pattern, negative, must_be_dir, b"/" not in pattern, min(literal, len(pattern)), ends_with)


def _trim_trailing_spaces(line: bytes) -> bytes:
    """dir.c's trim_trailing_spaces(): trailing blanks go, unless a backslash escapes the first of them."""
    last_space = None
    i = 0
    while i < len(line):
        c = line[i]
        if c == ord(" "):
            last_space = i if last_space is None else last_space
        elif c == _BACKSLASH:
            i += 1
            if i == len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def split_lines(data: bytes) -> list[bytes]:
    """A .gitignore's lines as git splits them: a leading BOM dropped, '\\n' ends a line, a '\\r' before it goes."""
    data = data.removeprefix(_BOM)
    return [line.removesuffix(b"\r") for line in data.split(b"\n")]


def glob_error(glob: str) -> str | None:
    """Why a glob of rearr's own settings can never match anything, or None when it can."""
    line = glob.encode("utf-8", "surrogateescape")
    parsed = parse_line(line)
    if parsed is None:
        return None
    p = parsed.pattern
    i = 0
    while i < len(p):
        if p[i] == _BACKSLASH:
            if i + 1 == len(p):
                return "it ends with a '\\' that escapes nothing (write '\\\\' for a backslash)"
            i += 2
            continue
        if p[i] == _BRACKET:
            found = _bracket(p, i)
            if found is None:
                return "a '[' opens a class that no ']' closes or that names no class ([:alpha:], [:digit:], ...)"
            for item in found[2]:
                if isinstance(item, tuple) and item[0] > item[1]:
                    return (f"the range {chr(item[0])}-{chr(item[1])} is backwards: it matches no character "
                            f"(write {chr(item[1])}-{chr(item[0])})")
            i = found[0]
        i += 1
    return None


# --- lists of lines, and which one decides ----------------------------------------------------


@dataclass(frozen=True)
class Globs:
    """The lines of one .gitignore (or of one exclude setting), relative to ``base`` (an absolute folder,
    as bytes); the last line that matches decides."""

    base: bytes
    patterns: tuple[Pattern, ...]
    casefold: bool = False  # a .gitignore of a repository with core.ignorecase = true

    @classmethod
    def parse(cls, base: str, lines: list[str] | list[bytes], casefold: bool = False) -> Globs:
        parsed = (parse_line(line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape"))
                  for line in lines)
        return cls(os.fsencode(os.path.abspath(base)), tuple(p for p in parsed if p is not None), casefold)

    def match(self, path: str | bytes, is_dir: bool) -> bool | None:
        """True: left out; False: kept by a '!' line; None: no line matches ``path`` (absolute).

        A path outside the base can only be matched by the lines without a '/' (a name at any depth)."""
        full = os.fsencode(path)
        base = self.base.rstrip(b"/")
        if full.startswith(base + b"/"):
            rel, inside = full[len(base) + 1:], True
        else:
            rel, inside = full.lstrip(b"/"), False
        for pattern in reversed(self.patterns):
            if (inside or pattern.no_dir) and pattern.matches(rel, is_dir, self.casefold):
                return not pattern.negative
        return None


def left_out(globs: list[Globs], path: str | bytes, is_dir: bool) -> bool:
    """Whether ``path`` is left out by the lists in ``globs`` (lowest precedence first): the last list
    with a matching line decides, as a deeper .gitignore wins over the ones above it."""
    for g in reversed(globs):
        found = g.match(path, is_dir)
        if found is not None:
            return found
    return False


def gitignore(folder: str, casefold: bool = False) -> Globs | None:
    """The lines of ``folder``'s .gitignore, if it has one that is not a symbolic link (git reads no
    .gitignore through a link). One that exists but cannot be read raises OSError (git warns).
    ``casefold``: the work tree's `ignore_case`."""
    return _read_globs(os.path.join(folder, ".gitignore"), folder, follow=False, casefold=casefold)


def info_exclude(tree: str) -> Globs | None:
    """The work tree's `.git/info/exclude` (relative to the tree's root), if there is one."""
    common = _common_dir(tree)
    if common is None:
        return None
    return _read_globs(os.path.join(common, "info", "exclude"), tree, follow=True,  # git reads it through a link
                       casefold=ignore_case(tree))


def ignore_case(tree: str) -> bool:
    """The repository's `core.ignorecase` (its own config file; git sets it to true itself on a
    case-insensitive file system): whether its ignore files match names in either case."""
    common = _common_dir(tree)
    data = None if common is None else _read_small(os.path.join(common, "config"), 2**20)
    found, section = False, None
    for raw in (data or b"").splitlines():
        line = raw.strip()
        if line.startswith(b"["):  # a section header, maybe with a key after it on the same line
            close = line.find(b"]")
            header = line[1:close].strip().lower() if close > 0 else b""
            section = header if not any(c in header for c in b' ".') else None  # [core], not [core "x"]
            line = line[close + 1:].strip() if close > 0 else b""
        if section != b"core" or not line or line[:1] in b"#;":
            continue
        key, eq, value = line.partition(b"=")
        if key.strip().lower() == b"ignorecase":
            value = value.split(b"#")[0].split(b";")[0].strip().strip(b'"').lower()
            found = not eq or value in (b"true", b"yes", b"on", b"1")  # a bare key is true; the last one wins
    return found


def _common_dir(tree: str) -> str | None:
    """The work tree's git folder that holds its config and info/ (for a linked work tree or a
    submodule, the folder its `.git` file names, then that folder's commondir)."""
    git = os.path.join(tree, ".git")
    if os.path.isfile(git):  # a linked work tree or a submodule: '.git' names the real folder
        git = _gitdir(git, tree)
        if git is None:
            return None
        common = _read_small(os.path.join(git, "commondir"))
        if common is not None:
            git = os.path.normpath(os.path.join(git, os.fsdecode(common.strip())))
    return git


def _gitdir(dot_git: str, tree: str) -> str | None:
    data = _read_small(dot_git)
    if data is None or not data.startswith(b"gitdir:"):
        return None
    return os.path.normpath(os.path.join(tree, os.fsdecode(data[len(b"gitdir:"):].strip())))


def _read_small(path: str, size: int = 4096) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return None


# What git takes for no ignore file (no warning): none there, a link where none is followed, a folder.
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EISDIR})


def _read_globs(path: str, base: str, follow: bool, casefold: bool) -> Globs | None:
    """An ignore file's lines; None when there is none (or it is no regular file, or too large: git skips it);
    OSError when it exists but cannot be read (as git warns `unable to access`)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno in _ABSENT:
            return None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_GITIGNORE + 1)
    if len(data) > MAX_GITIGNORE:
        return None
    return Globs.parse(base, split_lines(data), casefold)


def is_repository(dot_git: str) -> bool:
    """Whether a `.git` makes its folder a work tree's root, as git decides it: a git folder (HEAD, and
    objects/ and refs/ there or in its commondir), or a file `gitdir: PATH` naming one. An empty `.git`
    folder or file is none: git goes on to the folders above."""
    if not os.path.lexists(dot_git):
        return False
    if os.path.isfile(dot_git):
        git = _gitdir(dot_git, os.path.dirname(dot_git))
        return git is not None and _is_git_folder(git)
    return _is_git_folder(dot_git)


def _is_git_folder(git: str) -> bool:
    if not os.path.isfile(os.path.join(git, "HEAD")):
        return False
    common = _read_small(os.path.join(git, "commondir"))
    shared = git if common is None else os.path.normpath(os.path.join(git, os.fsdecode(common.strip())))
    return os.path.isdir(os.path.join(shared, "objects")) and os.path.isdir(os.path.join(shared, "refs"))


def work_tree(folder: str) -> str | None:
    """The root of the git work tree that holds ``folder`` (the nearest folder with a repository's `.git`),
    or None."""
    folder = os.path.abspath(folder)
    while True:
        if is_repository(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
