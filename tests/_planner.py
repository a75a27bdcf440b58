"""A knob on the planner for tests: its row lowering for every size."""

from __future__ import annotations

import contextlib
import threading

_PLANNER_LOCK = threading.Lock()


@contextlib.contextmanager
def rows_lowering_always():
    """Make the planner choose its row lowering (index_select / index_add on a (rows, width)
    view) for every size: it is otherwise taken only for tensors of ROWS_MIN_ELEMENTS or
    more, which the strategies' tiny tensors never reach.  The plan caches are cleared on
    the way in and out, so no plan of the other lowering is reused."""
    import rearr.planning.planner
    import rearr.run.cache

    assert hasattr(rearr.planning.planner, "ROWS_MIN_ELEMENTS"), \
        "the planner's size threshold was renamed: update this test"
    saved = rearr.planning.planner.ROWS_MIN_ELEMENTS
    with _PLANNER_LOCK:
        for f in rearr.run.cache.CACHES:
            f.cache_clear()
        rearr.planning.planner.ROWS_MIN_ELEMENTS = 0
        try:
            yield
        finally:
            rearr.planning.planner.ROWS_MIN_ELEMENTS = saved
            for f in rearr.run.cache.CACHES:
                f.cache_clear()

