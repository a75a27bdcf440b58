"""The backend registry: keyed on type(x), looked at only for frameworks already imported.

A backend is one module that satisfies `contract.Backend`: ``accepts``,
``stack``, ``concat``, ``einsum``, ``convert_index``, ``check_index``, and a
``STEPS`` table from each step class of rearr.plan to the factory that lowers
it. A new backend is that module plus one line in ``_SPECS`` (or a call to
`register`). The registry checks a module against the contract when it loads
it: when a tensor of its framework first arrives, or at `register` when the
framework is already imported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType

from ..errors import RearrError

# (framework module that must already be imported, rearr backend module)
_SPECS: list[tuple[str, str]] = [("numpy", "rearr.backends.numpy"), ("torch", "rearr.backends.torch"),
                                 ("dask.array", "rearr.backends.dask"), ("jax", "rearr.backends.jax")]
# Tried last: any other array with __array_namespace__ (array-api-strict, cupy ...). It has no
# framework module to look for; its accepts() reads only the type, and array_api_compat loads on first use.
_GENERIC = "rearr.backends.array_api"
_BY_TYPE: dict[type, ModuleType] = {}
_CHECKED: set[str] = set()  # backend modules that passed contract.check


def register(framework: str, module: str) -> None:
    """Make a backend module available for tensors of ``framework``.

    The module is checked against the contract now if the framework is
    already imported (else when its first tensor arrives); one that fails is
    not registered.
    """
    if framework in sys.modules:
        _load(module)
    _SPECS.append((framework, module))


def _load(module: str) -> ModuleType:
    """The backend module, imported and checked against the contract (once)."""
    backend = importlib.import_module(module)
    if module not in _CHECKED:
        if hasattr(backend, "load"):  # a backend that binds its framework late (to serve explain without it)
            backend.load()
        from . import contract  # here: its Protocol class costs import time that only loading a backend needs

        contract.check(backend)
        _CHECKED.add(module)
    return backend


def backend_for(x: object) -> ModuleType:
    backend = _BY_TYPE.get(type(x))
    if backend is not None:
        return backend
    for framework, module in (*_SPECS, (None, _GENERIC)):
        if framework is None or framework in sys.modules:  # never import a framework just to test a type
            candidate = _load(module)
            if candidate.accepts(x):
                _BY_TYPE[type(x)] = candidate
                return candidate
    raise RearrError(
        f"rearr does not accept {type(x).__name__} objects",
        code="RA500",
        hint="pass a numpy array, a torch tensor, a dask array, an Array API array (jax, array-api-strict ...), "
        "or a list of equal-shaped ones",
    )


class _WhenDynamoLoads:  # a meta path finder (importlib.abc is not its base: importing it costs ~2 ms)
    """Registers rearr's functions with torch.compile's dynamo right after ``torch._dynamo`` is imported.

    allow_in_graph needs torch._dynamo, which ``import torch`` does not load (it costs
    seconds); torch.compile loads it. This finder waits for that import, at no cost
    to rearr's calls, so that registration happens before dynamo traces a rearr call,
    whatever the order of ``import rearr``, ``import torch`` and the first eager call.
    """

    def find_spec(self, name: str, path: object, target: object = None) -> object:
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:  # the finders after this one, as the import system would ask them
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _allow_in_graph()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _allow_in_graph() -> None:
    importlib.import_module("rearr.backends._torch_ops").allow_in_graph()


def watch_for_dynamo() -> None:
    """Called once by ``import rearr``: register now if dynamo is loaded, else when it is."""
    if "torch._dynamo" in sys.modules:
        _allow_in_graph()
    elif not any(isinstance(f, _WhenDynamoLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenDynamoLoads())


def compile_plan(steps: tuple, backend: ModuleType) -> tuple[Callable, ...]:
    """Each step as the backend's native call(s), ready to run, after the plan's dtype check if it needs one."""
    calls, check = compile_steps(steps, backend)
    return calls if check is None else (check, *calls)


def compile_steps(steps: tuple, backend: ModuleType) -> tuple[tuple[Callable, ...], Callable | None]:
    """Each step as the backend's native call(s), and apart, the plan's dtype check (policy.prelude) or None."""
    from .. import policy  # here, once per new plan: `import rearr` does not load it

    table = backend.STEPS
    calls = tuple(table[type(step)](step) for step in steps)
    return backend.program(steps, calls), policy.prelude(steps, backend)


def _by_name() -> dict[str, str]:
    """Each backend module by its short name (numpy, torch, dask, array_api), without importing it."""
    return {module.rpartition(".")[2]: module for module in (*(m for _, m in _SPECS), _GENERIC)}


def explainable() -> tuple[str, ...]:
    """The names of the backends that ship explain templates (a CODE table); no framework is imported."""
    return tuple(name for name, module in _by_name().items()
                 if getattr(importlib.import_module(module), "CODE", None) is not None)


def code_templates(name: str) -> dict:
    """The CODE table (explain's templates) of the backend ``name`` (its module's last name, or the
    framework it is registered for); the framework is not imported."""
    modules = _by_name()
    module = modules.get(name) or next((m for framework, m in _SPECS if framework == name), None)
    if module is None:
        raise RearrError(f"unknown backend {name!r}", code="RA500", hint=f"one of {', '.join(modules)}")
    templates = getattr(importlib.import_module(module), "CODE", None)
    if templates is None:
        raise RearrError(f"the {name} backend has no code templates to explain with", code="RA500",
                         hint=f"explain with backend= one of {', '.join(explainable())}")
    return templates
