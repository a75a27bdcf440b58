"""rearr: einops-style tensor patterns, with gather and scatter, on numpy and torch.

``import rearr`` imports neither torch nor lark: lark is loaded on the first new
pattern, and a backend only when a tensor of its framework arrives.
"""

from .api import asnumpy, einsum, pack, parse_shape, rearrange, reduce, repeat, scatter, unpack
from .errors import RearrError
from .explain import explain

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
