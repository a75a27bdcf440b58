"""rearr's main job: one pattern instead of permute + contiguous + view.

Needs numpy only (torch is optional). Run: python examples/quickstart.py
"""

import sys

import numpy as np

import rearr

# A (C, B, H) array: 2 channels of 5 samples of 32 values. We want (B, C*H):
# per sample, the channels side by side -- out[b, c*32 + h] = x[c, b, h].
x = np.arange(2 * 5 * 32).reshape(2, 5, 32)
y = rearr.rearrange(x, "c b h -> b (c h)")

print("x.shape =", x.shape, "  (c, b, h)")
print("rearr.rearrange(x, 'c b h -> b (c h)').shape =", y.shape)
print("row b=1:", y[1, :4], "...", y[1, 30:34], "...  (channel 0, then channel 1)")

# The plan: what the pattern lowers to, as the code one would write by hand.
plan = rearr.explain("c b h -> b (c h)", x.shape, backend="numpy")
print()
print(plan)

# The plan is the truth: its code, run by hand, gives rearr's result; its formula holds.
namespace = {"np": np, plan.input_name: x}
exec("\n".join(plan.code), namespace)
assert np.array_equal(namespace[plan.input_name], y)
assert plan.formula == "out[b, k] = x[k // 32, b, k % 32]" and not plan.is_view

by_hand = x.transpose(1, 0, 2).reshape(5, 64)
assert np.array_equal(y, by_hand)
assert not np.array_equal(y, x.reshape(5, 64)), "a bare reshape keeps memory order: the wrong answer"
k = np.arange(64)
for b in range(5):
    assert np.array_equal(y[b, k], x[k // 32, b, k % 32])

# The same pattern reads as well backwards, and with a gather bracket it picks
# elements: here, for every sample, the value at position h = 7 of each channel.
assert np.array_equal(rearr.rearrange(y, "b (c h) -> c b h", c=2), x)
picked = rearr.rearrange(x, "c b h[idx: c] -> b c", idx=np.array([7, 7]))
assert np.array_equal(picked, x[:, :, 7].T)

assert "torch" not in sys.modules, "import rearr never imports torch"
print("\nok")
