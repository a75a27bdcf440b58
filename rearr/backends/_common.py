"""What every backend shares: the messages of index faults, the search for the first bad value, the
refusal of a scatter, and small helpers on a plan's index terms. Nothing here imports a framework."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import RearrError
from ..planning.plan import IndexTerm, IndexUse
from .contract import IndexEnv

SCATTER_NATIVE = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin", "prod": "prod"}


class read_once:  # lower case: a decorator, as functools.cached_property
    """functools.cached_property, keeping the value by setattr rather than by writing into the
    instance's __dict__ (which cached_property reads): once __dict__ is read, CPython 3.11 reads every
    other attribute of that instance without its specialized fast path (a backend's ready_index, on
    every call seen before, reads three)."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        self.make, self.name, self.__doc__ = make, make.__name__, make.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = self.make(instance)
        setattr(instance, self.name, value)  # an instance attribute: found before this non-data descriptor
        return value


def masked(x: object) -> bool:
    # np.ma loads on first use of the attribute (slowly): without it in sys.modules there is no masked array.
    ma = sys.modules.get("numpy.ma")
    return ma is not None and isinstance(x, ma.MaskedArray)


def native_order(value: object) -> object:
    """value, or a numpy array of another byte order (read from a file: HDF5, netCDF, np.fromfile) in
    the machine's own, which torch.as_tensor requires."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray) and not value.dtype.isnative:
        return value.astype(value.dtype.newbyteorder("="))
    return value


def one_dtype(a: object, b: object) -> bool:
    """Whether two dtypes hold the same values: equal, or one numpy dtype in either byte order (an array
    read from HDF5, netCDF or np.fromfile), which numpy's calls read as its values."""
    if a == b:
        return True
    np = sys.modules.get("numpy")
    return np is not None and isinstance(a, np.dtype) and isinstance(b, np.dtype) and \
        a.newbyteorder("=") == b.newbyteorder("=")


def masked_input(what: str) -> RearrError:
    # numpy's own functions honour a mask in some calls (x.sum) and drop it in others (np.add.at,
    # np.asarray): rather than a result that depends on which one a plan uses, refuse it.
    return RearrError(
        f"{what} is not accepted: numpy honours masks in some of the calls a plan uses and drops "
        "them in others",
        code="RA500",
        hint="pass x.filled(v) with the value masked entries should count as (0 for a sum), or "
        "np.ma.getdata(x); to keep a mask, run the pattern on np.ma.getmaskarray(x) as well and "
        "rebuild with np.ma.array(data, mask=mask)",
    )


def masked_index(name: str, text: str) -> RearrError:
    # Every library's conversion (np.asarray, torch.as_tensor, jnp.asarray) drops the mask: the masked
    # entries would index with whatever value they hide.
    return RearrError(
        f"a masked index {name!r} is not accepted: its conversion to an index would drop the mask",
        code="RA500",
        pattern=text,
        hint=f"pass {name}={name}.filled(i) with a valid position i for the masked entries, or "
        f"np.ma.getdata({name}) to use the values it hides",
    )


def bad_index_dtype(name: str, dtype: object, text: str) -> RearrError:
    return RearrError(
        f"index {name!r} has dtype {dtype}; an index holds integers",
        code="RA501",
        pattern=text,
        hint=f"convert it, e.g. {name}=idx.long() (torch) or idx.astype(np.int64) (numpy)",
    )


def beyond_index_range(name: str, text: str, value: int, position: tuple[int, ...], bits: int = 64) -> RearrError:
    """An index value that the backend's index dtype (int64; int32 for jax without x64) cannot hold:
    the conversion would wrap it to another value, which may look valid."""
    where = f"larger than any axis can be (2**{bits - 1} - 1)" if value > 0 else \
        f"smaller than any index can be (-2**{bits - 1})"
    return RearrError(
        f"index {name!r} holds {value} at position {position}, {where}",
        code="RA501",
        pattern=text,
        hint="index values must lie in -n <= i < n for an axis of length n",
    )


def out_of_range(use: IndexUse, text: str, value: int, position: tuple[int, ...]) -> RearrError:
    n = use.length
    return RearrError(
        f"index {use.name!r} holds {value} at position {position}, outside axis {use.axis!r} of length {n}",
        code="RA501",
        pattern=text,
        col=use.col,
        hint=f"index values must lie in {-n} <= i < {n} (negative ones count from the end)",
    )


# --- the first bad value of an index: every backend's exact check ends here ------------------------------


def first(values: Any, bad: Any, xp: Any = None) -> tuple[int, tuple[int, ...]] | None:
    """The value of the array values at the first position (row-major) where the bool array bad holds,
    and that position; None where it holds nowhere. ``xp``: the arrays' namespace (an Array API one, or
    numpy, the default: a host copy of the index, as torch's and jax's exact checks read it)."""
    if xp is None:
        import numpy as xp  # in sys.modules wherever an index has values on the host
    (hits,) = xp.nonzero(xp.reshape(bad, (-1,)))
    if hits.shape[0] == 0:
        return None
    k = int(hits[0])
    position = []
    for n in reversed(values.shape):
        position.append(k % n)
        k //= n
    position.reverse()
    return int(xp.reshape(values, (-1,))[int(hits[0])]), tuple(position)


def _shifted(position: tuple[int, ...], start: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(p + s for p, s in zip(position, start)) if start else position


def refuse_out_of_range(use: IndexUse, text: str, values: Any, xp: Any = None, start: tuple[int, ...] = ()) -> None:
    """RA501 for the first value of values outside -n <= i < n, if any (``start``: where values begin in
    the whole index, for a dask block)."""
    n = use.length
    found = first(values, (values < -n) | (values >= n), xp)
    if found is not None:
        raise out_of_range(use, text, found[0], _shifted(found[1], start))


def wraps(dtype: Any, bits: int) -> bool:
    """Whether an integer dtype (numpy's, or jax's, which are numpy's) holds values that an index dtype
    of ``bits`` bits cannot: uint64 for int64, int64 and uint32 for int32."""
    import numpy as np

    info = np.iinfo(dtype)
    return info.max > 2 ** (bits - 1) - 1 or info.min < -(2 ** (bits - 1))


def refuse_beyond(name: str, text: str, values: Any, bits: int, xp: Any = None, start: tuple[int, ...] = ()) -> None:
    """RA501 for the first value of the integer array values that an index dtype of ``bits`` bits cannot
    hold (the cast would wrap it to another value, which may look valid), if any."""
    bad = values > 2 ** (bits - 1) - 1
    unsigned = values.dtype.kind == "u" if xp is None else xp.isdtype(values.dtype, "unsigned integer")
    if not unsigned:  # (a negative bound is no value of an unsigned dtype, which may refuse to compare with it)
        bad = bad | (values < -(2 ** (bits - 1)))
    found = first(values, bad, xp)
    if found is not None:
        raise beyond_index_range(name, text, found[0], _shifted(found[1], start), bits)


def refused_index(library: str, e: Exception, text: str, uses: Iterable[IndexUse] = (),
                  indices: Mapping[str, Any] | None = None) -> RearrError:
    """A native call's refusal of an index value under check_bounds=False, which checked none. Now that
    the call has failed, the indexes (``uses``, their tensors in ``indices``) are read to name the first
    one holding a value outside 0 <= i < n, with the value, its position and a caret; where their values
    cannot be read on the host (or none is outside), the native call's message."""
    for use in uses:
        try:
            values = _host_values(indices[use.name])  # type: ignore[index]
        except (TypeError, ValueError, RuntimeError, AttributeError):  # not readable on the host
            break
        found = first(values, (values < 0) | (values >= use.length))
        if found is not None:
            return RearrError(
                f"index {use.name!r} holds {found[0]} at position {found[1]}, outside axis {use.axis!r} of "
                f"length {use.length}: check_bounds=False promised 0 <= {use.name} < {use.length}, and {library} "
                "refused it",
                code="RA501", pattern=text, col=use.col,
                hint=f"pass values in 0 <= {use.name} < {use.length}, or drop check_bounds=False: rearr then "
                "checks every value and counts negative ones from the end")
    return RearrError(f"{library} refused an index: {e}", code="RA501", pattern=text,
                      hint="check_bounds=False promises index values in 0 <= i < n; turn the check on "
                      "to find the bad one")


def _host_values(t: Any) -> Any:
    """An index tensor's values as a numpy array, where they are in host memory (numpy, torch on the CPU;
    numpy refuses a torch tensor on a device: TypeError)."""
    import numpy as np

    return np.asarray(t)


def duplicate_under_set(name: str, text: str) -> RearrError:
    return RearrError(
        f"index {name!r} writes the same position more than once under 'set'",
        code="RA501",
        pattern=text,
        hint="use a reduction that combines duplicates ('sum', 'mean', 'max', 'min', 'prod'), "
        "or make the indices unique",
    )


def arranged_into(env: IndexEnv, calls: tuple) -> object | None:
    """into= (never modified) brought to the scatter's layout by the plan's steps, or None."""
    into = env.into
    if into is None:
        return None
    for f in calls:
        into = f(into, env)
    return into


def identity_perm(perm: tuple[int, ...]) -> bool:
    return perm == tuple(range(len(perm)))


def index_as_passed(c: IndexTerm) -> bool:
    """Whether the term is its index tensor as passed (no permute, no view, stride 1): its shape is
    in the plan's key, so a step may read it without a reshape."""
    return c.index is not None and identity_perm(c.perm) and c.permuted == c.shape and c.stride == 1


def term_layout(c: IndexTerm) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """The permutation (None when identity) and view shape of one coordinate."""
    return (None if identity_perm(c.perm) else c.perm), c.shape


def not_an_index(name: str, value: object, text: str) -> RearrError:
    return RearrError(
        f"index {name!r} is a {type(value).__name__}, not an integer tensor",
        code="RA501",
        pattern=text,
        hint=f"pass {name}= as an integer array or tensor (or a list of ints)",
    )


def no_scatter(refusal: Callable[[Any, str | None], RearrError]) -> tuple[Callable, Callable]:
    """The step factory and explain's template of a backend that cannot scatter: both raise
    ``refusal(x, pattern)`` (x is None for explain), the one error that says why and what to do."""
    def factory(step: object) -> Callable:
        def run(x: Any, env: IndexEnv) -> Any:
            raise refusal(x, env.text)

        return run

    def template(step: object, before: object, names: object) -> list[str]:
        raise refusal(None, None)

    return factory, template
