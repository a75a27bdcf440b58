"""The backend contract: every backend provides every step kind, and each entry of its table runs.

The table test walks plan.STEP_KINDS, not a list written here: a new step kind
fails it on every backend until each backend lowers it and a case below uses it.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
from reference import assert_matches, reference

import rearr
from rearr import backends
from rearr.backends import contract
from rearr.planning import plan, planner
from rearr.rules import recipe

# One call per step kind; the test checks that each kind is planned by at least one of them.
# (op, pattern, shape, reduction, lengths, index shapes (shape, length of the indexed axis))
CASES = {
    plan.Reshape: ("rearrange", "(a b) c -> a (b c)", (6, 4), None, {"a": 2}, {}),
    plan.Permute: ("rearrange", "a b c -> c b a", (2, 3, 4), None, {}, {}),
    plan.Reduce: ("reduce", "a b c -> a c", (2, 3, 4), "max", {}, {}),
    plan.Expand: ("repeat", "a b -> a k b", (2, 3), None, {"k": 4}, {}),
    plan.TakeRows: ("rearrange", "v[ids: b t] d -> b t d", (10, 3), None, {}, {"ids": ((2, 4), 10)}),
    plan.GatherAlong: ("rearrange", "b n[idx: b k] c -> b k c", (2, 5, 3), None, {}, {"idx": ((2, 4), 5)}),
    plan.AdvancedIndex: ("rearrange", "b h[y: p] w[xx: p] c -> b p c", (2, 4, 5, 3), None, {},
                         {"y": ((6,), 4), "xx": ((6,), 5)}),
    plan.ScatterRows: ("scatter", "b p c -> b h[y: b p] w[x: b p] c", (2, 6, 3), "sum", {"h": 4, "w": 5},
                       {"y": ((2, 6), 4), "x": ((2, 6), 5)}),
    plan.ScatterAlong: ("scatter", "b k -> b n[idx]", (2, 4), "max", {"n": 10}, {"idx": ((2, 4), 10)}),
}

BACKEND_MODULES = [module for _, module in backends._SPECS] + [backends._GENERIC]
# What a backend's table lowers to a RearrError on purpose: the library has no at-style update.
REFUSED = {(m, k) for m in ("rearr.backends.dask", "rearr.backends.array_api")
           for k in (plan.ScatterRows, plan.ScatterAlong)}


def _backend(module: str):
    framework = next((f for f, m in backends._SPECS if m == module), "array_api_strict")
    pytest.importorskip(framework)
    return backends._load(module)


def _to(module, array: np.ndarray):
    if module.name == "torch":
        return torch.from_numpy(array)
    if module.name == "dask":
        import dask.array as da

        return da.from_array(array, chunks=2)
    if module.name == "array_api":
        import array_api_strict

        return array_api_strict.asarray(array)
    return array


def _from(module, y):
    if module.name == "dask":
        return y.compute()
    if module.name == "array_api":
        return np.asarray(y.__dlpack__ and np.from_dlpack(y))
    return y


def test_the_step_vocabulary_is_the_plans():
    assert set(plan.STEP_KINDS) == set(CASES)


def test_the_base_declares_every_hook_and_the_lists_name_them_all():
    """Every public name of contract.Backend is a hook in exactly one of the lists, and no other name."""
    hooks = {n for n in dir(contract.Backend) if not n.startswith("_")}
    declared = set(contract.REQUIRED) | set(contract.OPTIONAL) | set(contract.ATTRIBUTES)
    assert hooks | set(contract.Backend.__annotations__) == declared
    assert len(declared) == len(contract.REQUIRED) + len(contract.OPTIONAL) + len(contract.ATTRIBUTES)


def test_rearr_reads_no_hook_by_probing():
    """No getattr/hasattr on a backend anywhere in the package: every hook is declared on the base."""
    import re
    from pathlib import Path

    root = Path(rearr.__file__).parent
    probes = [f"{p.relative_to(root)}:{k}" for p in root.rglob("*.py") if p.name != "_lalr_standalone.py"
              for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"\b(getattr|hasattr)\((backend|candidate|module|real|backends)\b", line)]
    assert probes == []


@pytest.mark.parametrize("module", BACKEND_MODULES)
def test_every_backend_module_names_its_backend(module):
    backend = vars(importlib.import_module(module))["BACKEND"]
    assert isinstance(backend, contract.Backend)
    assert type(backend).__module__ == module


@pytest.mark.parametrize("module", BACKEND_MODULES)
def test_every_backend_satisfies_the_contract(module):
    backend = _backend(module)
    contract.check(backend)  # raises if anything is missing
    assert set(backend.STEPS) == set(plan.STEP_KINDS)


@pytest.mark.parametrize("kind", plan.STEP_KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("module", BACKEND_MODULES)
def test_every_step_entry_runs_and_gives_the_reference_result(module, kind):
    """Plan the case of this step kind, run it through the backend's own STEPS table, compare."""
    backend = _backend(module)
    op, pattern, shape, reduction, lengths, index_shapes = CASES[kind]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    indices = {name: rng.integers(0, n, ishape) for name, (ishape, n) in index_shapes.items()}
    r = recipe.analyze(pattern, op, reduction, tuple(sorted([*lengths, *indices])))
    p = planner.plan(r, shape, tuple(lengths.items()), tuple((k, v.shape) for k, v in indices.items()))
    assert kind in {type(s) for s in p.steps}, f"{pattern!r} no longer plans a {kind.__name__}"
    calls = contract.native_calls(p.steps, backend)
    y = _to(backend, x)
    env = _index_env(backend, pattern, p, {k: _to(backend, v) for k, v in indices.items()}, y)
    if (module, kind) in REFUSED:
        with pytest.raises(rearr.RearrError, match="cannot be scattered"):
            for f in calls:
                y = f(y, env)
        return
    for f in calls:
        y = f(y, env)
    want = reference(op, x, pattern, reduction, **lengths, **indices)
    assert_matches(_from(backend, y), want, what=f"{module} {kind.__name__}")


def _index_env(backend, pattern: str, p: plan.Plan, indices: dict, x):
    """The environment that api builds for an indexed call: each index converted and checked."""
    return contract.IndexEnv(pattern, {
        u.name: backend.check_index(backend.convert_index(indices[u.name], x, u.name, pattern), u, pattern)
        for u in p.indices})


# --- the check ---------------------------------------------------------------------------


def _fake(drop_step=None, drop_function=None, code="all") -> contract.Backend:
    """A backend with every hook but one step kind or one required function (defined on the base only)."""
    from rearr.backends import numpy as real

    names = {n: staticmethod(vars(real)[n]) for n in contract.REQUIRED if n != drop_function}
    steps = {k: v for k, v in real.STEPS.items() if k is not drop_step}
    templates = None if code is None else {k: v for k, v in real.CODE.items() if k is not code}
    fake = type("FakeBackend", (contract.Backend,), {"name": "fake", "STEPS": steps, "CODE": templates, **names})
    return fake()


def test_a_complete_backend_passes():
    contract.check(_fake())


def test_a_missing_step_kind_is_named():
    with pytest.raises(rearr.RearrError) as info:
        contract.check(_fake(drop_step=plan.ScatterAlong))
    assert "FakeBackend" in info.value.message and "ScatterAlong" in info.value.message
    assert "docs/backends.md" in info.value.hint


def test_a_missing_function_is_named():
    with pytest.raises(rearr.RearrError) as info:
        contract.check(_fake(drop_function="check_index"))
    assert "check_index()" in info.value.message


def test_something_that_is_not_a_backend_is_refused():
    with pytest.raises(rearr.RearrError) as info:
        contract.check(types.ModuleType("a_module"))
    assert "is not a rearr.backends.contract.Backend" in info.value.message


def test_code_templates_are_all_or_none():
    with pytest.raises(rearr.RearrError) as info:
        contract.check(_fake(code=plan.TakeRows))
    assert "CODE templates for TakeRows" in info.value.message
    contract.check(_fake(code=None))  # a backend without templates is complete (explain does not offer it)


@pytest.mark.parametrize("module", BACKEND_MODULES)
def test_a_backend_module_imports_without_its_framework_when_it_has_templates(module):
    """explain reads CODE without importing its framework: such a module binds it in load()."""
    code = (f"import sys, importlib; m = importlib.import_module({module!r}); "
            "assert m.BACKEND.CODE is None or not ({'torch', 'numpy', 'dask', 'array_api_compat', 'jax'} "
            "& set(sys.modules)), sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_shipped_backend_has_templates():
    """explain covers every backend rearr ships: each has a CODE table, so the test above binds."""
    for module in BACKEND_MODULES:
        assert vars(importlib.import_module(module))["BACKEND"].CODE is not None, module


def test_registering_an_incomplete_backend_fails_at_registration(monkeypatch):
    module = types.ModuleType("rearr_tests_incomplete_backend")
    module.BACKEND = _fake(drop_step=plan.Reduce)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    specs = list(backends._SPECS)
    with pytest.raises(rearr.RearrError) as info:
        backends.register("numpy", module.__name__)  # numpy is imported: checked now
    assert "Reduce" in info.value.message
    assert backends._SPECS == specs  # not registered


def test_registering_a_complete_backend_for_a_framework_not_imported_defers_the_check(monkeypatch):
    monkeypatch.setattr(backends, "_SPECS", list(backends._SPECS))
    backends.register("rearr_tests_no_such_framework", "rearr_tests_no_such_backend")  # nothing imported
    assert backends._SPECS[-1] == ("rearr_tests_no_such_framework", "rearr_tests_no_such_backend")


def test_the_registry_imports_no_framework():
    code = ("import sys, rearr, rearr.backends.contract; "
            "assert 'torch' not in sys.modules and 'lark' not in sys.modules, sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_explaining_first_then_running_binds_the_framework():
    """explain imports a backend module without its framework; the first real tensor then loads it."""
    code = ("import sys, rearr; rearr.explain('a b -> b a', (2, 3)); "
            "rearr.explain('a b -> b a', (2, 3), backend='numpy'); "
            "assert 'torch' not in sys.modules and 'numpy' not in sys.modules; "
            "import torch, numpy as np; "
            "assert rearr.rearrange(torch.ones(2, 3), 'a b -> b a').shape == (3, 2); "
            "assert rearr.rearrange(np.ones((2, 3)), 'a b -> b a').shape == (3, 2)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
