"""mkdocs hooks of the rearr site (mkdocs.yml, `hooks:`); not part of the package.

- Pictures: a fenced block of kind ``picture`` holds the arguments of one `rearr.explain` call
  (Python literals, and `np.array([...])` for an index to draw with its values); it becomes the
  inline SVG of `rearr.explain(...).to_svg()`, drawn when the site is built. A keyword
  `compare={"name": np.arange(n).reshape(...)}` goes to `to_svg(compare=...)`: other code's result
  on the same input, drawn under rearr's with each wrong cell framed (the bare `view` of a question).
- Repository files as pages: README.md (the tour), CONTRIBUTING.md, LICENSE and examples/*.py are
  added to the site, and CHANGELOG.md is included into docs/changelog.md (`--8<-- "CHANGELOG.md"`), so
  the links that docs/*.md and README.md write to them (`../examples/flatten_order.py`,
  `docs/language.md#indexing`, or a URL of the repository's files) are rewritten to the site's pages
  and checked by `mkdocs build --strict`.
- Docstrings (a griffe extension, mkdocs.yml's mkdocstrings options): their doctest lines become
  code blocks, which Markdown would otherwise read as quotes (`>>>`).
"""

from __future__ import annotations

import ast
import html
import logging
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

import griffe
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
log = logging.getLogger("mkdocs.hooks.rearr")

# A page of the site for a repository file outside docs/: repository path -> site path.
PAGES_FROM_REPO = {"README.md": "tour.md", "CONTRIBUTING.md": "contributing.md", "LICENSE": "license.md"}
# Included into a page of docs/ by a line `--8<-- "PATH"` (the syntax of pymdownx.snippets).
INCLUDED_INTO = {"CHANGELOG.md": "changelog.md"}
EXAMPLES = "examples"

INCLUDE = re.compile(r'^--8<-- "(?P<path>[^"]+)"[ \t]*$', re.M)
PICTURE = re.compile(r"^```picture[ \t]*\n(?P<call>.*?)\n```[ \t]*$", re.M | re.S)
# A Markdown link or image target: `](target)`, the target without spaces.
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
# A link to a repository file by its URL (pyproject.toml's Source, or any GitHub copy); on the site,
# that file's page.
REPO_URL = re.compile(r"^https://github\.com/[^/]+/rearr/(?:blob|tree)/[^/]+/(?P<path>[^#]*)(?P<anchor>#.*)?$")


def repo_path_of(src_uri: str) -> str:
    """The repository path a site page comes from."""
    for repo_path, site_path in PAGES_FROM_REPO.items():
        if src_uri == site_path:
            return repo_path
    if src_uri.startswith(f"{EXAMPLES}/") and src_uri.endswith(".md"):
        return src_uri[: -len(".md")] + ".py"
    return f"docs/{src_uri}"


def site_path_of(repo_path: str) -> str | None:
    """The site page (or file) a repository path is shown as, or None for a file the site lacks."""
    if repo_path in PAGES_FROM_REPO:
        return PAGES_FROM_REPO[repo_path]
    if repo_path in INCLUDED_INTO:
        return INCLUDED_INTO[repo_path]
    if repo_path.startswith("docs/"):
        return repo_path[len("docs/"):]
    if repo_path.startswith(f"{EXAMPLES}/") and repo_path.endswith(".py"):
        return repo_path[: -len(".py")] + ".md"
    if repo_path in (EXAMPLES, f"{EXAMPLES}/"):
        return f"{EXAMPLES}/index.md"
    return None


def example_page(path: Path) -> str:
    """An example script as a page: its docstring as text, then the whole script."""
    source = path.read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or path.name
    title, _, body = doc.partition("\n")
    return (
        f"# {path.name}: {title.strip()}\n\n"
        f"<pre class=\"rearr-docstring\">{html.escape(body.strip())}</pre>\n\n"
        f"Run it from the repository's root: `python {EXAMPLES}/{path.name}`.\n\n"
        f"```python\n{source.rstrip()}\n```\n"
    )


def examples_index(paths: list[Path]) -> str:
    lines = ["# Examples", "", "Scripts that print and assert their results; each runs on its own.", ""]
    for path in paths:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        lines.append(f"- [`{path.name}`]({path.stem}.md): {doc.partition(chr(10))[0].strip()}")
    return "\n".join(lines) + "\n"


def on_files(files: Files, config: Any) -> Files:
    for repo_path, site_path in PAGES_FROM_REPO.items():
        text = (REPO / repo_path).read_text(encoding="utf-8")
        if not repo_path.endswith(".md"):
            text = f"# {repo_path}\n\n```text\n{text.rstrip()}\n```\n"
        files.append(File.generated(config, site_path, content=text))
    scripts = sorted((REPO / EXAMPLES).glob("*.py"))
    files.append(File.generated(config, f"{EXAMPLES}/index.md", content=examples_index(scripts)))
    for path in scripts:
        files.append(File.generated(config, f"{EXAMPLES}/{path.stem}.md", content=example_page(path)))
    return files


def repository_url() -> str | None:
    """pyproject.toml's `Source` URL (a GitHub repository), if it has one."""
    found = re.search(r'^Source = "(https://github\.com/[^"]+?)/?"', (REPO / "pyproject.toml").read_text("utf-8"), re.M)
    return found[1] if found else None


def rewrite_links(markdown: str, src_uri: str, source: str | None = None) -> str:
    """Links to repository files, written from where the text lies (`source`, a repository path; by
    default the page's own file), pointed at the site's pages."""
    here = posixpath.dirname(source or repo_path_of(src_uri))

    def fix(match: re.Match[str]) -> str:
        target = match["target"]
        if url := REPO_URL.match(target):
            repo_path, anchor = posixpath.normpath(url["path"] or "."), url["anchor"] or ""
        elif re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return match[0]  # a URL elsewhere, an anchor of this page, or a site-absolute path
        else:
            path, hash_, anchor = target.partition("#")
            repo_path, anchor = posixpath.normpath(posixpath.join(here, path)), hash_ + anchor
        site_path = site_path_of(repo_path)
        if site_path is None:
            # Another file of the repository (tests/README.md) is linked where the repository is hosted;
            # a URL stays as written, and a path to no file is left for `mkdocs build --strict` to report.
            source_url = repository_url()
            if url is None and source_url and (REPO / repo_path).exists():
                return f"]({source_url}/blob/main/{repo_path}{anchor})"
            return match[0]
        relative = posixpath.relpath(site_path, posixpath.dirname(src_uri) or ".")
        return f"]({relative}{anchor})"

    return LINK.sub(fix, markdown)


def checkout_rearr() -> Any:
    """This checkout's rearr (mkdocs restores sys.path after loading the hooks, so it is set here)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import rearr

    if not Path(rearr.__file__).resolve().is_relative_to(REPO):
        log.warning("the pictures are drawn by the rearr at %s, not by this checkout's", rearr.__file__)
    return rearr


def argument(node: ast.expr) -> Any:
    """A Python literal, `np.array(<literal>)` for an index whose values the picture shows, or
    `np.arange(<n>).reshape(<literals>)` (the picture's own input, reshaped as a bare view would); a dict
    of those for compare=."""
    import numpy as np

    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {ast.literal_eval(k): argument(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("np.array", "numpy.array") and len(node.args) == 1:
        return np.array(ast.literal_eval(node.args[0]))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reshape" and \
            isinstance(node.func.value, ast.Call) and ast.unparse(node.func.value.func) in ("np.arange", "numpy.arange"):
        n = ast.literal_eval(node.func.value.args[0])
        return np.arange(n).reshape(*(ast.literal_eval(a) for a in node.args))
    return ast.literal_eval(node)


def picture(call: str, src_uri: str) -> str:
    """The inline SVG of `rearr.explain(<call>)`; the arguments are literals or `np.array(...)` of one."""
    rearr = checkout_rearr()

    source = f"explain({call})"
    node = ast.parse(source, mode="eval").body
    assert isinstance(node, ast.Call)
    compare = next((k.value for k in node.keywords if k.arg == "compare"), None)
    node.keywords = [k for k in node.keywords if k.arg != "compare"]
    text = lambda n: ast.get_source_segment(source, n)  # noqa: E731 - the page's own spelling
    args = [argument(a) for a in node.args]
    kwargs = {k.arg: argument(k.value) for k in node.keywords if k.arg is not None}
    try:
        explanation = rearr.explain(*args, **kwargs)
        drawn = explanation.to_svg(compare=None if compare is None else argument(compare))
    except Exception as e:  # a RearrError: the page's marker is wrong
        raise PluginError(f"{src_uri}: the picture rearr.explain({call}) fails: {e}") from e
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", drawn)
    # One raw HTML block: Markdown would end it at a blank line.
    body = "\n".join(line for line in svg.splitlines() if line.strip())
    if compare is not None:
        shown = [text(a) for a in node.args] + [f"{k.arg}={text(k.value)}" for k in node.keywords]
        call = f"{', '.join(shown)}).to_svg(compare={text(compare)}"
    caption = html.escape(f"rearr.explain({call})")
    caption = f"<figcaption><code>{caption}</code></figcaption>"
    return f'<figure class="rearr-picture" markdown="0">\n{body}\n{caption}\n</figure>'


def include(path: str, src_uri: str) -> str:
    """A repository file's text, its links pointed at the site; a file not (yet) in the checkout is
    said so on the page (tests/docs/test_docs_site.py checks the inclusion where the file exists)."""
    if INCLUDED_INTO.get(path) != src_uri:
        raise PluginError(f"{src_uri}: includes {path}; docs/_hooks.py's INCLUDED_INTO names its page")
    file = REPO / path
    if not file.exists():
        log.info("%s: %s is not in this checkout", src_uri, path)
        return f"`{path}` is not in this checkout."
    return rewrite_links(file.read_text(encoding="utf-8"), src_uri, source=path)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    src_uri = page.file.src_uri
    markdown = PICTURE.sub(lambda m: picture(m["call"].strip(), src_uri), markdown)
    parts = INCLUDE.split(markdown)  # text, path, text, path, ...: the included text is rewritten from its own path
    parts[0::2] = [rewrite_links(text, src_uri) for text in parts[0::2]]
    parts[1::2] = [include(path, src_uri) for path in parts[1::2]]
    return "".join(parts)


def fence_doctests(text: str) -> str:
    """A docstring with each doctest (its `>>>` lines and their output, up to a blank line) fenced."""
    out: list[str] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith(">>>") or (block and line.strip()):
            block.append(line)
            continue
        if block:
            out += ["```pycon", *block, "```"]
            block = []
        out.append(line)
    return "\n".join(out[:-1])


class DoctestBlocks(griffe.Extension):
    """The doctests of every docstring shown as Python console blocks."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
