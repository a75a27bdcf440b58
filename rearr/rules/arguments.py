"""The rules of a call's arguments besides its pattern: one home, read by the public functions
(rearr.run.call), the layers' constructors (layer_recipe) and so `rearr check`."""

from __future__ import annotations

import numbers
from typing import get_args

from .._types import CheckMode
from ..errors import RearrError
from .recipe import REDUCTIONS, SCATTER_REDUCTIONS


def symbolic(n: object) -> bool:
    """A torch.SymInt: a length that torch.compile keeps symbolic (a dynamic shape). The planner
    computes with it as with an int; int(n) would specialize the compiled code to one value, and
    comparing it with a constant would add a guard."""
    return type(n).__name__ == "SymInt"


def symbolic_number(n: object) -> bool:
    """A torch.SymInt or SymFloat: a number (scatter's fill=) that torch.compile keeps symbolic. Not a
    length: a SymFloat length is refused as a float is."""
    return type(n).__name__ in ("SymInt", "SymFloat")


def reduction_error(op: str, reduction: object, text: str | None) -> RearrError | None:
    """The kind of value a reduction is: reduce takes a name or a callable f(x, axes), scatter a name.
    (Which names: rules.recipe.validate.)"""
    if op == "reduce" and not (callable(reduction) or isinstance(reduction, str)):
        return RearrError(f"the reduction must be a name or a callable, not {type(reduction).__name__}",
                          code="RA400", pattern=text, hint=f"one of {', '.join(REDUCTIONS)}")
    if op == "scatter" and not isinstance(reduction, str):
        return RearrError("scatter's reduction is a name", code="RA400", pattern=text,
                          hint=f"one of {', '.join(SCATTER_REDUCTIONS)}")
    return None


def fill_value(fill: object, text: str | None) -> object:
    """scatter's fill=: a number, the value of a 0-d tensor or array, or torch.compile's symbolic number
    as it is. Anything else is the RearrError. A bool is a number, as numpy and torch read it (True is
    1), whether it comes as True or as np.True_: a bool result's natural fill."""
    if isinstance(fill, numbers.Number) or symbolic_number(fill):
        return fill
    item = getattr(fill, "item", None) if getattr(fill, "shape", None) == () else None
    if item is None:
        raise RearrError(f"fill= must be a number, not {type(fill).__name__}", code="RA500", pattern=text,
                         hint="pass a Python number, e.g. fill=0.0; to start from a tensor, use into=")
    return item()


# check_bounds= of rearrange, scatter and the Gather / Scatter layers: True (the default: the exact check
# on the CPU, device-side assertions on CUDA), "sync" (the exact check everywhere, one host read on a GPU),
# "async" (device-side assertions wherever torch has them, no host read) or False (no bounds check).
CHECK_BOUNDS = (True, *get_args(CheckMode), False)


def check_bounds_error(value: object) -> RearrError | None:
    """The RearrError for a check_bounds= value that is not one of CHECK_BOUNDS, else None (exact
    types: 1 == True and a numpy bool would otherwise pass as a mode)."""
    if value is True or value is False or value.__class__ is str and value in CHECK_BOUNDS:
        return None
    return RearrError(f"check_bounds={value!r} is not a checking mode", code="RA500",
                      hint="pass check_bounds=True (the default), 'sync' (the exact error, one host read), "
                      "'async' (device-side assertions, no host read) or False (no bounds check)")
