"""The public API stays what users call: the names of rearr.__all__, and each function's parameters
(names, kinds, defaults), whatever moves inside the package."""

from __future__ import annotations

import inspect

import rearr

P, K, VP, VK = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.KEYWORD_ONLY,
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
PK = inspect.Parameter.POSITIONAL_OR_KEYWORD
E = inspect.Parameter.empty

PUBLIC = {
    "asnumpy": [("tensor", PK, E)],
    "einsum": [("tensors_and_pattern", VP, E), ("axes_lengths", VK, E)],
    "explain": [("pattern", PK, E), ("shapes", VP, E), ("op", K, "rearrange"), ("reduction", K, None),
                ("backend", K, "torch"), ("show", K, False), ("requires_grad", K, False),
                ("lengths", VK, E)],
    "pack": [("tensors", PK, E), ("pattern", PK, E)],
    "parse_shape": [("x", PK, E), ("pattern", PK, E)],  # einops' names: each may be passed as a keyword
    "rearrange": [("tensor", PK, E), ("pattern", PK, E), ("check_bounds", K, True), ("axes_lengths", VK, E)],
    "reduce": [("tensor", PK, E), ("pattern", PK, E), ("reduction", PK, E), ("axes_lengths", VK, E)],
    "repeat": [("tensor", PK, E), ("pattern", PK, E), ("axes_lengths", VK, E)],
    "scatter": [("src", P, E), ("pattern", PK, E), ("reduction", PK, E), ("fill", K, None), ("into", K, None),
                ("check_bounds", K, True), ("lengths_and_indices", VK, E)],
    "unpack": [("tensor", PK, E), ("packed_shapes", PK, E), ("pattern", PK, E)],
}


def test_all_is_unchanged():
    assert sorted(rearr.__all__) == sorted([*PUBLIC, "RearrError"])
    assert issubclass(rearr.RearrError, ValueError)


def test_every_public_signature_is_unchanged():
    for name, want in PUBLIC.items():
        got = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(rearr, name)).parameters.values()]
        assert got == want, name
