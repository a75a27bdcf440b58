"""Both backends, parametrized: each test runs on numpy and on torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

BACKENDS = ["numpy", "torch"]


def to_backend(array: np.ndarray, backend: str):
    return torch.from_numpy(np.array(array, copy=True)) if backend == "torch" else array


def to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def shares_memory(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    return np.shares_memory(a, b)


backends = pytest.mark.parametrize("backend", BACKENDS)
