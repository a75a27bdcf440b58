"""rearrange / reduce / repeat against einops (the oracle), on both backends."""

from __future__ import annotations

import subprocess
import sys

import einops
import numpy as np
import pytest
import torch
from _backends import backends, shares_memory, to_backend, to_numpy

import rearr

# (pattern, shape, lengths)
REARRANGE = [
    ("c b h -> b (c h)", (2, 5, 32), {}),
    ("a b c -> (b a c)", (2, 3, 4), {}),
    ("a b c -> c b a", (2, 3, 4), {}),
    ("a b c -> a (b c)", (2, 3, 4), {}),
    ("a (b c) -> a b c", (2, 12), {"b": 3}),
    ("a (b c) -> a c b", (2, 12), {"c": 4}),
    ("(a b) c -> b (c a)", (6, 4), {"a": 2}),
    ("b h w c -> b c h w", (2, 3, 4, 5), {}),
    ("b (h w) c -> b c (h w)", (2, 12, 5), {"h": 3}),
    ("b (h p1) (w p2) c -> b (h w) (p1 p2 c)", (2, 6, 8, 3), {"p1": 2, "p2": 2}),
    ("... c -> c ...", (2, 3, 4), {}),
    ("... -> ...", (2, 3), {}),
    ("b ... c -> b c ...", (2, 3, 4, 5), {}),
    ("b ... c -> b (...) c", (2, 3, 4, 5), {}),
    ("b ... c -> (b ...) c", (2, 3, 4, 5), {}),
    ("... -> (...)", (2, 3, 4), {}),
    ("b c -> b c 1", (2, 3), {}),
    ("b c -> b () c ()", (2, 3), {}),
    ("b 1 c -> b c", (2, 1, 3), {}),
    ("b () c -> c b", (2, 1, 3), {}),
    ("(b 1) c -> c b", (2, 3), {}),
    ("a b -> (b a) ()", (3, 4), {}),
    ("x -> x", (7,), {}),
    (" -> ", (), {}),
    ("a b c d e -> e (d c) (b a)", (1, 2, 3, 2, 1), {}),
    ("b h w -> b h w", (0, 3, 4), {}),
    ("b (h w) -> b h w", (0, 12), {"h": 3}),
]

REDUCE = [
    ("b c h w -> b c", (2, 3, 4, 5), {}),
    ("b c h w -> c", (2, 3, 4, 5), {}),
    ("b c h w -> b h w c", (2, 3, 4, 5), {}),
    ("b (h 2) (w 2) c -> b h w c", (2, 4, 6, 3), {}),
    ("b (h h2) (w w2) c -> h (b w) c", (2, 4, 6, 3), {"h2": 2, "w2": 3}),
    ("b c ... -> b c", (2, 3, 4, 5), {}),
    ("... c -> c", (2, 3, 4), {}),
    ("a b -> ", (3, 4), {}),
    ("a b -> () ()", (3, 4), {}),
    ("a b -> a 1", (3, 4), {}),
    ("a b c -> b", (3, 4, 5), {}),
]

REPEAT = [
    ("h w -> h w c", (2, 3), {"c": 4}),
    ("h w -> c h w", (2, 3), {"c": 4}),
    ("h w -> (h 2) w", (2, 3), {}),
    ("h w -> h (w 3)", (2, 3), {}),
    ("h w -> (repeat h) w", (2, 3), {"repeat": 2}),
    ("h w -> h (w c)", (2, 3), {"c": 2}),
    ("... -> 2 ...", (2, 3), {}),
    ("b c -> b c ()", (2, 3), {}),
    ("b -> b r s", (2,), {"r": 2, "s": 3}),
    (" -> a b", (), {"a": 2, "b": 3}),
]

REDUCTIONS = ["min", "max", "sum", "mean", "prod", "any", "all"]


def _data(shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    return np.asarray(rng.random(shape) * 10 - 3).astype(dtype)


@backends
@pytest.mark.parametrize("pattern, shape, lengths", REARRANGE)
def test_rearrange_matches_einops(backend, pattern, shape, lengths):
    x = _data(shape)
    expected = einops.rearrange(x, pattern, **lengths)
    got = rearr.rearrange(to_backend(x, backend), pattern, **lengths)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(to_numpy(got), expected)


@backends
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("pattern, shape, lengths", REDUCE)
def test_reduce_matches_einops(backend, pattern, shape, lengths, reduction):
    x = _data(shape, np.bool_ if reduction in ("any", "all") else np.float64)
    expected = einops.reduce(x, pattern, reduction, **lengths)
    got = rearr.reduce(to_backend(x, backend), pattern, reduction, **lengths)
    np.testing.assert_allclose(to_numpy(got), expected)


@backends
@pytest.mark.parametrize("pattern, shape, lengths", REPEAT)
def test_repeat_matches_einops(backend, pattern, shape, lengths):
    x = _data(shape)
    expected = einops.repeat(x, pattern, **lengths)
    got = rearr.repeat(to_backend(x, backend), pattern, **lengths)
    np.testing.assert_array_equal(to_numpy(got), expected)


@backends
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("reduction", ["min", "max", "sum", "prod", "any", "all"])
def test_integer_and_bool_reductions_agree(backend, dtype, reduction):
    x = _data((3, 4, 5), dtype)
    got = to_numpy(rearr.reduce(to_backend(x, backend), "a b c -> a c", reduction))
    expected = einops.reduce(x, "a b c -> a c", reduction)
    np.testing.assert_array_equal(got, expected)


@backends
@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_integer_mean_is_an_error_on_both_backends(backend, dtype):
    x = to_backend(_data((3, 4), dtype), backend)
    with pytest.raises(rearr.RearrError, match="cast to a floating dtype"):
        rearr.reduce(x, "a b -> a", "mean")


@backends
def test_callable_reduction(backend):
    x = _data((2, 3, 4))
    fn = (lambda t, axes: t.amax(dim=axes)) if backend == "torch" else (lambda t, axes: t.max(axis=axes))
    got = rearr.reduce(to_backend(x, backend), "a b c -> a c", fn)
    np.testing.assert_array_equal(to_numpy(got), x.max(axis=1))


@backends
def test_list_input_is_stacked(backend):
    xs = [to_backend(_data((3, 4), seed=i), backend) for i in range(5)]
    got = rearr.rearrange(xs, "n h w -> h (n w)")
    expected = einops.rearrange([to_numpy(x) for x in xs], "n h w -> h (n w)")
    np.testing.assert_array_equal(to_numpy(got), expected)
    got = rearr.reduce(xs, "n h w -> h w", "sum")
    np.testing.assert_allclose(to_numpy(got), sum(to_numpy(x) for x in xs))


# --- views and copies -------------------------------------------------------------

VIEWS = [
    ("a b c -> c b a", (2, 3, 4), {}, True),
    ("b (h w) c -> b c (h w)", (2, 12, 5), {"h": 3}, True),
    ("a b c -> (c) (a b)", (2, 3, 4), {}, True),
    ("a (b c) -> a b c", (2, 12), {"b": 3}, True),
    ("... c -> c ...", (2, 3, 4), {}, True),
    ("c b h -> b (c h)", (2, 5, 32), {}, False),
    ("a b c -> (b a c)", (2, 3, 4), {}, False),
]


@backends
@pytest.mark.parametrize("pattern, shape, lengths, is_view", VIEWS)
def test_result_is_a_view_whenever_a_view_suffices(backend, pattern, shape, lengths, is_view):
    x = to_backend(_data(shape), backend)
    y = rearr.rearrange(x, pattern, **lengths)
    assert shares_memory(x, y) == is_view
    assert _plan(pattern, shape, lengths).is_view == is_view


def _plan(pattern, shape, lengths):
    from rearr.planning import planner
    from rearr.rules import recipe

    r = recipe.analyze(pattern, "rearrange", None, tuple(sorted(lengths)))
    return planner.plan(r, shape, tuple(lengths.items()))


def test_one_copy_only():
    from rearr.planning import planner
    from rearr.rules import recipe

    r = recipe.analyze("c b h -> b (c h)", "rearrange")
    p = planner.plan(r, (2, 5, 32))
    assert [type(s).__name__ for s in p.steps] == ["Permute", "Reshape"]
    assert [s.view for s in p.steps] == [True, False]
    # axes that travel together are merged before the permute: one 2-d transpose, no copy
    r = recipe.analyze("b (h w) c -> b c (h w)", "rearrange", None, ("h",))
    p = planner.plan(r, (2, 12, 5), (("h", 3),))
    assert [type(s).__name__ for s in p.steps] == ["Permute"]


def test_identity_steps_are_skipped():
    from rearr.planning import planner
    from rearr.rules import recipe

    assert planner.plan(recipe.analyze("a b -> a b", "rearrange"), (2, 3)).steps == ()
    assert planner.plan(recipe.analyze("a b c -> a (b c)", "rearrange"), (2, 3, 4)).steps[0].view


def test_import_rearr_does_not_import_torch_or_lark():
    code = "import sys, rearr; print('torch' in sys.modules, 'lark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_numpy_use_never_imports_torch():
    code = ("import sys, numpy as np, rearr; rearr.rearrange(np.zeros((2, 3)), 'a b -> b a');"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@backends
def test_cached_call_gives_the_same_result(backend):
    x = to_backend(_data((2, 3, 4)), backend)
    first = to_numpy(rearr.rearrange(x, "a b c -> c (a b)"))
    second = to_numpy(rearr.rearrange(x, "a b c -> c (a b)"))
    np.testing.assert_array_equal(first, second)


def test_repeat_is_einops_repeat_a_writable_copy_on_numpy_a_view_on_torch():
    # einops repeats with np.tile on numpy (a new, writable array: code writes into it) and with
    # expand on torch (a stride-0 view); rearr once returned a read-only broadcast view on numpy.
    x = np.arange(6.0).reshape(2, 3)
    for c in (4, 1):
        y = rearr.repeat(x, "h w -> h w c", c=c)
        assert not np.shares_memory(x, y) and y.flags.writeable and y.flags.c_contiguous
        y[0, 0, 0] = 100.0
        assert x[0, 0] == 0.0
    t = torch.arange(6.0).reshape(2, 3)
    assert rearr.repeat(t, "h w -> h w c", c=4).stride()[-1] == 0


@backends
def test_gradients_flow_through_rearrange_and_reduce(backend):
    if backend != "torch":
        pytest.skip("gradients are torch's")
    x = torch.rand(2, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: rearr.reduce(rearr.rearrange(t, "a b c -> c (a b)"), "c k -> k", "mean"),
                                    (x,))


# --- einsum, pack, unpack, parse_shape --------------------------------------------

@backends
@pytest.mark.parametrize("pattern, shapes", [
    ("i j, j k -> i k", [(2, 3), (3, 4)]),
    ("b i, b j -> b i j", [(2, 3), (2, 4)]),
    ("batch ... c, c d -> batch ... d", [(2, 3, 4, 5), (5, 6)]),
    ("i i -> i", [(3, 3)]),
    ("a b c -> c", [(2, 3, 4)]),
])
def test_einsum_matches_einops(backend, pattern, shapes):
    xs = [_data(s, seed=i) for i, s in enumerate(shapes)]
    expected = einops.einsum(*xs, pattern)
    got = rearr.einsum(*[to_backend(x, backend) for x in xs], pattern)
    np.testing.assert_allclose(to_numpy(got), expected)


@backends
def test_pack_unpack_roundtrip_matches_einops(backend):
    xs = [_data((2, 3, 5)), _data((2, 3, 7, 5)), _data((2, 3, 7, 9, 5))]
    packed, ps = rearr.pack([to_backend(x, backend) for x in xs], "i j * k")
    e_packed, e_ps = einops.pack(xs, "i j * k")
    np.testing.assert_array_equal(to_numpy(packed), e_packed)
    assert [tuple(p) for p in ps] == [tuple(p) for p in e_ps]
    for got, want in zip(rearr.unpack(packed, ps, "i j * k"), xs):
        np.testing.assert_array_equal(to_numpy(got), want)


@backends
def test_parse_shape(backend):
    x = to_backend(np.zeros((2, 3, 5, 7)), backend)
    assert rearr.parse_shape(x, "batch _ h w") == {"batch": 2, "h": 5, "w": 7}
    assert rearr.parse_shape(x, "b ... w") == {"b": 2, "w": 7}
    assert rearr.parse_shape(x, "... h w") == einops.parse_shape(to_numpy(x), "... h w")
    with pytest.raises(rearr.RearrError):
        rearr.parse_shape(x, "a b")


def test_import_rearr_loads_only_the_fast_path_of_run():
    """The careful path's modules load on the first call that needs them: `import rearr` pays for
    rearr.run's tables and fast path alone (no rule, no length solver), a first plain call for
    rearr.run.program and the rules besides."""
    lazy = ["rearr.run.program", "rearr.run.indexed", "rearr.run.einsum", "rearr.run.parse_shape",
            "rearr.planning.parse_shape", "rearr.rules", "rearr.planning.lengths", "rearr.run.packing"]
    code = ("import sys, numpy as np, rearr; lazy = " + repr(lazy) + "; print([m in sys.modules for m in lazy]); "
            "rearr.rearrange(np.zeros((2, 3)), 'a b -> b a'); print([m in sys.modules for m in lazy]); "
            "rearr.parse_shape(np.zeros((2, 3)), 'a b'); print([m in sys.modules for m in lazy])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:3] == [str([False] * 8), str([True] + [False] * 4 + [True, True, False]),
                                   str([True, False, False, True, True, True, True, False])]
