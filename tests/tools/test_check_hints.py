"""Hints that work when applied, on rearr's and on einops' calls: each case fails in rearr and in einops
itself, `rearr check` says the same as the library, and its hint, applied literally (the pattern it
quotes, the keyword it renames, the length it says to pass), gives a call that runs in both, and that
rearr check finds nothing in. On einops' calls, the hints name einops' functions."""

from __future__ import annotations

import einops
import numpy as np
import pytest
from _hints import CHECK_CASES as CASES
from _hints import apply

import rearr
from rearr.errors import RearrError
from rearr.tools import lint


def source(module: str, op: str, pattern: str, lengths: dict) -> str:
    keywords = "".join(f", {k}={v!r}" for k, v in lengths.items())
    return f"import {module}\n{module}.{op}(x, {pattern!r}{keywords})\n"




@pytest.mark.parametrize("op, pattern, lengths, shape, says", CASES)
@pytest.mark.parametrize("library", ["rearr", "einops"])
def test_a_hint_applied_literally_gives_a_working_call(library, op, pattern, lengths, shape, says):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    run = getattr(rearr if library == "rearr" else einops, op)
    with pytest.raises((RearrError, einops.EinopsError)):
        run(x, pattern, **lengths)
    (found,) = lint.check_source(source(library, op, pattern, lengths))
    assert says in found.hint, found.hint
    if library == "rearr":  # the library says what rearr check says
        with pytest.raises(RearrError) as info:
            run(x, pattern, **lengths)
        assert (found.code, found.message, found.hint) == (info.value.code, info.value.message, info.value.hint)
    fixed_pattern, _, fixed_lengths = apply(found.hint, pattern, None, lengths)
    run(x, fixed_pattern, **fixed_lengths)  # runs
    other = (einops if library == "rearr" else rearr).__dict__[op]
    np.testing.assert_array_equal(other(x, fixed_pattern, **fixed_lengths), run(x, fixed_pattern, **fixed_lengths))
    assert lint.check_source(source(library, op, fixed_pattern, fixed_lengths)) == []


def test_an_einmix_length_under_another_name_is_the_rename():
    torch = pytest.importorskip("torch")
    from einops.layers.torch import EinMix as EinopsEinMix

    from rearr.layers import EinMix

    code = "from einops.layers.torch import EinMix\nEinMix('b n hid -> b n d', weight_shape='hid d', d=4, hidden=8)\n"
    (found,) = lint.check_source(code)
    assert (found.code, found.message, found.hint) == ("RA301", "weight axis 'hid' has no length",
                                                       "rename hidden= to hid=")
    with pytest.raises(RearrError, match="weight axis 'hid' has no length"):
        EinMix("b n hid -> b n d", weight_shape="hid d", d=4, hidden=8)
    with pytest.raises(einops.EinopsError):
        EinopsEinMix("b n hid -> b n d", weight_shape="hid d", d=4, hidden=8)
    x = torch.ones(2, 3, 8)
    for layer in (EinMix, EinopsEinMix):
        assert layer("b n hid -> b n d", weight_shape="hid d", d=4, hid=8)(x).shape == (2, 3, 4)
    assert lint.check_source(code.replace("hidden=", "hid=")) == []


@pytest.mark.parametrize("code, says", [
    ("einops.rearrange(x, 'b c -> c')", "use einops.reduce to aggregate it"),
    ("einops.rearrange(x, 'c -> b c')", "use einops.repeat to add a new axis"),
    ("einops.rearrange(x, 'b w -> b (h w2)', ww=3)", "(einops.reduce drops axes, einops.repeat adds them)"),
])
def test_hints_on_einops_calls_name_einops(code, says):
    (found,) = lint.check_source(f"import einops\n{code}\n")
    assert says in found.hint and "rearr." not in found.text
    (theirs,) = lint.check_source(f"import rearr\n{code.replace('einops.', 'rearr.')}\n")
    assert says.replace("einops.", "rearr.") in theirs.hint  # rearr's calls keep rearr's names
