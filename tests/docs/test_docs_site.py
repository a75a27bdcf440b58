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


# --- code blocks: a long line wraps, never cut off -------------------------------------------------

LONG_LINE = 95  # about what a code block of the site's text column holds at a desktop width


def _code_lines(page_html: str) -> list[str]:
    blocks = re.findall(r"<pre[^>]*>(?:<span></span>)?<code[^>]*>(.*?)</code></pre>", page_html, re.S)
    return [line for block in blocks for line in html.unescape(re.sub(r"<[^>]+>", "", block)).splitlines()]


@pytest.mark.slow
def test_code_blocks_wrap_their_long_lines(site: Path) -> None:
    # Lines over about 95 characters ran out of sight: code scrolled sideways behind a scrollbar that
    # many systems hide. The site's CSS wraps them, each line a span of its own (mkdocs.yml) so that
    # the continuation of a wrapped line is indented.
    css = (site / "assets" / "site.css").read_text(encoding="utf-8")
    rules = {m[1].strip(): m[2] for m in re.finditer(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S))}
    assert "white-space: pre-wrap" in rules.get(".md-typeset pre > code", ""), rules
    assert "text-indent: -4ch" in rules.get('.md-typeset pre > code > span[id^="__span"]', ""), rules
    assert "assets/site.css" in _page(site, "questions/permute-contiguous-view")
    long_pages = [p for p in sorted(site.rglob("index.html")) if any(len(line) > LONG_LINE for line in
                                                                      _code_lines(p.read_text(encoding="utf-8")))]
    assert long_pages, "no page has a long code line: the check below would check nothing"
    for path in long_pages:
        text = path.read_text(encoding="utf-8")
        assert re.search(r'<code><span id="__span-\d+-1">', text), f"{path}: code lines are not spans"


def _browser() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


# Run in the page once it is loaded: the code blocks whose text is wider than their box.
CUT_CHECK = """<script>
window.addEventListener("load", () => {
  const blocks = [...document.querySelectorAll("pre > code")];
  const cut = blocks.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.slice(0, 60));
  document.body.setAttribute("data-code-blocks", String(blocks.length));
  document.body.setAttribute("data-cut", JSON.stringify(cut));
});
</script>"""


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 700])
def test_no_code_block_is_cut_off_in_a_browser(site: Path, width: int) -> None:
    import json

    browser = _browser()
    if browser is None:
        if os.environ.get("REARR_BROWSER_TESTS") == "1":
            pytest.fail("REARR_BROWSER_TESTS=1 but no chromium on PATH (.ci/run installs Debian's chromium)")
        pytest.skip("no chromium on PATH: install Debian's chromium (apt-get install chromium) to run this test")
    pages = ["questions/permute-contiguous-view", "explain", "tour", "backends", "check"]
    for name in pages:
        page = site / name / "index.html"
        assert any(len(line) > LONG_LINE for line in _code_lines(page.read_text(encoding="utf-8"))), name
        probe = page.with_name("cut-check.html")  # beside the page: its relative links still work
        probe.write_text(page.read_text(encoding="utf-8").replace("</body>", CUT_CHECK + "</body>"), "utf-8")
        done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                               f"--user-data-dir={site.parent / 'chromium-profile'}", f"--window-size={width},900",
                               "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                              capture_output=True, text=True, timeout=120)
        body = re.search(r"<body[^>]*>", done.stdout)
        assert body, done.stderr[-2000:]
        attrs = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body[0]))
        assert int(attrs["data-code-blocks"]) > 0, name
        assert json.loads(html.unescape(attrs["data-cut"])) == [], f"{name} at {width}px: code cut off"


@pytest.mark.slow
def test_the_permute_page_draws_the_bare_view_next_to_the_right_answer(site: Path) -> None:
    import xml.etree.ElementTree as ET

    page = _page(site, "questions/permute-contiguous-view")
    (figure,) = [f for f in re.findall(r'<figure class="rearr-picture"[^>]*>\s*(<svg.*?</svg>)', page, re.S)
                 if "x.view(3, 8)" in f]
    cells: dict[str, list[ET.Element]] = {}
    for g in ET.fromstring(figure).iter("{http://www.w3.org/2000/svg}g"):
        cells.setdefault(g.get("data-tensor"), []).append(g)
    assert len(cells["out"]) == len(cells["x.view(3, 8)"]) == 24
    framed = [g for g in cells["x.view(3, 8)"] if any(r.get("stroke") == "#d00000" for r in g)]
    assert len(framed) == 16  # all but row 0's first four and row 2's last four hold the wrong element
    assert "to_svg(compare=" in html.unescape(page)
