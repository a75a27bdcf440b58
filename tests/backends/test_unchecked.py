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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.parametrize("bad_name", ["hi", "wi"])
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_a_refused_index_under_false_is_named_with_its_value_position_and_caret(lib, bad_name, lowering):
    """When a native call refuses a value that check_bounds=False let through, the call has failed: rearr
    then reads the indexes to say which one broke the promise (torch's 'index out of range in self' names
    none), where it is in the pattern and the first value outside 0 <= i < n. (A value that no native
    call refuses gives unspecified values, as the promise says.)"""
    to, _ = _lib(lib)
    pattern = "b h[hi: b k] w[wi: b k] -> b k"
    x = to(np.zeros((2, 3, 4), np.float32))
    good = {"hi": np.array([[0, 1], [2, 0]]), "wi": np.array([[0, 1], [1, 3]])}
    refused = 0
    for value in (99, 2**40, -99):
        bad = dict(good)
        bad[bad_name] = good[bad_name].copy()
        bad[bad_name][1, 0] = value
        try:
            rearr.rearrange(x, pattern, **{k: to(v) for k, v in bad.items()}, check_bounds=False)
            continue
        except rearr.RearrError as info:
            e = info
        n, refused = {"hi": 3, "wi": 4}[bad_name], refused + 1
        assert e.code == "RA501"
        assert e.message.startswith(f"index {bad_name!r} holds {value} at position (1, 0), outside axis "
                                    f"{bad_name[0]!r} of length {n}: check_bounds=False promised "
                                    f"0 <= {bad_name} < {n}, and {lib} refused it"), e.message
        assert pattern[e.col:].startswith(bad_name + ":")
    assert refused


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_a_negative_value_refused_under_false_is_named_and_counts_with_the_check(lib):
    """torch's gather refuses -1 (numpy counts it itself): the RA501 names it, and its fix (drop
    check_bounds=False) counts it from the end."""
    to, back = _lib(lib)
    x, idx = to(np.arange(10.0).reshape(2, 5)), np.array([[0, -1], [1, 2]])
    pattern = "b n[i: b k] -> b k"
    try:
        got = back(rearr.rearrange(x, pattern, i=to(idx), check_bounds=False))
    except rearr.RearrError as e:
        assert lib == "torch"
        assert e.message.startswith("index 'i' holds -1 at position (0, 1), outside axis 'n' of length 5")
        assert pattern[e.col:].startswith("i:") and "drop check_bounds=False" in e.hint
        got = back(rearr.rearrange(x, pattern, i=to(idx)))  # the fix, applied
    np.testing.assert_array_equal(got, [[0.0, 4.0], [6.0, 7.0]])


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_a_refused_scatter_index_under_false_is_named(lib, lowering):
    to, _ = _lib(lib)
    idx = np.array([[0, 1], [7, 2]])
    with pytest.raises(rearr.RearrError) as info:
        rearr.scatter(to(np.ones((2, 2, 3), np.float32)), "b k c -> b n[idx: b k] c", "sum", idx=to(idx), n=4,
                      check_bounds=False)
    e = info.value
    assert e.code == "RA501" and e.message.startswith("index 'idx' holds 7 at position (1, 0), outside axis 'n'")
    assert e.pattern[e.col:].startswith("idx:")
