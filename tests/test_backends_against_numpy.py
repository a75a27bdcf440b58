"""The Array API and dask backends against numpy: silent disagreements found by an adversarial review
(each test failed at 35fa2fc). Each test runs the call twice (plans are cached) and compares with rearr's
numpy answer for the same input."""

from __future__ import annotations

import numpy as np
import pytest

import rearr

array_api_strict = pytest.importorskip("array_api_strict")
da = pytest.importorskip("dask.array")


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
