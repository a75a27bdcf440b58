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


@pytest.mark.slow
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


_NAN, _INF = float("nan"), float("inf")
# Places 0 to 2 of 4 (place 3 receives nothing): a NaN among others, a place of only -inf (max's own
# start) or +inf (min's), an inf that wins.
_NONFINITE_DST = [0, 0, 1, 1, 2, 2]
_NONFINITE_SRC = [[1.5, _NAN], [0.5, 3.0], [-_INF, _INF], [-_INF, 2.0], [_INF, -_INF], [2.0, -_INF]]
_NONFINITE_INTO = [[0.5, -1.0], [-_INF, _INF], [0.0, _NAN], [_NAN, 3.0]]


@pytest.mark.slow
@pytest.mark.parametrize("lowering", ["along", "rows"])
@pytest.mark.parametrize("extra", ["plain", "into", "fill"])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_max_and_min_derivatives_through_nan_and_inf_are_torchs(lowering: str, extra: str, reduction: str) -> None:
    """Through NaN and inf, jax's derivatives of max and min equal torch's, reverse mode and forward mode:
    the sources equal to a place's result share its derivative (1/k each; into= counts as one more where
    it ties), and a NaN result's derivative is NaN (jax's own scatter max gives 0 there, which hides it)."""
    import contextlib

    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from _planner import rows_lowering_always

    import rearr

    src, into = np.asarray(_NONFINITE_SRC, np.float32), np.asarray(_NONFINITE_INTO, np.float32)

    def call(lib, s, b):
        kw = {"into": b} if extra == "into" else {"v": 4, **({"fill": -5.0} if extra == "fill" else {})}
        return rearr.scatter(s, "e c -> v[dst: e] c", reduction, dst=lib.asarray(_NONFINITE_DST), **kw)

    argnums = (0, 1) if extra == "into" else (0,)
    with rows_lowering_always() if lowering == "rows" else contextlib.nullcontext():
        args_j, args_t = (jnp.asarray(src), jnp.asarray(into)), (torch.tensor(src), torch.tensor(into))
        for jax_mode, torch_mode in ((jax.jacrev, torch.func.jacrev), (jax.jacfwd, torch.func.jacfwd)):
            got = jax_mode(lambda s, b: call(jnp, s, b), argnums=argnums)(*args_j)
            want = torch_mode(lambda s, b: call(torch, s, b), argnums=argnums)(*args_t)
            for g, w in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), w.numpy(), equal_nan=True)
        # the derivative of the NaN result (out[0, 1] = max(NaN, 3.0)) is NaN for each source there
        nan_place = jax.grad(lambda s: call(jnp, s, jnp.asarray(into))[0, 1])(jnp.asarray(src))
        assert np.isnan(np.asarray(nan_place)[:2, 1]).all()


def test_prod_derivatives_through_inf_and_nan_are_the_product_of_the_others_on_jax_and_nan_on_torch():
    """The one documented difference (docs/language.md, "Through NaN and inf"): at a place holding an inf
    or a NaN, jax's derivative by a source is the product of the others there; torch's backward divides
    the result by the source, NaN by an inf or a NaN one, in every output's derivative. Finite places agree."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    import rearr

    src, dst = np.array([float("inf"), 2.0, float("nan"), 3.0, 1.5, 0.5]), [0, 0, 1, 1, 2, 2]

    def call(lib, s):
        return rearr.scatter(s, "e -> v[dst: e]", "prod", dst=lib.asarray(dst), v=3)

    got = np.asarray(jax.jacrev(lambda s: call(jnp, s))(jnp.asarray(src)))
    want = torch.autograd.functional.jacobian(lambda s: call(torch, s), torch.tensor(src)).numpy()
    np.testing.assert_array_equal(got[0, :2], [2.0, float("inf")])  # d(inf * 2.0): 2.0 and inf
    np.testing.assert_array_equal(got[1, 2:4], [3.0, float("nan")])  # d(NaN * 3.0): 3.0 and NaN
    np.testing.assert_array_equal(want[0, :2], [float("nan"), float("inf")])  # torch: inf / inf, inf / 2.0
    assert np.isnan(want[1, 2:4]).all() and np.isnan(want[:, 0]).all()  # and in every output's derivative
    np.testing.assert_array_equal(got[2, 4:], want[2, 4:])  # a finite place: the same, 0.5 and 1.5
    np.testing.assert_array_equal(got[2, 4:], [0.5, 1.5])
    assert (got[1:, 0] == 0).all()  # jax: an inf gives nothing to the outputs that do not hold it
