"""The package's metadata as a package index shows it, without building anything (.ci/release builds,
installs and type-checks the wheel):

- one version source, rearr/_version.py, which pyproject.toml, rearr.__version__ and CHANGELOG.md follow;
- the extras a user installs name ranges (only the test and release extras pin, for a CI that is the
  same every run), and the Python classifiers agree with requires-python;
- every link of README.md works on a package index page: an absolute URL under the one project URL,
  to a file that exists;
- every public name of rearr is bound for a type checker, the lazily loaded ones included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rearr
from rearr import _version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
BASE = PROJECT["urls"]["Source"]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_the_version_is_written_once():
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert SETUPTOOLS["dynamic"]["version"] == {"attr": "rearr._version.__version__"}
    assert rearr.__version__ == _version.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", rearr.__version__)
    assert "__version__" not in rearr.__all__  # a dunder, as in every package


def test_the_changelog_has_the_version_and_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased" and rearr.__version__ in headings, headings


def test_user_extras_name_ranges():
    for extra, requirements in PROJECT["optional-dependencies"].items():
        if extra in ("test", "release", "docs"):  # the project's own tool chains, pinned for a steady CI
            continue
        for requirement in requirements:
            assert ">=" in requirement and "==" not in requirement and "<" not in requirement, (extra, requirement)
    assert PROJECT["optional-dependencies"]["torch"] == ["torch>=2.5"]
    assert all(">=" in r for r in PROJECT["dependencies"])


def test_lark_is_not_a_run_time_dependency():
    # the shipped parser imports nothing of lark; lark regenerates it (the grammar extra) and tests it
    assert not any(r.startswith("lark") for r in PROJECT["dependencies"])
    assert any(r.startswith("lark") for r in PROJECT["optional-dependencies"]["grammar"])
    assert any(r.startswith("lark") for r in PROJECT["optional-dependencies"]["test"])


def test_python_classifiers_follow_requires_python():
    assert PROJECT["requires-python"] == ">=3.10"
    versions = [c.rpartition(" :: ")[2] for c in PROJECT["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c)]
    assert versions == ["3.10", "3.11", "3.12", "3.13"]
    assert "Typing :: Typed" in PROJECT["classifiers"] and (ROOT / "rearr" / "py.typed").exists()
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # PEP 639: the expression says it


def test_project_urls_share_one_base():
    assert BASE == PROJECT["urls"]["Homepage"] and BASE.startswith("https://")
    for name, url in PROJECT["urls"].items():
        assert url == BASE or url.startswith(BASE + "/"), name


README_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_links_are_absolute_and_true():
    """A package index shows README.md away from the repository: a relative link (or an in-page
    anchor, which an index page may not keep) would lead nowhere. Each points into the repository
    at one base, and at a file that exists."""
    links = README_LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert links
    blob = f"{BASE}/blob/main/"
    for link in links:
        assert link.startswith(blob), f"{link}: write it as {blob}..."
        path = link[len(blob):].partition("#")[0]
        assert (ROOT / path).exists(), link


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """The names that statements bind at a module's top level, inside `if TYPE_CHECKING:` too (not
    inside a function, such as the module's __getattr__)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).partition(".")[0] for a in node.names}
        elif isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.If):
            names |= _bound_names(node.body)
    return names


def test_every_public_name_is_bound_for_type_checkers():
    """A name that only the module's __getattr__ makes is `object` to mypy and pyright."""
    tree = ast.parse((ROOT / "rearr" / "__init__.py").read_text(encoding="utf-8"))
    assert set(rearr.__all__) <= _bound_names(tree.body)
