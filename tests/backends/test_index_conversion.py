"""Index values and dtypes as each backend converts them: values that would wrap in the backend's index
dtype are refused, on jax, array-api-strict and dask."""

from __future__ import annotations

import warnings

import array_api_strict as xs
import dask
import dask.array as da
import jax.numpy as jnp
import numpy as np
import pytest

import rearr
from rearr.errors import RearrError

PAT = "n[idx: k] -> k"


def _refuses(x, idx, compute=False):
    for _ in range(2):  # plans are cached: the second call must refuse too
        with pytest.raises(RearrError, match="RA501"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # jax: "int64 requested in asarray is not available"
                y = rearr.rearrange(x, PAT, idx=idx)
                if compute:
                    with dask.config.set(scheduler="synchronous"):
                        y.compute()
            pytest.fail(f"returned {np.asarray(y)} for an index outside the axis")


# --- Array API: convert_index casts to the namespace's default integer dtype before the bounds check ---


def test_jax_numpy_int64_index_beyond_int32_is_refused():
    # jax without x64: int32 indices; 2**32 + 1 wraps to 1 and x[1] comes back
    _refuses(jnp.arange(10.0), np.array([2**32 + 1]))


def test_jax_numpy_negative_int64_index_beyond_int32_is_refused():
    _refuses(jnp.arange(10.0), np.array([-(2**32) + 3]))  # wraps to 3


def test_jax_uint32_index_is_refused():
    # jnp.uint32 4294967295 -> astype(int32) -> -1 -> counted from the end: x[9]
    _refuses(jnp.arange(10.0), jnp.asarray([2**32 - 1], dtype=jnp.uint32))


def test_jax_numpy_uint64_index_is_refused():
    _refuses(jnp.arange(10.0), np.array([2**64 - 1], dtype=np.uint64))


def test_array_api_strict_uint64_index_is_refused():
    # astype(int64) wraps 2**64 - 1 to -1: x[9] (numpy, torch and eager-dask give RA501 'beyond int64')
    _refuses(xs.arange(10), xs.asarray([2**64 - 1], dtype=xs.uint64))


# --- dask: a lazy index is astype(np.intp) without the uint64 check numpy's convert_index makes ---


def test_dask_lazy_uint64_index_is_refused():
    x = da.from_array(np.arange(10.0), chunks=3)
    idx = da.from_array(np.array([2**64 - 1], dtype=np.uint64), chunks=1)
    _refuses(x, idx, compute=True)


# --- another byte order (HDF5, netCDF and np.fromfile give big-endian arrays) ---------------------

_OTHER_ORDER = ">" if np.little_endian else "<"
_INT_DTYPES = ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8")


def _on(lib: str, a: np.ndarray):
    if lib == "torch":
        import torch

        return torch.as_tensor(a)
    return {"numpy": np.asarray, "jax": jnp.asarray, "dask": lambda a: da.from_array(a, chunks=2),
            "array_api_strict": xs.asarray}[lib](a)


@pytest.mark.parametrize("dtype", _INT_DTYPES)
@pytest.mark.parametrize("lib", ["numpy", "torch", "jax", "dask", "array_api_strict"])
def test_an_index_of_the_other_byte_order_is_its_values(lib: str, dtype: str):
    x = np.arange(12.0).reshape(4, 3)
    values = [2, 0, 1, -1] if dtype[0] == "i" else [2, 0, 1, 1]
    want = rearr.rearrange(x, "b n[idx] -> b", idx=np.array(values))
    for index in (np.array(values, _OTHER_ORDER + dtype), np.array(values, _OTHER_ORDER + dtype)[::-1][::-1]):
        got = rearr.rearrange(_on(lib, x), "b n[idx] -> b", idx=index)
        np.testing.assert_array_equal(rearr.asnumpy(got), want)
        if lib == "dask":  # a lazy index of that order too
            got = rearr.rearrange(_on(lib, x), "b n[idx] -> b", idx=da.from_array(index, chunks=2))
            np.testing.assert_array_equal(rearr.asnumpy(got), want)
    if lib in ("numpy", "torch", "jax"):
        src = np.arange(8.0).reshape(4, 2)
        index = np.array([3, 0, 3, 1], _OTHER_ORDER + dtype)
        want = rearr.scatter(src, "k c -> n[idx: k] c", "sum", idx=np.array([3, 0, 3, 1]), n=5)
        got = rearr.scatter(_on(lib, src), "k c -> n[idx: k] c", "sum", idx=index, n=5)
        np.testing.assert_array_equal(rearr.asnumpy(got), want)


@pytest.mark.parametrize("lib", ["numpy", "torch", "jax", "dask"])
def test_an_index_of_the_other_byte_order_is_checked_as_any(lib: str):
    x = _on(lib, np.arange(12.0).reshape(4, 3))
    with pytest.raises(RearrError, match="RA501: index 'idx' holds 3 at position"):
        rearr.rearrange(x, "b n[idx] -> b", idx=np.array([2, 0, 3, 1], _OTHER_ORDER + "i8"))
    with pytest.raises(RearrError, match="RA501: index 'idx' has dtype"):
        rearr.rearrange(x, "b n[idx] -> b", idx=np.array([2.0, 0, 1, 1], _OTHER_ORDER + "f8"))
    with pytest.raises(RearrError, match="RA501: index 'idx' holds 18446744073709551615"):
        rearr.rearrange(x, "b n[idx] -> b", idx=np.array([2, 0, 2**64 - 1, 1], _OTHER_ORDER + "u8"))


@pytest.mark.parametrize("lowering", ["along", "rows"])
@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "c16", "i2", "i8", "u4"])
def test_an_into_of_the_other_byte_order_is_its_values(dtype: str, lowering: str):
    """numpy: into= read from a file in the other byte order is its values, as an index or a source of that
    order is (not RA500 'into= is >f8, the source float64'); the result has the source's dtype, and into=
    is not modified."""
    import contextlib

    from _planner import rows_lowering_always

    src = np.arange(1, 13).reshape(4, 3).astype(dtype)
    native = np.arange(2, 17).reshape(5, 3).astype(dtype)
    reductions = ("sum", "prod", "set", *(("max", "min") if dtype[0] != "c" else ()),
                  *(("mean",) if dtype[0] in "fc" else ()))
    with rows_lowering_always() if lowering == "rows" else contextlib.nullcontext():
        for reduction in reductions:
            idx = np.array([3, 0, 2, 1]) if reduction == "set" else np.array([3, 0, 3, 1])
            want = rearr.scatter(src, "k b -> n[idx: k] b", reduction, idx=idx, into=native)
            for x, into in ((src, native.astype(_OTHER_ORDER + dtype)), (src.astype(_OTHER_ORDER + dtype), native)):
                kept = into.copy()
                got = rearr.scatter(x, "k b -> n[idx: k] b", reduction, idx=idx, into=into)
                assert got.dtype == x.dtype
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(into, kept)


def test_an_into_of_another_dtype_says_how_to_convert_it():
    src, into = np.ones(4), np.zeros(3, np.float32)
    with pytest.raises(RearrError) as info:
        rearr.scatter(src, "k -> n[i]", "sum", i=[0, 0, 1, 2], into=into)
    e = info.value
    assert (e.code, e.message) == ("RA500", "into= is float32 on cpu, the source float64 on cpu")
    assert "into=into.astype(x.dtype)" in e.hint
    x = src  # the fix, applied as written
    rearr.scatter(src, "k -> n[i]", "sum", i=[0, 0, 1, 2], into=into.astype(x.dtype))


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "c16", "i2", "i8", "u4"])
@pytest.mark.parametrize("lib", ["numpy", "dask"])
def test_a_source_of_the_other_byte_order_is_its_values(lib: str, dtype: str):
    native = np.arange(1, 13).reshape(4, 3).astype(dtype)
    other = native.astype(_OTHER_ORDER + dtype)
    idx = np.array([3, 0, 3, 1])
    calls = [lambda x: rearr.rearrange(x, "a b -> (b a)"), lambda x: rearr.reduce(x, "a b -> b", "sum"),
             lambda x: rearr.reduce(x, "a b -> a", "prod"), lambda x: rearr.repeat(x, "a b -> a b r", r=2),
             lambda x: rearr.rearrange(x, "n[idx: k] b -> k b", idx=idx),
             lambda x: rearr.einsum(x, x, "a b, a c -> b c"), lambda x: rearr.pack([x, x], "a *")[0]]
    if lib == "numpy":
        calls += [lambda x, r=r: rearr.scatter(x, "k b -> n[idx: k] b", r, idx=idx, n=5)
                  for r in ("sum", "prod", *(("max", "min") if dtype[0] != "c" else ()))]
        calls += [lambda x: rearr.scatter(x, "k b -> n[idx: k] b", "sum", idx=idx, n=5, fill=7),
                  lambda x: rearr.scatter(x, "k b -> n[idx: k] b", "set", idx=np.array([3, 0, 2, 1]), n=5),
                  lambda x: rearr.scatter(x, "k b -> n[idx: k] b", "sum", idx=idx, into=np.ones((5, 3), x.dtype))]
        if dtype[0] in "fc":
            calls.append(lambda x: rearr.scatter(x, "k b -> n[idx: k] b", "mean", idx=idx, n=5))
    for call in calls:
        want = call(native)
        got = call(_on(lib, other))
        np.testing.assert_array_equal(rearr.asnumpy(got), rearr.asnumpy(want))
