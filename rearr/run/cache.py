"""The bounded plan tables, each with the one function that makes its key. A table's reader (the
look-up of a call seen before, in rearr.api or rearr.run.call) builds the call's key once and passes
it down the careful path to the writer, which keeps the program it makes under that key: what the
next such call looks up is what was kept (tests/run/test_cache_keys.py)."""

from __future__ import annotations

import itertools
from _thread import allocate_lock  # threading's lock without importing threading (which `import rearr` would pay for)
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .._record import Record

if TYPE_CHECKING:
    from ..planning.einsum import EinsumPlan

    CACHES: tuple[Any, ...]  # made by __getattr__ below


class Table:
    """A bounded, thread-safe dict from a call's key to what its call runs (a program, or a tuple
    holding one).

    Reads take no lock (a dict read is atomic); additions do, and past ``maxsize`` the oldest entry
    goes. Like an lru_cache it has cache_info() and cache_clear() (CACHES lists it).
    """

    def __init__(self, name: str, maxsize: int = 1024) -> None:
        self.__name__, self.maxsize = name, maxsize
        self.entries: dict = {}
        self._lock = allocate_lock()

    def get_or_make(self, key: tuple, make: Callable, *args: Any) -> Any:
        """The entry of key, made now by make(*args) and kept if there is none; an unhashable key
        raises TypeError (before make runs)."""
        entry = self.entries.get(key)
        return entry if entry is not None else self.add(key, make(*args))

    def add(self, key: tuple, value: Any) -> Any:
        with self._lock:
            entries = self.entries
            if len(entries) >= self.maxsize:
                del entries[next(iter(entries))]  # the oldest: first in, first out (no bookkeeping on a hit)
            entries[key] = value
        return value

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self.maxsize, len(self.entries))

    def cache_clear(self) -> None:
        with self._lock:
            self.entries.clear()


class CacheInfo(Record):  # what lru_cache's cache_info() says of its size (a NamedTuple costs import time)
    maxsize: int
    currsize: int


# A key that cannot be hashed skips the tables: torch.compile's symbolic shapes and lengths
# (torch.SymInt, dynamic shapes: each is planned once per compile) and an unhashable reduce
# callable. The careful path then makes the program for that call alone.

# --- calls without index brackets: key -> program run(x, env) -----------------

unindexed = Table("unindexed")
UNINDEXED = unindexed.entries  # rearrange, reduce and repeat (rearr.api) look their call up here first


def int_items(lengths: dict[str, Any]) -> tuple | None:
    """The length keywords as key items when every value is an int, else None (no key holds None):
    2.0 == 2 and True == 1, so another value would find an int's entry."""
    for value in lengths.values():
        if value.__class__ is not int:
            return None
    return tuple(lengths.items())


def unindexed_key(op: str, pattern: str, reduction: object, x: Any, lengths: dict[str, Any]) -> tuple | None:
    """The call as the public function holds it: op and reduction as passed (reduce's "rearrange"
    included), x's class and shape, the int lengths; None where a length is not a plain int.

    rearr.api's look-ups build this tuple in place, on the hot path, and pass it down to the writer.
    The careful path calls this function for a call that the look-up could not key (a list input once
    stacked, lengths once they are ints), and looks that key up itself: either key is only ever found
    by the reader that built it, so the two share entries when they agree and merely stop sharing,
    never stop hitting, if they differ."""
    if lengths:
        items = int_items(lengths)
        return None if items is None else (op, pattern, reduction, x.__class__, x.shape, items)
    return (op, pattern, reduction, x.__class__, x.shape, ())


# --- calls with index brackets -------------------------------------------------

indexed = Table("indexed")  # key -> (index uses, program, natively checked indexes, program without dtype check)
INDEXED = indexed.entries


def indexed_key(op: str, pattern: str, reduction: object, backend: Any, shape: tuple, keywords: tuple,
                into_shape: tuple | None) -> tuple:
    """keywords: each keyword's (name, the index's shape or the int length), in the call's order. The key
    is the arguments of rearr.run.indexed.compile_indexed, in order."""
    return (op, pattern, reduction, backend, shape, keywords, into_shape)


# An indexed call seen before, with plain arguments: its program as one function f(x, keywords), made
# once such a call has passed the careful path (rearr.run.indexed.run): the dtype check passed for that
# dtype, so the function runs the native calls alone. Only calls with check_bounds True or False (the
# key holds which), no fill=, no into=: the readers (rearr.run.call.transform and scatter) look up
# no other call, so the writer is given no key for one.
direct = Table("direct")
DIRECT = direct.entries
CAREFUL = object()  # what a function of DIRECT returns for a call that it leaves to the careful path

SHAPE = itertools.repeat("shape")  # map(getattr, values, SHAPE, values): each value's shape, or the value itself


def direct_key(op: str, x: Any, pattern: str, reduction: object, checks: bool, kwargs: dict[str, Any]) -> tuple:
    """The call (checks: its check_bounds, True or False), x's class, shape and dtype, the keyword names,
    then each keyword's shape (an index) or value (a length), read in C by map. A list index makes the
    key unhashable; a float length finds the int's entry, whose function then declines. rearr.api's
    rearrange builds this tuple in place, as it builds unindexed_key's (a frame less on a tiny gather)."""
    values = kwargs.values()
    return (op, pattern, reduction, checks, x.__class__, x.shape, x.dtype, *kwargs,
            *map(getattr, values, SHAPE, values))


@lru_cache(maxsize=1024)
def index_names(text: str) -> frozenset[str]:
    """The names of the index operands of a pattern (what its brackets hold)."""
    from ..rules import recipe  # here: `import rearr` loads no rule (the careful path does)

    return frozenset(s.name for s in recipe.index_specs(recipe.parse(text)))


# --- einsum ----------------------------------------------------------------------

# A two-operand einsum: key -> rearr.run.einsum.program's (run, pre, arg, post). A flat key that hashes
# faster than einsum_plan's; filled from einsum_plan, the bounded LRU that planning goes through.
einsum_pairs = Table("einsum_pairs")
EINSUM_PAIRS = einsum_pairs.entries


def einsum_key(pattern: str, a: Any, b: Any, lengths: dict[str, Any]) -> tuple | None:
    """The pattern, each operand's class and shape, the int lengths; None where a length is not a
    plain int (as unindexed_key)."""
    items = int_items(lengths) if lengths else ()
    return None if items is None else (pattern, a.__class__, a.shape, b.__class__, b.shape, items)


@lru_cache(maxsize=1024)
def einsum_plan(pattern: str, shapes: tuple, lengths: tuple) -> EinsumPlan:
    from ..planning import einsum as planner_einsum  # here: only einsum needs it, not `import rearr`

    return planner_einsum.plan(pattern, shapes, lengths)


def einsum_cache_clear() -> None:
    """Forget every einsum plan (tests count the planning)."""
    einsum_pairs.cache_clear()
    einsum_plan.cache_clear()


def __getattr__(name: str) -> object:
    # CACHES: every plan table and cache, each bounded, with cache_info() and cache_clear() (tests check
    # the bounds). Made on first use: it holds recipe.analyze, and `import rearr` loads no rule.
    if name == "CACHES":
        from ..rules import recipe

        caches = (recipe.analyze, unindexed, indexed, direct, index_names, einsum_pairs, einsum_plan)
        globals()["CACHES"] = caches
        return caches
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
