"""explain's picture: Explanation.to_svg(), `rearr explain --svg`, the notebook reprs, and a real browser render.

Every drawn cell carries data-tensor, data-index and (for the input and the
result) data-sources / data-count, or data-min / data-max where it names only
the first and last of its sources; the tests read the SVG back and compare each
cell with the result of tests/reference.py, the reference interpreter that
shares nothing with rearr's planner or backends.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import numpy as np
import pytest
import reference
from hypothesis import assume, given
from hypothesis import strategies as st

import rearr
from rearr.tools import picture

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
SVG = "{http://www.w3.org/2000/svg}"

# (pattern, shape, explain's keywords): every op, gathers and scatters with duplicate targets and sources.
CASES = [
    ("c b h -> b (c h)", (2, 3, 4), {}),
    ("a b c d -> d (c b) a", (2, 3, 2, 2), {}),
    ("a b -> (a k) b", (2, 3), {"op": "repeat", "k": 2}),
    ("a -> a 3", (2,), {"op": "repeat"}),
    ("a 1 b -> b () a", (2, 1, 3), {}),
    ("a b c -> a c", (2, 3, 4), {"op": "reduce", "reduction": "mean"}),
    ("a b c -> ", (2, 3, 2), {"op": "reduce", "reduction": "sum"}),
    ("a b -> a", (2, 70), {"op": "reduce", "reduction": "min"}),
    ("... (a 2) -> ... a", (2, 2, 4), {"op": "reduce", "reduction": "max"}),
    ("b n[idx: b k] c -> b k c", (2, 5, 3), {"k": 4}),
    ("b n[idx] c -> b k c", (2, 5, 3), {"idx": np.array([[[0, 0, 4], [4, 4, 4]], [[1, 2, 1], [3, 3, 3]]])}),
    ("b k -> b n[idx]", (2, 4), {"op": "scatter", "reduction": "sum", "n": 6}),
    ("b k -> b n[idx]", (2, 4), {"op": "scatter", "reduction": "sum", "n": 6,
                                 "idx": np.array([[0, 2, 2, 5], [1, 1, 1, 3]])}),
    ("b k -> b n[idx]", (1, 9), {"op": "scatter", "reduction": "prod", "n": 2}),
    ("v[src: e] c -> v[dst: e] c", (4, 2), {"op": "scatter", "reduction": "mean", "e": 6,
                                            "src": np.array([3, 3, 0, 1, 3, 2]), "dst": np.array([0, 0, 0, 2, 1, 2])}),
]


def _explain(pattern: str, shape: tuple, kwargs: dict) -> rearr.tools.explain.Explanation:
    return rearr.explain(pattern, shape, **kwargs)


def _cells(svg: str) -> dict[str, dict[tuple[int, ...], ET.Element]]:
    """Each tensor's drawn cells by index, read back from the SVG."""
    out: dict[str, dict[tuple[int, ...], ET.Element]] = {}
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        if "data-tensor" in g.attrib:
            ix = tuple(int(v) for v in g.get("data-index").split(",") if v)
            out.setdefault(g.get("data-tensor"), {})[ix] = g
    return out


def _text(g: ET.Element) -> str:
    return g.find(f"{SVG}text").text


def _all_or_elided(cells: dict, shape: tuple[int, ...]) -> None:
    """A small tensor shows every element; a larger one some of them (all, where its seams take every
    position), its first and its last among them."""
    every = set(np.ndindex(*shape))
    small = max(shape[-2:], default=0) <= min(picture.MAX_ROWS, picture.MAX_COLS) and math.prod(shape[:-2]) <= \
        picture.MAX_PANELS
    assert set(cells) == every if small else set(cells) <= every
    assert tuple(n - 1 for n in shape) in cells and (0,) * len(shape) in cells


def _call_indices(e, kwargs: dict) -> dict[str, np.ndarray]:
    """The index tensors the picture ran with: the caller's, or explain's examples."""
    examples = picture.example_indices(e.plan)
    return {u.name: np.asarray(kwargs.get(u.name, examples[u.name])) for u in e.plan.indices}


def _expected(e, kwargs: dict) -> dict[str, np.ndarray]:
    """count, min, max, sum and sum of squares of the sources of each result cell, from the reference."""
    n = math.prod(e.shape)
    x = np.arange(n, dtype=np.int64).reshape(e.shape)
    kw = {**dict(e.lengths), **_call_indices(e, kwargs)}
    if e.op in ("rearrange", "repeat"):
        ref = reference.reference(e.op, x, e.pattern, **kw)
        return {"count": np.ones_like(ref), "min": ref, "max": ref, "sum": ref, "squares": ref ** 2}
    run = lambda v, r: reference.reference(e.op, v, e.pattern, r, **kw)  # noqa: E731
    return {"count": run(np.ones_like(x), "sum"), "min": run(x, "min"), "max": run(x, "max"),
            "sum": run(x, "sum"), "squares": run(x * x, "sum")}


@pytest.mark.parametrize("pattern, shape, kwargs", CASES, ids=[c[0] + f" {c[2].get('op', '')}" for c in CASES])
def test_every_label_agrees_with_the_reference(pattern, shape, kwargs):
    e = _explain(pattern, shape, kwargs)
    _check_labels(e, kwargs, e.to_svg())


def _check_labels(e, kwargs: dict, svg: str) -> None:
    """Every drawn cell of the input, the index tensors and the result says what the reference computes."""
    cells = _cells(svg)
    # The input: every element, labelled with its own flat position.
    _all_or_elided(cells[e.input_name], e.shape)
    for ix, g in cells[e.input_name].items():
        flat = int(np.ravel_multi_index(ix, e.shape)) if ix else 0
        assert _text(g) == g.get("data-sources") == str(flat)
    # The index tensors, with the values the picture ran with.
    for name, value in _call_indices(e, kwargs).items():
        _all_or_elided(cells[name], value.shape)
        for ix, g in cells[name].items():
            assert int(g.get("data-value")) == int(_text(g)) == value[ix]
    # The result: each cell's sources, as the reference computes them.
    want = _expected(e, kwargs)
    _all_or_elided(cells["out"], e.out_shape)
    for ix, g in cells["out"].items():
        count = int(want["count"][ix])
        assert int(g.get("data-count")) == count, ix
        if count == 0:
            assert _text(g) == "·" and g.get("data-sources") == ""
            continue
        low, high = int(want["min"][ix]), int(want["max"][ix])
        if g.get("data-sources") is not None:
            listed = [int(v) for v in g.get("data-sources").split(",")]
            assert len(listed) == count and listed == sorted(listed)
            assert (listed[0], listed[-1]) == (low, high), ix
            assert sum(listed) == want["sum"][ix] and sum(v * v for v in listed) == want["squares"][ix], ix
        else:  # more sources than it lists: the first and the last
            assert count > picture.LISTED and (e.op == "scatter" or count > picture.ATTRIBUTE_LIMIT)
            assert (int(g.get("data-min")), int(g.get("data-max"))) == (low, high), ix
        label = ",".join(map(str, listed)) if count <= picture.LISTED else f"{low}…{high}"
        assert _text(g) == label, ix


def test_the_colour_follows_each_element():
    e = rearr.explain("a b -> b a", (3, 4))
    cells = _cells(e.to_svg())
    for (i, j), g in cells["x"].items():
        assert g.find(f"{SVG}rect").get("fill") == cells["out"][j, i].find(f"{SVG}rect").get("fill")
    assert len({g.find(f"{SVG}rect").get("fill") for g in cells["x"].values()}) == 12


def test_a_reduce_colours_each_input_by_the_cell_it_goes_into():
    e = rearr.explain("a b -> a", (2, 3), op="reduce", reduction="sum")
    cells = _cells(e.to_svg())
    for (i, _), g in cells["x"].items():
        assert g.find(f"{SVG}rect").get("fill") == cells["out"][(i,)].find(f"{SVG}rect").get("fill")


def test_scatter_names_the_sources_of_each_target_and_the_reduction():
    idx = np.array([[0, 2, 2, 5], [1, 1, 1, 3]])
    svg = rearr.explain("b k -> b n[idx]", (2, 4), op="scatter", reduction="sum", n=6, idx=idx).to_svg()
    out = _cells(svg)["out"]
    assert _text(out[1, 1]) == "4,5,6" and out[1, 1].get("data-sources") == "4,5,6"
    assert [t.text for t in out[1, 1].iter(f"{SVG}text")] == ["4,5,6", "sum of 3"]
    assert len(out[1, 1].findall(f"{SVG}rect")) == 4  # a stripe in each source's colour, and the frame
    assert _text(out[0, 1]) == "·" and out[0, 1].get("data-count") == "0"
    assert "example values" not in svg  # the index given is the one drawn


def test_a_gather_marks_what_is_read_twice_and_what_is_not_read():
    idx = np.array([[0, 0], [2, 1]])
    svg = rearr.explain("b n[idx] -> b k", (2, 3), idx=idx).to_svg()
    x = _cells(svg)["x"]
    assert [t.text for t in x[0, 0].iter(f"{SVG}text")] == ["0", "×2"]
    assert x[0, 1].get("opacity") == x[1, 0].get("opacity") == "0.35" and x[1, 1].get("opacity") is None
    assert "read k times" in svg


def test_shapes_only_draw_an_example_index_and_say_so():
    svg = rearr.explain("b n[idx: b k] c -> b k c", (2, 5, 3), k=4).to_svg()
    assert "idx: example values (explain was given shapes only)" in svg


def test_a_set_scatter_that_the_index_makes_meet_says_the_call_raises():
    svg = rearr.explain("a -> n[idx: a]", (3,), op="scatter", reduction="set", n=2,
                        idx=np.array([1, 1, 0])).to_svg()
    assert "the call itself raises for these indices: RA" in svg


def test_large_shapes_are_elided_and_the_caption_says_what_it_left_out():
    e = rearr.explain("a b -> b a", (64, 100))
    cells = _cells(e.to_svg())
    rows, cols = picture._axis(64, picture.MAX_ROWS).shown, picture._axis(100, picture.MAX_COLS).shown
    assert {ix for ix in cells["x"]} == {(r, c) for r in rows if r is not None for c in cols if c is not None}
    assert (63, 99) in cells["x"] and (0, 0) in cells["x"] and (20, 20) not in cells["x"]
    svg = e.to_svg()
    assert "x: showing 11 of 64 rows (0-8 and 62-63), 15 of 100 columns (0-12 and 98-99)" in svg
    assert "out: showing 11 of 100 rows (0-8 and 98-99), 15 of 64 columns (0-12 and 62-63)" in svg
    for (i, j), g in cells["out"].items():
        assert g.get("data-sources") == str(j * 100 + i)


def test_to_svg_takes_how_many_rows_and_columns_to_show():
    svg = rearr.explain("a b -> b a", (6, 7)).to_svg(max_rows=4, max_cols=1)
    assert "x: showing 3 of 6 rows (0 and 4-5), 3 of 7 columns (0 and 5-6)" in svg
    assert set(_cells(svg)["x"]) == {(r, c) for r in (0, 4, 5) for c in (0, 5, 6)}


# --- elision keeps every group seam and every index boundary ------------------------------------


def _lines(svg: str) -> list[ET.Element]:
    return [g for g in ET.fromstring(svg).iter(f"{SVG}line") if g.get("class") == "seam"]


def test_the_seam_where_channel_1_starts_is_drawn():
    # Elided to columns 0-12 and 62-63, the picture hid the point: column 32, where c = 1 starts.
    e = rearr.explain("c b h -> b (c h)", (2, 5, 32))
    svg = e.to_svg()
    out = _cells(svg)["out"]
    assert {31, 32} <= {j for _, j in out} and {0, 62, 63} <= {j for _, j in out}
    assert "out: showing 15 of 64 columns (0-5, 31-37 and 62-63)" in svg
    left = out[0, 31].find(f"{SVG}rect")
    x = float(left.get("x")) + float(left.get("width"))
    assert float(out[0, 32].find(f"{SVG}rect").get("x")) == pytest.approx(x)  # 31 and 32 side by side
    (line,) = _lines(svg)  # the seam between them
    assert float(line.get("x1")) == float(line.get("x2")) == pytest.approx(x)
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert "c=0" in texts and "c=1" in texts
    _check_labels(e, {}, svg)


def test_a_row_seam_and_nested_groups_are_drawn():
    svg = rearr.explain("c b h -> (c h) b", (2, 5, 32)).to_svg()
    assert {31, 32} <= {i for i, _ in _cells(svg)["out"]}
    assert "out: showing 11 of 64 rows (0-3, 31-35 and 62-63)" in svg
    svg = rearr.explain("a b c -> (a b c)", (2, 3, 10)).to_svg()
    # a changes at 30 (the thick line), b at 10, 20, 40 and 50 (thin ones)
    assert {j for (j,) in _cells(svg)["out"]} >= {9, 10, 19, 20, 29, 30, 39, 40, 49, 50, 59}
    assert sorted(float(g.get("stroke-width")) for g in _lines(svg)) == [1, 1, 1, 1, 2.5]


def test_more_seams_than_fit_keep_the_first_and_last_and_say_so():
    svg = rearr.explain("a b -> (a b)", (40, 2)).to_svg()
    drawn = {j for (j,) in _cells(svg)["out"]}
    assert drawn == {*range(29), *range(75, 80)}  # the first 14 seams and the last 2, each with its two cells
    assert "out: showing 34 of 80 columns (0-28 and 75-79; 16 of 39 seams where a changes)" in svg


def test_index_boundaries_are_kept_in_the_index_and_the_result():
    # Sorted segments: the points where the index changes are the point of the picture.
    dst = np.repeat(np.arange(4), 10)
    e = rearr.explain("e c -> v[dst: e] c", (40, 3), op="scatter", reduction="sum", v=6, dst=dst)
    svg = e.to_svg()
    cells = _cells(svg)
    for name in ("x", "dst"):
        drawn = {ix[0] for ix in cells[name]}
        assert {9, 10, 19, 20, 29, 30} <= drawn, (name, sorted(drawn))
    _check_labels(e, {"dst": dst}, svg)
    idx = np.array([[0] * 20 + [1] * 20, [5] * 10 + [7] * 30])
    e = rearr.explain("b n[idx: b k] -> b k", (2, 50), idx=idx)
    svg = e.to_svg()
    cells = _cells(svg)
    for name in ("idx", "out"):
        assert {9, 10, 19, 20} <= {j for _, j in cells[name]}, name
    # along the indexed axis, where how often an element is read changes: n = 2, 5, 6, 7, 8
    assert {1, 2, 4, 5, 6, 7, 8} <= {j for _, j in cells["x"]}
    _check_labels(e, {"idx": idx}, svg)


# Random patterns for the elision: a few axes of lengths that often exceed what a panel shows, in random
# groups on both sides, '...' now and then (alone, or inside an output group); a reduce drops axes, a
# repeat adds one.
ELIDED_LENGTHS = (1, 2, 3, 5, 7, 13, 20)


@st.composite
def _elided_cases(draw) -> tuple[str, tuple[int, ...], dict]:
    op = draw(st.sampled_from(["rearrange", "rearrange", "reduce", "repeat"]))
    names = draw(st.permutations("abcdh"))[: draw(st.integers(2, 4))]
    length = {a: draw(st.sampled_from(ELIDED_LENGTHS)) for a in names}
    ellipsis = [a for a in names[:draw(st.integers(0, 2))]]  # the axes '...' stands for, in input order

    def cut(order: list[str]) -> list[list[str]]:
        dims: list[list[str]] = []
        for a in order:
            if dims and len(dims[-1]) < 3 and draw(st.booleans()):
                dims[-1].append(a)
            else:
                dims.append([a])
        return dims

    rest = [a for a in names if a not in ellipsis]
    in_dims = [[a] for a in ellipsis] + cut(draw(st.permutations(rest)))
    kept = [a for a in names if a in ellipsis or op != "reduce" or draw(st.booleans())]
    new = ["k"] if op == "repeat" else []
    length.update({a: draw(st.sampled_from(ELIDED_LENGTHS[1:])) for a in new})
    out_dims = cut(draw(st.permutations(kept + new)))
    if ellipsis:  # '...' keeps its axes together and in order: put them into one output dim
        out_dims = [[a for a in d if a not in ellipsis] for d in out_dims]
        out_dims = [d for d in out_dims if d]
        k = draw(st.integers(0, len(out_dims)))
        group = draw(st.booleans()) or len(ellipsis) > 1
        out_dims.insert(k, ["..."] if not group else ["...", *([] if not out_dims or k == len(out_dims)
                                                          else out_dims.pop(k))])
    text = lambda dims: " ".join(d[0] if len(d) == 1 else f"({' '.join(d)})" for d in dims)  # noqa: E731
    ins = text([["..."]] + [d for d in in_dims[len(ellipsis):]] if ellipsis else in_dims)
    pattern = f"{ins} -> {text(out_dims)}"
    shape = tuple(math.prod(length[a] for a in d) for d in in_dims)
    keywords = {a: length[a] for d in in_dims if len(d) > 1 for a in d} | {a: length[a] for a in new}
    keywords |= {"op": op, "reduction": "sum"} if op == "reduce" else {"op": op}
    assume(math.prod(shape) <= 1500 and math.prod(length[a] for a in names + new) <= 3000)
    return pattern, shape, keywords


def _seams(sizes: list[list[int]]) -> set[int]:
    """Where, along a drawn axis over dims of these elementary lengths (row-major), the outer axis of a
    merged dim (its first of length > 1, the dim having two) changes: by enumeration."""
    flat = [n for d in sizes for n in d]
    outer = []
    start = 0
    for d in sizes:
        big = [start + k for k, n in enumerate(d) if n > 1]
        if len(big) > 1:
            outer.append(big[0])
        start += len(d)
    coords = [np.unravel_index(p, flat) if flat else () for p in range(math.prod(flat))]
    return {p for p in range(1, len(coords)) if any(coords[p][k] != coords[p - 1][k] for k in outer)}


def _drawn_positions(cells: dict, shape: tuple[int, ...]) -> list[set[int]]:
    """The positions drawn along each drawn axis: the columns, the rows, and the panels (row-major)."""
    rank = len(shape)
    cols = {ix[-1] for ix in cells} if rank >= 1 else set()
    rows = {ix[-2] for ix in cells} if rank >= 2 else set()
    panels = {int(np.ravel_multi_index(ix[:-2], shape[:-2])) for ix in cells} if rank >= 3 else set()
    return [cols, rows, panels]


def _dims_sizes(e, side: str) -> list[list[int]]:
    """The lengths of the elementary axes of each dim of the input ('in') or the result."""
    named = {n: v for n, v, _ in e.plan.lengths}
    return [[named[a] for a in d] for d in (e.plan.in_dims if side == "in" else e.plan.out_dims)]


@pytest.mark.slow
@given(_elided_cases())
def test_random_elided_pictures_keep_every_seam_and_agree_with_the_reference(case):
    pattern, shape, keywords = case
    e = rearr.explain(pattern, shape, **keywords)
    svg = e.to_svg()
    cells = _cells(svg)
    limits = [picture.MAX_COLS, picture.MAX_ROWS, picture.MAX_PANELS]
    for name, side, tensor_shape in (("x", "in", e.shape), ("out", "out", e.out_shape)):
        sizes = _dims_sizes(e, side)
        split = [sizes[-1:], sizes[-2:-1], sizes[:-2]]
        for drawn, dims, limit in zip(_drawn_positions(cells[name], tensor_shape), split, limits):
            seams = _seams(dims)
            if len(seams) <= limit:
                assert {q for p in seams for q in (p - 1, p)} <= drawn, (name, pattern, shape, sorted(seams))
    _check_labels(e, {}, svg)


# Gathers and scatters whose indices are sorted segments (few boundaries) or random (many), on lengths
# that elide: every index boundary is kept wherever its axis is drawn.
INDEXED = [  # (op, pattern, reduction, the input's axes, the result's, the index's name and axes, the indexed axis)
    ("rearrange", "b n[idx: b k] c -> b k c", None, "b n c", "b k c", "idx", "b k", "n"),
    ("rearrange", "v[ids: t] d -> t d", None, "v d", "t d", "ids", "t", "v"),
    ("scatter", "e c -> v[dst: e] c", "sum", "e c", "v c", "dst", "e", "v"),
    ("scatter", "b e -> b v[dst: b e]", "max", "b e", "b v", "dst", "b e", "v"),
]


def _changes_along(a: np.ndarray, axis: int) -> set[int]:
    """The positions p along an axis where a differs anywhere from its values at p - 1."""
    moved = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
    return {p for p in range(1, len(moved)) if (moved[p] != moved[p - 1]).any()}


def _boundaries(names: list[str], lengths: list[int], bounds: dict[str, set[int]]) -> set[int]:
    """Along a drawn axis over these axes (row-major): where an axis's coordinate changes to one of its
    boundaries, by enumeration."""
    coords = [np.unravel_index(p, lengths) for p in range(math.prod(lengths))]
    return {p for p in range(1, len(coords)) for k, a in enumerate(names)
            if coords[p][k] != coords[p - 1][k] and coords[p][k] in bounds.get(a, ())}


@given(st.sampled_from(INDEXED), st.integers(0, 2**32 - 1), st.booleans())
def test_random_index_pictures_keep_every_index_boundary(case, seed, sorted_segments):
    op, pattern, reduction, in_axes, out_axes, name, axes, indexed = (
        v.split() if k in (3, 4, 6) else v for k, v in enumerate(case))
    rng = np.random.default_rng(seed)
    length = {a: int(rng.choice([2, 3, 5, 13, 30, 60])) for a in "nkvte"} | {a: int(rng.integers(1, 4)) for a in "bcd"}
    index = rng.integers(0, length[indexed], [length[a] for a in axes])
    if sorted_segments:
        index = np.sort(index, axis=-1)
    kwargs = {name: index} | ({"op": op, "reduction": reduction, indexed: length[indexed]} if op == "scatter" else {})
    e = rearr.explain(pattern, tuple(length[a] for a in in_axes), **kwargs)
    svg = e.to_svg()
    cells = _cells(svg)
    bounds = {a: _changes_along(index, j) for j, a in enumerate(axes)}
    # Along the indexed axis, where how often an element is read (gather) or a target written (scatter) changes.
    side = in_axes if op != "scatter" else out_axes
    counts = np.zeros([length[a] for a in side], dtype=int)
    for pos in np.ndindex(*index.shape):
        at = dict(zip(axes, pos), **{indexed: index[pos]})
        counts[tuple(at.get(a, slice(None)) for a in side)] += 1
    with_counts = bounds | {indexed: _changes_along(counts, side.index(indexed))}
    tensors = [(name, axes, bounds), ("x", in_axes, with_counts if op != "scatter" else bounds),
               ("out", out_axes, with_counts if op == "scatter" else bounds)]
    limits = [picture.MAX_COLS, picture.MAX_ROWS, picture.MAX_PANELS]
    for tensor, names, known in tensors:
        split = [names[-1:], names[-2:-1], names[:-2]]
        for drawn, along, limit in zip(_drawn_positions(cells[tensor], tuple(length[a] for a in names)), split, limits):
            seams = _boundaries(along, [length[a] for a in along], known)
            if len(seams) <= limit:
                assert {q for p in seams for q in (p - 1, p)} <= drawn, (tensor, along, sorted(seams))
    _check_labels(e, {name: index}, svg)


def test_compare_draws_other_code_under_the_result_and_frames_each_cell_it_gets_wrong():
    x = np.arange(24).reshape(2, 3, 4)
    e = rearr.explain("c b h -> b (c h)", (2, 3, 4))
    bare = x.reshape(3, 8)  # torch's x.view(3, 8): the memory cut into rows, nothing moved
    svg = e.to_svg(compare={"x.view(3, 8)": bare, "by hand": x.transpose(1, 0, 2).reshape(3, 8)})
    cells = _cells(svg)
    right = reference.reference("rearrange", x, "c b h -> b (c h)")
    assert set(cells["x.view(3, 8)"]) == set(cells["by hand"]) == set(np.ndindex(3, 8))
    for name, value in (("x.view(3, 8)", bare), ("by hand", x.transpose(1, 0, 2).reshape(3, 8))):
        for ix, g in cells[name].items():
            texts = [t.text for t in g.iter(f"{SVG}text")]
            assert texts[0] == g.get("data-sources") == str(value[ix])
            wrong = value[ix] != right[ix]
            assert (texts[1:] == [f"want {right[ix]}"]) == wrong, (name, ix, texts)
            assert any(r.get("stroke") == picture.WRONG for r in g.iter(f"{SVG}rect")) == wrong
    assert sum(right.ravel() != bare.ravel()) == 16  # the wrong answer is drawn as wrong in 16 of 24 cells
    _check_labels(e, {}, svg)
    with pytest.raises(rearr.RearrError, match="flat positions"):
        e.to_svg(compare={"floats": bare * 0.5})
    with pytest.raises(rearr.RearrError, match="not an einsum"):
        rearr.explain("i j, j k -> i k", (2, 3), (3, 4), op="einsum").to_svg(compare={"y": bare})

def test_rank_above_two_is_a_row_of_panels_titled_by_the_leading_axes():
    svg = rearr.explain("a b c d -> d (c b) a", (3, 4, 2, 5)).to_svg()
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert "a=0, b=0" in texts and "a=2, b=3" in texts and "a=1, b=1" not in texts
    assert "x: showing 5 of 12 panels (0-2 and 10-11)" in svg
    assert "d=4" in texts
    assert "(c b) (8)" in texts  # the row axis of the result, with its length


def test_a_bad_index_raises_the_library_error_and_the_html_says_it():
    e = rearr.explain("b n[idx] -> b", (2, 5), idx=np.array([7, 1]))
    with pytest.raises(rearr.RearrError) as info:
        e.to_svg()
    assert info.value.code == "RA501"
    assert "not drawn: RA501" in e._repr_html_()


def test_empty_huge_and_einsum_explanations_still_draw():
    for e in (rearr.explain("a b -> b a", (0, 3)), rearr.explain("a b -> b a", (4096, 2048)),
              rearr.explain("i j, j k -> i k", (2, 3), (3, 4), op="einsum")):
        ET.fromstring(e.to_svg())
    assert "not drawn: the input has 8,388,608" in rearr.explain("a b -> b a", (4096, 2048)).to_svg()
    cells = _cells(rearr.explain("i j, j k -> i k", (2, 3), (3, 4), op="einsum").to_svg())
    assert set(cells) == {"x", "y", "out"} and set(cells["out"]) == set(np.ndindex(2, 4))


def test_index_tensors_may_be_given_in_place_of_their_shapes():
    idx = np.array([[4, 0], [1, 1]])
    e = rearr.explain("b n[idx] -> b k", (2, 5), idx=idx, show=True)
    assert e == rearr.explain("b n[idx] -> b k", (2, 5), idx=(2, 2), show=False).replace(
        layout=e.layout, show_note=e.show_note)
    assert e.layout.tolist() == [[4, 0], [6, 6]]  # show runs the given index too
    assert "idx = [[4, 0], [1, 1]]" in e.show_note


def test_torch_index_tensors_draw_too():
    torch = pytest.importorskip("torch")
    svg = rearr.explain("b n[idx] -> b k", (2, 5), idx=torch.tensor([[4, 0], [1, 1]])).to_svg()
    assert _cells(svg)["out"][1, 0].get("data-sources") == "6"


# --- notebooks and the command line ---------------------------------------------------


def test_repr_html_holds_the_code_and_the_picture():
    e = rearr.explain("c b h -> b (c h)", (2, 3, 4))
    html = e._repr_html_()
    assert "x = x.permute(1, 0, 2)" in html and "<svg" in html and html.count("</svg>") == 1
    assert e.to_svg() in html
    ET.fromstring(html)  # well-formed: the report is escaped


# The methods that IPython's display formatter looks up, one per mime type of a notebook output
# (IPython.core.formatters), besides _repr_pretty_ for text/plain.
REPR_METHODS = ("_repr_mimebundle_", "_ipython_display_", "_repr_html_", "_repr_markdown_", "_repr_svg_",
                "_repr_png_", "_repr_jpeg_", "_repr_latex_", "_repr_json_", "_repr_javascript_", "_repr_pdf_")


def _display_data(e) -> dict[str, object]:
    """What a notebook cell stores for ``e``: IPython's display formatter where IPython is installed, else
    the same lookup by hand (each method of REPR_METHODS that exists, and the report as text/plain)."""
    try:
        from IPython.core.formatters import DisplayFormatter
    except ImportError:
        found = {name: getattr(e, name)() for name in REPR_METHODS if hasattr(e, name)}
        assert "_repr_mimebundle_" not in found and "_ipython_display_" not in found
        return {"text/plain": str(e), **{name: value for name, value in found.items() if value is not None}}
    data, _ = DisplayFormatter().format(e)
    return data


@pytest.mark.parametrize("call", [lambda: rearr.explain("c b h -> b (c h)", (2, 5, 32)),
                                  lambda: rearr.explain("b n[idx] -> b", (2, 5), idx=np.array([7, 1])),
                                  lambda: rearr.explain("i j, j k -> i k", (2, 3), (3, 4), op="einsum")])
def test_a_notebook_cell_holds_the_picture_once(call):
    # It held the same picture twice, as text/html and as image/svg+xml.
    e = call()
    data = _display_data(e)
    assert set(data) in ({"text/plain", "text/html"}, {"text/plain", "_repr_html_"}), set(data)
    assert data["text/plain"] == str(e)
    assert sum(str(v).count("<svg") for v in data.values()) <= 1
    assert data.get("text/html", data.get("_repr_html_")) == e._repr_html_()


def test_repr_pretty_prints_the_report():
    class Printer:  # IPython's pretty printer, as far as _repr_pretty_ uses it
        def __init__(self) -> None:
            self.out = ""

        def text(self, s: str) -> None:
            self.out += s

    e = rearr.explain("c b h -> b (c h)", (2, 3, 4))
    p = Printer()
    e._repr_pretty_(p, False)
    assert p.out == str(e) and "x = x.permute(1, 0, 2)" in p.out


def test_ipython_pretty_prints_the_report():
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    e = rearr.explain("c b h -> b (c h)", (2, 3, 4))
    assert pretty(e) == str(e)


def test_cli_writes_the_svg(tmp_path):
    path = tmp_path / "p.svg"
    done = subprocess.run([sys.executable, "-m", "rearr.tools.cli", "explain", "b k -> b n[idx]", "--shape", "2,4",
                           "--op", "scatter", "--reduction", "sum", "-l", "n=6", "--svg", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    e = rearr.explain("b k -> b n[idx]", (2, 4), op="scatter", reduction="sum", n=6)
    assert done.stdout.strip() == str(e)
    assert path.read_text(encoding="utf-8") == e.to_svg() + "\n"


def test_cli_says_when_it_cannot_write_the_svg(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rearr.tools.cli", "explain", "a b -> b a", "--shape", "2,3",
                           "--svg", str(tmp_path / "no" / "p.svg")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "cannot write" in done.stderr and "Traceback" not in done.stderr


def test_the_docs_pictures_are_what_the_generator_writes_now():
    spec = importlib.util.spec_from_file_location("docs_pictures", ROOT / "docs" / "images" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pictures = dict(module.pictures())
    assert pictures
    docs = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))
    for name, text in pictures.items():
        assert (ROOT / "docs" / "images" / name).read_text(encoding="utf-8") == text + "\n", \
            f"run: python docs/images/generate.py ({name} is stale)"
        assert f"images/{name})" in docs, f"no page shows {name}"


# --- a real browser -------------------------------------------------------------------------


def _browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    idat = b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IDAT":
            idat += body
        else:
            chunks.setdefault(kind, body)
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, (depth, colour_type, interlace)
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line[k] for k in range(stride) if k % bpp < 3))
        prev = line
    return width, height, rows


def test_png_reader_reads_what_zlib_and_struct_write():
    # A 2x2 RGB PNG written by hand with filters 0 and 2: the reader gives the pixels back.
    pixels = [bytes([255, 0, 0, 0, 255, 0]), bytes([0, 0, 255, 255, 255, 255])]
    raw = b"\x00" + pixels[0] + b"\x02" + bytes((b - a) & 255 for a, b in zip(pixels[0], pixels[1]))
    chunk = lambda kind, body: struct.pack(">I", len(body)) + kind + body + struct.pack(  # noqa: E731
        ">I", zlib.crc32(kind + body))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    assert _read_png(png) == (2, 2, pixels)


@pytest.mark.slow
def test_the_picture_renders_in_headless_chromium(tmp_path):
    browser = _browser()
    if browser is None:
        if os.environ.get("REARR_BROWSER_TESTS") == "1":
            pytest.fail("REARR_BROWSER_TESTS=1 but no chromium on PATH (.ci/run installs Debian's chromium)")
        pytest.skip("no chromium on PATH: install Debian's chromium (apt-get install chromium) to run this test")
    e = rearr.explain("b k -> b n[idx]", (2, 4), op="scatter", reduction="sum", n=6,
                      idx=np.array([[0, 2, 2, 5], [1, 1, 1, 3]]))
    svg = e.to_svg()
    root = ET.fromstring(svg)
    width, height = int(root.get("width")), int(root.get("height"))
    (tmp_path / "p.svg").write_text(svg, encoding="utf-8")
    shot = tmp_path / "p.png"
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                           f"--window-size={width},{height}", (tmp_path / "p.svg").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists(), done.stderr[-2000:]
    w, h, rows = _read_png(shot.read_bytes())
    assert (w, h) == (width, height)
    pixels = [row[k:k + 3] for row in rows for k in range(0, len(row), 3)]
    counts: dict[bytes, int] = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    background = bytes.fromhex(picture.BACKGROUND[1:])
    assert counts.get(background, 0) > len(pixels) / 2  # the page is the SVG's own background
    assert len(pixels) - counts.get(background, 0) > 0.1 * len(pixels)
    # Each input element's colour fills its cell in the input and again where it lands in the result.
    cells = _cells(svg)
    for g in cells["x"].values():
        rect = g.find(f"{SVG}rect")
        fill = bytes.fromhex(rect.get("fill")[1:])
        area = float(rect.get("width")) * float(rect.get("height"))
        near = sum(n for p, n in counts.items() if max(abs(a - b) for a, b in zip(p, fill)) <= 3)
        assert near > 0.6 * area, (rect.get("fill"), near, area)
    # The text is drawn: dark pixels, in the heading's band and in the cells.
    dark = sum(n for p, n in counts.items() if max(p) < 100)
    assert dark > 500


@pytest.mark.parametrize("name", ["\x00", "\x01", "\x1b[31mred", "tab\tand\nnewline", "\x0c", "\x7f\x85",
                                  "\ud800", "\ufffe", "<&>\"'", "\U0001f600"])
def test_a_callable_with_any_name_gives_well_formed_xml(name: str):
    """XML 1.0 holds no control character but tab, newline and carriage return, not even as a
    character reference: such a character is drawn as Python writes it in a string."""
    def reduction(x, axes):
        return x.sum(axis=axes)

    reduction.__name__ = name
    svg = rearr.explain("a b -> a", (2, 3), op="reduce", reduction=reduction).to_svg()
    root = ET.fromstring(svg)  # expat: a character XML cannot hold is a ParseError
    drawn = " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    shown = "".join(c if c in "\t\n\r" or " " <= c <= "\ud7ff" or "\ue000" <= c <= "\ufffd" or c > "\uffff"
                    else repr(c)[1:-1] for c in name)
    assert f"({shown})" in drawn
