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
