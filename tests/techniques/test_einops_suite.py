"""einops 0.8.2's own test modules (test_ops, test_examples, test_packing, test_einsum, test_other, and
test_layers for the torch layers), run against rearr.

einops' functions (and `EinopsError`, and its torch layers) are pointed at rearr's for the
duration of each test, in the test modules' globals and in the `einops` package itself (some
tests import inside their body). Nothing else is changed: a test that fails here is a place
where rearr does not do what einops' own suite expects. Excluded are only the tests that check
einops' internals, or limits that rearr lifts; EXCLUDED lists each with its reason.
"""

from __future__ import annotations

import os

import pytest

einops = pytest.importorskip("einops")
if einops.__version__ != "0.8.2":
    pytest.skip(f"the shim is written for einops 0.8.2's tests, not {einops.__version__}",
                allow_module_level=True)
pytest.importorskip("torch")
_SAVED = os.environ.get("EINOPS_TEST_BACKENDS")
os.environ["EINOPS_TEST_BACKENDS"] = "numpy,torch"  # read once (then cached), when einops.tests collects backends

import einops.einops  # noqa: E402
import einops.layers.torch  # noqa: E402
from einops.tests import (  # noqa: E402
    parse_backends_to_test,
    test_einsum,
    test_examples,
    test_layers,
    test_ops,
    test_other,
    test_packing,
)

parse_backends_to_test()
if _SAVED is None:
    del os.environ["EINOPS_TEST_BACKENDS"]
else:
    os.environ["EINOPS_TEST_BACKENDS"] = _SAVED

import rearr  # noqa: E402
import rearr.layers  # noqa: E402

MODULES = (test_ops, test_examples, test_packing, test_einsum, test_other, test_layers)

# name in einops -> rearr's object with that role
FUNCTIONS = {
    "rearrange": rearr.rearrange,
    "reduce": rearr.reduce,
    "repeat": rearr.repeat,
    "einsum": rearr.einsum,
    "pack": rearr.pack,
    "unpack": rearr.unpack,
    "parse_shape": rearr.parse_shape,
    "asnumpy": rearr.asnumpy,
    "EinopsError": rearr.RearrError,
}
LAYERS = {"Rearrange": rearr.layers.Rearrange, "Reduce": rearr.layers.Reduce, "EinMix": rearr.layers.EinMix}

# einops' internals, or what rearr deliberately does otherwise; each is covered in rearr's own tests where
# it says so.
EXCLUDED = {
    "test_ops::test_enumerating_directions": "tests einops' private _enumerate_directions",
    "test_other::test_optimize_transformations_numpy": "tests einops' private _optimize_transformation",
    "test_other::test_backends_installed": "tests einops' backend classes (AbstractBackend subclasses)",
    "test_other::test_is_float_type": "tests einops' backend classes' is_float_type",
    "test_other::test_einops_threading": "runs einops itself in a subprocess, out of the shim's reach (and calls "
    "a bare `python`); rearr's threads: tests/run/test_threads.py",
    "test_einsum::test_functional_errors": "asserts einops' exact messages and exception classes, and that "
    "'()', groups and anonymous axes raise NotImplementedError: rearr takes '()' and groups (a limit it lifts); "
    "each case is in tests/test_einsum_pack.py::test_einops_einsum_error_cases",
    # test_layers: run too, for the layers.
    "test_layers::test_einmix_decomposition": "tests einops' private _EinmixDebugger",
    "test_layers::test_einmix_restrictions": "tests einops' private _EinmixDebugger; the same four cases against "
    "rearr's EinMix: tests/test_layers.py::test_einops_einmix_restrictions",
    "test_layers::test_torch_layers_scripting": "torch.jit.script: a limit rearr keeps (patterns are parsed in "
    "Python; torch.compile and torch.jit.trace are the supported ways)",
}

XFAIL: dict[str, str] = {}  # none left: every einops test that is not excluded above passes
# Marked slow (the fast loop leaves them out): torch.compile with inductor, seconds each.
SLOW = {"test_ops::test_torch_compile_with_dynamic_shape", "test_other::test_torch_compile_for_functions",
        "test_other::test_torch_compile_for_layers"}


@pytest.fixture(autouse=True)
def _rearr_as_einops(monkeypatch):
    for module in (*MODULES, einops, einops.einops):
        for name, value in FUNCTIONS.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    for name, value in LAYERS.items():
        monkeypatch.setattr(einops.layers.torch, name, value)


def _collect() -> dict:
    tests = {}
    for module in MODULES:
        short = module.__name__.rsplit(".", 1)[1]
        for name, f in vars(module).items():
            if not (name.startswith("test_") and callable(f)):
                continue
            key = f"{short}::{name}"
            if key in EXCLUDED:
                f = pytest.mark.skip(reason=EXCLUDED[key])(f)
            elif key in XFAIL:
                f = pytest.mark.xfail(reason=XFAIL[key], strict=False)(f)
            if key in SLOW:
                f = pytest.mark.slow(f)
            tests[f"test_{short}__{name[5:]}"] = f
    return tests


globals().update(_collect())


def test_the_shim_points_einops_at_rearr():
    """Without this, every test above could pass by testing einops against itself."""
    from einops._backends import TorchBackend

    assert test_ops.rearrange is rearr.rearrange and test_packing.unpack is rearr.unpack
    assert einops.einsum is rearr.einsum and test_einsum.einsum is rearr.einsum
    assert test_other.einops.EinopsError is rearr.RearrError
    assert TorchBackend().layers().EinMix is rearr.layers.EinMix
    assert not set(EXCLUDED) & set(XFAIL)
    names = {f"{m.__name__.rsplit('.', 1)[1]}::{n}" for m in MODULES for n in vars(m) if n.startswith("test_")}
    assert set(EXCLUDED) | set(XFAIL) <= names, "an exclusion names a test that einops no longer has"
    assert SLOW <= names, "a slow mark names a test that einops no longer has"
