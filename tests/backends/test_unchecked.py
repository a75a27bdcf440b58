"""check_bounds=False holds one statement on every backend and lowering (docs/language.md, "Index values"):

kept (every value in 0 <= i < n), the result is the checked call's; broken, the call raises RA501 (on
dask when the result is computed), or it returns a result of the planned shape and dtype in which the
values gathered through the bad value are unspecified and the update written through it lands on one
place or none; everything else is the checked call's, and no input is modified.

Each case runs along an axis and by rows (the `lowering` fixture forces the row lowering), at sizes on
both sides of the planner's switch to the row lowering (planner.ROWS_MIN_ELEMENTS) and of numpy's
switch from np.add.at on per-axis index arrays to flat positions (a 'sum' of more than 256 elements).
"""

from __future__ import annotations

import numpy as np
import pytest

import rearr
from rearr.planning import planner

GATHER = "b n[idx: b k] c -> b k c"
SCATTER = "b k c -> b n[idx: b k] c"
# (b, n, k, c): 24 moved elements (along an axis; numpy's small sum), 512 (along; numpy's flat
# positions), ROWS_MIN_ELEMENTS (the planner's row lowering whatever the fixture says)
SIZES = {"small": (3, 5, 4, 2), "medium": (4, 8, 16, 8), "large": (4, 64, 64, planner.ROWS_MIN_ELEMENTS // 256)}
BAD = (1, 2)  # the one entry of the index that breaks the promise
REDUCTIONS = ("sum", "mean", "max", "min", "prod", "set")


def _bad_values(n: int) -> list[int]:
    return [n, n + 1, 3 * n, -1, -n, -n - 1, 2**31, 2**40, -(2**40), 2**62]


def _lib(name: str):
    if name == "numpy":
        return np.asarray, np.asarray
    if name == "torch":
        torch = pytest.importorskip("torch")
        return torch.as_tensor, lambda t: t.numpy()
    if name == "jax":
        jnp = pytest.importorskip("jax.numpy")
        # (jax without x64 holds int32: an index beyond it stays numpy, which rearr refuses to narrow)
        return (lambda a: jnp.asarray(a) if np.abs(a).max() < 2**31 else a), np.asarray
    if name == "dask":
        da = pytest.importorskip("dask.array")
        return (lambda a: da.from_array(np.asarray(a), chunks=(2, *np.shape(a)[1:]))), (lambda t: t.compute())
    xp = pytest.importorskip("array_api_strict")
    return xp.asarray, lambda t: np.asarray(t)


def _index(b: int, n: int, k: int, unique: bool) -> np.ndarray:
    rng = np.random.default_rng(0)
    if unique:
        return np.stack([rng.permutation(n)[:k] if k <= n else rng.permutation(k) % n for _ in range(b)])
    return rng.integers(0, n, (b, k))


def _call_or_refusal(back, f, *args, **kwargs):
    """f(*args, **kwargs)'s result as numpy (dask: computed), or None where that raised RA501 (any
    other error fails the test)."""
    try:
        return back(f(*args, **kwargs))
    except rearr.RearrError as e:
        assert e.code == "RA501", e
        return None


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES)
@pytest.mark.parametrize("lib", ["numpy", "torch", "jax", "dask", "array_api_strict"])
def test_an_unchecked_gather_is_the_checked_one_but_where_it_reads_a_bad_value(lib, size, lowering):
    b, n, k, c = size
    to, back = _lib(lib)
    x = np.arange(b * n * c, dtype=np.float32).reshape(b, n, c) + 1
    idx = _index(b, n, k, unique=False)
    want = rearr.rearrange(x, GATHER, idx=idx)
    kept = rearr.rearrange(to(x), GATHER, idx=to(idx), check_bounds=False)
    np.testing.assert_array_equal(back(kept), want)
    for value in _bad_values(n):
        bad = idx.copy()
        bad[BAD] = value
        xt, it = to(x), to(bad)
        got = _call_or_refusal(back, rearr.rearrange, xt, GATHER, idx=it, check_bounds=False)
        np.testing.assert_array_equal(back(xt), x)
        np.testing.assert_array_equal(back(it), bad)
        if got is None:
            continue
        assert got.shape == want.shape and got.dtype == want.dtype, value
        good = np.ones((b, k), bool)
        good[BAD] = False
        np.testing.assert_array_equal(got[good], want[good], err_msg=f"value {value}")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES)
@pytest.mark.parametrize("lib", ["numpy", "torch", "jax"])
def test_an_unchecked_scatter_lands_a_bad_update_on_one_place_or_none(lib, size, reduction, lowering):
    b, n, k, c = size
    to, back = _lib(lib)
    unique = reduction == "set"
    src = (np.random.default_rng(1).integers(1, 4, (b, k, c))).astype(np.float32)
    idx = _index(b, n, k, unique)
    if unique and k > n:  # 'set' writes each place once: as many places as entries
        n = k
        idx = _index(b, n, k, unique)
    want = rearr.scatter(src, SCATTER, reduction, idx=idx, n=n)
    kept = back(rearr.scatter(to(src), SCATTER, reduction, idx=to(idx), n=n, check_bounds=False))
    np.testing.assert_allclose(kept, want, rtol=1e-6)
    # the good entries alone: the bad one sent to an extra place n, which is then cut off
    aside = idx.copy()
    aside[BAD] = n
    alone = rearr.scatter(src, SCATTER, reduction, idx=aside, n=n + 1)[:, :n]
    for value in _bad_values(n):
        bad = idx.copy()
        bad[BAD] = value
        st, it = to(src), to(bad)
        got = _call_or_refusal(back, rearr.scatter, st, SCATTER, reduction, idx=it, n=n, check_bounds=False)
        np.testing.assert_array_equal(back(st), src)
        np.testing.assert_array_equal(back(it), bad)
        if got is None:
            continue
        assert got.shape == kept.shape and got.dtype == kept.dtype, value
        moved = ~np.isclose(got, alone, rtol=1e-6, atol=0)
        assert moved.sum() <= c, f"value {value}: {moved.sum()} places differ from the good entries' scatter"
