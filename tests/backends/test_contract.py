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
REFUSED = {("rearr.backends.array_api", k) for k in (plan.ScatterRows, plan.ScatterAlong)}


def _backend(module: str):
    framework = next((f for f, m in backends._SPECS if m == module), "array_api_strict")
    pytest.importorskip(framework)
    return backends._load(module)


def _to(module, array: np.ndarray):
    if module.TENSOR is not None and module.TENSOR.__name__ == "DTensor":  # on a mesh of this process alone
        from _gloo import solo_mesh
        from torch.distributed.tensor import Shard, distribute_tensor

        return distribute_tensor(torch.from_numpy(array), solo_mesh(), [Shard(0)])
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
    if module.TENSOR is not None and module.TENSOR.__name__ == "DTensor":
        return y.full_tensor()
    if module.name == "dask":
        return y.compute()
    if module.name == "array_api":
        return np.asarray(y.__dlpack__ and np.from_dlpack(y))
    return y


def test_the_step_vocabulary_is_the_plans():
    assert set(plan.STEP_KINDS) == set(CASES)


def test_the_abstract_methods_are_the_required_hooks_and_the_rest_have_defaults():
    """What a backend must define is read from the class: its abstract methods (the array functions, the
    dtype questions, the index conversion and check, one step factory per step kind). Every other public
    name of the base is an optional hook with its default there, or a declared attribute."""
    required = set(contract.Backend.__abstractmethods__)
    assert {"accepts", "convert_index", "check_index", "dtype_kind", "to_numpy"} <= required
    factories = {n for n in required if "step" in vars(contract.Backend)[n].__annotations__}
    assert {vars(contract.Backend)[n].__annotations__["step"] for n in factories} == \
        {k.__name__ for k in plan.STEP_KINDS}
    optional = {n for n, v in vars(contract.Backend).items() if callable(v) and not n.startswith("_")} - required
    assert optional == {"check_indexes", "checks_step_natively", "checks_natively", "ready_index", "index_fault",
                        "check_into", "place", "unusual", "program"}
    attributes = set(contract.Backend.__annotations__)
    assert attributes == {"name", "TENSOR", "CODE", "INDEXES_OTHER", "READY_INDEXES", "EINSUM_MATMUL", "RESULTS"}


def test_the_step_table_holds_a_factory_for_every_step_kind():
    """STEPS, what rearr reads, is made by the base from the factories: one per class of STEP_KINDS."""
    for module in BACKEND_MODULES:
        backend = _backend(module)
        assert set(backend.STEPS) == set(plan.STEP_KINDS)
        assert all(f.__self__ is backend for f in backend.STEPS.values())


def test_no_backend_rebinds_module_globals():
    """The framework is bound on the instance (self.np, self.torch ...), never by a global statement."""
    import ast
    from pathlib import Path

    root = Path(contract.__file__).parent
    found = [f"{p.name}:{node.lineno}" for p in root.glob("*.py")
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(node, ast.Global)]
    assert found == []


def test_docs_name_every_hook_of_the_contract():
    """docs/backends.md's "Writing a backend" lists the required hooks and the optional ones as the class
    declares them (it once called program required, which has a default)."""
    import re
    from pathlib import Path

    text = (Path(contract.__file__).parents[2] / "docs" / "backends.md").read_text(encoding="utf-8")
    section = text[text.index("## Writing a backend"):]
    required_part = section[section.index("Required"):section.index("Optional, with their defaults")]
    optional_part = section[section.index("Optional, with their defaults"):section.index("### The registry line")]
    named = set(re.findall(r"`([A-Za-z_]+)\(", required_part)) | set(re.findall(r"`([A-Za-z_]+)`", required_part))
    assert set(contract.Backend.__abstractmethods__) <= named
    optional = {n for n, v in vars(contract.Backend).items() if callable(v) and not n.startswith("_")} - \
        set(contract.Backend.__abstractmethods__)
    attributes = set(contract.Backend.__annotations__) - {"name"}
    rows = set(re.findall(r"^\| `([A-Za-z_]+)", optional_part, flags=re.M))
    assert rows <= optional | attributes and attributes <= rows  # each row a hook; each attribute a row
    assert optional <= set(re.findall(r"`([A-Za-z_]+)\(", optional_part))  # each optional hook named
    assert "`program(" not in required_part  # a default, not required


def test_rearr_reads_no_hook_by_probing():
    """No getattr/hasattr on a backend anywhere in the package: every hook is declared on the base."""
    import re
    from pathlib import Path

    root = Path(rearr.__file__).parent
    probes = [f"{p.relative_to(root)}:{k}" for p in root.rglob("*.py")
              for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"\b(getattr|hasattr)\((backend|candidate|module|real|backends)\b", line)]
    assert probes == []


@pytest.mark.parametrize("module", BACKEND_MODULES)
def test_every_backend_module_names_its_backend(module):
    backend = vars(importlib.import_module(module))["BACKEND"]
    assert isinstance(backend, type) and issubclass(backend, contract.Backend)
    assert backend.__module__ == module


@pytest.mark.parametrize("module", BACKEND_MODULES)
def test_every_backend_satisfies_the_contract(module):
    backend = _backend(module)
    contract.check(type(backend))  # raises if anything is missing
    assert contract.lacks(type(backend)) == []


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


def _fake(drop=None, code="all") -> type:
    """A backend class with every hook of numpy's but one (``drop``: left to the base, where it is abstract)."""
    from rearr.backends.numpy import NumpyBackend as real

    hooks = {n: vars(real)[n] for n in contract.Backend.__abstractmethods__ if n != drop}
    templates = None if code is None else {k: v for k, v in real.CODE.items() if k is not code}
    return type("FakeBackend", (contract.Backend,), {"name": "fake", "CODE": templates, **hooks})


def test_a_complete_backend_passes():
    contract.check(_fake())


def test_a_missing_step_factory_is_named_with_its_step_kind():
    with pytest.raises(rearr.RearrError) as info:
        contract.check(_fake(drop="scatteralong"))
    assert "FakeBackend" in info.value.message
    assert "function scatteralong() (the factory of ScatterAlong steps)" in info.value.message
    assert "docs/backends.md" in info.value.hint


def test_a_missing_function_is_named():
    with pytest.raises(rearr.RearrError) as info:
        contract.check(_fake(drop="check_index"))
    assert "function check_index()" in info.value.message


def test_a_backend_without_a_name_is_refused():
    with pytest.raises(rearr.RearrError, match="lacks attribute name"):
        contract.check(type("Nameless", (_fake(),), {"name": ""}))


def test_something_that_is_not_a_backend_is_refused():
    for thing in (types.ModuleType("a_module"), _fake()()):  # a module; an instance, not the class
        with pytest.raises(rearr.RearrError) as info:
            contract.check(thing)
        assert "is not a subclass of rearr.backends.contract.Backend" in info.value.message


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


@pytest.mark.parametrize("drop", ["reduce", "accepts", "dtype_range"])
def test_registering_an_incomplete_backend_fails_at_registration(monkeypatch, drop):
    module = types.ModuleType("rearr_tests_incomplete_backend")
    module.BACKEND = _fake(drop=drop)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    specs = list(backends._SPECS)
    with pytest.raises(rearr.RearrError) as info:
        backends.register("numpy", module.__name__)  # numpy is imported: checked now
    assert f"lacks function {drop}()" in info.value.message
    assert backends._SPECS == specs  # not registered


def test_registering_a_complete_backend_makes_one_instance(monkeypatch):
    """A backend class registered for an imported framework is checked and made (its __init__ binds the
    framework) at register, once."""
    from rearr.backends.numpy import NumpyBackend

    made = []

    class Counted(NumpyBackend):
        def __init__(self) -> None:
            made.append(self)
            super().__init__()

    module = types.ModuleType("rearr_tests_counted_backend")
    module.BACKEND = Counted
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(backends, "_SPECS", list(backends._SPECS))
    monkeypatch.setattr(backends, "_LOADED", dict(backends._LOADED))
    backends.register("numpy", module.__name__)
    assert backends._load(module.__name__) is made[0] and len(made) == 1
    assert made[0].np is np and made[0].STEPS[plan.Reshape].__self__ is made[0]


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


def test_the_direct_path_gives_its_steps_the_index_env_the_careful_path_gives():
    """The direct program makes a DirectIndexEnv (no __init__ frame): an IndexEnv with the five fields of
    check_bounds=True, fill 0 and no into=, as the careful path's; the three constants cannot be set."""
    seen = []
    x, idx = torch.arange(16.0).reshape(2, 8), torch.tensor([[1, 7, 0], [3, 3, 5]])
    pattern = "b n[idx] -> b k"
    rearr.rearrange(x, pattern, idx=idx)  # the careful path: the direct program is kept
    key = rearr.run.cache.direct_key("rearrange", x, pattern, None, True, {"idx": idx})
    program = rearr.run.cache.DIRECT[key]
    env_class = contract.DirectIndexEnv
    assert "__new__" not in vars(env_class)
    with pytest.raises(TypeError):
        env_class(pattern, {})  # made empty, its fields set by its maker
    original = env_class.__new__

    def recording(cls):
        env = original(cls)
        seen.append(env)
        return env

    env_class.__new__ = recording
    try:
        out = program(x, {"idx": idx})
    finally:
        del env_class.__new__  # object's again (the class defines none)
    assert torch.equal(out, torch.gather(x, 1, idx))
    (env,) = seen
    assert isinstance(env, contract.IndexEnv) and not hasattr(env, "__dict__")
    assert (env.text, env.indices, env.fill, env.into, env.checks) == (pattern, {"idx": idx}, 0, None, True)
    for field in ("fill", "into", "checks"):
        with pytest.raises(AttributeError):
            setattr(env, field, 1)


def test_a_tensor_is_offered_to_its_own_frameworks_backends_first():
    """A torch tensor does not load the numpy backend (nor its generic array code), in a fresh process."""
    code = ("import sys, numpy, torch, rearr; rearr.rearrange(torch.zeros(2, 3), 'a b -> b a'); "
            "loaded = sorted(m for m in sys.modules if m.startswith('rearr.backends.')); "
            "assert 'rearr.backends.numpy' not in loaded and 'rearr.backends._xp' not in loaded, loaded; "
            "assert type(rearr.rearrange(numpy.zeros((2, 3)), 'a b -> b a')) is numpy.ndarray")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_backend_registered_for_a_package_answers_for_its_ndarray_subclasses(monkeypatch):
    """The package's own backends are asked before numpy's, even about an ndarray subclass."""
    from rearr.backends.numpy import NumpyBackend

    package = types.ModuleType("rearr_tests_arrays")

    class Sub(np.ndarray):
        pass

    Sub.__module__ = package.__name__

    class Own(NumpyBackend):
        def accepts(self, x: object) -> bool:
            return isinstance(x, Sub)

    module = types.ModuleType("rearr_tests_own_backend")
    module.BACKEND = Own
    monkeypatch.setitem(sys.modules, package.__name__, package)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(backends, "_SPECS", list(backends._SPECS))
    monkeypatch.setattr(backends, "_LOADED", dict(backends._LOADED))
    monkeypatch.setattr(backends, "_BY_TYPE", {})
    backends.register(package.__name__, module.__name__)
    assert type(backends.backend_for(np.zeros(2).view(Sub))) is Own
    assert type(backends.backend_for(np.zeros(2))) is NumpyBackend


def test_a_part_read_once_is_made_on_the_first_read_and_kept_as_an_attribute():
    """read_once (torch's ops, autograd, scatters; numpy's xp): made by the first read, then an
    ordinary instance attribute, set by setattr (the instance's __dict__ is never read)."""
    from rearr.backends import _common

    made = []

    class Holder:
        @_common.read_once
        def part(self):
            """The part."""
            made.append(self)
            return object()

    first, other = Holder(), Holder()
    assert first.part is first.part and made == [first]
    assert other.part is not first.part and made == [first, other]
    assert isinstance(Holder.part, _common.read_once) and Holder.part.__doc__ == "The part."
    torch_backend = backends.backend_for(torch.zeros(1))
    assert torch_backend.ops is importlib.import_module("rearr.backends._torch_ops")


@pytest.mark.parametrize("module", [None, 3])
def test_an_object_whose_class_sets_an_odd_module_is_refused_as_any_unknown_object(module):
    odd = type("Odd", (), {"__module__": module, "shape": (2, 3)})
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(odd(), "a b -> b a")
    assert info.value.code == "RA500" and "Odd" in info.value.message
