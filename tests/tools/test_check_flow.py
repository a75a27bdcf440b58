"""`rearr check` follows shapes from call to call within a function body (rearr/tools/flow.py), from
jaxtyping annotations (rearr/tools/jaxtyping.py) and along nn.Sequential: certain rank mismatches are
RA304, certain length conflicts RA302 and RA303, and whatever could change a tensor ends what is known."""

from __future__ import annotations

import pathlib
import re
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
    assert found == [(7, "RA304", "the pattern has 4 input dimensions, the tensor has 2: y is 'b (c h w)' "
                                  "(from line 6)")]


def test_the_library_raises_the_same_code_when_it_runs():
    y = rearr.rearrange(np.zeros((2, 3, 4, 5)), "b c h w -> b (c h w)")
    with pytest.raises(RearrError) as info:
        rearr.rearrange(y, "b c h w -> b h w c")  # noqa: RA304
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
    # branches, loops, with, try: whatever they bind ends what is known
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nif cond:\n    y = x\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nfor y in other:\n    pass\nrearr.rearrange(y, "b c h -> b h c")\n',
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


def test_einops_calls_unless_turned_off():
    source = ("import einops\n\ndef f(x):\n    y = einops.rearrange(x, 'b c h -> b (c h)')\n"
              "    return einops.rearrange(y, 'b c h -> b h c')\n")
    assert lint.check_source(source, einops=False) == []
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


def test_einops_layers_chain_unless_turned_off():
    source = ("from torch import nn\nfrom einops.layers.torch import Rearrange\n"
              'm = nn.Sequential(Rearrange("b c h w -> b (c h w)"), Rearrange("b c h w -> b h w c"))\n')
    assert lint.check_source(source, einops=False) == []
    assert [p.code for p in lint.check_source(source, einops=True)] == ["RA304"]


# --- lengths, jaxtyping annotations, and what ends what is known --------------------------------

JT_HEAD = ("import jax\nimport numpy as np\nimport torch\nfrom torch import Tensor\nimport rearr\n"
           "from jaxtyping import Float, Int, Shaped, jaxtyped\n\n")


def jt_findings(params: str, body: str, decorator: str = "") -> list[tuple[str, str]]:
    source = JT_HEAD + decorator + f"def f({params}):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return [(p.code, p.message) for p in lint.check_source(source)]


# (the body of f(x), the shape of an x that lets its first call run) -> the code the second call raises
RUNS = [
    ('y = rearr.repeat(x, "h w -> h w c", c=6)\nrearr.rearrange(y, "h w (c k) -> h w c k", k=4)\n', (2, 3), "RA302"),
    ('y = rearr.rearrange(x, "b (h w) -> b h w", h=2, w=3)\nrearr.rearrange(y, "b h w -> b (h w)", h=4)\n', (5, 6),
     "RA303"),
    ('y = rearr.repeat(x, "h -> h c", c=3)\nrearr.rearrange(y, "h () -> h")\n', (4,), "RA303"),
    ('y = rearr.repeat(x, "h -> h c", c=6)\nrearr.rearrange(y, "h (c k) -> h c k", c=len(cond), k=4)\n', (2,), "RA303"),
    ('rearr.rearrange(rearr.rearrange(x, "b c h -> b (c h)"), "b c h -> b h c")\n', (2, 3, 4), "RA304"),
    ('y = rearr.rearrange(x, "b c h -> b (c h)")\ny = rearr.rearrange(y, "b ch -> ch b")\n'
     'rearr.reduce(y, "a b c -> a", "sum")\n', (2, 3, 4), "RA304"),
    ('y = rearr.reduce(x, "b (c 2) -> b c", "max", c=3)\nrearr.rearrange(y, "b (c k) -> b c k", k=2)\n', (2, 6),
     "RA302"),
    ('y = rearr.repeat(x, "b -> b (r s)", r=2, s=3)\nrearr.rearrange(y, "b (c k) -> b c k", k=4)\n', (2,), "RA302"),
    ('y = rearr.rearrange(x, "b c -> b c")\nif cond:\n    rearr.rearrange(y, "b c h -> b h c")\n', (2, 3), "RA304"),
    ('y = rearr.rearrange(x, "b c -> b c")\nfor i in cond:\n    rearr.rearrange(y, "b c h -> b h c")\n', (2, 3),
     "RA304"),
    ('y = rearr.repeat(x, "b -> b c", c=3)\nwith np.errstate():\n    rearr.rearrange(y, "b (c k) -> b c k", k=2)\n',
     (2,), "RA302"),
]


@pytest.mark.parametrize("body, shape, code", RUNS)
def test_a_finding_is_what_the_library_raises_when_it_runs(body, shape, code):
    assert [c for _, c, _ in findings(body)] == [code]
    source = "import numpy as np\nimport rearr\n\ndef f(x, cond, other):\n" + textwrap.indent(body, "    ")
    scope: dict = {}
    exec(compile(source, "<flow>", "exec"), scope)
    with pytest.raises(RearrError) as info:
        scope["f"](np.zeros(shape), [1], None)
    assert info.value.code == code


def test_a_length_finding_names_both_places_and_a_fix_that_works():
    (problem,) = lint.check_source(HEAD + 'def f(x):\n    y = rearr.repeat(x, "h w -> h w c", c=6)\n'
                                   '    return rearr.rearrange(y, "h w (c k) -> h w c k", k=4)\n')
    assert problem.code == "RA302" and problem.line == 6
    assert problem.message == "dimension 2 of y has length 6, which 'k' = 4 does not divide: y is 'h w c' (from line 5)"
    assert problem.hint == "pass a length of 'k' that divides 6, e.g. k=3, or change the output side of line 5"
    y = rearr.repeat(np.zeros((2, 3)), "h w -> h w c", c=6)
    with pytest.raises(RearrError) as info:  # the library says the same, but where the shape came from
        rearr.rearrange(y, "h w (c k) -> h w c k", k=4)  # noqa: RA302
    assert problem.message.startswith(info.value.message.replace("input dimension 2", "dimension 2 of y"))
    assert rearr.rearrange(y, "h w (c k) -> h w c k", k=3).shape == (2, 3, 2, 3)  # the fix, applied


@pytest.mark.parametrize("params, body, code", [
    ('x: Float[Tensor, "b c h"]', 'return rearr.rearrange(x, "b c h w -> b (c h w)")', "RA304"),
    ('x: Float[Tensor, "b 6 h w"]', 'return rearr.rearrange(x, "b (h w) x y -> b h w x y", h=4)', "RA302"),
    ('x: Float[torch.Tensor, "b 4"]', 'return rearr.rearrange(x, "b c -> c b", c=3)', "RA303"),
    ('x: Int[np.ndarray, "b rows=4"]', 'return rearr.rearrange(x, "b c -> c b", c=3)', "RA303"),  # a doc name
    ('x: Shaped[jax.Array, "*b n 4"]', 'return rearr.rearrange(x, "c -> c")', "RA304"),  # at least 2
    ('x: Float[Tensor, "b c"]', 'return rearr.rearrange(x, "b c h ... -> b c h ...")', "RA304"),
    ('x: Float[Tensor, "... 6"]', 'return rearr.rearrange(x, "... (c k) -> ... c k", k=4)', "RA302"),
    ('x: Float[Tensor, "b 3 h w"]', 'y = rearr.rearrange(x, "b c h w -> b h w c")\n'
     'return rearr.rearrange(y, "b h w (c k) -> b h w c k", c=2)', "RA302"),
    ('x, y: "Float[Tensor, \'b 4\']"', 'return rearr.rearrange(y, "b c -> c b", c=3)', "RA303"),  # a string
    ('*, x: Float[Tensor, "b c h"]', 'return rearr.rearrange(x, "b c -> c b")', "RA304"),
])
def test_jaxtyping_annotations_give_a_shape(params, body, code):
    assert [c for c, _ in jt_findings(params, body)] == [code]


def test_the_annotation_is_named_with_its_line():
    (found,) = jt_findings('x: Float[Tensor, "b c h"]', 'return rearr.rearrange(x, "b c h w -> b (c h w)")')
    assert found[1] == "the pattern has 4 input dimensions, the tensor has 3: x is 'b c h' (its annotation on line 8)"


@pytest.mark.parametrize("head, params", [
    ("from jaxtyping import Float as F\nfrom torch import Tensor\n", 'x: F[Tensor, "b c h"]'),
    ("import jaxtyping as jt\nimport torch\n", 'x: jt.Float32[torch.Tensor, "b c h"]'),
    ("import jaxtyping\nimport jax.numpy as jnp\n", 'x: jaxtyping.Bool[jnp.ndarray, "b c h"]'),
    ("from jaxtyping import *\n", 'x: Inexact[Array, "b c h"]'),
])
def test_jaxtyping_spelt_in_other_forms(head, params):
    source = f"import rearr\n{head}\ndef f({params}):\n    return rearr.rearrange(x, 'b c -> c b')\n"
    assert [p.code for p in lint.check_source(source)] == ["RA304"]


@pytest.mark.parametrize("params, body", [
    # unknown lengths: a name, '#' (that length or 1), '_', '?', an expression
    ('x: Float[Tensor, "b c"]', 'return rearr.rearrange(x, "b c -> c b", c=3)'),
    ('x: Float[Tensor, "b #4"]', 'return rearr.rearrange(x, "b c -> c b", c=3)'),
    ('x: Float[Tensor, "b _"]', 'return rearr.rearrange(x, "b c -> c b", c=3)'),
    ('x: Float[Tensor, "b _4x"]', 'return rearr.rearrange(x, "b c -> c b", c=3)'),
    ('x: Float[Tensor, "b ?n"]', 'return rearr.rearrange(x, "b c -> c b", c=3)'),
    ('x: Float[Tensor, "b n-1"]', 'return rearr.rearrange(x, "b c -> c b", c=3)'),
    ('x: Float[Tensor, "*b c"]', 'return rearr.rearrange(x, "b c h -> b h c")'),  # any rank above 1
    ('x: Float[Tensor, "... c"]', 'return rearr.rearrange(x, "c -> c")'),
    # strings that jaxtyping refuses, and what is not a jaxtyping array annotation
    ('x: Float[Tensor, "b,c"]', 'return rearr.rearrange(x, "b c h -> b h c")'),
    ('x: Float[Tensor, "*b *c"]', 'return rearr.rearrange(x, "b -> b")'),
    ('x: Float[Tensor, "b c#"]', 'return rearr.rearrange(x, "b c h -> b h c")'),
    ('x: Float[Image, "b c"]', 'return rearr.rearrange(x, "b c h -> b h c")'),  # an alias may add dimensions
    ('x: Float[Tensor, "b c"] | None', 'return rearr.rearrange(x, "b c h -> b h c")'),
    ('x: Float[Tensor, SHAPE]', 'return rearr.rearrange(x, "b c h -> b h c")'),
    ('x: list[Float[Tensor, "b c"]]', 'return rearr.rearrange(x, "b c h -> b h c")'),
    ('*x: Float[Tensor, "b c"]', 'return rearr.rearrange(x, "b c h -> b h c")'),
    ('x: "Float[Tensor, \'b c\'"', 'return rearr.rearrange(x, "b c h -> b h c")'),  # does not parse
    # the parameter changes, or the call is guarded by a test of the tensor
    ('x: Float[Tensor, "b c"]', 'x = x[None]\nreturn rearr.rearrange(x, "b c h -> b h c")'),
    ('x: Float[Tensor, "b c"]', 'x = x.unsqueeze(0)\nreturn rearr.rearrange(x, "b c h -> b h c")'),
    ('x: Float[Tensor, "b c"]', 'if x.ndim == 3:\n    return rearr.rearrange(x, "b c h -> b h c")'),
    ('x: Float[Tensor, "b c"]', 'assert x.ndim == 3\nreturn rearr.rearrange(x, "b c h -> b h c")'),
    ('x: Float[Tensor, "b c"]', 'return rearr.rearrange(x, "b c h -> b h c") if x.ndim == 3 else x'),
    ('x: Float[Tensor, "b c"]', 'def g():\n    return x\nreturn rearr.rearrange(x, "b c h -> b h c")'),
])
def test_annotations_that_give_nothing_certain(params, body):
    assert jt_findings(params, body) == []


@pytest.mark.parametrize("decorator, found", [
    ("@jaxtyped(typechecker=None)\n", ["RA304"]),
    ("@torch.no_grad()\n", ["RA304"]),
    ("@staticmethod\n", ["RA304"]),
    ("@partial(jax.jit, static_argnums=1)\n", ["RA304"]),
    # a decorator that may call the function with other arguments (vmap drops a dimension)
    ("@jax.vmap\n", []),
    ("@my_decorator\n", []),
    ("@partial(jax.vmap, in_axes=0)\n", []),
])
def test_decorators_that_may_change_what_the_annotations_mean(decorator, found):
    params, body = 'x: Float[Tensor, "b c"]', 'return rearr.rearrange(x, "b c h -> b h c")'
    assert [c for c, _ in jt_findings(params, body, decorator)] == found


@pytest.mark.parametrize("head", [
    "from mytypes import Float\nfrom torch import Tensor\n",  # not jaxtyping's
    "from jaxtyping import Float\nfrom torch import Tensor\nFloat = dict\n",  # bound twice
    "from jaxtyping import Float\nfrom torch import Tensor\nfrom other import Float\n",
    "from jaxtyping import Float\nfrom mytensors import Tensor\n",
    "from jaxtyping import Key as Float\nfrom torch import Tensor\n",
])
def test_names_that_are_not_certainly_jaxtypings(head):
    source = f"import rearr\n{head}\ndef f(x: Float[Tensor, 'b c h']):\n    return rearr.rearrange(x, 'b c -> c b')\n"
    assert lint.check_source(source) == []


def test_a_nested_function_has_its_own_annotations():
    source = JT_HEAD + ('def f(x):\n    def g(y: Float[Tensor, "b c"]):\n'
                        '        return rearr.rearrange(y, "b c h -> b h c")\n    return g\n')
    assert [p.code for p in lint.check_source(source)] == ["RA304"]


@pytest.mark.parametrize("body", [
    # what may change y: an alias changed in place, a store into y, a name a nested scope uses
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nz = y\nz.unsqueeze_(0)\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ny.data = other\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ny[0] += 1\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nd = {"y": y}\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ng = lambda: y.unsqueeze_(0)\ng()\n'
    'rearr.rearrange(y, "b c h -> b h c")\n',
    'def g():\n    y.unsqueeze_(0)\ny = rearr.rearrange(x, "b c h -> b (c h)")\ng()\n'
    'rearr.rearrange(y, "b c h -> b h c")\n',
    # a loop that changes y anywhere in its body: its second round sees that change
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nfor i in other:\n    rearr.rearrange(y, "b c h -> b h c")\n'
    '    y = x\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nwhile cond:\n    rearr.rearrange(y, "b c h -> b h c")\n'
    '    y = x\n',
    # a try's handlers run from anywhere in its body
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ntry:\n    y = x\nexcept ValueError:\n'
    '    rearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ntry:\n    pass\nexcept ValueError as y:\n    pass\n'
    'rearr.rearrange(y, "b c h -> b h c")\n',
    # a comprehension's own names, a lambda's default, code after return
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nzs = [rearr.rearrange(y, "b c h -> b h c") for y in other]\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\ng = lambda z=rearr.rearrange(y, "b c h -> b h c"): z\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nreturn y\nrearr.rearrange(y, "b c h -> b h c")\n',
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nif cond:\n    return\n    rearr.rearrange(y, "b c h -> b h c")\n',
    # the walrus of the same statement runs first
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nz = rearr.rearrange(y, "b c h -> b h c") if (y := x) else 0\n',
    # reads of the shape, arithmetic and indexing leave y as it is, but guards make the call uncertain
    'y = rearr.rearrange(x, "b c h -> b (c h)")\nif y.shape[1] == 3:\n    rearr.rearrange(y, "b c h -> b h c")\n',
    # lengths that fit, or that are not known
    'y = rearr.repeat(x, "h w -> h w c", c=6)\nrearr.rearrange(y, "h w (c k) -> h w c k", k=3)\n',
    'y = rearr.repeat(x, "h w -> h w c", c=n)\nrearr.rearrange(y, "h w (c k) -> h w c k", k=4)\n',
    'y = rearr.repeat(x, "h w -> h w c", c=6)\nrearr.rearrange(y, "h w (c k) -> h w c k", k=n)\n',
    'y = rearr.rearrange(x, "b (h w) -> b h w", h=2)\nrearr.rearrange(y, "b (h k) w -> b h k w", k=2)\n',
    'y = rearr.rearrange(x, "b ... -> b ...")\nrearr.rearrange(y, "b (c k) -> b c k", k=5)\n',
])
def test_more_that_ends_what_is_known(body):
    assert findings(body) == []


def test_reads_and_arithmetic_keep_what_is_known():
    body = ('y = rearr.rearrange(x, "b c h -> b (c h)")\nn = y.shape[0] + y.size(1)\nz = y * 2 + y[0]\n'
            'print(f"{y}", -y, y == 0)\nrearr.rearrange(y, "b c h -> b h c")\n')
    assert [c for _, c, _ in findings(body)] == ["RA304"]


@pytest.mark.parametrize("model, found", [
    ('nn.Sequential(Repeat("b c -> b c r", r=3), Rearrange("b c (r k) -> b c r k", k=2))', ["RA302"]),
    ('nn.Sequential(Rearrange("b (c k) -> b c k", k=4), Reduce("b c k -> b k", "sum"), Rearrange("b () -> b"))',
     ["RA303"]),  # through three layers: k is 4
    ('nn.Sequential(Repeat("b c -> b c r", r=4), Rearrange("b c (r k) -> b c r k", k=2))', []),
])
def test_sequential_follows_lengths(model, found):
    assert [p.code for p in lint.check_source(f"{SEQ_HEAD}model = {model}\n")] == found


# --- docs/check.md's shape-flow examples run as written -------------------------------------


def flow_examples() -> list[str]:
    # the checkout's root, wherever in tests/ this file stands
    root = next(p for p in pathlib.Path(__file__).resolve().parents if (p / "docs" / "check.md").is_file())
    text = (root / "docs" / "check.md").read_text(encoding="utf-8")
    section = text[text.index("## Shapes followed from call to call\n"): text.index("## Hints that work")]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.mark.parametrize("example", flow_examples())
def test_the_docs_shape_flow_examples(example):
    """Each '# RAxxx message' comment is the finding on its line, and lines without one have none."""
    expected = {}
    for n, line in enumerate(example.splitlines(), 1):
        m = re.search(r"# (RA\d{3}) (.*)$", line)
        if m:
            expected[n] = (m[1], m[2])
    found = {p.line: (p.code, p.message) for p in lint.check_source(example, einops=True)}
    assert found == expected


@pytest.mark.parametrize("body, found", [
    ('y: Float[Tensor, "b c h"] = other(x)\nreturn rearr.rearrange(y, "b c -> c b")', ["RA304"]),
    ('y: Float[Tensor, "b 6"] = other(x)\nreturn rearr.rearrange(y, "b (h w) -> b h w", h=4)', ["RA302"]),
    # the value is a followed call: its result is what is known
    ('y: Float[Tensor, "b c"] = rearr.rearrange(x, "b c h -> b (c h)")\nreturn rearr.rearrange(y, "b c -> c b")', []),
    # a changed local, and a local without a value
    ('y: Float[Tensor, "b c h"] = other(x)\ny = y[None]\nreturn rearr.rearrange(y, "b c -> c b")', []),
    ('y: Float[Tensor, "b c h"]\ny = other(x)\nreturn rearr.rearrange(y, "b c -> c b")', []),
])
def test_an_annotated_local_has_its_annotations_shape(body, found):
    assert [c for c, _ in jt_findings("x", body)] == found


def test_the_length_codes_go_through_noqa_and_selection(tmp_path):
    body = ('y = rearr.repeat(x, "b n -> b n c", c=6)\n'
            'rearr.rearrange(y, "b n (h d) -> b h n d", h=4)  # noqa: RA302\n'
            'rearr.rearrange(y, "b n c -> b n c", c=3)\n')
    assert [c for _, c, _ in findings(body)] == ["RA303"]  # the noqa of the consuming line silences its RA302
    (tmp_path / "m.py").write_text(HEAD + "def f(x):\n" + textwrap.indent(body.replace("  # noqa: RA302", ""), "    "))
    from rearr.tools import cli
    assert cli.main(["check", "--quiet", "--select", "RA302,RA303", "--ignore", "RA303", str(tmp_path)]) == 1
    assert cli.main(["check", "--quiet", "--ignore", "RA302,RA303", str(tmp_path)]) == 0


def test_the_ra303_fix_works_when_applied():
    source = HEAD + ('def f(x):\n    y = rearr.repeat(x, "b n -> b n c", c=6)\n'
                     '    return rearr.rearrange(y, "b n c -> b n c", c=3)\n')
    (problem,) = lint.check_source(source)
    assert problem.code == "RA303" and problem.hint.startswith("pass c=6, or drop c= to infer it")
    assert lint.check_source(source.replace("c=3", "c=6")) == []
    y = rearr.repeat(np.zeros((2, 3)), "b n -> b n c", c=6)
    assert rearr.rearrange(y, "b n c -> b n c", c=6).shape == (2, 3, 6)
