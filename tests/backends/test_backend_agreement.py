"""The backends agree: numpy, torch, dask and the Array API give one dtype and one value for one call
(reduce dtypes and float16 accumulation, fill= values of every numeric type, torch's row lowering with
a fill; unsigned sums on the Array API, dask's einsum, empty min/max and parse_shape). Calls are made
twice where plans are cached, so the cached path is compared too."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import dask.array as da
import numpy as np
import pytest
import torch

import rearr
from rearr import RearrError

IDX = np.array([0, 2, 2])


def _np(t):
    return t.numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


# --- reduce ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["sum", "prod"])
@pytest.mark.parametrize("pattern", ["a b -> a", "a b -> a b"])
def test_reduce_uint8_sum_and_prod_same_dtype_and_value_on_numpy_and_torch(reduction, pattern):
    # numpy: uint64 (np.sum/np.prod promote unsigned to uint64); torch: int64. 255**8 > 2**63: the values differ too.
    x = np.full((1, 8), 255, np.uint8)
    a, b = rearr.reduce(x, pattern, reduction), rearr.reduce(torch.from_numpy(x), pattern, reduction)
    assert str(a.dtype) == str(b.dtype).removeprefix("torch.")
    assert a.tolist() == b.tolist()


def test_reduce_float16_prod_agrees_on_numpy_and_torch():
    # numpy multiplies in float16 (18.69), torch's prod of half gives 17.56; float32 accumulation rounded once: 18.7
    y = np.full((1, 3000), 1.001, np.float16)
    want = np.float16(np.prod(y.astype(np.float32), dtype=np.float32))
    a = rearr.reduce(y, "a b -> a", "prod")
    b = rearr.reduce(torch.from_numpy(y), "a b -> a", "prod")
    assert a[0] == b[0].item()
    assert abs(float(a[0]) - float(want)) <= 2 * 2.0**-10 * float(want)


def test_dask_float16_mean_accumulates_in_float32_as_numpy():
    x = np.array([[1.0390625, 1.0419921875, 1.00390625, 0.9287109375, 0.9931640625, 0.96142578125, 0.9287109375,
                   1.0126953125, 0.9716796875, 0.94873046875, 0.94775390625, 1.013671875, 1.017578125, 1.06640625,
                   0.99951171875, 1.0517578125, 1.0703125, 1.0576171875, 0.8818359375, 1.0615234375, 1.0166015625,
                   1.021484375, 1.0185546875, 1.01953125, 1.015625, 0.98193359375, 0.90478515625, 0.99462890625,
                   0.9599609375, 1.0537109375, 0.9853515625, 1.00390625, 0.95751953125, 0.974609375, 0.99951171875,
                   0.92578125, 1.0146484375, 0.99462890625, 0.94091796875, 0.8798828125]], np.float16)
    a = rearr.reduce(x, "a b -> a", "mean")
    d = rearr.reduce(da.from_array(x, chunks=2), "a b -> a", "mean").compute()
    assert a.tolist() == d.tolist()  # numpy/torch 0.9917, dask 0.991


# --- scatter --------------------------------------------------------------------------------------


def test_scatter_bool_sum_with_fill_keeps_bool_on_torch_rows_lowering():
    # "b p c -> b h[y] w[x] c" is a ScatterRows: torch.where(hit, out, 1) promotes bool to int64
    rng = np.random.default_rng(0)
    x = rng.random((2, 7, 3)) < 0.5
    y, xx = rng.integers(0, 2, (2, 7)), rng.integers(0, 2, (2, 7))
    pat = "b p c -> b h[y: b p] w[x: b p] c"
    a = rearr.scatter(x, pat, "sum", y=y, x=xx, h=4, w=5, fill=1)
    b = rearr.scatter(torch.from_numpy(x), pat, "sum", y=torch.from_numpy(y), x=torch.from_numpy(xx), h=4, w=5, fill=1)
    assert a.dtype == np.bool_
    assert b.dtype == torch.bool


@pytest.mark.parametrize("fill", [np.float32(2.5), np.float16(2.5), Fraction(5, 2), Decimal("2.5")],
                         ids=["np.float32", "np.float16", "Fraction", "Decimal"])
@pytest.mark.parametrize("lib", [np.asarray, torch.as_tensor])
def test_fractional_fill_into_integers_is_refused_whatever_its_type(fill, lib):
    # fill=2.5 is RA500; fill=np.float32(2.5) silently becomes 2 (check_fill tests isinstance(fill, float))
    with pytest.raises(RearrError):
        rearr.scatter(lib(np.ones(3, np.int64)), "k -> n[idx]", "sum", idx=lib(IDX), n=4, fill=fill)


@pytest.mark.parametrize("lib", [np.asarray, torch.as_tensor])
def test_complex_numpy_scalar_fill_into_reals_is_refused(lib):
    # fill=1+2j is RA500; np.complex64(1+2j) is not a `complex`: its imaginary part is silently dropped
    with pytest.raises(RearrError):
        rearr.scatter(lib(np.ones(3, np.float32)), "k -> n[idx]", "sum", idx=lib(IDX), n=4, fill=np.complex64(1 + 2j))


@pytest.mark.parametrize("fill", [Fraction(5, 2), Decimal("2.5"), 2**70, np.uint64(2**64 - 1)],
                         ids=["Fraction", "Decimal", "2**70", "np.uint64"])
def test_fill_that_numpy_takes_works_on_torch_too(fill):
    # numpy takes these (all within float32's range); torch's new_full raises a bare TypeError / OverflowError
    a = rearr.scatter(np.ones(3, np.float32), "k -> n[idx]", "max", idx=IDX, n=4, fill=fill)
    b = rearr.scatter(torch.ones(3), "k -> n[idx]", "max", idx=torch.from_numpy(IDX), n=4, fill=fill)
    assert a.tolist() == b.tolist()


# --- the Array API and dask against numpy ---------------------------------------------------------

array_api_strict = pytest.importorskip("array_api_strict")


def _twice(f):
    first, second = f(), f()
    return first, second


# 1. Array API: sum/prod of uint8/16/32 follow the standard's unsigned promotion (uint64; uint32 on jax),
#    where numpy and torch give int64: now a signed result (jax without x64: int32).
@pytest.mark.parametrize("reduction", ["sum", "prod"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32"])
@pytest.mark.parametrize("pattern", ["a b -> a", "a b -> a b"])
def test_array_api_strict_sum_prod_of_unsigned_gives_numpys_int64(dtype, reduction, pattern):
    x = np.arange(6, dtype=dtype).reshape(2, 3)
    want = rearr.reduce(x, pattern, reduction)
    assert want.dtype == np.int64
    for got in _twice(lambda: rearr.reduce(array_api_strict.asarray(x), pattern, reduction)):
        assert got.dtype == array_api_strict.int64  # observed: uint64
        np.testing.assert_array_equal(np.asarray(got._array), want)


@pytest.mark.parametrize("reduction", ["sum", "prod"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16"])
def test_jax_sum_prod_of_small_unsigned_gives_a_signed_integer_as_numpy(dtype, reduction):
    jnp = pytest.importorskip("jax.numpy")
    x = np.arange(6, dtype=dtype).reshape(2, 3)
    want = rearr.reduce(x, "a b -> a", reduction)  # int64
    for got in _twice(lambda: rearr.reduce(jnp.asarray(x), "a b -> a", reduction)):
        assert jnp.issubdtype(got.dtype, jnp.signedinteger), got.dtype  # observed: uint32
        np.testing.assert_array_equal(np.asarray(got), want)


# 2. dask einsum of int8/uint8/int32/bool: dask sums the per-block products with numpy's sum promotion.
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "bool"])
def test_dask_einsum_keeps_numpys_dtype_and_values(dtype):
    a = (np.arange(12).reshape(3, 4) * 37).astype(dtype)
    want = rearr.einsum(a, a, "a b, a b -> a")
    for got in _twice(lambda: rearr.einsum(da.from_array(a, chunks=2), da.from_array(a, chunks=2), "a b, a b -> a")):
        got = got.compute()
        assert got.dtype == want.dtype  # observed: int64 / uint64 / int64
        np.testing.assert_array_equal(got, want)  # uint8: 1350 vs 70 (no wrap); bool: 2 vs True


# 3. dask min/max of an array with no elements: the computed shape is not the lazy one, nor numpy's.
@pytest.mark.parametrize("reduction", ["min", "max"])
@pytest.mark.parametrize("pattern", ["a b c -> a b c", "a b c -> c b"])
def test_dask_min_max_of_an_empty_array_has_numpys_shape(reduction, pattern):
    x = np.zeros((2, 0, 3), np.float32)
    want = rearr.reduce(x, pattern, reduction)
    for got in _twice(lambda: rearr.reduce(da.from_array(x, chunks=2), pattern, reduction)):
        assert got.shape == want.shape
        assert got.compute().shape == want.shape  # observed: (1, 1, 0) and (0, 1)


# 4. explain(backend="dask") of a float16 mean prints x.mean(axis=...), which dask accumulates in float16;
#    rearr runs x.mean(axis=..., dtype=np.float32).astype(np.float16).
def test_dask_explained_float16_mean_gives_rearrs_value():
    x = (np.random.default_rng(3).standard_normal((3, 40)) * 3).astype(np.float16)
    d = da.from_array(x, chunks=2)
    want = rearr.reduce(d, "a b -> a", "mean").compute()
    e = rearr.explain("a b -> a", x.shape, op="reduce", reduction="mean", backend="dask")
    namespace = {"np": np, "da": da, e.input_name: d}
    exec("\n".join(e.code), namespace)  # noqa: S102 - the point of the test
    got = namespace[e.input_name].compute()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # observed: [-0.1234 -0.4478 0.2795] vs [-0.1235 -0.4473 0.2795]


# 5. parse_shape of a dask array with unknown lengths (boolean-mask result): a bare ValueError
#    ("cannot convert float NaN to integer"), where rearrange/reduce give RearrError RA304.
def test_dask_parse_shape_of_unknown_lengths_is_a_rearr_error():
    d = da.from_array(np.arange(10.0), chunks=3)
    masked = d[d > 3]  # shape (nan,)
    with pytest.raises(rearr.RearrError):
        rearr.rearrange(masked, "(a b) -> a b", b=2)  # passes: RA304
    with pytest.raises(rearr.RearrError):
        rearr.parse_shape(masked, "a")  # observed: ValueError
