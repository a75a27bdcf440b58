"""Each plan table's reader and writer agree on the key: the reader (rearr.api's look-up, or rearr.run.call's)
builds the call's key once and passes it down the careful path, and the writer keeps the program under that
very key, so that the next such call finds it: the table does not grow and nothing is planned or compiled
again.

A drift between the two would raise nothing: the table would only stop hitting. Every table of
rearr.run.cache.CACHES that has a reader and a writer is covered here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rearr
import rearr.run.einsum
import rearr.run.indexed
import rearr.run.program
from rearr import api
from rearr.backends import backend_for
from rearr.run import cache, call

LIBS = [pytest.param(np.asarray, id="numpy"), pytest.param(torch.as_tensor, id="torch")]


class _Spy:
    """Stands for module.name and counts its calls (the real function still runs)."""

    def __init__(self, monkeypatch, module, name: str) -> None:
        self.real, self.calls = getattr(module, name), 0
        monkeypatch.setattr(module, name, self)

    def __call__(self, *args):
        self.calls += 1
        return self.real(*args)


def _second_call_hits(monkeypatch, table: cache.Table, key: tuple | None, run, *spied: tuple) -> None:
    """The first run() stored its entry under key (None: its one entry, where the reader builds the key
    in place); the second finds it through the reader: none of the spied (module, name) functions -- the
    careful path, the compiler -- runs, and the table keeps its size."""
    first = run()
    if key is None:
        assert len(table.entries) == 1, list(table.entries)
        (key,) = table.entries
    assert key in table.entries, f"the writer's key is not the key function's: {key} not in {list(table.entries)}"
    entry, size = table.entries[key], len(table.entries)
    spies = [_Spy(monkeypatch, module, name) for module, name in spied]
    second = run()
    assert [s.calls for s in spies] == [0] * len(spies), "the reader missed the writer's entry"
    assert len(table.entries) == size and table.entries[key] is entry
    np.testing.assert_array_equal(np.asarray(second), np.asarray(first))


def _x(lib, shape=(4, 3)):
    return lib(np.arange(float(np.prod(shape))).reshape(shape))


PLAIN = [  # (op, pattern, reduction, lengths)
    ("rearrange", "a b -> b a", None, {}),
    ("rearrange", "(a b) c -> a b c", None, {"b": 2}),
    ("reduce", "a b -> a", "sum", {}),
    ("reduce", "a b -> b a", "rearrange", {}),  # keyed as called, planned as a rearrange
    ("reduce", "(a b) c -> a", "max", {"b": 2}),
    ("repeat", "a b -> a b r", None, {"r": 2}),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(("op", "pattern", "reduction", "lengths"), PLAIN, ids=[c[1] + f" {c[2]}" for c in PLAIN])
def test_the_unindexed_table(monkeypatch, lib, op, pattern, reduction, lengths):
    cache.unindexed.cache_clear()
    x = _x(lib)
    fn = getattr(rearr, op)
    run = (lambda: fn(x, pattern, **lengths)) if op != "reduce" else (lambda: fn(x, pattern, reduction, **lengths))
    _second_call_hits(monkeypatch, cache.unindexed, None, run, (api, "_transform"),
                      (rearr.run.program, "compile_unindexed"))


def test_a_reduce_callable_is_keyed_as_passed(monkeypatch):
    cache.unindexed.cache_clear()
    x, f = _x(np.asarray), lambda t, axes: t.sum(axis=axes)
    _second_call_hits(monkeypatch, cache.unindexed, None, lambda: rearr.reduce(x, "a b -> a", f), (api, "_transform"))
    assert f in next(iter(cache.unindexed.entries))


def _index(lib):
    return lib(np.array([[0, 1], [2, 3], [3, 0], [1, 1]]))


@pytest.mark.parametrize("lib", LIBS)
def test_the_direct_table_for_a_gather(monkeypatch, lib):
    cache.direct.cache_clear()
    x, idx, pattern = _x(lib, (4, 5)), _index(lib), "b n[i: b k] -> b k"
    key = cache.direct_key("rearrange", x, pattern, None, True, {"i": idx})
    _second_call_hits(monkeypatch, cache.direct, key, lambda: rearr.rearrange(x, pattern, i=idx),
                      (api, "_transform"), (rearr.run.indexed, "run"))


@pytest.mark.parametrize("lib", LIBS)
def test_the_direct_table_for_an_unchecked_gather(monkeypatch, lib):
    cache.direct.cache_clear()
    x, idx, pattern = _x(lib, (4, 5)), _index(lib), "b n[i: b k] -> b k"
    key = cache.direct_key("rearrange", x, pattern, None, False, {"i": idx})
    _second_call_hits(monkeypatch, cache.direct, key, lambda: rearr.rearrange(x, pattern, i=idx, check_bounds=False),
                      (api, "_transform"), (rearr.run.indexed, "run"))
    assert cache.direct_key("rearrange", x, pattern, None, True, {"i": idx}) not in cache.direct.entries


@pytest.mark.parametrize("lib", LIBS)
def test_the_direct_table_for_a_scatter(monkeypatch, lib):
    cache.direct.cache_clear()
    src, idx, pattern = _x(lib, (4, 2)), _index(lib), "b k -> b n[i: b k]"
    key = cache.direct_key("scatter", src, pattern, "sum", True, {"i": idx, "n": 5})
    _second_call_hits(monkeypatch, cache.direct, key, lambda: rearr.scatter(src, pattern, "sum", i=idx, n=5),
                      (rearr.run.indexed, "run"))


@pytest.mark.parametrize("lib", LIBS)
def test_the_direct_table_for_an_unchecked_scatter(monkeypatch, lib):
    cache.direct.cache_clear()
    src, idx, pattern = _x(lib, (4, 2)), _index(lib), "b k -> b n[i: b k]"
    key = cache.direct_key("scatter", src, pattern, "sum", False, {"i": idx, "n": 5})
    _second_call_hits(monkeypatch, cache.direct, key,
                      lambda: rearr.scatter(src, pattern, "sum", i=idx, n=5, check_bounds=False),
                      (rearr.run.indexed, "run"))


INDEXED = {  # calls that the direct table does not serve: each looks its program up in the indexed table
    "sync gather": lambda x, idx, src: rearr.rearrange(x, "b n[i: b k] -> b k", i=idx, check_bounds="sync"),
    "scatter with fill": lambda x, idx, src: rearr.scatter(src, "b k -> b n[i: b k]", "max", i=idx, n=5, fill=-1.0),
    "scatter into": lambda x, idx, src: rearr.scatter(src, "b k -> b n[i: b k]", "sum", i=idx, into=x),
}
INDEXED_KEYS = {  # the same calls' (op, pattern, reduction, keywords as keyed, into's shape)
    "sync gather": ("rearrange", "b n[i: b k] -> b k", None, (("i", (4, 2)),), None),
    "scatter with fill": ("scatter", "b k -> b n[i: b k]", "max", (("i", (4, 2)), ("n", 5)), None),
    "scatter into": ("scatter", "b k -> b n[i: b k]", "sum", (("i", (4, 2)),), (4, 5)),
}


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("case", INDEXED)
def test_the_indexed_table(monkeypatch, lib, case):
    cache.indexed.cache_clear()
    x, idx, src = _x(lib, (4, 5)), _index(lib), _x(lib, (4, 2))
    op, pattern, reduction, keywords, into_shape = INDEXED_KEYS[case]
    keywords = tuple((name, idx.shape if name == "i" else value) for name, value in keywords)
    source = src if op == "scatter" else x
    key = cache.indexed_key(op, pattern, reduction, backend_for(x), source.shape, keywords, into_shape)
    _second_call_hits(monkeypatch, cache.indexed, key, lambda: INDEXED[case](x, idx, src),
                      (rearr.run.indexed, "compile_indexed"))


EINSUM = [  # (pattern, operand shapes, lengths)
    ("i j, j k -> i k", ((2, 3), (3, 4)), {}),
    ("b (h w) c, c d -> b h w d", ((2, 6, 4), (4, 5)), {"h": 2}),
    ("b i, b j -> b i j", ((2, 3), (2, 4)), {}),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(("pattern", "shapes", "lengths"), EINSUM, ids=[c[0] for c in EINSUM])
def test_the_einsum_table(monkeypatch, lib, pattern, shapes, lengths):
    cache.einsum_cache_clear()
    a, b = (_x(lib, s) for s in shapes)
    key = cache.einsum_key(pattern, a, b, lengths)
    _second_call_hits(monkeypatch, cache.einsum_pairs, key, lambda: rearr.einsum(a, b, pattern, **lengths),
                      (rearr.run.einsum, "planned_call"), (rearr.run.einsum, "careful"))


def test_a_length_that_is_not_an_int_gives_no_key():
    """2.0 == 2 and True == 1: such a length would find an int's entry, so the key functions give none
    (the careful path validates it, and keys the call once its lengths are ints)."""
    x = np.zeros((4, 3))
    assert cache.unindexed_key("repeat", "a b -> a b r", None, x, {"r": 2.0}) is None
    assert cache.unindexed_key("repeat", "a b -> a b r", None, x, {"r": True}) is None
    assert cache.einsum_key("i j, j k -> i k", x, x.T, {"i": np.int64(4)}) is None
    assert cache.unindexed_key("rearrange", "a b -> b a", None, x, {}) == ("rearrange", "a b -> b a", None, np.ndarray,
                                                                       (4, 3), ())


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(("make", "lengths"), [
    (lambda x: [x, x], {}),  # a list: keyed once it is stacked
    (lambda x: x, {"r": np.int64(2)}),  # a numpy int length: keyed once it is an int
])
def test_a_call_that_its_look_up_cannot_key_is_keyed_by_the_careful_path(monkeypatch, lib, make, lengths):
    cache.unindexed.cache_clear()
    x = _x(lib)
    fn = (lambda: rearr.repeat(make(x), "... -> ... r", **lengths)) if lengths else \
        (lambda: rearr.rearrange(make(x), "n a b -> a b n"))
    first = fn()
    size = len(cache.unindexed.entries)
    spy = _Spy(monkeypatch, rearr.run.program, "compile_unindexed")
    np.testing.assert_array_equal(np.asarray(fn()), np.asarray(first))
    assert spy.calls == 0 and len(cache.unindexed.entries) == size == 1


class _Marked:
    """Stands for a key function: its key with a mark in front, so that the test sees where it went."""

    def __init__(self, real) -> None:
        self.real = real

    def __call__(self, *args):
        key = self.real(*args)
        return None if key is None else ("marked", *key)


class _MarkedTransform:
    """Stands for rearr.run.call.transform, as rearr.api calls it: the key of api's look-up in the table
    ``which`` ("key": the unindexed table, "direct": the direct table), marked."""

    def __init__(self, real, which) -> None:
        self.real, self.which = real, which

    def __call__(self, op, tensor, pattern, reduction, lengths, check_bounds, key, direct):
        if self.which == "key":
            key = ("marked", *key)
        else:
            direct = ("marked", *direct)
        return self.real(op, tensor, pattern, reduction, lengths, check_bounds, key, direct)


@pytest.mark.parametrize("table, module, name, run", [
    ("unindexed", api, "_transform", lambda x, idx: rearr.rearrange(x, "a b -> b a")),
    ("direct", api, "_transform", lambda x, idx: rearr.rearrange(x, "b n[i: b k] -> b k", i=idx)),
    ("direct", call, "direct_key", lambda x, idx: rearr.scatter(x[:, :2], "b k -> b n[i: b k]", "sum", i=idx, n=5)),
    ("einsum_pairs", call, "einsum_key", lambda x, idx: rearr.einsum(x, x, "b n, c n -> b c")),
], ids=["unindexed", "direct gather", "direct scatter", "einsum pairs"])
def test_the_writer_keeps_the_program_under_the_readers_key(monkeypatch, table, module, name, run):
    """The key is built once, by the reader: the writer keeps the program under the key it was given,
    never under one it builds again."""
    for t in cache.CACHES:
        t.cache_clear()
    real = getattr(module, name)
    marked = _MarkedTransform(real, "key" if table == "unindexed" else "direct") if name == "_transform" \
        else _Marked(real)
    monkeypatch.setattr(module, name, marked)
    x, idx = _x(np.asarray, (4, 5)), _index(np.asarray)
    run(x, idx)
    keys = list(getattr(cache, table).entries)
    assert len(keys) == 1 and keys[0][0] == "marked", keys


def test_every_table_with_a_reader_and_a_writer_is_covered_here():
    tables = {t.__name__ for t in cache.CACHES if isinstance(t, cache.Table)}
    assert tables == {"unindexed", "indexed", "direct", "einsum_pairs"}, "a new table needs its test in this file"
