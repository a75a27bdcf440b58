"""dask's scatter: a lazy graph of partial scatters per (block of the source, chunk of the result), combined
by a tree reduction (rearr.backends.dask.scatter_along). Every reduction, both scatter step kinds, numpy
and dask indices, fill=, into=, dtypes, routed outputs, message passing, 'set' with its duplicate checks,
index errors at compute, building that computes nothing, and a LocalCluster of worker processes; the
values are numpy's backend's (floats within a tolerance: the tree adds in another order)."""

from __future__ import annotations

import pickle
import warnings

import dask
import dask.array as da
import distributed
import numpy as np
import pytest

import rearr
from rearr import RearrError
from rearr.backends import dask as dask_backend
from rearr.backends import numpy as numpy_backend

RNG = np.random.default_rng(0)
REDUCTIONS = ["sum", "mean", "max", "min", "prod"]


@pytest.fixture(autouse=True)
def threads():
    with dask.config.set(scheduler="threads"):
        yield


def chunked(a, k=3):
    """About k blocks on every axis, ragged where the length does not divide."""
    return da.from_array(a, chunks=tuple(max(1, -(-n // k)) for n in a.shape))


def same(got, want, exact=False):
    assert isinstance(got, da.Array)
    g = got.compute()
    assert g.dtype == want.dtype and g.shape == want.shape
    if exact or want.dtype.kind not in "fc":
        np.testing.assert_array_equal(g, want)
    else:
        tol = {8: 1e-9, 4: 1e-5, 2: 2e-2}[want.dtype.itemsize]
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol, equal_nan=True)


def _refuse_to_compute(*args, **kwargs):
    raise AssertionError("rearr computed a dask graph; it must only build one")


def lazy(fn, *args, **kwargs):
    """fn(...) under a scheduler that fails any compute; the result must be a dask array."""
    with dask.config.set(scheduler=_refuse_to_compute):
        out = fn(*args, **kwargs)
    assert isinstance(out, da.Array), type(out)
    return out


# (pattern, source shape, lengths, index name -> (shape, high))
CASES = [
    ("e c -> v[dst: e] c", (50, 4), {"v": 10}, {"dst": ((50,), 10)}),  # ScatterAlong, whole rows
    ("e c -> v[dst: e] c", (9000, 4), {"v": 700}, {"dst": ((9000,), 700)}),  # ScatterRows (large)
    ("b k -> b n[idx]", (6, 8), {"n": 5}, {"idx": ((6, 8), 5)}),  # an index per element
    ("e c -> a[i: e] b[j: e] c", (40, 3), {"a": 4, "b": 3}, {"i": ((40,), 4), "j": ((40,), 3)}),  # two terms
    ("c e -> c v[dst: e]", (3, 60), {"v": 7}, {"dst": ((60,), 7)}),  # along axis 1
    ("b e c -> b v[dst: b e] c", (2, 30, 3), {"v": 5}, {"dst": ((2, 30), 5)}),  # broadcast along c only
    ("b p c -> b h[y: b p] w[x: b p] c", (2, 6, 3), {"h": 4, "w": 5}, {"y": ((2, 6), 4), "x": ((2, 6), 5)}),
    ("b p c -> b h[y: b p] w[x: b p] c", (4, 3000, 3), {"h": 40, "w": 50}, {"y": ((4, 3000), 40),
                                                                        "x": ((4, 3000), 50)}),
]


def inputs(case, dtype=np.float64):
    pattern, shape, lengths, index = case
    x = RNG.random(shape) * 4 - 2
    x = x > 0 if dtype == np.bool_ else x.astype(dtype)
    return pattern, x, lengths, {k: RNG.integers(0, high, s) for k, (s, high) in index.items()}


def dask_indices(indices, k=3):
    return {name: chunked(v, k) for name, v in indices.items()}


@pytest.mark.slow
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]} {c[1]}")
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_agrees_with_numpy(case, reduction, kind):
    """Each reduction on both step kinds (the large cases plan ScatterRows), a numpy or a dask index."""
    pattern, x, lengths, indices = inputs(case)
    want = rearr.scatter(x, pattern, reduction, **lengths, **indices)
    got = lazy(rearr.scatter, chunked(x), pattern, reduction, **lengths,
               **(indices if kind == "numpy" else dask_indices(indices)))
    same(got, want)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("fill", [0, -7.5, np.nan])
def test_fill(reduction, fill):
    pattern, x, _, indices = inputs(CASES[0])
    lengths = {"v": 14}  # rows 10 to 13 are written by nothing
    want = rearr.scatter(x, pattern, reduction, fill=fill, **lengths, **indices)
    same(lazy(rearr.scatter, chunked(x), pattern, reduction, fill=fill, **lengths, **dask_indices(indices)), want)
    same(lazy(rearr.scatter, chunked(x), pattern, reduction, fill=fill, **lengths, **indices), want)


def unique(case):
    """Indices of the case that write each position once, and the lengths that leave room for them."""
    pattern, shape, lengths, index = case
    if pattern == "b k -> b n[idx]":  # each row a distinct subset of range(n)
        n = shape[1] + 3
        return {"idx": np.stack([RNG.permutation(n)[:shape[1]] for _ in range(shape[0])])}, {"n": n}
    ((name, (s, _)),) = index.items()
    return {name: RNG.permutation(s[0] + 2)[:s[0]]}, {"v": s[0] + 2}


@pytest.mark.parametrize("reduction", [*REDUCTIONS, "set"])
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[4]], ids=lambda c: c[0])
def test_into(case, reduction):
    pattern, x, lengths, indices = inputs(case)
    if reduction == "set":
        indices, lengths = unique(case)
    into = RNG.random(rearr.scatter(x, pattern, "sum", **lengths, **indices).shape)
    want = rearr.scatter(x, pattern, reduction, into=into, **lengths, **indices)
    dinto = chunked(into, 2)
    got = lazy(rearr.scatter, chunked(x), pattern, reduction, into=dinto, **lengths, **dask_indices(indices))
    same(got, want)
    written = 0 if pattern.startswith("e") else 1
    assert got.chunks[written] == dinto.chunks[written]  # chunked as into= along the written axis
    np.testing.assert_array_equal(dinto.compute(), into)  # into= is never modified


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_dtypes(dtype, reduction):
    """float16 accumulates in float32 and is rounded once; integers wrap as numpy's; bools add as 'or'."""
    pattern, x, lengths, indices = inputs(CASES[1], dtype)
    if reduction == "mean" and dtype not in (np.float16, np.float32):
        with pytest.raises(RearrError) as want:
            rearr.scatter(x, pattern, reduction, **lengths, **indices)
        with pytest.raises(RearrError) as got:
            rearr.scatter(chunked(x), pattern, reduction, **lengths, **indices)
        assert got.value.code == want.value.code == "RA400"
        return
    want = rearr.scatter(x, pattern, reduction, **lengths, **indices)
    same(lazy(rearr.scatter, chunked(x, 5), pattern, reduction, **lengths, **dask_indices(indices, 4)), want)


def test_float16_counts_past_2048():
    """3000 ones sum to 3000 (float16 alone stops at 2048), across blocks as inside one."""
    x = np.ones((3000, 1), np.float16)
    got = rearr.scatter(da.from_array(x, chunks=700), "e c -> v[dst: e] c", "sum", dst=np.zeros(3000, int), v=1)
    assert got.compute()[0, 0] == 3000


def test_nan_propagates_under_max_and_min():
    x = np.array([[1.0], [np.nan], [3.0], [0.5]])
    dst = np.array([0, 0, 1, 1])
    for reduction in ("max", "min"):
        want = rearr.scatter(x, "e c -> v[dst: e] c", reduction, dst=dst, v=3)
        same(rearr.scatter(da.from_array(x, chunks=1), "e c -> v[dst: e] c", reduction, dst=chunked(dst, 4), v=3),
             want)


@pytest.mark.slow
@pytest.mark.parametrize("chunk_size", ["2KiB", "4KiB"])
@pytest.mark.parametrize("reduction", [*REDUCTIONS, "set"])
def test_an_output_chunked_along_the_written_axis(chunk_size, reduction):
    """A small array.chunk-size: the result has several chunks along v, and each block's writes are routed
    to the chunks they land in (a partial for each pair, nothing lost between them)."""
    pattern, x, lengths, indices = inputs(CASES[1])
    if reduction == "set":
        indices, lengths = {"dst": RNG.permutation(9000)}, {"v": 9000}
    want = rearr.scatter(x, pattern, reduction, **lengths, **indices)
    with dask.config.set({"array.chunk-size": chunk_size}), warnings.catch_warnings():
        warnings.simplefilter("error")  # no PerformanceWarning that the pairs multiply the chunks
        got = lazy(rearr.scatter, chunked(x, 7), pattern, reduction, **lengths, **dask_indices(indices, 5))
    assert len(got.chunks[0]) > 1
    same(got, want)


def test_the_graph_is_partials_per_block_and_chunk_combined_in_a_tree():
    """40 source blocks and 3 result chunks: 120 partial scatters, then a tree over the blocks (fan-in 4)
    per chunk; every result block a numpy array."""
    pattern, x, lengths, indices = inputs(CASES[1])
    with dask.config.set({"array.chunk-size": "8KiB"}):
        got = rearr.scatter(da.from_array(x, chunks=(225, 4)), pattern, "mean", **lengths,
                            **{k: da.from_array(v, chunks=225) for k, v in indices.items()})
    graph = dict(got.__dask_graph__())
    blocks, chunks = 40, len(got.chunks[0])
    assert chunks == 3
    assert sum(k[0].startswith("scatter-partial") for k in graph if isinstance(k, tuple)) == blocks * chunks
    layers = list(got.__dask_graph__().layers)
    assert any(name.startswith("scatter-mean-partial") for name in layers), layers  # a level of the tree
    same(got, rearr.scatter(x, pattern, "mean", **lengths, **indices))
    assert {type(b) for b in dask.compute(*got.to_delayed().ravel())} == {np.ndarray}
    with dask.config.set({"array.chunk-size": "8KiB", "split_every": 2}):  # dask's fan-in: a deeper tree
        deep = rearr.scatter(da.from_array(x, chunks=(225, 4)), pattern, "mean", **lengths,
                             **{k: da.from_array(v, chunks=225) for k, v in indices.items()})
    assert len(deep.__dask_graph__().layers) > len(got.__dask_graph__().layers)
    same(deep, rearr.scatter(x, pattern, "mean", **lengths, **indices))


def test_small_runs_of_ufunc_at(monkeypatch):
    """put_rows runs ufunc.at in runs of _BATCH elements (that end inside a row): the same values, numpy's
    bit for bit, dask's within the tree's rounding."""
    pattern, x, lengths, indices = inputs(CASES[1])
    for reduction in REDUCTIONS:
        whole = rearr.scatter(x, pattern, reduction, **lengths, **indices)
        monkeypatch.setattr(numpy_backend, "_BATCH", 5)
        np.testing.assert_array_equal(rearr.scatter(x, pattern, reduction, **lengths, **indices), whole)
        same(rearr.scatter(chunked(x), pattern, reduction, **lengths, **dask_indices(indices)), whole)
        monkeypatch.undo()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_message_passing(kind):
    """Gather from src, scatter into dst: the small lowering (GatherAlong, ScatterAlong) and the large one
    (TakeRows, ScatterRows), with the node features a dask array and the indices of either kind."""
    for v, e, c in ((10, 50, 4), (300, 5000, 8)):  # 40,000 elements: the row lowering
        x = RNG.random((v, c))
        src, dst = RNG.integers(0, v, e), RNG.integers(0, v, e)
        for reduction in REDUCTIONS:
            want = rearr.scatter(x, "v[src: e] c -> v[dst: e] c", reduction, src=src, dst=dst)
            if kind == "dask":
                s, d = chunked(src, 4), chunked(dst, 5)
            else:
                s, d = src, dst
            same(lazy(rearr.scatter, chunked(x), "v[src: e] c -> v[dst: e] c", reduction, src=s, dst=d), want)


@pytest.mark.slow
def test_an_index_chunked_unlike_its_source_is_rechunked_to_the_sources_blocks():
    """The index and the source need not share chunks: the index is rechunked to the source's blocks
    (a rechunk of the index only; the source keeps its blocks), the values are numpy's."""
    pattern, x, lengths, indices = inputs(CASES[1])
    src = da.from_array(x, chunks=(1000, 2))
    for chunks in (7, 4500, 9000, (1, 8999)):
        got = lazy(rearr.scatter, src, pattern, "mean", **lengths,
                   **{k: da.from_array(v, chunks=chunks) for k, v in indices.items()})
        assert got.chunks[1] == src.chunks[1]  # the source's chunks on the other axes
        same(got, rearr.scatter(x, pattern, "mean", **lengths, **indices))
    pattern, y, lengths, indices = inputs(CASES[7])  # an index per element, chunked on two axes
    got = lazy(rearr.scatter, da.from_array(y, chunks=(3, 700, 2)), pattern, "sum", **lengths,
               **{k: da.from_array(v, chunks=(1, 1100)) for k, v in indices.items()})
    same(got, rearr.scatter(y, pattern, "sum", **lengths, **indices))


def test_set_with_unique_indices_runs():
    x = RNG.random((12, 3))
    perm = RNG.permutation(12)
    want = rearr.scatter(x, "e c -> v[dst: e] c", "set", dst=perm, v=14, fill=-1.0)
    for index in (perm, chunked(perm)):
        same(lazy(rearr.scatter, chunked(x), "e c -> v[dst: e] c", "set", dst=index, v=14, fill=-1.0), want,
             exact=True)
    idx = np.stack([RNG.permutation(9)[:8] for _ in range(6)])  # an index per element, unique in each row
    y = RNG.random((6, 8))
    same(lazy(rearr.scatter, chunked(y), "b k -> b n[idx]", "set", idx=chunked(idx), n=9),
         rearr.scatter(y, "b k -> b n[idx]", "set", idx=idx, n=9), exact=True)


def test_set_refuses_duplicates_now_for_a_numpy_index_and_at_compute_for_a_dask_one():
    x = RNG.random((12, 3))
    perm = RNG.permutation(12)
    across = perm.copy()
    across[5] = across[0]  # blocks 0 and 1 of the index (chunks of 4)
    inside = perm.copy()
    inside[1] = inside[0]  # inside block 0
    for dup in (across, inside):
        with pytest.raises(RearrError, match="more than once under 'set'") as e:  # a numpy index: now
            rearr.scatter(chunked(x), "e c -> v[dst: e] c", "set", dst=dup, v=12)
        assert e.value.code == "RA501" and e.value.op == "scatter"
        got = lazy(rearr.scatter, chunked(x), "e c -> v[dst: e] c", "set", dst=chunked(dup), v=12)
        with pytest.raises(RearrError, match="more than once under 'set'") as e:  # a dask index: at compute
            got.compute()
        assert e.value.code == "RA501" and "e c -> v[dst: e] c" in str(e.value)
        assert e.value.hint.startswith("use a reduction that combines duplicates")
    idx = np.array([[0, 1, 1], [2, 0, 1]])  # per element: row 0 writes n=1 twice
    with pytest.raises(RearrError, match="more than once"):
        rearr.scatter(da.ones((2, 3), chunks=1), "b k -> b n[idx]", "set", idx=idx, n=3)
    with pytest.raises(RearrError, match="more than once"):
        rearr.scatter(da.ones((2, 3), chunks=1), "b k -> b n[idx]", "set", idx=da.from_array(idx, chunks=1),
                      n=3).compute()
    ok = np.array([[0, 1, 2], [0, 1, 2]])  # the same values in other rows are other positions
    same(rearr.scatter(da.ones((2, 3), chunks=1), "b k -> b n[idx]", "set", idx=da.from_array(ok, chunks=1), n=3),
         np.ones((2, 3)))


def test_set_moves_objects_and_datetimes():
    x = np.array([["a"], ["bb"], ["c"]], dtype=object)
    dst = np.array([2, 0, 3])
    want = rearr.scatter(x, "e c -> v[dst: e] c", "set", dst=dst, v=4)
    got = rearr.scatter(da.from_array(x, chunks=1), "e c -> v[dst: e] c", "set", dst=chunked(dst), v=4)
    np.testing.assert_array_equal(got.compute(), want)
    t = np.array(["2020-01-01", "2021-01-01"], dtype="M8[D]")[:, None]
    want = rearr.scatter(t, "e c -> v[dst: e] c", "set", dst=np.array([1, 0]), v=3)
    got = rearr.scatter(da.from_array(t, chunks=1), "e c -> v[dst: e] c", "set", dst=np.array([1, 0]), v=3)
    np.testing.assert_array_equal(got.compute(), want)


def test_a_bad_index_is_ra501_at_compute_with_its_position():
    x = RNG.random((10, 2))
    idx = np.array([0, 1, 2, 3, 4, 5, 6, 9, 1, 2])
    with pytest.raises(RearrError, match=r"holds 9 at position \(7,\)"):  # a numpy index: now
        rearr.scatter(chunked(x), "e c -> v[dst: e] c", "sum", dst=idx, v=8)
    got = lazy(rearr.scatter, chunked(x), "e c -> v[dst: e] c", "sum", dst=da.from_array(idx, chunks=3), v=8)
    with pytest.raises(RearrError, match=r"holds 9 at position \(7,\), outside axis 'v' of length 8") as e:
        got.compute()
    assert e.value.code == "RA501"
    neg = idx.copy()
    neg[7], neg[9] = 1, -9
    with pytest.raises(RearrError, match=r"holds -9 at position \(9,\)"):
        rearr.scatter(chunked(x), "e c -> v[dst: e] c", "max", dst=da.from_array(neg, chunks=4), v=8).compute()
    ok = idx.copy()
    ok[7] = -1  # negative values count from the end, as on numpy
    same(rearr.scatter(chunked(x), "e c -> v[dst: e] c", "sum", dst=da.from_array(ok, chunks=3), v=8),
         rearr.scatter(x, "e c -> v[dst: e] c", "sum", dst=ok, v=8))


@pytest.mark.parametrize("bad", [8, 100, -1])
@pytest.mark.parametrize("chunk_size", [None, "16B"])
def test_unchecked_a_value_in_no_chunk_is_ra501_at_compute_not_dropped(bad, chunk_size):
    """check_bounds=False reads no value to check it; a value that lands in no chunk of the result is
    refused where the routing meets it (the first chunk sees the negative ones, the last the large ones),
    as a native call's refusal: RA501, never a silently smaller sum."""
    x = RNG.random((10, 2))
    idx = np.array([0, 1, 2, 3, 4, 5, 6, 7, 1, 2])
    idx[7] = bad
    with dask.config.set({"array.chunk-size": chunk_size} if chunk_size else {}):
        got = rearr.scatter(chunked(x), "e c -> v[dst: e] c", "sum", dst=da.from_array(idx, chunks=3), v=8,
                            check_bounds=False)
    assert (len(got.chunks[0]) > 1) == (chunk_size is not None)  # one chunk, or routed to several
    with pytest.raises(RearrError, match=r"dask refused an index: index 'dst' holds a value outside 0 <= i < 8") \
            as e:
        got.compute()
    assert e.value.code == "RA501" and "turn the check on" in e.value.hint
    ok = rearr.scatter(chunked(x), "e c -> v[dst: e] c", "sum", dst=da.from_array(idx % 8, chunks=3), v=8,
                       check_bounds=False)
    same(ok, rearr.scatter(x, "e c -> v[dst: e] c", "sum", dst=idx % 8, v=8))


def _boom():
    raise AssertionError("computed")


def test_building_computes_nothing_even_from_sources_that_raise():
    """Sources, indices and into= whose every block raises when computed, under a scheduler that raises:
    building any scatter touches none of them."""
    x = da.from_delayed(dask.delayed(_boom)(), shape=(100, 3), dtype=np.float64)
    dst = da.from_delayed(dask.delayed(_boom)(), shape=(100,), dtype=np.int64)
    into = da.from_delayed(dask.delayed(_boom)(), shape=(7, 3), dtype=np.float64)
    for reduction in (*REDUCTIONS, "set"):
        lazy(rearr.scatter, x, "e c -> v[dst: e] c", reduction, dst=dst, v=7)
        lazy(rearr.scatter, x, "e c -> v[dst: e] c", reduction, dst=dst, into=into)
        lazy(rearr.scatter, x, "e c -> v[dst: e] c", reduction, dst=dst, v=7, fill=2.5, check_bounds=False)
    nodes = da.from_delayed(dask.delayed(_boom)(), shape=(7, 3), dtype=np.float64)
    lazy(rearr.scatter, nodes, "v[src: e] c -> v[dst: e] c", "mean", src=dst, dst=dst)
    big = da.from_delayed(dask.delayed(_boom)(), shape=(20000, 3), dtype=np.float64)
    with dask.config.set({"array.chunk-size": "1KiB"}):  # routed: many chunks
        lazy(rearr.scatter, big, "e c -> v[dst: e] c", "max", dst=da.zeros(20000, dtype=int, chunks=5000), v=5000)


def test_building_runs_no_task():
    """A dask callback counts the tasks that start: building a scatter, with every reduction, into= and
    message passing, starts none; computing it starts them."""
    from dask.callbacks import Callback

    started = []
    pattern, x, lengths, indices = inputs(CASES[1])
    dx, didx = chunked(x), dask_indices(indices)
    into = chunked(RNG.random((700, 4)))
    with Callback(start=lambda dsk: started.append("graph"), pretask=lambda key, dsk, state: started.append(key)):
        built = [rearr.scatter(dx, pattern, r, **lengths, **didx) for r in REDUCTIONS]
        built.append(rearr.scatter(dx, pattern, "sum", into=into, **didx))
        built.append(rearr.scatter(chunked(RNG.random((30, 4))), "v[src: e] c -> v[dst: e] c", "mean",
                                   src=chunked(RNG.integers(0, 30, 90)), dst=chunked(RNG.integers(0, 30, 90))))
        assert started == []
        dask.compute(*built)
        assert "graph" in started and len(started) > len(built)


def test_every_task_pickles_by_reference():
    """Worker processes unpickle each task: module functions (no lambda, no bound method of the backend,
    whose tables would travel), and no argument of the source's size."""
    pattern, x, lengths, indices = inputs(CASES[1])
    into = chunked(RNG.random((700, 4)))
    got = rearr.scatter(chunked(x), pattern, "mean", into=into, **dask_indices(indices))
    for key, task in dict(got.__dask_graph__()).items():
        blob = pickle.dumps(task)
        assert b"<lambda>" not in blob and b"DaskBackend" not in blob, key
        assert len(blob) < 200_000, (key, len(blob))


def test_an_empty_source():
    x = np.zeros((0, 3))
    for reduction in REDUCTIONS:
        want = rearr.scatter(x, "e c -> v[dst: e] c", reduction, dst=np.zeros(0, int), v=4, fill=1.5)
        same(rearr.scatter(da.from_array(x), "e c -> v[dst: e] c", reduction, dst=da.zeros(0, dtype=int, chunks=1),
                           v=4, fill=1.5), want)


def test_scatter_along_as_explain_prints_it():
    """The helper that explain's dask code calls: numpy or dask indices, a broadcast index, its errors."""
    x = RNG.random((20, 3))
    dst = RNG.integers(0, 6, 20)
    want = rearr.scatter(x, "e c -> v[dst: e] c", "sum", dst=dst, v=6)
    same(dask_backend.scatter_along(chunked(x), dst[:, None], 0, 6, "sum"), want)
    same(dask_backend.scatter_along(chunked(x), chunked(dst)[:, None], 0, 6, "sum", split_every=2), want)
    same(dask_backend.scatter_along(chunked(x.T), dst, 1, 6, "sum"),  # (20,) against (3, 20): 1 in front
         rearr.scatter(x.T, "c e -> c v[dst: e]", "sum", dst=dst, v=6))
    with pytest.raises(RearrError, match=r"takes an index of x's shape \(20, 3\)") as e:
        dask_backend.scatter_along(chunked(x), dst[:5, None], 0, 6, "sum")
    assert e.value.code == "RA500"
    with pytest.raises(RearrError, match="'any'"):
        dask_backend.scatter_along(chunked(x), dst[:, None], 0, 6, "any")
    with pytest.raises(RearrError, match="dask refused an index"):  # a value it was not promised
        dask_backend.scatter_along(chunked(x), -dst[:, None] - 1, 0, 6, "sum").compute()


def test_a_partial_accumulates_in_its_blocks_own_dtype():
    """ufunc.at runs its fast loop only where the target's dtype is the values' own object; a block that
    a worker unpickles has a copy of the dtype, so the partial must take the block's, not one from the
    graph (which was 30 times slower on worker processes)."""
    for dtype in (np.float32, np.int64):
        xb = pickle.loads(pickle.dumps(np.ones((4, 2), dtype)))
        assert xb.dtype is not np.dtype(dtype)  # the copy a worker gets
        part = dask_backend._scatter_block(xb, np.array([[0], [2], [2], [1]]), np.array([0, 3]), dim=0,
                                           reduction="sum", marks=None, n=3, names="i", text="")
        assert part["v"].dtype is xb.dtype
        np.testing.assert_array_equal(part["v"], [[1, 1], [1, 1], [2, 2]])


# --- a real cluster: worker processes, one cluster for the module's tests ----------------------------


WAIT = 120  # seconds: a result that does not come back fails the test instead of hanging it


def computed(client, xs):
    return [f.result(timeout=WAIT) for f in client.compute(xs)]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit="500MB") as cluster, \
            distributed.Client(cluster, timeout="60s") as c:
        yield c


@pytest.mark.slow
def test_on_worker_processes(client):
    """Message passing with every reduction, 'set', mean into=, all computed on worker processes."""
    x = RNG.random((300, 8))
    src, dst = RNG.integers(0, 300, 20000), RNG.integers(0, 300, 20000)
    dx, ds, dd = da.from_array(x, chunks=(100, 4)), da.from_array(src, chunks=3000), da.from_array(dst, chunks=3000)
    perm = RNG.permutation(300)
    into = RNG.random((300, 8))
    calls = [(rearr.scatter(dx, "v[src: e] c -> v[dst: e] c", r, src=ds, dst=dd),
              rearr.scatter(x, "v[src: e] c -> v[dst: e] c", r, src=src, dst=dst)) for r in REDUCTIONS]
    calls.append((rearr.scatter(dx, "e c -> v[dst: e] c", "set", dst=da.from_array(perm, chunks=70), v=300),
                  rearr.scatter(x, "e c -> v[dst: e] c", "set", dst=perm, v=300)))
    calls.append((rearr.scatter(dx, "e c -> v[dst: e] c", "mean", dst=da.from_array(perm, chunks=70),
                                into=da.from_array(into, chunks=50)),
                  rearr.scatter(x, "e c -> v[dst: e] c", "mean", dst=perm, into=into)))
    for got, (_, want) in zip(computed(client, [g for g, _ in calls]), calls):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.slow
def test_index_errors_come_back_from_worker_processes(client):
    x = da.from_array(RNG.random((300, 8)), chunks=(100, 4))
    src = da.from_array(RNG.integers(0, 300, 20000), chunks=3000)
    bad = RNG.integers(0, 300, 20000)
    bad[12345] = 300
    call = rearr.scatter(x, "v[src: e] c -> v[dst: e] c", "mean", src=src, dst=da.from_array(bad, chunks=3000))
    with pytest.raises(RearrError, match=r"holds 300 at position \(12345,\)") as e:
        computed(client, [call])
    assert e.value.code == "RA501" and e.value.hint.startswith("index values must lie in")
    dup = RNG.permutation(300)
    dup[250] = dup[3]
    call = rearr.scatter(x, "e c -> v[dst: e] c", "set", dst=da.from_array(dup, chunks=70), v=300)
    with pytest.raises(RearrError, match="more than once under 'set'") as e:
        computed(client, [call])
    assert e.value.code == "RA501"
