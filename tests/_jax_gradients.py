"""jax's derivatives of every scatter reduction, against finite differences and torch's, in float64.

Run as a script (``JAX_ENABLE_X64=1 python tests/_jax_gradients.py``) by
tests/backends/test_jax_gradients.py: jax's 64-bit mode is a process-wide switch, so it runs in a
process of its own. It prints one JSON object, each case's name -> None (it held) or what differed.
``CASES`` is read without jax or torch: the test parametrizes on it.
"""

from __future__ import annotations

import itertools
import json
import sys
import traceback

REDUCTIONS = ("sum", "mean", "max", "min", "prod", "set")
LOWERINGS = ("along", "rows")
EXTRAS = ("plain", "into", "fill")
TRANSFORMS = ("grad", "jit_grad", "jacfwd", "jacrev", "vmap_grad")
CASES = tuple(f"{r}-{lowering}-{extra}-{t}" for r, lowering, extra, t in
              itertools.product(REDUCTIONS, LOWERINGS, EXTRAS, TRANSFORMS)) + \
    tuple(f"prod-{lowering}-{extra}-hessian" for lowering, extra in itertools.product(LOWERINGS, EXTRAS))

PATTERN = "e c -> v[dst: e] c"  # rows when the planner's row lowering is forced, along an axis otherwise
E, C, V = 7, 2, 4
# Duplicates everywhere but under 'set'; place 3 receives nothing (fill, or into's value).
DST = [0, 0, 1, 1, 1, 2, 0]
UNIQUE = [2, 0, 1, 5, 3, 6, 4]  # 'set' into v = 7 places
# Zeros for prod: place 0 gets no zero, place 1 one zero, place 2 two (its only source and into's).
PROD_SRC = [[1.5, -2.0], [0.5, 3.0], [0.0, 2.0], [1.25, 0.0], [-3.0, 0.0], [0.0, 4.0], [2.0, -0.5]]
# Distinct values (no ties), apart by far more than the finite-difference step: max and min.
SPREAD_SRC = [[1.5, -2.0], [0.5, 3.0], [-0.7, 2.5], [1.25, 0.1], [-3.0, 0.9], [0.3, 4.0], [2.2, -0.5]]
# Ties, for max and min against torch (no derivative to difference there): 1.0 three times at place 0.
TIED_SRC = [[1.0, 2.0], [1.0, 2.0], [0.5, 0.5], [0.5, 1.0], [0.5, 0.2], [-1.0, 3.0], [1.0, -2.0]]
INTO = [[0.5, -1.0], [2.0, 0.0], [0.0, 1.5], [-2.0, 3.0]]


def _source(reduction: str):
    return PROD_SRC if reduction in ("prod", "sum", "mean", "set") else SPREAD_SRC


def _call(lib, reduction: str, extra: str):
    """f(src, into) -> the scatter, with this case's index and keywords."""
    import rearr

    dst = UNIQUE if reduction == "set" else DST
    v = 7 if reduction == "set" else V

    def f(s, into):
        kw = {"into": into} if extra == "into" else {"v": v}
        if extra == "fill":
            kw["fill"] = -5.0
        return rearr.scatter(s, PATTERN, reduction, dst=lib.asarray(dst) if lib else dst, **kw)

    return f


def _torch_jacobian(reduction: str, extra: str, src, into):
    """torch's Jacobians of the same call, in float64: d out / d src (and d out / d into)."""
    import numpy as np
    import torch

    f = _call(None, reduction, extra)
    s = torch.tensor(np.asarray(src), dtype=torch.float64)
    b = torch.tensor(np.asarray(into), dtype=torch.float64)
    if extra == "into":
        js, jb = torch.autograd.functional.jacobian(lambda s, b: f(s, b), (s, b))
        return js.numpy(), jb.numpy()
    return torch.autograd.functional.jacobian(lambda s: f(s, None), s).numpy(), None


def _differences(g, x, eps: float = 1e-6):
    """The Jacobian of g at x by central differences."""
    import numpy as np

    x = np.asarray(x, np.float64)
    out = np.asarray(g(x))
    jac = np.zeros(out.shape + x.shape)
    for k in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[k] = eps
        jac[(...,) + k] = (np.asarray(g(x + step)) - np.asarray(g(x - step))) / (2 * eps)
    return jac


def check(case: str) -> str | None:
    """None where jax's derivative of the case equals finite differences and torch's; else what differs."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    reduction, lowering, extra, transform = case.split("-")
    src = np.asarray(_source(reduction), np.float64)
    into = np.asarray(INTO if reduction != "set" else INTO + [[1.0, 1.0]] * 3, np.float64)
    f = _call(jnp, reduction, extra)

    def out(s, b):
        return f(s, b if extra == "into" else None)

    w = np.random.default_rng(1).standard_normal(np.asarray(out(jnp.asarray(src), jnp.asarray(into))).shape)
    problems = []

    def close(name: str, got, want) -> None:
        if not np.allclose(np.asarray(got), want, rtol=1e-7, atol=1e-8):
            got, want = np.asarray(got).round(6).tolist(), np.asarray(want).round(6).tolist()
            problems.append(f"{name}: got {got}, want {want}")

    want_s = _differences(lambda s: out(jnp.asarray(s), jnp.asarray(into)), src)
    want_b = _differences(lambda b: out(jnp.asarray(src), jnp.asarray(b)), into) if extra == "into" else None
    torch_s, torch_b = _torch_jacobian(reduction, extra, src, into) if transform != "hessian" else (None, None)
    if torch_s is not None:
        close("torch's d/dsrc against differences", torch_s, want_s)
    args = (jnp.asarray(src), jnp.asarray(into))
    argnums = (0, 1) if extra == "into" else 0

    def loss(s, b):
        return (out(s, b) * w).sum()

    def contract(jac):  # the gradient of loss from a Jacobian d out / d arg
        return np.tensordot(w, jac, axes=w.ndim)

    if transform in ("jacfwd", "jacrev"):
        got = getattr(jax, transform)(out, argnums=argnums)(*args)
        got_s, got_b = got if extra == "into" else (got, None)
        close(f"{transform} d/dsrc", got_s, want_s)
        if torch_s is not None:
            close(f"{transform} d/dsrc against torch", got_s, torch_s)
        if extra == "into":
            close(f"{transform} d/dinto", got_b, want_b)
            close(f"{transform} d/dinto against torch", got_b, torch_b)
    elif transform in ("grad", "jit_grad"):
        g = jax.grad(loss, argnums=argnums)
        got = (jax.jit(g) if transform == "jit_grad" else g)(*args)
        got_s, got_b = got if extra == "into" else (got, None)
        close(f"{transform} d/dsrc", got_s, contract(want_s))
        close(f"{transform} d/dsrc against torch", got_s, contract(torch_s))
        if extra == "into":
            close(f"{transform} d/dinto", got_b, contract(want_b))
    elif transform == "vmap_grad":  # three examples at once, each its own gradient
        srcs = np.stack([src, src * 2.0, -src])
        got = jax.vmap(jax.grad(loss), in_axes=(0, None))(jnp.asarray(srcs), args[1])
        for n in range(3):
            want = contract(_differences(lambda s: out(jnp.asarray(s), jnp.asarray(into)), srcs[n]))
            close(f"vmap_grad example {n}", got[n], want)
    else:  # a Hessian of the loss (forward over reverse), against differences of its gradient
        hess = jax.jacfwd(jax.grad(loss))(*args)
        want = _differences(lambda s: jax.grad(loss)(jnp.asarray(s), args[1]), src)
        close("hessian", hess, want)
    if reduction in ("max", "min") and transform == "jacrev":  # ties: torch's rule (1/k each), no differences
        tied = np.asarray(TIED_SRC, np.float64)
        got = jax.jacrev(out, argnums=argnums)(jnp.asarray(tied), args[1])
        got_s, got_b = got if extra == "into" else (got, None)
        torch_s, torch_b = _torch_jacobian(reduction, extra, tied, into)
        close("ties d/dsrc against torch", got_s, torch_s)
        if extra == "into":
            close("ties d/dinto against torch", got_b, torch_b)
    return "; ".join(problems) or None


def main() -> None:
    import jax

    assert jax.config.jax_enable_x64, "run with JAX_ENABLE_X64=1"
    import rearr.planning.planner as planner
    from rearr.run import cache

    results = {}
    for lowering in LOWERINGS:
        planner.ROWS_MIN_ELEMENTS = 0 if lowering == "rows" else 1 << 62
        for f in cache.CACHES:
            f.cache_clear()
        for case in CASES:
            if case.split("-")[1] == lowering:
                try:
                    results[case] = check(case)
                except Exception:
                    results[case] = traceback.format_exc(limit=4)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
