"""The backend registry: keyed on type(x), looked at only for frameworks already imported.

A backend module provides ``accepts(x)``, ``stack(xs)``, ``convert_index``,
``check_index``, ``einsum``, ``concat``, ``zeros_like_meta`` ... and one factory
per plan step kind, named after the step class in lower case (``reshape``,
``permute``, ``takerows`` ...), returning a callable ``f(x, env) -> x``.
New backends (Array API, dask) register with `register`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType

from ..errors import RearrError

# (framework module that must already be imported, rearr backend module)
_SPECS: list[tuple[str, str]] = [("numpy", "rearr.backends.numpy"), ("torch", "rearr.backends.torch")]
_BY_TYPE: dict[type, ModuleType] = {}


def register(framework: str, module: str) -> None:
    """Make a backend module available for tensors of ``framework``."""
    _SPECS.append((framework, module))


def backend_for(x: object) -> ModuleType:
    backend = _BY_TYPE.get(type(x))
    if backend is not None:
        return backend
    for framework, module in _SPECS:
        if framework in sys.modules:  # never import a framework just to test a type
            candidate = importlib.import_module(module)
            if candidate.accepts(x):
                _BY_TYPE[type(x)] = candidate
                return candidate
    raise RearrError(
        f"rearr does not accept {type(x).__name__} objects",
        code="RA500",
        hint="pass a numpy array, a torch tensor, or a list of equal-shaped ones",
    )


class _WhenDynamoLoads(importlib.abc.MetaPathFinder):
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
    """Each step as the backend's native call(s), ready to run."""
    return tuple(getattr(backend, type(step).__name__.lower())(step) for step in steps)
