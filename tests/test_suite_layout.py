"""The suite's own layout (tests/README.md, "Where a test goes"): folders mirror the package, file names
are unique, and test modules import helpers, never each other."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "rearr"
TECHNIQUE_FOLDERS = {"techniques", "docs"}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.parts)


def test_every_folder_mirrors_a_subpackage_or_holds_a_technique():
    folders = {p.parent.relative_to(TESTS).parts[0] for p in _test_files() if p.parent != TESTS}
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders - subpackages - TECHNIQUE_FOLDERS == set()


def test_test_file_names_are_unique_across_folders():
    counts = Counter(p.name for p in _test_files())
    assert [name for name, n in counts.items() if n > 1] == []


def test_no_test_module_imports_another():
    offenders = []
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(TESTS)} imports {n}" for n in names if n.startswith("test_")]
    assert offenders == []


def test_the_design_page_names_every_module():
    """docs/design.md's tree is the map a newcomer reads: a module it leaves out is one nobody finds."""
    tree = (TESTS.parent / "docs" / "design.md").read_text(encoding="utf-8").split("```")[1]
    named = set(re.findall(r"[\w.]+\.(?:py|lark)\b", tree))
    modules = {p.name for p in PACKAGE.rglob("*") if p.suffix in {".py", ".lark"} and "__pycache__" not in p.parts}
    assert sorted(modules - named) == []
