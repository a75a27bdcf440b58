"""The backend registry: keyed on type(x), looked at only for frameworks already imported.

A backend module provides ``accepts(x)``, ``stack(xs)``, ``convert_index``,
``check_index``, ``einsum``, ``concat``, ``zeros_like_meta`` ... and one factory
per plan step kind, named after the step class in lower case (``reshape``,
``permute``, ``takerows`` ...), returning a callable ``f(x, env) -> x``.
Other backends register with `register`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType

from ..errors import RearrError

# (framework module that must already be imported, rearr backend module)
_SPECS: list[tuple[str, str]] = [("numpy", "rearr.backends.numpy"), ("torch", "rearr.backends.torch"),
                                 ("dask.array", "rearr.backends.dask")]
# Tried last: any other array with __array_namespace__ (jax, array-api-strict, cupy ...). It has no
# framework module to look for; its accepts() reads only the type, and array_api_compat loads on first use.
_GENERIC = "rearr.backends.array_api"
_BY_TYPE: dict[type, ModuleType] = {}


def register(framework: str, module: str) -> None:
    """Make a backend module available for tensors of ``framework``."""
    _SPECS.append((framework, module))


def backend_for(x: object) -> ModuleType:
    backend = _BY_TYPE.get(type(x))
    if backend is not None:
        return backend
    for framework, module in (*_SPECS, (None, _GENERIC)):
        if framework is None or framework in sys.modules:  # never import a framework just to test a type
            candidate = importlib.import_module(module)
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
    """Each step as the backend's native call(s), ready to run."""
    return tuple(getattr(backend, type(step).__name__.lower())(step) for step in steps)
