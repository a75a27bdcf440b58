"""README's "Backends" table, cell by cell: 'yes' runs and equals numpy's answer in the backend's own
array type (and lazily on dask); 'RearrError' raises one. The table is read from the README, so a cell
that is not true fails here."""

from __future__ import annotations

import re
from pathlib import Path

import array_api_strict as xs
import dask
import dask.array as da
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import rearr

README = Path(__file__).resolve().parents[2] / "README.md"

MAKERS = {
    "numpy": np.asarray,
    "torch": torch.as_tensor,
    "Array API": xs.asarray,
    "jax": jnp.asarray,
    "dask": lambda a: da.from_array(np.asarray(a), chunks=2),
}


def to_numpy(x):
    if isinstance(x, torch.Tensor):
        return x.numpy()
    if type(x).__module__.startswith("array_api_strict"):  # np.asarray refuses them: nothing outside the standard
        return np.from_dlpack(x)
    return np.asarray(x)


X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
Y = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
IDX = np.array([2, 0, -1, 1])
SRC = np.ones((2, 4), np.float32)
SIDX = np.array([[0, 1, 1, 3], [2, 2, 0, 1]])


def _pack_unpack(mk):
    packed, shapes = rearr.pack([mk(X), mk(X[:, :1])], "a * c")
    return [packed, *rearr.unpack(packed, shapes, "a * c")]


CASES = {
    "`rearrange`": lambda mk: rearr.rearrange(mk(X), "a b c -> c (a b)"),
    "`reduce`": lambda mk: rearr.reduce(mk(X), "a b c -> b", "max"),
    "`repeat`": lambda mk: rearr.repeat(mk(X), "a b c -> a b c k", k=2),
    "a list of arrays (stacked)": lambda mk: rearr.rearrange([mk(X[0]), mk(X[1])], "n b c -> b (n c)"),
    "`pack` / `unpack`": _pack_unpack,
    "`einsum`": lambda mk: rearr.einsum(mk(X), mk(Y), "a b c, c d -> d a"),
    "gather `[idx]`": lambda mk: rearr.rearrange(mk(X), "a b[i: k] c -> a k c", i=mk(IDX)),
    "`scatter`": lambda mk: rearr.scatter(mk(SRC), "a k -> a n[i]", "sum", i=mk(SIDX), n=4),
    "`parse_shape`": lambda mk: rearr.parse_shape(mk(X), "a _ c"),
    "`asnumpy`": lambda mk: rearr.asnumpy(mk(X)),
}
# The public names that take no tensor, or that are tested elsewhere on every backend: explain prints code
# (tests/tools/test_explain.py), RearrError is the error class.
NOT_IN_TABLE = {"explain", "RearrError"}


def _table() -> list[tuple[str, str, str]]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Backends"):]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header[1:] == list(MAKERS), header
    cells = []
    for row in rows[2:]:
        op, *values = [c.strip() for c in row.strip("|").split("|")]
        cells += [(op, backend, value) for backend, value in zip(header[1:], values)]
    return cells


TABLE = _table()


def test_the_table_lists_every_operation() -> None:
    assert sorted({op for op, _, _ in TABLE}) == sorted(CASES)


def test_every_public_function_is_in_the_table() -> None:
    named = {name for op in CASES for name in re.findall(r"`(\w+)`", op)} | {"rearrange"}
    assert set(rearr.__all__) - NOT_IN_TABLE <= named, set(rearr.__all__) - NOT_IN_TABLE - named


def _refuse_to_compute(*args, **kwargs):
    raise AssertionError("computed a dask graph")


@pytest.mark.parametrize(("op", "backend", "cell"), TABLE, ids=[f"{o}-{b}" for o, b, _ in TABLE])
def test_cell(op: str, backend: str, cell: str) -> None:
    run, mk = CASES[op], MAKERS[backend]
    if cell.startswith("RearrError"):
        with pytest.raises(rearr.RearrError):
            run(mk)
        return
    assert re.match(r"yes\b", cell), cell
    want = run(np.asarray)
    if op == "`asnumpy`":
        got = run(mk)
        assert type(got) is np.ndarray, f"{type(got)} from {backend}"
        np.testing.assert_array_equal(got, want)
        return
    with dask.config.set(scheduler=_refuse_to_compute):  # 'lazy': building the result computes nothing
        got = run(mk)
    if isinstance(want, dict):
        assert got == want
        return
    wants, gots = (want, got) if isinstance(want, list) else ([want], [got])
    for w, g in zip(wants, gots):
        assert type(g) is type(mk(np.zeros(1))), f"{type(g)} from {backend}"
        np.testing.assert_allclose(to_numpy(g), w, rtol=1e-6)
