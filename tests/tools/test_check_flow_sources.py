"""Shapes that rearr check's flow learns from more than rearr's calls (rearr/tools/flow.py): unpacked
shapes, rank tests, docstring shape lines (docstrings.py), torch's layers in nn.Sequential, and a class's
attributes set in __init__ (layers, Sequentials, EinMix, parameter tensors). Each finding is what the
library (or the model) raises when the code runs with such a tensor, and the message says where the
shape came from; what is not certain gives nothing."""

from __future__ import annotations

import textwrap

import pytest

from rearr.errors import RearrError
from rearr.tools import lint

HEAD = "import torch\nfrom torch import nn\nimport rearr\nfrom rearr.layers import EinMix, Rearrange\n\n"


def findings(code: str) -> list[tuple[int, str, str]]:
    return [(p.line, p.code, p.message) for p in lint.check_source(HEAD + textwrap.dedent(code))]


def run(code: str, *args):
    """Run the code's function f (or class M's forward) on the arguments."""
    namespace: dict = {}
    exec(compile(HEAD + textwrap.dedent(code), "m.py", "exec"), namespace)
    if "M" in namespace:
        return namespace["M"]()(*args)
    return namespace["f"](*args)


@pytest.mark.parametrize("code, shape, message", [
    ("def f(x):\n    b, n, _ = x.shape\n    return rearr.rearrange(x, 'b c h w -> b (c h w)')\n", (2, 3, 4),
     "the pattern has 4 input dimensions, the tensor has 3: line 7 unpacks x's shape ('b, n, _ = x.shape')"),
    ("def f(x):\n    *_, h, w = x.shape\n    return rearr.rearrange(x, 'c -> c')\n", (2, 3, 4),
     "the pattern has 1 input dimensions, the tensor has at least 2: line 7 unpacks x's shape ('*_, h, w = x.shape')"),
    ("def f(x):\n    if x.ndim == 3:\n        return rearr.rearrange(x, 'b c h w -> b (c h w)')\n", (2, 3, 4),
     "the pattern has 4 input dimensions, the tensor has 3: the test on line 7 says so ('x.ndim == 3')"),
    ("def f(x):\n    if len(x.shape) != 2:\n        raise ValueError\n"
     "    return rearr.rearrange(x, 'b c h -> b (c h)')\n", (2, 3),
     "the pattern has 3 input dimensions, the tensor has 2: the test on line 7 says so ('len(x.shape) != 2')"),
    ("def f(x):\n    assert x.dim() == 2\n    return rearr.rearrange(x, 'b c h -> b (c h)')\n", (2, 3),
     "the pattern has 3 input dimensions, the tensor has 2: the test on line 7 says so ('x.dim() == 2')"),
    ("def f(x):\n    if not x.ndim == 2:\n        return None\n    return rearr.rearrange(x, 'b c h -> b (c h)')\n",
     (2, 3), "the pattern has 3 input dimensions, the tensor has 2: the test on line 7 says so ('x.ndim == 2')"),
    ('def f(x):\n    """Flatten.\n\n    Args:\n        x (torch.Tensor): (batch, seq, dim)\n    """\n'
     "    return rearr.rearrange(x, 'b c h w -> b (c h w)')\n", (2, 3, 4),
     "the pattern has 4 input dimensions, the tensor has 3: x is '(batch, seq, dim)', as its docstring says on "
     "line 10"),
    ('def f(x):\n    """x: Tensor of shape (b, 6)"""\n    return rearr.rearrange(x, "b (h w) -> b h w", h=4)\n',
     (2, 6), "dimension 1 of x has length 6, which 'h' = 4 does not divide: x is '(b, 6)', as its docstring says on "
     "line 7"),
])
def test_shapes_the_code_states(code, shape, message):
    ((line, code_, found),) = findings(code)
    assert found == message
    with pytest.raises(RearrError) as info:  # the library raises the same code when it runs
        run(code, __import__("torch").zeros(shape))
    assert info.value.code == code_


def test_the_fix_of_a_docstring_finding_names_the_docstring():
    docstring = 'def f(x):\n    """x: (b, n, d)"""\n    return rearr.rearrange(x, '
    (p,) = lint.check_source(HEAD + docstring + '"b h w -> b (h w) c")\n')
    assert p.code == "RA200"  # the pattern's own error first; the flow only follows valid calls
    (p,) = lint.check_source(HEAD + docstring + '"b c -> c b")\n')
    assert p.hint.endswith("or change the docstring on line 7, if it is out of date")


@pytest.mark.parametrize("code", [
    # the rank before the unpacking is kept; a rebinding after it ends it
    "def f(x):\n    b, n, _ = x.shape\n    x = x.flatten()\n    return rearr.rearrange(x, 'b -> b')\n",
    "def f(x):\n    b, n, _ = x.shape\n    x = other(x)\n    return rearr.rearrange(x, 'b c h w -> b (c h w)')\n",
    # the other branch of a rank test, and after a branch that does not leave
    "def f(x):\n    if x.ndim == 3:\n        pass\n    else:\n"
    "        return rearr.rearrange(x, 'b c h w -> b (c h w)')\n",
    "def f(x):\n    if x.ndim == 3:\n        x = x[None]\n    return rearr.rearrange(x, 'b c h w -> b (c h w)')\n",
    "def f(x):\n    if x.ndim == 3:\n        print(x)\n    return rearr.rearrange(x, 'b c h w -> b (c h w)')\n",
    "def f(x):\n    if x.shape[0] == 3:\n        return rearr.rearrange(x, 'b c h w -> b (c h w)')\n",  # not a rank
    "def f(x, n):\n    if x.ndim == n:\n        return rearr.rearrange(x, 'b c h w -> b (c h w)')\n",
    # docstring lines that say more than a shape, or two that disagree, or name no parameter
    'def f(x):\n    """x: (b, n, d) or (n, d)"""\n    return rearr.rearrange(x, "b c h w -> b (c h w)")\n',
    'def f(x):\n    """x: (b, n, d)\n    x: (b, n)"""\n    return rearr.rearrange(x, "b c h w -> b (c h w)")\n',
    'def f(x):\n    """y: (b, n, d)"""\n    return rearr.rearrange(x, "b c h w -> b (c h w)")\n',
    'def f(x):\n    """x: (b, n, d), optional"""\n    return rearr.rearrange(x, "b c h w -> b (c h w)")\n',
])
def test_what_is_not_certain_gives_nothing(code):
    assert findings(code) == []


# --- nn.Sequential with torch's layers -------------------------------------------------------------


@pytest.mark.parametrize("layers, x, message", [
    ('nn.Linear(10, 12), Rearrange("b (h d) -> b h d", h=5)', (2, 10),
     "dimension -1 of the layer's input has length 12, which 'h' = 5 does not divide: the layer's input is what "
     "'nn.Linear(10, 12)' on line 6 makes"),
    ('nn.Conv2d(3, 64, 4, 4), nn.GELU(), Rearrange("b (c k) h w -> b c k h w", k=5)', (2, 3, 8, 8), None),
    ('nn.Embedding(100, 64), nn.LayerNorm(64), Rearrange("b n (h d) -> b h n d", h=5)', None, None),
    ('Rearrange("b c h w -> b (c h w)"), nn.Dropout(0.1), Rearrange("b c h w -> b h w c")', (2, 3, 4, 5), None),
    ('Rearrange("b c -> b c"), nn.Linear(4, 6), torch.nn.ReLU(), Rearrange("b c d -> b d c")', (2, 4), None),
])
def test_torch_layers_pass_on_what_they_make(layers, x, message):
    code = f"M = lambda: nn.Sequential({layers})\n"
    (found,) = findings(code)
    if message is not None:
        assert found[2] == message
    if x is not None:
        with pytest.raises(RearrError) as info:  # the model raises the same code
            run(code, __import__("torch").zeros(x))
        assert info.value.code == found[1]


@pytest.mark.parametrize("layers", [
    'nn.Linear(10, 12), Rearrange("b (h d) -> b h d", h=4)',  # 12 = 4 * 3
    'nn.Linear(10, width), Rearrange("b (h d) -> b h d", h=5)',  # a width not known
    'nn.Flatten(), Rearrange("b (h d) -> b h d", h=5)',  # a layer whose effect is not known ends the chain
    'Custom(), Rearrange("b c h w -> b h w c")',
    'nn.Conv2d(3, 64, 4), Rearrange("b c h w -> b (h w) c")',  # batched or not: at least 3
])
def test_torch_layers_that_give_nothing_certain(layers):
    assert findings(f"m = nn.Sequential({layers})\n") == []


# --- a class's attributes ------------------------------------------------------------------------

VIT = '''
class M(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.to_patches = nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
            nn.LayerNorm(12),
            nn.Linear(12, dim),
        )
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.mix = EinMix("b n c -> b n d", weight_shape="c d", c=32, d=48)

    def forward(self, img):
        x = self.to_patches(img)
        b, n, _ = x.shape
        {line}
'''


@pytest.mark.parametrize("line, message", [
    ("return rearr.rearrange(x, 'b n -> n b')",
     "the pattern has 2 input dimensions, the tensor has 3: x is what 'nn.Linear(12, dim)' on line 13 makes"),
    ("return rearr.repeat(self.cls_token, '1 d -> b 1 d', b=b)",
     "the pattern has 2 input dimensions, the tensor has 3: self.cls_token is 'torch.randn(1, 1, dim)' (set on line "
     "15)"),
    ("return rearr.rearrange(self.mix(x), 'b n (h k) -> b h n k', h=5)",
     "dimension 2 of the result of line 21 has length 48, which 'h' = 5 does not divide: the result of line 21 is "
     "what the layer on line 16 makes ('b n d')"),
])
def test_attributes_set_in_init_are_followed_in_the_methods(line, message):
    code = VIT.replace("{line}", line)
    ((_, code_, found),) = findings(code)
    assert found == message
    with pytest.raises(RearrError) as info:  # the model raises the same code
        run(code, __import__("torch").zeros(2, 3, 8, 8))
    assert info.value.code == code_


def test_a_layer_attribute_is_checked_against_what_it_is_given():
    code = VIT.replace("x = self.to_patches(img)", "x = self.to_patches(rearr.rearrange(img, 'b c h w -> b (c h w)'))")
    ((line, code_, message),) = findings(code.replace("{line}", "return x"))
    assert line == 11 and code_ == "RA304"  # at the layer's pattern, in __init__
    assert message == ("the pattern has 4 input dimensions, the tensor has 2: the result of line 19 is 'b (c h w)' "
                       "(from line 19)")


@pytest.mark.parametrize("change", [
    "        self.cls_token = nn.Parameter(torch.randn(1, dim))\n",  # set twice
    "        setattr(self, 'cls_token', None)\n",
    "        self.cls_token.data = torch.zeros(1, 1, 1, 1)\n",  # a store into it
    "        self.cls_token.unsqueeze_(0)\n",  # a shape-changing method in place
])
def test_attributes_that_may_change_are_not_trusted(change):
    code = VIT.replace("{line}", "return rearr.repeat(self.cls_token, '1 d -> b 1 d', b=b)")
    code = code.replace("        self.mix =", change + "        self.mix =")
    assert findings(code) == []


def test_an_attribute_set_in_another_class_of_the_file_is_not_trusted():
    code = VIT.replace("{line}", "return rearr.rearrange(x, 'b n -> n b')").replace("b, n, _ = x.shape", "pass")
    assert [c for _, c, _ in findings(code)] == ["RA304"]
    code = code + (
        "\n\nclass Sub(M):\n    def __init__(self):\n        super().__init__()\n"
        "        self.to_patches = nn.Identity()\n")
    assert findings(code) == []
