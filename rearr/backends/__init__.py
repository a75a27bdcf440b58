"""The backend registry: keyed on type(x), looked at only for frameworks already imported.

A backend is one module whose ``BACKEND`` is a subclass of `contract.Backend`,
the abstract class that declares every hook (with defaults for the optional
ones). A new backend is that module plus one line in ``_SPECS`` (or a call to
`register`). The registry checks the class against the contract and makes its
one instance when it loads it: when a tensor of its framework first arrives, or
at `register` when the framework is already imported.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from ..errors import RearrError, nearest

if TYPE_CHECKING:
    from .contract import Backend

# (framework module that must already be imported, rearr backend module). torch's DTensor before torch:
# a DTensor is a torch.Tensor too, and its backend is the torch backend for sharded tensors.
_SPECS: list[tuple[str, str]] = [("numpy", "rearr.backends.numpy"),
                                 ("torch.distributed.tensor", "rearr.backends._torch_dtensor"),
                                 ("torch", "rearr.backends.torch"), ("dask.array", "rearr.backends.dask"),
                                 ("jax", "rearr.backends.jax")]
# Tried last: any other array with __array_namespace__ (array-api-strict, cupy ...). It has no
# framework module to look for; its accepts() reads only the type, and array_api_compat loads on first use.
_GENERIC = "rearr.backends.array_api"
_BY_TYPE: dict[type, Backend] = {}
_LOADED: dict[str, Backend] = {}  # backend module -> the one instance of its BACKEND class, once checked


def register(framework: str, module: str) -> None:
    """Make a backend module available for tensors of ``framework``.

    The module is checked against the contract now if the framework is
    already imported (else when its first tensor arrives); one that fails is
    not registered.
    """
    if framework in sys.modules:
        _load(module)
    _SPECS.append((framework, module))


def _load(module: str) -> Backend:
    """The backend of a module: its BACKEND class, checked against the contract and made (which binds its
    framework), once."""
    backend = _LOADED.get(module)
    if backend is None:
        from . import contract  # here: `import rearr` loads no backend

        cls = _backend_of(module)
        contract.check(cls)
        backend = _LOADED[module] = cls()
    return backend


def _backend_of(module: str) -> type[Backend]:
    """A module's BACKEND class, imported without its framework (explain reads its templates so)."""
    from . import contract

    found = vars(importlib.import_module(module)).get("BACKEND")
    if not (isinstance(found, type) and issubclass(found, contract.Backend)):
        raise RearrError(f"backend module {module} has no BACKEND that is a subclass of rearr.backends.contract."
                         "Backend", code="RA500", hint="end the module with BACKEND = YourBackend, a subclass of "
                         "rearr.backends.contract.Backend (see docs/backends.md)")
    return found


def backend_for(x: object) -> Backend:
    backend = _BY_TYPE.get(type(x))
    if backend is not None:
        return backend
    for framework, module in (*_own_framework_first(type(x)), (None, _GENERIC)):
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


def _own_framework_first(cls: type) -> list[tuple[str, str]]:
    """_SPECS, those registered for the package that defines cls first (a torch tensor does not load the
    numpy backend), each group in _SPECS' order. For the shipped backends this decides only which ones
    load: none accepts a class defined in another one's framework package."""
    package = str(cls.__module__).partition(".")[0]  # str: a class may set __module__ to anything
    return sorted(_SPECS, key=lambda spec: spec[0].partition(".")[0] != package)


def _by_name() -> dict[str, str]:
    """Each backend module by its short name (numpy, torch, dask, array_api), without importing it; not a
    private one (_torch_dtensor: torch's code, for sharded tensors)."""
    modules = (*(m for _, m in _SPECS), _GENERIC)
    return {module.rpartition(".")[2]: module for module in modules if not module.rpartition(".")[2].startswith("_")}


def explainable() -> tuple[str, ...]:
    """The names of the backends that ship explain templates (a CODE table); no framework is imported."""
    return tuple(name for name, module in _by_name().items() if _backend_of(module).CODE is not None)


def backend_named(name: str) -> Backend:
    """The backend ``name`` (its module's last name, or the framework it is registered for), for
    explain to read its templates and attributes; the framework is not imported."""
    modules = _by_name()
    module = modules.get(name) or next((m for framework, m in _SPECS if framework == name), None)
    if module is None:
        guess = nearest(str(name), modules)
        raise RearrError(f"unknown backend {name!r}", code="RA500",
                         hint=(f"use {guess!r}; the backends are " if guess else "one of ") + ", ".join(modules))
    return _backend_of(module)


def code_templates(name: str) -> dict:
    """The CODE table (explain's templates) of the backend ``name`` (see backend_named)."""
    templates = backend_named(name).CODE
    if templates is None:
        raise RearrError(f"the {name} backend has no code templates to explain with", code="RA500",
                         hint=f"explain with backend= one of {', '.join(explainable())}")
    return dict(templates)
