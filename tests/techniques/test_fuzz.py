"""Parser fuzzing: any string either parses and analyzes, or raises a RearrError
whose column lies inside the pattern -- never another exception, never a hang.

Fuzzed: random strings over the pattern alphabet, arbitrary unicode, and
mutations of valid patterns (the strategies'), through the parser alone
(rearr.rules.recipe.analyze / validate, no backend) and through the full API on
numpy.  Huge and deeply nested patterns must be answered, in work linear in their length.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from strategies import PATTERN_ALPHABET, any_case, mutated

import rearr
from rearr import RearrError
from rearr.errors import CODES
from rearr.rules import recipe

OPS = recipe.OPS
REDUCTION_FOR = {"reduce": "sum", "scatter": "sum"}


def assert_good_error(err: BaseException, pattern: str, *, need_col: bool) -> None:
    assert isinstance(err, RearrError), f"{type(err).__name__}: {err!r} for {pattern!r}"
    assert err.code in CODES, f"unknown code {err.code!r} for {pattern!r}"
    assert err.message, pattern
    if need_col:
        assert err.col is not None, f"no column in {err.code} {err.message!r} for {pattern!r}"
    if err.col is not None:
        assert 0 <= err.col <= len(pattern), f"column {err.col} outside {pattern!r} ({err.code} {err.message})"
    str(err)  # rendering never fails


def check_analyze(pattern: str) -> None:
    """Every operation: analyze either returns a recipe or raises a good RearrError;
    validate returns the same error as a value."""
    for op in OPS:
        reduction = REDUCTION_FOR.get(op)
        try:
            recipe.analyze(pattern, op, reduction)
        except Exception as e:  # noqa: BLE001 - the point is to see every exception
            assert_good_error(e, pattern, need_col=True)
            err = recipe.validate(pattern, op, reduction)
            assert isinstance(err, RearrError) and (err.code, err.col) == (e.code, e.col), (pattern, op)
        else:
            assert recipe.validate(pattern, op, reduction) is None


pattern_text = st.text(alphabet=PATTERN_ALPHABET, max_size=40)


@given(pattern_text)
def test_random_pattern_strings(pattern):
    check_analyze(pattern)


@given(st.text(max_size=30))
def test_random_unicode_strings(pattern):
    check_analyze(pattern)


@given(mutated(any_case().map(lambda c: c.pattern)))
def test_mutated_valid_patterns(pattern):
    check_analyze(pattern)


@given(any_case(), st.data())
def test_mutated_patterns_through_the_api(case, data):
    """A mutated pattern with the original inputs: a result or a RearrError, never
    another exception (numpy backend)."""
    pattern = data.draw(mutated(st.just(case.pattern)))
    note(f"mutated pattern: {pattern!r} from {case.describe()}")
    x, kw = case.inputs("numpy")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # e.g. the mean of an empty axis
            if case.op == "reduce":
                rearr.reduce(x, pattern, case.reduction, **kw)
            elif case.op == "scatter":
                rearr.scatter(x, pattern, case.reduction, **kw)
            else:
                getattr(rearr, case.op)(x, pattern, **kw)
    except Exception as e:  # noqa: BLE001
        assert_good_error(e, pattern, need_col=False)


@given(any_case(), st.sampled_from(["rearrange", "reduce", "repeat", "scatter"]))
def test_valid_patterns_under_the_wrong_operation(case, op):
    """A pattern meant for one operation, passed to another: a result or a RearrError."""
    x, kw = case.inputs("numpy")
    reduction = case.reduction or "sum"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if op == "reduce":
                rearr.reduce(x, case.pattern, reduction if reduction != "set" else "sum", **kw)
            elif op == "scatter":
                rearr.scatter(x, case.pattern, reduction if reduction in recipe.SCATTER_REDUCTIONS else "sum", **kw)
            else:
                getattr(rearr, op)(x, case.pattern, **kw)
    except Exception as e:  # noqa: BLE001
        assert_good_error(e, case.pattern, need_col=False)


# --- huge patterns: answered, in work linear in their length ---------------------------------

# A hang guard, not a speed test (the machines are shared): how the work grows with a pattern's
# length is asserted on counted calls below, which no load changes.
LIMIT_S = 60.0


def answered_promptly(fn, limit: float = LIMIT_S) -> object:
    """Run fn in a thread; fail if it has not answered after ``limit`` seconds (it hangs).
    Returns what it returned, or the exception it raised."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["value"] = e

    t0 = time.perf_counter()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"no answer after {limit} s"
    box["seconds"] = time.perf_counter() - t0
    return box["value"]


def _ok_or_error(value: object, pattern: str) -> None:
    if isinstance(value, BaseException):
        assert_good_error(value, pattern, need_col=False)


def _patterns_of(n: int) -> dict[str, str]:
    """Patterns of n axes (n / 10 indexed ones), each in one shape that a long pattern can take."""
    names = [f"a{i}" for i in range(n)]
    return {
        "many axes": f"{' '.join(names)} -> {' '.join(reversed(names))}",
        "many axes in a group": f"({' '.join(names)}) -> {' '.join(names)}",
        "many axes reduced": f"{' '.join(names)} -> a0",
        "many unit axes": " ".join(["1"] * n) + " -> " + " ".join(["()"] * n),
        "many indexed axes": " ".join(f"a{i}[i{i}]" for i in range(n // 10)) + " -> ",
        "many operands": ", ".join(names) + " -> a0",
    }


N_AXES = 10_000
MANY_PATTERNS = _patterns_of(N_AXES)
NESTED = {
    "nested parentheses": "(" * 1000 + "a" + ")" * 1000 + " -> a",
    "unclosed parentheses": "(" * 1000 + "a -> a",
    "closing parentheses": "a" + ")" * 1000 + " -> a",
    "nested brackets": "a" + "[" * 1000 + "i" + "]" * 1000 + " -> a",
    "many arrows": " -> ".join(["a"] * 1000),
    "many ellipses": " ".join(["..."] * 1000) + " -> ...",
    "long name": "a" * 100_000 + " -> " + "a" * 100_000,
}


def _calls(fn) -> int:
    """The Python and C function calls that fn makes: a count of work that load does not change."""
    count = 0

    def profile(frame, event, arg) -> None:
        nonlocal count
        count += 1

    sys.setprofile(profile)
    try:
        fn()
    except RearrError:
        pass
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("op", ["rearrange", "reduce", "scatter", "einsum"])
@pytest.mark.parametrize("name", sorted(MANY_PATTERNS))
def test_pattern_analysis_grows_linearly(name, op):
    """Twice the axes, twice the work (within 15 %): a quadratic step would give four times."""
    small, large = _patterns_of(1000)[name], _patterns_of(2000)[name]
    work = [_calls(lambda p=p: recipe.analyze(p, op, REDUCTION_FOR.get(op))) for p in (small, large)]
    assert work[1] <= 2.3 * work[0], (name, op, work)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MANY_PATTERNS))
def test_huge_patterns_parse_promptly(name):
    pattern = MANY_PATTERNS[name]
    # Each analysis of 10,000 axes takes a second or two: two operations suffice here.
    for op in ("rearrange", "scatter") if name.startswith("many axes") else ("rearrange", "reduce", "einsum"):
        value = answered_promptly(lambda op=op: recipe.analyze(pattern, op, REDUCTION_FOR.get(op)))
        if isinstance(value, BaseException):
            assert_good_error(value, pattern, need_col=True)


@pytest.mark.parametrize("name", sorted(NESTED))
def test_nested_patterns_give_a_clear_error_promptly(name):
    pattern = NESTED[name]
    for op in ("rearrange", "reduce", "repeat", "scatter"):
        value = answered_promptly(lambda op=op: recipe.analyze(pattern, op, REDUCTION_FOR.get(op)))
        if name == "long name":
            continue  # a valid pattern: a recipe, or a clear error at most
        assert isinstance(value, RearrError), (name, op, value)
        assert_good_error(value, pattern, need_col=True)
    if name == "nested parentheses":
        assert value.code == "RA102"


@pytest.mark.parametrize("name", sorted(MANY_PATTERNS) + sorted(NESTED))
def test_huge_patterns_through_the_api(name):
    """On a real tensor the call is answered promptly: a result or a RearrError
    (numpy arrays have at most 64 dimensions, so most of these cannot run)."""
    pattern = {**MANY_PATTERNS, **NESTED}[name]
    for x in (np.zeros((1,) * 4), np.zeros(1), np.zeros(())):
        _ok_or_error(answered_promptly(lambda x=x: rearr.rearrange(x, pattern)), pattern)
    if not name.startswith("many axes"):
        for call in (lambda: rearr.reduce(np.zeros(1), pattern, "sum"), lambda: rearr.repeat(np.zeros(1), pattern)):
            _ok_or_error(answered_promptly(call), pattern)


def test_output_with_more_dimensions_than_the_backend_allows():
    """10,000 unit axes out of one element: numpy and torch stop at 64 dimensions;
    rearr answers with a RearrError (or a result), never a backend error."""
    import torch

    pattern = "a -> a " + " ".join(["1"] * 100)
    for x in (np.zeros(1), torch.zeros(1)):
        for call in (lambda x=x: rearr.rearrange(x, pattern), lambda x=x: rearr.repeat(x, pattern)):
            value = answered_promptly(call)
            if isinstance(value, BaseException):
                assert_good_error(value, pattern, need_col=False)
            else:
                assert tuple(value.shape) == (1,) * 101
    pattern = MANY_PATTERNS["many axes in a group"]
    value = answered_promptly(lambda: rearr.rearrange(np.zeros(1), pattern))
    assert isinstance(value, RearrError), value
    assert_good_error(value, pattern, need_col=False)
