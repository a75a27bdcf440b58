"""`rearr check` follows ranks from call to call within a function body (rearr/tools/flow.py):
certain mismatches are RA304, and whatever could change a tensor ends what is known of it."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import rearr
from rearr.errors import RearrError
from rearr.tools import lint

HEAD = "import rearr\nfrom rearr import rearrange as ra\n\n"


def findings(body: str, einops: bool = False) -> list[tuple[int, str, str]]:
    source = HEAD + "def f(x, cond, other):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return [(p.line, p.code, p.message) for p in lint.check_source(source, einops=einops)]


def test_a_rank_that_cannot_match_the_next_pattern():
    found = findings("""
        y = rearr.rearrange(x, "b c h w -> b (c h w)")
        return ra(y, "b c h w -> b h w c")
    """)
    assert found == [(7, "RA304", "y has 2 dimensions ('b (c h w)', from line 6), and the input side 'b c h w' has 4")]


def test_the_library_raises_the_same_code_when_it_runs():
    y = rearr.rearrange(np.zeros((2, 3, 4, 5)), "b c h w -> b (c h w)")
    with pytest.raises(RearrError) as info:
        rearr.rearrange(y, "b c h w -> b h w c")
    assert info.value.code == "RA304"


@pytest.mark.parametrize("body", [
    # reduce and repeat give their output's rank too; unit axes count
    'y = rearr.reduce(x, "b c h w -> b c", "mean")\nz = rearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.repeat(x, "h w -> h w c", c=3)\nz = rearr.rearrange(y, "h w -> w h")\n',
    'y = rearr.rearrange(x, "b c -> b () c")\nz = rearr.rearrange(y, "b c -> c b")\n',
    'y: object = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.reduce(y, "b c h -> b", "sum")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nprint(rearr.rearrange(y, "b c h -> b h c"))\n',
    # a '...' in a group is one dimension; a pattern with '...' needs at least its named dimensions
    'y = rearr.rearrange(x, "b ... -> b (...)")\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.rearrange(y, "b c h ... -> b h c ...")\n',
])
def test_followed_forms(body):
    assert [code for _, code, _ in findings(body)] == ["RA304"]


@pytest.mark.parametrize("body", [
    # branches, loops, with, try: whatever they bind ends what is known; calls in them are not checked
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nif cond:\n    y = x\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nfor y in other:\n    pass\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nif cond:\n    rearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nwith other as y:\n    pass\nrearr.rearrange(y, "b c h -> b h c")\n',
    # rebinding
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ny = x\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ny += 1\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\n(y := x)\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ndel y\ny = x\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y, z = rearr.rearrange(x, "b c h -> b (c h)"), x\nrearr.rearrange(y, "b c h -> b h c")\n',
    # calls that rearr does not know, and methods, may change the tensor in place
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ny.unsqueeze_(-1)\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nchange(y)\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nchange(key=[y])\nrearr.rearrange(y, "b c h -> b h c")\n',
    # names shared with other code
    'global y\ny = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ndef g():\n    nonlocal y\n    y = x\ng()\n'
    'rearr.rearrange(y, "b c h -> b h c")\n',
    # a lambda runs later, after what is known may have changed
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ng = lambda: rearr.rearrange(y, "b c h -> b h c")\n',
    # '...' that may stand for any number of dimensions, and index brackets, give no certain rank;
    # *args hides the tensor
    'y = rearr.rearrange(x, "b ... -> b ...")\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.rearrange(y, "b ... -> ... b")\n',
    'y = rearr.rearrange(x, "b n[i] -> b", i=other)\nrearr.rearrange(y, "b c -> c b")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.rearrange(*[y], "b c h -> b h c")\n',
    # a pattern that is not a literal, or not rearr's (without --einops)
    'y = rearr.rearrange(x, cond)\nrearr.rearrange(y, "b c h -> b h c")\n',
    # matching ranks
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.rearrange(y, "b ch -> ch b")\n',
])
def test_not_followed(body):
    assert [code for _, code, _ in findings(body)] == []


def test_module_level_code_and_other_functions_are_not_followed():
    source = HEAD + 'y = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.rearrange(y, "b c h -> b h c")\n'
    assert lint.check_source(source) == []
    source = HEAD + ('def f(x):\n    y = rearr.rearrange(x, "b c h -> b (c h)")\n'
                     'def g(y):\n    return rearr.rearrange(y, "b c h -> b h c")\n')
    assert lint.check_source(source) == []


def test_einops_calls_with_the_flag():
    source = ("import einops\n\ndef f(x):\n    y = einops.rearrange(x, 'b c h -> b (c h)')\n"
              "    return einops.rearrange(y, 'b c h -> b h c')\n")
    assert lint.check_source(source) == []
    assert [p.code for p in lint.check_source(source, einops=True)] == ["RA304"]


def test_noqa_and_selection_apply(tmp_path):
    body = 'y = rearr.rearrange(x, "b c h -> b (c h)")\nrearr.rearrange(y, "b c h -> b h c")  # noqa: RA304\n'
    assert findings(body) == []


# --- layers chained in nn.Sequential ----------------------------------------------------------

SEQ_HEAD = "import torch\nfrom torch import nn\nfrom rearr.layers import Rearrange, Reduce, Repeat\n"


@pytest.mark.parametrize("model, found", [
    ('nn.Sequential(Rearrange("b c h w -> b (c h w)"), Reduce("b c h -> b c", "mean"))', ["RA304"]),
    ('torch.nn.Sequential(Reduce("b c h w -> b c", "max"), Rearrange("b c h -> b h c"))', ["RA304"]),
    ('nn.Sequential(Repeat("b c -> b c r", r=2), Rearrange("b c -> c b"))', ["RA304"]),
    # matching, or something between them, or a '...' side
    ('nn.Sequential(Reduce("b c h w -> b c h", "max"), Rearrange("b c h -> b h c"))', []),
    ('nn.Sequential(Rearrange("b c h w -> b (c h w)"), nn.Unflatten(1, (3, 4, 5)), Rearrange("b c h w -> b h w c"))',
     []),
    ('nn.Sequential(Rearrange("b ... -> b (...)"), Rearrange("b c h -> b h c"))', ["RA304"]),  # (...) is one
    ('nn.Sequential(Rearrange("b ... -> b ..."), Rearrange("b c h -> b h c"))', []),
    # flax's and keras' Sequential take a list; another Sequential is not torch's
    ('nn.Sequential([Rearrange("b c h w -> b (c h w)"), Rearrange("b c h w -> b h w c")])', []),
    ('Sequential(Rearrange("b c h w -> b (c h w)"), Rearrange("b c h w -> b h w c"))', []),
])
def test_sequential_layers_must_chain(model, found):
    assert [p.code for p in lint.check_source(f"{SEQ_HEAD}model = {model}\n")] == found


def test_the_sequential_finding_is_what_the_model_raises():
    pytest.importorskip("torch")
    import torch

    from rearr.layers import Rearrange, Reduce

    model = torch.nn.Sequential(Rearrange("b c h w -> b (c h w)"), Reduce("b c h -> b c", "mean"))  # noqa: RA304
    with pytest.raises(RearrError) as info:
        model(torch.zeros(2, 3, 4, 5))
    (problem,) = lint.check_source(
        f'{SEQ_HEAD}model = nn.Sequential(Rearrange("b c h w -> b (c h w)"), Reduce("b c h -> b c", "mean"))\n')
    assert problem.code == info.value.code == "RA304"
    assert "line 4" in problem.message and problem.line == 4


def test_einops_layers_chain_with_the_flag():
    source = ("from torch import nn\nfrom einops.layers.torch import Rearrange\n"
              'm = nn.Sequential(Rearrange("b c h w -> b (c h w)"), Rearrange("b c h w -> b h w c"))\n')
    assert lint.check_source(source) == []
    assert [p.code for p in lint.check_source(source, einops=True)] == ["RA304"]
