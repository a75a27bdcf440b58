"""Reading Markdown pages in tests: the same reading everywhere."""

from __future__ import annotations


def python_blocks(text: str) -> str:
    """Only the ```python blocks of a Markdown file, other lines blanked (so line numbers stay right)."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```python"
            out.append("")
        else:
            out.append(line if inside else "")
    return "\n".join(out) + "\n"
