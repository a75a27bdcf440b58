"""explain's '# view: ...' / '# copy: ...' comments name what each step of the plan does, and nothing else.

A reshape's comment comes from the shapes before and after it (the dims of length other than 1,
matched up as numpy's and torch's view check matches them); the names it shows are those of the
axes of length other than 1, which the lengths place without doubt. Unit axes are where a guess
would go wrong: at (1, 2, 2, 3), 'b t f c -> b t (f c)' was commented "merges (b, t)".
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from strategies import transform_cases

from rearr import explain
from rearr.planning.plan import Reshape
from rearr.tools.explain import _show_axis

# (op, pattern, shape, reduction, lengths, the comment of each step)
COMMENTS = [
    ("rearrange", "b t f c -> b t (f c)", (1, 2, 2, 3), None, {}, ["view: merges (f, c)"]),
    ("rearrange", "b t f c -> b t (f c)", (2, 1, 2, 3), None, {}, ["view: merges (f, c)"]),
    ("rearrange", "b t f c -> b t (f c)", (2, 2, 2, 3), None, {}, ["view: merges (f, c)"]),
    ("rearrange", "b t f c -> b t (f c)", (2, 2, 1, 3), None, {}, ["view: drops unit axes"]),
    ("rearrange", "b t f c -> (b t) (f c)", (1, 2, 2, 3), None, {}, ["view: merges (f, c); drops unit axes"]),
    ("rearrange", "b t f c -> (b t) (f c)", (2, 2, 2, 3), None, {}, ["view: merges (b, t); merges (f, c)"]),
    ("rearrange", "(a b) c -> a b c", (6, 4), None, {"a": 2}, ["view: splits (a, b)"]),
    ("rearrange", "(a b) c -> a b c", (3, 4), None, {"a": 1}, ["view: adds unit axes"]),
    ("rearrange", "(a b) c -> a (b c)", (6, 4), None, {"a": 2}, ["view: merges (b, c); splits (a, b)"]),
    ("rearrange", "(a b c) d -> (a b) (c d)", (24, 5), None, {"a": 2, "b": 3},
     ["view: merges (c, d); splits (a, b, c)"]),
    ("rearrange", "a b c -> (a b) c", (2, 1, 3), None, {}, ["view: drops unit axes"]),
    ("rearrange", "b 1 c -> b c", (2, 1, 3), None, {}, ["view: drops unit axes"]),
    ("rearrange", "b c -> b 1 c", (2, 3), None, {}, ["view: adds unit axes"]),
    ("rearrange", "a b c -> c (a b)", (2, 3, 4), None, {},
     ["view: reorders the axes (strides only)", "view: merges (a, b)"]),
    ("rearrange", "a b c -> c (a b)", (1, 3, 4), None, {},
     ["view: reorders the axes (strides only)", "view: drops unit axes"]),
    ("rearrange", "c b h -> b (c h)", (2, 5, 32), None, {},
     ["view: reorders the axes (strides only)", "copy: axes c, h are not adjacent in memory"]),
    ("rearrange", "c b h -> b (c h)", (1, 5, 32), None, {},
     ["view: reorders the axes (strides only)", "view: drops unit axes"]),
    ("rearrange", "c b h -> b (c h)", (2, 1, 32), None, {},
     ["view: reorders the axes (strides only)", "view: merges (c, h)"]),
    ("rearrange", "(a b) (c d) -> (a c) (b d)", (4, 6), None, {"a": 2, "c": 3},
     ["view: splits (a, b); splits (c, d)", "view: reorders the axes (strides only)",
      "copy: axes a, c are not adjacent in memory"]),
    ("rearrange", "b ... -> b (...)", (2, 1, 3, 1), None, {}, ["view: drops unit axes"]),
    ("rearrange", "b ... -> b (...)", (2, 4, 3, 1), None, {}, ["view: merges (...[0], ...[1]); drops unit axes"]),
    ("rearrange", "b ... -> b (...)", (2, 4, 3), None, {}, ["view: merges (...[0], ...[1])"]),
    ("reduce", "a b c -> a", (1, 2, 1), "sum", {}, ["copy: sum over b, c"]),
    ("reduce", "a b c -> b", (1, 2, 1), "sum", {}, ["copy: sum over a, c"]),
    ("reduce", "a b c -> a c", (2, 1, 3), "max", {}, ["copy: max over b"]),
    ("reduce", "a b c d -> (a c)", (2, 1, 3, 1), "max", {}, ["copy: max over b, d", "view: merges (a, c)"]),
    ("reduce", "b (h 2) (w 2) -> b h w", (1, 4, 6), "mean", {},
     ["view: splits (h, 2); splits (w, 2)", "copy: mean over 2, 2"]),
    ("repeat", "a b -> a k b", (1, 3), None, {"k": 2}, ["view: adds unit axes", "view: repeats k with stride 0"]),
    ("repeat", "a b -> (a k) b", (1, 3), None, {"k": 2},
     ["view: adds unit axes", "view: repeats k with stride 0", "view: drops unit axes"]),
    ("repeat", "a b -> (a k) b", (2, 3), None, {"k": 2},
     ["view: adds unit axes", "view: repeats k with stride 0",
      "copy: axis k is repeated (stride 0) and must be written out"]),
]


def _comments(e) -> list[str]:
    return [line.split("  # ", 1)[1] for line in e.code if "  # " in line]


@pytest.mark.parametrize("op, pattern, shape, reduction, lengths, comments", COMMENTS,
                         ids=[f"{c[1]}-{c[2]}" for c in COMMENTS])
def test_each_comment_says_what_its_step_does(op, pattern, shape, reduction, lengths, comments):
    e = explain(pattern, shape, op=op, reduction=reduction, **lengths)
    assert _comments(e) == comments, "\n".join(e.code)


def _claims(comment: str) -> list[tuple[str, list[str]]]:
    """('merges' | 'splits', the axes named) for each claim of a reshape's comment."""
    return [(verb, [a.strip() for a in axes.split(",")])
            for verb, axes in re.findall(r"(merges|splits) \(([^)]*)\)", comment)]


def _expected_claims(e) -> list[tuple[str, list[str]]]:
    """What a plan of one reshape does, from the pattern's own dims (not from the states explain
    reconstructs): an output dim whose axes of length > 1 come from several input dims merges them; an
    input dim whose axes of length > 1 go to several output dims is split."""
    length = {n: v for n, v, _ in e.plan.lengths}
    big = lambda dim: [a for a in dim if length[a] != 1]  # noqa: E731
    home = {a: k for k, dim in enumerate(e.plan.in_dims) for a in big(dim)}
    out_home = {a: k for k, dim in enumerate(e.plan.out_dims) for a in big(dim)}
    return [("merges", big(dim)) for dim in e.plan.out_dims if len({home[a] for a in big(dim)}) > 1] + \
        [("splits", big(dim)) for dim in e.plan.in_dims if len({out_home[a] for a in big(dim)}) > 1]


@given(transform_cases(ops=("rearrange",)))
def test_a_single_reshape_claims_what_the_pattern_merges_and_splits(case):
    """On random patterns (unit axes, '1', '()', ellipses, groups): a plan that is one reshape
    names exactly the merges and splits that the pattern's dims make; every axis it names has length > 1."""
    shape = tuple(case.x.shape) if not case.as_list else (len(case.x), *case.x.shape[1:])
    e = explain(case.pattern, shape, **case.kwargs)
    length = {name: n for name, n, _ in e.axes}
    for comment in _comments(e):
        for _, axes in _claims(comment):
            assert all(length[a] != 1 for a in axes), comment
    if len(e.plan.steps) != 1 or not isinstance(e.plan.steps[0], Reshape) or not math.prod(shape):
        return
    (comment,) = _comments(e)
    want = sorted((verb, [_show_axis(a) for a in axes]) for verb, axes in _expected_claims(e))
    assert sorted(_claims(comment)) == want, (case.pattern, shape, comment)
