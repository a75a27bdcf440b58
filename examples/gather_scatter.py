"""The indexing pitfalls of torch.gather / scatter and numpy, rewritten with rearr.

An index is written in square brackets right after the axis it indexes:
`b n[idx] -> b` reads "axis n, at the positions held in idx". On the input side
(rearrange) that is a gather, on the output side (rearr.scatter) a scatter.
Each section below computes one thing with rearr and by hand, with torch and
numpy, and asserts that they agree. Run: python examples/gather_scatter.py
"""

import numpy as np
import torch

import rearr
from rearr import RearrError, rearrange, scatter


def section(title: str) -> None:
    print(f"\n--- {title}")


def same(rearr_result, *by_hand) -> None:
    """Assert that every hand-written result equals rearr's (numpy or torch)."""
    want = np.asarray(rearr_result)
    for other in by_hand:
        got = np.asarray(other)
        assert got.shape == want.shape, (got.shape, want.shape)
        assert np.allclose(got, want), (got, want)


g = torch.Generator().manual_seed(0)
x = torch.arange(12.0).reshape(3, 4)  # (b, n): 3 rows of 4
xn = x.numpy()

# 1 -------------------------------------------------------------------------
section("one element per row: out[b] = x[b, idx[b]]")
idx = torch.tensor([1, 0, 3])
out = rearrange(x, "b n[idx] -> b", idx=idx)
print("x =", x.tolist(), " idx =", idx.tolist(), " ->", out.tolist())
same(out,
     torch.gather(x, 1, idx[:, None]).squeeze(1),          # gather wants idx as (b, 1)
     x[torch.arange(3), idx],                              # advanced indexing
     np.take_along_axis(xn, idx.numpy()[:, None], axis=1)[:, 0],
     rearrange(xn, "b n[idx] -> b", idx=idx.numpy()))      # the same pattern on numpy

# 2 -------------------------------------------------------------------------
section("two elements per row: out[b, k] = x[b, idx[b, k]]")
idx2 = torch.tensor([[0, 1], [2, 3], [3, 3]])
out = rearrange(x, "b n[idx] -> b k", idx=idx2)
print("idx =", idx2.tolist(), " ->", out.tolist())
same(out,
     torch.gather(x, 1, idx2),
     np.take_along_axis(xn, idx2.numpy(), axis=1),
     rearrange(xn, "b n[idx] -> b k", idx=idx2.numpy()))

# 3 -------------------------------------------------------------------------
section("one index shared by all rows: out[b, k, c] = x3[b, idx[k], c]")
x3 = torch.randn(2, 5, 3, generator=g)  # (b, n, c)
shared = torch.tensor([4, 0])  # (k,): the same two positions for every b and c
out = rearrange(x3, "b n[idx: k] c -> b k c", idx=shared)
# `[idx: k]` declares the index's own axes; it is broadcast over b and c (a view,
# never a copy). By hand: torch.gather needs the index at the output's full shape,
# via expand (a view) -- or repeat, a full copy of the index.
print("x3", tuple(x3.shape), " idx", shared.tolist(), " ->", tuple(out.shape))
same(out,
     torch.gather(x3, 1, shared[None, :, None].expand(2, 2, 3)),
     torch.gather(x3, 1, shared[None, :, None].repeat(2, 1, 3)),
     x3[:, shared, :],
     rearrange(x3.numpy(), "b n[idx: k] c -> b k c", idx=shared.numpy()))
plan = rearr.explain("b n[idx: k] c -> b k c", tuple(x3.shape), idx=tuple(shared.shape))
print("rearr's plan:", *plan.code, sep="\n  ")
assert "expand" in "".join(plan.code) and "repeat" not in "".join(plan.code)
# The pitfall: np.take_along_axis broadcasts a length-1 index axis without a word,
# so an index of shape (1, k, 1) "works" whether or not it was meant. In rearr an
# undeclared index has the output's axes (b k c) at full length, nothing implied:
try:
    rearrange(x3, "b n[idx] c -> b k c", idx=shared[None, :, None])
except RearrError as e:
    print("a (1, 2, 1) index without ':' is a RearrError:\n" + str(e))
else:
    raise AssertionError("a length-1 index axis was broadcast silently")

# 4 -------------------------------------------------------------------------
section("column-wise merge: a (2, 3) tensor into 2 columns, columns [0, 1, 1]")
src = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
cols = torch.tensor([0, 1, 1])
out = scatter(src, "r c -> r m[idx: c]", "sum", idx=cols, m=2)
print("src =", src.tolist(), " idx =", cols.tolist(), " ->", out.tolist())
assert out.tolist() == [[1.0, 5.0], [4.0, 11.0]]
merged_np = np.zeros((2, 2))
np.add.at(merged_np, (slice(None), cols.numpy()), src.numpy())
same(out,
     torch.zeros(2, 2).scatter_add_(1, cols.repeat(2, 1), src),  # the index repeated per row: a copy
     torch.zeros(2, 2).index_add_(1, cols, src),
     merged_np,
     scatter(src.numpy(), "r c -> r m[idx: c]", "sum", idx=cols.numpy(), m=2))

# 5 -------------------------------------------------------------------------
section("duplicate indices: 'sum' combines them, 'set' refuses them")
vals = np.array([1.0, 2.0, 3.0])
dup = np.array([0, 2, 2])  # position 2 is written twice
summed = scatter(vals, "k -> n[idx]", "sum", idx=dup, n=4)
print("vals =", vals.tolist(), " idx =", dup.tolist(), " sum ->", summed.tolist())
lost = np.zeros(4)
lost[dup] += vals  # the classic numpy pitfall: a buffered +=, one of the 2s is lost
right = np.zeros(4)
np.add.at(right, dup, vals)
print("numpy out[idx] += vals ->", lost.tolist(), "(lost a value);  np.add.at ->", right.tolist())
assert summed.tolist() == [1.0, 0.0, 5.0, 0.0] and lost.tolist() == [1.0, 0.0, 3.0, 0.0]
same(summed, right,
     torch.zeros(4, dtype=torch.float64).index_add_(0, torch.from_numpy(dup), torch.from_numpy(vals)),
     scatter(torch.from_numpy(vals), "k -> n[idx]", "sum", idx=torch.from_numpy(dup), n=4))
# out[idx] = vals (numpy) and Tensor.scatter_ (torch) keep one of the duplicates,
# which one is not promised; rearr's 'set' says so instead:
for name, (v, i) in {"numpy": (vals, dup), "torch": (torch.from_numpy(vals), torch.from_numpy(dup))}.items():
    try:
        scatter(v, "k -> n[idx]", "set", idx=i, n=4)
    except RearrError as e:
        print(f"'set' with duplicates ({name}) is a RearrError:\n{e}")
    else:
        raise AssertionError("duplicates under 'set' were accepted")
unique = scatter(vals, "k -> n[idx]", "set", idx=np.array([3, 0, 1]), n=4)
print("'set' with unique indices [3, 0, 1] ->", unique.tolist())
assert unique.tolist() == [2.0, 3.0, 0.0, 1.0]

# 6 -------------------------------------------------------------------------
section("embedding look-up: out[b, t, d] = emb[ids[b, t], d]")
emb = torch.randn(10, 4, generator=g)  # (v, d): 10 tokens, 4 features
tokens = torch.tensor([[1, 2, 3], [9, 0, 9]])  # (b, t)
out = rearrange(emb, "v[ids: b t] d -> b t d", ids=tokens)
print("emb", tuple(emb.shape), " ids", tokens.tolist(), " ->", tuple(out.shape))
same(out,
     torch.nn.functional.embedding(tokens, emb),
     emb[tokens],
     np.take(emb.numpy(), tokens.numpy(), axis=0),
     rearrange(emb.numpy(), "v[ids: b t] d -> b t d", ids=tokens.numpy()))

# 7 -------------------------------------------------------------------------
section("sampling pixels at (y, x), per batch: out[b, p, c] = img[b, ys[b, p], xs[b, p], c]")
img = torch.randn(2, 5, 6, 3, generator=g)  # (b, h, w, c)
ys = torch.tensor([[0, 4, 2], [1, 1, 3]])  # (b, p)
xs = torch.tensor([[5, 0, 2], [3, 4, 0]])
out = rearrange(img, "b h[y: b p] w[x: b p] c -> b p c", y=ys, x=xs)
print("img", tuple(img.shape), " ys", ys.tolist(), " xs", xs.tolist(), " ->", tuple(out.shape))
imgn = img.numpy()
same(out,
     img[torch.arange(2)[:, None], ys, xs],
     imgn[np.arange(2)[:, None], ys.numpy(), xs.numpy()],
     rearrange(imgn, "b h[y: b p] w[x: b p] c -> b p c", y=ys.numpy(), x=xs.numpy()))
assert torch.equal(out[1, 2], img[1, 3, 0])

# 8 -------------------------------------------------------------------------
section("torch.gather's truncation: a smaller index silently reads only the first rows")
small = torch.tensor([[1], [0]])  # 2 rows, but x has 3
truncated = torch.gather(x, 1, small)  # no error: row 2 of x is silently ignored
print("torch.gather(x, 1, idx of shape (2, 1)) ->", truncated.tolist(), "(x has 3 rows)")
try:
    rearrange(x, "b n[idx] -> b k", idx=small)
except RearrError as e:
    print("rearr refuses:\n" + str(e))
else:
    raise AssertionError("a short index was truncated silently")
# Said explicitly -- "the first 2 rows" -- it is one slice away:
same(rearrange(x[:2], "b n[idx] -> b k", idx=small), truncated)

# 9 -------------------------------------------------------------------------
section("negative indices count from the end; out-of-range ones are a RearrError")
same(rearrange(x, "b n[idx] -> b", idx=torch.tensor([-1, 0, -4])), torch.tensor([3.0, 4.0, 8.0]))
try:
    rearrange(xn, "b n[idx] -> b", idx=np.array([1, 4, 0]))
except RearrError as e:
    print(str(e))
else:
    raise AssertionError("an out-of-range index was accepted")

# 10 ------------------------------------------------------------------------
section("message passing on a graph: out[v, c] = mean of feat[src[e], c] over edges e with dst[e] == v")
feat = torch.randn(4, 2, generator=g)  # (v, c): 4 nodes, 2 features
s = torch.tensor([0, 1, 2, 3, 0])  # edge e goes from node s[e] ...
d = torch.tensor([1, 1, 2, 0, 3])  # ... to node d[e]
out = scatter(feat, "v[src: e] c -> v[dst: e] c", "mean", src=s, dst=d)
print("edges", list(zip(s.tolist(), d.tolist())), " ->", tuple(out.shape))
counts = torch.bincount(d, minlength=4).clamp(min=1)
by_hand = torch.zeros(4, 2).index_add_(0, d, feat[s]) / counts[:, None]
sums_np = np.zeros((4, 2), dtype=np.float32)
np.add.at(sums_np, d.numpy(), feat.numpy()[s.numpy()])
same(out,
     by_hand,
     torch.zeros(4, 2).scatter_reduce(0, d[:, None].expand(5, 2), feat[s], "mean", include_self=False),
     sums_np / np.maximum(np.bincount(d.numpy(), minlength=4), 1)[:, None],
     scatter(feat.numpy(), "v[src: e] c -> v[dst: e] c", "mean", src=s.numpy(), dst=d.numpy()))
assert torch.allclose(out[1], (feat[0] + feat[1]) / 2)

# Gradients flow through gather and scatter on torch.
w = feat.clone().requires_grad_(True)
scatter(w, "v[src: e] c -> v[dst: e] c", "sum", src=s, dst=d).sum().backward()
assert torch.equal(w.grad, torch.bincount(s, minlength=4).float()[:, None].expand(4, 2))
print("d(sum of messages)/d(feat) = out-degree of each node:", w.grad[:, 0].tolist())

print(f"\nok (rearr {rearr.__version__})")
