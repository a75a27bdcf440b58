"""einsum (groups, unit axes, lengths, errors that name the user's axes), pack/unpack/parse_shape's
surface (unpack's -1, any iterable of shapes, bad shapes), asnumpy and reduce(..., "rearrange"),
on both backends; einops is the oracle where it answers."""

from __future__ import annotations

import string

import einops
import numpy as np
import pytest
import torch
from _backends import backends, to_backend, to_numpy

import rearr
import rearr.run.cache
from rearr import RearrError

rng = np.random.default_rng(0)


def _rand(*shape):
    return rng.random(shape)


def _code(f, *args, **kwargs) -> RearrError:
    with pytest.raises(RearrError) as info:
        f(*args, **kwargs)
    return info.value


# --- einsum with groups ------------------------------------------------------------

# (pattern, shapes, lengths, the same with plain numpy: operands -> result)
GROUPED = [
    ("b (h w) c, c d -> b h w d", [(2, 6, 5), (5, 4)], {"h": 2},
     lambda x, y: np.einsum("bxc,cd->bxd", x, y).reshape(2, 2, 3, 4)),
    ("b t c, c d -> (b t) d", [(2, 3, 5), (5, 4)], {}, lambda x, y: np.einsum("btc,cd->btd", x, y).reshape(6, 4)),
    ("b h w, (h w) d -> b d", [(2, 3, 4), (12, 5)], {}, lambda x, y: np.einsum("bk,kd->bd", x.reshape(2, 12), y)),
    ("(b h) w -> w (h b)", [(6, 4)], {"b": 2},
     lambda x: x.reshape(2, 3, 4).transpose(2, 1, 0).reshape(4, 6)),
    ("i () -> i", [(5, 1)], {}, lambda x: x[:, 0]),
    ("i 1 j, j -> i 1", [(3, 1, 4), (4,)], {}, lambda x, y: (x[:, 0] @ y)[:, None]),
    ("a b -> (a b)", [(5, 1)], {}, lambda x: x.reshape(5)),
    ("... (h w), w -> ... h", [(2, 3, 6), (3,)], {"h": 2}, lambda x, y: x.reshape(2, 3, 2, 3) @ y),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)], {}, lambda x, y: np.einsum("bid,bjd->bij", x, y)),
    ("i i -> i", [(3, 3)], {}, np.diagonal),
    ("(i i) -> i", [(9,)], {"i": 3}, lambda x: np.diagonal(x.reshape(3, 3))),
    ("b (h w) c, (h w) d -> b d", [(2, 6, 4), (6, 5)], {"h": 2}, lambda x, y: np.einsum("bkc,kd->bd", x, y)),
    ("b (h w) c, w h d -> b d", [(2, 6, 4), (3, 2, 5)], {"h": 2},
     lambda x, y: np.einsum("bhwc,whd->bd", x.reshape(2, 2, 3, 4), y)),
    ("t b (head cin), head cin cout -> t b (head cout)", [(5, 2, 6), (2, 3, 4)], {},
     lambda x, y: np.einsum("tbhc,hcd->tbhd", x.reshape(5, 2, 2, 3), y).reshape(5, 2, 8)),
    ("(a b) c, c (b a) -> (b a)", [(6, 4), (4, 6)], {"a": 2},
     lambda x, y: np.einsum("abc,cba->ba", x.reshape(2, 3, 4), y.reshape(4, 3, 2)).reshape(6)),
    ("index ->", [(10,)], {}, np.sum),
]


@backends
@pytest.mark.parametrize("pattern, shapes, lengths, expected", GROUPED, ids=[c[0] for c in GROUPED])
def test_einsum_groups_and_unit_axes(backend, pattern, shapes, lengths, expected):
    arrays = [_rand(*s) for s in shapes]
    out = rearr.einsum(*[to_backend(a, backend) for a in arrays], pattern, **lengths)
    np.testing.assert_allclose(to_numpy(out), expected(*arrays), rtol=1e-12)


@backends
def test_einsum_agrees_with_einops_where_einops_answers(backend):
    for pattern, shapes in [("b c h w, b w -> b h", [(2, 3, 4, 5), (2, 5)]), ("a b, b c, c d -> a d", [(2, 3), (3, 4),
                            (4, 5)]), ("... i, ... i -> ...", [(2, 3, 4), (3, 4)])]:
        xs = [to_backend(_rand(*s), backend) for s in shapes]
        np.testing.assert_allclose(to_numpy(rearr.einsum(*xs, pattern)), to_numpy(einops.einsum(*xs, pattern)))


def test_einsum_length_keywords_are_checked():
    x, w = np.ones((2, 6, 5)), np.ones((5, 4))
    assert rearr.einsum(x, w, "b (h w) c, c d -> b h w d", h=np.int64(2)).shape == (2, 2, 3, 4)
    assert _code(rearr.einsum, x, w, "b (h w) c, c d -> b h w d", h=2.0).code == "RA305"
    assert _code(rearr.einsum, x, w, "b (h w) c, c d -> b h w d", h=2, q=1).code == "RA300"
    e = _code(rearr.einsum, x, w, "b (h w) c, c d -> b h w d", h=4)
    assert e.code == "RA302" and e.col == 2
    e = _code(rearr.einsum, x, w, "b (h w) c, c d -> b h w d", h=2, w=2)
    assert e.code == "RA303" and "'h'=2 * 'w'=2 makes 4" in e.message and e.hint.startswith("pass h=3")
    assert rearr.einsum(x, w, "b (h w) c, c d -> b h w d", h=3, w=2).shape == (2, 3, 2, 4)  # the hint, applied
    e = _code(rearr.einsum, x, w, "b (h w) c, c d -> b h w d")
    assert e.code == "RA301" and "'h'" in e.message
    assert rearr.einsum(x, w, "b (h w) c, c d -> b h w d", **{e.hint.split("e.g. ")[1].split("=")[0]: 2}).shape \
        == (2, 2, 3, 4)  # the hint, applied


@backends
def test_einsum_wrong_shapes_name_the_users_axes(backend):
    a, b = to_backend(np.ones((2, 3)), backend), to_backend(np.ones((4, 4)), backend)
    e = _code(rearr.einsum, a, b, "rows inner, inner cols -> rows cols")
    assert e.code == "RA303" and "'inner'" in e.message and e.col == 12  # the second operand's
    assert e.shape == ((2, 3), (4, 4))
    e = _code(rearr.einsum, a, "rows -> rows")
    assert e.code == "RA304" and "operand 0 has 2 dimensions" in e.message
    e = _code(rearr.einsum, to_backend(np.ones((5, 2)), backend), "i () -> i")
    assert e.code == "RA303" and e.col == 2
    e = _code(rearr.einsum, to_backend(np.ones((2, 3)), backend), to_backend(np.ones((4, 3)), backend),
              "... i, ... i -> ...")
    assert e.code == "RA303" and "do not broadcast" in e.message
    for err in (e,):
        assert "->" not in err.message  # never the internal letter spec


def test_einsum_backend_refusals_are_rearr_errors():
    e = _code(rearr.einsum, torch.ones(2, 3), torch.ones(3, 4, dtype=torch.float64), "i j, j k -> i k")
    assert e.code == "RA500" and "torch refused" in e.message
    e = _code(rearr.einsum, np.ones((2, 3)), torch.ones(3, 4), "i j, j k -> i k")
    assert e.code == "RA500"


def test_einsum_call_mistakes_get_hints_that_work():
    x = np.ones((2, 3))
    e = _code(rearr.einsum)
    assert e.code == "RA206" and e.shape is None
    e = _code(rearr.einsum, "i j -> j i", x)  # np.einsum's order
    assert e.code == "RA206" and e.hint == "einsum(x1, 'i j -> j i')"
    x1 = x
    assert eval(e.hint, {"einsum": rearr.einsum, "x1": x1}).shape == (3, 2)
    e = _code(rearr.einsum, "i j -> j i")
    assert e.code == "RA206" and e.hint == "einsum(x, 'i j -> j i')"
    assert eval(e.hint, {"einsum": rearr.einsum, "x": x}).shape == (3, 2)
    e = _code(rearr.einsum, x)
    assert e.code in ("RA100", "RA206")
    for pattern in (["i j -> j i"], ("i j -> j i",), None):
        assert _code(rearr.einsum, x, pattern).code == "RA100"


def test_einops_einsum_error_cases():
    """einops' test_functional_errors, case by case, as rearr answers them (the shim excludes that
    test: it asserts einops' messages, and NotImplementedError for what rearr takes)."""
    x51 = np.ones((5, 1))
    np.testing.assert_array_equal(rearr.einsum(x51, "i () -> i"), np.ones(5))  # einops: NotImplementedError
    np.testing.assert_array_equal(rearr.einsum(x51, "a b -> (a b)"), np.ones(5))  # einops: NotImplementedError
    # Two unknown axes in one group fail whatever the shape: the pattern's error, as rearrange's, first.
    assert _code(rearr.einsum, np.ones((10, 1)), "(a b) -> a b").code == "RA301"
    assert _code(rearr.einsum, np.ones((10, 1)), "(a b) -> a b", a=2).code == "RA304"
    e = _code(rearr.einsum, x51, "i 2 -> i")
    assert e.code == "RA203" and "a2=2" in e.hint
    assert rearr.einsum(np.ones((5, 2)), "i a2 -> i", a2=2).shape == (5,)  # the hint, applied
    assert _code(rearr.einsum, x51, "i 2j -> i").code in ("RA100", "RA103", "RA104")
    assert _code(rearr.einsum, np.ones((5, 3, 2)), "i j k").code == "RA101"
    e = _code(rearr.einsum, np.ones(1), " ".join(string.ascii_letters) + " extra ->")
    assert e.code in ("RA206", "RA304")
    assert _code(rearr.einsum, np.ones((1,) * 53), " ".join(string.ascii_letters) + " extra ->").code == "RA206"
    assert _code(rearr.einsum, x51, "i j -> k").code == "RA200"
    assert _code(rearr.einsum, "i j k -> i", np.ones((5, 4, 3))).code == "RA206"
    assert _code(rearr.einsum, "i j k -> i").code == "RA206"
    assert _code(rearr.einsum, x51).code in ("RA100", "RA206")


def test_einsum_plans_once_per_shape():
    rearr.run.cache.einsum_cache_clear()
    a, b = np.ones((2, 3)), np.ones((3, 4))
    for _ in range(3):
        rearr.einsum(a, b, "i j, j k -> i k")
    rearr.einsum(np.ones((5, 3)), b, "i j, j k -> i k")
    info = rearr.run.cache.einsum_plan.cache_info()
    assert info.misses == 2  # the repeated calls are served by einsum's own look-up, unplanned


def test_einsum_look_up_lets_no_bad_length_through_and_stays_bounded(monkeypatch):
    # The two-operand look-up's key holds the lengths: 2.0 == 2 and True == 1 there, so only plain
    # ints use it; the rest is validated as on the first call.
    x, w, p = np.ones((2, 6, 4)), np.ones((4, 5)), "b (h w) c, c d -> b h w d"
    assert rearr.einsum(x, w, p, h=2).shape == (2, 2, 3, 5)
    assert rearr.einsum(x, w, p, h=2).shape == (2, 2, 3, 5)  # from the look-up
    for bad in (2.0, True):
        with pytest.raises(RearrError) as info:
            rearr.einsum(x, w, p, h=bad)
        assert info.value.code == "RA305"
    assert rearr.einsum(x, w, p, h=np.int64(3)).shape == (2, 3, 2, 5)
    monkeypatch.setattr(rearr.run.cache.einsum_pairs, "maxsize", 4)
    for n in range(1, 10):
        assert rearr.einsum(np.ones((n, 3)), np.ones((3, 2)), "i j, j k -> i k").shape == (n, 2)
        assert len(rearr.run.cache.EINSUM_PAIRS) <= 4


def test_einsum_is_planned_from_shapes_alone_as_plain_data():
    # The planner stage (rearr/planning/einsum.py) sees shapes, never a tensor; its plan is the
    # operands' reshapes, the backend's spec and the output's reshape, and the same as one matmul.
    from rearr.planning.einsum import EinsumMatmul, EinsumPlan, plan
    from rearr.planning.plan import Reshape

    assert plan("b (h w) c, c d -> b h w d", ((2, 6, 4), (4, 5)), (("h", 2),)) == EinsumPlan(
        pre=(), spec="abc,cd->abd", post=(2, 2, 3, 5),  # (h w) stays one einsum axis: no reshape before
        mm=EinsumMatmul(a=(), b=(), swap=False, out=(Reshape((2, 2, 3, 5)),)))  # x @ w, then the groups
    assert plan("b h w c, (h w) t -> b t c", ((2, 4, 4, 5), (16, 3)), ())[:3] == EinsumPlan(
        pre=((2, 16, 5), None), spec="abc,bd->adc", post=None)[:3]
    with pytest.raises(RearrError) as info:
        plan("b (h w), h -> b", ((2, 7), (3,)), ())
    assert info.value.code == "RA302"


# --- pack, unpack, parse_shape ------------------------------------------------------


@backends
def test_unpack_takes_one_minus_one_as_einops_does(backend):
    x = to_backend(_rand(2, 5, 3), backend)
    for shapes in ([(2,), (-1,)], [(-1,), (3,)], [(1,), (-1, 2)], [[2, -1], []]):
        ours = [to_numpy(t) for t in rearr.unpack(x, shapes, "b * c")]
        theirs = [to_numpy(t) for t in einops.unpack(x, shapes, "b * c")]
        assert [t.shape for t in ours] == [t.shape for t in theirs]
        for o, t in zip(ours, theirs):
            np.testing.assert_array_equal(o, t)
    e = _code(rearr.unpack, x, [(2,), (-1,), (-1,)], "b * c")
    assert e.code == "RA301"
    e = _code(rearr.unpack, x, [(2,), (-1, 2)], "b * c")
    assert e.code == "RA302"
    e = _code(rearr.unpack, x, [(-1, 0)], "b * c")
    assert e.code == "RA302"


def test_unpack_reads_any_iterable_once():
    packed, shapes = rearr.pack([np.ones((2, 3)), np.ones((2, 4, 3))], "b * c")
    for given in ((s for s in shapes), map(tuple, shapes), iter(shapes), tuple(shapes)):
        assert [t.shape for t in rearr.unpack(packed, given, "b * c")] == [(2, 3), (2, 4, 3)]
    assert [t.shape for t in rearr.unpack(packed, ((s for s in (4,)), ()), "b * c")] == [(2, 4, 3), (2, 3)]


def test_unpack_bad_shapes_are_rearr_errors_with_hints_that_work():
    packed, shapes = rearr.pack([np.ones((2, 3)), np.ones((2, 4, 3))], "b * c")
    for bad in ([(-2,), (7,)], [2.0, (3,)], [None, (4,)], [(4.0,), ()], [(True,), (4,)], [("4",), ()], 5, "(4,)"):
        e = _code(rearr.unpack, packed, bad, "b * c")
        assert e.code == "RA305", bad
        assert "pack" in e.hint
        assert len(rearr.unpack(packed, shapes, "b * c")) == 2  # the hint: pack's shapes
    e = _code(rearr.unpack, packed, [4, ()], "b * c")  # a bare int where a tuple belongs
    assert e.hint == "write it as a tuple, e.g. (4,)"
    assert [t.shape for t in rearr.unpack(packed, [(4,), ()], "b * c")] == [(2, 4, 3), (2, 3)]


@backends
def test_zero_length_packs(backend):
    xs = [to_backend(np.ones((2, 4, 0)), backend), to_backend(np.ones((2, 0)), backend)]
    packed, shapes = rearr.pack(xs, "b * c")
    assert tuple(packed.shape) == (2, 5, 0) and shapes == [(4,), ()]
    assert [tuple(t.shape) for t in rearr.unpack(packed, shapes, "b * c")] == [(2, 4, 0), (2, 0)]
    empty = to_backend(np.ones((2, 0, 3)), backend)
    packed, shapes = rearr.pack([empty], "b * c")
    assert shapes == [(0,)] and [tuple(t.shape) for t in rearr.unpack(packed, shapes, "b * c")] == [(2, 0, 3)]
    assert rearr.unpack(empty, [], "b * c") == []
    e = _code(rearr.pack, [], "b * c")
    assert e.code == "RA500" and "empty list" in e.message


@pytest.mark.parametrize("call", [
    lambda p: rearr.pack([np.ones((2, 3))], p),
    lambda p: rearr.unpack(np.ones((2, 3)), [()], p),
    lambda p: rearr.parse_shape(np.ones((2, 3)), p),
    lambda p: rearr.einsum(np.ones((2, 3)), p),
], ids=["pack", "unpack", "parse_shape", "einsum"])
def test_a_list_as_the_pattern_is_a_rearr_error(call):
    for pattern in (["b * c"], {"b": 1}, None, b"b * c"):
        e = _code(call, pattern)
        assert e.code == "RA100" and "string" in e.message


# --- asnumpy, reduce(..., "rearrange") ---------------------------------------------------


def test_asnumpy():
    x = np.arange(6).reshape(2, 3)
    assert rearr.asnumpy(x) is x
    t = torch.arange(6.0, requires_grad=True).reshape(2, 3)
    out = rearr.asnumpy(t)
    assert isinstance(out, np.ndarray) and out.tolist() == [[0, 1, 2], [3, 4, 5]]
    np.testing.assert_array_equal(rearr.asnumpy(t), einops.asnumpy(t))
    e = _code(rearr.asnumpy, [1, 2])
    assert e.code == "RA500"
    bf16 = torch.ones(2, dtype=torch.bfloat16)
    e = _code(rearr.asnumpy, bf16)
    assert e.code == "RA500" and "x.float()" in e.hint
    assert rearr.asnumpy(bf16.float()).tolist() == [1.0, 1.0]  # the hint, applied
    assert "asnumpy" in rearr.__all__


@backends
def test_reduce_rearrange_is_rearrange_as_in_einops(backend):
    x = to_backend(_rand(2, 3, 4), backend)
    np.testing.assert_array_equal(to_numpy(rearr.reduce(x, "a b c -> c (b a)", "rearrange")),
                                  to_numpy(einops.reduce(x, "a b c -> c (b a)", "rearrange")))
    assert _code(rearr.reduce, x, "a b c -> a", "rearrange").code == "RA200"  # nothing is reduced


def _grouped(names: list[str], rnd) -> str:
    """names in order, adjacent ones randomly put in parentheses, sometimes a unit axis."""
    out, k = [], 0
    while k < len(names):
        n = rnd.randint(1, min(3, len(names) - k))
        out.append(names[k] if n == 1 else "(" + " ".join(names[k:k + n]) + ")")
        k += n
        if rnd.random() < 0.1:
            out.append(rnd.choice(["1", "()"]))
    return " ".join(out)


@backends
def test_einsum_with_groups_against_einops_through_rearrange(backend):
    """Random two-operand patterns with groups, against einops: split every group with einops.rearrange,
    einops.einsum over the plain axes, then group the result with einops.rearrange."""
    import random

    rnd = random.Random(8)
    lengths = {"a": 2, "b": 3, "c": 1, "d": 4, "e": 2}
    for _ in range(60):
        left = rnd.sample(sorted(lengths), rnd.randint(1, 4))
        right = rnd.sample(sorted(lengths), rnd.randint(1, 4))
        union = sorted(set(left) | set(right))
        out = rnd.sample(union, rnd.randint(0, len(union)))
        sides = [_grouped(left, rnd), _grouped(right, rnd), _grouped(out, rnd)]
        pattern = f"{sides[0]}, {sides[1]} -> {sides[2]}"
        xs = []
        for side, names in zip(sides[:2], (left, right)):
            plain = rng.random([lengths[n] for n in names])
            xs.append(einops.rearrange(plain, f"{' '.join(names)} -> {side}"))
        plain = [einops.rearrange(x, f"{s} -> {' '.join(n)}", **{k: lengths[k] for k in n})
                 for x, s, n in zip(xs, sides, (left, right))]
        flat = einops.einsum(*plain, f"{' '.join(left)}, {' '.join(right)} -> {' '.join(out)}")
        expected = einops.rearrange(np.asarray(flat), f"{' '.join(out)} -> {sides[2]}")
        used = {n: v for n, v in lengths.items() if n in union}
        got = rearr.einsum(*[to_backend(x, backend) for x in xs], pattern, **used)
        np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-12, err_msg=pattern)
