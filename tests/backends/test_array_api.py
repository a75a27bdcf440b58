"""The Array API backend on array-api-strict (nothing outside the standard) and on jax.numpy (CPU).

Every value is compared with the numpy backend on the same data; every result must be the input's own
array type, never numpy.
"""

from __future__ import annotations

import subprocess
import sys

import array_api_strict as xs  # the test extra installs them: these tests must run, never skip
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rearr
from rearr.backends import backend_for
from rearr.planning import planner
from rearr.rules import recipe

LIBS = {"array_api_strict": xs, "jax": jnp}
libs = pytest.mark.parametrize("lib", list(LIBS))


def to_lib(a: np.ndarray, lib: str):
    return LIBS[lib].asarray(a)


def to_numpy(x) -> np.ndarray:
    assert not isinstance(x, np.ndarray), "the result must be the input's own array type"
    return np.asarray(x) if isinstance(x, jax.Array) else np.from_dlpack(x)


def check_same(x, want: np.ndarray, lib: str) -> None:
    assert type(x) is type(to_lib(np.zeros(1), lib)), type(x)
    got = to_numpy(x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def step_kinds(op: str, text: str, shape: tuple, reduction=None, **keywords) -> list[str]:
    """The plan's step classes, so that each test names the step kind it covers."""
    r = recipe.analyze(text, op, reduction, tuple(sorted(keywords)))
    index_shapes = tuple((k, v.shape) for k, v in keywords.items() if not isinstance(v, int))
    lengths = tuple((k, v) for k, v in keywords.items() if isinstance(v, int))
    return [type(s).__name__ for s in planner.plan(r, shape, lengths, index_shapes).steps]


A = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)


@libs
@pytest.mark.parametrize(("pattern", "lengths", "kinds"), [
    ("a b c -> c (a b)", {}, {"Permute", "Reshape"}),
    ("a b c -> (b c) a", {}, {"Permute", "Reshape"}),
    ("a (h w) c -> a h w c", {"h": 3}, {"Reshape"}),
    ("a b c -> a b c", {}, set()),
])
def test_rearrange(lib: str, pattern: str, lengths: dict, kinds: set) -> None:
    assert set(step_kinds("rearrange", pattern, A.shape, **lengths)) == kinds
    check_same(rearr.rearrange(to_lib(A, lib), pattern, **lengths), rearr.rearrange(A, pattern, **lengths), lib)


@libs
@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod", "any", "all"])
@pytest.mark.parametrize("pattern", ["a b c -> a", "a b c -> c a", "a b c -> a b c"])
def test_reduce(lib: str, reduction: str, pattern: str) -> None:
    assert "Reduce" in step_kinds("reduce", pattern, A.shape, reduction)
    data = A if reduction not in ("any", "all") else A % 3 == 0
    want = rearr.reduce(data, pattern, reduction)
    got = to_numpy(rearr.reduce(to_lib(data, lib), pattern, reduction))
    np.testing.assert_allclose(got, want, rtol=1e-6)


@libs
def test_reduce_callable_and_bool_sum(lib: str) -> None:
    x = to_lib(A, lib)
    xp = LIBS[lib]
    check_same(rearr.reduce(x, "a b c -> a", lambda t, axes: xp.sum(t, axis=axes)), A.sum(axis=(1, 2)), lib)
    # Sums of booleans count, as on numpy and torch (array-api-strict's sum refuses bools).
    got = rearr.reduce(to_lib(A > 5, lib), "a b c -> a", "sum")
    np.testing.assert_array_equal(to_numpy(got), (A > 5).sum(axis=(1, 2)))


@libs
@pytest.mark.parametrize(("pattern", "lengths"), [
    ("a b c -> a b c k", {"k": 2}),
    ("a b c -> (k a) b c", {"k": 2}),
    ("a b c -> a (b k) c", {"k": 3}),
])
def test_repeat(lib: str, pattern: str, lengths: dict) -> None:
    assert "Expand" in step_kinds("repeat", pattern, A.shape, **lengths)
    check_same(rearr.repeat(to_lib(A, lib), pattern, **lengths), rearr.repeat(A, pattern, **lengths), lib)


@libs
def test_list_input_is_stacked(lib: str) -> None:
    xs_ = [to_lib(A[0], lib), to_lib(A[1], lib)]
    check_same(rearr.rearrange(xs_, "n b c -> b (n c)"), rearr.rearrange(A, "n b c -> b (n c)"), lib)


@libs
def test_pack_unpack(lib: str) -> None:
    x, y = to_lib(A, lib), to_lib(A[:, :1, :], lib)
    packed, shapes = rearr.pack([x, y], "a * c")
    check_same(packed, np.concatenate([A, A[:, :1]], axis=1), lib)
    assert shapes == [(3,), (1,)]
    back = rearr.unpack(packed, shapes, "a * c")
    check_same(back[0], A, lib)
    check_same(back[1], A[:, :1], lib)
    flat, shapes = rearr.pack([x], "*")
    check_same(rearr.unpack(flat, shapes, "*")[0], A, lib)


def test_einsum_where_the_namespace_has_it() -> None:
    b = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
    got = rearr.einsum(jnp.asarray(A), jnp.asarray(b), "x y c, c d -> x d y")
    np.testing.assert_allclose(np.asarray(got), np.einsum("xyc,cd->xdy", A, b), rtol=1e-6)
    assert isinstance(got, jax.Array)
    with pytest.raises(rearr.RearrError, match="array_api_strict has no einsum") as e:
        rearr.einsum(xs.asarray(A), xs.asarray(b), "x y c, c d -> x d y")
    assert "tensordot" in e.value.hint


# --- gather: each step kind --------------------------------------------------

X = np.arange(3 * 5 * 4, dtype=np.float32).reshape(3, 5, 4)


@libs
@pytest.mark.parametrize(("pattern", "index", "kind"), [
    ("b n[idx] c -> b c", {"idx": np.array([[4, 0, 1, 2], [0, 0, 0, 0], [-1, 3, 2, 1]])}, "GatherAlong"),
    ("b n[idx: b] c -> b c", {"idx": np.array([4, 0, -2])}, "GatherAlong"),
    ("n[idx: k] b c -> k b c", {"idx": np.array([2, 0, 2])}, "GatherAlong"),
    ("b[y: p] n[x: p] c -> p c", {"y": np.array([0, 2, 1, 2]), "x": np.array([4, 0, -1, 3])}, "TakeRows"),
    ("b n[y: p] c[x: p] -> p b", {"y": np.array([0, 2, 1]), "x": np.array([3, 0, -1])}, "AdvancedIndex"),
])
@pytest.mark.slow
def test_gather(lib: str, pattern: str, index: dict, kind: str) -> None:
    assert kind in step_kinds("rearrange", pattern, X.shape, **index)
    want = rearr.rearrange(X, pattern, **index)
    got = rearr.rearrange(to_lib(X, lib), pattern, **{k: to_lib(v, lib) for k, v in index.items()})
    check_same(got, want, lib)
    # A plain list or a numpy array is accepted as the index too, and converted to the library's array.
    check_same(rearr.rearrange(to_lib(X, lib), pattern, **{k: v.tolist() for k, v in index.items()}), want, lib)
    check_same(rearr.rearrange(to_lib(X, lib), pattern, **index), want, lib)


@libs
def test_embedding_lookup(lib: str) -> None:
    emb = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    ids = np.array([[1, 9, 9], [0, 4, 2]], dtype=np.int32)
    got = rearr.rearrange(to_lib(emb, lib), "v[ids: b t] d -> b t d", ids=to_lib(ids, lib))
    check_same(got, emb[ids], lib)


@libs
def test_index_out_of_range_names_value_and_position(lib: str) -> None:
    idx = to_lib(np.array([[0, 1, 2, 3], [0, 7, 0, 0], [0, 0, 0, 0]]), lib)
    with pytest.raises(rearr.RearrError, match=r"holds 7 at position \(1, 1\), outside axis 'n' of length 5"):
        rearr.rearrange(to_lib(X, lib), "b n[idx] c -> b c", idx=idx)


@libs
def test_index_of_floats_is_refused(lib: str) -> None:
    with pytest.raises(rearr.RearrError, match="index 'idx' has dtype .*float"):
        rearr.rearrange(to_lib(X, lib), "b n[idx: b] c -> b c", idx=to_lib(np.zeros(3, np.float32), lib))


def test_scatter_is_refused_naming_the_library() -> None:
    """The standard has no at-style update; jax has one (its own backend, tests/backends/test_jax.py)."""
    src = to_lib(np.ones((3, 4), np.float32), "array_api_strict")
    idx = to_lib(np.zeros((3, 4), np.int64), "array_api_strict")
    with pytest.raises(rearr.RearrError, match="array_api_strict arrays cannot be scattered") as e:
        rearr.scatter(src, "b k -> b n[idx]", "sum", idx=idx, n=6)
    assert "np.from_dlpack" in e.value.hint
    assert e.value.op == "scatter" and e.value.pattern == "b k -> b n[idx]"


def test_the_scatter_hint_works() -> None:
    """The hint's recipe, applied: through numpy and back to the library's own array."""
    src, idx = xs.ones((3, 4)), xs.asarray([[0, 1, 1, 5]] * 3)
    out = rearr.scatter(np.from_dlpack(src), "b k -> b n[idx]", "sum", idx=np.from_dlpack(idx), n=6)
    got = xs.asarray(out)
    assert isinstance(got, type(src))
    np.testing.assert_array_equal(np.from_dlpack(got)[0], [1, 2, 0, 0, 0, 1])


@libs
def test_dtype_rules(lib: str) -> None:
    ints = to_lib(np.arange(6).reshape(2, 3), lib)
    with pytest.raises(rearr.RearrError, match="'mean' of a tensor of .*int"):
        rearr.reduce(ints, "a b -> a", "mean")
    if lib == "jax":  # array-api-strict has no complex max at all; jax would order lexicographically
        with pytest.raises(rearr.RearrError, match="'max' of complex numbers is undefined"):
            rearr.reduce(jnp.ones((2, 3), jnp.complex64), "a b -> a", "max")


def test_gather_without_take_along_axis() -> None:
    """Array API 2023.12 had no take_along_axis: the gather is one take of flat positions instead."""
    idx = np.array([[4, 0, 2, 1], [0, 0, 3, 3], [-1, 1, 2, 0]])
    assert "GatherAlong" in step_kinds("rearrange", "b n[idx] c -> b c", X.shape, idx=idx)
    with xs.ArrayAPIStrictFlags(api_version="2023.12"):
        got = rearr.rearrange(xs.asarray(X), "b n[idx] c -> b c", idx=xs.asarray(idx))
        check_same(got, np.take_along_axis(X, idx[:, None, :], axis=1)[:, 0], "array_api_strict")


def test_jax_inside_jit() -> None:
    f = jax.jit(lambda t: rearr.reduce(t, "b n c -> c b", "max"))
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(X))), X.max(axis=1).T)
    pattern = "b n[i: b] c -> c b"
    g = jax.jit(lambda t, i: rearr.rearrange(t, pattern, i=i, check_bounds=False))
    np.testing.assert_array_equal(np.asarray(g(jnp.asarray(X), jnp.asarray([1, 4, 0]))), X[[0, 1, 2], [1, 4, 0]].T)
    # With the checks on, a traced index is checked inside the program (tests/backends/test_jax.py).
    h = jax.jit(lambda t, i: rearr.rearrange(t, pattern, i=i))
    np.testing.assert_array_equal(np.asarray(h(jnp.asarray(X), jnp.asarray([1, -1, 0]))), X[[0, 1, 2], [1, 4, 0]].T)


def test_numpy_and_torch_keep_their_backends() -> None:
    """numpy 2 arrays (and torch tensors) have __array_namespace__ too: they never reach the generic backend."""
    import torch

    assert backend_for(np.zeros(2)).name == "numpy"
    assert backend_for(torch.zeros(2)).name == "torch"
    assert backend_for(xs.zeros(2)).name == "array_api"
    assert backend_for(jnp.zeros(2)).name == "jax"  # a specialisation of the Array API backend
    with pytest.raises(rearr.RearrError, match="does not accept str objects"):
        rearr.rearrange("ab", "a -> a")


def test_import_rearr_imports_no_optional_framework() -> None:
    code = ("import sys, rearr; bad = [m for m in ('torch', 'lark', 'dask', 'jax', 'array_api_compat', "
            "'array_api_strict') if m in sys.modules]; print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], check=True)
