"""A cached call gives the first call's answer or error: einsum with a zero-length `...`, np.matrix
inputs, negative lengths. Each case is called three times, so the cached plans run as well as the first."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rearr
import rearr.run.cache
from rearr import RearrError

# --- einsum: a zero-length '...' dimension is taken for a length-1 one (planning.einsum._broadcast) ---


@pytest.mark.parametrize(
    ("make", "pattern", "expected"),
    [
        (lambda: np.zeros((0, 0)), "... c -> ... 1 c", (0, 1, 0)),
        (lambda: torch.zeros(2, 0, 0), "b ... c -> b ... 1 c", (2, 0, 1, 0)),
        (lambda: np.zeros((0, 3)), "... c -> ... 1 c", (0, 1, 3)),  # before: a bare ValueError from the reshape
        (lambda: np.zeros((0, 2, 3)), "... c -> ... () c", (0, 2, 1, 3)),
    ],
)
def test_einsum_zero_length_ellipsis_keeps_its_length(make, pattern, expected):
    for _ in range(3):
        out = rearr.einsum(make(), pattern)
        assert tuple(out.shape) == expected


def test_einsum_zero_length_ellipsis_two_operands():
    a, b = np.zeros((0, 4)), np.zeros((3, 0))
    for _ in range(3):
        assert rearr.einsum(a, b, "... c, d e -> ... (c d) e").shape == (0, 12, 0)


def test_einsum_zero_length_ellipsis_does_not_broadcast_with_three():
    # numpy refuses to broadcast 0 against 3; rearr must refuse too (a RearrError), not invent a shape
    a, b = np.zeros((0, 3)), np.zeros((5, 3))
    for _ in range(3):
        with pytest.raises(RearrError):
            rearr.einsum(a, b, "... c, ... c -> ... 1 c")


# --- np.matrix: accepted by the numpy backend, but its reshape keeps two dimensions -----------------

pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


@pytest.mark.parametrize(
    ("op", "pattern", "kwargs", "expected"),
    [
        ("rearrange", "a b -> a b 1", {}, (2, 3, 1)),
        ("rearrange", "a b -> (a b)", {}, (6,)),
        ("rearrange", "a (b c) -> a b c", {"c": 3}, (2, 1, 3)),
        ("reduce", "a b -> a", {"reduction": "sum"}, (2,)),
        ("reduce", "a b -> ", {"reduction": "sum"}, ()),
    ],
)
def test_np_matrix_is_refused_and_the_fix_gives_the_right_shape(op, pattern, kwargs, expected):
    m = np.matrix(np.arange(6.0).reshape(2, 3))
    for _ in range(3):
        with pytest.raises(RearrError, match="np.matrix") as info:
            getattr(rearr, op)(m, pattern, **kwargs)
        assert info.value.code == "RA500" and info.value.hint == "pass np.asarray(m)"
        assert getattr(rearr, op)(np.asarray(m), pattern, **kwargs).shape == expected  # the fix, applied


def test_np_matrix_in_a_list_or_as_into_is_refused():
    m = np.matrix(np.arange(6.0).reshape(2, 3))
    for _ in range(3):
        with pytest.raises(RearrError, match="np.matrix"):
            rearr.rearrange([m, m], "n a b -> n a b")
        with pytest.raises(RearrError, match="np.matrix"):
            rearr.scatter(np.ones((2, 3)), "a b -> a n[i]", "sum", i=np.zeros((2, 3), dtype=int), into=m)


# --- einsum: plain int lengths skip check_length_value once the backend is known (_einsum_key) ------


@pytest.mark.parametrize("make", [lambda: np.arange(24.0).reshape(2, 12), lambda: torch.arange(24.0).reshape(2, 12)])
def test_einsum_negative_length_is_a_rearr_error_on_every_call(make):
    x = make()
    rearr.rearrange(x, "a b -> a b")  # the backend is loaded: einsum takes its planned path from the first call
    for _ in range(3):
        with pytest.raises(RearrError):  # before: numpy's ValueError / torch's RuntimeError from the reshape
            rearr.einsum(x, "b (h w) -> b h w", h=-3)
        with pytest.raises(RearrError):  # before: a result, as if h=-3, w=-4 were lengths
            rearr.einsum(x, x, "b (h w), b (h w) -> b", h=-3, w=-4)


# --- rearrange, reduce and repeat: a call seen before gives what its first call gave --------------------

_X = np.arange(24.0).reshape(2, 3, 4)
_T = torch.arange(24.0).reshape(2, 3, 4)
_IDX = np.array([[2, 0], [1, 1]])
CALLS = [  # (function, positional arguments, keywords)
    (rearr.rearrange, (_X, "a b c -> c b a"), {}),
    (rearr.rearrange, (_T, "a b c -> a (b c)"), {}),
    (rearr.rearrange, (_X, "a b (c d) -> a b c d"), {"d": 2}),
    (rearr.rearrange, (_X, "a b (c d) -> a b c d"), {"d": 2.0}),  # 2.0 == 2: the careful path's error
    (rearr.rearrange, (_X, "a b (c d) -> a b c d"), {"d": True}),  # True == 1
    (rearr.rearrange, (_X, "a b (c d) -> a b c d"), {"d": np.int64(2)}),
    (rearr.rearrange, (_X, "a b (c d) -> a b c d"), {"d": 3}),
    (rearr.rearrange, (_X, "a b c -> a b"), {}),
    (rearr.rearrange, (_X, "a b c -> c b a"), {"check_bounds": "sometimes"}),
    (rearr.rearrange, (_X, "a b c -> c b a"), {"check_bounds": 1}),  # 1 == True: not a mode
    (rearr.rearrange, (_X, "a b[idx: a k] c -> a k c"), {"idx": _IDX}),
    (rearr.rearrange, (_X, "a b[idx: a k] c -> a k c"), {"idx": _IDX + 1}),  # out of range
    (rearr.rearrange, (_X, "a b[idx: a k] c -> a k c"), {"idx": _IDX, "check_bounds": False}),
    (rearr.rearrange, ([_X[0], _X[1]], "n b c -> b n c"), {}),
    (rearr.rearrange, ("a b -> b a", _X), {}),  # arguments swapped
    (rearr.rearrange, (), {"tensor": _X, "pattern": "a b c -> c a b"}),  # einops' keywords
    (rearr.reduce, (_X, "a b c -> a", "sum"), {}),
    (rearr.reduce, (_T, "a (b r) c -> a b", "max"), {"r": 3}),
    (rearr.reduce, (_X, "a b c -> a", "median"), {}),
    (rearr.reduce, (_X, "a b c -> a", lambda x, axes: x.sum(axis=axes)), {}),
    (rearr.reduce, (_X, "a b c -> a", ["sum"]), {}),  # unhashable: the careful path says why
    (rearr.reduce, (_X, "a b c -> c b a", "rearrange"), {}),
    (rearr.reduce, (), {"tensor": _X, "pattern": "a b c -> a", "reduction": "mean"}),
    (rearr.repeat, (_X, "a b c -> a b c r"), {"r": 2}),
    (rearr.repeat, (_T, "a b c -> (r a) b c"), {"r": 2}),
    (rearr.repeat, (_X, "a b c -> a b c r"), {}),
    (rearr.repeat, (_X, "a b c -> a b c r"), {"r": -1}),
    (rearr.repeat, (), {"tensor": _T, "pattern": "a b c -> a b c r", "r": 2}),
]


def _outcome(f, args, kwargs):
    try:
        out = f(*args, **kwargs)
    except Exception as e:  # the error, as the caller sees it
        return type(e), str(e)
    return type(out), np.asarray(out).tolist(), np.asarray(out).dtype.str


@pytest.mark.parametrize(("f", "args", "kwargs"), CALLS, ids=[f"{c[0].__name__}-{k}" for k, c in enumerate(CALLS)])
def test_a_call_seen_before_gives_what_its_first_call_gave(f, args, kwargs):
    """The first call takes the careful path; later ones the tables (unindexed or direct), once every int
    length is seen too (an int's entry must not answer for 2.0, True or a numpy int)."""
    for table in rearr.run.cache.CACHES:
        table.cache_clear()
    first = _outcome(f, args, kwargs)
    assert _outcome(f, args, kwargs) == _outcome(f, args, kwargs) == first
    ints = {k: int(v) if isinstance(v, float | np.integer | bool) else v for k, v in kwargs.items()}
    _outcome(f, args, ints)  # the int lengths' entry now in the table
    assert _outcome(f, args, kwargs) == first
