"""A call runs its plan at most once, whatever raises, and the caller sees the error of that run: on the
first call (the careful path) and on every later one (the cached paths), for every public function."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

import rearr
import rearr.run.cache
from rearr import RearrError


class _Failing:
    """A reduce callable that counts its calls and raises a numbered error each time."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x, axes):
        self.calls += 1
        raise ValueError(f"run {self.calls}")


@pytest.mark.parametrize("make", [np.ones, torch.ones], ids=["numpy", "torch"])
def test_a_raising_reduce_callable_runs_once_per_call(make):
    f = _Failing()
    x = make((2, 3))
    for call in range(1, 5):
        with pytest.raises(ValueError) as e:
            rearr.reduce(x, "a b -> a", f)
        assert f.calls == call
        assert str(e.value) == f"run {call}"


def test_a_reduce_callable_that_succeeds_runs_once_per_call():
    seen = []
    f = lambda x, axes: seen.append(1) or x.sum(axis=axes)
    for call in range(1, 4):
        np.testing.assert_array_equal(rearr.reduce(np.ones((2, 3)), "a b -> a", f), [3.0, 3.0])
        assert len(seen) == call


class _RefuseNative(TorchFunctionMode):
    """Counts the calls of one torch method and makes each raise a numbered RuntimeError."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.calls = name, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == self.name:
            self.calls += 1
            raise RuntimeError(f"{self.name} failed, run {self.calls}")
        return func(*args, **(kwargs or {}))


INDEXED = [
    ("gather", lambda: rearr.rearrange(torch.arange(12.0).reshape(3, 4), "b n[i: b k] -> b k",
                                       i=torch.tensor([[0, 1], [2, 3], [3, 0]]))),
    ("scatter_add", lambda: rearr.scatter(torch.ones(3, 4), "b k -> b n[i: b k]", "sum",
                                          i=torch.tensor([[0, 1, 1, 0]] * 3), n=2)),
    ("scatter_reduce_", lambda: rearr.scatter(torch.ones(3, 4), "b k -> b n[i: b k]", "max",
                                              i=torch.tensor([[0, 1, 1, 0]] * 3), n=2)),
]


@pytest.mark.parametrize(("method", "call"), INDEXED, ids=[m for m, _ in INDEXED])
def test_an_indexed_plan_that_fails_runs_once_per_call(method, call):
    call()  # planned, and on the cached path from now on
    for attempt in range(3):
        with _RefuseNative(method) as mode, pytest.raises(RuntimeError) as e:
            call()
        assert mode.calls == 1, f"attempt {attempt}: {method} ran {mode.calls} times"
        assert str(e.value) == f"{method} failed, run 1"


@pytest.mark.parametrize("fresh", [True, False], ids=["first call", "cached"])
def test_a_bad_index_left_to_the_native_call_is_named_after_one_run(fresh):
    x, good, bad = torch.arange(12.0).reshape(3, 4), torch.tensor([[0, 1]] * 3), torch.tensor([[0, 1], [2, 9], [0, 0]])
    if fresh:
        rearr.run.cache.direct.cache_clear()
    else:
        rearr.rearrange(x, "b n[i: b k] -> b k", i=good)

    class Count(TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Count.calls += getattr(func, "__name__", "") == "gather"
            return func(*args, **(kwargs or {}))

    with Count(), pytest.raises(RearrError) as e:
        rearr.rearrange(x, "b n[i: b k] -> b k", i=bad)
    assert e.value.code == "RA501" and "9" in str(e.value) and e.value.pattern == "b n[i: b k] -> b k"
    assert Count.calls <= 1


@pytest.mark.parametrize("make", [np.asarray, torch.as_tensor], ids=["numpy", "torch"])
def test_negative_values_left_to_the_native_call_are_counted_from_the_end(make):
    x = make(np.arange(12.0).reshape(3, 4))
    for _ in range(3):
        got = rearr.rearrange(x, "b n[i: b k] -> b k", i=make(np.array([[-1, 0], [1, -4], [3, 2]])))
        np.testing.assert_array_equal(np.asarray(got), [[3.0, 0.0], [5.0, 4.0], [11.0, 10.0]])


EINSUMS = [  # (the torch function that runs the product, the call)
    ("matmul", lambda: rearr.einsum(torch.ones(2, 3), torch.ones(3, 4), "i j, j k -> i k")),
    ("einsum", lambda: rearr.einsum(torch.ones(2, 3), torch.ones(2, 4), "b i, b j -> b i j")),
    ("einsum", lambda: rearr.einsum(torch.ones(2, 3), torch.ones(3), torch.ones(3), "i j, j, j -> i")),
]


@pytest.mark.parametrize(("method", "call"), EINSUMS, ids=["matmul", "two operands", "three operands"])
def test_an_einsum_that_fails_runs_once_per_call(method, call):
    call()  # planned, and (two operands) on the cached path from now on
    for attempt in range(3):
        with _RefuseNative(method) as mode, pytest.raises(RearrError) as e:
            call()
        assert mode.calls == 1, f"attempt {attempt}: {method} ran {mode.calls} times"
        assert e.value.code == "RA500" and f"{method} failed, run 1" in str(e.value)


def test_a_pack_that_fails_runs_once_per_call():
    x, y = torch.ones(2, 3), torch.ones(2, 3, 4)
    for attempt in range(3):
        with _RefuseNative("cat") as mode, pytest.raises(RuntimeError, match="cat failed, run 1"):
            rearr.pack([x, y], "a *")
        assert mode.calls == 1, f"attempt {attempt}: cat ran {mode.calls} times"
