"""einops and rearr on the same calls: the result's value and everything else a caller can observe.

Replacing einops is an import change only if code that writes into a result, views it
(`.view(2, -1)` needs a contiguous tensor), or reads `pack`'s shapes keeps working. So each call
runs through both libraries, on numpy and on torch, and every observable property of the two
results is compared (`observe`): the type, dtype, shape and values; numpy's `writeable` and
`c_contiguous` flags, torch's `is_contiguous()`; the strides of every axis longer than 1 (the
others' strides mean nothing); whether the result shares memory with the input, and whether it is
the input itself. pack: the packed tensor, the type of its list of shapes and of each shape;
unpack: the list and each piece; a callable reduction: the shape and axes it is called with.

The calls: every einops corpus pattern (tests/fixtures/einops_corpus.jsonl) on C-contiguous,
transposed, sliced and Fortran-order inputs; every reduction (and a callable, and "rearrange")
on float, int and bool inputs; 0-d inputs and length-1 axes; repeats that copy and that repeat
nothing; pack, unpack, einsum (with random two-operand patterns on torch) and parse_shape; the
torch layers. The differences that remain are `KNOWN`'s, each with its reason, and both migration
lists (README.md, docs/migrating.md) name them.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import einops
import numpy as np
import pytest
import torch
from _corpus import ENTRIES, draw, side

import rearr

# --- what is observed ---------------------------------------------------------------------------


def _shares(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
    return isinstance(a, np.ndarray | np.generic) and isinstance(b, np.ndarray) and bool(np.shares_memory(a, b))


def observe(out: object, inputs: tuple = ()) -> dict[str, object]:
    """Everything a caller can see of a result (a tensor, or a list / tuple / dict of them)."""
    if isinstance(out, list | tuple | dict):
        items = out.items() if isinstance(out, dict) else enumerate(out)
        return {"type": type(out).__name__, "len": len(out),
                **{f"[{k}]": observe(v, inputs) for k, v in items}}
    seen: dict[str, object] = {"type": type(out).__name__}
    if isinstance(out, torch.Tensor):
        seen.update(dtype=out.dtype, shape=tuple(out.shape), values=out.detach().numpy().tolist(),
                    contiguous=out.is_contiguous(), requires_grad=out.requires_grad)
        strides: tuple | None = out.stride()
    elif isinstance(out, np.ndarray | np.generic):
        seen.update(dtype=out.dtype, shape=out.shape, values=np.asarray(out).tolist(),
                    writeable=out.flags.writeable, c_contiguous=out.flags.c_contiguous)
        strides = out.strides
    else:  # an int of parse_shape
        return {"type": type(out).__name__, "value": out}
    if 0 not in seen["shape"]:  # type: ignore[operator]
        seen["strides"] = tuple(s for s, n in zip(strides, seen["shape"]) if n != 1)  # type: ignore[arg-type]
    seen["shares memory with input"] = [_shares(out, x) for x in inputs]
    seen["is input"] = [out is x for x in inputs]
    return seen


def differences(want: dict, got: dict, where: str = "") -> list[str]:
    out = []
    for key in want.keys() | got.keys():
        a, b = want.get(key), got.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{where}{key}.")
        elif a != b:
            out.append(f"{where}{key}: einops {a!r}, rearr {b!r}")
    return sorted(out)


def both(name: str, *args, inputs: tuple | None = None, **kwargs) -> tuple[dict, dict] | None:
    """einops.name(*args, **kwargs) and rearr.name(...), observed against the inputs (args[0] unless
    given); None where einops refuses."""
    inputs = (args[0],) if inputs is None else inputs
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(einops, name)(*args, **kwargs)
    except Exception:  # noqa: BLE001 -- einops' refusals are test_corpus.py's subject
        return None
    return observe(want, inputs), observe(getattr(rearr, name)(*args, **kwargs), inputs)


# --- the differences that remain (README.md and docs/migrating.md say each, with its reason) --------

# A reduce that reduces no axis: rearr applies the reduction, einops returns its input unchanged. So the
# result has the reduction's dtype ('any' gives bools, a 'sum' of bools counts) and is a new tensor
# for every dtype: a result that aliased the input for floats but not for bools would make a write
# into it change the input on some dtypes only.
NO_AXIS = "a reduce of no axis is a new tensor of the reduction's dtype"
# An einsum of three or more numpy arrays contracts two at a time in the cheapest order, as
# np.einsum(optimize=True) and torch.einsum do; einops calls np.einsum without optimize, which is
# asymptotically slower on a chain of products. The values agree to rounding; the layout may differ.
CHAIN = "an einsum of three or more numpy arrays is optimized"
# A two-operand torch einsum that is a matrix product runs as torch.matmul (inductor fuses attention
# from it), torch.einsum as its own permutes around bmm. rearr orders the product so that the result is
# contiguous exactly where torch.einsum's is; where torch.einsum's is not, the strides may differ.
MATMUL = "a torch einsum that torch.einsum leaves non-contiguous may have other strides"
# A torch sum, mean or prod reduces the axes in place, then writes the permuted result out: einops
# reduces a permuted view, which torch does up to 14 times slower. Where the kept axes are reordered
# (or a prod reduces several axes), the values can differ in the last bit; the layout is einops'.
SUM_ORDER = "a torch sum, mean or prod adds up in another order"
# What each difference may change of the result.
KNOWN = {NO_AXIS: ("shares memory with input", "is input", "strides", "c_contiguous", "contiguous", "writeable",
                   "dtype", "values"),
         CHAIN: ("strides", "c_contiguous"),
         MATMUL: ("strides",),
         SUM_ORDER: ("values",)}


def known_difference(op: str, pattern: str, reduction: object, shape: tuple[int, ...]) -> str | None:
    """NO_AXIS where the call reduces no axis (every input axis is kept, '...' included), else None."""
    if op != "reduce" or callable(reduction) or reduction == "rearrange":
        return None
    left, right = pattern.split("->")
    kept = [t for t in left.replace("(", " ").replace(")", " ").split() if t != "1"]
    out = set(right.replace("(", " ").replace(")", " ").split())
    empty_dots = "..." in left and len(shape) == len([d for d in side(left) if d != ["..."]])
    if all(t in out for t in kept if t != "...") and ("..." not in left or "..." in out or empty_dots):
        return NO_AXIS
    return None


def assert_same(pair, where: str, known: str | None = None) -> None:
    if pair is None:
        return
    diff = differences(*pair)
    if known is None:
        assert not diff, f"{where}:\n  " + "\n  ".join(diff)
    else:
        allowed = tuple(f"{key}:" for key in KNOWN[known])
        assert all(d.startswith(allowed) for d in diff), f"{where} ({known}):\n  " + "\n  ".join(diff)


# --- inputs -----------------------------------------------------------------------------------------


def layouts(shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The same values as a C-contiguous, a transposed, a sliced and a Fortran-order array."""
    n = math.prod(shape)
    values = np.arange(n, dtype=np.float64) % 7 - 3
    out = {"C order": values.reshape(shape), "Fortran order": np.asfortranarray(values.reshape(shape))}
    if len(shape) >= 2:  # the first two axes swapped in memory
        out["transposed"] = np.ascontiguousarray(values.reshape(shape).swapaxes(0, 1)).swapaxes(0, 1)
    if shape:
        wide = np.zeros(shape[:-1] + (2 * shape[-1],))
        wide[..., ::2] = values.reshape(shape)
        out["sliced"] = wide[..., ::2]
    return out


def on(backend: str, a: np.ndarray):
    """a as the backend's tensor, with a's strides (torch.from_numpy shares a's memory and strides)."""
    return a if backend == "numpy" else torch.from_numpy(a)


# --- the tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_corpus_results_are_einops_results_on_every_layout(backend):
    """Every corpus pattern, two draws each, on the four layouts: about 5,700 calls per backend."""
    compared = 0
    for n, entry in enumerate(ENTRIES):
        for draw_seed in (0, 1):
            shape, kw = draw(entry, np.random.default_rng(10 * n + draw_seed))
            reduction = (entry["reduction"],) if entry["op"] == "reduce" else ()
            known = known_difference(entry["op"], entry["pattern"], entry.get("reduction"), shape)
            for layout, a in layouts(shape).items():
                pair = both(entry["op"], on(backend, a), entry["pattern"], *reduction, **kw)
                compared += pair is not None
                assert_same(pair, f"{entry['op']} {entry['pattern']!r} {kw} on a {layout} {shape}", known)
    assert compared >= 5000


REDUCTIONS = ["sum", "mean", "max", "min", "prod", "any", "all", "rearrange"]
REDUCE_PATTERNS = [
    ("b c (h h2) (w w2) -> b h w c", (2, 3, 4, 6), {"h2": 2, "w2": 2}),  # einops' README: contiguous on torch
    ("b c h w -> b c", (2, 3, 4, 5), {}),
    ("b c h w -> b h w", (2, 3, 4, 5), {}),
    ("b c h w -> w c", (2, 3, 4, 5), {}),
    ("b c h w -> c () () b", (2, 3, 4, 5), {}),
    ("b (h w) c -> c h", (2, 6, 3), {"h": 2}),
    ("b ... c -> c b", (2, 3, 4, 5), {}),
    ("a b c ->", (2, 3, 4), {}),
    ("a 1 c -> c", (2, 1, 4), {}),
    ("a b -> b", (1, 3), {}),
    ("a b -> b a", (2, 3), {}),  # no axis reduced: NO_AXIS
    ("->", (), {}),
]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_every_reduction_gives_einops_result(backend, reduction, dtype):
    for pattern, shape, kw in REDUCE_PATTERNS:
        left, right = pattern.split("->")
        if reduction == "rearrange" and set(left.split()) != set(right.split()):
            continue
        if reduction == "mean" and dtype != "float32" or dtype == "bool" and reduction in ("sum", "prod", "mean"):
            continue  # both refuse the mean of integers; einops' sum of bools is torch's or numpy's own dtype rule
        known = known_difference("reduce", pattern, reduction, shape)
        for layout, a in layouts(shape).items():
            x = on(backend, np.asarray(a > 0) if dtype == "bool" else a.astype(dtype))
            pair = both("reduce", x, pattern, reduction, **kw)
            assert_same(pair, f"reduce {pattern!r} {reduction} on a {layout} {dtype} {shape}", known)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_reductions_are_einops_to_the_bit(backend):
    """Random patterns on random floats, long enough that the order of additions shows: every numpy
    reduction, and torch's max, min, any and all, give einops' bits; torch's sum, mean and prod
    einops' values to rounding (SUM_ORDER)."""
    rng = np.random.default_rng(1)
    for _ in range(120):
        names = "abcd"[: rng.integers(2, 5)]
        shape = tuple(int(n) for n in rng.choice([3, 8, 33, 130], size=len(names)))
        kept = [c for c in names if rng.random() < 0.5]
        if len(kept) == len(names) or math.prod(shape) > 300_000:
            continue
        out = list(rng.permutation(kept)) if kept else []
        pattern = f"{' '.join(names)} -> {' '.join(out)}"
        x = on(backend, rng.standard_normal(shape).astype(np.float32))
        for reduction in ("sum", "mean", "max", "min", "prod"):
            want, got = both("reduce", x, pattern, reduction)
            known = SUM_ORDER if backend == "torch" and reduction in ("sum", "mean", "prod") else None
            if known:
                np.testing.assert_allclose(got["values"], want["values"], rtol=1e-5, atol=1e-4)
            assert_same((want, got), f"reduce {pattern!r} {reduction} of {shape}", known)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_callable_reduction_is_called_as_einops_calls_it(backend):
    """The callable sees einops' tensor (every axis split, the reduced ones last) and axes, and its result."""
    for pattern, shape, kw in REDUCE_PATTERNS[:-1]:
        calls: dict[str, list] = {"einops": [], "rearr": []}
        for layout, a in layouts(shape).items():
            x = on(backend, a)
            pair = (observe(einops.reduce(x, pattern, _recording(calls["einops"]), **kw), (x,)),
                    observe(rearr.reduce(x, pattern, _recording(calls["rearr"]), **kw), (x,)))
            assert_same(pair, f"reduce {pattern!r} with a callable on a {layout} {shape}")
        assert calls["einops"] == calls["rearr"], pattern


def _recording(calls: list):
    """A sum that records the shape, axes and strides it is called with."""
    def reduction(t, axes):
        calls.append((tuple(t.shape), tuple(axes), observe(t).get("strides")))
        return t.sum(axis=axes) if isinstance(t, np.ndarray) else t.sum(dim=axes)
    return reduction


REPEAT_CASES = [
    ("h w -> h w c", (2, 3), {"c": 3}),  # numpy: einops' np.tile writes the values out
    ("h w -> c h w", (2, 3), {"c": 1}),  # nothing repeats, still a copy in einops on numpy
    ("h w -> w h c", (2, 3), {"c": 1}),
    ("h w -> (w h) c", (2, 3), {"c": 1}),
    ("h w -> (h c) w", (2, 3), {"c": 2}),
    ("h w -> (c h) w", (1, 3), {"c": 2}),
    ("h -> (h c)", (1,), {"c": 3}),
    ("h -> h 3", (4,), {}),
    ("h w -> h w 1", (2, 3), {}),  # a unit axis is no repeat: a view in both
    ("h w -> w h", (2, 3), {}),
    ("1 -> b", (1,), {"b": 3}),
    ("b 1 d -> b k d", (2, 1, 3), {"k": 4}),
    ("h w -> b (w h) k", (2, 3), {"b": 2, "k": 2}),
    ("... -> b ...", (2, 3), {"b": 2}),
    ("-> b", (), {"b": 3}),
    ("-> 1 c", (), {"c": 1}),
    ("h w -> h w c", (0, 3), {"c": 2}),
]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("pattern, shape, kw", REPEAT_CASES)
def test_repeat_is_writable_shares_and_is_laid_out_as_einops(backend, pattern, shape, kw):
    for layout, a in layouts(shape).items():
        for grad in (False, True) if backend == "torch" else (False,):
            x = on(backend, a)
            if grad:
                x = x.clone().requires_grad_()
            assert_same(both("repeat", x, pattern, **kw),
                        f"repeat {pattern!r} {kw} on a {layout} {shape}{' requiring grad' if grad else ''}")


REARRANGE_CASES = [
    ("->", (), {}),
    ("-> 1 1", (), {}),
    ("a b -> a b", (2, 3), {}),
    ("a b -> b a", (2, 3), {}),
    ("a b -> (b a)", (2, 3), {}),
    ("a b -> (a b)", (1, 3), {}),
    ("(a b) c -> c (b a)", (6, 2), {"a": 2}),
    ("b (qkv heads c) h w -> qkv b heads c (h w)", (2, 12, 2, 2), {"qkv": 3, "heads": 2}),
    ("b h w c -> b (h w) c", (2, 3, 4, 5), {}),
    ("b (h c) x y -> (b h) (x y) c", (3, 6, 3, 2), {"c": 3, "h": 2}),  # a merge across dims copies last
    ("(h w) x y -> w h (x y)", (6, 2, 3), {"h": 2}),
    ("... h w -> ... w h", (2, 1, 3, 4), {}),
    ("a 1 b -> b a", (2, 1, 3), {}),
]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("pattern, shape, kw", REARRANGE_CASES)
def test_rearrange_is_laid_out_as_einops(backend, pattern, shape, kw):
    for layout, a in layouts(shape).items():
        x = on(backend, a)
        assert_same(both("rearrange", x, pattern, **kw), f"rearrange {pattern!r} {kw} on a {layout} {shape}")
        listed = "n " + pattern.replace("->", "-> n", 1) if pattern != "->" else "n -> n"
        assert_same(both("rearrange", [x, x], listed, inputs=(x,), **kw), f"rearrange of a list, {listed!r}")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_pack_and_unpack_return_einops_types(backend):
    """pack's shapes are the tensors' own shape type (torch.Size on torch, so ps[1].numel() works), in a
    list; the packed tensor is new (one input too); unpack's pieces are views of its input, in a list."""
    for shapes, pattern in [([(2, 3), (2, 4, 3), (2, 1, 5, 3)], "b * c"), ([(2, 3)], "b * c"),
                            ([(3,), (4,)], "*"), ([(2, 3, 4)], "* c"), ([(2,), (2, 0)], "b *")]:
        for layout_index in range(3):
            xs = [on(backend, list(layouts(s).values())[layout_index % len(layouts(s))]) for s in shapes]
            assert_same(both("pack", xs, pattern, inputs=tuple(xs)), f"pack {pattern!r} {shapes}")
            packed, ps = einops.pack(xs, pattern)
            assert_same(both("unpack", packed, ps, pattern), f"unpack {pattern!r} {ps}")
            if all(len(s) <= 1 for s in ps):  # the last shape as -1, and lists for tuples
                as_lists = [list(s) for s in ps[:-1]] + [[-1] if ps[-1] else []]
                assert_same(both("unpack", packed, as_lists, pattern), f"unpack {pattern!r} {as_lists}")
    if backend == "torch":
        _, ps = rearr.pack([torch.ones(2, 3), torch.ones(2, 4, 3)], "b * c")
        assert isinstance(ps[1], torch.Size) and ps[1].numel() == 4


EINSUM_CASES = [
    ("i j, j k -> i k", [(2, 3), (3, 4)]),
    ("b i j, b j k -> b k i", [(2, 3, 4), (2, 4, 5)]),  # torch: matmul with a permute after it
    ("b h q d, b h k d -> b h q k", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("i, i ->", [(3,), (3,)]),  # numpy: a numpy scalar, as np.einsum gives
    ("i j -> j i", [(2, 3)]),
    ("i j -> j", [(2, 3)]),
    ("i i -> i", [(3, 3)]),
    ("a b, b c, c d -> a d", [(2, 3), (3, 4), (4, 5)]),
    ("b ... d, b ... d -> b ...", [(2, 3, 4), (2, 3, 4)]),
    ("i j, i j -> i j", [(2, 3), (2, 3)]),
]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("pattern, shapes", EINSUM_CASES)
def test_einsum_gives_einops_result(backend, pattern, shapes):
    for layout_index in range(3):
        xs = [on(backend, list(layouts(s).values())[layout_index]) for s in shapes]
        pair = both("einsum", *xs, pattern, inputs=tuple(xs))
        assert pair is not None, pattern
        known = CHAIN if backend == "numpy" and len(shapes) > 2 else None
        assert_same(pair, f"einsum {pattern!r} on {shapes}, layout {layout_index}", known)


def test_a_torch_einsum_is_contiguous_where_torch_einsum_is():
    """Random two-operand patterns (most of them matrix products, so torch.matmul), lengths 1 to 3."""
    rng = np.random.default_rng(0)
    compared = 0
    while compared < 600:
        axes = list(rng.permutation(list("abcde"))[: rng.integers(2, 6)])
        sizes = {c: int(rng.integers(1, 4)) for c in axes}
        a, b = (list(rng.permutation(axes)[: rng.integers(1, len(axes) + 1)]) for _ in range(2))
        if not set(a) & set(b):
            continue
        out = [c for c in dict.fromkeys(a + b) if rng.random() < 0.6]
        pattern = f"{' '.join(a)}, {' '.join(b)} -> {' '.join(rng.permutation(out)) if out else ''}"
        xs = [torch.randn(*[sizes[c] for c in side]) for side in (a, b)]
        want, got = observe(einops.einsum(*xs, pattern)), observe(rearr.einsum(*xs, pattern))
        # other orders of additions: equal to float32 rounding
        np.testing.assert_allclose(want.pop("values"), got.pop("values"), rtol=1e-5, atol=1e-5)
        assert_same((want, got), f"einsum {pattern!r} {sizes}", None if want["contiguous"] else MATMUL)
        compared += 1


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_parse_shape_returns_einops_dict(backend):
    for shape, pattern in [((2, 3, 4), "b h w"), ((2, 3, 4), "b _ w"), ((2, 3, 4), "b ..."), ((), ""),
                           ((1, 5), "a b"), ((2, 3, 4, 5), "... h w")]:
        pair = both("parse_shape", on(backend, np.zeros(shape)), pattern)
        assert pair is not None, pattern
        assert_same(pair, f"parse_shape {pattern!r} of {shape}")


def test_layers_give_einops_results():
    from einops.layers import torch as einops_layers

    from rearr import layers as rearr_layers

    x = torch.arange(2 * 3 * 4 * 6, dtype=torch.float32).reshape(2, 3, 4, 6).requires_grad_()
    for make in (lambda m: m.Rearrange("b c h w -> b (h w) c"),
                 lambda m: m.Rearrange("b c h w -> b w h c"),
                 lambda m: m.Reduce("b c (h h2) (w w2) -> b h w c", "mean", h2=2, w2=2),
                 lambda m: m.Reduce("b c h w -> b c", "max")):
        pair = (observe(make(einops_layers)(x), (x,)), observe(make(rearr_layers)(x), (x,)))
        assert_same(pair, repr(make(rearr_layers)))


def test_the_known_differences_are_the_documented_ones():
    """Each difference that remains shows where KNOWN says, and both migration lists name it."""
    for x in (np.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)):
        assert einops.reduce(x, "a b -> a b", "sum") is x
        out = rearr.reduce(x, "a b -> a b", "sum")
        assert out is not x and not _shares(out, x) and (np.asarray(out) == np.asarray(x)).all()
    assert known_difference("reduce", "... c d -> c d", "mean", (2, 1)) == NO_AXIS
    assert known_difference("reduce", "... c d -> c d", "mean", (3, 2, 1)) is None
    a, b, c = np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))
    assert einops.einsum(a, b, c, "a b, b c, c d -> a d").flags.c_contiguous
    assert not rearr.einsum(a, b, c, "a b, b c, c d -> a d").flags.c_contiguous
    for path in ("README.md", "docs/migrating.md"):
        text = " ".join((Path(__file__).resolve().parents[2] / path).read_text(encoding="utf-8").split())
        assert "reduces no axis" in text and "new tensor" in text, path
        assert "three or more numpy arrays" in text and "optimize" in text, path
        assert "torch `sum`, `mean` or `prod`" in text and "last bit" in text, path
        assert "matrix product" in text and "strides may differ" in text, path
