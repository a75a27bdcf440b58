"""The examples, the README's quick start and docs/language.md, run as a user would.

- every examples/*.py runs as a subprocess and exits 0 (each asserts its own results);
- the README's "Quick start" has exactly three commands, in the agreed form (the run command, the test
  command, and the test command with torch from PyTorch's CPU index), and the example the first one
  runs works; with REARR_SLOW_TESTS=1 (set by .ci/run) the first command itself runs in a fresh
  virtual environment on a copy of the repository;
- every `>>>` example in docs/language.md holds (doctest), so the reference cannot drift.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
README = ROOT / "README.md"
LANGUAGE = ROOT / "docs" / "language.md"

RUN_COMMAND = re.compile(
    r"^python3 -m venv \.venv && \.venv/bin/pip install -e \. && \.venv/bin/python (?P<script>examples/\w+\.py)$"
)
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 && "
    ".venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
)
# The CPU-only way: the same, with torch from PyTorch's CPU index (PyPI's Linux wheel is the CUDA build).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CPU_TEST_COMMAND = TEST_COMMAND.replace("install torch==2.13.0", f"install torch==2.13.0 --index-url {CPU_INDEX}")


def _env() -> dict[str, str]:
    """The current environment, with this checkout first on the path (whether or not rearr is installed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _run_script(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=300)


def test_the_examples_are_there():
    names = {p.name for p in EXAMPLES}
    assert {"flatten_order.py", "channels_to_batch.py", "numpy_transpose_flatten.py", "gather_scatter.py",
            "quickstart.py"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
@pytest.mark.slow
def test_example_runs(path: Path):
    done = _run_script(path)
    assert done.returncode == 0, f"{path.name} failed:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.rstrip().endswith(("ok", f"ok (rearr {_version()})")), done.stdout[-500:]


def _version() -> str:
    text = (ROOT / "rearr" / "_version.py").read_text(encoding="utf-8")  # the one place it is written
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


# --- README ----------------------------------------------------------------------


def quick_start_commands() -> list[str]:
    """The commands in the README's "Quick start" section: one a fenced block line."""
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Quick start' section"
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", section.group(1), re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_quick_start_has_the_run_test_and_cpu_only_commands():
    commands = quick_start_commands()
    assert len(commands) == 3, commands
    run, test, cpu_only = commands
    assert RUN_COMMAND.match(run), run
    assert test == TEST_COMMAND
    assert cpu_only == CPU_TEST_COMMAND != TEST_COMMAND
    # torch is always pinned, never a bare `pip install torch` (that could pull a CUDA build).
    for command in commands:
        assert "install torch " not in command + " " and "install torch\n" not in command


def test_readme_quick_start_example_runs():
    script = RUN_COMMAND.match(quick_start_commands()[0]).group("script")
    done = _run_script(ROOT / script)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK), ".ci/run is not executable"
    torch_at = ci.index("install torch==2.13.0")
    extra_at = ci.index("install -e '.[test]'")
    assert torch_at < extra_at, "torch==2.13.0 is installed before the test extra"
    assert "python\" -m pytest" in ci or "python -m pytest" in ci
    # everything, the slow tests included: no -m, no -k
    assert re.search(r'^REARR_SLOW_TESTS=1 "\$venv/bin/python" -m pytest$', ci, re.M), "CI runs the whole suite"


def test_the_plain_test_command_runs_the_slow_tests_too():
    """`slow` only marks: `python -m pytest` (README, CI) runs them; `-m "not slow"` is the fast loop."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert any(line.startswith("slow:") for line in options["markers"])
    assert "--strict-markers" in options["addopts"].split()
    assert not re.search(r"(^|\s)(-m|-k)(\s|=|$)", options["addopts"]), options["addopts"]


def test_test_extra_pins_torch():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    test_extra = re.search(r"^test = \[(.*?)\]", text, re.M).group(1)
    for dependency in ("pytest", "hypothesis", "einops==0.8.*", "torch==2.13.0", "ruff"):
        assert f'"{dependency}' in test_extra, dependency


@pytest.mark.skipif(os.environ.get("REARR_SLOW_TESTS") != "1",
                    reason="creates a virtual environment and installs rearr; set REARR_SLOW_TESTS=1 (.ci/run does)")
@pytest.mark.slow
def test_readme_run_command_in_a_fresh_venv(tmp_path: Path):
    """The README's first command, literally, on a copy of the repository without any venv."""
    copy = tmp_path / "rearr"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venv-ci", "venv", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache",
        ".hypothesis", "build", "dist"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    done = subprocess.run(["bash", "-c", quick_start_commands()[0]], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.rstrip().endswith("ok"), done.stdout[-1000:]
