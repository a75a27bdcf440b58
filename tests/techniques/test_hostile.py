"""Hostile and unusual inputs through the public API: each call gives the right
answer or a RearrError -- never another exception, never a wrong answer.

Objects that are not tensors, 0-d tensors, zero-length axes, lengths whose
product overflows int64, non-contiguous / negative-stride / Fortran-ordered
arrays, torch's meta device, integer and bool dtypes through every reduction,
index tensors of the wrong dtype.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from reference import RefInvalid, assert_matches, reference, to_numpy

import rearr
import rearr.run.cache
from rearr import RearrError
from rearr.errors import CODES

rng = np.random.default_rng(1234)


def outcome(call):
    """The result, or the RearrError; any other exception fails the test."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy: mean of an empty slice
            return call()
    except RearrError as e:
        assert e.code in CODES, e.code
        str(e)
        return e
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"{type(e).__name__} instead of RearrError: {e}")


def raises_rearr(call, code: str | None = None) -> RearrError:
    got = outcome(call)
    assert isinstance(got, RearrError), f"expected a RearrError, got {type(got).__name__}: {got!r}"[:300]
    if code is not None:
        assert got.code == code, (got.code, got.message)
    return got


def T(a: np.ndarray) -> torch.Tensor:  # noqa: N802
    return torch.from_numpy(np.array(a, copy=True))


ALL_CALLS = {
    "rearrange": lambda x: rearr.rearrange(x, "a ... -> ... a"),
    "reduce": lambda x: rearr.reduce(x, "a ... -> a", "sum"),
    "repeat": lambda x: rearr.repeat(x, "a ... -> a r ...", r=2),
    "gather": lambda x: rearr.rearrange(x, "n[i] ... -> ...", i=np.zeros((), dtype=np.int64)),
    "scatter": lambda x: rearr.scatter(x, "a -> n[i]", "sum", i=np.zeros(2, dtype=np.int64), n=3),
    "parse_shape": lambda x: rearr.parse_shape(x, "a ..."),
    "pack": lambda x: rearr.pack(x, "a *"),
    "einsum": lambda x: rearr.einsum(x, "a -> a"),
}

NOT_TENSORS = {
    "None": None,
    "str": "abc",
    "bytes": b"abc",
    "dict": {"a": 1},
    "int": 3,
    "float": 2.5,
    "object": object(),
    "list of ints": [1, 2, 3],
    "nested list of ints": [[1, 2], [3, 4]],
    "empty list": [],
    "empty tuple": (),
    "list of different shapes": [np.zeros(2), np.zeros(3)],
    "list of different ndim": [np.zeros(2), np.zeros((2, 1))],
    "mixed numpy/torch list": [np.zeros(2), torch.zeros(2)],
    "mixed torch/numpy list": [torch.zeros(2), np.zeros(2)],
    "list with None": [np.zeros(2), None],
    "list of strings": ["ab", "cd"],
    "list of lists of arrays": [[np.zeros(2)], [np.zeros(2)]],
}


@pytest.mark.parametrize("op", sorted(ALL_CALLS))
@pytest.mark.parametrize("name", sorted(NOT_TENSORS))
def test_objects_that_are_not_tensors(name, op):
    got = outcome(lambda: ALL_CALLS[op](NOT_TENSORS[name]))
    if not isinstance(got, RearrError):
        # Accepting it is fine only with the meaning of np.asarray (e.g. a list of ints),
        # or for pack, whose tensors may differ in their '*' axes.
        accepted = ("list of ints", "nested list of ints") + (("list of different ndim",) if op == "pack" else ())
        assert name in accepted, f"{name} accepted by {op}: {got!r}"


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_list_of_tensors_is_stacked(backend):
    xs = [rng.standard_normal((2, 3)) for _ in range(4)]
    ts = xs if backend == "numpy" else [T(a) for a in xs]
    out = rearr.rearrange(ts, "n a b -> a (n b)")
    np.testing.assert_array_equal(to_numpy(out), np.stack(xs).transpose(1, 0, 2).reshape(2, 12))
    out = rearr.reduce(ts, "n a b -> a", "max")
    np.testing.assert_array_equal(to_numpy(out), np.stack(xs).max(axis=(0, 2)))


# --- 0-d tensors ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("pattern, shape", [(" -> ", ()), ("->", ()), ("-> 1", (1,)), ("-> () ()", (1, 1)),
                                            ("... -> ...", ()), ("... -> (...)", (1,)), ("-> (1 1) 1", (1, 1)),
                                            ("... -> 1 ... ()", (1, 1))])
def test_zero_dimensional_rearrange(backend, pattern, shape):
    x = np.array(3.5) if backend == "numpy" else torch.tensor(3.5, dtype=torch.float64)
    out = rearr.rearrange(x, pattern)
    assert tuple(out.shape) == shape
    assert float(to_numpy(out).reshape(())) == 3.5
    assert_matches(out, reference("rearrange", np.array(3.5), pattern))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_zero_dimensional_reduce_repeat_and_errors(backend):
    x = np.array(2.0) if backend == "numpy" else torch.tensor(2.0, dtype=torch.float64)
    for reduction in ("sum", "mean", "max", "min", "prod"):
        out = rearr.reduce(x, " -> ", reduction)
        assert tuple(out.shape) == () and float(to_numpy(out)) == 2.0, reduction
    out = rearr.reduce(x, "... -> 1", "sum")
    assert tuple(out.shape) == (1,)
    out = rearr.repeat(x, " -> r (s 1)", r=3, s=2)
    assert tuple(out.shape) == (3, 2) and (to_numpy(out) == 2.0).all()
    for pattern in ("1 -> ", "a -> a", "() -> ", "a ... -> a ..."):
        raises_rearr(lambda p=pattern: rearr.rearrange(x, p), "RA304")
    raises_rearr(lambda: rearr.rearrange(x, " -> a"))


# --- zero-length axes ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("op, pattern, shape, kw", [
    ("rearrange", "a b -> b a", (0, 3), {}),
    ("rearrange", "a b c -> (a c) b", (2, 0, 3), {}),
    ("rearrange", "(a c) b -> a c b", (0, 3), {"c": 2}),
    ("rearrange", "(a c) b -> a c b", (6, 0), {"c": 2}),
    ("rearrange", "... -> (...)", (3, 0, 2), {}),
    ("repeat", "a -> a r", (2,), {"r": 0}),
    ("repeat", "a -> (r a)", (0,), {"r": 3}),
    ("reduce", "a b -> b", (0, 3), {"reduction": "sum"}),
    ("reduce", "a b -> b", (0, 3), {"reduction": "prod"}),
    ("reduce", "a b -> b", (0, 3), {"reduction": "any"}),
    ("reduce", "a b -> b", (0, 3), {"reduction": "all"}),
    ("reduce", "a b -> a", (0, 3), {"reduction": "max"}),
    ("reduce", "a b -> b", (3, 0), {"reduction": "min"}),
])
def test_zero_length_axes(backend, op, pattern, shape, kw):
    x = rng.standard_normal(shape)
    kw = dict(kw)
    reduction = kw.pop("reduction", None)
    expected = reference(op, x, pattern, reduction, **kw)
    xx = x if backend == "numpy" else T(x)
    call = (lambda: rearr.reduce(xx, pattern, reduction, **kw)) if op == "reduce" else (
        lambda: getattr(rearr, op)(xx, pattern, **kw))
    assert_matches(outcome(call), expected)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_zero_length_reductions_without_a_value(backend):
    x = np.zeros((0, 3)) if backend == "numpy" else torch.zeros(0, 3)
    for reduction in ("max", "min"):
        got = outcome(lambda r=reduction: rearr.reduce(x, "a b -> b", r))
        assert isinstance(got, RearrError), reduction  # no value to give
    got = outcome(lambda: rearr.reduce(x, "a b -> b", "mean"))
    if not isinstance(got, RearrError):
        assert tuple(got.shape) == (3,) and np.isnan(to_numpy(got)).all()


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_zero_length_gather_and_scatter(backend):
    conv = (lambda a: a) if backend == "numpy" else T
    x = conv(rng.standard_normal((2, 3)))
    out = rearr.rearrange(x, "b n[i] -> b k", i=conv(np.zeros((2, 0), dtype=np.int64)))
    assert tuple(out.shape) == (2, 0)
    out = rearr.rearrange(conv(np.zeros((2, 0))), "b n[i] -> b k", i=conv(np.zeros((2, 0), dtype=np.int64)))
    assert tuple(out.shape) == (2, 0)
    raises_rearr(lambda: rearr.rearrange(conv(np.zeros((2, 0))), "b n[i] -> b", i=conv(np.zeros(2, dtype=np.int64))),
                 "RA501")
    out = rearr.scatter(conv(np.zeros((2, 0))), "b k -> b n[i]", "sum", i=conv(np.zeros((2, 0), dtype=np.int64)), n=3)
    assert tuple(out.shape) == (2, 3) and (to_numpy(out) == 0).all()
    out = rearr.scatter(conv(np.zeros((2, 0))), "b k -> b n[i]", "max", i=conv(np.zeros((2, 0), dtype=np.int64)),
                        n=3, fill=-1.0)
    assert (to_numpy(out) == -1).all()
    out = rearr.scatter(conv(np.zeros((2, 0))), "b k -> b n[i]", "sum", i=conv(np.zeros((2, 0), dtype=np.int64)), n=0)
    assert tuple(out.shape) == (2, 0)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_zero_lengths_that_cannot_be_inferred(backend):
    x = np.zeros((0, 3)) if backend == "numpy" else torch.zeros(0, 3)
    raises_rearr(lambda: rearr.rearrange(x, "(a c) b -> a c b", a=0))  # c is 0/0
    raises_rearr(lambda: rearr.rearrange(x, "(a c) b -> a c b"))


# --- lengths that overflow ---------------------------------------------------------------------


BIG = 2**40


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("op, pattern, kw", [
    ("repeat", "a -> a (h w)", {"h": BIG, "w": BIG}),
    ("repeat", "a -> a h w", {"h": BIG, "w": BIG}),
    ("repeat", "a -> (a h) w", {"h": BIG, "w": BIG}),
    ("repeat", "a -> a h", {"h": 2**63}),
    ("repeat", "a -> a h", {"h": 2**64 + 1}),
    ("repeat", "a -> a h w q", {"h": 2**30, "w": 2**30, "q": 2**30}),
    ("rearrange", "(h w) -> h w", {"h": BIG, "w": BIG}),
    ("rearrange", "(h w) -> h w", {"h": 2**64}),
    ("reduce", "(h w) -> h", {"h": BIG, "w": BIG}),
])
def test_lengths_whose_product_overflows(backend, op, pattern, kw):
    """Products past int64 (or past what an array can hold) are a RearrError."""
    x = np.zeros(1) if backend == "numpy" else torch.zeros(1)
    if op == "reduce":
        raises_rearr(lambda: rearr.reduce(x, pattern, "sum", **kw))
    else:
        raises_rearr(lambda: getattr(rearr, op)(x, pattern, **kw))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_huge_repeat_of_one_element(backend):
    """2**62 elements: torch can express it as an expanded view (right shape), numpy
    cannot; either the right shape or a RearrError."""
    x = np.zeros(1) if backend == "numpy" else torch.zeros(1)
    got = outcome(lambda: rearr.repeat(x, "a -> a h", h=2**62))
    if not isinstance(got, RearrError):
        assert tuple(got.shape) == (1, 2**62)


@pytest.mark.parametrize("value", [-1, True, 2.0, "2", None, [2], 2**70])
def test_bad_length_values(value):
    got = raises_rearr(lambda: rearr.repeat(np.zeros(1), "a -> a h", h=value))
    assert got.code in ("RA305", "RA303", "RA500"), got


def test_numpy_integer_lengths():
    assert rearr.repeat(np.zeros(1), "a -> a h", h=np.int64(3)).shape == (1, 3)
    assert rearr.rearrange(np.zeros(6), "(h w) -> h w", h=np.int32(2)).shape == (2, 3)


# --- memory layouts ------------------------------------------------------------------------------

LAYOUT_CALLS = [
    ("rearrange", "a b c -> c (a b)", None, {}),
    ("rearrange", "a b c -> (b c) a", None, {}),
    ("rearrange", "(a d) b c -> d b a c", None, {"d": 2}),
    ("reduce", "a b c -> c a", "sum", {}),
    ("reduce", "a b c -> b", "max", {}),
    ("repeat", "a b c -> b r (c a)", None, {"r": 2}),
    ("rearrange", "a b n[i] -> a b", None, {"i": "ab"}),
    ("rearrange", "a n[i: k] c -> k a c", None, {"i": "k"}),
    ("scatter", "a b c -> a n[i: a b] c", "sum", {"i": "ab", "n": 3}),
    ("scatter", "a b c -> c n[i] a", "mean", {"i": "abc", "n": 3}),
    ("scatter", "a b c -> n[i: b] c a", "max", {"i": "b", "n": 2}),
]


def _layouts(base: np.ndarray):
    """(name, numpy array, torch tensor) with the same values as ``base`` (shape (4, 2, 6))."""
    t = T(base)
    rev = np.ascontiguousarray(base[::-1])  # reversed copy, reversed again through a view below
    yield "contiguous", base, t
    yield "negative stride [::-1]", rev[::-1], T(rev).flip(0)
    yield "fortran order", np.asfortranarray(base), T(base).permute(2, 1, 0).contiguous().permute(2, 1, 0)
    tr = np.ascontiguousarray(base.transpose(2, 1, 0))
    yield "transposed .T", tr.T, T(tr).permute(2, 1, 0)
    wide = np.zeros((4, 2, 12))
    wide[:, :, ::2] = base
    yield "strided [..., ::2]", wide[:, :, ::2], T(wide)[:, :, ::2]
    big = np.zeros((8, 2, 6))
    big[::2] = base
    yield "strided [::2] / .t() mix", big[::2], T(big.transpose(1, 0, 2).copy()).transpose(0, 1)[::2]
    yield "broadcast (stride 0)", np.broadcast_to(base[:1], (4, 2, 6)) * 0 + base, T(base[:1]).expand(4, 2, 6) * 0 + t


@pytest.mark.parametrize("op, pattern, reduction, kw", LAYOUT_CALLS)
def test_non_contiguous_layouts(op, pattern, reduction, kw):
    base = rng.standard_normal((4, 2, 6))
    n_len = kw.get("n", 6)
    index_shapes = {"ab": (4, 2), "abc": (4, 2, 6), "k": (5,), "b": (2,)}
    kw_np = {}
    for k, v in kw.items():
        kw_np[k] = rng.integers(-n_len, n_len, size=index_shapes[v]) if isinstance(v, str) else v
    if op == "rearrange" and "n[i: k]" in pattern:
        kw_np["i"] = rng.integers(-2, 2, size=5)
    expected = reference(op, base, pattern, reduction, **kw_np)
    for name, xn, xt in _layouts(base):
        assert np.array_equal(xn, base) and np.array_equal(xt.numpy(), base), name
        for backend, x in (("numpy", xn), ("torch", xt)):
            conv = (lambda a: a) if backend == "numpy" else T
            kk = {k: conv(v) if isinstance(v, np.ndarray) else v for k, v in kw_np.items()}
            before = np.array(to_numpy(x), copy=True)
            if op == "reduce":
                got = rearr.reduce(x, pattern, reduction, **kk)
            elif op == "scatter":
                got = rearr.scatter(x, pattern, reduction, **kk)
            else:
                got = getattr(rearr, op)(x, pattern, **kk)
            assert_matches(got, expected, what=f"{backend} {name} {pattern}")
            assert np.array_equal(to_numpy(x), before), f"{backend} {name}: input modified"


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_non_contiguous_index_tensors(backend):
    x = rng.standard_normal((3, 5))
    idx = rng.integers(-5, 5, size=(4, 3))
    expected = reference("rearrange", x, "b n[i] -> b k", i=idx.T)
    if backend == "numpy":
        got = rearr.rearrange(x, "b n[i] -> b k", i=idx.T)
    else:
        got = rearr.rearrange(T(x), "b n[i] -> b k", i=T(idx).t())
    assert_matches(got, expected)


# --- torch's meta device ---------------------------------------------------------------------------


def test_meta_device_rearrange_and_reduce():
    m = torch.empty(2, 3, 4, device="meta")
    out = rearr.rearrange(m, "a b c -> b (a c)")
    assert out.device.type == "meta" and tuple(out.shape) == (3, 8)
    out = rearr.rearrange(m, "a b (c d) -> (b d) a c", d=2)
    assert out.device.type == "meta" and tuple(out.shape) == (6, 2, 2)
    for reduction in ("sum", "mean", "max", "min", "prod", "any", "all"):
        out = rearr.reduce(m, "a b c -> b 1", reduction)
        assert out.device.type == "meta" and tuple(out.shape) == (3, 1), reduction
    out = rearr.repeat(m, "a b c -> b r (a c)", r=5)
    assert out.device.type == "meta" and tuple(out.shape) == (3, 5, 8)


def test_meta_device_gather_and_scatter_answer():
    """With indices on the meta device there are no values to check: a result of the
    right shape, or a RearrError -- never a backend error."""
    m = torch.empty(2, 3, 4, device="meta")
    i = torch.empty(2, 5, dtype=torch.long, device="meta")
    got = outcome(lambda: rearr.rearrange(m, "a b[i: a k] c -> a k c", i=i))
    if not isinstance(got, RearrError):
        assert tuple(got.shape) == (2, 5, 4)
    got = outcome(lambda: rearr.rearrange(m, "a b[i: a k] c -> a k c", i=i, check_bounds=False))
    if not isinstance(got, RearrError):
        assert tuple(got.shape) == (2, 5, 4)


# --- integer and bool dtypes through every reduction ---------------------------------------------

INT_DTYPES = ["int8", "uint8", "int16", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("reduction", ["min", "max", "sum", "prod", "mean", "any", "all"])
def test_integer_and_bool_reductions(dtype, reduction):
    x = (rng.integers(0, 3, size=(3, 4)) if dtype != "bool" else rng.random((3, 4)) < 0.5).astype(dtype)
    got_np = outcome(lambda: rearr.reduce(x, "a b -> b", reduction))
    got_t = outcome(lambda: rearr.reduce(T(x), "a b -> b", reduction))
    if reduction == "mean":
        assert isinstance(got_np, RearrError) and isinstance(got_t, RearrError)
        return
    expected = reference("reduce", x, "a b -> b", reduction)
    assert_matches(got_np, expected, what="numpy")
    assert_matches(got_t, expected, what="torch")
    if reduction in ("any", "all"):
        assert to_numpy(got_np).dtype == np.bool_
    elif dtype != "uint8":  # numpy sums uint8 into uint64, torch into int64: same values
        assert to_numpy(got_np).dtype == to_numpy(got_t).dtype, (to_numpy(got_np).dtype, got_t.dtype)


@pytest.mark.parametrize("reduction", ["any", "all"])
def test_uint8_any_all_give_bool_on_torch(reduction):
    got = rearr.reduce(torch.tensor([[0, 1], [2, 0]], dtype=torch.uint8), "a b -> b", reduction)
    assert got.dtype == torch.bool


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_integer_mean_is_an_error_also_in_scatter(backend, dtype):
    x = np.ones((2, 3), dtype=dtype)
    i = np.zeros((2, 3), dtype=np.int64)
    conv = (lambda a: a) if backend == "numpy" else T
    raises_rearr(lambda: rearr.scatter(conv(x), "b k -> b n[i]", "mean", i=conv(i), n=2))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_nan_propagates_alike(backend):
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    conv = (lambda a: a) if backend == "numpy" else T
    for reduction in ("max", "min", "sum", "mean", "prod"):
        got = to_numpy(rearr.reduce(conv(x), "a b -> a", reduction))
        assert np.isnan(got[0]) and not np.isnan(got[1]), (backend, reduction, got)
    i = np.array([[0, 0, 1], [1, 1, 1]])
    for reduction in ("max", "min", "sum", "mean", "prod"):
        got = to_numpy(rearr.scatter(conv(x), "b k -> b n[i]", reduction, i=conv(i), n=3))
        assert np.isnan(got[0, 0]) and not np.isnan(got[0, 1]) and not np.isnan(got[1]).any(), (
            backend, reduction, got)
        assert got[0, 2] == 0 and got[1, 0] == 0 and got[1, 2] == 0


# --- index tensors of the wrong kind ----------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bool", "complex64"])
def test_index_of_wrong_dtype(backend, dtype):
    x = np.arange(6.0).reshape(2, 3)
    i = np.array([1, 0]).astype(dtype)
    conv = (lambda a: a) if backend == "numpy" else T
    raises_rearr(lambda: rearr.rearrange(conv(x), "b n[i] -> b", i=conv(i)), "RA501")
    raises_rearr(lambda: rearr.scatter(conv(x), "b k -> n[i: b] k", "sum", i=conv(i), n=2), "RA501")
    raises_rearr(lambda: rearr.scatter(conv(x), "b k -> n[i: b] k", "sum", i=conv(i), n=2, check_bounds=False),
                 "RA501")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("value", [None, "ab", 1.5, object(), [0.5, 1.5], {"a": 1}])
def test_index_that_is_not_a_tensor(backend, value):
    x = np.arange(6.0).reshape(2, 3)
    xx = x if backend == "numpy" else T(x)
    raises_rearr(lambda: rearr.rearrange(xx, "b n[i] -> b", i=value))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("value", [1, -1, True, np.int64(1)])
def test_index_that_is_a_python_or_numpy_scalar(backend, value):
    """A scalar where the pattern needs a 1-d index is a RearrError (no silent broadcast);
    where it declares no axes ('[i:]') a scalar index is fine, or a RearrError."""
    x = np.arange(6.0).reshape(2, 3)
    xx = x if backend == "numpy" else T(x)
    raises_rearr(lambda: rearr.rearrange(xx, "b n[i] -> b", i=value))
    raises_rearr(lambda: rearr.scatter(xx, "b k -> b n[i]", "sum", i=value, n=3))
    got = outcome(lambda: rearr.rearrange(xx, "n[i:] k -> k", i=value))
    if not isinstance(got, RearrError):
        assert isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        np.testing.assert_array_equal(to_numpy(got), x[int(value)])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_index_of_other_integer_dtypes(backend, dtype):
    """Small integer index dtypes are integers like any other (torch's uint8 is not a mask here)."""
    x = np.arange(12.0).reshape(3, 4)
    i = np.array([3, 0, 1]).astype(dtype)
    xx, ii = (x, i) if backend == "numpy" else (T(x), T(i))
    got = outcome(lambda: rearr.rearrange(xx, "b n[i] -> b", i=ii))
    if not isinstance(got, RearrError):
        np.testing.assert_array_equal(to_numpy(got), x[np.arange(3), i.astype(np.int64)])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_index_out_of_range_and_negative(backend):
    x = np.arange(12.0).reshape(3, 4)
    conv = (lambda a: a) if backend == "numpy" else T
    got = rearr.rearrange(conv(x), "b n[i] -> b", i=conv(np.array([-1, -4, 3])))
    np.testing.assert_array_equal(to_numpy(got), [3.0, 4.0, 11.0])
    for bad in ([0, 4, 0], [0, -5, 0], [2**40, 0, 0]):
        err = raises_rearr(lambda b=bad: rearr.rearrange(conv(x), "b n[i] -> b", i=conv(np.array(b))), "RA501")
        assert "i" in err.message
        raises_rearr(lambda b=bad: rearr.scatter(conv(x), "b k -> n[i: b] k", "sum", i=conv(np.array(b)), n=4),
                     "RA501")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_set_with_duplicates_is_an_error(backend):
    conv = (lambda a: a) if backend == "numpy" else T
    src = np.arange(6.0).reshape(2, 3)
    raises_rearr(lambda: rearr.scatter(conv(src), "b k -> b n[i]", "set", i=conv(np.array([[0, 1, 2], [1, 1, 0]])),
                                       n=3), "RA501")
    # the same position written as i and i - n is a duplicate too
    raises_rearr(lambda: rearr.scatter(conv(src), "b k -> b n[i]", "set", i=conv(np.array([[0, 1, -3], [0, 1, 2]])),
                                       n=3), "RA501")
    got = rearr.scatter(conv(src), "b k -> b n[i]", "set", i=conv(np.array([[2, 0, 1], [-1, -2, -3]])), n=3)
    np.testing.assert_array_equal(to_numpy(got), [[1.0, 2.0, 0.0], [5.0, 4.0, 3.0]])


# --- odd arguments --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_odd_arguments(backend):
    x = np.zeros((2, 3)) if backend == "numpy" else torch.zeros(2, 3)
    i = np.zeros(2, dtype=np.int64) if backend == "numpy" else torch.zeros(2, dtype=torch.long)
    for pattern in (None, b"a b -> b a", 3, ["a b -> b a"]):
        raises_rearr(lambda p=pattern: rearr.rearrange(x, p), "RA100")
    for reduction in ("median", None, 3, "", "SUM", "set"):
        raises_rearr(lambda r=reduction: rearr.reduce(x, "a b -> a", r))
    for reduction in ("any", "all", "median", None, "", len):
        raises_rearr(lambda r=reduction: rearr.scatter(x, "b k -> n[i: b] k", r, i=i, n=2))
    raises_rearr(lambda: rearr.scatter(x, "b k -> n[i: b] k", "sum", i=i, n=2, fill=1.0, into=x[:2]))
    raises_rearr(lambda: rearr.scatter(x, "b k -> n[i: b] k", "sum", i=i, n=2, into=np.zeros((5, 5))))
    raises_rearr(lambda: rearr.rearrange(x, "a b -> b a", c=3), "RA300")
    raises_rearr(lambda: rearr.rearrange(x, "b n[i] -> b"))  # the index is missing


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_axis_names_like_the_parameters(backend):
    """Axes or indices named like the parameters work: x, src (scatter's source is positional-only),
    axes_lengths; not tensor, which is a keyword as in einops (`rearrange(tensor=x, pattern=...)`)."""
    x = rng.standard_normal((2, 6))
    xx = x if backend == "numpy" else T(x)
    conv = (lambda a: a) if backend == "numpy" else T
    out = rearr.rearrange(xx, "tensor (x y) -> y tensor x", x=2)
    np.testing.assert_array_equal(to_numpy(out), x.reshape(2, 2, 3).transpose(2, 0, 1))
    out = rearr.reduce(xx, "tensor (src y) -> tensor y", "sum", src=2)
    np.testing.assert_allclose(to_numpy(out), x.reshape(2, 2, 3).sum(1))
    out = rearr.repeat(xx, "a b -> a b axes_lengths", axes_lengths=2)
    assert tuple(out.shape) == (2, 6, 2)
    with pytest.raises(TypeError, match="multiple values for argument 'tensor'"):  # as in einops
        rearr.repeat(xx, "a b -> a b tensor", tensor=2)
    src = conv(np.array([1, 0]))
    out = rearr.scatter(xx, "b k -> n[src: b] k", "sum", src=src, n=2)
    np.testing.assert_allclose(to_numpy(out), x[::-1])
    out = rearr.rearrange(xx, "b n[x: b] -> b", x=src)
    np.testing.assert_allclose(to_numpy(out), x[[0, 1], [1, 0]])


def test_reference_of_the_hostile_module():
    """The reference interpreter refuses what these tests expect rearr to refuse."""
    with pytest.raises(RefInvalid):
        reference("rearrange", np.zeros((2, 3)), "b n[i] -> b", i=np.zeros(2, dtype=np.float32))


# --- reduce that reduces no axis ------------------------------------------------------------------
# einops skips the reduction when the output keeps every input axis; rearr applies the
# reduction's dtype rule as numpy's axis=() does: any/all give bools, a sum of bools counts,
# an integer mean is refused -- the same result types as when some axis is reduced.


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("reduction", ["any", "all"])
def test_reduce_without_reduced_axes_any_all_give_bool(backend, reduction):
    x = np.array([[0.5], [0.0]])
    got = rearr.reduce(x if backend == "numpy" else T(x), "a b -> a b", reduction)
    assert to_numpy(got).dtype == np.bool_
    np.testing.assert_array_equal(to_numpy(got), [[True], [False]])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_reduce_without_reduced_axes_integer_mean_is_an_error(backend):
    x = np.array([[1], [2]])
    raises_rearr(lambda: rearr.reduce(x if backend == "numpy" else T(x), "a b -> b a", "mean"))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_reduce_without_reduced_axes_bool_sum_counts(backend):
    x = np.array([[True], [False]])
    xx = x if backend == "numpy" else T(x)
    assert to_numpy(rearr.reduce(xx, "a b -> a b", "sum")).dtype == to_numpy(rearr.reduce(xx, "a b -> a", "sum")).dtype


# --- fill= and into= of the wrong kind -------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("fill", ["x", [1.0, 2.0], None.__class__, {"a": 1}])
def test_fill_that_is_not_a_scalar(backend, fill):
    conv = (lambda a: a) if backend == "numpy" else T
    src, i = conv(np.arange(3.0)), conv(np.array([0, 0, 1]))
    raises_rearr(lambda: rearr.scatter(src, "k -> n[i]", "max", i=i, n=4, fill=fill))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_fill_that_is_an_array(backend):
    conv = (lambda a: a) if backend == "numpy" else T
    src, i = conv(np.arange(3.0)), conv(np.array([0, 0, 1]))
    got = outcome(lambda: rearr.scatter(src, "k -> n[i]", "max", i=i, n=4, fill=conv(np.zeros(4))))
    assert isinstance(got, RearrError), got


@pytest.mark.parametrize("into_dtype, src_dtype", [("int64", "float64"), ("float32", "float64"), ("float64", "int64")])
def test_into_of_another_dtype_same_on_both_backends(into_dtype, src_dtype):
    """into= of another dtype than the source: the same answer on numpy and torch, or a
    RearrError on both -- never a backend error."""
    src = (np.arange(3) + 0.5).astype(src_dtype)
    i = np.array([0, 0, 1])
    into = np.zeros(4, dtype=into_dtype)
    got_np = outcome(lambda: rearr.scatter(src, "k -> n[i]", "sum", i=i, into=into))
    got_t = outcome(lambda: rearr.scatter(T(src), "k -> n[i]", "sum", i=T(i), into=T(into)))
    if isinstance(got_np, RearrError) or isinstance(got_t, RearrError):
        assert isinstance(got_np, RearrError) and isinstance(got_t, RearrError), (got_np, got_t)
    else:
        np.testing.assert_array_equal(to_numpy(got_np), to_numpy(got_t))
        assert to_numpy(got_np).dtype == to_numpy(got_t).dtype


@pytest.mark.parametrize("reduction", ["sum", "prod", "mean", "max", "min"])
def test_complex_reductions(reduction):
    """Complex tensors: the same answer on both backends, or a RearrError (torch has no
    complex max/min) -- never a backend error."""
    x = np.array([[1 + 2j, 3j], [2 - 1j, 1 + 0j]])
    got_np = outcome(lambda: rearr.reduce(x, "a b -> a", reduction))
    got_t = outcome(lambda: rearr.reduce(T(x), "a b -> a", reduction))
    for got in (got_np, got_t):
        if not isinstance(got, RearrError):
            assert_matches(got, reference("reduce", x, "a b -> a", reduction))


# --- devices and layouts ---------------------------------------------------------------------------


def test_index_on_the_meta_device_with_a_real_tensor():
    """An index without values (meta) cannot pick real values: a RearrError, never made-up values."""
    x = torch.arange(6.0).reshape(2, 3)
    i = torch.zeros(2, 5, dtype=torch.long, device="meta")
    raises_rearr(lambda: rearr.rearrange(x, "b n[i] -> b k", i=i))
    raises_rearr(lambda: rearr.scatter(torch.ones(2, 5), "b k -> b n[i]", "sum", i=i, n=4))


def test_real_index_with_a_meta_tensor():
    m = torch.empty(2, 3, device="meta")
    got = outcome(lambda: rearr.rearrange(m, "b n[i] -> b k", i=torch.zeros(2, 5, dtype=torch.long)))
    if not isinstance(got, RearrError):
        assert got.device.type == "meta" and tuple(got.shape) == (2, 5)


def test_list_of_tensors_on_different_devices():
    raises_rearr(lambda: rearr.rearrange([torch.zeros(2), torch.zeros(2, device="meta")], "n a -> a n"))


@pytest.mark.parametrize("op", ["rearrange", "reduce"])
def test_sparse_tensor(op):
    x = torch.eye(3).to_sparse()
    if op == "rearrange":
        got = outcome(lambda: rearr.rearrange(x, "a b -> b a"))
    else:
        got = outcome(lambda: rearr.reduce(x, "a b -> b", "sum"))
    if not isinstance(got, RearrError):
        np.testing.assert_array_equal(got.to_dense().numpy(), np.eye(3) if op == "rearrange" else np.ones(3))


def test_tensors_that_require_grad():
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    out = rearr.rearrange([x, x], "n a b -> b (n a)")
    assert out.requires_grad
    i = torch.tensor([[2, -1], [0, 1]])
    (g,) = torch.autograd.grad(rearr.rearrange(x, "b n[i] -> b k", i=i).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [[0, 0, 2], [1, 1, 0]])
    (g,) = torch.autograd.grad(rearr.scatter(x, "b k -> n[i: k] b", "sum", i=torch.tensor([1, 0, 1]), n=2).sum(), x)
    np.testing.assert_array_equal(g.numpy(), np.ones((2, 3)))


# --- silent wrong results and foreign exceptions found from the outside -------------------------


def _idx(backend: str, values, dtype: str):
    if backend == "numpy":
        return np.array(values, dtype=dtype)
    return torch.tensor(values, dtype=getattr(torch, dtype))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("check_bounds", [True, False])
@pytest.mark.parametrize("values, bad, at", [([2**64 - 1], 2**64 - 1, (0,)), ([1, 2**63], 2**63, (1,)),
                                             ([2**63 + 3, 0], 2**63 + 3, (0,))])
def test_uint64_index_values_beyond_int64_are_ra501_not_wrapped(backend, check_bounds, values, bad, at):
    # astype(intp) / .long() turned 2**64-1 into -1: the last element, read silently.
    x = np.arange(5.0) if backend == "numpy" else torch.arange(5.0)
    i = _idx(backend, values, "uint64")
    e = raises_rearr(lambda: rearr.rearrange(x, "n[i] -> k", i=i, check_bounds=check_bounds), "RA501")
    assert f"holds {bad} at position {at}" in e.message, e.message
    src = np.ones(len(values)) if backend == "numpy" else torch.ones(len(values))
    e = raises_rearr(lambda: rearr.scatter(src, "k -> n[i]", "sum", i=i, n=5, check_bounds=check_bounds), "RA501")
    assert str(bad) in e.message


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
def test_unsigned_indices_gather_and_check_bounds(backend, dtype):
    x = np.arange(5.0) * 10 if backend == "numpy" else torch.arange(5.0, dtype=torch.float64) * 10
    out = rearr.rearrange(x, "n[i] -> k", i=_idx(backend, [4, 0, 2], dtype))
    np.testing.assert_array_equal(to_numpy(out), [40.0, 0.0, 20.0])
    e = raises_rearr(lambda: rearr.rearrange(x, "n[i] -> k", i=_idx(backend, [1, 5], dtype)), "RA501")
    assert "holds 5 at position (1,)" in e.message


MASKED = np.ma.array([1.0, 2.0, 3.0, 4.0], mask=[0, 1, 0, 0])
MASKED_CALLS = {
    "rearrange": lambda m: rearr.rearrange(m, "(a b) -> b a", a=2),
    "reduce": lambda m: rearr.reduce(m, "n -> ", "sum"),
    "repeat": lambda m: rearr.repeat(m, "n -> n r", r=2),
    "gather": lambda m: rearr.rearrange(m, "n[i] -> k", i=np.array([1, 0])),
    "scatter": lambda m: rearr.scatter(m, "k -> n[i]", "sum", i=np.array([0, 0, 1, 1]), n=2),
    "masked index": lambda m: rearr.rearrange(np.arange(4.0), "n[i] -> k", i=np.ma.array([1, 3], mask=[0, 1])),
    "masked into": lambda m: rearr.scatter(np.ones(4), "k -> n[i]", "sum", i=np.array([0, 0, 1, 1]), into=m[:2]),
    "list of masked": lambda m: rearr.rearrange([m, m], "s n -> n s"),
}


@pytest.mark.parametrize("call", sorted(MASKED_CALLS))
def test_masked_arrays_are_refused_with_a_fix(call):
    # reduce honoured the mask (sum 8) while scatter added the masked 2.0 in: refuse them all alike.
    e = raises_rearr(lambda: MASKED_CALLS[call](MASKED), "RA500")
    assert "masked" in e.message and "filled" in e.hint


def test_masked_array_fix_hint_works():
    m = MASKED
    assert rearr.reduce(m.filled(0), "n -> ", "sum") == m.sum()
    data = rearr.rearrange(np.ma.getdata(m), "(a b) -> b a", a=2)
    mask = rearr.rearrange(np.ma.getmaskarray(m), "(a b) -> b a", a=2)
    kept = np.ma.array(data, mask=mask)
    np.testing.assert_array_equal(kept.mask, m.reshape(2, 2).T.mask)
    assert kept.sum() == m.sum()


@pytest.mark.parametrize("lib", ["numpy", "torch", "jax", "dask"])
def test_a_masked_index_is_refused_on_every_backend_and_its_fix_works(lib):
    """torch.as_tensor, like np.asarray, drops a mask: the hidden value (here 9, out of range, or a
    valid-looking one) would index. Refused alike everywhere, with a fix that runs."""
    x = {"numpy": np.asarray, "torch": torch.as_tensor}.get(lib)
    if x is None:
        module = pytest.importorskip({"jax": "jax.numpy", "dask": "dask.array"}[lib])
        x = module.asarray
    data = x(np.arange(12.0).reshape(3, 4))
    idx = np.ma.array([1, 9, 0], mask=[0, 1, 0])
    for masked in (idx, np.ma.array([1, 2, 0], mask=[0, 1, 0])):
        e = raises_rearr(lambda masked=masked: rearr.rearrange(data, "b n[idx] -> b", idx=masked), "RA500")
        assert "masked index 'idx'" in e.message and "idx.filled(i)" in e.hint
    fixed = rearr.rearrange(data, "b n[idx] -> b", idx=idx.filled(3))
    np.testing.assert_array_equal(np.asarray(fixed), [1.0, 7.0, 8.0])


@pytest.mark.parametrize("lib", [np.asarray, torch.as_tensor], ids=["numpy", "torch"])
@pytest.mark.parametrize("mode", [True, "sync"])
def test_an_index_is_checked_when_another_axis_is_empty(lib, mode):
    """With another axis of length 0 the native call sees an empty (expanded) index and checks nothing:
    rearr checks the values itself, as it does for any other shape."""
    calls = {
        "gather": lambda i: rearr.rearrange(lib(np.zeros((0, 3))), "b n[idx: k] -> b k", idx=i, check_bounds=mode),
        "scatter": lambda i: rearr.scatter(lib(np.zeros((2, 0))), "k c -> n[idx: k] c", "sum", idx=i, n=3,
                                           check_bounds=mode),
        "scatter max": lambda i: rearr.scatter(lib(np.zeros((2, 0))), "k c -> n[idx: k] c", "max", idx=i, n=3,
                                               check_bounds=mode),
    }
    for name, call in calls.items():
        e = raises_rearr(lambda call=call: call(lib(np.array([0, 5]))), "RA501")
        assert "holds 5" in e.message, name
        assert tuple(call(lib(np.array([0, -1]))).shape) in ((0, 2), (3, 0)), name


def _worker_error() -> None:
    rearr.rearrange(np.zeros(5), "(a b) -> a b", a=2)


def test_rearr_error_round_trips_copy_pickle_and_process_pools():
    import concurrent.futures
    import copy
    import pickle

    e = raises_rearr(_worker_error, "RA302")
    for twin in (copy.copy(e), copy.deepcopy(e), pickle.loads(pickle.dumps(e))):
        assert type(twin) is RearrError and str(twin) == str(e), str(twin)
        assert (twin.code, twin.message, twin.col, twin.hint, twin.shape, twin.op) == \
            (e.code, e.message, e.col, e.hint, e.shape, e.op)
    with concurrent.futures.ProcessPoolExecutor(1) as pool:
        with pytest.raises(RearrError) as info:
            pool.submit(_worker_error).result()
    assert str(info.value) == str(e)
    assert not str(e).startswith("RA100: RA302")


def test_rearr_error_is_a_runtime_error_and_a_value_error():
    # einops' EinopsError is a RuntimeError: code that catches it keeps working after a migration.
    for kind in (RuntimeError, ValueError):
        with pytest.raises(kind):
            rearr.rearrange(np.zeros(5), "(a b) -> a b", a=2)


@pytest.mark.parametrize("pattern, col", [("a\tb -> c", 8), ("a\t\tb c -> b", 4), ("字 b -> b q", 9),
                                          ("\tab -> cd", 7)])
def test_caret_lines_up_under_tabs_and_wide_characters(pattern, col):
    lines = str(RearrError("x", pattern=pattern, col=col, op="rearrange")).splitlines()
    text, caret = lines[1], lines[2]
    assert caret.endswith("^")

    def screen(s: str) -> int:  # the column a terminal shows, with 8-column tab stops
        out = 0
        for ch in s:
            out = (out // 8 + 1) * 8 if ch == "\t" else out + (2 if ch == "字" else 1)
        return out

    prefix = text[: text.index(pattern)]
    assert screen(caret[:-1]) == screen(prefix + pattern[:col])


SCATTER = {"numpy": lambda x, r, **kw: rearr.scatter(x, "k -> n[i]", r, i=np.array([0, 0, 1, 1]), n=3, **kw),
           "torch": lambda x, r, **kw: rearr.scatter(x, "k -> n[i]", r, i=torch.tensor([0, 0, 1, 1]), n=3, **kw)}


@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_scatter_max_min_of_complex_is_ra400(backend, dtype, reduction):
    # numpy leaked "Invalid integer data type 'c'", torch NotImplementedError: the policy copy that was missed.
    x = np.arange(4).astype(dtype)
    raises_rearr(lambda: SCATTER[backend](x if backend == "numpy" else torch.from_numpy(x), reduction), "RA400")


@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", ["datetime64[s]", "timedelta64[s]", "object", "<U3"])
def test_scatter_and_reduce_of_non_numbers_is_a_rearr_error(dtype, reduction):
    # numpy leaked "Invalid integer data type 'M'" (scatter max) and UFuncTypeError (sum of datetimes).
    x = np.arange(4).astype(dtype)
    e = raises_rearr(lambda: SCATTER["numpy"](x, reduction))
    assert e.code in ("RA400", "RA500")
    raises_rearr(lambda: rearr.reduce(x, "(a b) -> a", reduction, a=2))
    # Moving values is fine on numpy: rearrange, gather, scatter 'set'.
    np.testing.assert_array_equal(rearr.rearrange(x, "(a b) -> b a", a=2), x.reshape(2, 2).T)
    np.testing.assert_array_equal(rearr.rearrange(x, "n[i] -> k", i=np.array([3, 0])), x[[3, 0]])
    out = rearr.scatter(x, "k -> n[i]", "set", i=np.array([3, 2, 1, 0]), n=4)
    np.testing.assert_array_equal(out, x[::-1])
    fix = SCATTER["numpy"](x.astype("datetime64[s]").view("i8"), "max") if dtype.startswith("datetime") else None
    assert fix is None or fix.dtype == np.int64


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype, fill", [("int8", 300), ("int8", -129), ("uint8", -1), ("uint8", 256),
                                         ("int64", 2.5), ("int32", float("nan")), ("int16", float("inf")),
                                         ("bool", 2), ("float16", 1e6), ("float32", 1e300), ("float64", 1j),
                                         ("int64", 2**63)])
@pytest.mark.parametrize("reduction", ["sum", "max", "set"])
def test_scatter_fill_that_the_dtype_cannot_hold_is_ra500(backend, dtype, fill, reduction):
    # int8 fill=300 leaked OverflowError/RuntimeError; uint8 fill=-1 became 255 silently on torch;
    # fill=2.5 into int became 2 silently on both.
    x = np.arange(4).astype(dtype) if reduction == "set" else np.ones(4, dtype=dtype)
    i = np.array([0, 1, 2, 3]) if reduction == "set" else np.array([0, 0, 1, 1])
    src, idx = (x, i) if backend == "numpy" else (torch.from_numpy(x), torch.from_numpy(i))
    e = raises_rearr(lambda: rearr.scatter(src, "k -> n[i]", reduction, i=idx, n=5, fill=fill), "RA500")
    assert "fill=" in e.message


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype, fill, held", [("int8", 127, 127), ("uint8", 255, 255), ("int64", 2.0, 2),
                                               ("float16", float("-inf"), float("-inf")), ("bool", 1, True),
                                               ("complex64", 1 + 2j, 1 + 2j), ("float32", 3 + 0j, 3.0),
                                               ("int64", -(2**63), -(2**63))])
def test_scatter_fill_that_the_dtype_holds_is_kept_exactly(backend, dtype, fill, held):
    x = np.ones(2, dtype=dtype)
    src = x if backend == "numpy" else torch.from_numpy(x)
    i = np.array([0, 0]) if backend == "numpy" else torch.tensor([0, 0])
    reduction = "sum" if dtype.startswith("complex") else "max"
    out = to_numpy(rearr.scatter(src, "k -> n[i]", reduction, i=i, n=3, fill=fill))
    assert out.dtype == x.dtype and out[1] == held and out[2] == held


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_scatter_result_too_many_bytes_is_ra305(backend):
    # numpy said "array is too big": 2**60 elements fit int64, 2**63 bytes do not.
    x = np.ones(4) if backend == "numpy" else torch.ones(4, dtype=torch.float64)
    i = np.array([0, 0, 1, 1]) if backend == "numpy" else torch.tensor([0, 0, 1, 1])
    e = raises_rearr(lambda: rearr.scatter(x, "k -> n[i]", "sum", i=i, n=2**60), "RA305")
    assert "bytes" in e.message


def test_dtype_rules_live_in_one_place():
    # The founders' rule: integer mean and complex min/max are decided by rearr.planning.policy, not per backend.
    import inspect

    import rearr.backends._common as common
    import rearr.backends.numpy as nb
    import rearr.backends.torch as tb
    for module in (nb, tb, common):
        source = inspect.getsource(module)
        assert "mean_of_integers" not in source and "complex_order" not in source and "iscomplex" not in source


# --- torch dtypes and layouts that torch stores but runs few ops on ------------------------------


TORCH_STORED = ["uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("dtype", TORCH_STORED)
def test_torch_stored_only_dtypes_rearrange_or_refuse(dtype):
    x = torch.arange(6).reshape(2, 3).to(getattr(torch, dtype))
    out = rearr.rearrange(x, "a b -> b a")
    assert out.dtype == x.dtype and torch.equal(out.view(torch.uint8) if out.element_size() == 1 else out,
                                                x.t().view(torch.uint8) if x.element_size() == 1 else x.t())
    assert rearr.repeat(x, "a b -> a b r", r=2).shape == (2, 3, 2)
    for call in (lambda: rearr.reduce(x, "a b -> a", "sum"), lambda: rearr.reduce(x, "a b -> a", "max"),
                 lambda: rearr.rearrange(x, "a n[i] -> a k", i=torch.zeros(2, 2, dtype=torch.long)),
                 lambda: rearr.scatter(x, "a k -> a n[i]", "set", i=torch.zeros(2, 3, dtype=torch.long), n=4)):
        e = raises_rearr(call, "RA500")
        assert "convert" in e.hint


def test_torch_quantized_tensor_rearranges_and_refuses_arithmetic():
    x = torch.quantize_per_tensor(torch.randn(4, 6), 0.1, 0, torch.qint8)
    out = rearr.rearrange(x, "a (b c) -> c a b", c=2)
    assert torch.equal(out.dequantize(), x.dequantize().reshape(4, 3, 2).permute(2, 0, 1))
    raises_rearr(lambda: rearr.reduce(x, "a b -> a", "sum"), "RA500")


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr", "nested"])
def test_torch_sparse_and_nested_tensors_work_or_refuse(layout):
    dense = torch.randn(4, 6)
    x = {"sparse_coo": dense.to_sparse, "sparse_csr": dense.to_sparse_csr,
         "nested": lambda: torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(3, 3)])}[layout]()
    calls = {"transpose": (lambda t: rearr.rearrange(t, "a b -> b a"), lambda d: d.t()),
             "split": (lambda t: rearr.rearrange(t, "a (b c) -> a b c", c=2), lambda d: d.reshape(4, 3, 2)),
             "reduce": (lambda t: rearr.reduce(t, "a b -> a", "sum"), lambda d: d.sum(1)),
             "gather": (lambda t: rearr.rearrange(t, "a n[i] -> a k", i=torch.zeros(4, 2, dtype=torch.long)),
                        lambda d: d[:, [0, 0]]),
             "scatter": (lambda t: rearr.scatter(t, "a k -> a n[i]", "sum", i=torch.zeros(4, 6, dtype=torch.long),
                                                 n=2), None)}
    for name, (call, expect) in calls.items():
        got = outcome(lambda c=call: c(x))
        if isinstance(got, RearrError):
            assert got.code == "RA500" and "dense" in got.hint, name
        else:
            assert layout != "nested"
            result = got.to_dense() if got.layout != torch.strided else got
            torch.testing.assert_close(result, expect(dense), msg=name)


def test_torch_inference_tensor_as_into():
    with torch.inference_mode():
        into = torch.zeros(4, 3)
    src, i = torch.ones(4, 6, requires_grad=True), torch.zeros(4, 6, dtype=torch.long)
    e = raises_rearr(lambda: rearr.scatter(src, "a k -> a n[i]", "sum", i=i, into=into), "RA500")
    assert "into=into.clone()" in e.hint
    out = rearr.scatter(src, "a k -> a n[i]", "sum", i=i, into=into.clone())  # the hint, applied
    out.sum().backward()
    assert torch.equal(out[:, 0], torch.full((4,), 6.0)) and src.grad is not None
    with torch.no_grad():
        assert torch.equal(rearr.scatter(src, "a k -> a n[i]", "sum", i=i, into=into)[:, 0], torch.full((4,), 6.0))


# --- lengths as 0-d arrays and tensors -------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("length", [np.array(2), np.array(2, dtype=np.uint8), torch.tensor(2),
                                    torch.tensor(2, dtype=torch.int32)], ids=repr)
def test_zero_d_integer_lengths_are_accepted_as_einops_accepts_them(backend, length):
    x = np.arange(12.0).reshape(6, 2) if backend == "numpy" else torch.arange(12.0).reshape(6, 2)
    out = rearr.rearrange(x, "(a c) d -> a c d", c=length)
    assert tuple(out.shape) == (3, 2, 2)
    assert tuple(rearr.repeat(x, "n d -> n d r", r=length).shape) == (6, 2, 2)
    idx = np.array([1, 0]) if backend == "numpy" else torch.tensor([1, 0])
    assert tuple(rearr.scatter(x, "n d -> n m[i: d]", "sum", i=idx, m=length).shape) == (6, 2)
    before = rearr.run.cache.unindexed.cache_info().currsize
    rearr.rearrange(x, "(a c) d -> a c d", c=2)  # keyed on the int: no new plan
    assert rearr.run.cache.unindexed.cache_info().currsize == before
    np.testing.assert_array_equal(to_numpy(out), to_numpy(rearr.rearrange(x, "(a c) d -> a c d", c=2)))


@pytest.mark.parametrize("length", [np.array(2.0), torch.tensor(2.0), np.array(True), torch.tensor(True),
                                    torch.tensor([2]), np.array([2]), np.array(-1), torch.tensor(-3)], ids=repr)
def test_zero_d_lengths_that_are_not_non_negative_integers_are_ra305(length):
    raises_rearr(lambda: rearr.rearrange(np.zeros(6), "(a c) -> a c", c=length), "RA305")


def test_shape_under_jit_trace_is_a_length():
    def f(x):
        return rearr.rearrange(x, "(a c) d -> a c d", c=x.shape[1])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarning: the length is a constant of the trace
        traced = torch.jit.trace(f, torch.zeros(4, 2))
    assert tuple(traced(torch.arange(8.0).reshape(4, 2)).shape) == (2, 2, 2)


# --- fix hints that work when applied ------------------------------------------------------------------


HINT_CASES = [  # (pattern, input shape, index shape); each fails, and its hint is applied
    ("b n[i] -> b k", (2, 3), (5, 3)),  # the index is longer than the tensor along b
    ("b n[i] c -> b k c", (2, 3, 4), (5, 3, 4)),
    ("b n[i] -> b k", (2, 3), ()),  # 0-d index: '[i:]'
    ("b n[i] -> b", (2, 3), ()),
    ("b n[i] c -> b k c", (2, 3, 4), ()),
    ("b n[i] -> b", (2, 3), (2, 2, 2)),  # more axes than the output has
    ("b n[i] -> b k", (2, 3), (2, 3, 2)),
    ("b n[i] -> b", (2, 3), (5, 3)),
    ("b n[i] -> b", (2, 3), (2, 1)),
    ("b n[i] c -> b k c", (2, 3, 4), (2, 4)),  # fewer axes: declared
    ("b n[i] -> b k", (3, 5), (2, 4)),  # shorter than the tensor: slice the tensor
]


def _apply_hint(hint: str, pattern: str, x, i):
    import re
    sliced = re.search(r"pass i=i(\[[^\]]*\])", hint)
    if sliced:
        return pattern, x, eval(f"i{sliced.group(1)}")  # noqa: S307 -- a slice of our own hint
    cut = re.search(r"e\.g\. x(\[[^\]]*\])", hint)
    if cut:
        return pattern, eval(f"x{cut.group(1)}"), i  # noqa: S307
    quoted = re.findall(r"'([^']*->[^']*)'", hint)
    assert quoted, hint
    return quoted[-1], x, i


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("pattern, shape, index_shape", HINT_CASES)
def test_index_fix_hints_work_when_applied(backend, pattern, shape, index_shape):
    x = rng.standard_normal(shape)
    i = rng.integers(0, shape[1], size=index_shape)
    if backend == "torch":
        x, i = torch.from_numpy(x), torch.from_numpy(i)
    e = raises_rearr(lambda: rearr.rearrange(x, pattern, i=i))
    assert e.code in ("RA303", "RA304"), e
    fixed, x2, i2 = _apply_hint(e.hint, pattern, x, i)
    out = outcome(lambda: rearr.rearrange(x2, fixed, i=i2))
    assert not isinstance(out, RearrError), f"hint {e.hint!r} applied: {out}"
    n = np.asarray(to_numpy(x2))
    idx = np.asarray(to_numpy(i2))
    assert_matches(out, reference("rearrange", n, fixed, i=idx))


def test_misspelt_index_keyword_names_the_index_and_the_rename_works():
    x, i = np.arange(6.0).reshape(2, 3), np.array([2, 0])
    e = raises_rearr(lambda: rearr.rearrange(x, "b n[idx] -> b", idz=i), "RA300")
    assert "'idx'" in e.message and "rename it to idx=" in e.hint
    assert e.col == "b n[idx] -> b".index("idx")
    np.testing.assert_array_equal(rearr.rearrange(x, "b n[idx] -> b", idx=i), [2.0, 3.0])
    e = raises_rearr(lambda: rearr.scatter(x, "b k -> b m[j]", "sum", jj=np.zeros((2, 3), dtype=int), m=2), "RA300")
    assert "rename it to j=" in e.hint


@pytest.mark.parametrize("pattern, shape, c", [("h -> (h c)", (1,), 3), ("h -> (h c)", (4,), 3),
                                               ("h -> (h c)", (4,), 1), ("h -> (c h)", (1,), 3),
                                               ("h -> (c h)", (4,), 3), ("h -> h c", (4,), 3),
                                               ("a b -> (a c) b", (1, 3), 2), ("a b -> (a c) b", (2, 3), 2),
                                               ("a b -> a (b c)", (2, 1), 5)])
def test_repeat_is_writable_exactly_when_explain_says_it_copies(pattern, shape, c):
    # On numpy every repeat is a new, writable array, as einops' np.tile (h = 1 or c = 1 included: it was
    # once a read-only stride-0 view, or a view of x); on torch a stride-0 view where strides allow it,
    # as einops' expand. explain says which, for the backend it is asked about.
    x = np.arange(math.prod(shape)).reshape(shape)
    out = rearr.repeat(x, pattern, c=c)
    assert "result: a new tensor" in str(rearr.explain(pattern, shape, op="repeat", backend="numpy", c=c))
    assert out.flags.writeable and not np.shares_memory(out, x)
    t = torch.from_numpy(x)
    is_view = "result: a view" in str(rearr.explain(pattern, shape, op="repeat", c=c))
    out = rearr.repeat(t, pattern, c=c)
    assert (out.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()) == is_view
