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
