"""rearr.asnumpy on every backend: the values as numpy, or a RearrError whose fix fits the tensor; a lazy
array's own errors pass through as they are."""

from __future__ import annotations

import array_api_strict as xs
import dask.array as da
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import rearr


def test_torch_views_with_a_conj_or_neg_bit_are_resolved():
    z = torch.tensor([1 + 2j, 3 - 1j]).conj()
    np.testing.assert_array_equal(rearr.asnumpy(z), [1 - 2j, 3 + 1j])
    np.testing.assert_array_equal(rearr.asnumpy(torch.ones(3)._neg_view()), [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(rearr.asnumpy(torch.ones(2, requires_grad=True)), [1.0, 1.0])


@pytest.mark.parametrize(("make", "fix"), [
    (lambda: torch.ones(3, device="meta"), "meta tensor holds no values"),
    (lambda: torch.ones(3).to_sparse(), "x.to_dense()"),
    (lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "x.to_padded_tensor(0)"),
    (lambda: torch.ones(3, dtype=torch.bfloat16), "x.float()"),
])
def test_torch_refusals_name_the_fix_that_fits(make, fix):
    x = make()
    with pytest.raises(rearr.RearrError) as e:
        rearr.asnumpy(x)
    assert e.value.code == "RA500" and fix in e.value.hint


def test_the_bfloat16_fix_works_when_applied():
    np.testing.assert_array_equal(rearr.asnumpy(torch.ones(3, dtype=torch.bfloat16).float()), [1.0, 1.0, 1.0])


def test_a_masked_dask_array_is_refused_not_unmasked():
    m = da.ma.masked_array(da.from_array(np.arange(4.0), chunks=2), mask=np.array([0, 1, 0, 1], bool))
    with pytest.raises(rearr.RearrError) as e:
        rearr.asnumpy(m)
    assert "masked" in str(e.value) and "filled" in e.value.hint
    np.testing.assert_array_equal(rearr.asnumpy(da.ma.filled(m, 0.0)), [0.0, 0.0, 2.0, 0.0])  # the fix


def test_a_lazy_arrays_own_errors_pass_through():
    x = da.from_array(np.arange(12.0).reshape(3, 4), chunks=2)
    r = rearr.rearrange(x, "b n[i: k] -> b k", i=da.from_array(np.array([0, 4, 1])))
    with pytest.raises(rearr.RearrError) as e:
        rearr.asnumpy(r)
    assert e.value.code == "RA501" and str(e.value).count("fix:") == 1

    def boom(block):
        raise ValueError("the user's own bug")

    with pytest.raises(ValueError, match="the user's own bug") as e:
        rearr.asnumpy(da.from_array(np.ones(3), chunks=1).map_blocks(boom, dtype=float))
    assert not isinstance(e.value, rearr.RearrError)


def test_jax_keys_and_tracers_get_a_rearr_error():
    with pytest.raises(rearr.RearrError, match="key_data"):
        rearr.asnumpy(jax.random.key(0))
    np.testing.assert_array_equal(rearr.asnumpy(jax.random.key_data(jax.random.key(0))).shape, (2,))
    with pytest.raises(rearr.RearrError) as e:
        jax.jit(lambda a: (rearr.asnumpy(a), a)[1])(jnp.ones(3))
    assert "outside jax.jit" in e.value.hint


def test_array_api_and_jax_arrays_convert():
    assert type(rearr.asnumpy(xs.ones(3))) is np.ndarray
    assert type(rearr.asnumpy(jnp.ones(3))) is np.ndarray
