"""The hot path's plan table (rearr.run.cache.UNINDEXED, a Table): a call seen before is one dict look-up.

The public functions look their call up by (op, pattern, reduction, type, shape, keyword
items) before anything else. These tests pin what that look-up must not change: a value
equal to an int (2.0, True) is still refused, a call whose plan fails on this tensor still
gets rearr's error, and the table stays within its bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rearr
from rearr import RearrError
from rearr.run import cache


@pytest.mark.parametrize("value", [2.0, True, np.float64(2.0)])
def test_a_value_equal_to_an_int_does_not_find_the_ints_plan(value):
    x = np.zeros((4, 3))
    assert rearr.rearrange(x, "(a b) c -> a b c", b=2).shape == (2, 2, 3)  # the int's plan is in the table
    with pytest.raises(RearrError, match="RA305"):
        rearr.rearrange(x, "(a b) c -> a b c", b=value)
    assert rearr.repeat(x, "h w -> h w r", r=2).shape == (4, 3, 2)
    with pytest.raises(RearrError, match="RA305"):
        rearr.repeat(x, "h w -> h w r", r=value)


def test_a_numpy_int_length_uses_the_ints_plan():
    x = np.zeros((4, 3))
    assert rearr.rearrange(x, "(a b) c -> a b c", b=np.int64(2)).shape == (2, 2, 3)
    assert rearr.rearrange(x, "(a b) c -> a b c", b=2).shape == (2, 2, 3)


def test_a_plan_in_the_table_that_fails_on_this_tensor_gives_rearrs_error():
    rearr.reduce(np.zeros((2, 3)), "a b -> a", "mean")  # float: planned and kept
    with pytest.raises(RearrError, match="RA400") as info:  # bool, same type and shape: the same entry
        rearr.reduce(np.zeros((2, 3), dtype=bool), "a b -> a", "mean")
    assert "reduce: a b -> a" in str(info.value)
    dense = torch.zeros(2, 3)
    rearr.rearrange(dense, "a b -> (b a)")
    with pytest.raises(RearrError, match="RA500"):  # sparse: same class and shape as the dense tensor
        rearr.rearrange(dense.to_sparse(), "a b -> (b a)")


def test_an_unhashable_reduction_is_planned_without_the_table():
    class Sum:  # __eq__ without __hash__: unhashable
        def __eq__(self, other):
            return isinstance(other, Sum)

        __hash__ = None

        def __call__(self, x, axes):
            return x.sum(axis=axes)

    x = np.arange(6.0).reshape(2, 3)
    for _ in range(2):
        np.testing.assert_array_equal(rearr.reduce(x, "a b -> a", Sum()), x.sum(1))


def test_a_list_and_the_stacked_tensor_share_a_plan():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(rearr.rearrange([x, x], "n a b -> a (n b)"), np.concatenate([x, x], 1))
    np.testing.assert_array_equal(rearr.rearrange(np.stack([x, x]), "n a b -> a (n b)"), np.concatenate([x, x], 1))


def test_the_table_keeps_its_bound_and_drops_the_oldest(monkeypatch):
    table = cache.unindexed
    monkeypatch.setattr(table, "maxsize", 3)
    table.cache_clear()
    for n in range(1, 6):
        np.testing.assert_array_equal(rearr.rearrange(np.arange(n), "(a b) -> b a", a=1), np.arange(n)[:, None])
    assert (table.cache_info().maxsize, table.cache_info().currsize) == (3, 3)
    assert [key[4] for key in table.entries] == [(3,), (4,), (5,)]
    table.cache_clear()
    assert table.cache_info().currsize == 0


@pytest.mark.slow
def test_a_torch_tensor_does_not_load_numpy_ma():
    """numpy's backend asks whether a tensor is a masked array: that must not import numpy.ma
    (a large part of the first call in a process with torch and numpy)."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, numpy, torch, rearr; rearr.rearrange(torch.zeros(2, 3), 'a b -> b a'); "
            "rearr.rearrange(numpy.zeros((2, 3)), 'a b -> b a'); print('numpy.ma' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr


# --- indexed calls seen before (rearr.run.cache.DIRECT): each case runs once to fill the table, then again ---

LIBS = [pytest.param(np.asarray, id="numpy"), pytest.param(torch.as_tensor, id="torch")]


def _seen_before(call):
    """call() twice: the first fills cache.DIRECT, the second must find its entry there."""
    first = call()
    size = len(cache.DIRECT)
    second = call()
    assert len(cache.DIRECT) == size and size > 0
    return first, second


def _ones_added(idx: list) -> np.ndarray:
    """What scatter(ones (2, 3), "b k -> b n[idx]", "sum", n=8) gives, by np.add.at."""
    want = np.zeros((2, 8))
    np.add.at(want, (np.arange(2)[:, None], np.array(idx)), 1.0)
    return want


@pytest.mark.parametrize("lib", LIBS)
def test_a_gather_seen_before_still_refuses_a_bad_value_with_ra501(lib):
    x = lib(np.arange(16.0).reshape(2, 8))
    good, bad = lib(np.array([[0, 1, 7], [2, 3, 4]])), lib(np.array([[0, 1, 7], [2, 8, 4]]))
    _seen_before(lambda: rearr.rearrange(x, "b n[idx] -> b k", idx=good))
    with pytest.raises(RearrError, match="RA501") as info:
        rearr.rearrange(x, "b n[idx] -> b k", idx=bad)
    assert "idx" in str(info.value) and "8" in str(info.value)


@pytest.mark.parametrize("lib", LIBS)
def test_a_scatter_seen_before_still_refuses_a_bad_value_with_ra501(lib):
    src = lib(np.ones((2, 3)))
    good, bad = lib(np.array([[0, 1, 7], [2, 3, 4]])), lib(np.array([[0, 1, 7], [2, 9, 4]]))
    _seen_before(lambda: rearr.scatter(src, "b k -> b n[idx]", "sum", idx=good, n=8))
    with pytest.raises(RearrError, match="RA501") as info:
        rearr.scatter(src, "b k -> b n[idx]", "sum", idx=bad, n=8)
    assert "idx" in str(info.value) and "9" in str(info.value)


@pytest.mark.parametrize("lib", LIBS)
def test_a_scatter_set_seen_before_still_refuses_duplicates(lib):
    src = lib(np.ones((2, 3)))
    _seen_before(lambda: rearr.scatter(src, "b k -> b n[idx]", "set", idx=lib(np.array([[0, 1, 2], [3, 4, 5]])), n=8))
    with pytest.raises(RearrError, match="RA50"):
        rearr.scatter(src, "b k -> b n[idx]", "set", idx=lib(np.array([[0, 1, -8], [3, 4, 5]])), n=8)


def test_a_uint64_index_seen_after_an_int64_one_is_still_checked():
    x = torch.arange(16.0).reshape(2, 8)
    _seen_before(lambda: rearr.rearrange(x, "b n[idx] -> b k", idx=torch.tensor([[0, 1, 2], [3, 4, 5]])))
    big = torch.tensor([[0, 1, 2], [3, 4, 2**63]], dtype=torch.uint64)
    with pytest.raises(RearrError, match="RA501"):
        rearr.rearrange(x, "b n[idx] -> b k", idx=big)


def test_a_float_length_does_not_find_the_int_lengths_indexed_entry():
    src = np.ones((2, 3))
    idx = np.array([[0, 1, 2], [3, 4, 5]])
    _seen_before(lambda: rearr.scatter(src, "b k -> b n[idx]", "sum", idx=idx, n=8))
    with pytest.raises(RearrError, match="RA305"):
        rearr.scatter(src, "b k -> b n[idx]", "sum", idx=idx, n=8.0)


def test_a_list_index_and_a_fill_after_a_call_seen_before():
    src = np.ones((2, 3))
    idx = np.array([[0, 1, 2], [3, 4, 5]])
    _seen_before(lambda: rearr.scatter(src, "b k -> b n[idx]", "sum", idx=idx, n=8))
    out = rearr.scatter(src, "b k -> b n[idx]", "sum", idx=idx.tolist(), n=8, fill=-1.0)
    assert out[0, 7] == -1.0 and out[0, 0] == 1.0


def test_a_dtype_refused_after_a_call_seen_before_is_still_refused():
    idx = np.array([[0, 1, 2], [3, 4, 5]])
    _seen_before(lambda: rearr.scatter(np.ones((2, 3)), "b k -> b n[idx]", "mean", idx=idx, n=8))
    for _ in range(2):  # the same class and shape, a dtype whose mean is refused: it never enters the table
        with pytest.raises(RearrError, match="RA400"):
            rearr.scatter(np.ones((2, 3), dtype=bool), "b k -> b n[idx]", "mean", idx=idx, n=8)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(("name", "idx", "resolved"), [
    ("idx", [[-1, 0, -8], [1, -2, 3]], [[7, 0, 0], [1, 6, 3]]),  # negative values count from the end
    ("text", [[0, 1, 7], [2, 3, 4]], [[0, 1, 7], [2, 3, 4]]),  # an index named like the call's own values
])
def test_gather_and_scatter_seen_before(lib, name, idx, resolved):
    x, index = lib(np.arange(16.0).reshape(2, 8)), lib(np.array(idx))
    want = np.take_along_axis(np.arange(16.0).reshape(2, 8), np.array(resolved), 1)
    for out in _seen_before(lambda: rearr.rearrange(x, f"b n[{name}] -> b k", **{name: index})):
        np.testing.assert_array_equal(np.asarray(out), want)
    src = lib(np.ones((2, 3)))
    for out in _seen_before(lambda: rearr.scatter(src, f"b k -> b n[{name}]", "sum", n=8, **{name: index})):
        np.testing.assert_array_equal(np.asarray(out), _ones_added(resolved))


def _error(call) -> str:
    with pytest.raises(RearrError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("lib", LIBS)
def test_unchecked_calls_seen_before_give_the_careful_paths_values_and_errors(lib):
    """check_bounds=False: a call seen before runs from the direct table; its values are the careful
    path's, and an index that the native call refuses is the careful path's RA501, message for message
    (the first call of a bad value after a cleared table takes the careful path)."""
    x, src = lib(np.arange(16.0).reshape(2, 8)), lib(np.ones((2, 3)))
    good = lib(np.array([[0, 1, 7], [2, 3, 4]]))
    gather = lambda idx: rearr.rearrange(x, "b n[idx] -> b k", idx=idx, check_bounds=False)  # noqa: E731
    scatter = lambda idx: rearr.scatter(src, "b k -> b n[idx]", "sum", idx=idx, n=8, check_bounds=False)  # noqa: E731
    for out in _seen_before(lambda: gather(good)):
        np.testing.assert_array_equal(np.asarray(out), np.take_along_axis(np.arange(16.0).reshape(2, 8),
                                                                           np.array([[0, 1, 7], [2, 3, 4]]), 1))
    for out in _seen_before(lambda: scatter(good)):
        np.testing.assert_array_equal(np.asarray(out), _ones_added([[0, 1, 7], [2, 3, 4]]))
    bad = lib(np.array([[0, 1, 7], [2, 9, 4]]))
    seen = [_error(lambda: gather(bad)), _error(lambda: scatter(bad))]
    assert all("RA501" in e and "check_bounds=False" in e for e in seen), seen
    cache.direct.cache_clear()
    assert [_error(lambda: gather(bad)), _error(lambda: scatter(bad))] == seen


@pytest.mark.parametrize("reduction", ["mean", "max", "min", "prod"])
def test_an_unchecked_negative_row_index_on_numpy_is_ra501_not_bincounts_error(reduction):
    """check_bounds=False promises 0 <= i < n; numpy's row scatters count with np.bincount, whose
    ValueError for a negative value is the RA501 that says how to find it, cold and seen before."""
    src = np.ones((3, 2))
    call = lambda idx: rearr.scatter(src, "e c -> v[dst: e] c", reduction, dst=idx, v=4,  # noqa: E731
                                     check_bounds=False)
    _seen_before(lambda: call(np.array([0, 1, 1])))
    for _ in range(2):
        assert "RA501" in _error(lambda: call(np.array([0, -1, 1])))
