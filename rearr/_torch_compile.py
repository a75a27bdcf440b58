"""torch.compile: rearr's public functions become single nodes of dynamo's graph.

dynamo writes each call into its graph as one node instead of tracing rearr's Python (the parser, the
plan caches, the planner). The node runs rearr's own code with fake tensors to learn the output's shape
(symbolic under dynamic shapes: the planner computes with torch.SymInt, uncached), and AOT autograd
(``aot_eager``, inductor) runs it again to record the native calls. The data checks stay in the graph as
the custom ops of rearr/backends/_torch_ops.py. This module registers the public functions, so it sits
above rearr.api; ``import rearr`` calls `watch_for_dynamo` once.
"""

from __future__ import annotations

import sys
from types import ModuleType

from . import api


class _WhenDynamoLoads:  # a meta path finder (importlib.abc is not its base: `import rearr` would load it)
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


def watch_for_dynamo() -> None:
    """Called once by ``import rearr``: register now if dynamo is loaded, else when it is."""
    if "torch._dynamo" in sys.modules:
        _allow_in_graph()
    elif not any(isinstance(f, _WhenDynamoLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenDynamoLoads())


def _allow_in_graph() -> None:
    """Register rearr's public functions with dynamo (torch._dynamo is imported: torch.compile is in use)."""
    import torch._dynamo
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    from .backends import _BY_TYPE, _load, _torch_ops
    from .run import parse_shape  # noqa: F401  parse_shape is traced: its module is loaded before dynamo reads it

    _torch_ops._define()  # the check ops exist before dynamo traces their first call

    for fn in (api.rearrange, api.reduce, api.repeat, api.scatter, api.einsum, api.pack, api.unpack):
        torch._dynamo.allow_in_graph(fn)
    # torch's tensor types, the tracers' included, known up front: dynamo then reads the type registry
    # (parse_shape is traced) without importing the backend mid-trace, and it does not change mid-compile.
    backend = _load("rearr.backends.torch")  # imported, checked and made (which binds torch)
    for cls in (torch.Tensor, torch.nn.Parameter, FakeTensor, FunctionalTensor):
        _BY_TYPE.setdefault(cls, backend)

