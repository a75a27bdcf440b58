"""(C, B, H) -> (B, C*H): why `view` alone gives the wrong answer.

The tensor holds C channels of B samples of H values; we want, per sample, all
channels side by side: out[b, c*H + h] = x[c, b, h]. The pattern says so:

    c b h -> b (c h)

By hand that is `x.permute(1, 0, 2).contiguous().view(B, C*H)`: the permute
moves b to the front, and the copy is needed because after it c and h are no
longer adjacent in memory. A bare `x.view(B, C*H)` runs without complaint and
returns the elements in the wrong places. Run: python examples/channels_to_batch.py
"""

import numpy as np
import torch

import rearr

C, B, H = 2, 5, 32
x = torch.arange(C * B * H).reshape(C, B, H)

y = rearr.rearrange(x, "c b h -> b (c h)")
by_hand = x.permute(1, 0, 2).contiguous().view(B, C * H)
bare_view = x.view(B, C * H)

print(f"x: {tuple(x.shape)} (c, b, h)  ->  rearr.rearrange(x, 'c b h -> b (c h)'): {tuple(y.shape)}")
print("row b=1 of the result: x[0, 1, :] then x[1, 1, :]")
print("   k = 0..3:", y[1, :4].tolist(), "...  k = 32..35:", y[1, 32:36].tolist(), "...")
print("row b=1 of a bare x.view(B, C*H): just the next 64 numbers in memory")
print("   k = 0..3:", bare_view[1, :4].tolist(), "...  k = 32..35:", bare_view[1, 32:36].tolist(), "...")

assert y.shape == (B, C * H)
assert torch.equal(y, by_hand), "the pattern is permute + contiguous + view"
assert bare_view.shape == y.shape and not torch.equal(y, bare_view), "a bare view reorders nothing"

# The index formula: out[b, c*H + h] = x[c, b, h].
for c, b, h in [(0, 0, 0), (1, 0, 0), (0, 4, 31), (1, 3, 7)]:
    assert y[b, c * H + h] == x[c, b, h]
print("out[b, c*H + h] == x[c, b, h] at every position checked")

# Why contiguous(): after the permute, view refuses (c and h are not adjacent in memory).
try:
    x.permute(1, 0, 2).view(B, C * H)
except RuntimeError as e:
    print("x.permute(1, 0, 2).view(...) without contiguous():", str(e).splitlines()[0][:80], "...")
else:
    raise AssertionError("torch accepted a view that needs a copy")
assert y.data_ptr() != x.data_ptr(), "one copy, as by hand"

# numpy: the same pattern, the same answer (transpose + reshape, which copies).
xn = x.numpy()
yn = rearr.rearrange(xn, "c b h -> b (c h)")
assert np.array_equal(yn, xn.transpose(1, 0, 2).reshape(B, C * H))
assert not np.array_equal(yn, xn.reshape(B, C * H))
assert np.array_equal(yn, y.numpy())
print("numpy agrees")
print("ok")
