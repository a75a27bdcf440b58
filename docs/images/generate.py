"""Write the pictures that docs/explain.md embeds: ``python docs/images/generate.py``.

Each picture is the ``to_svg()`` of the call the docs show next to it;
tests/tools/test_explain_svg.py checks that the committed files are what this writes now.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the checkout's rearr, installed or not

import numpy as np  # noqa: E402

import rearr  # noqa: E402


def pictures() -> Iterator[tuple[str, str]]:
    """(file name, SVG text) of each picture."""
    yield "explain_rearrange.svg", rearr.explain("c b h -> b (c h)", (2, 3, 4)).to_svg()
    idx = np.array([[0, 2, 2, 5], [1, 1, 1, 3]])
    yield "explain_scatter.svg", rearr.explain("b k -> b n[idx]", (2, 4), op="scatter", reduction="sum",
                                               n=6, idx=idx).to_svg()


def main() -> None:
    for name, text in pictures():
        (HERE / name).write_text(text + "\n", encoding="utf-8")
        print(HERE / name)


if __name__ == "__main__":
    main()
