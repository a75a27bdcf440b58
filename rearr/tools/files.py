"""Which files `rearr check` reads: the paths named, and the *.py files of the folders named, each with
the settings of its nearest config (rearr/tools/config.py).

A folder is walked in sorted order, never into `.git` nor through a symbolic link to a folder (as git
does), leaving out what `exclude`/`extend-exclude` and, in a git work tree, the `.gitignore` files and
`.git/info/exclude` name (rearr/tools/ignore.py: git's own rules). A file named on the command line
is checked whatever its name and whatever those say, unless `force-exclude` is on. A symbolic link to
a file outside the work tree is skipped in a walk, with a note: a tree's checks stay about the tree
(a link named on the command line is read). Each file's work tree (where its config search stops) is
the root of the git work tree that holds it; outside git, the current folder when the path named is
inside it, else the folder named (or the named file's folder).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from . import config, ignore
from .config import inside
from .lint import describe_os_error, file_kind
from .report import printable


@dataclass(frozen=True)
class Source:
    """A file to check, as its path is shown, and the settings that apply to it."""

    path: str
    settings: config.Settings


@dataclass
class Found:
    files: list[Source] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # a message for each path that cannot be read
    notes: list[str] = field(default_factory=list)  # files skipped in a walk: not regular, links outside
    excluded: int = 0  # named paths that force-exclude left out


def work_root(path: str, named: str) -> str:
    """Where the config search for ``path`` (absolute) stops: see the module's docstring."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    tree = ignore.work_tree(folder)
    if tree is not None:
        return tree
    cwd = os.getcwd()
    if inside(named, cwd):
        return cwd
    return named if os.path.isdir(named) else os.path.dirname(named)


def find(paths: list[str], configs: config.Configs) -> Found:
    """The files to check under ``paths``, sorted and each once, and what could not be read."""
    found = Found()
    files: dict[str, Source] = {}
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError as e:  # a missing path, or a symlink loop
            reason = "no such file or folder" if e.errno == errno.ENOENT else describe_os_error(e)
            found.unreadable.append(printable(f"{path}: {reason}"))
            continue
        full = os.path.abspath(path)
        root = work_root(full, full)
        is_dir = stat.S_ISDIR(mode)
        if forced_out(full, configs, is_dir, found.unreadable):
            found.excluded += 1
            continue
        if not is_dir:  # a FIFO or a device named here is RA002: never read
            files.setdefault(os.path.normpath(path), Source(os.path.normpath(path),
                                                            configs.for_folder(os.path.dirname(full), root)))
            continue
        for source in _walk(path, root, configs, found):
            files.setdefault(source.path, source)
    found.files = sorted(files.values(), key=lambda s: s.path)
    return found


def forced_out(full: str, configs: config.Configs, is_dir: bool = False, unreadable: list[str] | None = None) -> bool:
    """With force-exclude: whether a named path (absolute), or a folder above it in its work tree, is left out
    (an ignore file that cannot be read is said in ``unreadable``)."""
    unreadable = [] if unreadable is None else unreadable
    root = work_root(full, full)
    if not configs.for_folder(full if is_dir else os.path.dirname(full), root).force_exclude:
        return False
    tree = ignore.work_tree(os.path.dirname(full))
    path, path_is_dir = full, is_dir
    while path != root and inside(path, root):
        folder = os.path.dirname(path)
        chain = _gitignores(folder, tree, unreadable) if tree is not None else []
        if configs.for_folder(folder, root).left_out(path, path_is_dir) or ignore.left_out(chain, path, path_is_dir):
            return True
        path, path_is_dir = folder, True
    return False


def _gitignores(folder: str, tree: str, unreadable: list[str]) -> list[ignore.Globs]:
    """The ignore files that apply in ``folder`` (absolute, in the work tree ``tree``), lowest precedence first:
    `.git/info/exclude`, then each .gitignore from the tree's root down to ``folder``."""
    chain = [_ignore_file(ignore.info_exclude, tree, unreadable)]
    rel = os.path.relpath(folder, tree)
    parts = [] if rel == os.curdir else rel.split(os.sep)
    casefold = ignore.ignore_case(tree)
    for i in range(len(parts) + 1):
        chain.append(_ignore_file(ignore.gitignore, os.path.join(tree, *parts[:i]), unreadable, casefold))
    return [g for g in chain if g is not None]


def _above(folder: str, tree: str | None, unreadable: list[str]) -> list[ignore.Globs]:
    """The ignore files above ``folder`` in its work tree (lowest precedence first)."""
    if tree is None:
        return []
    if folder == tree:
        return [g for g in [_ignore_file(ignore.info_exclude, tree, unreadable)] if g is not None]
    return _gitignores(os.path.dirname(folder), tree, unreadable)


def _ignore_file(read: Callable[..., ignore.Globs | None], folder: str, unreadable: list[str],
                 *args: object) -> ignore.Globs | None:
    """An ignore file read as git reads it (``read(folder, *args)``); one that cannot be read is taken as
    absent, as git does, and said in ``unreadable`` (git warns; here it is exit 2: what it leaves out is
    not known)."""
    try:
        return read(folder, *args)
    except OSError as e:
        message = f"{config.shown(e.filename or folder)}: {describe_os_error(e)}"
        if message not in unreadable:
            unreadable.append(message)
        return None


def _walk(top: str, root: str, configs: config.Configs, found: Found) -> list[Source]:
    """The *.py files under a folder that neither the settings nor the ignore files leave out."""
    top_abs = os.path.abspath(top)
    tree = ignore.work_tree(top_abs)
    # Each folder to walk: its work tree, and the ignore files that apply to its entries but its own .gitignore.
    state = {top_abs: (tree, _above(top_abs, tree, found.unreadable))}
    sources = []
    casefold: dict[str, bool] = {}  # each work tree's core.ignorecase

    def unreadable(e: OSError) -> None:
        found.unreadable.append(printable(f"{e.filename}: {describe_os_error(e)}"))

    for here, dirs, names in os.walk(top, onerror=unreadable):
        here_abs = os.path.abspath(here)
        tree, chain = state.pop(here_abs)
        if tree is not None:
            if tree not in casefold:
                casefold[tree] = ignore.ignore_case(tree)
            own = _ignore_file(ignore.gitignore, here_abs, found.unreadable, casefold[tree])
            if own is not None:
                chain = [*chain, own]
        settings = configs.for_folder(here_abs, tree or root)
        kept = []
        for d in sorted(dirs):
            full = os.path.join(here_abs, d)
            if d == ".git" or settings.left_out(full, True) or ignore.left_out(chain, full, True):
                continue
            kept.append(d)
            if ignore.is_repository(os.path.join(full, ".git")) and not os.path.islink(full):  # another repository
                state[full] = (full, _above(full, full, found.unreadable))
            else:
                state[full] = (tree, chain)
        dirs[:] = kept
        for name in sorted(names):
            full = os.path.join(here_abs, name)
            if not name.endswith(".py") or settings.left_out(full, False) or ignore.left_out(chain, full, False):
                continue
            path = os.path.normpath(os.path.join(here, name))
            skipped = _skipped(full, tree or root)
            if skipped is not None:
                found.notes.append(printable(f"{path}: skipped: {skipped}"))
            else:
                sources.append(Source(path, settings))
    return sources


def _skipped(full: str, root: str) -> str | None:
    """Why a *.py file of a walk is not read: a link to a file outside the work tree, or not a regular
    file (a FIFO would block); None when it is read (a file that cannot be stat'ed, such as a link loop,
    is read, and reported as RA002)."""
    if os.path.islink(full):
        target = os.path.realpath(full)
        if not inside(target, os.path.realpath(root)):
            return f"a symbolic link to a file outside the work tree ({target})"
    try:
        mode = os.stat(full).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else f"not a regular file ({file_kind(mode)})"
