"""rearrange, reduce and repeat run as rearr.run.front_door made them from api.py's functions:
the same signature, defaults and docstring, and the behaviour their bodies (one call into transform)
say, error for error."""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import rearr
from rearr import api
from rearr.run import _front_doors, cache, front_door

FRONT_DOORS = [api.rearrange, api.reduce, api.repeat]


@pytest.mark.parametrize("f", FRONT_DOORS, ids=lambda f: f.__name__)
def test_each_front_door_is_its_api_function_as_declared(f):
    public = f.__wrapped__
    assert public.__module__ == "rearr.api" and public.__name__ == f.__name__
    assert inspect.signature(f, follow_wrapped=False) == inspect.signature(public)
    assert (f.__defaults__, f.__kwdefaults__) == (public.__defaults__, public.__kwdefaults__)
    for attribute in ("__module__", "__qualname__", "__doc__", "__annotations__"):
        assert getattr(f, attribute) == getattr(public, attribute), attribute
    assert "return _transform(" in inspect.getsource(f)  # getsource follows __wrapped__ to api.py


@pytest.mark.parametrize("f", FRONT_DOORS, ids=lambda f: f.__name__)
def test_each_body_is_one_call_into_transform_with_its_own_name(monkeypatch, f):
    seen = []
    monkeypatch.setattr(api, "_transform", lambda *args: seen.append(args) or "out")
    x = np.zeros((2, 3))
    args = (x, "a b -> b a", "sum") if f is api.reduce else (x, "a b -> b a")
    assert f.__wrapped__(*args, r=2) == "out"
    op, tensor, pattern, reduction, lengths, *bounds = seen[0]
    assert (op, tensor, pattern, lengths) == (f.__name__, x, "a b -> b a", {"r": 2})
    assert reduction == ("sum" if f is api.reduce else None)
    assert bounds == ([True] if f is api.rearrange else [])


def _outcome(f, args, kwargs):
    try:
        out = f(*args, **kwargs)
    except Exception as e:  # the error, as the caller sees it
        return type(e), str(e)
    return np.asarray(out).tolist(), np.asarray(out).dtype.str


_X = np.arange(24.0).reshape(2, 3, 4)
_T = torch.arange(24.0).reshape(2, 3, 4)
_IDX = np.array([[2, 0], [1, 1]])
CALLS = [  # (function, positional arguments, keywords)
    (api.rearrange, (_X, "a b c -> c b a"), {}),
    (api.rearrange, (_T, "a b c -> a (b c)"), {}),
    (api.rearrange, (_X, "a b (c d) -> a b c d"), {"d": 2}),
    (api.rearrange, (_X, "a b (c d) -> a b c d"), {"d": 2.0}),  # a float length: the careful path's error
    (api.rearrange, (_X, "a b (c d) -> a b c d"), {"d": 3}),
    (api.rearrange, (_X, "a b c -> a b"), {}),
    (api.rearrange, (_X, "a b c -> c b a"), {"check_bounds": "sometimes"}),
    (api.rearrange, (_X, "a b[idx: a k] c -> a k c"), {"idx": _IDX}),
    (api.rearrange, (_X, "a b[idx: a k] c -> a k c"), {"idx": _IDX + 1}),  # out of range
    (api.rearrange, (_X, "a b[idx: a k] c -> a k c"), {"idx": _IDX, "check_bounds": False}),
    (api.rearrange, ([_X[0], _X[1]], "n b c -> b n c"), {}),
    (api.rearrange, ("a b -> b a", _X), {}),  # arguments swapped
    (api.reduce, (_X, "a b c -> a", "sum"), {}),
    (api.reduce, (_T, "a (b r) c -> a b", "max"), {"r": 3}),
    (api.reduce, (_X, "a b c -> a", "median"), {}),
    (api.reduce, (_X, "a b c -> a", lambda x, axes: x.sum(axis=axes)), {}),
    (api.reduce, (_X, "a b c -> a", ["sum"]), {}),  # unhashable: the careful path says why
    (api.repeat, (_X, "a b c -> a b c r"), {"r": 2}),
    (api.repeat, (_T, "a b c -> (r a) b c"), {"r": 2}),
    (api.repeat, (_X, "a b c -> a b c r"), {}),
    (api.repeat, (_X, "a b c -> a b c r"), {"r": -1}),
]


@pytest.mark.parametrize(("f", "args", "kwargs"), CALLS, ids=[f"{c[0].__name__}-{k}" for k, c in enumerate(CALLS)])
def test_a_front_door_behaves_as_its_body_says(f, args, kwargs):
    for clear in (True, False):  # a first call (the careful path), then calls seen before
        if clear:
            for table in cache.CACHES:
                table.cache_clear()
        expected = _outcome(f.__wrapped__, args, kwargs)
        assert _outcome(f, args, kwargs) == expected
        assert _outcome(f, args, kwargs) == _outcome(f.__wrapped__, args, kwargs) == expected


def test_the_committed_front_doors_are_the_template_filled_in():
    path = Path(front_door.__file__).with_name("_front_doors.py")
    assert path.read_text() == front_door.generated_text(), "regenerate: python rearr/run/front_door.py"


def test_the_generator_takes_only_a_transforms_signature():
    for signature in ("tensor, pattern, *args, **lengths", "x, pattern, **lengths", "tensor, pattern, r"):
        text = f"@_front_door\ndef rearrange({signature}):\n    pass\n"
        with pytest.raises(ValueError, match="a front door takes"):
            front_door.generated_text(text)


def test_the_generator_takes_only_literal_defaults_and_the_one_call():
    """What the template stands for: a default it can write as a literal, and a body that does what the
    fast path does (an edited body would otherwise never run)."""
    call = "return _transform('rearrange', tensor, pattern, None, axes_lengths"
    cases = {
        "check_bounds=DEFAULT": call + ", check_bounds)",
        "check_bounds=True": "warn('old')\n    " + call + ", check_bounds)",
        "check_bounds=False": call + ")",
        "check_bounds=None": call.replace("'rearrange'", "'repeat'") + ", check_bounds)",
    }
    for default, body in cases.items():
        text = (f"@_front_door\ndef rearrange(tensor, /, pattern, *, {default}, **axes_lengths):\n"
                f'    "Doc."\n    {body}\n')
        with pytest.raises(ValueError, match="a front door's (defaults|body)"):
            front_door.generated_text(text)
    good = ('@_front_door\ndef rearrange(tensor, /, pattern, *, check_bounds=1, **lengths):\n    "Doc."\n'
            "    return _transform('rearrange', tensor, pattern, None, lengths, check_bounds)\n")
    assert "def rearrange(tensor: Any, /, pattern: Any, *, check_bounds: Any = 1, **lengths: Any)" in \
        front_door.generated_text(good)


def test_an_api_function_that_its_front_door_does_not_match_runs_as_written(monkeypatch):
    """A checkout whose api.py changed a signature or a body without regenerating: the function runs as
    api.py has it (slower by a frame, never wrong), with a RuntimeWarning that says how to regenerate."""
    monkeypatch.setattr(_front_doors, "_said", [])

    def repeat(tensor, /, pattern, *, new_option=1, **axes_lengths):
        return "as written"

    def rearrange(tensor, /, pattern, *, check_bounds=True, **axes_lengths):
        print("an edited body")
        return _transform("rearrange", tensor, pattern, None, axes_lengths, check_bounds)  # noqa: F821

    with pytest.warns(RuntimeWarning, match="python rearr/run/front_door.py"):
        assert _front_doors.front_door(repeat) is repeat
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        assert _front_doors.front_door(repeat) is repeat
        assert _front_doors.front_door(rearrange) is rearrange


def test_the_generator_runs_without_importing_rearr(tmp_path):
    """Run as a file, it works where _front_doors.py is missing or broken."""
    package = tmp_path / "rearr"
    shutil.copytree(Path(rearr.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "run" / "_front_doors.py").write_text("this is not python\n")
    subprocess.run([sys.executable, str(package / "run" / "front_door.py")], check=True, capture_output=True)
    assert (package / "run" / "_front_doors.py").read_text() == front_door.generated_text()


def test_the_public_names_are_the_front_doors():
    assert (rearr.rearrange, rearr.reduce, rearr.repeat) == tuple(FRONT_DOORS)
    assert all(f.__code__.co_filename == _front_doors.__file__ for f in FRONT_DOORS)
