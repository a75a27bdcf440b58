"""Every mistake is a RearrError with the pattern, a caret at the fault, the shape and a fix."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _backends import backends, to_backend

import rearr
from rearr.errors import CODES

# (call, pattern, shape, kwargs, code, the text under the caret)
CASES = [
    ("rearrange", "a b c", (2, 3, 4), {}, "RA101", None),
    ("rearrange", "(a b -> a b", (2, 3), {}, "RA102", "("),
    ("rearrange", "a b) -> a b", (2, 3), {}, "RA102", ")"),
    ("rearrange", "(a (b c)) -> a b c", (2, 3), {}, "RA102", "("),
    ("rearrange", "a $ -> a", (2, 3), {}, "RA103", "$"),
    ("rearrange", "a b -> a", (2, 3), {}, "RA200", "b"),
    ("rearrange", "a -> a b", (2,), {}, "RA200", "b"),
    ("rearrange", "a a -> a", (2, 3), {}, "RA201", "a"),
    ("rearrange", "(a b c) -> a b c", (24,), {}, "RA301", "("),
    ("rearrange", "(a b) -> a b", (7,), {"a": 2}, "RA302", "("),
    ("rearrange", "a b -> b a", (2, 3), {"a": 5}, "RA303", "a"),
    ("rearrange", "a b -> b a", (2, 3, 4), {}, "RA304", "a"),
    ("rearrange", "a b -> b a", (2, 3), {"c": 4}, "RA300", None),
    ("reduce", "a b -> a", (2, 3), {}, "RA400", None),
    ("rearrange", "... a ... -> a", (2, 3), {}, "RA202", "..."),
    ("rearrange", "(... a) -> a ...", (2, 3), {}, "RA202", "..."),
    ("rearrange", "a -> a ...", (2,), {}, "RA202", "..."),
    ("reduce", "a n[i] -> a", (2, 3), {}, "RA204", "["),
    ("repeat", "a n[i] -> a n", (2, 3), {}, "RA204", "["),
    ("rearrange", "a -> a n[i]", (2,), {}, "RA204", "["),
    ("rearrange", "(a 2) -> a", (4,), {}, "RA203", "2"),
    ("repeat", "a -> a c", (2,), {}, "RA301", "c"),
    ("rearrange", "a b -> b a", (2, 3), {"a": -1}, "RA305", "a"),
    ("rearrange", "a_ -> a_", (2,), {}, "RA104", "a_"),
    ("rearrange", "a, b -> a b", (2,), {}, "RA206", "b"),
]


def _call(op, x, pattern, kwargs):
    if op == "reduce":
        return rearr.reduce(x, pattern, kwargs.pop("reduction", "average"), **kwargs)
    return getattr(rearr, op)(x, pattern, **kwargs)


@backends
@pytest.mark.parametrize("op, pattern, shape, kwargs, code, under_caret", CASES)
def test_mistakes_are_rearr_errors_with_a_caret(backend, op, pattern, shape, kwargs, code, under_caret):
    x = to_backend(np.zeros(shape), backend)
    with pytest.raises(rearr.RearrError) as info:
        _call(op, x, pattern, dict(kwargs))
    err = info.value
    assert isinstance(err, ValueError)
    assert err.code == code, str(err)
    assert err.pattern == pattern
    assert err.hint, "every error says how to fix it"
    text = str(err)
    assert pattern in text and "fix:" in text
    if under_caret is not None:
        assert err.col is not None and pattern[err.col:].startswith(under_caret), (err.col, text)
        # the caret line points at the same column as the pattern line
        lines = text.splitlines()
        pattern_line = next(i for i, line in enumerate(lines) if line.endswith(pattern))
        offset = lines[pattern_line].index(pattern)
        assert lines[pattern_line + 1].index("^") == offset + err.col
    assert f"input shape: {tuple(shape)}" in text
    assert code in CODES


def test_no_lark_name_ever_shows():
    for pattern in ["a -> b [", "a [i:", "-> ->", "a b ] -> a", "a : b", "[i] a -> a", "a -> (b", "*", "a ,, b"]:
        with pytest.raises(rearr.RearrError) as info:
            rearr.rearrange(np.zeros(3), pattern)
        assert "__ANON" not in str(info.value) and "Token" not in str(info.value)
        assert info.value.col is None or 0 <= info.value.col <= len(pattern)


@pytest.mark.parametrize("op", ["rearrange", "repeat"])
def test_an_integer_longer_than_python_converts_is_a_rearr_error(op):
    """Python refuses int() of more than 4,300 digits (a ValueError that escaped the parser before)."""
    pattern = "a -> a " + "9" * 5000
    with pytest.raises(rearr.RearrError) as info:
        getattr(rearr, op)(np.zeros(3), pattern)
    assert info.value.code == "RA100" and info.value.col == 7 and info.value.pattern == pattern
    assert "5000 digits" in info.value.message and "length keyword" in info.value.hint
    assert rearr.repeat(np.zeros(3), "a -> a b", b=2).shape == (3, 2)  # the fix: a named axis and its length


@pytest.mark.parametrize("bad", [None, "abc", 3, {"a": 1}, [1, 2], [], object()])
def test_unsupported_inputs_are_rearr_errors(bad):
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(bad, "a -> a")
    assert info.value.code == "RA500"


def test_pattern_must_be_a_string():
    with pytest.raises(rearr.RearrError, match="must be a string"):
        rearr.rearrange(np.zeros(3), 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [2.5, "3", None, True, torch.tensor(3.0)])  # torch.tensor(3) is a length
def test_bad_length_values(value):
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(np.zeros(6), "(a b) -> a b", a=value)
    assert info.value.code == "RA305"


def test_unknown_reduction_lists_the_choices():
    with pytest.raises(rearr.RearrError, match="min, max, sum, mean, prod, any, all"):
        rearr.reduce(np.zeros((2, 3)), "a b -> a", "median")
    with pytest.raises(rearr.RearrError):
        rearr.reduce(np.zeros((2, 3)), "a b -> a", 3)  # type: ignore[arg-type]


@backends
def test_max_over_an_empty_axis_is_a_rearr_error(backend):
    with pytest.raises(rearr.RearrError, match="empty"):
        rearr.reduce(to_backend(np.zeros((2, 0)), backend), "a b -> a", "max")


def test_mixed_list_is_an_error():
    with pytest.raises(rearr.RearrError):
        rearr.rearrange([np.zeros(3), torch.zeros(3)], "n a -> a n")
    with pytest.raises(rearr.RearrError):
        rearr.rearrange([np.zeros(3), np.zeros(4)], "n a -> a n")


def test_input_is_not_modified_by_errors():
    x = np.arange(6.0)
    before = x.copy()
    with pytest.raises(rearr.RearrError):
        rearr.rearrange(x, "(a b) -> a b", a=4)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_errors_that_name_an_index_put_the_caret_under_it(lib):
    """An index's dtype, a duplicate under 'set', a masked index: the caret under the index's name in
    its bracket, on the first call and on a call seen before (which runs from the direct table)."""
    arr = np.asarray if lib == "numpy" else torch.as_tensor
    good, dup = arr(np.array([0, 1, 2])), arr(np.array([0, 0, 1]))
    calls = {
        "dtype": (lambda: rearr.rearrange(arr(np.zeros((2, 3))), "b n[idx] -> b", idx=arr(np.array([0.5, 1.0]))),
                  "b n[idx] -> b".index("idx")),
        "set": (lambda idx=dup: rearr.scatter(arr(np.ones(3)), "k -> n[idx]", "set", idx=idx, n=4),
                "k -> n[idx]".index("idx")),
        "masked": (lambda: rearr.rearrange(arr(np.zeros((2, 3))), "b a[j] n[idx: b] -> b",
                                           idx=np.ma.array([1, 2], mask=[0, 1]), j=arr(np.array([0, 1]))),
                   "b a[j] n[idx: b] -> b".index("idx")),
    }
    calls["set"][0](good)  # seen before: the next call of that shape runs from the direct table
    for name, (call, col) in calls.items():
        for _ in range(2):
            with pytest.raises(rearr.RearrError) as info:
                call()
            assert info.value.col == col, (name, str(info.value))
            assert "index 'idx'" in info.value.message and "^" in str(info.value)


# Two lengths of one index axis that the tensor does not give: the fix gives both one length (it used
# to say to slice x along the axis, which x does not have).
LENGTH_CONFLICTS = [  # (op, pattern, x shape, reduction, keywords; an index is (shape, positions))
    ("scatter", "v[src: e] c -> v[dst: e] c", (5, 3), "sum", {"src": ((7,), 5), "dst": ((5,), 5)}),
    ("scatter", "v[src: e] c -> v[dst: e] c", (5, 3), "mean", {"src": ((4,), 5), "dst": ((6,), 5)}),
    ("scatter", "v[src: e] c -> v[dst: e] c", (5, 3), "sum", {"src": ((5,), 5), "dst": ((5,), 5), "e": 6}),
    ("scatter", "v[src: e] c -> v[dst: e] c", (5, 3), "max", {"src": ((5,), 5), "dst": ((5,), 5), "e": 3}),
    ("rearrange", "b h[y: p] w[x: p] c -> b p c", (2, 4, 5, 3), None, {"y": ((6,), 4), "x": ((5,), 5)}),
    ("rearrange", "b h[y: b p] w[x: b p] c -> b p c", (2, 4, 5, 3), None, {"y": ((2, 3), 4), "x": ((2, 6), 5)}),
    ("rearrange", "b n[i: b k] -> b k", (2, 5), None, {"i": ((2, 3), 5), "k": 4}),
]


@pytest.mark.parametrize("op, pattern, shape, reduction, keywords", LENGTH_CONFLICTS)
def test_an_index_length_conflict_is_fixed_by_its_own_hint(op, pattern, shape, reduction, keywords):
    import re

    import reference

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    kwargs = {k: rng.integers(0, v[1], v[0]) if isinstance(v, tuple) else v for k, v in keywords.items()}
    call = (lambda kw: rearr.scatter(x, pattern, reduction, **kw)) if op == "scatter" else \
        (lambda kw: rearr.rearrange(x, pattern, **kw))
    with pytest.raises(rearr.RearrError) as info:
        call(kwargs)
    err = info.value
    assert err.code == "RA303" and "the tensor has" not in err.message, str(err)
    assert "slice the tensor" not in err.hint, str(err)
    fixed = dict(kwargs)
    if cut := re.fullmatch(r"give both indices one length along '\w+'; to use the first \d+ of each, "
                           r"pass (\w+)=\1(\[[^\]]*\])", err.hint):
        fixed[cut[1]] = eval(f"fixed[cut[1]]{cut[2]}")  # noqa: S307 - the hint's own slice
    else:
        new = re.fullmatch(r"pass (\w+)=(\d+) instead, or drop \1= to take the index's length", err.hint)
        assert new, err.hint
        fixed[new[1]] = int(new[2])
        dropped = {k: v for k, v in kwargs.items() if k != new[1]}
        expected = reference.reference(op, x, pattern, *([reduction] if reduction else []), **dropped)
        reference.assert_matches(call(dropped), expected)  # the other fix: drop the keyword
    expected = reference.reference(op, x, pattern, *([reduction] if reduction else []), **fixed)
    reference.assert_matches(call(fixed), expected)


# --- a length keyword's message says what the value is, and its fix works when applied ---------------


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("pattern, shape, extra", [
    ("b (h w) -> b h w", (2, 12), {}),  # a plain call
    ("b n[idx: k] (h w) -> b k h w", (2, 3, 12), {"idx": [0, 2]}),  # an indexed one: the careful path
    ("k (h w) -> n[idx: k] h w", (2, 12), {"idx": [0, 2], "n": 3}),  # a scatter
])
@pytest.mark.parametrize("value, said, fixed", [
    (np.array([3]), "is an array of shape (1,), not one integer", 3),
    (np.array([[3]]), "is an array of shape (1, 1), not one integer", 3),
    (2.0, "is a float, not an integer", 2),
    (np.float32(3.0), "is a float32, not an integer", 3),
    (True, "is a bool, not a length", 1),
    (np.True_, "is a bool, not a length", 1),
    (-3, "is negative", None),
    (2**70, "2**70 is larger than int64 counts (2**63 - 1)", None),
    (3**50, "7.179e+23 is larger than int64 counts", None),
])
def test_a_bad_length_says_what_it_is_and_the_fix_works(lib, pattern, shape, extra, value, said, fixed):
    x = to_backend(np.arange(float(np.prod(shape))).reshape(shape), lib)
    kw = {k: to_backend(np.array(v), lib) if isinstance(v, list) else v for k, v in extra.items()}
    op = rearr.scatter if "-> n[" in pattern else rearr.rearrange
    args = (x, pattern, "sum") if op is rearr.scatter else (x, pattern)
    if lib == "torch" and isinstance(value, np.ndarray):
        value = torch.as_tensor(value)
    with pytest.raises(rearr.RearrError) as info:
        op(*args, h=value, **kw)
    assert info.value.code == "RA305"
    assert said in info.value.message and str(3**50) not in str(info.value)
    if fixed is not None:
        assert info.value.hint.endswith(f"h={fixed}")
        op(*args, h=fixed, **kw)  # the fix, applied


_NO_LENGTHS = [  # values that are no length: each one's fix, applied as written, must work
    np.array([3]), [3], (3,), [[3]], np.array([3], ">i8"), np.array([3], "<u2"), np.array([3], np.uint8),
    np.array(3.0), np.array([3.0]), "3", 4.0, False, True, 3.5, float("nan"), float("inf"), None, 2**70, -3,
    -2.0, 1e19, 1e30, float(2**63), np.float64(1e30), np.array([3, 2]), np.array([4]), [], [3, 2],
]


def _fixed(hint: str, name: str = "h") -> int:
    """The length a fix offers, taken literally: the last 'h=N' of the hint."""
    import re

    (*_, last) = re.finditer(rf"\b{name}=(\d+)\b", hint)
    return int(last[1])


@pytest.mark.parametrize("value", _NO_LENGTHS, ids=repr)
@pytest.mark.parametrize("call", [
    lambda x, **kw: rearr.rearrange(x, "(h w) c -> h w c", **kw),
    lambda x, **kw: rearr.reduce(x, "(h w) c -> h", "sum", **kw),
    lambda x, **kw: rearr.repeat(x, "(h w) c -> h w c r", r=2, **kw),
    lambda x, **kw: rearr.rearrange(x, "(h w) n[i: k] -> k h w", i=np.array([1, 0]), **kw),  # the careful path
    lambda x, **kw: rearr.scatter(x, "(h w) c -> h w n[i: c]", "sum", i=np.array([1, 0]), n=3, **kw),
    lambda x, **kw: rearr.einsum(x, "(h w) c -> h w c", **kw),
    lambda x, **kw: rearr.einsum(x, np.ones(2), "(h w) c, c -> h w", **kw),
], ids=["rearrange", "reduce", "repeat", "gather", "scatter", "einsum", "einsum2"])
def test_the_fix_for_a_value_that_is_no_length_works_when_applied(call, value):
    """Whatever the value (a one-element list, a big-endian array, a float beyond int64, None), the int the
    fix offers fits the input's shape: 6 = h * w takes h=3, not 'e.g. h=4', which does not divide 6."""
    x = np.zeros((6, 2))
    with pytest.raises(rearr.RearrError) as info:
        call(x, h=value)
    e = info.value
    assert e.code == "RA305" and e.pattern[e.col] == "h", str(e)
    assert str(10**19) not in e.hint and str(2**63) not in e.hint
    call(x, h=_fixed(e.hint))  # the fix, applied: no error


@pytest.mark.parametrize("value", [np.array([3]), [3], (3,), np.array([3], ">i8"), np.array(3.0), [3.0],
                                   torch.tensor([3]), torch.tensor([3.0]), "3", 3.0], ids=repr)
def test_a_value_that_holds_a_fitting_int_is_fixed_to_that_int(value):
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(np.zeros((6, 2)), "(h w) c -> h w c", h=value)
    assert info.value.hint in ("pass the int it holds: h=3", "pass h=3")


def test_a_held_int_that_does_not_fit_says_so_and_offers_one_that_does():
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(np.zeros((6, 2)), "(h w) c -> h w c", h=[4])
    assert info.value.hint == "pass an int that fits the shape: h=4 does not, h=3 does"
    with pytest.raises(rearr.RearrError) as info:  # another keyword fixes h: the fix keeps it
        rearr.rearrange(np.zeros((12, 2)), "(h w) c -> h w c", h=None, w=3)
    assert _fixed(info.value.hint) == 4


@pytest.mark.parametrize("value, shown", [
    (18446744073709551615, "2**64 - 1"), (np.uint64(2**64 - 1), "2**64 - 1"),
    (18446744073709551614, "18446744073709551614"), (np.uint64(2**64 - 2), "18446744073709551614"),
    (-(2**70), "-2**70"), (3**1000, "1.322e+477"), (10**5000 + 1, "1.000e+5000"),
], ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_a_huge_length_is_shown_as_written_or_short_and_exact(value, shown):
    """At most 20 digits as written (a uint64), beyond that short: never an approximation of a value
    that fits in 20 digits, and no crash for a value str() or float() refuses."""
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(np.zeros(6), "(h w) -> h w", h=value)
    assert info.value.message.startswith(f"length h={shown} is ")


def test_big_counts_and_fills_are_shown_short():
    with pytest.raises(rearr.RearrError) as info:
        rearr.repeat(np.zeros(2), "h -> h c d e", c=2**30, d=2**30, e=2**30)
    assert info.value.message == "the result would hold 2**91 elements, more than int64 can count"
    with pytest.raises(rearr.RearrError) as info:
        rearr.scatter(np.ones(4, np.int64), "k -> n[i]", "sum", i=[0, 1, 1, 2], n=3, fill=2**70)
    assert info.value.message.startswith("fill=2**70 cannot be held by a tensor of int64")
    assert str(2**70) not in str(info.value)
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(np.zeros(6), "(h w) -> h w", h=[0] * 10**5)  # a long value is cut short
    assert len(str(info.value)) < 400


@pytest.mark.parametrize("call, kwargs, hint", [
    ("b h w -> b (h w)", {"hw": 12}, "remove hw=: the input's shape gives 'h' its length"),
    ("b (h w) c -> b h w c", {"hw": 2}, "rename hw= to h="),
    ("b (h w) c -> b h w c", {"hw": 2, "h": 2}, "rename hw= to w="),
    ("b (h w) c -> b h w c", {"hh": 2, "h": 2}, "remove hh=: h= is given already"),
])
def test_a_misspelt_length_keyword_gets_a_fix_that_works(call, kwargs, hint):
    x = np.zeros((2, 4, 3))
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(x, call, **kwargs)
    assert info.value.code == "RA300" and info.value.hint.startswith(hint)
    misspelt = next(k for k in kwargs if k in hint.split("=")[0])
    fixed = dict(kwargs)
    value = fixed.pop(misspelt)
    if hint.startswith("rename"):
        fixed[hint.split(" to ")[1].split("=")[0]] = value
    rearr.rearrange(x, call, **fixed)  # the fix, applied


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["bool", "float32", "int64"])
def test_a_bool_fill_is_a_number_whether_true_or_np_true(lib, dtype):
    src = to_backend(np.array([1, 0, 1]).astype(dtype), lib)
    idx = to_backend(np.array([0, 1, 1]), lib)
    got = [rearr.asnumpy(rearr.scatter(src, "k -> n[idx]", "max", idx=idx, n=3, fill=f))
           for f in (True, np.True_, 1)]
    for g in got:
        np.testing.assert_array_equal(g, got[2])
    assert got[0][2] == 1
