"""The fenced blocks of README.md and docs/*.md, as the docs' tests read them (docs/test_docs_run.py runs
them; backends/test_dtensor.py runs the blocks marked `<!-- ranks: N -->` on gloo processes,
backends/test_jax_sharded.py those marked `<!-- devices: N -->` with N forced jax devices). The
convention is docs/test_docs_run.py's docstring."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, its text, its first line (1-based) and its marker."""

    page: Path
    lang: str
    body: str
    line: int
    marker: str | None = None  # the HTML comment just above the fence, without <!-- -->
    output: Block | None = None  # the ```text or ```pytb block right after a script

    @property
    def kind(self) -> str:
        if self.marker is not None:
            name = self.marker.split(":")[0].strip()
            return "rearr check" if name.startswith("rearr check") else name  # `rearr check --einops` too
        return "doctest" if self.body.lstrip().startswith(">>>") else "script"

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


_FENCE = re.compile(r"^```(\w*)[ \t]*$")
_MARKER = re.compile(r"^<!--(.*)-->$")


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order; a script's output block is attached to it, not listed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        above = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(above)
        block = Block(page, fence[1], "\n".join(lines[i + 1:end]) + "\n", i + 2,
                      marker[1].strip() if marker else None)
        previous = found[-1] if found else None
        blank_between = previous is not None and all(
            not line.strip() for line in lines[previous.line + previous.body.count("\n"):i])
        if (block.lang in ("text", "pytb") and previous is not None and previous.lang == "python"
                and previous.kind in ("script", "ranks", "devices") and previous.output is None and blank_between
                and marker is None):
            found[-1] = dataclasses.replace(previous, output=block)
        else:
            found.append(block)
        i = end + 1
    return found


def python_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang == "python"]


ALL = [b for page in PAGES for b in python_blocks(page)]
