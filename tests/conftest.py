"""Shared test set-up: import paths and the hypothesis profiles.

Profiles (choose with ``--hypothesis-profile=NAME``):
  default  quick, for CI: hypothesis' usual 100 examples, no deadline (the
           first call of a pattern parses and plans it, which takes longer than
           a cached call)
  medium   1,000 examples per property
  long     at least 10,000 examples per property; run by hand, the last result
           is written down in tests/README.md
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

_HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.dirname(_HERE), _HERE):  # the repository (rearr) and tests/ (reference, strategies)
    if _path not in sys.path:
        sys.path.insert(0, _path)

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("default", max_examples=100, deadline=None, suppress_health_check=_SUPPRESS)
settings.register_profile("long", max_examples=10_000, deadline=None, suppress_health_check=_SUPPRESS,
                          print_blob=True)
settings.register_profile("medium", max_examples=1_000, deadline=None, suppress_health_check=_SUPPRESS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# REARR_TEST_DEVICE=cuda runs the tests that ask for the fixture below on that torch device, and only
# them (benchmarks/bench_gpu.py does); unset, every test runs, on the CPU.
TEST_DEVICE = os.environ.get("REARR_TEST_DEVICE", "cpu")


def pytest_collection_modifyitems(config, items):
    if TEST_DEVICE == "cpu":
        return
    chosen = [item for item in items if "on_test_device" in getattr(item, "fixturenames", ())]
    config.hook.pytest_deselected(items=[item for item in items if item not in chosen])
    items[:] = chosen


@pytest.fixture
def on_test_device():
    """torch's default device for the test's factories (torch.tensor, randn ...): REARR_TEST_DEVICE."""
    if TEST_DEVICE == "cpu":
        yield "cpu"
        return
    import torch

    with torch.device(TEST_DEVICE):
        yield TEST_DEVICE


@pytest.fixture(params=["small", "rows"])
def lowering(request, monkeypatch):
    """A test under the lowering chosen for small tensors, and under the row lowering that large ones get
    (rearr.planning.planner.ROWS_MIN_ELEMENTS at 0), with the plan caches cleared around it."""
    from rearr.planning import planner
    from rearr.run import cache

    if request.param == "rows":
        monkeypatch.setattr(planner, "ROWS_MIN_ELEMENTS", 0)
    cache.indexed.cache_clear()
    cache.direct.cache_clear()
    yield request.param
    cache.indexed.cache_clear()
    cache.direct.cache_clear()
