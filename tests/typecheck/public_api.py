# pyright: strict
"""Every public name of rearr used as a user writes it, for the type checkers: `mypy --strict` and
`pyright` in strict mode (the comment above) check this file (.ci/release, against the editable checkout
and against the installed wheel).

Each result goes into a variable of the type the user expects, so a public name whose type a checker
cannot see (an `object`, a missing annotation) fails the check. The lines marked `type: ignore` must be
errors (in `refused`): under --strict, mypy reports an ignore that is not needed. Run as a script, the file also
checks that the values are what the types say.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

import rearr
import rearr.backends
import rearr.layers
from rearr.layers import EinMix, Gather, Rearrange, Reduce, Repeat, Scatter

Array = npt.NDArray[np.float64]


def functions() -> None:
    x: Array = np.zeros((2, 3, 4))
    flat: Array = rearr.rearrange(x, "b h w -> b (h w)")
    stacked: Array = rearr.rearrange([x, x], "n b h w -> b h w n")
    stacked_too = rearr.rearrange((x, x), "n b h w -> b h w n")  # no annotation: the list is told from a tensor
    also_stacked: Array = stacked_too
    gathered: Array = rearr.rearrange(x, "b h w[idx: b h] -> b h", idx=np.zeros((2, 3), dtype=np.int64))
    pooled: Array = rearr.reduce(x, "b h (w 2) -> b h w", "max")
    by_callable: Array = rearr.reduce(x, "b h w -> b", lambda t, axes: t.sum(axes))
    repeated: Array = rearr.repeat(x, "b h w -> b h w c", c=2)
    summed: Array = rearr.scatter(x, "b h w -> b h m[idx: w]", "sum", idx=np.array([0, 1, 1, 0]), m=2)
    product: Array = rearr.einsum(x, np.ones((4, 5)), "b h w, w d -> b h d")
    by_keyword: Array = rearr.rearrange(tensor=x, pattern="b h w -> w h b")
    reduced_by_keyword: Array = rearr.reduce(tensor=x, pattern="b h w -> b", reduction="sum")
    checked: Array = rearr.rearrange(x, "b h w[idx: b h] -> b h", idx=np.zeros((2, 3), dtype=np.int64),
                                     check_bounds="sync")
    packed, shapes = rearr.pack([x, np.ones((2, 4))], "b * w")
    first_shape: tuple[int, ...] = shapes[0]
    pieces: list[Array] = rearr.unpack(packed, shapes, "b * w")
    lengths: dict[str, int] = rearr.parse_shape(x, "b _ w")
    lengths_by_keyword: dict[str, int] = rearr.parse_shape(x=x, pattern="b _ w")
    as_numpy: npt.NDArray[Any] = rearr.asnumpy(torch.ones(2))
    assert flat.shape == (2, 12) and stacked.shape == also_stacked.shape == (2, 3, 4, 2) and gathered.shape == (2, 3)
    assert pooled.shape == (2, 3, 2) and by_callable.shape == (2,) and repeated.shape == (2, 3, 4, 2)
    assert summed.shape == (2, 3, 2) and product.shape == (2, 3, 5) and packed.shape == (2, 4, 4)
    assert first_shape == (3,) and [p.shape for p in pieces] == [(2, 3, 4), (2, 4)]
    assert lengths == lengths_by_keyword == {"b": 2, "w": 4} and isinstance(as_numpy, np.ndarray)
    assert by_keyword.shape == (4, 3, 2) and reduced_by_keyword.shape == (2,) and checked.shape == (2, 3)


def explain_and_errors() -> None:
    explain: Callable[..., object] = rearr.explain  # loaded lazily, typed all the same
    plan = rearr.explain("c b h -> b (c h)", (2, 5, 32), backend="numpy")
    code: tuple[str, ...] = plan.code
    formula: str = plan.formula
    is_view: bool = plan.is_view
    shape: tuple[int, ...] = plan.out_shape
    assert callable(explain) and code and formula == "out[b, k] = x[k // 32, b, k % 32]" and not is_view
    assert shape == (5, 64)
    try:
        rearr.rearrange(np.zeros((8, 10)), "b (h w) -> b h w", h=3)
    except rearr.RearrError as e:
        error: ValueError = e
        code_of_error: str = e.code
        assert isinstance(error, RuntimeError) and code_of_error == "RA302"
    version: str = rearr.__version__
    assert version.count(".") >= 2


def layers() -> None:
    x = torch.rand(4, 32)
    model = nn.Sequential(
        Rearrange("b (t c) -> b t c", c=16),
        EinMix("b t c -> b t d", weight_shape="c d", bias_shape="d", c=16, d=8),
        Reduce("b t d -> b d", "mean"),
    )
    out: torch.Tensor = model(x)
    tiled: torch.Tensor = Repeat("b c -> b c k", k=2).forward(x)
    table, tokens = torch.rand(10, 4), torch.tensor([[1, 2], [3, 9]])
    looked_up: torch.Tensor = Gather("v[ids: b t] d -> b t d").forward(table, ids=tokens)
    s, d = torch.tensor([0, 1, 2, 3, 0]), torch.tensor([1, 1, 2, 0, 3])
    passed: torch.Tensor = Scatter("v[src: e] c -> v[dst: e] c", "mean").forward(torch.rand(4, 2), src=s, dst=d)
    layer: nn.Module = rearr.layers.Rearrange("b c -> c b")
    assert out.shape == (4, 8) and tiled.shape == (4, 32, 2) and looked_up.shape == (2, 2, 4)
    assert passed.shape == (4, 2) and isinstance(layer, nn.Module)


def backends() -> None:
    register: Callable[[str, str], None] = rearr.backends.register
    assert callable(register)


def refused() -> None:
    """Wrong types that the checkers must refuse (never run: each raises RearrError)."""
    rearr.rearrange(np.zeros(3), 3)  # type: ignore[arg-type]  # a pattern is a str
    rearr.explain("a -> a", (2,), show="yes")  # type: ignore[arg-type]
    rearr.rearrange([[1.0, 2.0]], "a b -> b a")  # type: ignore[type-var]  # a tensor, or a list of tensors
    rearr.reduce(np.zeros(3), "a -> ", "avg")  # type: ignore[arg-type]  # a reduction's name, or a callable
    rearr.scatter(np.zeros(3), "a -> n[i: a]", "add", i=np.zeros(3, dtype=np.int64))  # type: ignore[arg-type]
    rearr.rearrange(np.zeros(3), "a -> a", check_bounds="always")  # type: ignore[arg-type]
    Rearrange(3)  # type: ignore[arg-type]


if __name__ == "__main__":
    functions()
    explain_and_errors()
    layers()
    backends()
    print("ok")
