"""`rearr check` agrees with running the call, on cases where the two once disagreed. Each case is run
(the oracle) and checked: check reports an error iff the call raises a RearrError that no input could
avoid, with the code that the call raises. What check still leaves to run
time is listed in docs/check.md."""

from __future__ import annotations

import numpy as np
import pytest

import rearr  # noqa: F401  (the sources below use it)
from rearr.errors import RearrError
from rearr.tools import lint

x = np.zeros((2, 3))
idx = np.zeros((2, 3), dtype=np.int64)
ENV = {"x": x, "idx": idx, "np": np, "rearr": rearr}

# (call, the code it always raises)
ALWAYS_FAILS = [
    # einsum: operand count fixed by the source (RA206)
    ('rearr.einsum(x, "a b, b c -> a c")', "RA206"),
    ('rearr.einsum(x, x, x, "a b, b c -> a c")', "RA206"),
    ('rearr.einsum("a b -> a")', "RA206"),
    # a gather/scatter whose index tensor is not passed at all (RA301 "index 'idx' was not passed")
    ('rearr.rearrange(x, "b n[idx] -> b k")', "RA301"),
    ('rearr.scatter(x, "b n -> b k[idx]", "sum", k=5)', "RA301"),
    # an explicit keyword that names no axis fails whatever **kwargs holds (RA300 is not a missing length)
    ('rearr.rearrange(x, "a b -> b a", z=1, **{})', "RA300"),
    ('rearr.rearrange(x, "a b -> b a", z=1, **{"b": 2})', "RA300"),
]


@pytest.mark.parametrize("call, code", ALWAYS_FAILS)
def test_a_call_that_always_fails_is_reported(call, code):
    with pytest.raises(RearrError) as e:
        eval(call, ENV)
    assert e.value.code == code
    found = [p.code for p in lint.check_source(f"import rearr\n{call}\n")]
    assert found == [code], f"rearr check reports {found} for {call}"


@pytest.mark.parametrize("call", [
    'rearr.rearrange(x, "b n[idx] -> b k", **{"idx": idx})',  # **kwargs may hold the index
    'rearr.einsum(*[x, x], "a b, a b -> a")',  # *args: the count is not known
])
def test_what_kwargs_or_args_may_hold_is_not_reported(call):
    eval(call, ENV)
    assert lint.check_source(f"import rearr\n{call}\n") == []


def test_a_layer_takes_its_index_later_so_none_is_missing():
    assert lint.check_source('import rearr.layers\nrearr.layers.Gather("b n[idx] -> b k")\n') == []


def test_python_m_rearr_check_runs_the_cli(tmp_path):
    import subprocess
    import sys

    (tmp_path / "m.py").write_text('import rearr\nrearr.rearrange(x, "b n[idx] -> b k")\n')
    done = subprocess.run([sys.executable, "-m", "rearr", "check", str(tmp_path)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 1 and "RA301" in done.stdout, done.stdout + done.stderr
