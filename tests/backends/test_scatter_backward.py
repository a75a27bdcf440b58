"""torch scatter lowerings and their gradients: the values of torch's own scatter_reduce (include_self=False
onto fill, or include_self=True onto into=) bitwise, gradcheck and gradgradcheck for every reduction on
both scatter steps (rows and along an axis), with and without into=, with fill, and torch's tie rule."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

import rearr  # noqa: E402

E, V, C = 12, 5, 3
REDUCTIONS = ("sum", "mean", "max", "min", "prod", "set")
NATIVE = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin", "prod": "prod"}
# Rows: a (E, C) source whose rows land on rows of (V, C); along: an index per element (scatter_reduce).
ROWS, ALONG = "e c -> v[dst: e] c", "e c -> v[dst] c"


def _steps(pattern: str, reduction: str) -> set[str]:
    dst = (E,) if pattern == ROWS else (E, C)
    plan = rearr.explain(pattern, (E, C), op="scatter", reduction=reduction, dst=dst, v=V).plan
    return {type(s).__name__ for s in plan.steps}


def _index(pattern: str, reduction: str, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if reduction == "set":  # unique along e, V - 1 of them: one row stays empty
        return torch.randperm(V, generator=g)[:V - 1] if pattern == ROWS else torch.stack(
            [torch.randperm(V, generator=g)[:V - 1] for _ in range(C)], 1)
    return torch.randint(0, V - 1, (E,) if pattern == ROWS else (E, C), generator=g)  # row V - 1 stays empty


def _n(reduction: str) -> int:
    """The number of source rows: E, or the V - 1 distinct places of 'set'."""
    return V - 1 if reduction == "set" else E


def _source(n: int, seed: int = 1, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, C, generator=g, dtype=torch.float64) + 0.5  # distinct, away from 0: no ties, no zeros
    return x.to(dtype).requires_grad_(dtype.is_floating_point)


def _hand(x, idx, reduction, fill=0, into=None):
    """Today's torch lowering, written by hand: scatter_reduce onto fill (include_self=False), or onto
    into= (include_self=True); index_copy / scatter for 'set'."""
    full = idx[:, None].expand(x.shape) if idx.dim() == 1 else idx
    rows = V if into is None else into.shape[0]
    if reduction == "set":
        base = x.new_full((rows, C), fill) if into is None else into
        return base.scatter(0, full, x)
    if into is None:
        return x.new_full((rows, C), fill).scatter_reduce(0, full, x, NATIVE[reduction], include_self=False)
    return into.scatter_reduce(0, full, x, NATIVE[reduction], include_self=True)


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_both_steps_are_covered(pattern, reduction, lowering):
    want = "ScatterRows" if pattern == ROWS and lowering == "rows" else "ScatterAlong"
    assert want in _steps(pattern, reduction)


CALLS = [(0, False), (-2.5, False), (0, True)]  # (fill, with into=)


def _call(pattern: str, reduction: str, fill: float, with_into: bool):
    """(f, its inputs, the hand-written f): the scatter of a source, onto fill or into a tensor."""
    idx = _index(pattern, reduction)
    x = _source(_n(reduction))
    if with_into:
        return ((lambda s, t: rearr.scatter(s, pattern, reduction, dst=idx, into=t)), (x, _source(V, seed=4)),
                lambda s, t: _hand(s, idx, reduction, into=t))
    return ((lambda s: rearr.scatter(s, pattern, reduction, dst=idx, v=V, fill=fill)), (x,),
            lambda s: _hand(s, idx, reduction, fill))


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("fill, with_into", CALLS)
def test_gradcheck_and_gradgradcheck(pattern, reduction, fill, with_into, lowering):
    f, inputs, _ = _call(pattern, reduction, fill, with_into)
    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("fill, with_into", CALLS)
def test_values_and_gradients_are_todays(pattern, reduction, fill, with_into, lowering):
    """Equal to the hand-written scatter_reduce bitwise, and so are the gradients (no ties here)."""
    f, inputs, hand = _call(pattern, reduction, fill, with_into)
    got, want = f(*inputs), hand(*inputs)
    assert torch.equal(got, want)
    w = torch.rand(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(2))
    for a, b in zip(torch.autograd.grad((got * w).sum(), inputs), torch.autograd.grad((want * w).sum(), inputs)):
        assert torch.equal(a, b)


DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "int8", "uint8", "int32", "int64", "bool")


def _values(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(n, C, generator=g) < 0.5
    if dtype.is_floating_point or dtype.is_complex:
        x = torch.randn(n, C, generator=g, dtype=torch.float64) * 3
        special = torch.rand(n, C, generator=g)
        x[special < 0.05] = float("nan")
        x[(special >= 0.05) & (special < 0.12)] = float("-inf")
        x[(special >= 0.12) & (special < 0.2)] = float("inf")
        x[(special >= 0.2) & (special < 0.3)] = 0.0
        return x.to(dtype)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, (n, C), generator=g, dtype=dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    return a.dtype == b.dtype and torch.equal(a.isnan() if a.is_floating_point() else a == a,
                                              b.isnan() if b.is_floating_point() else b == b) and \
        torch.equal(torch.where(a != a, 0, a), torch.where(b != b, 0, b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_every_dtype_keeps_its_values_nan_and_infinities_included(dtype, pattern, reduction, lowering):
    """NaN, -inf and +inf in the source, and many duplicates: a source of -inf under max is a value, not an
    empty place (it is not replaced by fill); integers, bools and the half types keep their values."""
    dtype = getattr(torch, dtype)
    complex_minmax = dtype.is_complex and reduction in ("max", "min")
    if reduction == "mean" and not (dtype.is_floating_point or dtype.is_complex) or complex_minmax:
        pytest.skip("refused by rearr.policy")
    # torch's scatter_reduce has no complex backward (sum with fill along an axis, prod); mean has one here
    differentiable = dtype.is_floating_point or dtype.is_complex and reduction in ("mean", "set")
    for seed, grad in itertools.product(range(3), (False, True) if differentiable else (False,)):
        idx = _index(pattern, reduction, seed)  # with grad: the lowerings of a recorded backward
        x = _values(dtype, _n(reduction), seed).requires_grad_(grad)
        for fill in (0, 1 if dtype == torch.bool else 2):
            assert _same(rearr.scatter(x, pattern, reduction, dst=idx, v=V, fill=fill).detach(),
                         _hand(x.detach(), idx, reduction, fill)), (seed, fill, grad)
        into = _values(dtype, V, seed + 10)
        assert _same(rearr.scatter(x, pattern, reduction, dst=idx, into=into).detach(),
                     _hand(x.detach(), idx, reduction, into=into)), (seed, grad)


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction, empty", [("max", float("-inf")), ("min", float("inf"))])
def test_an_infinite_source_is_not_an_empty_place(pattern, reduction, empty, lowering):
    idx = torch.tensor([0, 0, 2]) if pattern == ROWS else torch.tensor([[0], [0], [2]])
    x = torch.full((3, 1), empty)
    out = rearr.scatter(x, pattern if pattern == ROWS else "e c -> v[dst] c", reduction, dst=idx, v=4, fill=7.0)
    assert out[:, 0].tolist() == [empty, 7.0, empty, 7.0]


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("fill", [0.0, 1.0, 5.0])
def test_ties_share_the_gradient_and_fill_takes_no_part(pattern, reduction, fill, lowering):
    """torch's convention: the k sources that equal the result share its gradient, 1/k each. fill= is
    not one of them, whatever its value: torch's own scatter_reduce (include_self=False) onto fill
    counts fill as a tie when it equals the result, which gave each source 1/(k+1)."""
    idx = torch.tensor([0, 0, 0, 1, 2])
    idx = idx if pattern == ROWS else idx[:, None]
    x = torch.tensor([[1.0], [1.0], [-3.0 if reduction == "max" else 3.0], [1.0], [4.0]], requires_grad=True)
    out = rearr.scatter(x, pattern, reduction, dst=idx, v=4, fill=fill)
    assert out[:, 0].tolist() == [1.0, 1.0, 4.0, fill]
    (g,) = torch.autograd.grad(out.sum(), x)
    assert g[:, 0].tolist() == [0.5, 0.5, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
def test_a_tie_with_into_shares_the_gradient_with_into(pattern, lowering):
    """into= takes part in the reduction (include_self=True): a tie with into's value counts it once."""
    idx = torch.tensor([0, 0, 1])
    idx = idx if pattern == ROWS else idx[:, None]
    x = torch.tensor([[2.0], [2.0], [0.0]], dtype=torch.float64, requires_grad=True)
    into = torch.tensor([[2.0], [1.0]], dtype=torch.float64, requires_grad=True)
    out = rearr.scatter(x, pattern, "max", dst=idx, into=into)
    gx, gi = torch.autograd.grad(out.sum(), (x, into))
    assert out[:, 0].tolist() == [2.0, 1.0]
    assert gx[:, 0].tolist() == [1 / 3, 1 / 3, 0.0] and gi[:, 0].tolist() == [1 / 3, 1.0]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_message_passing_gradcheck(reduction, lowering):
    g = torch.Generator().manual_seed(3)
    x = torch.rand(V, C, generator=g, dtype=torch.float64, requires_grad=True)
    src = torch.randint(0, V, (E,), generator=g)
    dst = torch.randperm(V, generator=g)[:V - 1] if reduction == "set" else torch.randint(0, V - 1, (E,), generator=g)
    src = src[: len(dst)]
    if reduction in ("max", "min"):  # distinct gathered values: each edge its own source row
        x = torch.rand(E, C, generator=g, dtype=torch.float64, requires_grad=True)
        src = torch.randperm(E, generator=g)[: len(dst)]

    def f(t):
        return rearr.scatter(t, "v[src: e] c -> w[dst: e] c", reduction, src=src, dst=dst, w=V)

    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_a_row_scatter_sum_does_not_keep_its_source_for_the_backward(reduction, lowering):
    """A source made on the way (message passing's gathered rows) is freed once the forward is done:
    torch's index_add saves it for its backward, which nearly doubled a training step's peak memory."""
    import weakref

    h = torch.rand(E, C, dtype=torch.float64, requires_grad=True)
    m = h * 2
    kept = weakref.ref(m)
    out = rearr.scatter(m, ROWS, reduction, dst=_index(ROWS, reduction), v=V)
    del m
    if lowering == "rows":
        assert kept() is None
    (g,) = torch.autograd.grad(out.sum(), h)
    assert g.shape == h.shape


@pytest.mark.parametrize("idx, n", [([1, 0, 1], 3), ([50, 7, 50], 100), ([2, 0, 2], 3)])
@pytest.mark.parametrize("check_bounds", [True, False])
def test_duplicates_under_set_are_refused_when_counted_and_when_sorted(idx, n, check_bounds, lowering):
    """A 1-d index is checked by counting its values where they lie in 0 <= i < 2 * len, else sorted."""
    x = torch.rand(3, C)
    with pytest.raises(rearr.RearrError, match="more than once under 'set'"):
        rearr.scatter(x, ROWS, "set", dst=torch.tensor(idx), v=n, check_bounds=check_bounds)
    unique = torch.tensor([idx[0], idx[1], n - 1 if idx[0] != n - 1 else n - 2])
    out = rearr.scatter(x, ROWS, "set", dst=unique, v=n, check_bounds=check_bounds)
    assert torch.equal(out, x.new_zeros(n, C).index_copy_(0, unique, x))


INF, NAN = float("inf"), float("nan")
# Sources per place (three sources each, then places 4 and 5 that nothing reaches): ties of finite
# values, every source the reduction's infinity, the other infinity, a NaN among values, no tie.
EXTREME_GROUPS = {
    "max": [[2.0, 2.0, 1.0], [-INF, -INF, -INF], [INF, 1.0, INF], [NAN, 3.0, 3.0]],
    "min": [[1.0, 1.0, 2.0], [INF, INF, INF], [-INF, 1.0, -INF], [2.0, NAN, 2.0]],
}
EXTREME_FILLS = [0.0, 2.0, -INF, INF, NAN]  # 2.0 equals the max of place 0: fill is no tie


def _extreme_call(pattern: str, reduction: str):
    """A (12, 2) source of the groups above (the second column shifted), its index, and V = 6."""
    col = torch.tensor([v for group in EXTREME_GROUPS[reduction] for v in group], dtype=torch.float64)
    x = torch.stack([col, torch.where(col.isfinite(), col + 1, col)], 1)
    dst = torch.arange(4).repeat_interleave(3)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(5))  # the sources in any order
    x, dst = x[perm], dst[perm]
    return x, dst if pattern == ROWS else dst[:, None].expand(12, 2), 6


def _torchs_gradient(x: torch.Tensor, dst: torch.Tensor, reduction: str, g: torch.Tensor) -> torch.Tensor:
    """torch's scatter_reduce with include_self=False onto a base that never equals a result (NaN): its
    backward splits a place's gradient among the sources equal to the result (NaN where that is NaN)."""
    x = x.detach().requires_grad_()
    full = dst[:, None].expand(x.shape) if dst.dim() == 1 else dst
    out = torch.full(g.shape, NAN, dtype=x.dtype).scatter_reduce(0, full, x, NATIVE[reduction], include_self=False)
    return torch.autograd.grad(out, x, g)[0]


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("fill", EXTREME_FILLS)
def test_max_min_gradients_are_torchs_for_ties_infinities_nan_and_empty_places(pattern, reduction, fill, lowering):
    """Bitwise torch's gradient (include_self=False, a base that takes no part), also where every source
    of a place is the reduction's infinity: before, those got 1/(k+1) each, the infinity the lowering
    starts from counted as one more tie."""
    x, dst, v = _extreme_call(pattern, reduction)
    g = torch.rand(v, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(6)) + 0.5
    src = x.clone().requires_grad_()
    out = rearr.scatter(src, pattern, reduction, dst=dst, v=v, fill=fill)
    (got,) = torch.autograd.grad(out, src, g)
    want = _torchs_gradient(x, dst, reduction, g)
    assert _same(got, want)
    assert _same(out.detach()[4:], torch.full((2, 2), fill, dtype=torch.float64))  # empty places hold fill
    infinite = (x == (-INF if reduction == "max" else INF)).all(1) & (dst if dst.dim() == 1 else dst[:, 0]).eq(1)
    assert torch.equal(got[infinite], g[1].expand(3, 2) / 3)  # three sources of -inf (+inf) share 1/3 each


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_max_min_gradients_of_an_infinite_place_under_vmap_and_compile(pattern, reduction, lowering):
    """The same gradients through torch.func.grad under vmap (index batched too) and torch.compile."""
    x, dst, v = _extreme_call(pattern, reduction)
    xs, dsts = torch.stack([x, x.flip(0)]), torch.stack([dst, dst.flip(0)])
    g = torch.ones(v, 2, dtype=torch.float64)

    def f(s, d):
        return rearr.scatter(s, pattern, reduction, dst=d, v=v).sum()

    got = torch.func.vmap(torch.func.grad(f))(xs, dsts)
    for k in range(2):
        assert _same(got[k], _torchs_gradient(xs[k], dsts[k], reduction, g))
    compiled = torch.compile(lambda s: rearr.scatter(s, pattern, reduction, dst=dst, v=v), backend="aot_eager",
                             fullgraph=True)
    src = x.clone().requires_grad_()
    assert _same(torch.autograd.grad(compiled(src), src, g)[0], _torchs_gradient(x, dst, reduction, g))


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("fill", [0.0, 2.0])
def test_max_min_gradgradcheck_with_empty_places_and_fill(pattern, reduction, fill, lowering):
    """Differentiable again where the derivative is defined (no ties, finite sources), with two empty
    places: their share in the backward stays finite."""
    g = torch.Generator().manual_seed(7)
    x = (torch.rand(12, 2, generator=g, dtype=torch.float64) + 0.5).requires_grad_()
    dst = torch.randint(0, 4, (12,), generator=g)
    dst = dst if pattern == ROWS else dst[:, None].expand(12, 2)

    def f(s):
        return rearr.scatter(s, pattern, reduction, dst=dst, v=6, fill=fill)

    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


def _torchs_scatter(x: torch.Tensor, dst: torch.Tensor, reduction: str, v: int, fill: float) -> torch.Tensor:
    """torch's include_self=False onto a base that takes no part (NaN), then fill where nothing lands."""
    full = dst[:, None].expand(x.shape) if dst.dim() == 1 else dst
    out = torch.full((v, x.shape[1]), NAN, dtype=x.dtype).scatter_reduce(0, full, x, NATIVE[reduction],
                                                                          include_self=False)
    hit = torch.zeros(v, x.shape[1], dtype=torch.bool).scatter(0, full, True)
    return out.masked_fill(~hit, fill)


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("fill", [0.0, NAN])
def test_max_min_forward_mode_is_torchs_on_a_source_that_requires_grad(pattern, reduction, fill, lowering):
    """Forward-mode AD through the lowering of a source that records a backward (forward-over-reverse
    Hessians need it): the tangent of the places' results, as torch's, ties, infinities and NaN included."""
    import torch.autograd.forward_ad as fwad

    x, dst, v = _extreme_call(pattern, reduction)
    t = torch.rand(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    with fwad.dual_level():
        got = fwad.unpack_dual(rearr.scatter(fwad.make_dual(x.clone().requires_grad_(), t), pattern, reduction,
                                             dst=dst, v=v, fill=fill)).tangent
        want = fwad.unpack_dual(_torchs_scatter(fwad.make_dual(x.clone().requires_grad_(), t), dst, reduction, v,
                                                fill)).tangent
    assert _same(got, want)


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_max_min_hessian_forward_over_reverse_is_torchs(pattern, reduction, lowering):
    x, dst, v = _extreme_call(pattern, reduction)
    x = torch.where(x.isfinite(), x, 0.5)  # a Hessian of squares: finite values, ties kept

    def ours(s):
        return (rearr.scatter(s, pattern, reduction, dst=dst, v=v) ** 2).sum()

    def torchs(s):
        return (_torchs_scatter(s, dst, reduction, v, 0.0) ** 2).sum()

    hessian = torch.func.jacfwd(torch.func.jacrev(ours))(x)
    assert _same(hessian, torch.func.jacfwd(torch.func.jacrev(torchs))(x))
    assert _same(torch.func.jvp(torch.func.grad(ours), (x,), (torch.ones_like(x),))[1],
                 torch.func.jvp(torch.func.grad(torchs), (x,), (torch.ones_like(x),))[1])


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("with_into", [False, True])
def test_a_row_scatter_sum_has_forward_mode_for_hessians(reduction, with_into, lowering):
    """The row sum's own autograd function (under sum and mean) has forward mode too: a Hessian by
    forward-over-reverse, and a jvp through a source that requires grad, equal torch's index_add."""
    import torch.autograd.forward_ad as fwad

    g = torch.Generator().manual_seed(9)
    x, into = torch.rand(E, C, generator=g, dtype=torch.float64), torch.rand(V, C, generator=g, dtype=torch.float64)
    dst = _index(ROWS, reduction)

    def ours(s, t):
        kw = {"into": t} if with_into else {"v": V}
        return rearr.scatter(s, ROWS, reduction, dst=dst, **kw)

    def torchs(s, t):
        out = (t if with_into else s.new_zeros(V, C)).index_add(0, dst, s)
        if reduction == "mean":
            counts = torch.bincount(dst, minlength=V).to(s.dtype)[:, None] + with_into
            out = out / counts.clamp(min=1)
        return out

    def squares(f):
        return lambda s, t: (f(s, t) ** 2).sum()

    for argnums in ((0,), (0, 1)) if with_into else ((0,),):
        want = torch.func.jacfwd(torch.func.jacrev(squares(torchs), argnums), argnums)(x, into)
        got = torch.func.jacfwd(torch.func.jacrev(squares(ours), argnums), argnums)(x, into)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    t = torch.rand(E, C, generator=g, dtype=torch.float64)
    with fwad.dual_level():
        got = fwad.unpack_dual(ours(fwad.make_dual(x.clone().requires_grad_(), t), into)).tangent
        want = fwad.unpack_dual(torchs(fwad.make_dual(x.clone().requires_grad_(), t), into)).tangent
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "min", "set"])
def test_vmap_of_grad_with_a_shared_source_and_batched_indexes(pattern, reduction, lowering):
    """torch.func.vmap(torch.func.grad(f), in_dims=(None, 0)): the source is shared (wrapped by grad
    only), the index batched; each example's gradient is the gradient of its own call. (prod: torch's
    own backward of scatter_reduce reads a value under vmap, which vmap refuses.)"""
    x = _source(_n(reduction))
    indexes = torch.stack([_index(pattern, reduction, seed) for seed in range(3)])

    def f(s, i):
        return (rearr.scatter(s, pattern, reduction, dst=i, v=V) ** 2).sum()

    got = torch.func.vmap(torch.func.grad(f), in_dims=(None, 0))(x.detach(), indexes)
    for k in range(3):
        want = torch.func.grad(f)(x.detach(), indexes[k])
        torch.testing.assert_close(got[k], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pattern", [ROWS, ALONG])
@pytest.mark.parametrize("with_into", [False, True])
def test_prod_under_forward_mode_is_refused_and_reverse_mode_is_right(pattern, with_into, lowering):
    """torch's scatter_reduce 'prod' has a zero tangent: jvp, jacfwd, a forward-over-reverse Hessian and
    forward_ad are refused with RA500 (not a zero returned); the fix the error names, reverse mode, gives
    the true derivatives (here against the product of the other sources of each place, by hand)."""
    import torch.autograd.forward_ad as fwad

    idx = _index(pattern, "prod")
    x = _source(E).detach()
    into = _source(V, seed=4).detach() if with_into else None

    def f(s):
        return rearr.scatter(s, pattern, "prod", dst=idx, **({"into": into} if with_into else {"v": V}))

    def square(s):
        return (f(s) ** 2).sum()

    t = torch.ones_like(x)
    for refused in (lambda: torch.func.jvp(f, (x,), (t,)), lambda: torch.func.jacfwd(f)(x),
                    lambda: torch.func.jacfwd(torch.func.jacrev(square))(x)):
        with pytest.raises(rearr.RearrError, match="RA500: forward-mode AD through a 'prod' scatter") as info:
            refused()
        assert "jacrev" in info.value.hint
    with fwad.dual_level(), pytest.raises(rearr.RearrError, match="RA500"):
        f(fwad.make_dual(x, t))
    jacobian = torch.func.jacrev(f)(x)  # d out[p, c] / d x[e, c] = the product of the others at p
    full = idx[:, None].expand(x.shape) if idx.dim() == 1 else idx
    for e, c in itertools.product(range(E), range(C)):
        p = int(full[e, c])
        others = x[:, c][(full[:, c] == p) & (torch.arange(E) != e)].prod()
        others = others * (into[p, c] if with_into else 1)
        assert torch.isclose(jacobian[p, c, e, c], others, rtol=1e-12)
    hessian = torch.func.jacrev(torch.func.jacrev(square))(x)
    torch.testing.assert_close(hessian, torch.autograd.functional.hessian(square, x), rtol=1e-10, atol=1e-10)


def test_a_prod_scatter_of_constants_under_forward_mode_is_not_refused(lowering):
    """Only a source (or into=) that carries a tangent is refused: a prod of constants inside jvp has
    the right (zero) tangent, and a dual level with nothing dual in it refuses nothing."""
    import torch.autograd.forward_ad as fwad

    idx, const = _index(ROWS, "prod"), _source(E).detach()
    want = _hand(const, idx, "prod")

    def f(s):
        return s.sum() + rearr.scatter(const, ROWS, "prod", dst=idx, v=V).sum()

    s = torch.rand(3, dtype=torch.float64)
    value, tangent = torch.func.jvp(f, (s,), (torch.ones_like(s),))
    torch.testing.assert_close(value, s.sum() + want.sum())
    torch.testing.assert_close(tangent, torch.tensor(3.0, dtype=torch.float64))
    with fwad.dual_level():
        assert torch.equal(rearr.scatter(const, ROWS, "prod", dst=idx, v=V), want)
        with pytest.raises(rearr.RearrError, match="RA500"):  # a dual into= carries one
            rearr.scatter(const, ROWS, "prod", dst=idx, into=fwad.make_dual(const[:V].clone(), torch.ones(V, C,
                                                                                                   dtype=torch.float64)))
