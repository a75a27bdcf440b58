"""`.gitignore` read as git reads it: rearr check's choices compared with `git check-ignore` and
`git ls-files --others --exclude-standard` on generated trees, and the lines git reads in its own way
(a BOM, POSIX classes, escapes, ranges that match nothing) one by one."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from _cli import run

from rearr.tools import ignore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

BAD = b"import rearr\nrearr.rearrange(x, 'b c -> c')\n"  # one finding in every file

# A git that reads nothing of this machine's settings: no global excludes file, no system config.
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": os.devnull,
           "XDG_CONFIG_HOME": os.devnull, "LC_ALL": "C"}

# Names of files and folders: plain, with glob characters, blanks, non-ASCII and control bytes.
NAMES = [b"a", b"b", b"ab", b"a.py", b"b.py", b"x_pb2.py", b".hid", b"A.py", b"1.py", b"*.py", b"[a].py",
         b"a b.py", b"a ", b"#c.py", b"!n.py", b"\\e.py", b"\xc3\xa9.py", b"t\tab.py", b"v\x0bt.py",
         b"\x1b.py", b"?", b"-", b"]", b"gen", b"build", b"sub", b"deep", b"Z9"]

# Pieces of lines: each a glob of one name (or a whole line), including git's corners.
PIECES = [b"a", b"b", b"*", b"**", b"?", b"*.py", b"a*", b"*b", b"a?", b"[ab]", b"[!a]*", b"[^a]*", b"[a-c]*",
          b"[z-a]", b"[!z-a]*", b"[[:alpha:]]*", b"[[:digit:]]*", b"[[:upper:][:digit:]]*", b"[[:space:]]*",
          b"*[[:space:]]*", b"*[[:cntrl:]]*", b"[[:punct:]]*", b"[]]", b"[]a]*", b"[[:bogus:]]", b"[a", b"a[",
          b"\\*.py", b"\\[a].py", b"\\#c.py", b"\\!n.py", b"\\\\e.py", b"a\\", b"a\\ ", b"[\\]]", b"[a\\-c]*",
          b"[[:alpha:]-z]*", b"[[]*", b"[[:]*", b"\xc3\xa9*", b"?.py", b"??.py", b"\\?", b"gen", b"sub", b"deep",
          b"build", b"[-]", b"*[[:xdigit:]].py", b"[[:alnum:]]?py"]


def line(rng: random.Random) -> bytes:
    depth = rng.choice([1, 1, 1, 2, 2, 3])
    parts = [rng.choice(PIECES) for _ in range(depth)]
    body = b"/".join(parts)
    if rng.random() < 0.2:
        body = b"/" + body
    if rng.random() < 0.15:
        body = b"**/" + body
    if rng.random() < 0.1:
        body += b"/**"
    if rng.random() < 0.2:
        body += b"/"
    if rng.random() < 0.25:
        body = b"!" + body
    if rng.random() < 0.05:
        body = b"#" + body
    if rng.random() < 0.1:
        body += rng.choice([b" ", b"  ", b"\\ ", b"\t"])
    return body


def gitignore(rng: random.Random) -> bytes:
    lines = [line(rng) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.15:
        lines.insert(rng.randrange(len(lines) + 1), b"")
    end = b"\r\n" if rng.random() < 0.15 else b"\n"
    data = end.join(lines) + (end if rng.random() < 0.7 else b"")
    return (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + data  # a BOM sometimes


def make_tree(rng: random.Random, root: bytes) -> None:
    """Folders two or three deep with files, and .gitignore files in some of them."""
    folders = [root]
    for _ in range(rng.randint(2, 6)):
        parent = rng.choice(folders)
        if parent.count(b"/") - root.count(b"/") >= 3:
            continue
        folder = os.path.join(parent, rng.choice(NAMES))
        if os.path.lexists(folder):
            continue
        os.mkdir(folder)
        folders.append(folder)
    for folder in folders:
        for name in rng.sample(NAMES, rng.randint(1, 6)):
            path = os.path.join(folder, name)
            if not os.path.lexists(path):
                with open(path, "wb") as f:
                    f.write(BAD)
        if folder == root or rng.random() < 0.5:
            with open(os.path.join(folder, b".gitignore"), "wb") as f:
                f.write(gitignore(rng))


def every_path(root: bytes) -> list[tuple[bytes, bool]]:
    found = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != b".git"]
        for name in dirs:
            found.append((os.path.relpath(os.path.join(here, name), root), True))
        for name in files:
            if name != b".gitignore":
                found.append((os.path.relpath(os.path.join(here, name), root), False))
    return found


def ours(root: bytes, rel: bytes, is_dir: bool) -> bool:
    """Whether rearr's matcher ignores ``rel``: a folder above it is ignored, or the deepest .gitignore
    with a matching line says so (git's rule: nothing below an ignored folder comes back)."""
    parts = rel.split(b"/")
    chain = [ignore.info_exclude(os.fsdecode(root))]
    casefold = ignore.ignore_case(os.fsdecode(root))
    for i in range(len(parts)):
        folder = os.path.join(root, *parts[:i]) if i else root
        chain.append(ignore.gitignore(os.fsdecode(folder), casefold))
        path = os.path.join(root, *parts[: i + 1])
        if ignore.left_out([g for g in chain if g is not None], path, is_dir or i < len(parts) - 1):
            return True
    return False


def git(root: bytes, *args: str, stdin: bytes = b"") -> bytes:
    proc = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, env=GIT_ENV)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


def new_tree(tmp_path: Path, seed: int) -> tuple[random.Random, bytes]:
    """A generated tree in a new git repository: the random source that made it, and its root."""
    rng = random.Random(seed)
    root = os.fsencode(tmp_path / "tree")
    os.mkdir(root)
    make_tree(rng, root)
    git(root, "init", "-q")
    return rng, root


def assert_ignored_as_git_says(root: bytes) -> None:
    """Every path of the tree is ignored by rearr's matcher exactly when `git check-ignore` says so."""
    paths = every_path(root)
    listed = git(root, "check-ignore", "--stdin", "-z", stdin=b"\0".join(p for p, _ in paths) + b"\0")
    theirs = set(listed.split(b"\0")) - {b""}
    mine = {p for p, is_dir in paths if ours(root, p, is_dir)}
    lines = {os.path.relpath(d, root): open(os.path.join(d, b".gitignore"), "rb").read()
             for d, _, files in os.walk(root) if b".gitignore" in files}
    assert sorted(mine - theirs) == [] and sorted(theirs - mine) == [], lines


@pytest.mark.parametrize("seed", range(int(os.environ.get("SEEDS", 40))))
def test_ignored_paths_match_git_check_ignore(tmp_path, seed):
    rng, root = new_tree(tmp_path, seed)
    if rng.random() < 0.3:
        with open(os.path.join(root, b".git", b"info", b"exclude"), "ab") as f:
            f.write(gitignore(rng))
    assert_ignored_as_git_says(root)


def case_swapped(rng: random.Random, root: bytes) -> None:
    """Set core.ignorecase (as git does itself on macOS and Windows) and swap the case of some ASCII letters
    of every ignore file, so that only a case-blind match ignores what the lines meant."""
    git(root, "config", "core.ignorecase", "true")
    for here, _, files in os.walk(root):
        if b".gitignore" in files and b"/.git" not in here:
            path = os.path.join(here, b".gitignore")
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(bytes(c ^ 32 if chr(c).isascii() and chr(c).isalpha() and rng.random() < 0.4 else c
                              for c in data))


@pytest.mark.parametrize("seed", range(100, 130))
def test_ignored_paths_match_git_check_ignore_under_core_ignorecase(tmp_path, seed):
    rng, root = new_tree(tmp_path, seed)
    case_swapped(rng, root)
    assert_ignored_as_git_says(root)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [*range(40, 60), "ignorecase-1", "ignorecase-2", "ignorecase-3"])
def test_the_walk_finds_the_files_git_lists(tmp_path, seed):
    rng, root = new_tree(tmp_path, seed)
    if isinstance(seed, str):
        case_swapped(rng, root)
    listed = git(root, "ls-files", "--others", "--exclude-standard", "-z")
    theirs = sorted({p for p in listed.split(b"\0") if p.endswith(b".py")})
    # Every file holds a finding, so the files checked are the paths of the findings.
    proc = run("check", "--exclude", "", "--format", "json", ".", cwd=Path(os.fsdecode(root)))
    assert proc.returncode in (1, 2), proc.stderr
    if proc.stdout == "":  # nothing to check
        assert "no Python file found" in proc.stderr
    ours = sorted({os.fsencode(p["path"]) for p in json.loads(proc.stdout or "[]")})
    assert ours == theirs


@pytest.mark.parametrize("lines, path, is_dir, ignored", [
    ([b"\xef\xbb\xbfa.py"], b"a.py", False, True),  # a BOM before the first line is not part of it
    ([b"[[:alpha:]].py"], b"a.py", False, True),
    ([b"[[:alpha:]].py"], b"1.py", False, False),
    ([b"[[:digit:]x].py"], b"x.py", False, True),
    ([b"[z-a].py"], b"y.py", False, False),  # a backwards range matches nothing: not an error
    ([b"[z-a].py"], b"z.py", False, True),  # git: its first character stands for itself, too
    ([b"[!z-a].py"], b"z.py", False, False),
    ([b"[!z-a].py"], b"y.py", False, True),
    ([b"[^]"], b"x", False, False),  # no ']' closes it: inert
    ([b"[[:bogus:]].py"], b"a.py", False, False),
    ([b"[\\]].py"], b"].py", False, True),  # a backslash escapes inside a class
    ([b"\\*.py"], b"*.py", False, True),
    ([b"\\*.py"], b"a.py", False, False),
    ([b"a.py\\ "], b"a.py ", False, True),  # an escaped trailing blank stays
    ([b"a.py  "], b"a.py", False, True),
    ([b"a.py\r"], b"a.py", False, True),  # CRLF line ends
    ([b"?.py"], b"\xc3\xa9.py", False, False),  # '?' is one byte, as in git
    ([b"build/"], b"build", False, False),
    ([b"build/"], b"build", True, True),
    ([b"/a/**/b.py"], b"a/b.py", False, True),
    ([b"/a/**/b.py"], b"a/x/y/b.py", False, True),
    ([b"a**/b.py"], b"a/x/b.py", False, True),  # git: after the literal 'a', '**' is at the start
    ([b"*.py", b"!keep.py"], b"keep.py", False, False),
])
def test_lines_git_reads_its_own_way(tmp_path, lines, path, is_dir, ignored):
    globs = ignore.Globs.parse(str(tmp_path), ignore.split_lines(b"\n".join(lines)))
    assert ignore.left_out([globs], os.path.join(os.fsencode(tmp_path), path), is_dir) is ignored
    # And git agrees.
    root = os.fsencode(tmp_path / "repo")
    os.makedirs(os.path.join(root, os.path.dirname(path)) if b"/" in path else root, exist_ok=True)
    full = os.path.join(root, path)
    if is_dir:
        os.makedirs(full, exist_ok=True)
    else:
        Path(os.fsdecode(full)).write_bytes(b"")
    Path(os.fsdecode(root), ".gitignore").write_bytes(b"\n".join(lines) + b"\n")
    git(root, "init", "-q")
    assert (git(root, "check-ignore", "-z", "--stdin", stdin=path + b"\0") != b"") is ignored


@pytest.mark.parametrize("glob, says", [
    ("[z-a]", "the range z-a is backwards"),
    ("[^]", "no ']' closes"),
    ("[[:bogus:]]", "names no class"),
    ("x\\", "escapes nothing"),
])
def test_a_glob_of_rearrs_own_settings_that_matches_nothing_is_refused(glob, says):
    assert says in ignore.glob_error(glob)


@pytest.mark.parametrize("glob", ["*.py", "[a-z]", "[[:alpha:]]", "a\\ ", "!x", "# comment", "[]]", "**/gen/"])
def test_a_glob_that_can_match_is_taken(glob):
    assert ignore.glob_error(glob) is None
