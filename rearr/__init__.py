"""rearr: einops-style tensor patterns, with gather and scatter, on numpy and torch.

``import rearr`` imports neither torch nor lark: lark is loaded on the first new
pattern, a backend only when a tensor of its framework arrives, and rearr.explain
on the first use of ``rearr.explain``.
"""

from .api import asnumpy, einsum, pack, parse_shape, rearrange, reduce, repeat, scatter, unpack
from .errors import RearrError


def __getattr__(name: str) -> object:
    # rearr.explainer was a sixth of `import rearr`; most programs never call explain.
    if name == "explain":
        from .explainer import explain

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
