"""`np.arange(24).reshape(2, 3, 4).transpose(1, 0, 2).flatten()` as one pattern.

Name the axes of the (2, 3, 4) array a, b, c. transpose(1, 0, 2) puts them in
the order b a c, and flatten() reads that in row-major order, so the whole
chain is

    a b c -> (b a c)

and the element x[a, b, c] lands at k = b*(2*4) + a*4 + c.
Run: python examples/numpy_transpose_flatten.py
"""

import numpy as np

import rearr

x = np.arange(24).reshape(2, 3, 4)
by_hand = x.transpose(1, 0, 2).flatten()
y = rearr.rearrange(x, "a b c -> (b a c)")

print("x.transpose(1, 0, 2).flatten():    ", by_hand.tolist())
print("rearr.rearrange(x, 'a b c -> (b a c)'):", y.tolist())
assert y.shape == (24,)
assert np.array_equal(y, by_hand)

A, B, C = x.shape
for a in range(A):
    for b in range(B):
        for c in range(C):
            assert y[b * (A * C) + a * C + c] == x[a, b, c]
print("y[b*8 + a*4 + c] == x[a, b, c] for all 24 positions")

# The same with torch, if it is installed: permute + flatten.
try:
    import torch
except ImportError:
    print("torch not installed; numpy only")
else:
    t = torch.arange(24).reshape(2, 3, 4)
    yt = rearr.rearrange(t, "a b c -> (b a c)")
    assert torch.equal(yt, t.permute(1, 0, 2).flatten())
    assert np.array_equal(yt.numpy(), y)
    print("torch agrees")
print("ok")
