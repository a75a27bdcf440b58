"""explain(pattern, shape): the plan as the code one would write by hand."""

from __future__ import annotations


def explain(pattern: str, *shapes, **kwargs):  # placeholder until the explain module lands
    raise NotImplementedError
