"""Gather and scatter: one semantics on numpy and torch, checked against hand-written code."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _backends import backends, to_backend, to_numpy

import rearr

RNG = np.random.default_rng(0)
B, N, C, K = 3, 6, 4, 5


def _x(*shape, dtype=np.float64):
    return (RNG.random(shape) * 10).astype(dtype)


def _i(high, *shape, low=0):
    return RNG.integers(low, high, shape)


def _run(fn, backend, x, pattern, /, *args, **kwargs):
    kwargs = {k: to_backend(v, backend) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    return to_numpy(fn(to_backend(x, backend), pattern, *args, **kwargs))


# --- gather -----------------------------------------------------------------------

GATHERS = [
    # one element per row
    ("b n[idx] -> b", (B, N), {"idx": (N, B)}, lambda x, i: x[np.arange(B), i["idx"]]),
    # two (K) per row
    ("b n[idx] -> b k", (B, N), {"idx": (N, B, K)}, lambda x, i: np.take_along_axis(x, i["idx"], 1)),
    # index shared across c: declared axes, broadcast (rows move: index_select)
    ("b n[idx: b k] c -> b k c", (B, N, C), {"idx": (N, B, K)},
     lambda x, i: np.take_along_axis(x, i["idx"][:, :, None], 1)),
    # full per-element index (torch.gather's own rule)
    ("b n[idx] c -> b k c", (B, N, C), {"idx": (N, B, K, C)}, lambda x, i: np.take_along_axis(x, i["idx"], 1)),
    # one index shared by all rows
    ("b n[idx: k] -> b k", (B, N), {"idx": (N, K)}, lambda x, i: x[:, i["idx"]]),
    # gather along the last axis with a free axis before it (gather along, index expanded)
    ("b c n[idx: b k] -> b c k", (B, C, N), {"idx": (N, B, K)},
     lambda x, i: np.take_along_axis(x, i["idx"][:, None, :], 2)),
    # embedding look-up
    ("v[ids: b t] d -> b t d", (N, C), {"ids": (N, B, K)}, lambda x, i: x[i["ids"]]),
    # pixels at (y, x), per batch: two indexed axes
    ("b h[y: b p] w[x: b p] c -> b p c", (B, N, 7, C), {"y": (N, B, K), "x": (7, B, K)},
     lambda x, i: x[np.arange(B)[:, None], i["y"], i["x"]]),
    # two indexed axes with a free axis between them: advanced indexing
    ("h[y: p] c w[x: p] -> p c", (N, C, 7), {"y": (N, K), "x": (7, K)},
     lambda x, i: x[i["y"], :, i["x"]]),
    # combined with groups and a permuted output
    ("b n[idx: b k] (h w) -> w (b k) h", (B, N, 6), {"idx": (N, B, K)},
     lambda x, i: np.take_along_axis(x, i["idx"][:, :, None], 1).reshape(B, K, 2, 3).transpose(3, 0, 1, 2)
     .reshape(3, B * K, 2)),
    # with an ellipsis
    ("... n[idx: k] -> ... k", (B, 2, N), {"idx": (N, K)}, lambda x, i: x[..., i["idx"]]),
]


def _indices(spec):
    return {name: _i(high, *shape, low=-high) for name, (high, *shape) in spec.items()}


@backends
@pytest.mark.parametrize("pattern, shape, idx_spec, expected", GATHERS)
def test_gather(backend, pattern, shape, idx_spec, expected):
    x = _x(*shape)
    idx = _indices(idx_spec)
    lengths = {"h": 2} if "(h w)" in pattern else {}
    got = _run(rearr.rearrange, backend, x, pattern, **idx, **lengths)
    positive = {k: np.where(v < 0, v + idx_spec[k][0], v) for k, v in idx.items()}
    np.testing.assert_array_equal(got, expected(x, positive))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("pattern, shape, idx_spec, expected", GATHERS)
def test_gather_numpy_equals_torch(pattern, shape, idx_spec, expected, dtype):
    x = _x(*shape, dtype=dtype)
    idx = _indices(idx_spec)
    lengths = {"h": 2} if "(h w)" in pattern else {}
    a = _run(rearr.rearrange, "numpy", x, pattern, **idx, **lengths)
    b = _run(rearr.rearrange, "torch", x, pattern, **idx, **lengths)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


@backends
def test_gather_without_bounds_check(backend):
    x, idx = _x(B, N, C), _i(N, B, K)
    got = _run(rearr.rearrange, backend, x, "b n[idx: b k] c -> b k c", idx=idx, check_bounds=False)
    np.testing.assert_array_equal(got, np.take_along_axis(x, idx[:, :, None], 1))


@backends
def test_truncation_pitfall_is_an_error(backend):
    # torch.gather would silently use only the first rows of a smaller index
    x, idx = _x(B, N, C), _i(N, B - 1, K, C)
    with pytest.raises(rearr.RearrError) as info:
        _run(rearr.rearrange, backend, x, "b n[idx] c -> b k c", idx=idx)
    assert info.value.code == "RA303" and "never truncated" in info.value.hint


@backends
def test_broadcast_pitfall_is_an_error_naming_the_explicit_pattern(backend):
    # np.take_along_axis would silently broadcast a length-1 index axis
    x, idx = _x(B, N, C), _i(N, B, K, 1)
    with pytest.raises(rearr.RearrError) as info:
        _run(rearr.rearrange, backend, x, "b n[idx] c -> b k c", idx=idx)
    assert "'b n[idx: b k] c -> b k c'" in info.value.hint


@backends
def test_wrong_number_of_index_dimensions_suggests_the_axes(backend):
    with pytest.raises(rearr.RearrError) as info:
        _run(rearr.rearrange, backend, _x(B, N, C), "b n[idx] c -> b k c", idx=_i(N, B, K))
    assert info.value.code == "RA304" and "'b n[idx: b k] c -> b k c'" in info.value.hint


@backends
@pytest.mark.parametrize("bad", [N, -N - 1, 100])
def test_out_of_range_names_index_axis_length_and_value(backend, bad):
    idx = _i(N, B, K)
    idx[1, 2] = bad
    with pytest.raises(rearr.RearrError) as info:
        _run(rearr.rearrange, backend, _x(B, N, C), "b n[idx: b k] c -> b k c", idx=idx)
    msg = str(info.value)
    assert f"'idx' holds {bad} at position (1, 2)" in msg and "'n' of length 6" in msg
    assert info.value.code == "RA501"


@backends
@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
def test_non_integer_index_is_an_error(backend, dtype):
    with pytest.raises(rearr.RearrError, match="an index holds integers"):
        _run(rearr.rearrange, backend, _x(B, N), "b n[idx] -> b", idx=np.zeros(B, dtype=dtype))


def test_index_may_be_a_list_or_another_int_dtype():
    x = torch.arange(12.0).reshape(3, 4)
    assert rearr.rearrange(x, "b n[idx] -> b", idx=[0, 1, -1]).tolist() == [0.0, 5.0, 11.0]
    assert rearr.rearrange(x, "b n[idx] -> b", idx=torch.tensor([0, 1, 3], dtype=torch.int32)).tolist() == [
        0.0, 5.0, 11.0]


def test_brackets_need_axes_when_both_sides_are_indexed():
    with pytest.raises(rearr.RearrError, match="written out"):
        rearr.scatter(np.zeros((3, 2)), "v[src] c -> v[dst] c", "sum", src=[0], dst=[0])


# --- scatter ----------------------------------------------------------------------

def _np_scatter(reduction, out_shape, target, values, fill=0.0, into=None):
    """Hand-written reference: target is a tuple of index arrays into out, values broadcast alike."""
    out = np.full(out_shape, np.nan)
    groups: dict = {}
    for pos in np.ndindex(values.shape):
        key = tuple(int(t[pos]) for t in target)
        groups.setdefault(key, []).append(values[pos])
    result = np.full(out_shape, fill, dtype=float) if into is None else into.astype(float).copy()
    for key, vals in groups.items():
        vals = ([result[key]] if into is not None else []) + vals
        result[key] = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
                       "set": lambda v: v[-1]}[reduction](vals)
    del out
    return result


SCATTER_REDUCTIONS = ["sum", "mean", "max", "min", "prod"]


@backends
@pytest.mark.parametrize("reduction", SCATTER_REDUCTIONS)
@pytest.mark.parametrize("fill", [0, -7.5])
def test_scatter_rows_with_duplicates(backend, reduction, fill):
    src, idx = _x(B, K, C), _i(N, B, K)
    idx[0, :3] = 2  # duplicates
    got = _run(rearr.scatter, backend, src, "b k c -> b n[idx: b k] c", reduction, idx=idx, n=N, fill=fill)
    target = (np.arange(B)[:, None, None], idx[:, :, None], np.arange(C)[None, None, :])
    target = tuple(np.broadcast_to(t, src.shape) for t in target)
    np.testing.assert_allclose(got, _np_scatter(reduction, (B, N, C), target, src, fill))


@backends
@pytest.mark.parametrize("reduction", SCATTER_REDUCTIONS)
def test_scatter_along_per_element_index(backend, reduction):
    src, idx = _x(B, K, C), _i(N, B, K, C)
    got = _run(rearr.scatter, backend, src, "b k c -> b n[idx] c", reduction, idx=idx, n=N, fill=3.0)
    target = (np.broadcast_to(np.arange(B)[:, None, None], src.shape), idx,
              np.broadcast_to(np.arange(C), src.shape))
    np.testing.assert_allclose(got, _np_scatter(reduction, (B, N, C), target, src, 3.0))


@backends
def test_column_merge(backend):
    src = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    got = _run(rearr.scatter, backend, src, "r c -> r m[idx: c]", "sum", idx=np.array([0, 1, 1]), m=2)
    np.testing.assert_array_equal(got, [[1.0, 5.0], [4.0, 11.0]])


@backends
def test_set_with_unique_indices_and_error_on_duplicates(backend):
    src = np.array([10.0, 20.0, 30.0])
    got = _run(rearr.scatter, backend, src, "k -> n[idx]", "set", idx=np.array([3, 0, -1]), n=5, fill=-1)
    np.testing.assert_array_equal(got, [20.0, -1, -1, 10.0, 30.0])
    with pytest.raises(rearr.RearrError, match="more than once under 'set'"):
        _run(rearr.scatter, backend, src, "k -> n[idx]", "set", idx=np.array([3, 0, 3]), n=5)
    per_element = np.array([[0, 1], [1, 1]])
    with pytest.raises(rearr.RearrError, match="more than once under 'set'"):
        _run(rearr.scatter, backend, np.ones((2, 2)), "b k -> b n[idx]", "set", idx=per_element, n=3)


@backends
@pytest.mark.parametrize("reduction", SCATTER_REDUCTIONS + ["set"])
def test_into_takes_part_like_include_self(backend, reduction):
    src, idx = _x(B, K), np.array([[0, 0, 1, 2, 2], [1, 1, 1, 1, 1], [0, 1, 2, 3, 4]])
    if reduction == "set":
        idx = np.array([[0, 1, 2, 3, 4]] * B)
    into = _x(B, N)
    into_copy = into.copy()
    got = _run(rearr.scatter, backend, src, "b k -> b n[idx]", reduction, idx=idx, into=into)
    target = (np.broadcast_to(np.arange(B)[:, None], src.shape), idx)
    np.testing.assert_allclose(got, _np_scatter(reduction, (B, N), target, src, into=into))
    np.testing.assert_array_equal(into, into_copy)


@backends
def test_message_passing_mean(backend):
    V, E = 5, 9
    x, s, d = _x(V, C), _i(V, E), _i(V, E)
    got = _run(rearr.scatter, backend, x, "v[src: e] c -> v[dst: e] c", "mean", src=s, dst=d)
    target = (np.broadcast_to(d[:, None], (E, C)), np.broadcast_to(np.arange(C), (E, C)))
    np.testing.assert_allclose(got, _np_scatter("mean", (V, C), target, x[s]))


@pytest.mark.parametrize("reduction", SCATTER_REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("pattern, idx_shape", [("b k c -> b n[idx: b k] c", (B, K)),
                                                ("b k c -> b n[idx] c", (B, K, C))])
def test_scatter_numpy_equals_torch(reduction, dtype, pattern, idx_shape):
    if reduction == "mean" and dtype == np.int64:
        pytest.skip("integer mean is an error, tested below")
    src, idx = _x(B, K, C, dtype=dtype), _i(N, *idx_shape)
    a = _run(rearr.scatter, "numpy", src, pattern, reduction, idx=idx, n=N, fill=1)
    b = _run(rearr.scatter, "torch", src, pattern, reduction, idx=idx, n=N, fill=1)
    assert a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=1e-6)


@backends
def test_integer_scatter_mean_is_an_error(backend):
    with pytest.raises(rearr.RearrError, match="cast to a floating dtype"):
        _run(rearr.scatter, backend, np.ones((2, 3), dtype=np.int64), "b k -> b n[idx]", "mean",
             idx=np.zeros((2, 3), dtype=np.int64), n=2)


@backends
def test_scatter_needs_the_written_length(backend):
    with pytest.raises(rearr.RearrError) as info:
        _run(rearr.scatter, backend, _x(B, K), "b k -> b n[idx]", "sum", idx=_i(N, B, K))
    assert info.value.code == "RA301" and "n=" in info.value.hint


def test_scatter_bad_reduction_and_options():
    with pytest.raises(rearr.RearrError, match="sum, mean, max, min, prod, set"):
        rearr.scatter(np.ones(3), "k -> n[idx]", "any", idx=[0, 1, 2], n=3)
    with pytest.raises(rearr.RearrError, match="exclude each other"):
        rearr.scatter(np.ones(3), "k -> n[idx]", "sum", idx=[0, 1, 2], into=np.zeros(3), fill=1)


@backends
@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_inputs_are_never_modified(backend, op):
    x, idx = _x(B, N, C), _i(N, B, K, low=-N)
    xs, ids = to_backend(x, backend), to_backend(idx, backend)
    x_before, idx_before = to_numpy(xs).copy(), to_numpy(ids).copy()
    if op == "gather":
        rearr.rearrange(xs, "b n[idx: b k] c -> b k c", idx=ids)
    else:
        rearr.scatter(xs, "b n c -> b m[idx: b n] c", "max", idx=to_backend(_i(3, B, N, low=-3), backend), m=3,
                      into=to_backend(_x(B, 3, C), backend))
    np.testing.assert_array_equal(to_numpy(xs), x_before)
    np.testing.assert_array_equal(to_numpy(ids), idx_before)


# --- gradients (torch) ------------------------------------------------------------

def test_gradients_through_gather():
    x = torch.rand(B, N, C, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor(_i(N, B, K))
    assert torch.autograd.gradcheck(lambda t: rearr.rearrange(t, "b n[idx: b k] c -> b k c", idx=idx), (x,))
    full = torch.tensor(_i(N, B, K, C))
    assert torch.autograd.gradcheck(lambda t: rearr.rearrange(t, "b n[idx] c -> b k c", idx=full), (x,))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("pattern, idx", [("b k c -> b n[idx: b k] c", _i(N, B, K)),
                                          ("b k c -> b n[idx] c", _i(N, B, K, C))])
def test_gradients_through_scatter_to_src_and_into(reduction, pattern, idx):
    src = torch.rand(B, K, C, dtype=torch.float64, requires_grad=True)
    into = torch.rand(B, N, C, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor(idx)
    assert torch.autograd.gradcheck(lambda s: rearr.scatter(s, pattern, reduction, idx=idx, n=N), (src,))
    assert torch.autograd.gradcheck(lambda s, t: rearr.scatter(s, pattern, reduction, idx=idx, into=t), (src, into))


@pytest.fixture(params=["small", "rows", "flat"])
def strategy(request, monkeypatch):
    """Run a test with the default lowering for small tensors, with the row lowering forced, and with
    numpy's scatter along an axis on flat positions (its lowering above _SMALL_SCATTER elements)."""
    from rearr.backends import numpy as numpy_backend
    from rearr.planning import planner
    from rearr.run import cache

    if request.param == "rows":
        monkeypatch.setattr(planner, "ROWS_MIN_ELEMENTS", 0)
    if request.param == "flat":
        monkeypatch.setattr(numpy_backend, "_SMALL_SCATTER", 0)
    cache.unindexed.cache_clear()
    cache.indexed.cache_clear()
    cache.direct.cache_clear()
    yield request.param
    cache.unindexed.cache_clear()
    cache.indexed.cache_clear()
    cache.direct.cache_clear()


@backends
@pytest.mark.parametrize("pattern, shape, idx_spec, expected", GATHERS)
def test_gather_under_both_lowerings(backend, strategy, pattern, shape, idx_spec, expected):
    test_gather(backend, pattern, shape, idx_spec, expected)


@backends
@pytest.mark.parametrize("reduction", SCATTER_REDUCTIONS + ["set"])
def test_scatter_under_both_lowerings(backend, strategy, reduction):
    src = _x(B, K, C)
    idx = np.array([[0, 1, 2, 3, 4], [5, 4, 3, 2, 1], [1, 2, 3, 4, 5]])
    if reduction != "set":
        idx[0, 1] = 0
    for fill in (0, 2.5):
        got = _run(rearr.scatter, backend, src, "b k c -> b n[idx: b k] c", reduction, idx=idx, n=N, fill=fill)
        target = tuple(np.broadcast_to(t, src.shape) for t in
                       (np.arange(B)[:, None, None], idx[:, :, None], np.arange(C)[None, None, :]))
        np.testing.assert_allclose(got, _np_scatter(reduction, (B, N, C), target, src, fill))
    into = _x(B, N, C)
    got = _run(rearr.scatter, backend, src, "b k c -> b n[idx: b k] c", reduction, idx=idx, into=into)
    target = tuple(np.broadcast_to(t, src.shape) for t in
                   (np.arange(B)[:, None, None], idx[:, :, None], np.arange(C)[None, None, :]))
    np.testing.assert_allclose(got, _np_scatter(reduction, (B, N, C), target, src, into=into))


def test_lowering_is_chosen_by_size():
    from rearr.planning import plan, planner
    from rearr.rules import recipe

    r = recipe.analyze("b n[idx: b k] c -> b k c", "rearrange", None, ("idx",))
    small = planner.plan(r, (2, 8, 4), (), (("idx", (2, 3)),))
    large = planner.plan(r, (64, 4096, 64), (), (("idx", (64, 1024)),))
    assert any(isinstance(s, plan.GatherAlong) for s in small.steps)
    assert any(isinstance(s, plan.TakeRows) for s in large.steps)
    assert large.steps[0] == plan.Reshape((64 * 4096, 64), True)  # a view: rows move, x is not copied


# --- index names that are also the call's own values --------------------------------


@backends
def test_an_index_named_text_keeps_the_pattern_in_errors(backend):
    """The index environment once kept the pattern under "text": an index of that name replaced it."""
    pattern = "b k -> b n[text]"
    idx = to_backend(np.zeros((2, 3), dtype=np.int64), backend)
    with pytest.raises(rearr.RearrError) as info:
        rearr.scatter(to_backend(np.ones((2, 3)), backend), pattern, "set", n=4, text=idx)
    assert info.value.pattern == pattern
    assert "more than once under 'set'" in info.value.message


@backends
@pytest.mark.parametrize("reduction", ["sum", "set", "max"])
def test_a_scatter_index_named_text_writes_where_it_says(backend, reduction):
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[3, 0, 1], [2, 1, 0]])
    got = rearr.scatter(to_backend(x, backend), "b k -> b n[text]", reduction, n=5, fill=-1.0,
                        text=to_backend(idx, backend))
    want = np.full((2, 5), -1.0)
    for b in range(2):
        want[b, idx[b]] = x[b]
    np.testing.assert_array_equal(to_numpy(got), want)


@backends
def test_gather_indices_named_text_fill_and_into(backend):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5, 3))
    text, fill, into = rng.integers(0, 4, 6), rng.integers(0, 5, 6), rng.integers(0, 3, 6)
    got = rearr.rearrange(to_backend(x, backend), "h[text: p] w[fill: p] c[into: p] -> p",
                          text=to_backend(text, backend), fill=to_backend(fill, backend),
                          into=to_backend(into, backend))
    np.testing.assert_array_equal(to_numpy(got), x[text, fill, into])


@pytest.mark.parametrize("op, name", [("scatter", "fill"), ("scatter", "into"), ("scatter", "check_bounds"),
                                      ("rearrange", "check_bounds")])
def test_an_index_named_like_the_calls_own_keyword_is_refused_with_a_fix_that_works(op, name):
    """scatter(..., fill=idx) would reach fill=, not the index: the pattern is refused, the caret on the index."""
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[1, 0, 2], [2, 2, 0]])
    if op == "scatter":
        pattern, call = f"b k -> b n[{name}]", lambda p, **kw: rearr.scatter(x, p, "sum", n=3, **kw)
    else:
        pattern, call = f"b n[{name}: b k] -> b k", lambda p, **kw: rearr.rearrange(x, p, **kw)
    with pytest.raises(rearr.RearrError) as info:
        call(pattern)
    e = info.value
    assert e.code == "RA204" and pattern[e.col:].startswith(name), (e.col, pattern)
    assert f"{name}_idx=" in e.hint
    fixed = pattern.replace(f"[{name}", f"[{name}_idx")
    got = call(fixed, **{f"{name}_idx": idx})
    want = rearr.scatter(x, "b k -> b n[i]", "sum", n=3, i=idx) if op == "scatter" else np.take_along_axis(x, idx, 1)
    np.testing.assert_array_equal(got, want)


# --- bounds checks left to the native call ----------------------------------------------------
# Where an index is read only by torch.gather / scatter_*_ / x[idx] (numpy: advanced indexing), rearr
# lets the native call refuse a bad value instead of looking at the values first; a refused call runs
# again with rearr's check. These pin what that must keep: rearr's message, negative values counted
# from the end, and the explicit check where a bad value would land in the neighbouring row.

NATIVE_CASES = [  # (op, pattern, x shape, index shape, keywords)
    ("rearrange", "b n[idx] -> b k", (2, 8), (2, 3), {}),  # GatherAlong
    ("rearrange", "n[idx: k] c -> k c", (8, 4), (3,), {}),  # GatherAlong on the first axis
    ("scatter", "b k -> b n[idx]", (2, 3), (2, 3), {"n": 8}),  # ScatterAlong (numpy: flat positions, checked)
    ("scatter", "b k -> b n[idx]", (2, 3), (2, 3), {"n": 8, "reduction": "set"}),  # 'set': checked first
]


def _native_call(backend, op, pattern, shape, idx, kw):
    kw = dict(kw)
    x = to_backend(np.arange(float(np.prod(shape))).reshape(shape), backend)
    if op == "scatter":
        return rearr.scatter(x, pattern, kw.pop("reduction", "sum"), idx=to_backend(idx, backend), **kw)
    return rearr.rearrange(x, pattern, idx=to_backend(idx, backend), **kw)


@backends
@pytest.mark.parametrize("op, pattern, shape, ishape, kw", NATIVE_CASES)
@pytest.mark.parametrize("bad", [8, -9, 1000])
def test_a_bad_value_gets_rearrs_error_where_the_native_call_checks(backend, op, pattern, shape, ishape, kw, bad):
    idx = np.broadcast_to(np.arange(ishape[-1]), ishape).copy()  # unique along the last axis ('set')
    _native_call(backend, op, pattern, shape, idx, kw)  # the plan is cached: the next call takes the fast path
    idx.reshape(-1)[-1] = bad
    at = tuple(int(i) - 1 for i in ishape)
    with pytest.raises(rearr.RearrError) as info:
        _native_call(backend, op, pattern, shape, idx, kw)
    assert info.value.code == "RA501"
    assert f"'idx' holds {bad} at position {at}, outside axis 'n' of length 8" in str(info.value)


@backends
@pytest.mark.parametrize("op, pattern, shape, ishape, kw", NATIVE_CASES)
def test_negative_values_count_from_the_end_where_the_native_call_checks(backend, op, pattern, shape, ishape, kw):
    rng = np.random.default_rng(7)
    if kw.get("reduction") == "set":  # unique positions along n in each row
        idx = np.stack([rng.permutation(8)[: ishape[-1]] for _ in range(ishape[0])])
    else:
        idx = rng.integers(0, 8, ishape)
    want = to_numpy(_native_call(backend, op, pattern, shape, idx, kw))
    np.testing.assert_array_equal(to_numpy(_native_call(backend, op, pattern, shape, idx - 8, kw)), want)
    mixed = np.where(rng.random(ishape) < 0.5, idx - 8, idx)
    np.testing.assert_array_equal(to_numpy(_native_call(backend, op, pattern, shape, mixed, kw)), want)


@backends
def test_a_bad_row_is_refused_before_it_reaches_the_neighbouring_batch(backend, monkeypatch):
    """The row lowering adds b * N to each index: there 8 in batch 0 would read row 0 of batch 1."""
    from rearr.planning import planner
    from rearr.run import cache

    monkeypatch.setattr(planner, "ROWS_MIN_ELEMENTS", 0)
    cache.indexed.cache_clear()
    cache.direct.cache_clear()
    try:
        x = to_backend(np.arange(32.0).reshape(2, 8, 2), backend)
        idx = np.array([[0, 8], [1, 2]])
        with pytest.raises(rearr.RearrError, match="'idx' holds 8 at position \\(0, 1\\)"):
            rearr.rearrange(x, "b n[idx: b k] c -> b k c", idx=to_backend(idx, backend))
    finally:
        cache.indexed.cache_clear()
        cache.direct.cache_clear()


# --- torch's small 'sum' scatter: one zero tensor per plan and dtype, copied by scatter_add ----------


def _scatter_sum(src, idx):
    return rearr.scatter(src, "b k -> b n[idx]", "sum", idx=idx, n=8)


def _scatter_sum_by_hand(src, idx):
    return torch.zeros(src.shape[0], 8, dtype=src.dtype).scatter_add_(1, idx, src)


def test_the_shared_zeros_of_a_small_scatter_stay_zeros_and_results_stay_apart():
    idx = torch.tensor([[0, 0, 7], [1, 2, 2]])
    src = torch.arange(1.0, 7.0).reshape(2, 3)
    first = _scatter_sum(src, idx)
    second = _scatter_sum(src, idx)  # from rearr's table of calls seen before
    assert first.data_ptr() != second.data_ptr()
    first += 100  # the caller owns its result: the next call starts from zeros again
    second[0, 5] = -1
    torch.testing.assert_close(_scatter_sum(src, idx), _scatter_sum_by_hand(src, idx), rtol=0, atol=0)
    torch.testing.assert_close(_scatter_sum(src * 0, idx), torch.zeros(2, 8), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8,
                                   torch.complex64])
def test_the_small_scatter_keeps_one_zero_tensor_per_dtype(dtype):
    idx = torch.tensor([[0, 0, 7], [1, 2, 2]])
    src = torch.arange(1, 7).reshape(2, 3)
    for kind in (torch.float32, dtype, torch.float32, dtype):  # one plan, the dtypes alternating
        s = src.to(kind)
        got = _scatter_sum(s, idx)
        assert got.dtype == kind
        torch.testing.assert_close(got, _scatter_sum_by_hand(s, idx), rtol=0, atol=0)


def test_the_small_scatter_made_under_inference_mode_still_gives_gradients():
    idx = torch.tensor([[0, 0, 7], [1, 2, 2]])
    with torch.inference_mode():  # the first call, which makes the zeros, runs here
        _scatter_sum(torch.ones(2, 3, dtype=torch.float64), idx)
        _scatter_sum(torch.ones(2, 3, dtype=torch.float64), idx)
    src = torch.rand(2, 3, dtype=torch.float64, requires_grad=True)
    out = _scatter_sum(src, idx)
    assert out.requires_grad and not out.is_inference()
    (out * torch.arange(16.0, dtype=torch.float64).reshape(2, 8)).sum().backward()
    torch.testing.assert_close(src.grad, torch.tensor([[0.0, 0, 7], [9, 10, 10]], dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda s: _scatter_sum(s, idx), (src,))


def test_the_small_scatter_under_vmap_and_no_grad():
    idx = torch.tensor([[0, 0, 7], [1, 2, 2]])
    src = torch.rand(4, 2, 3)
    _scatter_sum(src[0], idx)  # cached: the next calls take the fast path where it applies
    want = torch.stack([_scatter_sum_by_hand(s, idx) for s in src])
    torch.testing.assert_close(torch.func.vmap(lambda s: _scatter_sum(s, idx))(src), want)
    with torch.no_grad():
        torch.testing.assert_close(_scatter_sum(src[1], idx), want[1])


def _clear_index_caches():
    from rearr.run import cache

    cache.indexed.cache_clear()
    cache.direct.cache_clear()


def test_the_small_scatter_under_another_default_device():
    """torch.device("meta") as a context makes factory calls without a device= land on meta: the
    shared zeros must still be CPU tensors, made so on the first call there."""
    _clear_index_caches()
    idx = torch.tensor([[0, 0, 7], [1, 2, 2]])
    src = torch.arange(1.0, 7.0, dtype=torch.float64).reshape(2, 3)
    with torch.device("meta"):
        got = _scatter_sum(src, idx)
        again = _scatter_sum(src, idx)
    assert got.device.type == "cpu" and again.device.type == "cpu"
    torch.testing.assert_close(_scatter_sum(src, idx), _scatter_sum_by_hand(src, idx), rtol=0, atol=0)
    torch.testing.assert_close(again, _scatter_sum_by_hand(src, idx), rtol=0, atol=0)


def test_kept_zeros_made_under_fake_tensor_mode_do_not_leak_into_later_eager_calls():
    """A small 'sum' scatter of a real CPU tensor under FakeTensorMode (allow_non_fake_inputs) must
    not leave a FakeTensor as the plan's kept zeros: later eager calls must return real values."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    _clear_index_caches()
    idx = torch.tensor([[0, 1, 1], [2, 0, 0]])
    x = torch.arange(6.0).reshape(2, 3)
    want = torch.zeros(2, 4).scatter_add_(1, idx, x)
    with FakeTensorMode(allow_non_fake_inputs=True):
        rearr.scatter(x, "b k -> b n[idx]", "sum", idx=idx, n=4)
    for _ in range(3):
        got = rearr.scatter(x, "b k -> b n[idx]", "sum", idx=idx, n=4)
        assert type(got) is torch.Tensor, type(got)
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_kept_zeros_made_under_a_device_forcing_function_mode_do_not_leak_into_later_eager_calls():
    """A TorchFunctionMode that sends every factory call to the meta device (as 'empty init' helpers
    do, overriding device=) must not leave meta zeros behind: torch then computes meta + CPU -> meta
    without an error, so every later eager call would silently return a meta tensor with no values."""
    from torch.overrides import TorchFunctionMode

    class AllOnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.zeros:
                kwargs["device"] = "meta"
            return func(*args, **kwargs)

    _clear_index_caches()
    idx = torch.tensor([[0, 1, 1], [2, 0, 0]])
    x = torch.arange(6.0).reshape(2, 3)
    want = torch.zeros(2, 4).scatter_add_(1, idx, x)
    with AllOnMeta():
        rearr.scatter(x, "b k -> b n[idx]", "sum", idx=idx, n=4)
    for _ in range(3):
        got = rearr.scatter(x, "b k -> b n[idx]", "sum", idx=idx, n=4)
        assert got.device.type == "cpu", got.device
        torch.testing.assert_close(got, want, rtol=0, atol=0)
