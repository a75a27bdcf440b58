"""One length solver: a length that cannot be inferred (RA301), does not divide (RA302) or disagrees (RA303)
reads the same in rearrange, reduce, repeat, scatter, einsum and explain, with the same caret, and its
fix works when applied literally."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import rearr
from rearr.errors import RearrError
from rearr.planning.lengths import Lengths, _divisor
from rearr.rules.recipe import Dim
from rearr.tools import lint
from rearr.tools.explain import explain

IDX = np.array([0, 1, 0])


def _ops(src: str) -> dict:
    """Each operation on an input written ``src`` (its axes b, h, w): the call, given a tensor and lengths."""
    return {
        "rearrange": lambda x, kw: rearr.rearrange(x, f"{src} -> b h w", **kw),
        "reduce": lambda x, kw: rearr.reduce(x, f"{src} -> b h", "sum", **kw),
        "repeat": lambda x, kw: rearr.repeat(x, f"{src} -> b h w r", r=2, **kw),
        "scatter": lambda x, kw: rearr.scatter(x, f"{src} -> m[idx: b] h w", "sum", idx=IDX, m=2, **kw),
        "einsum": lambda x, kw: rearr.einsum(x, f"{src} -> b h w", **kw),
        "explain": lambda x, kw: explain(f"{src} -> b h w", tuple(x.shape), **kw),
    }


OPS = list(_ops(""))

FAULTS = [  # (input side, shape, lengths, code, message, the text under the caret)
    ("b (h w)", (3, 7), {"h": 2}, "RA302",
     "input dimension 1 has length 7, which 'h' = 2 does not divide", "("),
    ("b (h w)", (3, 6), {"h": 4}, "RA302",
     "input dimension 1 has length 6, which 'h' = 4 does not divide", "("),
    ("b (h w)", (3, 6), {"h": 2, "w": 2}, "RA303",
     "input dimension 1 has length 6, but 'h'=2 * 'w'=2 makes 4", "("),
    ("b (h w)", (3, 6), {"h": 2, "b": 4}, "RA303",
     "axis 'b' has length 4 (keyword) but 3 (input dimension 0)", "b"),
    ("b (h w)", (3, 6), {}, "RA301", "cannot infer both 'h' and 'w' from one input dimension", "("),
]


def _fault(op: str, src: str, shape: tuple, lengths: dict, backend: str = "numpy") -> RearrError:
    x = np.arange(float(np.prod(shape))).reshape(shape)
    with pytest.raises(RearrError) as info:
        _ops(src)[op](torch.from_numpy(x) if backend == "torch" else x, dict(lengths))
    return info.value


def _apply(hint: str, lengths: dict) -> dict:
    """The hint's fix, taken literally: 'pass h=3', 'e.g. h=3', or 'drop h='."""
    if m := re.search(r"(?:pass|e\.g\.) (\w+)=(\d+)", hint):
        return {**lengths, m[1]: int(m[2])}
    m = re.search(r"drop (\w+)=", hint)
    assert m, hint
    return {k: v for k, v in lengths.items() if k != m[1]}


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("src, shape, lengths, code, message, under_caret", FAULTS)
def test_one_fault_reads_the_same_everywhere(backend, src, shape, lengths, code, message, under_caret):
    errors = {op: _fault(op, src, shape, lengths, backend) for op in OPS}
    for op, e in errors.items():
        assert (e.code, e.message) == (code, message), op
        assert e.pattern[e.col:].startswith(under_caret), (op, e.col)
    assert len({e.hint for e in errors.values()}) == 1, {op: e.hint for op, e in errors.items()}


@pytest.mark.parametrize("src, shape, lengths, code, message, under_caret",
                         [f for f in FAULTS if f[3] != "RA301"])
def test_the_fix_works_when_applied(src, shape, lengths, code, message, under_caret):
    for op in OPS:
        hint = _fault(op, src, shape, lengths).hint
        _ops(src)[op](np.zeros(shape), _apply(hint, lengths))  # succeeds
        if " or drop " in hint:  # the other fix offered works too
            _ops(src)[op](np.zeros(shape), _apply(hint.split(" or ")[1], lengths))


def test_two_unknown_axes_name_the_keyword_to_pass():
    """The pattern alone refuses a group of two unknown axes (rearr check too): the hint names the keyword,
    whose value the pattern cannot know."""
    for op in OPS:
        e = _fault(op, "b (h w)", (3, 6), {})
        assert e.hint == "pass the length of all but one axis of the group, e.g. h=..."
        _ops("b (h w)")[op](np.zeros((3, 6)), {"h": 2})  # succeeds
    (found,) = lint.check_source("import rearr\nrearr.einsum(x, 'b (h w) -> b h w')\n")
    assert (found.code, found.message) == ("RA301", "cannot infer both 'h' and 'w' from one input dimension")


def test_several_operands_say_which_one():
    x, y = np.zeros((3, 7)), np.zeros((7, 2))
    with pytest.raises(RearrError) as info:
        rearr.einsum(x, y, "b (h w), (h w) c -> b c", h=2)
    e = info.value
    assert (e.code, e.message, e.col) == ("RA302", "operand 0's dimension 1 has length 7, which 'h' = 2 does not "
                                                   "divide", 2)
    assert rearr.einsum(x, y, "b (h w), (h w) c -> b c", **_apply(e.hint, {"h": 2})).shape == (3, 2)
    with pytest.raises(RearrError) as info:
        rearr.einsum(np.zeros((2, 3)), np.zeros((4, 4)), "rows inner, inner cols -> rows cols")
    e = info.value
    assert (e.code, e.col) == ("RA303", 12)
    assert e.message == "axis 'inner' has length 3 (operand 0's dimension 1) but 4 (operand 1's dimension 0)"
    assert e.hint == "pass tensors that give 'inner' one length"


def test_a_group_solved_from_other_operands():
    """einsum's operands give lengths to each other: single axes first, then groups, until all are known."""
    out = rearr.einsum(np.ones((6, 2)), np.ones((3,)), np.ones((2,)), "(h w) c, w, c -> h")
    np.testing.assert_array_equal(out, np.full(2, 6.0))
    with pytest.raises(RearrError) as info:
        rearr.einsum(np.ones(6), np.ones(6), "(h w), (h w) -> h w")
    assert info.value.code == "RA301"
    assert info.value.message == "cannot infer both 'h' and 'w' from operand 0's dimension 0 of length 6"
    assert rearr.einsum(np.ones(6), np.ones(6), "(h w), (h w) -> h w", **_apply(info.value.hint, {})).shape == (2, 3)


def test_a_unit_axis_of_another_length():
    for op in ("rearrange", "einsum"):
        e = _fault(op, "b () (h w)", (3, 2, 6), {"h": 2})
        assert (e.code, e.col) == ("RA303", 2)
        assert e.message == "input dimension 1 has length 2, but the pattern has a unit axis there"


def test_the_sources_explain_shows():
    lens = Lengths("b (h w)")
    lens.set("h", 2, "keyword", 3)
    lens.solve([(Dim(("b",), 0), 3, "input dimension 0"), (Dim(("h", "w"), 2, True), 6, "input dimension 1")])
    assert lens.value == {"h": 2, "b": 3, "w": 3}
    assert lens.source == {"h": "keyword", "b": "input dimension 0", "w": "inferred: input dimension 1 / 2"}


@pytest.mark.parametrize("n, near, want", [(7, 2, 1), (6, 4, 3), (12, 5, 4), (0, 0, 1), (0, 3, 3), (1, 9, 1)])
def test_the_length_a_fix_offers_divides(n, near, want):
    assert _divisor(n, near) == want
