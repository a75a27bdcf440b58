"""rearr: einops-style tensor patterns, with gather and scatter, on numpy, torch, dask, jax and other
Array API arrays.

``import rearr`` imports no tensor library and never lark: the parser (rearr/syntax) loads on the
first pattern, a backend when a tensor of its framework first arrives, and rearr.explain on its
first use.

The package is laid out as its pipeline: syntax -> rules -> planning -> run -> backends, with api
(the public functions) on top and tools (explain, check, the command line) at the edge.
"""

from typing import TYPE_CHECKING

from . import _torch_compile
from ._version import __version__ as __version__  # "as": re-exported for type checkers
from .api import asnumpy, einsum, pack, parse_shape, rearrange, reduce, repeat, scatter, unpack
from .errors import RearrError

if TYPE_CHECKING:  # type checkers see the lazily loaded names' real types (__getattr__ returns object)
    from .tools.explain import explain

_torch_compile.watch_for_dynamo()  # torch.compile: the public functions become graph nodes once dynamo loads


def __getattr__(name: str) -> object:
    # rearr.tools.explain was a sixth of `import rearr`; most programs never call explain.
    if name == "explain":
        from .tools.explain import explain

        globals()["explain"] = explain
        return explain
    raise AttributeError(f"module 'rearr' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "explain"})


__all__ = [
    "RearrError",
    "asnumpy",
    "einsum",
    "explain",
    "pack",
    "parse_shape",
    "rearrange",
    "reduce",
    "repeat",
    "scatter",
    "unpack",
]
