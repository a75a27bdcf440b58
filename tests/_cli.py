"""Running the console script in tests, the same way everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path = REPO, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
    """The console script, as a subprocess that does not depend on PATH or on rearr being installed;
    ``stdin`` is written to its standard input (text as UTF-8)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "rearr.tools.cli", *args], cwd=cwd, env=env, capture_output=True,
                          input=data, stdin=None if data is not None else subprocess.DEVNULL, timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
                                       proc.stderr.decode("utf-8", "surrogateescape"))


def git_repository(folder: Path) -> Path:
    """Make ``folder`` the root of a git work tree, as git recognises one (HEAD, objects/, refs/), without
    running git; the `.git` folder."""
    git = folder / ".git"
    for sub in ("objects", "refs/heads", "info"):
        (git / sub).mkdir(parents=True, exist_ok=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    return git


def write(root: Path, tree: dict[str, str | bytes]) -> None:
    """Files under ``root``: a path relative to it, and its text (UTF-8) or bytes."""
    for rel, text in tree.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (root / rel).write_bytes(text)
        else:
            (root / rel).write_text(text, encoding="utf-8")


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """`rearr check` refused: exit 2 with one line on stderr that says what is wrong, and no traceback."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rearr check: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
