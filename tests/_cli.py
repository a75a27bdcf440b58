"""Running the console script in tests, the same way everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The console script, as a subprocess that does not depend on PATH or on rearr being installed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "rearr.tools.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)
