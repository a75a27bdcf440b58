"""The backend registry: keyed on type(x), looked at only for frameworks already imported.

A backend is one module that satisfies `contract.Backend`: ``accepts``,
``stack``, ``concat``, ``einsum``, ``convert_index``, ``check_index``, and a
``STEPS`` table from each step class of rearr.planning.plan to the factory that lowers
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

from ..errors import RearrError, nearest

# (framework module that must already be imported, rearr backend module)
_SPECS: list[tuple[str, str]] = [("numpy", "rearr.backends.numpy"), ("torch", "rearr.backends.torch"),
                                 ("dask.array", "rearr.backends.dask")]
# Tried last: any other array with __array_namespace__ (jax, array-api-strict, cupy ...). It has no
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


def compile_plan(steps: tuple, backend: ModuleType) -> tuple[Callable, ...]:
    """Each step as the backend's native call(s), ready to run, after the plan's dtype check if it needs one."""
    calls, check = compile_steps(steps, backend)
    return calls if check is None else (check, *calls)


def compile_steps(steps: tuple, backend: ModuleType) -> tuple[tuple[Callable, ...], Callable | None]:
    """Each step as the backend's native call(s), and apart, the plan's dtype check (policy.prelude) or None."""
    from ..planning import policy  # here, once per new plan: `import rearr` does not load it

    table = backend.STEPS
    return tuple(table[type(step)](step) for step in steps), policy.prelude(steps, backend)


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
        guess = nearest(str(name), modules)
        raise RearrError(f"unknown backend {name!r}", code="RA500",
                         hint=(f"use {guess!r}; the backends are " if guess else "one of ") + ", ".join(modules))
    templates = getattr(importlib.import_module(module), "CODE", None)
    if templates is None:
        raise RearrError(f"the {name} backend has no code templates to explain with", code="RA500",
                         hint=f"explain with backend= one of {', '.join(explainable())}")
    return templates
