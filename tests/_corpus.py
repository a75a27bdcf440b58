"""The einops corpus (tests/fixtures/einops_corpus.jsonl, described in techniques/test_corpus.py) and
a shape that fits each pattern: shared by the corpus suites."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parent / "fixtures" / "einops_corpus.jsonl"
ENTRIES = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
_TOKEN = re.compile(r"\.\.\.|\(|\)|[^\W\d]\w*|\d+|\S")


def side(text: str) -> list[list[str]]:
    """A pattern side as dims, each a list of tokens ('...', names, integers); '()' is []."""
    dims: list[list[str]] = []
    group: list[str] | None = None
    for tok in _TOKEN.findall(text):
        if tok == "(":
            group = []
        elif tok == ")":
            dims.append(group or [])
            group = None
        elif group is not None:
            group.append(tok)
        else:
            dims.append([tok])
    return dims


def draw(entry: dict, rng: np.random.Generator) -> tuple[tuple[int, ...], dict[str, int]]:
    """An input shape that fits the pattern, and the length keywords that einops needs for it."""
    left, right = entry["pattern"].split("->")
    ins, outs = side(left), side(right)
    lengths = dict(entry.get("lengths", {}))
    names = {t for d in ins + outs for t in d if t[0].isalpha() or t[0] == "_"}
    for name in sorted(names):
        lengths.setdefault(name, int(rng.integers(1, 4)))
    ellipsis = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3))))

    def size(tok: str) -> int:
        return int(tok) if tok.isdigit() else lengths[tok]

    shape: list[int] = []
    for dim in ins:
        if dim == ["..."]:
            shape.extend(ellipsis)
        else:
            shape.append(math.prod(size(t) for t in dim))
    given = set(entry.get("lengths", {}))
    inputs = {t for d in ins for t in d}
    for dim in ins:
        if len([t for t in dim if t in names]) > 1:
            given |= {t for t in dim if t in names}
    given |= {t for d in outs for t in d if t in names and t not in inputs}
    return tuple(shape), {n: lengths[n] for n in sorted(given)}
