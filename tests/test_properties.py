"""Property tests: rearr on numpy == rearr on torch == the reference interpreter,
and == einops wherever einops takes the pattern (no brackets).

Every property also checks that no input (the tensor, a list of tensors, the
index tensors, into=) is modified, on both backends.  Strategies draw only
valid patterns; where the reference finds the *call* invalid (an index value
out of range, duplicates under 'set', an integer mean), rearr must raise
RearrError on both backends.

Quick by default; ``--hypothesis-profile=long`` runs 10,000 examples each.
"""

from __future__ import annotations

import contextlib
import threading

import einops
import numpy as np
import pytest
import torch
from hypothesis import event, given, note
from hypothesis import strategies as st
from reference import RefInvalid, assert_matches, reference, to_numpy
from strategies import Case, gather_cases, scatter_cases, transform_cases

import rearr
from rearr import RearrError
from rearr.syntax import ir
from rearr.syntax.parser import parse

BACKENDS = ("numpy", "torch")


def _snapshot(value: object) -> object:
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _same(a: object, b: object) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


def call_rearr(case: Case, backend: str, reduction: object = None, **extra: object) -> object:
    """Run the case through rearr; return the result or the RearrError.  Asserts
    that the call left every input as it was."""
    x, kw = case.inputs(backend)
    kw.update(extra)
    before_x, before_kw = _snapshot(x), {k: _snapshot(v) for k, v in kw.items()}
    reduction = case.reduction if reduction is None else reduction
    try:
        if case.op == "reduce":
            out = rearr.reduce(x, case.pattern, reduction, **kw)
        elif case.op == "scatter":
            out = rearr.scatter(x, case.pattern, reduction, **kw)
        else:
            out = getattr(rearr, case.op)(x, case.pattern, **kw)
    except RearrError as e:
        out = e
    assert _same(x, before_x), f"{backend}: the input tensor was modified by {case.describe()}"
    for k, v in kw.items():
        assert _same(v, before_kw[k]), f"{backend}: keyword {k}= was modified by {case.describe()}"
    return out


def _expected(case: Case) -> np.ndarray | RefInvalid:
    x, _ = case.inputs("numpy")
    try:
        return reference(case.op, x, case.pattern, case.reduction, **case.ref_kwargs())
    except RefInvalid as e:
        return e


def _np_dtype(result: object) -> np.dtype:
    return to_numpy(result).dtype


def reduces_nothing(case: Case) -> bool:
    """A reduce whose output keeps every input axis (einops then skips the reduction, while rearr
    applies the reduction's dtype rule as numpy's axis=() does: any/all give bools)."""
    if case.op != "reduce":
        return False
    pat = parse(case.pattern)

    def axes(operand) -> tuple[set, bool]:
        names, ell = set(), False
        for dim in operand.dims:
            for item in dim.items if isinstance(dim, ir.Group) else (dim,):
                if isinstance(item, ir.Axis):
                    names.add(item.name)
                elif isinstance(item, ir.Anon) and item.value > 1:
                    names.add(f"#{item.col}")  # an anonymous axis on the input is always reduced
                elif isinstance(item, ir.Ellipsis):
                    ell = True
        return names, ell

    (ins, ell_in), (outs, ell_out) = axes(pat.inputs[0]), axes(pat.outputs[0])
    n_ell = case.x.ndim - sum(
        0 if isinstance(d, ir.Ellipsis) else 1 for d in pat.inputs[0].dims)
    return ins <= outs and (ell_out or not ell_in or n_ell == 0)


def check_case(case: Case) -> dict[str, object]:
    """The property itself; returns the backend results for further checks."""
    note(case.describe())
    expected = _expected(case)
    event("invalid call: RearrError expected" if isinstance(expected, RefInvalid) else "valid call")
    results = {}
    for backend in BACKENDS:
        got = call_rearr(case, backend)
        results[backend] = got
        if isinstance(expected, RefInvalid):
            assert isinstance(got, RearrError), (
                f"{backend}: expected a RearrError ({expected}), got {type(got).__name__} for {case.describe()}")
            assert got.code.startswith("RA"), got
            continue
        if isinstance(got, RearrError):
            raise AssertionError(f"{backend}: unexpected RearrError for {case.describe()}:\n{got}")
        if backend == "torch":
            assert isinstance(got, torch.Tensor), type(got)
        else:
            assert isinstance(got, (np.ndarray, np.generic)), type(got)
        assert_matches(got, expected, what=f"{backend}: {case.describe()}")
        if case.op in ("rearrange", "repeat") or (case.op == "scatter"):
            assert _np_dtype(got) == case.x.dtype, f"{backend}: dtype {_np_dtype(got)} for {case.x.dtype} input"
    if not isinstance(expected, RefInvalid):
        assert _np_dtype(results["numpy"]) == _np_dtype(results["torch"]), (
            f"numpy gives {_np_dtype(results['numpy'])}, torch {_np_dtype(results['torch'])}: {case.describe()}")
    return results


def _einops(case: Case) -> object:
    x, kw = case.inputs("numpy")
    if case.op == "reduce":
        return einops.reduce(x, case.pattern, case.reduction, **kw)
    return getattr(einops, case.op)(x, case.pattern, **kw)


@given(transform_cases())
def test_rearrange_reduce_repeat(case):
    results = check_case(case)
    if not case.einops_ok or isinstance(results["numpy"], RearrError):
        return
    got = _einops(case)
    if reduces_nothing(case):  # einops skips the reduction there; rearr applies its dtype rule (as numpy)
        got = getattr(np, case.reduction)(np.asarray(got), axis=()) if isinstance(case.reduction, str) else got
    assert_matches(results["numpy"], to_numpy(got), what=f"einops: {case.describe()}")


def check_unchecked(case: Case, results: dict[str, object]) -> None:
    """check_bounds=False: the same answer wherever every index value is in 0 <= i < n."""
    if isinstance(results["numpy"], RearrError):
        return
    if any(isinstance(v, np.ndarray) and (v < 0).any() for v in case.kwargs.values()):
        return  # without the check, negative values are not counted from the end
    event("check_bounds=False compared")
    for backend in BACKENDS:
        got = call_rearr(case, backend, check_bounds=False)
        assert not isinstance(got, RearrError), f"{backend} check_bounds=False: {got}"
        assert_matches(got, to_numpy(results[backend]), what=f"{backend} check_bounds=False: {case.describe()}")


@given(gather_cases())
def test_gather(case):
    check_unchecked(case, check_case(case))


@given(scatter_cases())
def test_scatter(case):
    check_unchecked(case, check_case(case))


@contextlib.contextmanager
def rows_lowering_always():
    """Make the planner choose its row lowering (index_select / index_add on a (rows, width)
    view) for every size: it is otherwise taken only for tensors of ROWS_MIN_ELEMENTS or
    more, which the strategies' tiny tensors never reach.  The plan caches are cleared on
    the way in and out, so no plan of the other lowering is reused."""
    import rearr.planning.planner
    import rearr.run.cache

    assert hasattr(rearr.planning.planner, "ROWS_MIN_ELEMENTS"), \
        "the planner's size threshold was renamed: update this test"
    saved = rearr.planning.planner.ROWS_MIN_ELEMENTS
    with _PLANNER_LOCK:
        for f in rearr.run.cache.CACHES:
            f.cache_clear()
        rearr.planning.planner.ROWS_MIN_ELEMENTS = 0
        try:
            yield
        finally:
            rearr.planning.planner.ROWS_MIN_ELEMENTS = saved
            for f in rearr.run.cache.CACHES:
                f.cache_clear()


_PLANNER_LOCK = threading.Lock()


@given(st.one_of(gather_cases(), scatter_cases()))
def test_gather_scatter_with_the_row_lowering(case):
    """The lowering chosen by size never changes the answer."""
    with rows_lowering_always():
        check_unchecked(case, check_case(case))


def _sum_numpy(t, axes):
    return np.sum(t, axis=tuple(axes))


def _sum_torch(t, axes):
    return torch.sum(t, dim=tuple(axes)) if len(axes) else t


@given(transform_cases(ops=("reduce",), dtypes=("float64", "float32")))
def test_reduce_callable(case):
    """A callable reduction f(x, axes) gets the backend's tensor and the reduced axes."""
    expected = reference("reduce", case.inputs("numpy")[0], case.pattern, "sum", **case.kwargs)
    for backend, f in (("numpy", _sum_numpy), ("torch", _sum_torch)):
        got = call_rearr(case, backend, reduction=f)
        assert not isinstance(got, RearrError), got
        assert_matches(got, expected, what=f"{backend}: {case.describe()}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_property_harness_sees_modification(backend):
    """The harness itself: a call that writes into its input is caught."""
    case = Case("rearrange", "a b -> b a", np.arange(6.0).reshape(2, 3))
    x, _ = case.inputs(backend)
    before = _snapshot(x)
    x[0, 0] = 99
    assert not _same(x, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_big_tensors_real_row_lowering(backend):
    """Tensors past the planner's size threshold, without any patching: gather and scatter
    against hand-written numpy."""
    rng = np.random.default_rng(7)
    conv = (lambda a: a) if backend == "numpy" else (lambda a: torch.from_numpy(a.copy()))
    x = rng.standard_normal((4, 50, 256))
    i = rng.integers(-50, 50, size=(4, 30))
    got = rearr.rearrange(conv(x), "b n[i: b k] c -> b k c", i=conv(i))
    expected = np.take_along_axis(x, (i % 50)[:, :, None], axis=1)
    np.testing.assert_array_equal(to_numpy(got), expected)
    src = rng.standard_normal((4, 30, 256))
    for reduction, ufunc, start in (("sum", np.add, 0.0), ("max", np.maximum, -np.inf), ("min", np.minimum, np.inf)):
        got = rearr.scatter(conv(src), "b k c -> b n[i: b k] c", reduction, i=conv(i), n=50)
        expected = np.full((4, 50, 256), start)
        ufunc.at(expected, (np.arange(4)[:, None], i % 50), src)
        expected[np.isinf(expected)] = 0.0  # positions that receive nothing hold fill=0
        np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-12, atol=1e-12)
