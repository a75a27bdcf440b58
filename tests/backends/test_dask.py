"""The dask backend: lazy results (nothing computed, nothing converted to numpy), chunks handled on purpose,
values equal to the numpy backend's, on the threaded scheduler and on a real LocalCluster of worker processes.
"""

from __future__ import annotations

import subprocess
import sys

import dask  # the test extra installs dask[distributed]: these tests must run, never skip
import dask.array as da
import distributed
import numpy as np
import pytest

import rearr
from rearr import RearrError


def _refuse_to_compute(*args, **kwargs):
    raise AssertionError("rearr computed a dask graph; it must only build one")


def lazy(fn, *args, **kwargs):
    """Call fn under a scheduler that fails any compute; the result must be a dask array."""
    with dask.config.set(scheduler=_refuse_to_compute):
        out = fn(*args, **kwargs)
    for x in out if isinstance(out, list) else [out]:
        assert isinstance(x, da.Array), type(x)
    return out


def rechunked(x) -> bool:
    """Whether the graph behind x moves data between chunks."""
    return any(name.startswith("rechunk") for name in x.dask.layers)


@pytest.fixture(autouse=True)
def threads():
    with dask.config.set(scheduler="threads"):
        yield


# Ragged chunks on every axis: no two chunks of an axis have the same length, and none divides evenly.
A = np.arange(6 * 4 * 10, dtype=np.float64).reshape(6, 4, 10)
RAGGED = ((1, 3, 2), (1, 3), (4, 5, 1))


def ragged() -> da.Array:
    return da.from_array(A, chunks=RAGGED)


@pytest.mark.parametrize(("pattern", "lengths"), [
    ("a b c -> c b a", {}),
    ("a b c -> a (b c)", {}),
    ("a b c -> (a b) c", {}),
    ("a b c -> (a b c)", {}),
    ("a b c -> c (a b)", {}),
    ("a b c -> (c a) b", {}),
    ("(a2 a) b c -> a b a2 c", {"a2": 2}),
    ("a (b1 b2) c -> b2 a b1 c", {"b1": 2}),
    ("a b (c d) -> a b c d", {"d": 2}),
    ("a b (c d) -> (d a) (b c)", {"d": 5}),
    ("... c -> c ...", {}),
])
def test_rearrange_ragged_chunks(pattern: str, lengths: dict) -> None:
    got = lazy(rearr.rearrange, ragged(), pattern, **lengths)
    np.testing.assert_array_equal(got.compute(), rearr.rearrange(A, pattern, **lengths))


@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "prod", "any", "all"])
@pytest.mark.parametrize("pattern", ["a b c -> a", "a b c -> c a", "a b c -> b", "a b c -> a b c", "a b c ->"])
def test_reduce_ragged_chunks(reduction: str, pattern: str) -> None:
    data = A / 100 if reduction != "any" and reduction != "all" else A % 7 == 0
    x = da.from_array(data, chunks=RAGGED)
    got = lazy(rearr.reduce, x, pattern, reduction)
    assert not rechunked(got)  # a reduction is dask's tree reduction over the chunks as they are
    np.testing.assert_allclose(got.compute(), rearr.reduce(data, pattern, reduction))


def test_reduce_callable_and_dtype_rules() -> None:
    got = lazy(rearr.reduce, ragged(), "a b c -> b", lambda t, axes: t.std(axis=axes))
    np.testing.assert_allclose(got.compute(), A.std(axis=(0, 2)))
    with pytest.raises(rearr.RearrError, match="'mean' of a tensor of int64"):
        rearr.reduce(da.from_array(np.arange(6).reshape(2, 3)), "a b -> a", "mean")
    with pytest.raises(rearr.RearrError, match="'max' of complex numbers is undefined"):
        rearr.reduce(da.ones((2, 3), dtype=complex), "a b -> a", "max")


@pytest.mark.parametrize(("pattern", "lengths"), [
    ("a b c -> a b c k", {"k": 2}),
    ("a b c -> (k a) b c", {"k": 3}),
    ("a b c -> a (k b) c", {"k": 2}),
    ("a b c -> a b (c k)", {"k": 3}),
    ("a b c -> k a b c", {"k": 2}),
])
def test_repeat_ragged_chunks(pattern: str, lengths: dict) -> None:
    got = lazy(rearr.repeat, ragged(), pattern, **lengths)
    assert not rechunked(got)  # a new axis is chunked so that the merge after it moves whole blocks
    np.testing.assert_array_equal(got.compute(), rearr.repeat(A, pattern, **lengths))


def test_list_input_pack_unpack_einsum() -> None:
    parts = [da.from_array(A[i], chunks=RAGGED[1:]) for i in range(6)]
    np.testing.assert_array_equal(lazy(rearr.rearrange, parts, "n b c -> b (n c)").compute(),
                                  rearr.rearrange(A, "n b c -> b (n c)"))
    x, y = ragged(), da.from_array(A[:, :1], chunks=(2, 1, 3))
    with dask.config.set(scheduler=_refuse_to_compute):
        packed, shapes = rearr.pack([x, y], "a * c")
    assert isinstance(packed, da.Array) and shapes == [(4,), (1,)]
    np.testing.assert_array_equal(packed.compute(), np.concatenate([A, A[:, :1]], axis=1))
    back = lazy(rearr.unpack, packed, shapes, "a * c")
    np.testing.assert_array_equal(back[0].compute(), A)
    np.testing.assert_array_equal(back[1].compute(), A[:, :1])
    b = da.from_array(np.arange(10 * 3.0).reshape(10, 3), chunks=(4, 2))
    got = lazy(rearr.einsum, x, b, "a b c, c d -> d a")
    np.testing.assert_allclose(got.compute(), np.einsum("abc,cd->da", A, b.compute()))


# --- chunks on purpose -------------------------------------------------------


def test_merge_keeps_chunks_when_it_can() -> None:
    """A merge whose inner axes are one chunk each keeps the outer axis' chunks: no rechunk."""
    x = da.from_array(A, chunks=((1, 3, 2), (4,), (10,)))
    got = lazy(rearr.rearrange, x, "a b c -> a (b c)")
    assert not rechunked(got) and got.chunks == ((1, 3, 2), (40,))
    # Outer axes split into chunks of 1: the inner axis keeps its chunks, the blocks only move.
    x = da.from_array(A, chunks=((1,) * 6, (1, 3), (10,)))
    got = lazy(rearr.rearrange, x, "a b c -> (a b) c")
    assert not rechunked(got) and got.chunks == ((1, 3) * 6, (10,))
    np.testing.assert_array_equal(got.compute(), A.reshape(24, 10))
    # The same inside the array, after an axis that is not in chunks of 1 (dask's reshape would rechunk):
    x = da.from_array(A, chunks=((1, 3, 2), (1,) * 4, (4, 5, 1)))
    got = lazy(rearr.rearrange, x, "a b c -> a (b c)")
    assert not rechunked(got) and got.chunks == ((1, 3, 2), (4, 5, 1) * 4)
    np.testing.assert_array_equal(got.compute(), A.reshape(6, 40))
    got = lazy(rearr.rearrange, x[:, :, None], "a b 1 c -> 1 a (b c)")  # unit axes on both sides
    assert not rechunked(got) and got.chunks == ((1,), (1, 3, 2), (4, 5, 1) * 4)
    np.testing.assert_array_equal(got.compute(), A.reshape(1, 6, 40))


def test_merge_of_a_split_inner_axis_rechunks_that_merge_only() -> None:
    got = lazy(rearr.rearrange, ragged(), "a b c -> a (b c)")
    assert rechunked(got)
    assert got.chunks[0] == RAGGED[0]  # the axis outside the merge keeps its chunks
    np.testing.assert_array_equal(got.compute(), A.reshape(6, 40))


def test_split_keeps_chunks_on_whole_rows() -> None:
    """Chunks of (c d) that hold whole rows of d need no rechunk; others move to the nearest row."""
    x = da.from_array(A, chunks=(RAGGED[0], RAGGED[1], (4, 2, 4)))
    got = lazy(rearr.rearrange, x, "a b (c d) -> a b c d", d=2)
    assert not rechunked(got) and got.chunks == (RAGGED[0], RAGGED[1], (2, 1, 2), (2,))
    got = lazy(rearr.rearrange, ragged(), "a b (c d) -> a b c d", d=2)  # chunks 4, 5, 1: 5 and 1 cut rows
    assert rechunked(got) and got.chunks[:2] == RAGGED[:2]
    np.testing.assert_array_equal(got.compute(), A.reshape(6, 4, 5, 2))


def test_permute_never_rechunks() -> None:
    got = lazy(rearr.rearrange, ragged(), "a b c -> c a b")
    assert not rechunked(got) and got.chunks == (RAGGED[2], RAGGED[0], RAGGED[1])


# --- gather ------------------------------------------------------------------

X = np.arange(3 * 5 * 4, dtype=np.float32).reshape(3, 5, 4)
X_CHUNKS = ((1, 2), (2, 3), (3, 1))
GATHERS = [
    ("b n[idx] c -> b c", {"idx": np.array([[4, 0, 1, 2], [0, 0, 0, 0], [-1, 3, 2, 1]])}),
    ("b n[idx: b] c -> b c", {"idx": np.array([4, 0, -2])}),
    ("n[idx: k] b c -> k b c", {"idx": np.array([2, 0, 2, -1])}),
    ("b[y: p] n[x: p] c -> p c", {"y": np.array([0, 2, 1, 2]), "x": np.array([4, 0, -1, 3])}),
    ("b n[y: p] c[x: p] -> p b", {"y": np.array([0, 2, 1]), "x": np.array([3, 0, -1])}),
]


@pytest.mark.parametrize(("pattern", "index"), GATHERS)
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_gather(pattern: str, index: dict, kind: str) -> None:
    """Each gather step kind (GatherAlong, TakeRows, AdvancedIndex), with a numpy or a dask index."""
    want = rearr.rearrange(X, pattern, **index)
    if kind == "dask":
        index = {k: da.from_array(v, chunks=2) for k, v in index.items()}
    got = lazy(rearr.rearrange, da.from_array(X, chunks=X_CHUNKS), pattern, **index)
    np.testing.assert_array_equal(got.compute(), want)


def test_gather_along_an_axis_makes_that_axis_one_chunk_only() -> None:
    idx = np.array([[4, 0, 1, 2], [0, 0, 0, 0], [-1, 3, 2, 1]])
    got = lazy(rearr.rearrange, da.from_array(X, chunks=X_CHUNKS), "b n[idx] c -> b c", idx=idx)
    assert got.chunks == (X_CHUNKS[0], X_CHUNKS[2])


def test_index_errors() -> None:
    x = da.from_array(X, chunks=X_CHUNKS)
    with pytest.raises(rearr.RearrError, match=r"holds 9 at position \(1,\)"):  # numpy index: checked now
        rearr.rearrange(x, "b n[idx: b] c -> b c", idx=np.array([0, 9, 1]))
    # A dask index is checked when its blocks are computed (checking now would compute it), with the same error.
    got = lazy(rearr.rearrange, x, "b n[idx: b] c -> b c", idx=da.from_array(np.array([0, 1, -9]), chunks=2))
    with pytest.raises(rearr.RearrError, match=r"holds -9 at position \(2,\), outside axis 'n' of length 5"):
        got.compute()
    with pytest.raises(rearr.RearrError, match="index 'idx' has dtype float64"):
        rearr.rearrange(x, "b n[idx: b] c -> b c", idx=da.zeros(3))


# --- a real cluster ------------------------------------------------------------


@pytest.mark.slow
def test_local_cluster_of_worker_processes() -> None:
    """Worker processes on loopback, started and closed here; small arrays: seconds, not minutes."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit="500MB") as cluster, \
            distributed.Client(cluster) as client:
        x = ragged()
        results = [
            lazy(rearr.rearrange, x, "a b (c d) -> (d a) (b c)", d=5),
            lazy(rearr.reduce, x, "a b c -> c a", "mean"),
            lazy(rearr.repeat, x, "a b c -> (k a) b c", k=2),
            lazy(rearr.rearrange, da.from_array(X, chunks=X_CHUNKS), "b[y: p] n[x: p] c -> p c",
                 y=da.from_array(np.array([0, 2, 1, 2]), chunks=3), x=np.array([4, 0, -1, 3])),
        ]
        want = [rearr.rearrange(A, "a b (c d) -> (d a) (b c)", d=5), A.mean(axis=1).T,
                np.concatenate([A, A]), rearr.rearrange(X, "b[y: p] n[x: p] c -> p c",
                                                         y=np.array([0, 2, 1, 2]), x=np.array([4, 0, -1, 3]))]
        for got, w in zip(client.compute(results, sync=True), want):
            np.testing.assert_allclose(got, w)
        # An index error raised in a worker process comes back whole: code, message, caret, fix.
        bad = lazy(rearr.rearrange, da.from_array(X, chunks=X_CHUNKS), "b n[idx: b] c -> b c",
                   idx=da.from_array(np.array([0, 7, 1]), chunks=1))
        with pytest.raises(rearr.RearrError, match=r"holds 7 at position \(1,\)") as e:
            client.compute(bad, sync=True)
        assert e.value.code == "RA501" and e.value.hint.startswith("index values must lie in")


def test_unknown_chunk_sizes() -> None:
    """After boolean indexing, dask does not know the lengths (NaN): a RearrError whose fix works."""
    x = da.from_array(np.arange(12.0), chunks=5)
    y = x[x > 3]
    with pytest.raises(rearr.RearrError, match=r"unknown lengths") as e:
        rearr.rearrange(y, "(a b) -> b a", b=2)
    assert "compute_chunk_sizes()" in e.value.hint
    got = rearr.rearrange(y.compute_chunk_sizes(), "(a b) -> b a", b=2)
    np.testing.assert_array_equal(got.compute(), np.arange(4.0, 12.0).reshape(4, 2).T)


def _masked():
    """(x, u, k): u = x[mask] has an unknown first length; k is an index of unknown length."""
    x = da.from_array(np.arange(40.0).reshape(10, 4), chunks=5)
    i = da.from_array(np.arange(10), chunks=5)
    return x, x[x[:, 0] > 5], i[i > 3] % 4


UNKNOWN = {  # every public function that takes a tensor, with an unknown length where it reads one
    "rearrange": lambda x, u, k: rearr.rearrange(u, "a b -> b a"),
    "rearrange a list": lambda x, u, k: rearr.rearrange([u, u], "n a b -> a n b"),
    "reduce": lambda x, u, k: rearr.reduce(u, "a b -> b", "sum"),
    "repeat": lambda x, u, k: rearr.repeat(u, "a b -> a b c", c=2),
    "gather": lambda x, u, k: rearr.rearrange(u, "a n[i] -> a", i=np.zeros(8, int)),
    "gather, index unknown": lambda x, u, k: rearr.rearrange(x, "n[i: e] b -> e b", i=k),
    "scatter": lambda x, u, k: rearr.scatter(u, "a b -> m[i: a] b", "sum", i=np.zeros(8, int), m=2),
    "scatter, index unknown": lambda x, u, k: rearr.scatter(x[:6], "a b -> m[i: a] b", "sum", i=k, m=4),
    "einsum": lambda x, u, k: rearr.einsum(u, x, "a b, c b -> a c"),
    "einsum, one operand": lambda x, u, k: rearr.einsum(u, "a b -> b"),
    "pack": lambda x, u, k: rearr.pack([u, u], "* b"),
    "pack, second tensor": lambda x, u, k: rearr.pack([x[:8], u], "a *"),
    "unpack": lambda x, u, k: rearr.unpack(u, [(2,), (-1,)], "* b"),
    "unpack along the last axis": lambda x, u, k: rearr.unpack(u.T, [(2,), (6,)], "b *"),
    "parse_shape": lambda x, u, k: rearr.parse_shape(u, "a b"),
    "scatter, into= unknown": lambda x, u, k: rearr.scatter(x[:4], "a b -> m[i: a] b", "sum", i=np.zeros(4, int),
                                                            into=u),
    "a list of two unknown arrays": lambda x, u, k: rearr.rearrange([u, u + 0], "l a b -> a l b"),
}


@pytest.mark.parametrize("call", UNKNOWN.values(), ids=UNKNOWN)
def test_an_unknown_length_is_ra304_in_every_function_and_its_fix_works(call) -> None:
    x, u, k = _masked()
    with pytest.raises(rearr.RearrError) as e:
        call(x, u, k)
    assert e.value.code == "RA304", e.value
    assert "unknown" in str(e.value) and "compute_chunk_sizes()" in e.value.hint
    want = call(np.asarray(x), np.asarray(u), np.asarray(k))
    fixed = call(x, u.compute_chunk_sizes(), k.compute_chunk_sizes())  # the hint, applied
    for g, w in zip(*((v if isinstance(v, (list, tuple)) else [v]) for v in (fixed, want))):
        if isinstance(w, dict):
            assert g == w
        elif isinstance(w, list):  # pack's shapes
            assert [tuple(s) for s in g] == [tuple(s) for s in w]
        else:
            np.testing.assert_array_equal(np.asarray(g), w)


def test_parse_shape_skips_an_unknown_length_it_does_not_read() -> None:
    _, u, _ = _masked()
    assert rearr.parse_shape(u, "_ b") == {"b": 4}


def test_asnumpy_computes() -> None:
    x, u, _ = _masked()
    got = rearr.asnumpy(u)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, np.asarray(x)[np.asarray(x)[:, 0] > 5])


def test_the_block_check_runs_where_the_backend_was_never_loaded() -> None:
    """A distributed worker imports rearr.backends.dask fresh, without the registry's load(): what runs
    on the blocks must not need it (a NameError on np there, once): the index check, and the scatter's
    partial, combine and finish."""
    code = ("import numpy as np, rearr.backends.dask as d; from rearr.planning.plan import IndexUse\n"
            "use = IndexUse('idx', 'n', 5, ('k',), (2,), 0)\n"
            "print(d._check_block(np.array([0, -1]), use, 'n[idx: k] -> k').tolist())\n"
            "p = d._scatter_block(np.ones((4, 2)), np.array([[0], [2], [2], [1]]), np.array([0, 3]), dim=0, "
            "reduction='mean', marks='count', n=3, names='i', text='')\n"
            "q = d._combine_task([d._into_part(np.zeros((3, 2)), 0), p], reduction='mean', names='i', text='')\n"
            "print(d._finish_task(q, reduction='mean', out_dtype=np.dtype('float64'), acc=np.dtype('float64'), "
            "fill=0, dim=0, names='i', text='').tolist())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    check, mean = done.stdout.split("\n")[:2]
    assert check == "[0, 4]" and mean == "[[0.5, 0.5], [0.5, 0.5], [0.6666666666666666, 0.6666666666666666]]"


# --- errors that were foreign exceptions on dask where numpy answers ---


def test_dask_index_with_unknown_length_is_a_rearr_error():
    # an index of unknown length (nan chunks after boolean masking): a raw IndexError from the planner
    raw = da.from_array(np.array([0, 4, 9, 2, 1]), chunks=2)
    idx = raw[raw < 5]
    with pytest.raises(RearrError):
        rearr.rearrange(da.from_array(np.arange(10.0), chunks=3), "n[idx: k] -> k", idx=idx)


@pytest.mark.parametrize("pattern", ["a b c -> a (b c)", "a b c -> (a b c)"])
def test_dask_merge_of_empty_axis(pattern):
    # dask's reshape refuses to merge a 0-length axis with chunked neighbours (NotImplementedError)
    x = np.zeros((2, 0, 3))
    d = da.from_array(x, chunks=((1, 1), (0,), (1, 2)))
    for _ in range(2):
        y = rearr.rearrange(d, pattern)
        assert y.compute().shape == rearr.rearrange(x, pattern).shape
