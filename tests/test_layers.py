"""rearr.layers: each layer equals its function, pickles, has a clean state_dict, shows its pattern,
works in nn.Sequential, plans once per input shape and refuses bad arguments when it is built;
EinMix equals einops' EinMix (values and initialisation) and takes groups anywhere."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings

import einops
import einops.layers.torch as E
import pytest
import torch
from torch import nn

import rearr
import rearr.run.cache
import rearr.run.einsum
from rearr import RearrError
from rearr.layers import EinMix, Gather, Rearrange, Reduce, Repeat, Scatter

torch.manual_seed(0)


def _sum_axes(t: torch.Tensor, axes: tuple[int, ...]) -> torch.Tensor:
    return t.sum(axes)  # a module-level function: a lambda would not pickle


IDX = torch.tensor([[1, 0, 3], [2, 2, 0]])

# (layer, forward's positional input, forward's keywords, the function call it stands for)
CASES = [
    (Rearrange("b (t c) -> b t c", c=4), torch.rand(2, 12), {},
     lambda x: rearr.rearrange(x, "b (t c) -> b t c", c=4)),
    (Reduce("b (h 2) c -> b h c", "max"), torch.rand(2, 6, 3), {},
     lambda x: rearr.reduce(x, "b (h 2) c -> b h c", "max")),
    (Reduce("b h c -> b c", _sum_axes), torch.rand(2, 6, 3), {},
     lambda x: x.sum(1)),
    (Reduce("b h c -> c h b", "rearrange"), torch.rand(2, 6, 3), {},
     lambda x: x.permute(2, 1, 0)),
    (Repeat("b c -> b c r", r=3), torch.rand(2, 5), {},
     lambda x: rearr.repeat(x, "b c -> b c r", r=3)),
    (Gather("b n[idx] -> b k"), torch.rand(2, 4), {"idx": IDX},
     lambda x: torch.gather(x, 1, IDX)),
    (Gather("v[ids: b t] d -> b t d"), torch.rand(4, 5), {"ids": IDX},
     lambda x: x[IDX]),
    (Scatter("b k -> b n[idx]", "sum", n=4), torch.rand(2, 3), {"idx": IDX},
     lambda x: torch.zeros(2, 4).scatter_add(1, IDX, x)),
    (Scatter("b k -> b n[idx]", "max", fill=-1.0, n=4), torch.rand(2, 3), {"idx": IDX},
     lambda x: rearr.scatter(x, "b k -> b n[idx]", "max", fill=-1.0, n=4, idx=IDX)),
]
IDS = [repr(c[0]) for c in CASES]


@pytest.mark.parametrize("layer, x, kw, expected", CASES, ids=IDS)
def test_layer_equals_its_function(layer, x, kw, expected):
    torch.testing.assert_close(layer(x, **kw), expected(x), rtol=0, atol=0)


@pytest.mark.parametrize("layer, x, kw, expected", CASES, ids=IDS)
def test_layer_pickles_shows_its_pattern_and_has_no_state(layer, x, kw, expected):
    again = pickle.loads(pickle.dumps(layer))
    torch.testing.assert_close(again(x, **kw), layer(x, **kw), rtol=0, atol=0)
    assert repr(again) == repr(layer)
    assert repr(layer.pattern) in repr(layer)
    assert list(layer.state_dict()) == [] and list(layer.parameters()) == []
    if "function" not in repr(layer):
        rebuilt = eval(repr(layer), {c.__name__: c for c in (Rearrange, Reduce, Repeat, Gather, Scatter)})
        torch.testing.assert_close(rebuilt(x, **kw), layer(x, **kw), rtol=0, atol=0)


def test_layers_in_sequential_with_gradients():
    model = nn.Sequential(
        Rearrange("b (t c) -> b t c", c=16),
        EinMix("b t c -> qkv b t cout", weight_shape="qkv c cout", bias_shape="qkv cout", qkv=3, c=16, cout=8),
        Reduce("qkv b t cout -> b t qkv", "min", cout=8),
        Repeat("b t q -> b t q r", r=2),
    )
    x = torch.rand(4, 32, requires_grad=True)
    y = model(x)
    assert y.shape == (4, 2, 3, 2)
    y.sum().backward()
    assert x.grad is not None and model[1].weight.grad is not None
    assert sorted(model.state_dict()) == ["1.bias", "1.weight"]
    again = pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(again(x), y)
    assert "Rearrange('b (t c) -> b t c', c=16)" in repr(model)


def test_scatter_layer_into_and_fill():
    layer = Scatter("v[src: e] c -> v[dst: e] c", "mean")
    x, s, d = torch.rand(5, 3), torch.tensor([0, 1, 4]), torch.tensor([2, 2, 0])
    base = torch.ones(5, 3)
    torch.testing.assert_close(layer(x, base, src=s, dst=d),
                               rearr.scatter(x, "v[src: e] c -> v[dst: e] c", "mean", into=base, src=s, dst=d))
    torch.testing.assert_close(layer(x, src=s, dst=d),
                               rearr.scatter(x, "v[src: e] c -> v[dst: e] c", "mean", src=s, dst=d))
    filled = Scatter("v[src: e] c -> v[dst: e] c", "sum", fill=-1.0)
    assert filled(x, src=s, dst=d)[1].tolist() == [-1.0, -1.0, -1.0]
    with pytest.raises(RearrError) as info:
        filled(x, into=base, src=s, dst=d)
    assert info.value.code == "RA500"


def test_layers_plan_once_per_input_shape(monkeypatch):
    calls = []
    plan = rearr.planning.planner.plan
    monkeypatch.setattr(rearr.planning.planner, "plan", lambda *a, **k: calls.append(a[1]) or plan(*a, **k))
    layer = Rearrange("b (t c_once_per_shape) -> b t c_once_per_shape", c_once_per_shape=4)
    for _ in range(3):
        layer(torch.rand(2, 12))
    assert len(calls) == 1
    layer(torch.rand(3, 12))
    assert len(calls) == 2
    gather = Gather("b n[idx_once] -> b k")
    for _ in range(3):
        gather(torch.rand(2, 5), idx_once=IDX)
    assert len(calls) == 3
    rearr.run.cache.einsum_cache_clear()
    mix = EinMix("b t c -> b t d", "c d", c=3, d=2)
    for _ in range(3):
        mix(torch.rand(2, 7, 3))
    assert rearr.run.cache.einsum_plan.cache_info().misses == 1
    careful = rearr.run.einsum.careful
    monkeypatch.setattr(rearr.run.einsum, "careful", lambda *a: calls.append("careful") or careful(*a))
    mix(torch.rand(2, 7, 3))  # a Tensor and a Parameter: two classes, one backend, the fast path
    assert "careful" not in calls


@pytest.mark.parametrize("make, code", [
    (lambda: Rearrange("a b -> a"), "RA200"),
    (lambda: Rearrange("a b -> b a", c=2), "RA300"),
    (lambda: Rearrange("a (b c) -> a b c", b=2.5), "RA305"),
    (lambda: Rearrange("a (b c) -> a b c", b=None), "RA305"),  # was built, then failed at every forward
    (lambda: EinMix("b c -> b d", "c d", c=None, d=2), "RA305"),
    (lambda: EinMix("b c -> b d", "c d", "d", c=2, d=None), "RA305"),
    (lambda: Rearrange(["a -> a"]), "RA100"),
    (lambda: Rearrange("b n[i] -> b"), "RA204"),
    (lambda: Reduce("a b -> a", "median"), "RA400"),
    (lambda: Reduce("a b -> a", 3), "RA400"),
    (lambda: Reduce("a b -> a c", "sum"), "RA200"),
    (lambda: Repeat("a -> a b"), "RA301"),
    (lambda: Gather("a b -> b a"), "RA204"),
    (lambda: Gather("b n[idx] -> b", idx=3), "RA204"),
    (lambda: Scatter("b k -> b k", "sum"), "RA204"),
    (lambda: Scatter("b k -> b n[idx]", "median"), "RA400"),
    (lambda: Scatter("b k -> b n[idx]", "sum", fill="zero"), "RA500"),
    (lambda: Scatter("b k -> b n[idx]", "sum", idx=3), "RA204"),
    (lambda: EinMix("b c -> b d", "c d", c=2), "RA301"),
    (lambda: EinMix("b c -> b d", "c d e", c=2, d=3, e=4), "RA200"),
    (lambda: EinMix("b c -> b d", "c ...", c=2, d=3), "RA202"),
    (lambda: EinMix("b c", "c d", c=2, d=3), "RA206"),
    (lambda: EinMix("b c -> b d e", "c d", c=2, d=3), "RA200"),
    (lambda: EinMix("b c -> b d", "c d", "e", c=2, d=3, e=1), "RA300"),  # einops: "Axes {'e'} are not used"
    (lambda: EinMix("b c -> b d", "c d", "e", c=2, d=3), "RA200"),
    (lambda: EinMix("b c -> b d", "c d", "d", c=2), "RA301"),
    (lambda: EinMix("b c -> b ... d", "c d", "d", c=2, d=3), "RA202"),
    (lambda: EinMix("b c -> b d", "c d", c=2, d=3, z=1), "RA300"),
    (lambda: EinMix("b 2 c -> b d", "c d", c=2, d=3), "RA203"),
    (lambda: EinMix("... c -> b d", "c d", c=2, d=3), "RA202"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_bad_constructor_arguments_fail_at_construction(make, code):
    with pytest.raises(RearrError) as info:
        make()
    assert info.value.code == code


# --- EinMix -----------------------------------------------------------------------------

EINOPS_CASES = [  # einops' own test_layer cases, and the compile test's
    (("b c_in h w -> w c_out h b", "c_in c_out"), dict(bias_shape=None, c_out=13, c_in=12), (2, 12, 3, 4)),
    (("b c_in h w -> w c_out h b", "c_in c_out"), dict(bias_shape="c_out", c_out=13, c_in=12), (2, 12, 3, 4)),
    (("b c_in h w -> w c_in h b", ""), dict(bias_shape=None, c_in=12), (2, 12, 3, 4)),
    (("b c_in h w -> b c_out", "c_in h w c_out"), dict(bias_shape=None, c_in=12, h=3, w=4, c_out=5), (2, 12, 3, 4)),
    (("b t head c_in -> b t head c_out", "head c_in c_out"), dict(bias_shape=None, head=4, c_in=5, c_out=6),
     (2, 3, 4, 5)),
    (("b t c -> qkv b t cout", "qkv c cout"), dict(bias_shape="qkv cout", qkv=3, c=16, cout=8), (4, 2, 16)),
    (("t b (head cin) -> t b (head cout)", "head cin cout"), dict(bias_shape="head cout", head=2, cin=3, cout=4),
     (5, 2, 6)),
    (("b ... c -> b ... d", "c d"), dict(bias_shape="d", c=3, d=4), (2, 5, 6, 3)),
    (("b c ... -> b d ...", "c d"), dict(c=3, d=4), (2, 3, 6)),
    (("h w c -> hout w c", "h hout"), dict(bias_shape="hout", h=4, hout=5), (4, 3, 2)),
    (("b c -> b () c", "c"), dict(c=3), (2, 3)),
]


@pytest.mark.parametrize("args, kwargs, shape", EINOPS_CASES, ids=[c[0][0] for c in EINOPS_CASES])
def test_einmix_equals_einops_in_values_and_initialisation(args, kwargs, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the weight with no axes warns, in both
        torch.manual_seed(7)
        theirs = E.EinMix(*args, **kwargs)
        torch.manual_seed(7)
        ours = EinMix(*args, **kwargs)
    # Same shapes, same draws from the same bounds: einops' initialisation, exactly.
    assert sorted(ours.state_dict()) == sorted(k for k, v in theirs.state_dict().items() if v is not None)
    for name, value in ours.state_dict().items():
        torch.testing.assert_close(value, theirs.state_dict()[name], rtol=0, atol=0)
    x = torch.rand(shape)
    torch.testing.assert_close(ours(x), theirs(x))
    assert repr(ours) == repr(theirs)


def test_einops_einmix_restrictions():
    """einops' test_einmix_restrictions, against rearr's EinMix (the shim excludes the original: it
    builds einops' private _EinmixDebugger)."""
    for args, kwargs, code in [
        (("a b c d e -> e d c b a", "d a b"), dict(d=2, a=3), "RA301"),  # missing b
        (("a b c d e -> e d c b a", "w a b"), dict(d=2, a=3, b=1), "RA301"),  # w has no length
        (("(...) a -> ... a", "a"), dict(a=1), "RA202"),  # ellipsis in a group on the left
        (("(...) a -> a ...", "a"), dict(a=1, bias_shape="a"), "RA202"),
    ]:
        with pytest.raises(RearrError) as info:
            EinMix(*args, **kwargs)
        assert info.value.code == code, (args, info.value)


def test_einmix_initialisation_bounds():
    mix = EinMix("b c -> b d", "c d", "d", c=300, d=200)
    w_bound, b_bound = (3 / 300) ** 0.5, (1 / 300) ** 0.5
    assert mix.weight.abs().max() <= w_bound and mix.weight.abs().max() > 0.99 * w_bound
    assert mix.bias.abs().max() <= b_bound and mix.bias.abs().max() > 0.9 * b_bound
    # fan_in counts the weight's axes that are not on the output
    head = EinMix("b h c -> b h d", "h c d", h=10, c=30, d=5)
    assert head.weight.abs().max() <= (3 / 30) ** 0.5


def test_einmix_groups_token_mixing_over_h_w():
    # MLP-Mixer's token mixing with the weight stored as one (h*w, h2*w2) matrix: einops refuses
    # parentheses in weight_shape.
    with pytest.raises(einops.EinopsError):
        E.EinMix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", h=4, w=4, h2=2, w2=2)
    mix = EinMix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", bias_shape="h2 w2", h=4, w=4, h2=2, w2=2)
    assert mix.weight.shape == (16, 4) and mix.bias.shape == (1, 2, 2, 1)  # einops' bias layout: the flat output
    x = torch.rand(3, 16, 5)
    expected = torch.einsum("btc,ts->bsc", x, mix.weight) + mix.bias.reshape(1, 4, 1)
    torch.testing.assert_close(mix(x), expected)
    # and on the unflattened layout, a weight over (h w) mixing an image's pixels
    img = EinMix("b h w c -> b t c", "(h w) t", h=4, w=4, t=3)
    y = torch.rand(2, 4, 4, 5)
    torch.testing.assert_close(img(y), torch.einsum("bkc,kt->btc", y.reshape(2, 16, 5), img.weight))
    # a wrong input length names the user's axis
    with pytest.raises(RearrError) as info:
        mix(torch.rand(3, 15, 5))
    assert info.value.code in ("RA302", "RA303") and "(h w)" in str(info.value)


# A repeated axis: einops refuses it (no diagonal); rearr's EinMix accepted it (its einsum took the
# diagonal) until it called einops' rules. (pattern, weight_shape, bias_shape, the argument at fault,
# its text with the hint applied.)
REPEATED = [
    ("b c c -> b d", "c d", None, "pattern", "b c c2 -> b d"),  # rename one: c2 is summed over
    ("b c -> b d", "c d d", None, "weight_shape", "c d"),  # remove the second one
    ("b c -> b d", "(c c) d", None, "weight_shape", "(c ) d"),
    ("b c -> b d d", "c d", None, "pattern", "b c -> b d"),
    ("b c -> b d", "c d", "d d", "bias_shape", "d"),
]


@pytest.mark.parametrize("pattern, weight, bias, where, fixed", REPEATED)
def test_einmix_refuses_a_repeated_axis_with_a_caret_and_a_fix_that_works(pattern, weight, bias, where, fixed):
    args = {"pattern": pattern, "weight_shape": weight, "bias_shape": bias}
    with pytest.raises(RearrError) as info:
        EinMix(**args, c=3, d=4)
    e = info.value
    text = args[where]
    name = text[e.col]
    assert e.code == "RA201" and e.pattern == text and f"'{name}' appears twice" in e.message
    assert text.index(name) < e.col, "the caret is on the second one"
    # The hint, applied: rename the second one (in the pattern's input) or remove it.
    if "rename" in e.hint:
        assert f"e.g. {name}2" in e.hint
        applied = text[:e.col] + f"{name}2" + text[e.col + 1:]
    else:
        assert "remove the second" in e.hint or "write it once" in e.hint
        applied = text[:e.col] + text[e.col + 1:]
    assert " ".join(applied.split()) == fixed
    layer = EinMix(**{**args, where: applied}, c=3, d=4)
    x = torch.rand((2, 3, 5) if "c2" in applied else (2, 3))
    assert layer(x).shape == (2, 4)


def test_einmix_group_of_two_unknown_lengths_fails_at_construction_not_at_every_forward():
    # Before: built, then every forward failed (h and w are never known), against the docstring's promise.
    with pytest.raises(RearrError) as info:
        EinMix("b (h w) c -> b h w d", "c d", c=3, d=4)
    e = info.value
    assert e.code == "RA301" and e.pattern[e.col:].startswith("(h w)") and "h=" in e.hint
    layer = EinMix("b (h w) c -> b h w d", "c d", c=3, d=4, h=2)  # the hint, applied
    x = torch.rand(5, 6, 3)
    torch.testing.assert_close(layer(x), torch.einsum("bhwc,cd->bhwd", x.reshape(5, 2, 3, 3), layer.weight))
    # groups still work wherever their lengths are known, as the rearr extension promises
    mix = EinMix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", h=2, w=3, h2=2, w2=2)
    assert mix(x).shape == (5, 4, 3)


def test_importing_rearr_does_not_import_the_layers_or_torch():
    code = "import sys, rearr; print('torch' in sys.modules, 'rearr.layers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


_WITHOUT_TORCH = """
import sys

class NoTorch:  # torch is not installed, as far as this process can tell
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTorch())
import numpy as np
import rearr
print(rearr.rearrange(np.zeros((2, 3)), "a b -> b a").shape)
try:
    import rearr.layers
except ImportError as e:
    print(type(e).__name__, e.name)
    print(e)
"""


def test_the_layers_without_torch_say_how_to_install_it():
    # Once a bare "No module named 'torch'" from layers.py's first line, with no hint.
    out = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH], capture_output=True, text=True, check=True,
                         cwd=rearr.__file__.rsplit("/rearr/", 1)[0]).stdout.splitlines()
    assert out[0] == "(3, 2)"  # rearr's functions work without torch
    assert out[1] == "ModuleNotFoundError torch"  # an ImportError, as code that catches one expects
    assert "rearr.layers are torch modules, and torch is not installed" in out[2]
    assert "pip install torch" in out[2] and "pip install '.[torch]'" in out[2]


def test_layer_code_itself_has_no_graph_break(monkeypatch):
    """The layers' own forward code traces with fullgraph: the public functions are replaced by plain torch
    code here, so that what is measured is layers.py alone (the functions' own tracing is the compile work)."""
    import torch._dynamo

    api = rearr.layers.api
    monkeypatch.setattr(api, "rearrange", lambda x, pattern, **kw: x.flatten(1))
    monkeypatch.setattr(api, "reduce", lambda x, pattern, reduction, **kw: x.sum(-1))
    monkeypatch.setattr(api, "repeat", lambda x, pattern, **kw: x.unsqueeze(-1))
    monkeypatch.setattr(api, "einsum", lambda x, w, pattern, **kw: x @ w)
    monkeypatch.setattr(api, "scatter", lambda x, pattern, reduction, fill=None, into=None, **kw: x * 2)
    x = torch.rand(2, 3, 4)
    for layer, kw in [(Rearrange("a b c -> a (b c)"), {}), (Reduce("a b c -> a b", "sum"), {}),
                      (Repeat("a b c -> a b c r", r=2), {}), (EinMix("a b c -> a b d", "c d", "d", c=4, d=4), {}),
                      (Gather("a n[i] c -> a c"), {"i": torch.zeros(2, 4, dtype=torch.long)}),
                      (Scatter("a k c -> a n[i] c", "sum", n=3), {"i": torch.zeros(2, 3, 4, dtype=torch.long)})]:
        torch._dynamo.reset()
        explained = torch._dynamo.explain(layer)(x, **kw)
        assert explained.graph_break_count == 0, (layer, explained)


def test_layers_compile_with_fullgraph():
    import torch._dynamo

    model = nn.Sequential(Rearrange("b (t c) -> b t c", c=16), EinMix("b t c -> b t d", "c d", "d", c=16, d=8),
                          Reduce("b t d -> b d", "mean"), Repeat("b d -> b d r", r=2))
    x = torch.rand(4, 32)
    model(x)
    torch._dynamo.reset()
    assert torch._dynamo.explain(model)(x).graph_break_count == 0
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x))
