"""jax's derivatives of every scatter reduction (grad, jit of grad, jacfwd, jacrev, vmap of grad, and a
Hessian of 'prod'), on both lowerings, plain, with into= and with fill=, equal finite differences and
torch's, in float64; 'prod' with duplicates and zeros (places with none, one and two), max and min
with ties against torch. The cases run in one process with jax's 64-bit mode on (tests/_jax_gradients.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _jax_gradients import CASES

pytest.importorskip("jax")
pytest.importorskip("torch")

HELPER = Path(__file__).resolve().parents[1] / "_jax_gradients.py"


@pytest.fixture(scope="module")
def results() -> dict:
    env = {**os.environ, "JAX_ENABLE_X64": "1", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join(p for p in (str(HELPER.parents[1]), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, str(HELPER)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


@pytest.mark.slow  # one subprocess for every case: about a minute
@pytest.mark.parametrize("case", CASES)
def test_jax_derivative_of_a_scatter_equals_differences_and_torch(results: dict, case: str) -> None:
    assert results[case] is None, results[case]


def test_prod_has_a_gradient_in_float32_too() -> None:
    """jax's own scatter_mul has no derivative unless its indices are unique: 'prod' with duplicates and
    zeros, in the process's own (32-bit) mode, against the product of the other sources by hand."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import rearr

    src = np.array([2.0, 0.0, 3.0, 0.0, 0.0, 5.0, 4.0], np.float32)
    dst = np.array([0, 0, 0, 1, 1, 2, 2])
    g = jax.grad(lambda s: rearr.scatter(s, "e -> v[dst: e]", "prod", dst=jnp.asarray(dst), v=3).sum())
    want = [0.0, 6.0, 0.0, 0.0, 0.0, 4.0, 5.0]  # place 0 has one zero, place 1 two, place 2 none
    np.testing.assert_allclose(np.asarray(g(jnp.asarray(src))), want)
    np.testing.assert_allclose(np.asarray(jax.jit(g)(jnp.asarray(src))), want)


def test_into_and_a_traced_source_meet() -> None:
    """A tracer has no device: a concrete into= with a traced source (and the other way round) is not
    refused as "on another device"."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import rearr

    src, into, dst = jnp.arange(1.0, 5.0), jnp.array([1.0, 2.0, 3.0]), jnp.array([0, 0, 2, 2])
    by_src = jax.grad(lambda s: rearr.scatter(s, "e -> v[dst: e]", "sum", dst=dst, into=into).sum())(src)
    by_into = jax.grad(lambda b: rearr.scatter(src, "e -> v[dst: e]", "prod", dst=dst, into=b).sum())(into)
    np.testing.assert_allclose(np.asarray(by_src), [1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(np.asarray(by_into), [2.0, 1.0, 12.0])


@pytest.mark.parametrize("lowering", ["along", "rows"])
@pytest.mark.parametrize("extra", ["plain", "into", "fill"])
@pytest.mark.parametrize("shape", [(0, 2), (3, 0)])
def test_prod_of_an_empty_source_has_its_empty_gradient(lowering: str, extra: str, shape: tuple) -> None:
    """An empty batch (a graph with no edges): every derivative of a 'prod' scatter is the empty
    gradient, and into='s is ones where nothing lands, as torch's."""
    import contextlib

    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from _planner import rows_lowering_always

    import rearr

    e, c = shape
    dst = np.zeros((e,), np.int64)
    into = np.full((3, c), 2.0, np.float32)

    def call(lib, s, b=None):
        kw = {"into": b} if extra == "into" else {"v": 3, **({"fill": -5.0} if extra == "fill" else {})}
        return rearr.scatter(s, "e c -> v[dst: e] c", "prod", dst=lib.asarray(dst), **kw)

    src = np.ones(shape, np.float32)
    with rows_lowering_always() if lowering == "rows" else contextlib.nullcontext():
        s = torch.tensor(src, requires_grad=True)
        b = torch.tensor(into, requires_grad=True)
        call(torch, s, b).sum().backward()
        for grad in (jax.grad(lambda s: call(jnp, s, jnp.asarray(into)).sum()),
                     jax.jacfwd(lambda s: call(jnp, s, jnp.asarray(into))),
                     jax.jacrev(lambda s: call(jnp, s, jnp.asarray(into)))):
            assert np.asarray(grad(jnp.asarray(src))).shape[-2:] == shape
        np.testing.assert_array_equal(np.asarray(jax.grad(lambda s: call(jnp, s, jnp.asarray(into)).sum())(
            jnp.asarray(src))), s.grad.numpy())
        if extra == "into":
            by_into = jax.grad(lambda b: call(jnp, jnp.asarray(src), b).sum())(jnp.asarray(into))
            np.testing.assert_array_equal(np.asarray(by_into), b.grad.numpy())
            np.testing.assert_array_equal(np.asarray(by_into), np.ones((3, c)))
