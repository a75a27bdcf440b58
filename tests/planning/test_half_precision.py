"""float16 and bfloat16: sums and means accumulate in float32 on both backends, as torch does on CPU.

torch's scatter_add_, index_add_ on rows, scatter_reduce and its sum and mean
reductions of half-precision tensors accumulate in float32 and round once at
the end (for 'mean': the rounded sum divided by the count, both in the
tensor's dtype). numpy's ufunc.at and axis sums would accumulate in float16,
where 2048 + 1 == 2048: 3000 ones summed to 2048. numpy has no bfloat16, so
bfloat16 is checked on torch only, against a float64 reference rounded to
bfloat16.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _backends import to_numpy

import rearr

# (backend, dtype name): numpy float16, torch float16 and bfloat16
CASES = [("numpy", "float16"), ("torch", "float16"), ("torch", "bfloat16")]
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}  # the spacing of the dtype's numbers just above 1

# One index per pattern family: rows of a (rows, width) view, and one index per element.
PATTERNS = [
    ("n -> k[i]", (3000,), (3000,)),
    ("n c -> k[i: n] c", (3000, 3), (3000,)),
    ("n c -> k[i] c", (3000, 3), (3000, 3)),
]


def _tensor(values: np.ndarray, backend: str, dtype: str):
    if backend == "numpy":
        return values.astype(dtype)
    return torch.from_numpy(values.astype(np.float32)).to(getattr(torch, dtype))


def _as_float64(x) -> np.ndarray:
    return to_numpy(x.double()) if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)


def _rounded(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to the dtype (the value of a result rounded once), back as float64."""
    return _as_float64(torch.from_numpy(values).to(getattr(torch, dtype)))


def _index(backend: str, idx: np.ndarray):
    return torch.from_numpy(idx) if backend == "torch" else idx


@pytest.mark.parametrize("backend, dtype", CASES)
@pytest.mark.parametrize("pattern, shape, idx_shape", PATTERNS)
def test_many_ones_into_one_slot(backend, dtype, pattern, shape, idx_shape, lowering):
    """The issue's case: 3000 ones into slot 0 gave sum 2048 and mean 0.68 on numpy."""
    src = _tensor(np.ones(shape), backend, dtype)
    idx = _index(backend, np.zeros(idx_shape, dtype=np.int64))
    total = _as_float64(rearr.scatter(src, pattern, "sum", i=idx, k=2))
    mean = _as_float64(rearr.scatter(src, pattern, "mean", i=idx, k=2))
    expected = _rounded(np.array(3000.0), dtype)  # 3000 in float16, 3008 in bfloat16
    np.testing.assert_array_equal(total[0], np.broadcast_to(expected, total[0].shape))
    np.testing.assert_array_equal(total[1], 0)
    np.testing.assert_array_equal(mean[0], 1)
    np.testing.assert_array_equal(mean[1], 0)


def _reference(src: np.ndarray, idx: np.ndarray, rows: int, base: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Exact (float64) sums and means of src rows (n, c) scattered to rows idx, into= included."""
    sums = np.zeros((rows, src.shape[1])) if base is None else base.astype(np.float64)
    np.add.at(sums, idx, src.astype(np.float64))
    counts = np.bincount(idx, minlength=rows) + (base is not None)
    return sums, sums / np.maximum(counts, 1)[:, None]


@pytest.mark.parametrize("backend, dtype", CASES)
@pytest.mark.parametrize("with_into", [False, True])
def test_sums_and_means_of_many_duplicates_are_rounded_once(backend, dtype, with_into, lowering):
    """Random positive values, about 1000 per slot: off by at most the last rounding steps."""
    rng = np.random.default_rng(0)
    n, rows, c = 4000, 4, 3
    # values already representable in the dtype, so that the reference sums the same numbers
    src = _as_float64(_tensor(rng.random((n, c)) * 2, "torch", dtype))
    idx = rng.integers(0, rows, n)
    base = _as_float64(_tensor(rng.random((rows, c)) * 100, "torch", dtype)) if with_into else None
    into = {"into": _tensor(base, backend, dtype)} if with_into else {"k": rows}
    x, i = _tensor(src, backend, dtype), _index(backend, idx)
    sums, means = _reference(src, idx, rows, base)
    got_sum = _as_float64(rearr.scatter(x, "n c -> k[i: n] c", "sum", i=i, **into))
    got_mean = _as_float64(rearr.scatter(x, "n c -> k[i: n] c", "mean", i=i, **into))
    eps = EPS[dtype]
    # a sum rounded once is within half a spacing; float16's own accumulation was off by far more
    np.testing.assert_allclose(got_sum, sums, rtol=eps, atol=0)
    # the mean: the rounded sum divided by the rounded count, and rounded again
    np.testing.assert_allclose(got_mean, means, rtol=2 * eps, atol=0)


def test_numpy_float16_equals_torch_float16(lowering):
    rng = np.random.default_rng(1)
    src = rng.random((5000, 4)).astype(np.float16)
    idx = rng.integers(-3, 3, (5000,))
    for reduction in ("sum", "mean", "prod", "max", "min"):
        for pattern, i in (("n c -> k[i: n] c", idx), ("n c -> k[i] c", np.stack([idx] * 4, 1))):
            a = rearr.scatter(src, pattern, reduction, i=i, k=3, fill=-1)
            b = rearr.scatter(torch.from_numpy(src), pattern, reduction, i=torch.from_numpy(i), k=3, fill=-1)
            assert a.dtype == np.float16 and b.dtype == torch.float16
            # both round a float32 accumulation once; the order of the float32 additions may differ
            np.testing.assert_allclose(a.astype(np.float64), _as_float64(b), rtol=EPS["float16"], atol=0,
                                       err_msg=f"{reduction} {pattern}")


@pytest.mark.parametrize("backend, dtype", CASES)
@pytest.mark.parametrize("pattern", ["n c -> c", "c n -> c", "a n b -> b"])
def test_reduce_sum_and_mean_accumulate_in_float32(backend, dtype, pattern):
    """reduce 'sum' over an axis: numpy's add.reduce along axis 0 accumulates in float16 (2048)."""
    shape = {"n c -> c": (3000, 2), "c n -> c": (2, 3000), "a n b -> b": (30, 100, 2)}[pattern]
    x = _tensor(np.ones(shape), backend, dtype)
    expected = _rounded(np.array(3000.0), dtype)
    np.testing.assert_array_equal(_as_float64(rearr.reduce(x, pattern, "sum")), [expected, expected])
    np.testing.assert_array_equal(_as_float64(rearr.reduce(x, pattern, "mean")), [1, 1])
    assert rearr.reduce(x, pattern, "sum").dtype == x.dtype
