"""The public API stays what users call: the names of rearr.__all__, and each function's parameters
(names, kinds, defaults), whatever moves inside the package; and every way einops 0.8 lets its
functions and layers be called works on rearr's, with einops' result."""

from __future__ import annotations

import inspect

import einops
import einops.layers.torch as einops_layers
import numpy as np
import pytest
import torch

import rearr
import rearr.layers

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


# --- einops' calling conventions: every form einops 0.8 accepts, with the same result ---------------

_X = np.arange(24.0).reshape(2, 3, 4)
CALL_FORMS = {  # name: (the call, on the module m: einops or rearr)
    "rearrange(tensor=, pattern=)": lambda m: m.rearrange(tensor=_X, pattern="a b c -> c (a b)"),
    "rearrange(x, pattern=, length)": lambda m: m.rearrange(_X, pattern="a b (c d) -> a b c d", d=2),
    "rearrange(list)": lambda m: m.rearrange([_X[0], _X[1]], "n b c -> b c n"),
    "reduce(tensor=, pattern=, reduction=)": lambda m: m.reduce(tensor=_X, pattern="a b c -> a", reduction="max"),
    "reduce(x, p, reduction=)": lambda m: m.reduce(_X, "a b c -> a c", reduction="mean"),
    "reduce(x, p, 'rearrange')": lambda m: m.reduce(_X, "a b c -> c b a", "rearrange"),
    "reduce(x, p, callable)": lambda m: m.reduce(_X, "a b c -> a", lambda t, axes: t.sum(axis=axes)),
    "repeat(tensor=, pattern=, length)": lambda m: m.repeat(tensor=_X, pattern="a b c -> a b c r", r=2),
    "einsum(x, y, pattern)": lambda m: m.einsum(_X, _X, "a b c, a d c -> a b d"),
    "einsum(x, pattern)": lambda m: m.einsum(_X, "a b c -> c b"),
    "pack(tensors=, pattern=)": lambda m: m.pack(tensors=[_X, _X[:, 0]], pattern="a * c")[0],
    "unpack(tensor=, packed_shapes=, pattern=)": lambda m: m.unpack(
        tensor=_X, packed_shapes=[(1,), (2,)], pattern="a * c")[1],
    "parse_shape(x=, pattern=)": lambda m: m.parse_shape(x=_X, pattern="a _ c"),
    "asnumpy(tensor=)": lambda m: m.asnumpy(tensor=torch.ones(2, 3)),
}


@pytest.mark.parametrize("form", CALL_FORMS)
def test_every_einops_call_form_is_accepted_with_einops_result(form):
    call = CALL_FORMS[form]
    want, got = call(einops), call(rearr)
    if isinstance(want, dict):
        assert got == want
    else:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


LAYER_FORMS = {  # name: (the layer and its call, on the layer module m)
    "Rearrange(pattern=, length)(input=)": lambda m: m.Rearrange(pattern="b (c d) -> b c d", d=2)(input=_T),
    "Reduce(pattern=, reduction=)(input=)": lambda m: m.Reduce(pattern="b c -> b", reduction="sum")(input=_T),
    "Reduce(pattern, 'max')": lambda m: m.Reduce("b (c 2) -> b c", "max")(_T),
}
_T = torch.arange(8.0).reshape(2, 4)


@pytest.mark.parametrize("form", LAYER_FORMS)
def test_every_einops_layer_call_form_is_accepted_with_einops_result(form):
    call = LAYER_FORMS[form]
    torch.testing.assert_close(call(rearr.layers), call(einops_layers))


def test_einmix_takes_einops_keywords():
    torch.manual_seed(0)
    kwargs = {"pattern": "b c -> b d", "weight_shape": "c d", "bias_shape": "d", "c": 4, "d": 3}
    ours, theirs = rearr.layers.EinMix(**kwargs), einops_layers.EinMix(**kwargs)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(input=_T), theirs(input=_T))
