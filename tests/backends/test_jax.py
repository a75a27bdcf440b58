"""The jax backend: gathers and scatters eager, under jax.jit, jax.vmap and jax.grad, with the index
checks on, and an out-of-range index under each mode (docs/backends.md, "jax").

Every value is compared with the numpy backend on the same data.
"""

from __future__ import annotations

import math

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import checkify
from strategies import Case, gather_cases, scatter_cases

import rearr
from rearr.backends import backend_for

GATHER = "b t[idx: b k] c -> b k c"
SCATTER = "b k c -> b t[idx: b k] c"
ROWS = "v[src: e] c -> v[dst: e] c"  # message passing: a gather of rows, then a scatter of rows
REDUCTIONS = ("sum", "mean", "max", "min", "prod")

# What a call that fails at run time raises: jax's JaxRuntimeError, or a plain ValueError when the call
# went through jax's C++ fast dispatch path (a function called before); the message holds rearr's error.
RUNTIME = (jax.errors.JaxRuntimeError, ValueError)

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 8, 3)).astype(np.float32)
SRC = RNG.standard_normal((4, 5, 3)).astype(np.float32)
IDX = np.array([[0, 1, 7, -1, 2], [3, 3, 0, -8, 5], [7, 6, 5, 4, 3], [1, 1, 1, 1, 1]], np.int32)
UNIQUE = np.array([[0, 1, 7, -2, 2], [3, 4, 0, -7, 5], [7, 6, 5, 4, 3], [1, 2, 3, 4, 5]], np.int32)
V = RNG.standard_normal((6, 3)).astype(np.float32)
E_SRC, E_DST = np.array([0, 5, 2, 2, -1, 3], np.int32), np.array([1, 1, 0, 4, 5, -6], np.int32)


def runtime_error(match: str | None = None):
    return pytest.raises(RUNTIME, match=match)


def gather(x, idx, **kw):
    return rearr.rearrange(x, GATHER, idx=idx, **kw)


def scatter(s, idx, reduction="sum", **kw):
    return rearr.scatter(s, SCATTER, reduction, idx=idx, t=8, **kw)


def same(got, want) -> None:
    assert isinstance(got, jax.Array)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def bad(idx: np.ndarray, value: int = 9) -> np.ndarray:
    out = idx.copy()
    out[1, 2] = value
    return out


def test_jax_arrays_and_tracers_take_the_jax_backend() -> None:
    assert backend_for(jnp.zeros(2)).name == "jax"
    seen = []
    jax.jit(lambda t: seen.append(backend_for(t).name) or t)(jnp.zeros(2))
    jax.vmap(lambda t: seen.append(backend_for(t).name) or t)(jnp.zeros(2))
    assert seen == ["jax", "jax"]


def test_a_backend_first_made_under_jit_knows_the_array_type() -> None:
    """The backend of a process whose first rearr call is traced by jit: its TENSOR is jax's array, not
    jit's tracer (jnp.zeros under a trace is one), else an eager call later took an index committed to
    another mesh as no jax array and skipped the RA500 that refuses it."""
    from rearr.backends.jax import JaxBackend

    made = []
    jax.jit(lambda t: made.append(JaxBackend()) or t)(jnp.zeros(2))
    assert made[0].TENSOR is type(jnp.zeros(2))


# --- valid indices: eager, jit, vmap, grad == numpy ---------------------------------


@pytest.mark.parametrize("jit", [False, True])
def test_gather(jit: bool) -> None:
    f = jax.jit(gather) if jit else gather
    same(f(jnp.asarray(X), jnp.asarray(IDX)), gather(X, IDX.astype(np.intp)))


@pytest.mark.slow
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("reduction", [*REDUCTIONS, "set"])
def test_scatter(jit: bool, reduction: str) -> None:
    idx = UNIQUE if reduction == "set" else IDX
    f = jax.jit(scatter, static_argnums=2) if jit else scatter
    same(f(jnp.asarray(SRC), jnp.asarray(idx), reduction), scatter(SRC, idx.astype(np.intp), reduction))


@pytest.mark.slow
@pytest.mark.parametrize("reduction", [*REDUCTIONS, "set"])
def test_scatter_with_fill_and_into(reduction: str) -> None:
    idx = UNIQUE if reduction == "set" else IDX
    into = RNG.standard_normal((4, 8, 3)).astype(np.float32)
    want = scatter(SRC, idx.astype(np.intp), reduction, into=into)
    same(jax.jit(lambda s, i, b: scatter(s, i, reduction, into=b))(jnp.asarray(SRC), jnp.asarray(idx),
                                                                  jnp.asarray(into)), want)
    want = scatter(SRC, idx.astype(np.intp), reduction, fill=-3.0)
    same(jax.jit(lambda s, i: scatter(s, i, reduction, fill=-3.0))(jnp.asarray(SRC), jnp.asarray(idx)), want)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_message_passing_rows(reduction: str) -> None:
    want = rearr.scatter(V, ROWS, reduction, src=E_SRC.astype(np.intp), dst=E_DST.astype(np.intp))
    f = jax.jit(lambda v, s, d: rearr.scatter(v, ROWS, reduction, src=s, dst=d))
    same(f(jnp.asarray(V), jnp.asarray(E_SRC), jnp.asarray(E_DST)), want)


def test_vmap_over_x_over_the_index_and_both() -> None:
    xs, idxs = np.stack([X, X * 2, -X]), np.stack([IDX, UNIQUE, IDX[::-1]])
    want = [gather(xs[n], idxs[n].astype(np.intp)) for n in range(3)]
    over_x = jax.vmap(lambda x: gather(x, jnp.asarray(IDX)))(jnp.asarray(xs))
    same(over_x, np.stack([gather(xs[n], IDX.astype(np.intp)) for n in range(3)]))
    over_idx = jax.jit(jax.vmap(lambda i: gather(jnp.asarray(X), i)))(jnp.asarray(idxs))
    same(over_idx, np.stack([gather(X, idxs[n].astype(np.intp)) for n in range(3)]))
    both = jax.jit(jax.vmap(gather))(jnp.asarray(xs), jnp.asarray(idxs))
    same(both, np.stack(want))
    sums = jax.jit(jax.vmap(scatter))(jnp.asarray(np.stack([SRC] * 3)), jnp.asarray(idxs))
    same(sums, np.stack([scatter(SRC, idxs[n].astype(np.intp)) for n in range(3)]))


def test_vmap_checks_set_duplicates_per_example() -> None:
    """Two examples that write the same positions are fine; one example that writes one twice is not."""
    idxs = jnp.asarray(np.stack([UNIQUE, UNIQUE]))
    f = jax.jit(jax.vmap(lambda s, i: scatter(s, i, "set")))
    same(f(jnp.asarray(np.stack([SRC, SRC])), idxs), np.stack([scatter(SRC, UNIQUE.astype(np.intp), "set")] * 2))
    with runtime_error("writes the same position more than once"):
        f(jnp.asarray(np.stack([SRC, SRC])), jnp.asarray(np.stack([UNIQUE, IDX])))


def test_grad_through_gather_and_scatter_sum_under_jit() -> None:
    w = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    g = jax.jit(jax.grad(lambda x, i: (gather(x, i) * w).sum()))(jnp.asarray(X), jnp.asarray(IDX))
    same(g, scatter(w, IDX.astype(np.intp)))  # the gradient of a gather is the scatter-sum of the cotangent
    w8 = RNG.standard_normal((4, 8, 3)).astype(np.float32)
    h = jax.jit(jax.grad(lambda s, i: (scatter(s, i) * w8).sum()))(jnp.asarray(SRC), jnp.asarray(IDX))
    same(h, gather(w8, IDX.astype(np.intp)))  # and the other way round


# --- an out-of-range index under each mode ---------------------------------------------


def test_eager_out_of_range_is_numpys_error() -> None:
    with pytest.raises(rearr.RearrError) as want:
        gather(X, bad(IDX).astype(np.intp))
    with pytest.raises(rearr.RearrError) as got:
        gather(jnp.asarray(X), jnp.asarray(bad(IDX)))
    assert str(got.value) == str(want.value)
    assert got.value.code == "RA501" and got.value.col == GATHER.index("idx")
    assert "holds 9 at position (1, 2)" in got.value.message
    with pytest.raises(rearr.RearrError, match="holds -9 at position"):
        scatter(jnp.asarray(SRC), jnp.asarray(bad(IDX, -9)))
    with pytest.raises(rearr.RearrError, match="writes the same position more than once"):
        scatter(jnp.asarray(SRC), jnp.asarray(IDX), "set")


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_jit_out_of_range_fails_the_call_with_rearrs_message(op: str) -> None:
    f = jax.jit(gather if op == "gather" else scatter)
    x = jnp.asarray(X if op == "gather" else SRC)
    with runtime_error() as e:
        f(x, jnp.asarray(bad(IDX))).block_until_ready()
    assert not isinstance(e.value, rearr.RearrError)  # raised by jax, from the call, not while tracing
    text = str(e.value)
    assert "RA501: index 'idx' holds 9 at position (1, 2), outside axis 't' of length 8" in text
    assert "fix: index values must lie in -8 <= i < 8" in text
    f(x, jnp.asarray(IDX)).block_until_ready()  # the same compiled function, good values: no error


def test_jit_set_duplicates_fail_the_call() -> None:
    f = jax.jit(lambda s, i: scatter(s, i, "set"))
    with runtime_error("writes the same position more than once under 'set'"):
        f(jnp.asarray(SRC), jnp.asarray(IDX)).block_until_ready()


def test_vmap_out_of_range_fails_the_call() -> None:
    idxs = np.stack([IDX, bad(IDX, -20)])
    with runtime_error("holds -20 at position \\(1, 2\\)"):
        jax.jit(jax.vmap(lambda i: gather(jnp.asarray(X), i)))(jnp.asarray(idxs)).block_until_ready()


def test_checkify_wrapped_call_raises_the_same_error() -> None:
    """The check is a callback, not a checkify.check: a checkified function raises from the call too."""
    f = checkify.checkify(jax.jit(gather))
    err, out = f(jnp.asarray(X), jnp.asarray(IDX))
    assert err.get() is None
    same(out, gather(X, IDX.astype(np.intp)))
    with runtime_error("holds 9 at position \\(1, 2\\)"):
        f(jnp.asarray(X), jnp.asarray(bad(IDX)))


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_unchecked_call_under_checkify_index_checks(op: str) -> None:
    """check_bounds=False under checkify.checkify(errors=checkify.index_checks): jax's own check of the
    gather or scatter reports the value in the Error it returns (negative values are counted from the
    end before it)."""
    fn = gather if op == "gather" else scatter
    f = checkify.checkify(jax.jit(lambda x, i: fn(x, i, check_bounds=False)), errors=checkify.index_checks)
    x = jnp.asarray(X if op == "gather" else SRC)
    assert f(x, jnp.asarray(IDX))[0].get() is None
    err, _ = f(x, jnp.asarray(bad(IDX)))
    assert "index 9 is out of bounds for axis 1 with size 8" in err.get()
    with pytest.raises(checkify.JaxRuntimeError, match="index 9 is out of bounds"):
        err.throw()


def test_unchecked_out_of_range_has_jaxs_semantics() -> None:
    """check_bounds=False: a gather fills (NaN for floats, the least value for signed ints), a scatter
    drops the update; negative values count from the end, as jax's own indexing does."""
    for jit in (False, True):
        g = jax.jit(lambda x, i: gather(x, i, check_bounds=False)) if jit else \
            (lambda x, i: gather(x, i, check_bounds=False))
        out = np.asarray(g(jnp.asarray(X), jnp.asarray(bad(IDX))))
        assert np.isnan(out[1, 2]).all()
        np.testing.assert_array_equal(np.delete(out.reshape(20, 3), 7, 0),
                                      np.delete(gather(X, bad(IDX, 0).astype(np.intp)).reshape(20, 3), 7, 0))
        ints = np.asarray(gather(jnp.asarray(X.astype(np.int32)), jnp.asarray(bad(IDX)), check_bounds=False))
        assert (ints[1, 2] == np.iinfo(np.int32).min).all()
        s = jax.jit(lambda s, i: scatter(s, i, check_bounds=False)) if jit else \
            (lambda s, i: scatter(s, i, check_bounds=False))
        src = SRC.copy()
        src[1, 2] = 0  # the dropped update
        same(s(jnp.asarray(SRC), jnp.asarray(bad(IDX))), scatter(src, bad(IDX, 0).astype(np.intp)))


def test_constant_index_inside_jit_is_checked_at_trace_time() -> None:
    """An index with values (a constant closed over) gets numpy's error when jax traces."""
    constant = jnp.asarray(bad(IDX))
    with pytest.raises(rearr.RearrError, match="holds 9 at position"):
        jax.jit(lambda x: gather(x, constant))(jnp.asarray(X))


def test_lax_scan_checks_each_step() -> None:
    """Inside lax.scan the index of each step is traced: a good one runs, a bad one fails the call."""
    def step(carry, i):
        return carry + gather(jnp.asarray(X), i).sum(), None

    idxs = np.stack([IDX, UNIQUE])
    total, _ = jax.jit(lambda ii: jax.lax.scan(step, 0.0, ii))(jnp.asarray(idxs))
    np.testing.assert_allclose(float(total), sum(gather(X, i.astype(np.intp)).sum() for i in idxs), rtol=1e-5)
    with runtime_error("holds 9 at position \\(1, 2\\)"):
        jax.jit(lambda ii: jax.lax.scan(step, 0.0, ii))(jnp.asarray(np.stack([IDX, bad(IDX)])))[0].block_until_ready()


def test_fill_nan_is_one_program() -> None:
    """fill= is a static argument of the jitted program: a NaN (never equal to itself) finds the program
    compiled for it instead of compiling again on every call."""
    from rearr.backends import jax as backend

    assert backend._Static(float("nan")) == backend._Static(float("nan"))
    assert backend._Static(0) != backend._Static(0.0) and backend._Static(0) != backend._Static(False)
    out = scatter(jnp.asarray(SRC), jnp.asarray(IDX), "max", fill=float("nan"))
    same(out, scatter(SRC, IDX.astype(np.intp), "max", fill=float("nan")))


@pytest.mark.parametrize("dtype", ["float16", "int32", "uint8", "bool"])  # float32: the tests above
@pytest.mark.parametrize("reduction", [*REDUCTIONS, "set"])
@pytest.mark.parametrize("extra", ["plain", "fill", "into"])
@pytest.mark.parametrize("pattern", ["b k -> b t[idx: b k]", ROWS])
@pytest.mark.slow
def test_scatter_dtypes_agree_with_numpy(dtype: str, reduction: str, extra: str, pattern: str) -> None:
    """Every reduction on every kind of dtype, with fill= and into=: numpy's value and dtype, or the
    RearrError numpy gives (integer means, a fill the dtype cannot hold). Bools sum with or and
    multiply with and, as on numpy."""
    x = (np.arange(8).reshape(2, 4) % 3).astype(dtype)
    if pattern == ROWS:
        x = np.repeat(x.reshape(-1, 1)[:6], 2, axis=1)
        args = {"src": np.array([0, 2, 2, 1, 5]), "dst": np.array([1, 2, 0, 4, 3] if reduction == "set" else
                                                                 [1, 1, 0, 4, 4])}
    else:
        args = {"idx": np.array([[0, 2, 1, -1], [1, 2, 3, 0]] if reduction == "set" else [[0, 2, 2, -1], [1, 1, 3, 0]]),
                "t": 5}
    kw = {"plain": {}, "fill": {"fill": 2}}.get(extra)
    if kw is None:
        kw = {"into": np.ones(rearr.scatter(x, pattern, "sum", **args).shape, dtype)}
    try:
        want = rearr.scatter(x, pattern, reduction, **args, **kw)
    except rearr.RearrError as e:
        with pytest.raises(rearr.RearrError) as got:
            rearr.scatter(jnp.asarray(x), pattern, reduction, **_jax(args), **_jax(kw))
        assert got.value.code == e.code
        return
    got = rearr.scatter(jnp.asarray(x), pattern, reduction, **_jax(args), **_jax(kw))
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)


def _jax(kwargs: dict) -> dict:
    return {k: jnp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


# jax without x64 holds 32-bit numbers: the cases are drawn in dtypes that convert without a change.
_DTYPES = ("float32", "int32", "bool")


def _as_jax(a):
    return jnp.asarray(a.astype(np.int32) if a.dtype.kind in "iu" and a.ndim and a.dtype.itemsize == 8 else a)


def _run(case: Case, lib):
    x = [lib(t) for t in case.x] if case.as_list else lib(case.x)
    kw = {k: lib(v) if isinstance(v, np.ndarray) else v for k, v in case.ref_kwargs().items()}
    try:
        if case.op == "scatter":
            return rearr.scatter(x, case.pattern, case.reduction, **kw)
        return rearr.rearrange(x, case.pattern, **kw)
    except rearr.RearrError as e:
        return e


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(st.one_of(gather_cases(dtypes=_DTYPES), scatter_cases(dtypes=("float32", "int32"))))
def test_random_gathers_and_scatters_agree_with_numpy(case: Case) -> None:
    """The property tests' random gather and scatter calls (negative, duplicate and out-of-range values,
    fill=, into=, lists): jax gives numpy's value and dtype, or a RearrError of the same code."""
    want, got = _run(case, np.asarray), _run(case, _as_jax)
    if isinstance(want, rearr.RearrError):
        assert isinstance(got, rearr.RearrError) and got.code == want.code, (case.describe(), got)
        return
    assert not isinstance(got, Exception), (case.describe(), got)
    assert np.asarray(got).dtype == want.dtype.name.replace("64", "32") or np.asarray(got).dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=case.describe())


def test_a_gather_along_an_axis_keeps_the_index_at_its_own_shape() -> None:
    """The index of `b t[idx: b k] c -> b k c` reaches XLA's gather as (b, k, 1), not broadcast to
    (b, k, c): XLA then moves rows of c, not one element at a time."""
    from rearr.planning import planner
    from rearr.rules import recipe

    r = recipe.analyze(GATHER, "rearrange", None, ("idx",))
    assert [type(s).__name__ for s in planner.plan(r, X.shape, (), (("idx", IDX.shape),)).steps] == ["GatherAlong"]
    jaxpr = jax.make_jaxpr(lambda x, i: gather(x, i, check_bounds=False))(jnp.asarray(X), jnp.asarray(IDX))
    shapes = [tuple(e.invars[1].aval.shape) for e in _equations(jaxpr.jaxpr) if e.primitive.name == "gather"]
    assert shapes and all(3 not in s for s in shapes), shapes  # c = 3: no index axis of its length


def _equations(jaxpr):
    for e in jaxpr.eqns:
        yield e
        for sub in jax.extend.core.jaxprs_in_params(e.params):
            yield from _equations(sub)


def _primitives(jaxpr) -> list[str]:
    """The primitives of a jaxpr, those of nested jit programs inlined (a jit is no work of its own)."""
    out = []
    for e in jaxpr.eqns:
        inner = [getattr(v, "jaxpr", v) for v in e.params.values() if hasattr(v, "eqns") or hasattr(v, "jaxpr")]
        if e.primitive.name in ("jit", "pjit") and inner:
            out += [p for j in inner for p in _primitives(j)]
        else:
            out.append(e.primitive.name)
    return out


# The in-program check of a traced index (check_index): the range test and its reduction, the cond
# whose branch would call back to Python, and the wrap of negative values that reads the cond's result.
CHECK = ["lt", "ge", "or", "reduce_or", "convert_element_type", "cond", "lt", "add", "select_n"]


@pytest.mark.parametrize("size", [(2, 8, 4, 3), (32, 1024, 64, 256)])  # benchmarks/_training_jax.py's
def test_a_jitted_gather_is_the_hand_written_program_plus_the_check(size, monkeypatch):
    """Under jit rearr's Python runs at trace time only: what a call costs is its program. Without the
    check it has no more primitives than the same gather written in jnp (tiny: take_along_axis; at
    the medium size the plan moves whole rows, as a take of the flat rows by hand does), also on the
    first trace of a process (which looked up the index dtype with an arange, an op of the program),
    and the check adds exactly its own; compiled, the index does not pass through the cond (XLA copied
    it there)."""
    from collections import Counter

    from rearr.backends import _xp

    monkeypatch.setattr(_xp, "_INDEX_DTYPE", {})  # as on the first call of a process
    b, t, c, k = size
    x, idx = jnp.ones((b, t, c)), jnp.zeros((b, k), jnp.int32)
    rows = math.prod(size) >= 100_000

    def hand(x, i):
        if not rows:
            return jnp.take_along_axis(x, i[..., None], axis=1)
        flat = (i + jnp.arange(b)[:, None] * t).reshape(-1)
        return jnp.take(x.reshape(b * t, c), flat, axis=0).reshape(b, k, c)

    def traced(f):
        return _primitives(jax.make_jaxpr(f)(x, idx).jaxpr)

    off = traced(lambda x, i: rearr.rearrange(x, GATHER, idx=i, check_bounds=False))
    on = traced(lambda x, i: rearr.rearrange(x, GATHER, idx=i))
    assert len(off) <= len(traced(hand))
    assert Counter(on) - Counter(off) == Counter(CHECK) and len(on) == len(off) + len(CHECK)
    compiled = jax.jit(lambda x, i: rearr.rearrange(x, GATHER, idx=i)).lower(x, idx).compile().as_text()
    assert " copy(" not in compiled[compiled.index("ENTRY"):]


# --- traced indices that are easy to miss: 0-d, unsigned, read by no result -------------

X2 = np.arange(12.0, dtype=np.float32).reshape(3, 4)


def _eager_message(f, *args) -> str:
    with pytest.raises(rearr.RearrError) as e:
        f(*args)
    assert e.value.code == "RA501"
    return e.value.message


def _fails_as_eager(f, *args) -> None:
    """f under jax.jit fails the call with the message of its eager RearrError."""
    want = _eager_message(f, *args)
    with runtime_error() as e:
        jax.block_until_ready(jax.jit(f)(*args))
    assert want in str(e.value), (want, str(e.value)[:500])


@pytest.mark.slow
@pytest.mark.parametrize("value", [4, -5, 9])
def test_a_0d_traced_index_is_checked(value: int) -> None:
    """A 0-d index reaches the check's callback as one value, at position (), under jit, vmap and
    lax.scan; good values still run."""
    def row(x, i):
        return rearr.rearrange(x, "b n[i:] -> b", i=i)

    x = jnp.asarray(X2)
    assert f"holds {value} at position ()" in _eager_message(row, x, jnp.array(value))
    _fails_as_eager(row, x, jnp.array(value))
    same(jax.jit(row)(x, jnp.array(-1)), X2[:, 3])
    _fails_as_eager(lambda s, i: rearr.scatter(s, "b -> b n[i:]", "sum", i=i, n=4), jnp.ones(3), jnp.array(value))
    each = jax.vmap(lambda r, i: rearr.rearrange(r, "n[i:] ->", i=i))
    with runtime_error(f"holds {value} at position \\(\\)"):
        jax.block_until_ready(each(x, jnp.array([0, value, 0])))
    same(each(x, jnp.array([0, -1, 2])), [0.0, 7.0, 10.0])

    def step(carry, i):
        return carry + row(x, i).sum(), None

    with runtime_error(f"holds {value} at position \\(\\)"):
        jax.block_until_ready(jax.jit(lambda ii: jax.lax.scan(step, 0.0, ii))(jnp.array([1, value])))


@pytest.mark.slow
@pytest.mark.parametrize("value", [2**32 - 1, 2**31])
def test_a_traced_unsigned_index_is_refused_before_its_cast_wraps(value: int) -> None:
    """uint32 becomes int32 (jax without x64): under a trace the value is checked before the cast, and
    the error names it as passed, as the eager call does."""
    def gather1(x, i, **kw):
        return rearr.rearrange(x, "n[i: k] -> k", i=i, **kw)

    x, i = jnp.arange(4.0), jnp.array([0, value], jnp.uint32)
    assert f"holds {value} at position (1,), larger than any axis can be (2**31 - 1)" in _eager_message(gather1, x, i)
    _fails_as_eager(gather1, x, i)
    with runtime_error(f"holds {value} at position \\(1,\\)"):
        jax.block_until_ready(jax.vmap(lambda i: gather1(x, i))(jnp.stack([i, i[::-1]])))
    same(jax.jit(gather1)(x, jnp.array([3, 0], jnp.uint32)), [3.0, 0.0])
    with runtime_error("holds 4 at position \\(0,\\), outside axis 'n'"):  # in the int32 range: the range check
        jax.block_until_ready(jax.jit(gather1)(x, jnp.array([4, 0], jnp.uint32)))
    unchecked = jax.jit(lambda x, i: gather1(x, i, check_bounds=False))
    assert np.asarray(unchecked(x, jnp.array([3, 0], jnp.uint32))).tolist() == [3.0, 0.0]
    unchecked(x, i).block_until_ready()  # check_bounds=False promised the values: no error


# Calls whose result reads no index value (an empty result, or an axis of length 0): XLA drops what
# leads to the result, and the check's callback with it unless the check is kept by an effect.
# (pattern, reduction or None for a gather, lengths, x's shape, a bad index, a good one or None)
DROPPED = {
    "scatter into n=0": ("k c -> n[i: k] c", "sum", {"n": 0}, (1, 2), [0], None),
    "scatter 'set' into n=0": ("k c -> n[i: k] c", "set", {"n": 0}, (1, 2), [0], None),
    "scatter, c=0": ("k c -> n[i: k] c", "sum", {"n": 4}, (1, 0), [7], [3]),
    "scatter 'set', c=0": ("k c -> n[i: k] c", "set", {"n": 4}, (2, 0), [1, -5], [1, -1]),
    "scatter 'max' along, c=0": ("b k c -> b n[i: b k] c", "max", {"n": 4}, (2, 3, 0), [[0, 1, 2], [3, -5, 0]],
                                 [[0, 1, 2], [3, -4, 0]]),
    "gather from n=0": ("b n[i: b k] -> b k", None, {}, (2, 0), [[0], [0]], None),
    "gather rows from n=0": ("n[i: k] c -> k c", None, {}, (0, 3), [0, 0], None),
    "gather, c=0": ("b t[i: b k] c -> b k c", None, {}, (2, 8, 0), [[0, 9], [1, 2]], [[0, 7], [1, -8]]),
    "gather, b=0": ("b n[i: k] -> b k", None, {}, (0, 4), [9, 0], [3, -4]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", DROPPED)
def test_a_check_that_no_result_reads_still_fails_the_call(case: str) -> None:
    """The eager RearrError fails the jitted call too (under vmap as well); a good index still runs,
    and check_bounds=False stays unchecked."""
    pattern, reduction, lengths, shape, bad_idx, good_idx = DROPPED[case]

    def f(x, i, **kw):
        if reduction is None:
            return rearr.rearrange(x, pattern, i=i, **lengths, **kw)
        return rearr.scatter(x, pattern, reduction, i=i, **lengths, **kw)

    x, i = jnp.ones(shape), jnp.asarray(np.array(bad_idx, np.int32))
    _fails_as_eager(f, x, i)
    with runtime_error("RA501"):
        jax.block_until_ready(jax.jit(jax.vmap(f, in_axes=(None, 0)))(x, jnp.stack([i, i])))
    unchecked = jax.jit(lambda x, i: f(x, i, check_bounds=False))
    assert unchecked(x, i).shape == jax.eval_shape(f, x, i).shape  # check_bounds=False: no error
    assert "io_callback" not in str(jax.make_jaxpr(unchecked)(x, i))  # nor an effect
    if good_idx is not None:
        good, want = jnp.asarray(np.array(good_idx, np.int32)), f(np.ones(shape), np.array(good_idx))
        same(jax.jit(f)(x, good), want)
        same(f(x, good), want)


@pytest.mark.parametrize("call", ["gather", "scatter"])
def test_grad_of_a_checkpointed_call_with_an_empty_result(call):
    """An eager index is checked on the host: its program carries no effect, which jax.checkpoint's
    partial evaluation refuses (an empty result is where the traced checks need one)."""
    i = jnp.array([0, 1])
    if call == "gather":
        f, x = (lambda x: (rearr.rearrange(x, "n[ix: k] c -> k c", ix=i) ** 2).sum()), jnp.zeros((4, 0))
    else:
        f, x = (lambda x: (rearr.scatter(x, "e c -> n[i: e] c", "sum", i=i, n=4) ** 2).sum()), jnp.zeros((2, 0))
    assert jax.grad(jax.checkpoint(f))(x).shape == x.shape
    assert jax.jit(jax.grad(jax.checkpoint(f)))(x).shape == x.shape
