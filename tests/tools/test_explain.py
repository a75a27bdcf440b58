"""rearr.explain: the printed code is the code that runs, and the report says what it should.

The main test executes the printed lines of each backend on random inputs and
compares the result with rearr's own: if the explanation and the backends
drift apart, it fails.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import array_api_strict
import dask.array as da
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from strategies import gather_cases, scatter_cases, transform_cases

import rearr
from rearr import RearrError, backends, explain
from rearr.planning.plan import (
    STEP_KINDS,
    ScatterAlong,
    ScatterRows,
)
from rearr.tools.explain import BACKENDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (op, pattern, shape, reduction, keywords); an index keyword is (shape, length of the indexed axis).
CASES = [
    ("rearrange", "a b c -> c b a", (2, 3, 4), None, {}),
    ("rearrange", "c b h -> b (c h)", (2, 5, 32), None, {}),
    ("rearrange", "(a b) c -> a b c", (6, 4), None, {"a": 2}),
    ("rearrange", "a b c -> (b a c)", (2, 3, 4), None, {}),
    ("rearrange", "b ... c -> b c ...", (2, 3, 4, 5), None, {}),
    ("rearrange", "b ... -> (...) b", (2, 3, 4), None, {}),
    ("rearrange", "b 1 c () -> b () c 1", (2, 1, 3, 1), None, {}),
    ("rearrange", "a b -> a b", (2, 3), None, {}),
    ("reduce", "a b c -> a", (2, 3, 4), "sum", {}),
    ("reduce", "a b c -> c a", (2, 3, 4), "mean", {}),
    ("reduce", "a 2 c -> a c", (2, 2, 4), "max", {}),
    ("reduce", "(a b) c -> b", (6, 4), "min", {"a": 2}),
    ("reduce", "... c -> c", (2, 3, 4), "prod", {}),
    ("reduce", "a b c -> b", (2, 3, 4), "any", {}),
    ("reduce", "a b c -> (c a)", (2, 3, 4), "all", {}),
    ("reduce", "a b c -> b", (2, 3, 4), lambda x, axes: x.sum(axes), {}),
    ("repeat", "a b -> a k b 3", (2, 3), None, {"k": 2}),
    ("repeat", "a b -> (a k) b", (2, 3), None, {"k": 2}),
    ("repeat", "h w -> (h 2) (w 3)", (2, 3), None, {}),
    ("rearrange", "b n[idx: b k] c -> b k c", (2, 5, 3), None, {"idx": ((2, 4), 5)}),
    ("rearrange", "b n[idx] c -> b k c", (2, 5, 3), None, {"idx": ((2, 4, 3), 5)}),
    ("rearrange", "b n[idx] -> b", (2, 5), None, {"idx": ((2,), 5)}),
    ("rearrange", "n[idx: k] b c -> b k c", (5, 2, 3), None, {"idx": ((4,), 5)}),
    ("rearrange", "b c n[idx: b c k] -> b (k c)", (2, 3, 5), None, {"idx": ((2, 3, 4), 5)}),
    ("rearrange", "v[ids: b t] d -> b t d", (10, 3), None, {"ids": ((2, 4), 10)}),
    ("rearrange", "b h[y: b p] w[x: b p] c -> b p c", (2, 4, 5, 3), None, {"y": ((2, 6), 4), "x": ((2, 6), 5)}),
    ("rearrange", "b h[y: p] w[xx: p] c -> b p c", (2, 4, 5, 3), None, {"y": ((6,), 4), "xx": ((6,), 5)}),
    ("rearrange", "c b h[y: b p] w[x: b p] -> b p c", (3, 2, 4, 5), None, {"y": ((2, 6), 4), "x": ((2, 6), 5)}),
    # large enough for the planner to move whole rows (index_select on a (rows, width) view)
    ("rearrange", "b n[idx: b k] c -> b k c", (2, 5, 4096), None, {"idx": ((2, 4), 5)}),
    ("scatter", "b k -> b n[idx]", (2, 4), "sum", {"n": 10, "idx": ((2, 4), 10)}),
    ("scatter", "b k -> b n[idx]", (2, 4), "set", {"n": 10, "idx": ((2, 4), 10)}),
    ("scatter", "r c -> r m[idx: c]", (2, 3), "sum", {"m": 2, "idx": ((3,), 2)}),
    ("scatter", "b k c -> b n[idx: b k] c", (2, 4, 3), "max", {"n": 6, "idx": ((2, 4), 6)}),
    ("scatter", "b k c -> (b c) n[idx: b k]", (2, 4, 3), "prod", {"n": 6, "idx": ((2, 4), 6)}),
    ("scatter", "e c -> v[dst] c", (7, 3), "mean", {"v": 5, "dst": ((7, 3), 5)}),
    ("scatter", "b p c -> b h[y: b p] w[x: b p] c", (2, 6, 3), "sum", {"h": 4, "w": 5, "y": ((2, 6), 4),
                                                                       "x": ((2, 6), 5)}),
    ("scatter", "b p c -> b h[y: b p] w[x: b p] c", (2, 6, 3), "min", {"h": 4, "w": 5, "y": ((2, 6), 4),
                                                                       "x": ((2, 6), 5)}),
    ("scatter", "b p c -> b h[y: b p] w[x: b p] c", (2, 6, 3), "mean", {"h": 4, "w": 5, "y": ((2, 6), 4),
                                                                        "x": ((2, 6), 5)}),
    ("scatter", "b p c -> b h[y: b p] w[x: b p] c", (2, 6, 3), "set", {"h": 6, "w": 6, "y": ((2, 6), 6),
                                                                       "x": ((2, 6), 6)}),
    ("scatter", "v[src: e] c -> v[dst: e] c", (5, 3), "mean", {"src": ((7,), 5), "dst": ((7,), 5)}),
    ("scatter", "b k c -> b n[idx: b k] c", (2, 4, 4096), "sum", {"n": 6, "idx": ((2, 4), 6)}),
    ("scatter", "b k c -> b n[idx: b k] c", (2, 4, 4096), "max", {"n": 6, "idx": ((2, 4), 6)}),
    # scatter along a leading axis (numpy: the index times a stride, plus the offsets of the other axes)
    ("scatter", "k b -> n[idx] b", (4, 3), "sum", {"n": 6, "idx": ((4, 3), 6)}),
    ("scatter", "k b c -> b n[idx] c", (4, 2, 3), "min", {"n": 5, "idx": ((4, 2, 3), 5)}),
    ("scatter", "k -> n[idx]", (4,), "max", {"n": 6, "idx": ((4,), 6)}),
    ("scatter", "k -> n[idx]", (4,), "set", {"n": 6, "idx": ((4,), 6)}),
]


def _case_id(case) -> str:
    op, pattern, shape, reduction, _ = case
    name = getattr(reduction, "__name__", reduction)
    return f"{op}-{pattern}-{shape}" + (f"-{name}" if reduction else "")


def _inputs(case, seed: int = 0):
    """Random input, lengths and index arrays (unique positions under 'set')."""
    op, pattern, shape, reduction, keywords = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if reduction in ("any", "all"):
        x = rng.integers(0, 2, shape).astype(bool) | (rng.random(shape) < 0.5)
    lengths, indices = {}, {}
    for name, value in keywords.items():
        if isinstance(value, tuple):
            ishape, n = value
            if reduction == "set":  # every write lands on its own position: one permutation per row
                rows = int(np.prod(ishape[:-1]))
                values = np.stack([rng.permutation(n)[: ishape[-1]] for _ in range(rows)]).reshape(ishape)
                indices[name] = values.astype(np.int64)
            else:
                indices[name] = rng.integers(0, n, ishape)
        else:
            lengths[name] = value
    return x, lengths, indices


def _rearr(case, x, lengths, indices):
    op, pattern, _, reduction, _ = case
    if op == "scatter":
        return rearr.scatter(x, pattern, reduction, **lengths, **indices)
    if op == "reduce":
        return rearr.reduce(x, pattern, reduction, **lengths, **indices)
    return getattr(rearr, op)(x, pattern, **lengths, **indices)


# Where the printed code runs: each explain backend, the Array API one on two libraries. The printed code
# calls the namespace it finds here: np, torch, da (dask) or xp (the array's Array API namespace).
LIBRARIES = {"torch": "torch", "numpy": "numpy", "dask": "dask", "array_api_strict": "array_api", "jax": "jax"}
_XP = {"array_api_strict": array_api_strict, "jax": jnp}


def _to(library: str, a: np.ndarray):
    """A numpy array as the library's array (dask: about 3 blocks on every axis, ragged where it does not
    divide, so that steps meet block edges while the graphs stay small)."""
    if library == "torch":
        return torch.from_numpy(a)
    if library == "dask":
        return da.from_array(a, chunks=tuple(max(1, -(-n // 3)) for n in a.shape))
    if library == "jax":  # jax without x64 holds 32-bit numbers: convert them here, not silently in jnp
        a = a.astype({"f": np.float32, "i": np.int32, "u": np.uint32}.get(a.dtype.kind, a.dtype)) \
            if a.dtype.itemsize == 8 else a
    return _XP[library].asarray(a) if library in _XP else a


def _numpy(y) -> np.ndarray:
    if isinstance(y, da.Array):
        return y.compute()
    if isinstance(y, jax.Array):
        return np.asarray(y)
    return np.from_dlpack(y) if hasattr(y, "__dlpack__") and not isinstance(y, np.ndarray) else np.asarray(y)


def _run_code(explanation, x, indices, library: str = "numpy"):
    namespace = {"np": np, "torch": torch, "da": da, "jnp": jnp, explanation.input_name: x, **indices}
    if library in _XP:
        namespace["xp"] = _XP[library]
    if callable(explanation.reduction):
        namespace["reduction"] = explanation.reduction
    exec("\n".join(explanation.code), namespace)  # noqa: S102 - the point of the test
    return namespace[explanation.input_name]


def _refused(library: str, case) -> bool:
    """The Array API has no at-style update: rearr refuses its scatters, and so does explain."""
    return case[0] == "scatter" and LIBRARIES[library] == "array_api"


@pytest.mark.slow
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_printed_code_gives_rearrs_result(case, library):
    op, pattern, shape, reduction, keywords = case
    x, lengths, indices = _inputs(case)
    if library == "array_api_strict" and callable(reduction):
        pytest.skip("the callable calls x.sum, which array-api-strict arrays do not have (rearr passes x as it is)")
    x, indices = _to(library, x), {k: _to(library, v) for k, v in indices.items()}
    shapes = {name: v.shape for name, v in indices.items()}
    backend = LIBRARIES[library]
    if _refused(library, case):
        with pytest.raises(RearrError) as printed:
            explain(pattern, shape, op=op, reduction=reduction, backend=backend, **lengths, **shapes)
        with pytest.raises(RearrError) as ran:
            _rearr(case, x, lengths, indices)
        assert printed.value.code == ran.value.code == "RA500"
        assert "cannot be scattered" in printed.value.message and "cannot be scattered" in ran.value.message
        return
    e = explain(pattern, shape, op=op, reduction=reduction, backend=backend, **lengths, **shapes)
    got = _run_code(e, x, indices, library)
    want = _rearr(case, x, lengths, indices)
    assert type(got) is type(want)  # dask: still a lazy dask array; jax, array-api-strict: their own arrays
    assert tuple(got.shape) == tuple(want.shape) == e.out_shape
    if library == "torch":
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(_numpy(got), _numpy(want))


# einsum: (pattern, operand shapes, lengths); matrix products (torch: matmul) and the others (einsum)
EINSUM_CASES = [
    ("b h i d, b h j d -> b h i j", [(2, 3, 4, 5), (2, 3, 6, 5)], {}),
    ("b h i j, b h j d -> b h i d", [(2, 3, 4, 6), (2, 3, 6, 5)], {}),
    ("b i d, b j d -> b j i", [(2, 3, 4), (2, 5, 4)], {}),
    ("b d, b i d -> b i", [(2, 4), (2, 5, 4)], {}),
    ("k, k ->", [(3,), (3,)], {}),
    ("b (h w) c, c d -> b h w d", [(2, 6, 4), (4, 5)], {"h": 2}),
    ("b h w c, (h w) t -> b t c", [(2, 4, 4, 5), (16, 3)], {}),
    ("b t c, c d -> (b t) d 1", [(2, 3, 4), (4, 5)], {}),
    ("b i, b j -> b i j", [(2, 3), (2, 4)], {}),
    ("... i d, ... j d -> ... i j", [(7, 2, 3, 4), (2, 5, 4)], {}),
    ("a b, b c, c d -> a d", [(2, 3), (3, 4), (4, 5)], {}),
    ("i i -> i", [(3, 3)], {}),
]


@pytest.mark.slow
@pytest.mark.parametrize("library", ["torch", "numpy", "dask", "jax"])
@pytest.mark.parametrize("pattern, shapes, lengths", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_printed_einsum_code_gives_rearrs_result(pattern, shapes, lengths, library):
    rng = np.random.default_rng(0)
    xs = [_to(library, rng.standard_normal(s)) for s in shapes]
    e = explain(pattern, *shapes, op="einsum", backend=LIBRARIES[library], **lengths)
    namespace = {"np": np, "torch": torch, "da": da, "jnp": jnp, "xp": _XP.get(library),
                 **{name: x for (name, _), x in zip(e.operands, xs)}}
    exec("\n".join(e.code), namespace)  # noqa: S102 - the point of the test
    got, want = namespace[e.input_name], rearr.einsum(*xs, pattern, **lengths)
    assert type(got) is type(want) and tuple(got.shape) == tuple(want.shape) == e.out_shape
    if library == "torch":
        torch.testing.assert_close(got, want, rtol=0, atol=0)  # the same calls
    else:
        np.testing.assert_array_equal(_numpy(got), _numpy(want))


def test_einsum_report_shows_the_matmul_on_torch_and_the_einsum_elsewhere():
    e = explain("b h i d, b h j d -> b h i j", (2, 3, 4, 5), (2, 3, 6, 5), op="einsum")
    assert e.code == ("y = y.permute(0, 1, 3, 2)", "x = torch.matmul(x, y)")
    text = str(e)
    for part in ["einsum 'b h i d, b h j d -> b h i j': x (2, 3, 4, 5), y (2, 3, 6, 5) -> (2, 3, 4, 6)",
                 "d     5  einsum axis d", "torch code (x, y are the operands, then x is the result):",
                 "formula: out[b, h, i, j] = sum over d of x[b, h, i, d] * y[b, h, j, d]"]:
        assert part in text, text
    assert explain("b h i d, b h j d -> b h i j", (2, 3, 4, 5), (2, 3, 6, 5), op="einsum", backend="numpy").code \
        == ("x = np.einsum('abcd,abed->abce', x, y)",)
    assert explain("x y, y z -> x z", (2, 3), (3, 4), op="einsum").operands == (("x1", (2, 3)), ("y1", (3, 4)))
    for args, kwargs, code in [(((2, 3),), {}, "RA206"), (((2, 3), (4, 5)), {}, "RA303"),
                               (((2, 3), (3, 4)), {"show": True}, "RA100"), (((2, -3), (3, 4)), {}, "RA304")]:
        with pytest.raises(RearrError) as info:
            explain("i j, j k -> i k", *args, op="einsum", **kwargs)
        assert info.value.code == code


@given(st.one_of(transform_cases(), gather_cases(), scatter_cases(dtypes=("float64", "float32"))),
       st.sampled_from(["torch", "numpy", "torch", "numpy", "dask", "array_api_strict"]))
def test_printed_code_on_random_patterns(case, backend):
    """The same check on the patterns that the property tests draw (no fill= or into=, which explain leaves out)."""
    assume(case.into is None)
    case.fill = None
    if backend in ("dask", "array_api_strict"):
        _check_other_library(case, backend)
        return
    x, kwargs = case.inputs(backend)
    if case.as_list:
        x = np.stack(x) if backend == "numpy" else torch.stack(x)
    try:
        want = _rearr((case.op, case.pattern, None, case.reduction, None), x, kwargs, {})
    except RearrError:
        assume(False)  # out-of-range indices, duplicates under 'set', the mean of integers
    shapes = {k: tuple(v.shape) if hasattr(v, "shape") else v for k, v in kwargs.items()}
    e = explain(case.pattern, tuple(x.shape), op=case.op, reduction=case.reduction, backend=backend, **shapes)
    # The code runs after rearr's index check: int64 values, negative ones counted from the end.
    indices = {}
    for use in e.plan.indices:
        t = kwargs[use.name]
        indices[use.name] = (t.long() if backend == "torch" else t.astype(np.int64)) % max(use.length, 1)
    got = _run_code(e, x, indices, backend)
    assert tuple(got.shape) == tuple(want.shape) == e.out_shape
    if backend == "torch":
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
    # "a view of x" holds exactly when the result shares x's memory. (Not checked with indices: torch
    # treats 0-d index tensors like ints, and x[i, j] is then a view though the plan says copy.)
    if x.shape and min(x.shape) > 0 and not e.plan.indices:
        assert _shares_memory(want, x) == e.is_view, str(e)


def _check_other_library(case, library: str) -> None:
    """test_printed_code_on_random_patterns on dask or array-api-strict: the printed code against rearr."""
    x, kwargs = case.inputs("numpy")
    x = np.stack(x) if case.as_list else x
    try:
        want = _rearr((case.op, case.pattern, None, case.reduction, None), x, kwargs, {})  # numpy's, as a filter
    except RearrError:
        assume(False)
    shapes = {k: tuple(v.shape) if hasattr(v, "shape") else v for k, v in kwargs.items()}
    backend = LIBRARIES[library]
    if case.op == "scatter" and backend == "array_api":
        with pytest.raises(RearrError, match="cannot be scattered"):
            explain(case.pattern, tuple(x.shape), op=case.op, reduction=case.reduction, backend=backend, **shapes)
        return
    e = explain(case.pattern, tuple(x.shape), op=case.op, reduction=case.reduction, backend=backend, **shapes)
    lengths = {k: v for k, v in kwargs.items() if not isinstance(v, np.ndarray)}
    indices = {u.name: _to(library, kwargs[u.name].astype(np.int64) % max(u.length, 1)) for u in e.plan.indices}
    x = _to(library, x)
    want = _rearr((case.op, case.pattern, None, case.reduction, None), x, {**lengths, **indices}, {})
    got = _run_code(e, x, indices, library)
    assert type(got) is type(want) and tuple(got.shape) == tuple(want.shape) == e.out_shape
    np.testing.assert_array_equal(_numpy(got), _numpy(want))


def _shares_memory(a, b) -> bool:
    if not isinstance(a, torch.Tensor):
        return np.shares_memory(a, b)
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_explain_covers_every_backend_that_ships_templates():
    assert set(BACKENDS) == set(backends.explainable()) == set(LIBRARIES.values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_table_executes_every_step_kind_on_every_backend(backend):
    """test_printed_code_gives_rearrs_result runs CASES on each backend: together they hold every step kind.

    A step kind that the backend refuses (the Array API's scatters) counts as executed when
    explain refuses it too, with the error that running it raises (checked there).
    """
    seen, refused = set(), set()
    for case in CASES:
        op, pattern, shape, reduction, _ = case
        _, lengths, indices = _inputs(case)
        kwargs = dict(op=op, reduction=reduction, **lengths, **{k: v.shape for k, v in indices.items()})
        try:
            e = explain(pattern, shape, backend=backend, **kwargs)
        except RearrError as error:
            assert "cannot be scattered" in error.message, error
            refused |= {type(s) for s in explain(pattern, shape, backend="numpy", **kwargs).plan.steps}
            continue
        seen |= {type(s) for s in e.plan.steps}
    missing = set(STEP_KINDS) - seen - refused
    assert not missing, f"no case lowers to {', '.join(k.__name__ for k in missing)}"
    assert set(STEP_KINDS) - seen <= {ScatterRows, ScatterAlong}
    assert bool(refused) == (backend == "array_api")
    assert set(backends.code_templates(backend)) == set(STEP_KINDS) | {"einsum"}  # einsum: its own cases


def test_numpy_small_scatter_sum_prints_add_at_with_one_index_array_per_axis():
    """A small 'sum' is np.add.at on the output with aranges for the other axes (numpy checks the values)."""
    e = explain("k b c -> b n[idx] c", (4, 2, 3), op="scatter", reduction="sum", backend="numpy", n=5,
                idx=(4, 2, 3))
    assert ("np.add.at(out, (np.arange(2).reshape(2, 1, 1), idx.transpose((1, 0, 2)), "
            "np.arange(3).reshape(1, 1, 3)), x)") in e.code


def test_numpy_scatter_along_an_axis_prints_the_precomputed_offsets():
    """The backend adds the index to offsets computed once per plan (no np.ravel_multi_index);
    'mean' (a 'sum' this small is np.add.at on one index array per axis: see the test above)."""
    e = explain("k b c -> b n[idx] c", (4, 2, 3), op="scatter", reduction="mean", backend="numpy", n=5,
                idx=(4, 2, 3))
    assert any(isinstance(s, ScatterAlong) for s in e.plan.steps)
    code = "\n".join(e.code)
    assert "ravel_multi_index" not in code
    assert "offset = np.arange(2).reshape(2, 1, 1) * 15 + np.arange(3).reshape(1, 1, 3)" in code
    assert "flat = (offset + idx.transpose((1, 0, 2)) * 3).reshape(-1)" in code


@pytest.mark.parametrize("pattern, n_src", [("k -> n[idx]", 3000), ("k -> n[idx]", 30), ("k c -> n[idx: k] c", 3000)])
@pytest.mark.parametrize("dtype, reduction", [
    ("int32", "min"), ("int32", "max"), ("uint8", "min"), ("bool", "max"), ("bool", "min"),
    ("float16", "sum"), ("float16", "mean"), ("float16", "prod"), (">f2", "sum"), ("float64", "max"),
])
def test_explained_numpy_scatter_code_gives_rearrs_result_for_every_dtype(pattern, n_src, dtype, reduction):
    """explain has no dtype: the printed start value (the dtype's extreme for max/min, not +-inf, which an
    int32 array holds as INT_MIN) and accumulator (float32 for float16, rounded once) are those of x."""
    rng = np.random.default_rng(0)
    shape = (n_src,) if pattern.startswith("k ->") else (n_src, 2)
    idx = rng.integers(0, 3, n_src)
    if reduction == "prod":  # near 1, so that 1000 factors neither overflow nor vanish
        x = 1 + rng.integers(-3, 4, shape) / 256
    else:
        x = rng.integers(0, 3, shape) + (1 / 3 if "f" in dtype else 0)
    x = x.astype(dtype)
    x[idx == 1] = 0  # for max: a position whose largest value is 0 (False), below a -inf start cast to the dtype
    e = explain(pattern, shape, op="scatter", reduction=reduction, backend="numpy", idx=(n_src,), n=3)
    got = _run_code(e, x, {"idx": idx})
    want = rearr.scatter(x, pattern, reduction, idx=idx, n=3)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_explained_numpy_small_scatter_sum_accumulates_float16_in_float32():
    """The small 'sum' (np.add.at with one index array per axis) too: 2048 + 1 + 1 is 2048 in float16."""
    x, idx = np.array([2048, 1, 1], np.float16), np.zeros(3, np.int64)
    e = explain("k -> n[idx]", (3,), op="scatter", reduction="sum", backend="numpy", idx=(3,), n=2)
    assert any(line.startswith("np.add.at(out, (idx,), x)") for line in e.code)  # the small path
    got = _run_code(e, x, {"idx": idx})
    assert got.dtype == np.float16 and got.tolist() == rearr.scatter(x, "k -> n[idx]", "sum", idx=idx, n=2).tolist()
    assert got.tolist() == [2050, 0]


@pytest.mark.parametrize("dtype", ["uint8", "uint32", "int8", "bool", "float16", ">f2", "float64"])
@pytest.mark.parametrize("reduction", ["sum", "prod"])
def test_explained_numpy_reduce_sum_prod_gives_rearrs_dtype_and_value(dtype, reduction):
    """uint8/16/32 accumulate in int64 and float16 in float32, rounded once: as torch, and as printed."""
    x = (np.arange(1, 3001) % 7 + (0.001 if "f" in dtype else 0)).reshape(3, 1000).astype(dtype)
    if reduction == "prod":
        x = (1 + np.arange(3000) % 3 / 1024).reshape(3, 1000).astype(dtype) if "f" in dtype else x % 2 + 1
    e = explain("a b -> a", (3, 1000), op="reduce", reduction=reduction, backend="numpy")
    got, want = _run_code(e, x, {}), rearr.reduce(x, "a b -> a", reduction)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int8])
@pytest.mark.parametrize("pattern", ["a b -> a", "a b c -> b"])
def test_explained_torch_reduce_prod_multiplies_half_precision_in_float32(dtype, pattern):
    shape = (3, 1000) if pattern == "a b -> a" else (3, 40, 25)
    x = (1 + torch.arange(3000) % 3 / 1024).reshape(shape).to(dtype) if dtype.is_floating_point else \
        (torch.arange(3000) % 2 + 1).reshape(shape).to(dtype)
    e = explain(pattern, shape, op="reduce", reduction="prod", backend="torch")
    got, want = _run_code(e, x, {}, "torch"), rearr.reduce(x, pattern, "prod")
    assert got.dtype == want.dtype
    assert torch.equal(got, want)


@pytest.mark.parametrize("reduction", ["any", "all"])
def test_explained_torch_reduce_any_all_gives_bools_for_uint8(reduction):
    x = torch.tensor([[0, 3], [1, 1]], dtype=torch.uint8)
    e = explain("a b -> a", (2, 2), op="reduce", reduction=reduction, backend="torch")
    got, want = _run_code(e, x, {}, "torch"), rearr.reduce(x, "a b -> a", reduction)
    assert got.dtype == want.dtype == torch.bool
    assert torch.equal(got, want)


def test_dask_merge_prints_the_blockwise_reshape_that_rearr_runs_for_whole_blocks():
    """Whether dask's merge runs block by block depends on x's chunks: the template prints that call as a comment."""
    e = explain("b c h -> b (c h)", (2, 5, 32), backend="dask")
    alternative = [line for line in e.code if line.startswith("#   ")]
    assert alternative == ["#   x = reshape_blockwise(x, (2, 160))"]
    assert e.code[-1].startswith("x = x.reshape(2, 160)")
    from dask.array.reshape import reshape_blockwise

    data = np.random.default_rng(0).standard_normal((2, 5, 32))
    # chunks of whole (c h) rows: rearr runs the commented call; chunks of 2: the printed one. Same values.
    for chunks, runs in [(((1, 1), (1,) * 5, (32,)), alternative[0][4:]), (2, "\n".join(e.code))]:
        x = da.from_array(data, chunks=chunks)
        want = rearr.rearrange(x, "b c h -> b (c h)")
        namespace = {"x": x, "reshape_blockwise": reshape_blockwise, "da": da}
        exec(runs, namespace)  # noqa: S102 - the point of the test
        assert namespace["x"].chunks == want.chunks  # the call that rearr makes for these chunks
        np.testing.assert_array_equal(namespace["x"].compute(), want.compute())
        np.testing.assert_array_equal(_run_code(e, x, {}, "dask").compute(), want.compute())


def test_dask_split_and_merge_of_one_axis_prints_the_split_first():
    e = explain("(a b) c -> a (b c)", (6, 4), backend="dask", a=2)
    assert [line.split("  #")[0] for line in e.code] == [
        "# dask refuses to split and merge one axis at once: split first, then merge",
        "x = x.reshape(2, 3, 4)", "x = x.reshape(2, 12)"]
    x = da.from_array(np.arange(24.0).reshape(6, 4), chunks=(4, 3))
    np.testing.assert_array_equal(_run_code(e, x, {}, "dask").compute(),
                                  rearr.rearrange(x, "(a b) c -> a (b c)", a=2).compute())


@pytest.mark.parametrize("reduction", ["sum", "prod", "max", "min", "any"])
def test_array_api_reductions_of_bools_print_the_case_rearr_takes(reduction):
    """explain does not know the dtype: what rearr does for bool input (count, or max as any) is printed
    as a condition, and the printed code gives rearr's result (array-api-strict refuses sum/max of bools)."""
    e = explain("a b -> a", (2, 3), op="reduce", reduction=reduction, backend="array_api")
    assert any("xp.bool" in line for line in e.code) == (reduction != "any")
    assert any("xp = array_api_compat.array_namespace(x)" in note for note in e.notes)
    x = array_api_strict.asarray([[True, False, True], [True, True, True]])
    namespace = {"x": x, "xp": array_api_strict}
    exec("\n".join(e.code), namespace)  # noqa: S102 - the point of the test
    want = rearr.reduce(x, "a b -> a", reduction)
    assert namespace["x"].dtype == want.dtype
    np.testing.assert_array_equal(np.from_dlpack(namespace["x"]), np.from_dlpack(want))


def test_explain_reads_the_shapes_and_strides_the_planner_recorded():
    e = explain("c b h -> b (c h)", (2, 5, 32))
    assert [(lay.shape, lay.strides) for lay in e.plan.layouts] == [
        ((2, 5, 32), (160, 32, 1)), ((5, 2, 32), (32, 160, 1)), ((5, 64), (64, 1))]
    assert len(e.plan.layouts) == len(e.plan.steps) + 1


def test_index_shapes_are_derived_from_known_lengths():
    # idx: b k, with b from the input and k from a keyword; the index shape need not be given
    e = explain("b n[idx: b k] c -> b k c", (2, 5, 3), k=4)
    assert e.plan.indices[0].shape == (2, 4)
    e = explain("b k -> b n[idx]", (2, 4), op="scatter", reduction="sum", n=10)
    assert e.plan.indices[0].shape == (2, 4)
    e = explain("b ... n[idx] -> b ...", (2, 3, 4, 5))  # idx has the output's axes: b ...
    assert e.plan.indices[0].shape == (2, 3, 4)


def test_an_index_of_unknown_shape_is_an_error_that_says_what_to_pass():
    with pytest.raises(RearrError) as info:
        explain("b n[idx: b k] c -> b k c", (2, 5, 3))
    assert "idx=" in info.value.hint and "k=" in info.value.hint


# --- formulas ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, formula",
    [
        (("c b h -> b (c h)", (2, 5, 32)), {}, "out[b, k] = x[k // 32, b, k % 32]"),
        (("a b c -> (b a c)", (2, 3, 4)), {}, "out[k] = x[k // 4 % 2, k // 8, k % 4]"),
        (("(a b) c -> a b c", (6, 4)), {"a": 2}, "out[a, b, c] = x[a * 3 + b, c]"),
        (("(a b) c -> (a b) c", (6, 4)), {"a": 2}, "out[k, c] = x[k, c]"),
        (("a b c -> a", (2, 3, 4)), {"op": "reduce", "reduction": "sum"}, "out[a] = sum over b, c of x[a, b, c]"),
        (("a b -> a k b 3", (2, 3)), {"op": "repeat", "k": 2},
         "out[a, k, b, _3] = x[a, b]   (the same for every k, _3)"),
        (("h w -> h (w r)", (2, 3)), {"op": "repeat", "r": 2}, "out[h, k] = x[h, k // 2]"),
        (("b n[idx: b k] c -> b k c", (2, 5, 3)), {"k": 4}, "out[b, k, c] = x[b, idx[b, k], c]"),
        (("b n[idx: b k] c -> b (k c)", (2, 5, 3)), {"k": 4}, "out[b, l] = x[b, idx[b, l // 3], l % 3]"),
        (("b k -> b n[idx]", (2, 4)), {"op": "scatter", "reduction": "sum", "n": 10},
         "out[b, idx[b, k]] += x[b, k]"),
        (("v[src: e] c -> v[dst: e] c", (5, 3)), {"op": "scatter", "reduction": "mean", "src": 7, "dst": 7},
         "out[dst[e], c] <- mean of x[src[e], c]"),
        (("b ... c -> b c ...", (2, 3, 4, 5)), {}, "out[b, c, ...[0], ...[1]] = x[b, ...[0], ...[1], c]"),
    ],
)
def test_formula(args, kwargs, formula):
    assert explain(*args, **kwargs).formula == formula


def test_names_never_collide_with_axes_or_indices():
    # an index named x and an axis named out: the input and output get other names
    e = explain("b h[y: b p] w[x: b p] out -> b p out", (2, 4, 5, 3), p=6)
    assert e.input_name != "x"
    assert e.formula.startswith("out1[") and "x[b, p]" in e.formula


# --- view or copy ------------------------------------------------------------------


def test_a_pure_permute_is_a_view():
    e = explain("a b c -> c b a", (2, 3, 4))
    assert e.is_view and e.copies == 0
    assert e.code == ("x = x.permute(2, 1, 0)  # view: reorders the axes (strides only)",)
    assert "a view of x" in str(e)


def test_merging_permuted_axes_is_one_copy():
    e = explain("c b h -> b (c h)", (2, 5, 32))
    assert not e.is_view and e.copies == 1
    assert e.code[-1].startswith("x = x.contiguous().view(5, 64)")
    assert e.code[-1].endswith("# copy: axes c, h are not adjacent in memory")
    assert sum("# copy" in line for line in e.code) == 1
    numpy = explain("c b h -> b (c h)", (2, 5, 32), backend="numpy")
    assert [line.split("  #")[0].strip() for line in numpy.code] == ["x = x.transpose((1, 0, 2))",
                                                                     "x = x.reshape(5, 64)"]


def test_a_merge_of_adjacent_axes_is_a_view():
    e = explain("b c h -> b (c h)", (2, 5, 32))
    assert e.is_view
    assert e.code == ("x = x.view(2, 160)  # view: merges (c, h)",)


def test_view_marks_hold_on_torch():
    """Where explain says view, the torch result shares the input's memory."""
    for pattern, shape in [("a b c -> c b a", (2, 3, 4)), ("b c h -> b (c h)", (2, 5, 32)),
                           ("c b h -> b (c h)", (2, 5, 32)), ("b ... c -> b c ...", (2, 3, 4, 5))]:
        e = explain(pattern, shape)
        x = torch.randn(shape)
        out = rearr.rearrange(x, pattern)
        assert (out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == e.is_view, pattern


def test_repeat_copy_names_the_repeated_axis():
    e = explain("a b -> (a k) b", (2, 3), op="repeat", k=2)
    assert e.code[-1].endswith("# copy: axis k is repeated (stride 0) and must be written out")


# --- show ----------------------------------------------------------------------------


def test_show_lays_out_the_flat_positions():
    e = explain("a b c -> (b a c)", (2, 3, 4), show=True)
    np.testing.assert_array_equal(e.layout, np.arange(24).reshape(2, 3, 4).transpose(1, 0, 2).flatten())
    assert "np.arange(24).reshape(2, 3, 4)" in str(e)
    assert str(e.layout) in str(e).replace("\n  ", "\n")


def test_show_with_an_index_prints_the_example_index():
    e = explain("b n[idx: b k] -> b k", (2, 5), k=3, show=True)
    assert e.layout.shape == (2, 3)
    assert "idx = " in str(e)


def test_show_refuses_large_shapes():
    e = explain("c b h -> b (c h)", (2, 5, 32), show=True)
    assert e.layout is None and "at most 64" in str(e)


# --- errors and imports -------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("a b -> b c", (2, 3)), {}),  # an axis on one side only
        (("a b -> b a", (2, 3, 4)), {}),  # wrong number of dimensions
        (("(a b) c -> a b c", (7, 4)), {"a": 2}),  # does not divide
        (("a b -> b a",), {}),  # no shape
        (("a b -> b a", (2, 3), (2, 3)), {}),  # two shapes
        (("a b -> b a", (2, 3)), {"backend": "mlx"}),  # no such backend
        (("a b, c -> a", (2, 3)), {"op": "einsum"}),
        (("a b -> a", (2, 3)), {"op": "reduce", "reduction": "median"}),
        (("a b -> b a", (2, -3)), {}),
    ],
)
def test_errors_are_rearr_errors(args, kwargs):
    with pytest.raises(RearrError):
        explain(*args, **kwargs)


def test_the_report_holds_the_parts():
    text = str(explain("c b h -> b (c h)", (2, 5, 32)))
    for part in ["axes:", "c     2  input dimension 0", "h    32  input dimension 2", "torch code",
                 "x.permute(1, 0, 2)", "result: a new tensor (1 copy)", "formula: out[b, k] = x[k // 32, b, k % 32]"]:
        assert part in text


def test_explain_imports_neither_torch_nor_numpy():
    """The backends' templates are read without their framework (torch, dask, the Array API are optional extras)."""
    code = ("import sys, rearr; print(rearr.explain('c b h -> b (c h)', (2, 5, 32))); "
            "print(rearr.explain('b k -> b n[idx]', (2, 4), op='scatter', reduction='max', backend='numpy', n=6)); "
            "print(rearr.explain('b n[idx: b k] c -> b k c', (2, 5, 3), k=4, backend='dask')); "
            "print(rearr.explain('b n[idx: b k] c -> b k c', (2, 5, 3), k=4, backend='array_api')); "
            "assert not {'torch', 'numpy', 'dask', 'array_api_compat', 'jax'} & set(sys.modules), sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr


# --- the command line ------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rearr.tools.cli", "explain", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT})


def test_cli_explain():
    done = _cli("c b h -> b (c h)", "--shape", "2,5,32")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(explain("c b h -> b (c h)", (2, 5, 32)))


def test_cli_explain_einsum():
    done = _cli("i j, j k -> i k", "--shape", "2,3", "--shape", "3,4", "--op", "einsum")
    assert done.returncode == 0, done.stderr
    assert "x = torch.matmul(x, y)" in done.stdout


def test_cli_explain_options():
    done = _cli("b (h w) -> b h w", "--shape", "2,6", "-l", "h=2", "--backend", "numpy", "--show")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(explain("b (h w) -> b h w", (2, 6), backend="numpy", show=True, h=2))
    done = _cli("a b c -> a", "--shape", "2,3,4", "--op", "reduce", "--reduction", "mean")
    assert done.returncode == 0, done.stderr
    assert "x = x.mean(dim=(1, 2))" in done.stdout  # no merging reshape: the reduction takes both axes


@pytest.mark.parametrize("backend", ["dask", "array_api"])
def test_cli_explain_backends(backend):
    done = _cli("b n[idx: b k] c -> b k c", "--shape", "2,5,3", "-l", "k=4", "--backend", backend)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(explain("b n[idx: b k] c -> b k c", (2, 5, 3), k=4, backend=backend))
    assert f"{backend} code" in done.stdout
    done = _cli("b k -> b n[idx]", "--shape", "2,4", "--op", "scatter", "--reduction", "sum", "-l", "n=6",
                "--backend", backend)
    if backend == "dask":  # a lazy graph, printed as the one call that builds it
        assert done.returncode == 0, done.stderr
        assert "from rearr.backends.dask import scatter_along" in done.stdout
        return
    assert done.returncode == 1 and "cannot be scattered" in done.stderr and "Traceback" not in done.stderr


def test_cli_explain_names_the_backends_it_knows():
    done = _cli("a b -> b a", "--shape", "2,3", "--backend", "mxnet")
    assert done.returncode == 1
    assert "unknown backend 'mxnet'" in done.stderr
    assert all(name in done.stderr for name in ("numpy", "torch", "dask", "array_api"))


def test_cli_help_names_every_backend_that_explains():
    done = subprocess.run([sys.executable, "-m", "rearr.tools.cli", "explain", "--help"], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    assert all(name in " ".join(done.stdout.split()) for name in backends.explainable())


def test_cli_explain_with_an_index():
    done = _cli("b n[idx: b k] c -> b k c", "--shape", "2,5,3", "-l", "k=4")
    assert done.returncode == 0, done.stderr
    assert "out[b, k, c] = x[b, idx[b, k], c]" in done.stdout


def test_cli_explain_scatter_with_an_index_shape():
    done = _cli("r c -> r m[idx: c]", "--shape", "2,3", "--op", "scatter", "--reduction", "sum", "-l", "m=2",
                "-l", "idx=3", "--backend", "numpy")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(explain("r c -> r m[idx: c]", (2, 3), op="scatter", reduction="sum", m=2,
                                              idx=(3,), backend="numpy"))
    done = _cli("b n[idx] c -> b k c", "--shape", "2,5,3", "-l", "idx=2,4,3")
    assert done.returncode == 0, done.stderr
    assert "torch.gather(x, 1, idx)" in done.stdout


@pytest.mark.slow
def test_the_examples_in_docs_are_real_runs():
    with open(os.path.join(ROOT, "docs", "explain.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```console\n\$ rearr explain (.*?)\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 3
    for args, output in blocks:
        done = _cli(*shlex.split(args))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == output.strip(), args


def test_cli_explain_error():
    done = _cli("a b -> b c", "--shape", "2,3")
    assert done.returncode == 1
    assert "RA200" in done.stderr and "Traceback" not in done.stderr


# Scatters whose lowering differs when the source records a backward, and two that keep theirs.
GRAD_CASES = [c for c in CASES if c[0] == "scatter"] + [
    ("scatter", "e c -> v[dst: e] c", (7, 3), r, {"v": 5, "dst": ((7,), 5)}) for r in ("mean", "max", "min", "prod")
] + [("scatter", "v[src: e] c -> w[dst: e] c", (5, 3), "max", {"w": 4, "src": ((7,), 5), "dst": ((7,), 4)})]


@pytest.mark.parametrize("case", GRAD_CASES, ids=_case_id)
def test_printed_code_with_requires_grad_gives_rearrs_result_and_gradient(case, lowering):
    """explain(..., requires_grad=True) prints the lowering that runs on a source that needs a gradient:
    its code gives rearr's values and, differentiated, rearr's gradient (no ties here)."""
    op, pattern, shape, reduction, _ = case
    x, lengths, indices = _inputs(case)
    indices = {k: torch.from_numpy(v) for k, v in indices.items()}
    shapes = {name: tuple(v.shape) for name, v in indices.items()}
    e = explain(pattern, shape, op=op, reduction=reduction, requires_grad=True, **lengths, **shapes)
    printed, ran = (torch.from_numpy(x).requires_grad_() for _ in range(2))
    got, want = _run_code(e, printed, indices, "torch"), _rearr(case, ran, lengths, indices)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
    w = torch.from_numpy(np.random.default_rng(1).standard_normal(tuple(want.shape)))
    torch.testing.assert_close(torch.autograd.grad(got, printed, w)[0], torch.autograd.grad(want, ran, w)[0],
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("reduction, shown", [("mean", "sums = "), ("max", '"amax", include_self=True'),
                                               ("min", 'float("inf")'), ("prod", "masked_fill")])
def test_requires_grad_shows_the_training_lowering_and_the_default_says_where_it_is(reduction, shown):
    args = ("e c -> v[dst] c", (7, 3))
    trained = str(explain(*args, op="scatter", reduction=reduction, v=5, requires_grad=True))
    plain = str(explain(*args, op="scatter", reduction=reduction, v=5))
    assert shown in trained and shown not in plain
    assert "include_self=False" in plain and "include_self=False" not in trained
    assert "explain(..., requires_grad=True) prints it" in plain
    assert "requires_grad=True: the code that runs when x records a backward" in trained
    assert str(explain(*args, op="scatter", reduction="sum", v=5, requires_grad=True)).count("scatter_add_") == 1


def test_requires_grad_is_for_torch():
    with pytest.raises(RearrError) as e:
        explain("e c -> v[dst] c", (7, 3), op="scatter", reduction="max", v=5, backend="numpy", requires_grad=True)
    assert e.value.code == "RA100" and "drop requires_grad=" in e.value.hint


def test_cli_explain_requires_grad():
    done = _cli("e c -> v[dst] c", "--shape", "7,3", "--op", "scatter", "--reduction", "max", "-l", "v=5",
                "--requires-grad")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(explain("e c -> v[dst] c", (7, 3), op="scatter", reduction="max", v=5,
                                              requires_grad=True))
