"""The package's metadata as a package index shows it, without building anything (.ci/release builds,
installs and type-checks the wheel):

- one version source, rearr/_version.py, which pyproject.toml and rearr.__version__ follow; a release version
  is CHANGELOG.md's newest dated entry with nothing unreleased, any other a development version after it;
- the extras a user installs name ranges (only the test and release extras pin, for a CI that is the
  same every run), and the Python classifiers agree with requires-python;
- every link of README.md works in a checkout and in a repository browser: a relative path to a file
  that exists; the license is stated the same in pyproject.toml, LICENSE and README.md;
- every public name of rearr is bound for a type checker, the lazily loaded ones included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from packaging.version import Version

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
    # a release X.Y.Z, or the development version X.Y.Z.devN that main carries (docs/releasing.md)
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", rearr.__version__)
    assert "__version__" not in rearr.__all__  # a dunder, as in every package


CHANGELOG_HEADING = re.compile(r"^## \[(?P<name>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?[ \t]*$", re.M)


def version_scheme_faults(version: str, changelog: str) -> list[str]:
    """What makes `version` ambiguous against CHANGELOG.md's text (docs/releasing.md, "Versions"):
    a release is a dated entry with nothing left under "Unreleased"; any other build carries a
    development version after the newest dated entry, so no two different builds share a version."""
    headings = list(CHANGELOG_HEADING.finditer(changelog))
    if not headings or headings[0]["name"] != "Unreleased" or headings[0]["date"]:
        return ['the first heading is not "## [Unreleased]"']
    end = headings[1].start() if len(headings) > 1 else len(changelog)
    unreleased = [line for line in changelog[headings[0].end():end].splitlines()
                  if line.strip() and not line.startswith("#")]  # entries, not the empty "### Added"
    dated = [h["name"] for h in headings[1:] if h["date"]]
    undated = [h["name"] for h in headings[1:] if not h["date"]]
    faults = [f"## [{name}] has no date" for name in undated]
    if version in dated:
        if unreleased:
            faults.append(f"{version} is the dated entry {version}, but \"Unreleased\" lists changes since: "
                          f"a build of this tree would be a different {version}; rearr/_version.py takes a "
                          f"development version after it (e.g. {_next_minor(version)}.dev0)")
        if dated[0] != version:
            faults.append(f"{version} is not the newest dated entry, {dated[0]}")
        return faults
    parsed = Version(version)
    if not parsed.is_devrelease:
        faults.append(f"{version} has no dated entry: a release has one; any other build is X.Y.Z.devN")
    if dated and parsed <= Version(dated[0]):
        faults.append(f"{version} is not after the newest release, {dated[0]}")
    if parsed.base_version in dated:
        faults.append(f"{version} is a development version of {parsed.base_version}, which is released already")
    return faults


def _next_minor(version: str) -> str:
    major, minor, _ = Version(version).release
    return f"{major}.{minor + 1}.0"


def test_the_version_and_the_changelog_name_one_build():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert version_scheme_faults(rearr.__version__, text) == []


CHANGELOG = """# Changelog

## [Unreleased]
{unreleased}
## [0.1.0] - 2026-12-01

### Added

- the first version
"""


@pytest.mark.parametrize("version, unreleased, fault", [
    ("0.1.0", "\n### Fixed\n\n- a bug\n", 'but "Unreleased" lists changes since'),  # main after 0.1.0, unbumped
    ("0.1.0.dev0", "", "is not after the newest release"),
    ("0.1.1.dev0", "", None),
    ("0.2.0.dev0", "\n### Fixed\n\n- a bug\n", None),
    ("0.1.0", "\n### Added\n\n", None),  # the release itself: "Unreleased" left empty
    ("0.2.0", "", "has no dated entry"),
    ("0.0.9", "", "has no dated entry"),
])
def test_the_version_scheme_check_finds_an_ambiguous_version(version: str, unreleased: str, fault: str | None):
    faults = version_scheme_faults(version, CHANGELOG.format(unreleased=unreleased))
    if fault is None:
        assert faults == []
    else:
        assert any(fault in f for f in faults), faults


def test_user_extras_name_ranges():
    for extra, requirements in PROJECT["optional-dependencies"].items():
        if extra in ("test", "release", "docs"):  # the project's own tool chains, pinned for a steady CI
            continue
        for requirement in requirements:
            specifier = requirement.partition(";")[0]  # an environment marker is no version bound
            assert ">=" in specifier and "==" not in specifier and "<" not in specifier, (extra, requirement)
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
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def github_anchors(path: Path) -> set[str]:
    """The anchors that a Markdown file's headings make, as a repository browser (and mkdocs' toc) slugs them."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    titles = re.findall(r"^#{1,6} (.+?)\s*$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in titles}


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_readme_links_work_in_a_checkout(page: str):
    """README.md (and CONTRIBUTING.md) are read in a checkout and in a repository browser: a link into
    the repository is a path relative to it, which works in both (the project's URL, in pyproject's
    project.urls, is not published yet). Each leads to a file that exists, and an anchor to one of its
    headings."""
    source = ROOT / page
    links = README_LINK.findall(source.read_text(encoding="utf-8"))
    assert links
    for link in links:
        assert not re.match(r"[a-z][a-z0-9+.-]*:", link), f"{link}: link a file of the repository by its path"
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else source
        assert target.exists() and target.resolve().is_relative_to(ROOT), link
        if anchor:
            assert anchor in github_anchors(target), f"{link}: {path or page} has no heading #{anchor}"


def test_the_license_is_stated_once_in_every_place():
    """pyproject's expression, LICENSE, README's License section: the same expression, naming the same
    file of Lark's making, which is data (the parser's tables); no file of the package carries another
    license."""
    expression = PROJECT["license"]
    assert expression == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## License\n"):]
    assert license_text.startswith("MIT License\n")
    assert f"rearr as a whole: {expression} " in license_text and f"`{expression}`" in section
    named = sorted(set(re.findall(r"rearr/[\w/]+\.py", license_text)))
    assert named == ["rearr/syntax/_tables.py"] == sorted(set(re.findall(r"rearr/[\w/]+\.py", section)))
    for path in (ROOT / "rearr").rglob("*.py"):
        assert "Mozilla Public License" not in path.read_text(encoding="utf-8"), path


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
