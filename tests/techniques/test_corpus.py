"""Real-world einops patterns, run through einops and rearr on numpy and torch.

tests/fixtures/einops_corpus.jsonl holds one call site a line: op, pattern,
reduction, the literal length keywords of the call, and where it comes from
("owner/repo:path"). They were collected with the stdlib ``ast`` from the
public repositories named there (every rearrange / reduce / repeat call and
Rearrange / Reduce layer whose pattern is a string literal; distinct by op,
pattern, reduction and literal lengths).

Each pattern runs on a random shape that fits it (lengths 1..3, the call's own
literal lengths, 0..2 axes for an ellipsis) and on shapes that do not (one
dimension one longer, one dimension fewer, one more). Where einops gives a
result, rearr gives the same; where einops refuses, a RearrError is the only
acceptable failure of rearr.
"""

from __future__ import annotations

import math
import warnings

import einops
import numpy as np
import pytest
import torch
from _corpus import ENTRIES, draw

import rearr
from rearr import RearrError


def wrong_shapes(shape: tuple[int, ...], rng: np.random.Generator) -> list[tuple[int, ...]]:
    out = [shape + (2,)]
    if shape:
        k = int(rng.integers(len(shape)))
        out.append(shape[:k] + (shape[k] + 1,) + shape[k + 1:])
        out.append(shape[:-1])
    return out


def call(lib, entry: dict, x, kw: dict):
    args = (entry["reduction"],) if entry["op"] == "reduce" else ()
    return getattr(lib, entry["op"])(x, entry["pattern"], *args, **kw)


def outcome(lib, entry, x, kw):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call(lib, entry, x, kw)
    except Exception as e:  # noqa: BLE001 -- classified by the caller
        return e


def run_corpus(backend: str) -> dict[str, object]:
    """Every entry, valid and wrong-shape draws; counts and the disagreements."""
    counts = {"entries": len(ENTRIES), "valid draws": 0, "same result": 0, "both refuse": 0,
              "wrong-shape draws": 0}
    problems: list[str] = []
    for n, entry in enumerate(ENTRIES):
        rng = np.random.default_rng(n)
        shape, kw = draw(entry, rng)
        shapes = [("valid", shape)] + [("wrong", s) for s in wrong_shapes(shape, rng)]
        for kind, s in shapes:
            counts["valid draws" if kind == "valid" else "wrong-shape draws"] += 1
            a = np.asarray(np.arange(math.prod(s), dtype=np.float64).reshape(s) % 7 - 3)
            x = a if backend == "numpy" else torch.from_numpy(a)
            want, got = outcome(einops, entry, x, kw), outcome(rearr, entry, x, kw)
            where = f"{entry['from']}: {entry['op']} {entry['pattern']!r} {kw} shape {s}"
            if isinstance(got, Exception) and not isinstance(got, RearrError):
                problems.append(f"{where}: {type(got).__name__} {got}")
            elif isinstance(want, Exception):
                if isinstance(got, RearrError):
                    counts["both refuse"] += 1
                else:
                    problems.append(f"{where}: einops refuses ({want}), rearr returns {tuple(got.shape)}")
            elif isinstance(got, RearrError):
                problems.append(f"{where}: einops gives {tuple(want.shape)}, rearr refuses: {got.code} {got.message}")
            elif tuple(want.shape) != tuple(got.shape) or not np.allclose(np.asarray(want), np.asarray(got),
                                                                          rtol=1e-12, atol=0, equal_nan=True):
                problems.append(f"{where}: values differ")
            else:
                counts["same result"] += 1
            if kind == "valid" and isinstance(want, Exception):
                problems.append(f"{where}: the valid draw is refused by einops: {want}")
    counts["problems"] = problems
    return counts


def test_corpus_is_real_and_distinct():
    keys = {(e["op"], e["pattern"], e.get("reduction"), tuple(sorted(e.get("lengths", {}).items())))
            for e in ENTRIES}
    assert len(keys) == len(ENTRIES) >= 300
    repos = {e["from"].split(":")[0] for e in ENTRIES}
    assert len(repos) >= 10, repos
    assert len({e["pattern"] for e in ENTRIES}) >= 300


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_corpus_agrees_with_einops(backend):
    counts = run_corpus(backend)
    problems = counts.pop("problems")
    assert not problems, f"{len(problems)} disagreements, e.g.:\n" + "\n".join(problems[:15])  # type: ignore[arg-type]
    assert counts["same result"] >= counts["valid draws"]
    assert counts["both refuse"] > 0
