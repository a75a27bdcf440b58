"""Hints that name what a misspelt or misplaced name most likely meant, and work when applied literally:
each case fails in the library, its hint is applied as written (the new pattern, keyword or reduction),
and the call then succeeds; `rearr check` gives the same finding on the source and none on the fixed one."""

from __future__ import annotations

import numpy as np
import pytest
from _hints import INDEX, apply
from _hints import LIBRARY_CASES as CASES

import rearr
from rearr.errors import RearrError, nearest
from rearr.tools import lint
from rearr.tools.explain import explain


def call(op: str, pattern: str, reduction: str | None, lengths: dict, shape: tuple, dtype=np.float64):
    x = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    args = (x, pattern) if reduction is None else (x, pattern, reduction)
    return getattr(rearr, op)(*args, **lengths)


def source(op: str, pattern: str, reduction: str | None, lengths: dict, tensors: int = 0) -> str:
    """The call as source; an einsum's ``tensors`` come before its pattern."""
    parts = [f"t{i}" for i in range(tensors)] or ["x"]
    parts += [repr(pattern)] + ([] if reduction is None else [repr(reduction)])
    parts += [f"{k}={'idx' if isinstance(v, np.ndarray) else v!r}" for k, v in lengths.items()]
    return f"import rearr\nrearr.{op}({', '.join(parts)})\n"




def _run(op, pattern, reduction, lengths, shape):
    if op == "einsum":
        return rearr.einsum(*(np.ones(s) for s in shape), pattern, **lengths)
    return call(op, pattern, reduction, lengths, shape)


@pytest.mark.parametrize("op, pattern, reduction, lengths, shape, says", CASES)
def test_the_hint_works_when_applied(op, pattern, reduction, lengths, shape, says):
    with pytest.raises(RearrError) as info:
        _run(op, pattern, reduction, lengths, shape)
    e = info.value
    assert says in e.hint, e.hint
    fixed = apply(e.hint, pattern, reduction, lengths)
    _run(op, *fixed, shape)  # succeeds
    # rearr check says the same, and nothing about the fixed call.
    tensors = len(shape) if op == "einsum" else 0
    (found,) = lint.check_source(source(op, pattern, reduction, lengths, tensors))
    assert (found.code, found.message, found.hint) == (e.code, e.message, e.hint)
    assert lint.check_source(source(op, *fixed, tensors)) == []


def test_a_renamed_axis_names_both_sides():
    with pytest.raises(RearrError) as info:
        call("rearrange", "b c h w -> b h w chan", None, {}, (2, 3, 4, 5))
    assert info.value.message == "axis 'c' appears only on the input side and 'chan' only on the output side of " \
                                 "rearrange"


def test_letter_style_einsum_says_that_names_are_words():
    with pytest.raises(RearrError) as info:
        rearr.einsum(np.ones((2, 3)), np.ones((3, 4)), "ij,jk->ik")
    assert info.value.code == "RA200" and "names are words separated by spaces" in info.value.message


def test_integer_mean_after_the_reduction_fix():
    with pytest.raises(RearrError) as info:
        call("reduce", "b c -> b", "avg", {}, (2, 3), dtype=np.int64)
    _, reduction, _ = apply(info.value.hint, "b c -> b", "avg", {})
    x = np.arange(6).reshape(2, 3)
    with pytest.raises(RearrError) as info:
        rearr.reduce(x, "b c -> b", reduction)
    assert "x.astype(np.float32)" in info.value.hint
    out = rearr.reduce(x.astype(np.float32), "b c -> b", reduction)  # the next hint, applied
    np.testing.assert_allclose(out, [1, 4])


@pytest.mark.parametrize("op, args", [("rearrange", ()), ("reduce", ("sum",)), ("repeat", ()),
                                      ("scatter", ("sum",))])
def test_swapped_tensor_and_pattern(op, args):
    x = np.ones((3, 2))
    pattern = {"rearrange": "b c -> c b", "reduce": "b c -> b", "repeat": "b c -> b c r",
               "scatter": "n c -> m[idx: n] c"}[op]
    lengths = {"r": 2} if op == "repeat" else {"idx": INDEX, "m": 2} if op == "scatter" else {}
    keywords = "".join(f", {k}={'idx' if k == 'idx' else v}" for k, v in lengths.items())
    with pytest.raises(RearrError) as info:
        getattr(rearr, op)(pattern, x, *args, **lengths)
    e = info.value
    assert "the tensor comes first" in e.message and f"swap them: {op}(x, {pattern!r}, ...)" == e.hint
    getattr(rearr, op)(x, pattern, *args, **lengths)  # swapped back: it runs
    literal = "".join(f", {a!r}" for a in args) + keywords
    found = lint.check_source(f"import rearr\nrearr.{op}({pattern!r}, x{literal})\n")
    assert [(p.code, p.message, p.hint) for p in found] == [(e.code, e.message, e.hint)]
    assert lint.check_source(f"import rearr\nrearr.{op}(x, {pattern!r}{literal})\n") == []


def test_explain_names_the_backend_and_the_operation_meant():
    with pytest.raises(RearrError) as info:
        explain("b c -> c b", (2, 3), backend="nump")
    assert info.value.hint.startswith("use 'numpy'")
    explain("b c -> c b", (2, 3), backend="numpy")
    with pytest.raises(RearrError) as info:
        explain("b c -> c b", (2, 3), op="rearange")
    assert info.value.hint == "use op='rearrange'"
    explain("b c -> c b", (2, 3), op="rearrange")


@pytest.mark.parametrize("name, choices, meant", [
    ("hh", ["b", "h", "w"], "h"),
    ("d", ["b", "c"], None),  # one letter for another: nothing alike
    ("chan", ["c"], None),
    ("rearagne", ["rearrange", "reduce"], "rearrange"),  # a swap counts one
    ("avg", ["min", "mean"], "mean"),  # an alias
    ("MEAN", ["mean"], "mean"),
    ("xyz", ["abc"], None),
])
def test_nearest(name, choices, meant):
    assert nearest(name, choices) == meant


def test_no_guess_keeps_the_general_hint():
    with pytest.raises(RearrError) as info:
        call("rearrange", "b c -> b c", None, {"zzz": 2}, (2, 3))
    assert info.value.hint == "remove zzz=, or check its spelling (axes: b, c)"
    with pytest.raises(RearrError) as info:
        call("reduce", "b c -> b", "median", {}, (2, 3))
    assert info.value.hint.startswith("use one of min, max")
