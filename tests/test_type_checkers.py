"""The public API as the type checkers see it: `mypy --strict` and pyright in strict mode accept a typed
user module (typecheck/user_mistakes.py) where it calls rearr as documented (the result of einsum is
the operands' type, so `return rearr.einsum(...)` passes `no-any-return`), and flag each mistake that
a type can catch: a misspelt reduction, scatter reduction or check_bounds= mode, each on its line.

Both checkers read this checkout's rearr (MYPYPATH, pyright's extraPaths), not an installed one. Slow:
each checker reads numpy's stubs (tens of seconds, more on a loaded machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]



USER = Path(__file__).resolve().parent / "typecheck" / "user_mistakes.py"


def _mistakes() -> set[int]:
    return {k for k, line in enumerate(USER.read_text().splitlines(), 1) if line.endswith("# MISTAKE")}


def _user_module(tmp_path: Path) -> Path:
    path = tmp_path / USER.name
    shutil.copy(USER, path)
    return path


def test_mypy_strict_flags_each_mistake_and_nothing_else(tmp_path):
    pytest.importorskip("mypy")
    path = _user_module(tmp_path)
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-color-output",
                          "--cache-dir", str(tmp_path / "cache"), str(path)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    flagged = {int(line.split(":")[1]) for line in errors}
    assert flagged == _mistakes(), out.stdout + out.stderr
    assert all("[arg-type]" in line for line in errors), out.stdout


def test_pyright_strict_flags_each_mistake_and_nothing_else(tmp_path):
    pyright = shutil.which("pyright") or str(Path(sys.executable).with_name("pyright"))
    if not Path(pyright).exists():
        pytest.skip("pyright is not installed (the release extra)")
    path = _user_module(tmp_path)
    config = {"include": [path.name], "typeCheckingMode": "strict", "extraPaths": [str(ROOT)],
              "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}"}
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    out = subprocess.run([pyright, "--outputjson", "--pythonpath", sys.executable, "--project", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    report = json.loads(out.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    flagged = {d["range"]["start"]["line"] + 1 for d in errors}
    assert flagged == _mistakes(), json.dumps(errors, indent=1)
