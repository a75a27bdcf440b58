"""The docs site (mkdocs.yml) builds with `mkdocs build --strict`, pictures and API reference included."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "mkdocs.yml").exists())  # wherever tests/ puts it
QUESTIONS = ["flatten-order", "permute-contiguous-view", "numpy-transpose-flatten", "gather-scatter-pitfalls"]
SITE_PACKAGES = ["mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"]


def _require_mkdocs() -> None:
    missing = [name for name in SITE_PACKAGES if importlib.util.find_spec(name.split(".")[0]) is None
               or importlib.util.find_spec(name) is None]
    if not missing:
        return
    reason = f"{', '.join(missing)} not installed: pip install -e '.[docs]'"
    if os.environ.get("CI"):
        pytest.fail(f"CI builds the docs site, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_mkdocs()
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
           "--site-dir", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def _text(page_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page_html))


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.slow
def test_question_page_shows_an_inline_picture(site: Path, question: str) -> None:
    page = _page(site, f"questions/{question}")
    figures = re.findall(r'<figure class="rearr-picture"[^>]*>(.*?)</figure>', page, re.S)
    assert figures, f"questions/{question}: no picture"
    assert all("<svg" in figure for figure in figures), f"questions/{question}: a picture without its <svg>"
    assert "```picture" not in page and "language-picture" not in page, f"questions/{question}: a marker left as is"


@pytest.mark.slow
def test_reference_documents_every_public_name(site: Path) -> None:
    import rearr.layers

    text = _text(_page(site, "reference"))
    names = [f"rearr.{name}" for name in rearr.__all__] + [f"rearr.layers.{n}" for n in rearr.layers.__all__]
    assert not [name for name in names if name not in text]
    assert "Reorder, merge and split axes" in text, "rearrange's docstring is shown"


@pytest.mark.slow
def test_links_to_repository_files_lead_to_site_pages(site: Path) -> None:
    # docs/language.md links ../examples/flatten_order.py, a path of the repository.
    assert 'href="../examples/flatten_order/"' in _page(site, "language")
    assert "import rearr" in _text(_page(site, "examples/flatten_order"))
    assert "A short tour" in _text(_page(site, "tour"))


@pytest.mark.slow
def test_changelog_page_includes_the_changelog(site: Path) -> None:
    changelog = ROOT / "CHANGELOG.md"
    page = _text(_page(site, "changelog"))
    assert "--8<--" not in page
    if changelog.exists():  # written with the release metadata; the page includes it once it is there
        first = next(line.lstrip("# ").strip() for line in changelog.read_text(encoding="utf-8").splitlines()
                     if line.strip())
        assert first in page


@pytest.mark.slow
def test_site_needs_no_network(site: Path) -> None:
    # No web fonts, scripts or stylesheets from elsewhere: the site works offline as built.
    remote = set()
    for path in site.rglob("*.html"):
        remote |= set(re.findall(r'<(?:link|script)[^>]+(?:href|src)="(https?://[^"]+)"', path.read_text("utf-8")))
    assert not remote



def _hooks():
    _require_mkdocs()
    spec = importlib.util.spec_from_file_location("rearr_site_hooks", ROOT / "docs" / "_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("link, page, source, site_link", [
    ("../examples/gather_scatter.py", "language.md", None, "examples/gather_scatter.md"),
    ("../../examples/flatten_order.py", "questions/flatten-order.md", None, "../examples/flatten_order.md"),
    ("docs/language.md#indexing", "tour.md", None, "language.md#indexing"),
    ("https://github.com/someone/rearr/blob/main/docs/backends.md#jax", "tour.md", None, "backends.md#jax"),
    ("https://github.com/someone/rearr/blob/main/examples/", "tour.md", None, "examples/index.md"),
    ("https://github.com/someone/rearr/blob/main/README.md#backends", "tour.md", None, "tour.md#backends"),
    ("README.md#installation", "changelog.md", "CHANGELOG.md", "tour.md#installation"),
    ("CHANGELOG.md", "questions/flatten-order.md", "README.md", "../changelog.md"),
])
def test_links_to_repository_files_are_pointed_at_site_pages(link: str, page: str, source: str | None,
                                                              site_link: str) -> None:
    assert _hooks().rewrite_links(f"see [it]({link}).", page, source) == f"see [it]({site_link})."


@pytest.mark.parametrize("link", ["https://numpy.org/doc/", "#errors", "../no/such/file.md",
                                  "https://github.com/someone/rearr/blob/main/tests/README.md"])
def test_other_links_are_left_as_written(link: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A path to no file stays, so that `mkdocs build --strict` reports it.
    hooks = _hooks()
    monkeypatch.setattr(hooks, "repository_url", lambda: "https://github.com/someone/rearr")
    assert hooks.rewrite_links(f"[x]({link})", "index.md") == f"[x]({link})"


@pytest.mark.parametrize("url, site_link", [
    ("https://github.com/someone/rearr", "https://github.com/someone/rearr/blob/main/tests/README.md#layout"),
    (None, "../tests/README.md#layout"),  # no repository URL: left for `mkdocs build --strict` to report
])
def test_a_repository_file_off_the_site_is_linked_where_the_repository_is(
        url: str | None, site_link: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = _hooks()
    monkeypatch.setattr(hooks, "repository_url", lambda: url)
    assert hooks.rewrite_links("[x](../tests/README.md#layout)", "index.md") == f"[x]({site_link})"
