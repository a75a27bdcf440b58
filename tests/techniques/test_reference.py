"""The oracle's own tests: tests/reference.py against einops and hand-written numpy.

These need no rearr backend (only rearr.syntax.parser), so a wrong reference or a
wrong strategy shows up here and not as a false alarm in test_properties.
"""

from __future__ import annotations

import einops
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import RefInvalid, assert_matches, reference
from strategies import gather_cases, scatter_cases, transform_cases


def _einops(case):
    x, _ = case.inputs("numpy")
    if case.op == "reduce":
        return einops.reduce(x, case.pattern.replace("…", "..."), case.reduction, **case.kwargs)
    return getattr(einops, case.op)(x, case.pattern.replace("…", "..."), **case.kwargs)


@given(transform_cases())
def test_reference_matches_einops(case):
    try:
        expected = reference(case.op, case.inputs("numpy")[0], case.pattern, case.reduction, **case.kwargs)
    except RefInvalid as e:
        # The strategies draw valid patterns; the only invalid calls are an
        # integer or bool mean, which rearr refuses (einops allows).
        assert case.reduction == "mean" and case.x.dtype.kind in "biu", (case.describe(), e)
        return
    got = _einops(case)
    if case.reduction in ("any", "all"):
        got = got.astype(bool)  # einops skips the reduction when no axis is reduced: any/all keep the dtype
    assert_matches(got, expected, what=case.describe())


@given(st.one_of(gather_cases(), scatter_cases()))
def test_bracket_strategies_are_valid_for_the_reference(case):
    """Every drawn case either runs, or is invalid only for a reason the strategy meant."""
    try:
        reference(case.op, case.x, case.pattern, case.reduction, **case.ref_kwargs())
    except RefInvalid as e:
        msg = str(e)
        assert "out of range" in msg or "under 'set'" in msg or "mean of an integer" in msg, (case.describe(), msg)


# --- gather and scatter against hand-written numpy ----------------------------------------

rng = np.random.default_rng(0)


def test_gather_default_axes_one_output_axis():
    x = rng.standard_normal((3, 5))
    i = np.array([0, -1, 3])
    np.testing.assert_array_equal(reference("rearrange", x, "b n[idx] -> b", idx=i), x[np.arange(3), i])


def test_gather_default_axes_torch_gather_rule():
    x = rng.standard_normal((2, 5, 3))
    i = rng.integers(-5, 5, size=(2, 4, 3))
    expected = np.take_along_axis(x, i % 5, axis=1)
    np.testing.assert_array_equal(reference("rearrange", x, "b n[idx] c -> b k c", idx=i), expected)


def test_gather_declared_axes_broadcast():
    x = rng.standard_normal((2, 5, 3))
    i = rng.integers(-5, 5, size=(2, 4))
    expected = np.take_along_axis(x, np.broadcast_to((i % 5)[:, :, None], (2, 4, 3)), axis=1)
    np.testing.assert_array_equal(reference("rearrange", x, "b n[idx: b k] c -> b k c", idx=i), expected)


def test_gather_embedding_lookup():
    emb = rng.standard_normal((7, 3))
    tok = rng.integers(0, 7, size=(2, 4))
    np.testing.assert_array_equal(reference("rearrange", emb, "v[ids: b t] d -> b t d", ids=tok), emb[tok])


def test_gather_two_axes():
    img = rng.standard_normal((2, 4, 5, 3))
    ys, xs = rng.integers(-4, 4, size=(2, 6)), rng.integers(-5, 5, size=(2, 6))
    expected = img[np.arange(2)[:, None], ys, xs]
    got = reference("rearrange", img, "b h[y: b p] w[x: b p] c -> b p c", y=ys, x=xs)
    np.testing.assert_array_equal(got, expected)


def test_gather_output_group_and_ellipsis():
    x = rng.standard_normal((2, 3, 5))
    i = rng.integers(0, 5, size=(2, 3, 4))
    expected = np.take_along_axis(x, i, axis=2).reshape(2, 12)
    np.testing.assert_array_equal(reference("rearrange", x, "... n[idx] -> (... k)", idx=i), expected.reshape(24))
    np.testing.assert_array_equal(reference("rearrange", x, "b c n[idx] -> b (c k)", idx=i), expected)


def test_gather_scalar_index():
    x = np.arange(5.0)
    assert reference("rearrange", x, "n[i] -> ", i=np.array(-2)) == 3.0


def test_gather_out_of_range():
    with pytest.raises(RefInvalid):
        reference("rearrange", np.zeros((2, 3)), "b n[idx] -> b", idx=np.array([0, 3]))
    with pytest.raises(RefInvalid):
        reference("rearrange", np.zeros((2, 3)), "b n[idx] -> b", idx=np.array([0, -4]))


@pytest.mark.parametrize("reduction, ufunc", [("sum", np.add), ("prod", np.multiply), ("max", np.maximum),
                                             ("min", np.minimum)])
def test_scatter_default_axes(reduction, ufunc):
    src = rng.standard_normal((3, 4))
    i = rng.integers(-6, 6, size=(3, 4))
    touched = np.zeros((3, 6), dtype=bool)
    touched[np.arange(3)[:, None], i] = True
    identity = {"sum": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}[reduction]
    out = np.full((3, 6), identity)
    ufunc.at(out, (np.arange(3)[:, None], i), src)
    out[~touched] = 0.0
    got = reference("scatter", src, "b k -> b n[idx]", reduction, idx=i, n=6)
    assert_matches(got, out)
    out[~touched] = -1.0
    assert_matches(reference("scatter", src, "b k -> b n[idx]", reduction, idx=i, n=6, fill=-1.0), out)


def test_scatter_mean_and_set():
    src = rng.standard_normal((3, 4))
    i = rng.integers(0, 5, size=(3, 4))
    total, count = np.zeros((3, 5)), np.zeros((3, 5))
    np.add.at(total, (np.arange(3)[:, None], i), src)
    np.add.at(count, (np.arange(3)[:, None], i), 1)
    expected = np.where(count > 0, total / np.maximum(count, 1), 0.0)
    assert_matches(reference("scatter", src, "b k -> b n[idx]", "mean", idx=i, n=5), expected)
    perm = np.stack([rng.permutation(5)[:4] for _ in range(3)])
    expected = np.zeros((3, 5))
    expected[np.arange(3)[:, None], perm] = src
    assert_matches(reference("scatter", src, "b k -> b n[idx]", "set", idx=perm - 5, n=5), expected)
    with pytest.raises(RefInvalid, match="set"):
        reference("scatter", src, "b k -> b n[idx]", "set", idx=np.zeros((3, 4), dtype=int), n=5)
    with pytest.raises(RefInvalid, match="mean"):
        reference("scatter", np.ones((3, 4), dtype=int), "b k -> b n[idx]", "mean", idx=i, n=5)


def test_scatter_declared_axes_column_merge():
    src = rng.standard_normal((4, 3))
    i = np.array([0, 1, 1])
    expected = np.stack([src[:, 0], src[:, 1] + src[:, 2]], axis=1)
    assert_matches(reference("scatter", src, "r c -> r m[idx: c]", "sum", idx=i, m=2), expected)


def test_scatter_both_sides_message_passing():
    x = rng.standard_normal((5, 3))
    s, d = rng.integers(0, 5, size=7), rng.integers(-5, 5, size=7)
    total, count = np.zeros((5, 3)), np.zeros((5, 1))
    np.add.at(total, d, x[s])
    np.add.at(count, d, 1)
    expected = np.where(count > 0, total / np.maximum(count, 1), 0.0)
    assert_matches(reference("scatter", x, "v[src: e] c -> v[dst: e] c", "mean", src=s, dst=d), expected)


def test_scatter_into():
    src = np.ones((2, 3))
    i = np.array([[0, 0, 2], [1, 1, 1]])
    into = np.full((2, 4), 10.0)
    expected = np.array([[12.0, 10, 11, 10], [10, 13, 10, 10]])
    assert_matches(reference("scatter", src, "b k -> b n[idx]", "sum", idx=i, into=into), expected)
    expected = np.array([[2.0, 10, 1, 10], [10, 3, 10, 10]])
    assert_matches(reference("scatter", src, "b k -> b n[idx]", "sum", idx=i, into=into, into_combines=False),
                   expected)


def test_rearrange_row_major_groups():
    x = np.arange(24).reshape(2, 3, 4)
    np.testing.assert_array_equal(reference("rearrange", x, "c b h -> b (c h)"), x.transpose(1, 0, 2).reshape(3, 8))
    np.testing.assert_array_equal(reference("rearrange", x.reshape(6, 4), "(c b) h -> b c h", c=2),
                                  x.transpose(1, 0, 2))
    np.testing.assert_array_equal(reference("repeat", x, "a b c -> a (b r) c 1", r=2),
                                  np.repeat(x, 2, axis=1)[..., None])


def test_reference_rejects():
    x = np.zeros((2, 3))
    for call in [
        lambda: reference("rearrange", x, "a b -> a"),
        lambda: reference("rearrange", x, "a b c -> a b c"),
        lambda: reference("rearrange", x.reshape(6), "(a b) -> a b"),
        lambda: reference("rearrange", x.reshape(6), "(a b) -> a b", a=4),
        lambda: reference("reduce", x.astype(int), "a b -> a", "mean"),
        lambda: reference("repeat", x, "a b -> a b r"),
    ]:
        with pytest.raises(RefInvalid):
            call()
