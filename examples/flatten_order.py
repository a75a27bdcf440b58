"""In what order does `torch.flatten(start_dim=2)` put my elements?

A (32, 64, 64, 3) tensor -- batch b, time t, feature f, channel c -- flattened
from dimension 2 on becomes (32, 64, 192). As a rearr pattern that is

    b t f c -> b t (f c)

and a group `(f c)` is row-major (C order), like torch.flatten and np.reshape:
the element at (b, t, f, c) lands at position k = 3*f + c of the merged axis
(the last axis varies fastest). Run: python examples/flatten_order.py
"""

import numpy as np
import torch

import rearr

B, T, F, C = 32, 64, 64, 3

x = torch.randn(B, T, F, C, generator=torch.Generator().manual_seed(0))
flat = torch.flatten(x, start_dim=2)
y = rearr.rearrange(x, "b t f c -> b t (f c)")

print(f"input {tuple(x.shape)}  ->  flatten(start_dim=2) {tuple(flat.shape)}")
print(f"rearr.rearrange(x, 'b t f c -> b t (f c)') {tuple(y.shape)}")
assert y.shape == (B, T, F * C)
assert torch.equal(y, flat), "the pattern is exactly flatten(start_dim=2)"

# The index formula, checked position by position: (b, t, f, c) -> (b, t, 3*f + c).
print("position (b, t, f, c)  ->  (b, t, k = 3*f + c)")
for b, t, f, c in [(0, 0, 0, 0), (0, 0, 0, 2), (0, 0, 1, 0), (5, 7, 10, 1), (31, 63, 63, 2)]:
    k = C * f + c
    print(f"  ({b:2}, {t:2}, {f:2}, {c})  ->  ({b:2}, {t:2}, {k:3})   value {y[b, t, k].item():+.4f}")
    assert y[b, t, k] == x[b, t, f, c]
    assert flat[b, t, k] == x[b, t, f, c]

# ... and for every position at once: the formula as an index table.
f_idx, c_idx = torch.meshgrid(torch.arange(F), torch.arange(C), indexing="ij")
k_table = (C * f_idx + c_idx).reshape(-1)
assert torch.equal(k_table, torch.arange(F * C)), "k = 3*f + c enumerates 0 .. 191 in order"
assert torch.equal(y[:, :, k_table], x.reshape(B, T, F * C))

# The merged axis keeps one channel's neighbours apart: the 3 channels of one
# feature are adjacent (k = 3*f, 3*f+1, 3*f+2), not one channel's 64 features.
assert torch.equal(y[0, 0, 0:3], x[0, 0, 0, :])
assert not torch.equal(y[0, 0, 0:F], x[0, 0, :, 0])

# The same order on numpy (np.reshape is row-major too), and the inverse pattern.
xn = x.numpy()
yn = rearr.rearrange(xn, "b t f c -> b t (f c)")
assert np.array_equal(yn, xn.reshape(B, T, F * C))
assert np.array_equal(yn, flat.numpy())
back = rearr.rearrange(yn, "b t (f c) -> b t f c", c=3)
assert np.array_equal(back, xn)
print("numpy agrees; 'b t (f c) -> b t f c' with c=3 undoes it")

# Merging in the other order is a different pattern -- and not a flatten.
other = rearr.rearrange(x, "b t f c -> b t (c f)")  # k = 64*c + f
assert other[3, 4, 64 * 2 + 10] == x[3, 4, 10, 2]
assert not torch.equal(other, flat)
print("'b t f c -> b t (c f)' would put (f, c) at k = 64*c + f instead")
print("ok")
