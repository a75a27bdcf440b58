"""rearr: einops-style tensor patterns, with gather and scatter, on numpy and torch.

``import rearr`` imports neither torch nor lark: lark is loaded on the first new
pattern, a backend only when a tensor of its framework arrives, and rearr.explain
on the first use of ``rearr.explain``.
"""

from .api import asnumpy, einsum, pack, parse_shape, rearrange, reduce, repeat, scatter, unpack
from .errors import RearrError


def __getattr__(name: str) -> object:
    # rearr.explain was a sixth of `import rearr`; most programs never call it. Importing the
    # submodule binds it as rearr.explain: the function replaces it (and the module is callable too,
    # for a program that imports rearr.explain first, see rearr/explain.py's end).
    if name == "explain":
        from .explain import explain

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

__version__ = "0.1.0"
