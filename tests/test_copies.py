"""Views and copies: a view exactly where hand-written code gets one, otherwise exactly one copy.
"""

from __future__ import annotations

import numpy as np
import pytest
from _backends import backends, to_backend, to_numpy

import rearr
from rearr import api, planner


@pytest.fixture()
def rows_lowering(monkeypatch):
    """The row lowering (index_add_ / ufunc.at on a (rows, width) view) even for tiny tensors."""
    monkeypatch.setattr(planner, "ROWS_MIN_ELEMENTS", 0)
    api._indexed.cache_clear()
    yield
    api._indexed.cache_clear()


@backends
@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod", "set"])
def test_scatter_into_a_permuted_layout(backend, reduction, rows_lowering):
    """into= brought to the scatter's (rows, width) layout is a transposed view: the scatter writes
    its copy, not a temporary (numpy once summed into a throw-away copy and returned into= as it was)."""
    src, into, idx = np.arange(6.0).reshape(3, 2) + 1, np.full((2, 4), 2.0), np.array([0, 0, 3])
    if reduction == "set":
        idx = np.array([0, 2, 3])
    got = to_numpy(rearr.scatter(to_backend(src, backend), "k c -> c n[i: k]", reduction,
                                 i=to_backend(idx, backend), into=to_backend(into, backend)))
    expected = into.copy()
    for c in range(2):
        for n in range(4):
            vals = [v for v, i in zip(src[:, c], idx) if i == n]
            if not vals:
                continue
            if reduction == "set":
                expected[c, n] = vals[0]
            else:
                both = [into[c, n], *vals]
                expected[c, n] = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
                                  "prod": np.prod}[reduction](both)
    np.testing.assert_allclose(got, expected)
    np.testing.assert_array_equal(into, 2.0)
