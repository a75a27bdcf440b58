"""einsum's matrix products on torch: permutes and reshapes around torch.matmul, as one writes them by
hand (planning.einsum.EinsumMatmul), equal to numpy's einsum within rounding, bitwise equal to the
hand-written matmul where it is the same call, and the einsums that are not matrix products left to
torch.einsum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rearr
from rearr.planning.einsum import EinsumMatmul, plan
from rearr.planning.plan import Permute, Reshape

rng = np.random.default_rng(0)

# pattern, operand shapes, lengths: every role empty or several axes, batch axes anywhere, the output's
# free axes in either operand's order, groups on both sides
MATMULS = [
    ("b h i d, b h j d -> b h i j", [(2, 3, 4, 5), (2, 3, 6, 5)], {}),
    ("b h i j, b h j d -> b h i d", [(2, 3, 4, 6), (2, 3, 6, 5)], {}),
    ("b i d, b j d -> b j i", [(2, 3, 4), (2, 5, 4)], {}),
    ("i b d, j b d -> b i j", [(3, 2, 4), (5, 2, 4)], {}),
    ("b i d, b j d -> i b j", [(2, 3, 4), (2, 5, 4)], {}),
    ("b t c, c d -> b t d", [(2, 3, 4), (4, 5)], {}),
    ("c d, b t c -> d t b", [(4, 5), (2, 3, 4)], {}),
    ("i k, j k -> i j", [(3, 4), (5, 4)], {}),
    ("b d, b i d -> b i", [(2, 4), (2, 5, 4)], {}),
    ("b i d, b d -> b i", [(2, 5, 4), (2, 4)], {}),
    ("b d, b d -> b", [(2, 4), (2, 4)], {}),
    ("b x y c, b c z -> b z x y", [(2, 3, 2, 4), (2, 4, 5)], {}),
    ("b i k1 k2, b k2 k1 j -> b i j", [(2, 3, 4, 2), (2, 2, 4, 5)], {}),
    ("b (h w) c, c d -> b h w d", [(2, 6, 4), (4, 5)], {"h": 2}),
    ("b h w c, (h w) t -> b t c", [(2, 4, 4, 5), (16, 3)], {}),
    ("b t c, c d -> (b t) d 1", [(2, 3, 4), (4, 5)], {}),
    ("b i d, b j d -> b i j", [(2, 0, 4), (2, 5, 4)], {}),
    ("b i d, b j d -> b i j", [(2, 3, 0), (2, 5, 0)], {}),
]
# not matrix products: torch.einsum runs them
OTHERS = [
    # unbatched dot and matrix-vector products: inductor sums them more precisely as einsum
    ("k, k ->", [(3,), (3,)]),
    ("i k, k -> i", [(2, 3), (3,)]),
    ("k, k j -> j", [(3,), (3, 2)]),
    ("b i, b j -> b i j", [(2, 3), (2, 4)]),  # nothing summed: an outer product
    ("i i, i j -> j", [(3, 3), (3, 2)]),  # a diagonal
    ("i k, k j -> j", [(3, 4), (4, 2)]),  # i summed within operand 0
    ("... i d, ... j d -> ... i j", [(2, 3, 4), (2, 5, 4)]),
    ("a b, b c, c d -> a d", [(2, 3), (3, 4), (4, 5)]),
    ("a b -> b", [(2, 3)]),
]


def _spec(pattern: str) -> str:
    """The pattern as numpy's spec (one letter per name; groups are not in these)."""
    names: dict[str, str] = {}
    out = ""
    for token in pattern.replace(",", " , ").replace("->", " -> ").split():
        out += {",": ",", "->": "->", "...": "..."}.get(token) or names.setdefault(token, "abcdefghijk"[len(names)])
    return out


@pytest.mark.parametrize("pattern, shapes, lengths", MATMULS)
def test_matrix_products_plan_a_matmul_and_equal_numpys_einsum(pattern, shapes, lengths):
    arrays = [rng.standard_normal(s) for s in shapes]
    p = plan(pattern, tuple(shapes), tuple(lengths.items()))
    assert p.mm is not None
    want = rearr.einsum(*arrays, pattern, **lengths)  # numpy: its own einsum
    got = rearr.einsum(*[torch.from_numpy(a) for a in arrays], pattern, **lengths)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    again = rearr.einsum(*[torch.from_numpy(a) for a in arrays], pattern, **lengths)  # from the look-up
    assert torch.equal(again, got)


@pytest.mark.parametrize("pattern, shapes", OTHERS)
def test_other_einsums_stay_the_backends_einsum(pattern, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    assert plan(pattern, tuple(shapes), ()).mm is None
    got = rearr.einsum(*[torch.from_numpy(a) for a in arrays], pattern)
    torch.testing.assert_close(got, torch.einsum(_spec(pattern), *[torch.from_numpy(a) for a in arrays]),
                               rtol=0, atol=0)


def test_attention_is_the_matmul_one_writes_bitwise():
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    assert plan("b h i d, b h j d -> b h i j", (q.shape, k.shape), ()).mm == EinsumMatmul(
        a=(), b=(Permute((0, 1, 3, 2)),), swap=False, out=())
    a = rearr.einsum(q, k, "b h i d, b h j d -> b h i j")
    assert torch.equal(a, q @ k.transpose(-2, -1))
    assert torch.equal(rearr.einsum(a, v, "b h i j, b h j d -> b h i d"), a @ v)
    x, w = torch.randn(2, 3, 4), torch.randn(4, 5)
    assert torch.equal(rearr.einsum(x, w, "b t c, c d -> b t d"), x @ w)
    assert plan("b d, b i d -> b i", ((2, 4), (2, 5, 4)), ()).mm == EinsumMatmul(  # b's matrix first
        a=(Reshape((2, 4, 1)),), b=(), swap=True, out=(Reshape((2, 5)),))


def test_split_heads_are_copied_in_memory_order_with_the_same_values():
    from rearr.backends.torch import _in_memory_order

    q, k = (torch.randn(2, 16, 4, 8).transpose(1, 2) for _ in range(2))  # b n h d -> b h n d: views
    kt = k.transpose(-2, -1)
    copied = _in_memory_order(kt)
    assert torch.equal(copied, kt) and copied.stride(-2) == 1 and copied.mT.is_contiguous()
    for as_is in (kt.contiguous(), q, torch.randn(2, 8, 5).mT, torch.randn(3, 2, 8, 5).mT):
        assert _in_memory_order(as_is) is as_is  # contiguous, d last, 3-D, batch dims that merge
    assert torch.equal(rearr.einsum(q, k, "b h i d, b h j d -> b h i j"), q @ kt)


@pytest.mark.parametrize("pattern, shapes, lengths", [MATMULS[3], MATMULS[8], MATMULS[15], MATMULS[16]])
def test_matmul_lowering_gradients(pattern, shapes, lengths):
    xs = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    f = lambda *t: rearr.einsum(*t, pattern, **lengths)  # noqa: E731
    assert torch.autograd.gradcheck(f, xs)
    assert torch.autograd.gradgradcheck(f, xs)


def test_integer_and_refused_dtypes_as_torch_einsum():
    a, b = torch.arange(6).reshape(2, 3), torch.arange(12).reshape(3, 4)
    assert torch.equal(rearr.einsum(a, b, "i j, j k -> i k"), torch.einsum("ij,jk->ik", a, b))
    with pytest.raises(rearr.RearrError) as info:
        rearr.einsum(a.float(), b.double(), "i j, j k -> i k")
    assert info.value.code == "RA500"
