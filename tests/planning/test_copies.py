"""Views and copies: a view exactly where hand-written code gets one, otherwise exactly one copy.

How copies are counted. numpy reports its data allocations to tracemalloc:
the most bytes held at once during the call is 0 for a view and one result's
size for one copy (a second copy of the data would be alive with the first,
as f(g(x)) holds g's result while f runs). torch: a TorchDispatchMode sees
every ATen operator and counts its outputs whose storage is new (a view or
an in-place write reuses one), of the data's dtype (index arithmetic is int64).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch
from _backends import backends, to_backend, to_numpy
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import rearr
from rearr.planning import planner
from rearr.run import cache


@pytest.fixture()
def rows_lowering(monkeypatch):
    """The row lowering (index_add_ / ufunc.at on a (rows, width) view) even for tiny tensors."""
    monkeypatch.setattr(planner, "ROWS_MIN_ELEMENTS", 0)
    cache.indexed.cache_clear()
    cache.direct.cache_clear()
    yield
    cache.indexed.cache_clear()
    cache.direct.cache_clear()


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


# --- a view exactly where hand-written code gets one; otherwise one copy -------------------------------

# (op, pattern, shape, lengths, reduction, hand-written numpy, whether the hand-written result is a view)
CASES = [
    ("rearrange", "b c h w -> b h w c", (4, 8, 16, 32), {}, None, lambda x: x.transpose(0, 2, 3, 1), True),
    ("rearrange", "b (h w) c -> b h w c", (4, 64, 128), {"h": 8}, None, lambda x: x.reshape(4, 8, 8, 128), True),
    ("rearrange", "b h w c -> b (h w) c", (4, 8, 8, 128), {}, None, lambda x: x.reshape(4, 64, 128), True),
    ("rearrange", "a b c -> c (a b)", (16, 32, 64), {}, None, lambda x: x.reshape(512, 64).T, True),
    ("rearrange", "b 1 c -> b c", (64, 1, 512), {}, None, lambda x: x[:, 0], True),
    ("rearrange", "b c -> b 1 c", (64, 512), {}, None, lambda x: x[:, None], True),
    ("rearrange", "... h w -> ... w h", (4, 8, 32, 32), {}, None, lambda x: x.swapaxes(-1, -2), True),
    ("repeat", "h w -> h w c", (256, 128), {"c": 3}, None, lambda x: np.tile(x[:, :, None], (1, 1, 3)),
     False),  # einops' np.tile: a new, writable array
    ("rearrange", "c b h -> b (c h)", (16, 64, 128), {}, None, lambda x: x.transpose(1, 0, 2).reshape(64, -1), False),
    ("rearrange", "b h w c -> b c (h w)", (4, 32, 32, 64), {}, None,
     lambda x: x.transpose(0, 3, 1, 2).reshape(4, 64, -1), True),  # h and w stay adjacent: a view
    ("rearrange", "b h w c -> b (w h) c", (4, 32, 32, 64), {}, None,
     lambda x: x.transpose(0, 2, 1, 3).reshape(4, -1, 64), False),
    ("repeat", "h w -> h (w c)", (256, 128), {"c": 3}, None, lambda x: np.repeat(x, 3, axis=1), False),
    ("repeat", "h w -> (c h) w", (256, 128), {"c": 2}, None, lambda x: np.tile(x, (2, 1)), False),
    ("reduce", "b c h w -> b c", (8, 64, 32, 32), {}, "mean", lambda x: x.mean(axis=(2, 3)), False),
    ("reduce", "b c h w -> c", (8, 64, 32, 32), {}, "sum", lambda x: x.sum(axis=(0, 2, 3)), False),
    ("reduce", "b (h 2) (w 2) c -> b h w c", (4, 32, 32, 64), {}, "max",
     lambda x: x.reshape(4, 16, 2, 16, 2, 64).max(axis=(2, 4)), False),
]


def _call(op, x, pattern, lengths, reduction):
    if op == "reduce":
        return rearr.reduce(x, pattern, reduction, **lengths)
    return getattr(rearr, op)(x, pattern, **lengths)


def _numpy_new_bytes(fn) -> tuple[object, int]:
    """fn's result and the most bytes its call held at once, from numpy's allocations (tracemalloc)."""
    fn()  # plans and caches made first: only the call itself is measured
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


class _FreshStorages(TorchDispatchMode):
    """Counts the tensors that torch's operators make in new storage, by dtype: each one is a copy
    (or a new result) unless it is an index. Views and in-place writes reuse a storage."""

    def __init__(self, *known: torch.Tensor) -> None:
        super().__init__()
        self.seen = {t.untyped_storage().data_ptr() for t in known}
        self.fresh: list[tuple[str, torch.dtype, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.seen:
                self.seen.add(t.untyped_storage().data_ptr())
                self.fresh.append((str(func), t.dtype, t.untyped_storage().nbytes()))
        return out


def _torch_copies(fn, *known: torch.Tensor, dtype=torch.float32) -> tuple[object, list]:
    fn()
    with _FreshStorages(*known) as mode:
        out = fn()
    return out, [f for f in mode.fresh if f[1] == dtype]


@pytest.mark.parametrize("op, pattern, shape, lengths, reduction, hand, view", CASES,
                         ids=[c[1] for c in CASES])
def test_numpy_view_or_exactly_one_copy(op, pattern, shape, lengths, reduction, hand, view):
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    expected, hand_held = _numpy_new_bytes(lambda: hand(x))
    assert np.shares_memory(expected, x) == view  # the table says what hand-written numpy gets
    out, held = _numpy_new_bytes(lambda: _call(op, x, pattern, lengths, reduction))
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    if view:
        assert np.shares_memory(out, x)
        assert held < 4096, f"a view allocated {held} bytes"
    else:
        assert not np.shares_memory(out, x)
        # one new array of the result's size, as by hand (numpy's reductions add small buffers of
        # their own to both); a second copy would be alive with the first
        assert out.nbytes <= held <= hand_held + 4096, (held, hand_held, out.nbytes)


# Where torch's hand-written code (and einops) gets a view but numpy's copies: a repeat is expand on torch.
TORCH_VIEWS = {"h w -> h w c"}


@pytest.mark.parametrize("op, pattern, shape, lengths, reduction, hand, view", CASES,
                         ids=[c[1] for c in CASES])
def test_torch_view_or_exactly_one_copy(op, pattern, shape, lengths, reduction, hand, view):
    view = view or pattern in TORCH_VIEWS
    x = torch.from_numpy(np.random.default_rng(0).random(shape, dtype=np.float32))
    out, copies = _torch_copies(lambda: _call(op, x, pattern, lengths, reduction), x)
    np.testing.assert_allclose(out.numpy(), hand(x.numpy()), rtol=1e-5)
    assert (out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == view
    assert len(copies) == (0 if view else 1), copies


# Indexed ops make one new tensor, the result (the index arithmetic is on small int64 tensors).
INDEXED = [
    ("gather rows", lambda m, x, i: m.rearrange(x, "b n[idx: b k] c -> b k c", idx=i), (8, 64, 256), (8, 16)),
    ("gather along", lambda m, x, i: m.rearrange(x, "b n[idx] -> b k", idx=i), (8, 4096), (8, 512)),
    ("scatter rows", lambda m, x, i: m.scatter(x, "b k c -> b n[idx: b k] c", "sum", idx=i, n=64),
     (8, 16, 256), (8, 16)),
    ("scatter along", lambda m, x, i: m.scatter(x, "b k -> b n[idx] ", "sum", idx=i, n=4096), (8, 512), (8, 512)),
    ("scatter mean", lambda m, x, i: m.scatter(x, "b k c -> b n[idx: b k] c", "mean", idx=i, n=64),
     (8, 16, 256), (8, 16)),
]


@pytest.mark.parametrize("name, call, shape, idx_shape", INDEXED, ids=[c[0] for c in INDEXED])
@pytest.mark.parametrize("lowering", ["small", "rows"])
def test_torch_indexed_ops_make_one_tensor(name, call, shape, idx_shape, lowering, monkeypatch):
    if lowering == "rows":
        monkeypatch.setattr(planner, "ROWS_MIN_ELEMENTS", 0)
    cache.indexed.cache_clear()
    cache.direct.cache_clear()
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.random(shape, dtype=np.float32))
    idx = torch.from_numpy(rng.integers(0, 16, idx_shape))
    out, copies = _torch_copies(lambda: call(rearr, x, idx), x, idx)
    assert len(copies) == 1 and copies[0][2] == out.untyped_storage().nbytes(), copies
    cache.indexed.cache_clear()
    cache.direct.cache_clear()
