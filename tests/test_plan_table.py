"""The hot path's plan table (rearr.api._Plans): a call seen before is one dict look-up.

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
from rearr import RearrError, api


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
    table = api._Plans("test", maxsize=3)
    monkeypatch.setattr(api, "_compiled", table)
    monkeypatch.setattr(api, "_RUNS", table.table)
    for n in range(1, 6):
        np.testing.assert_array_equal(rearr.rearrange(np.arange(n), "(a b) -> b a", a=1), np.arange(n)[:, None])
    assert (table.cache_info().maxsize, table.cache_info().currsize) == (3, 3)
    assert [key[4] for key in table.table] == [(3,), (4,), (5,)]
    table.cache_clear()
    assert table.cache_info().currsize == 0


def test_a_torch_tensor_does_not_load_numpy_ma():
    """numpy's backend asks whether a tensor is a masked array: that must not import numpy.ma
    (11 ms of the first call in a process with torch and numpy, issue 9's cold-start goal)."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, numpy, torch, rearr; rearr.rearrange(torch.zeros(2, 3), 'a b -> b a'); "
            "rearr.rearrange(numpy.zeros((2, 3)), 'a b -> b a'); print('numpy.ma' in sys.modules)")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
