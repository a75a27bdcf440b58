"""Explanation.to_svg(): the input, its index tensors and the result drawn as grids of labelled elements.

The picture is computed, not inferred: it runs the real rearr (on numpy) on
``np.arange(n).reshape(shape)``, so each result cell holds the flat position of
the input element it came from, and the cell is labelled and coloured by that
position. Reduce and scatter combine several elements in one cell; the picture
finds them by running rearr again with other reductions (a callable that
collects each group for reduce; min, max, sum and a count for scatter), so that
it names the sources of every cell with up to three and the first and last of
larger ones. A long axis is elided, but never where the point is: both cells of
every group seam and every index boundary stay (``_axis``). ``compare=`` draws
other code's results on the same input under the result, each wrong cell framed.

SVG is text: this module needs only the standard library, and numpy when it
runs (numpy is a dependency of rearr).
"""

from __future__ import annotations

import colorsys
import itertools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any
from xml.sax import saxutils

from .._record import Record
from ..errors import RearrError

MAX_ROWS = 12  # a panel shows every row up to this many, else its first MAX_ROWS - 3 and last 2
MAX_COLS = 16
MAX_PANELS = 6  # rank > 2: panels for the leading axes, at most this many (first ones and the last)
RUN_LIMIT = 1 << 22  # the picture runs rearr on inputs and results of at most this many elements
LISTED = 3  # a cell names all its sources up to this many, else the first and the last
ATTRIBUTE_LIMIT = 64  # data-sources lists up to this many; a cell with more has data-min and data-max

FONT = 11
CHAR = 6.7  # the width of one monospace character at FONT
ROW = 22  # a cell's height; cells with a second line are taller
ROW2 = 32
GAP = 14  # the gap that stands for elided rows or columns
PAD = 16
BACKGROUND = "#ffffff"
INK = "#222222"
EMPTY = "#f1f1f1"  # a result cell that no element writes (scatter's fill)
INDEX = "#e4e4e4"  # the cells of an index tensor, and einsum's
WRONG = "#d00000"  # the frame of a compared cell that holds another element than the result's


def example_indices(plan: Any) -> dict[str, Any]:
    """Example index tensors for a plan: they count down from the end, so that a gather visibly
    reorders, and each index starts elsewhere."""
    import numpy as np

    return {u.name: (-1 - k - np.arange(math.prod(u.shape))).reshape(u.shape) % max(u.length, 1)
            for k, u in enumerate(plan.indices)}


def colour(position: int, count: int) -> str:
    """The fill of the element at a flat position among count: a hue that runs along the flat order."""
    hue = 0.8 * position / max(count - 1, 1)
    r, g, b = colorsys.hls_to_rgb(hue, 0.8, 0.7)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


# --- what each result cell holds ---------------------------------------------------


class Sources(Record):
    """The input elements (flat positions) that one result cell combines.

    ``listed`` holds all of them, sorted, when ``complete``; otherwise the first and the last."""

    listed: tuple[int, ...]
    count: int
    complete: bool = True


class Routes:
    """Where each element goes, from runs of rearr on arange input: for each result cell (row-major) the
    count, the smallest and the largest of its sources, and all of them where they are known.

    ``rows``/``row_of``: reduce's groups (each row of ``rows`` one group, sorted; ``row_of`` the group
    of each result cell); ``middle``: scatter's third source of a cell that has three. ``reads``:
    how many times each of the n input elements is read, or None where the runs do not tell.
    """

    def __init__(self, n: int, out_shape: tuple[int, ...], indices: tuple[tuple[str, Any], ...], example: bool,
                 count: Any, first: Any, last: Any, middle: Any = None, rows: Any = None, row_of: Any = None,
                 error: str | None = None) -> None:
        import numpy as np

        self.out_shape, self.indices, self.example, self.error = out_shape, indices, example, error
        self.count, self.first, self.last, self.middle, self.rows, self.row_of = count, first, last, middle, \
            rows, row_of
        self.size = len(count)
        self.complete = rows is not None or bool((count <= LISTED).all())
        self.reads = None if not self.complete else np.bincount(self._all_sources(), minlength=n)

    def _all_sources(self) -> Any:
        import numpy as np

        if self.rows is not None:
            return self.rows[self.row_of].ravel()
        c = self.count
        if self.middle is None:  # one source a cell
            return self.first
        parts = [self.first[c >= 1], self.last[c >= 2]]
        if self.middle is not None:
            parts.append(self.middle[c == 3])
        return np.concatenate(parts)

    def sources(self, flat: int) -> Sources:
        count = int(self.count[flat])
        if self.rows is not None:
            return Sources(tuple(int(v) for v in self.rows[self.row_of[flat]]), count)
        lo, hi = int(self.first[flat]), int(self.last[flat])
        listed = {0: (), 1: (lo,), 2: (lo, hi)}.get(count, (lo, hi))
        if count == 3 and self.middle is not None:
            listed = (lo, int(self.middle[flat]), hi)
        return Sources(listed, count, count <= LISTED)


def routes(e: Any) -> Routes:
    """Run rearr on arange input (and the explanation's indices, or example ones): each result cell's sources."""
    import numpy as np

    from .. import api

    plan = e.plan
    given = dict(e.index_values or ())
    indices = {u.name: np.asarray(api.asnumpy(given[u.name])) if u.name in given else None for u in plan.indices}
    example = any(v is None for v in indices.values())
    examples = example_indices(plan)
    indices = {n: examples[n] if v is None else v for n, v in indices.items()}
    x = np.arange(math.prod(plan.in_shape), dtype=np.int64).reshape(plan.in_shape)
    kwargs = dict(e.lengths, **indices)
    known = (x.size, tuple(plan.out_shape), tuple(indices.items()), example and bool(indices))
    if e.op == "reduce":
        return _reduce_routes(x, e.pattern, kwargs, known)
    if e.op == "scatter":
        return _scatter_routes(x, e.pattern, e.reduction, kwargs, known)
    out = np.asarray(getattr(api, e.op)(x, e.pattern, **kwargs)).ravel()
    return Routes(*known, np.ones_like(out), out, out)


def _reduce_routes(x: Any, pattern: str, kwargs: dict, known: tuple) -> Routes:
    """A reduce with a callable that records each group of inputs and gives each group's number
    in its place, so that the result says which group each cell holds."""
    import numpy as np

    from .. import api

    seen: list[Any] = []

    def collect(y: Any, axes: tuple[int, ...]) -> Any:
        y = np.asarray(y)
        axes = tuple(axes)
        kept = tuple(n for a, n in enumerate(y.shape) if a not in axes)
        rows = np.moveaxis(y, axes, tuple(range(y.ndim - len(axes), y.ndim))).reshape(math.prod(kept), -1)
        seen.append(np.sort(rows, axis=1))
        return np.arange(len(rows), dtype=np.int64).reshape(kept)

    out = np.asarray(api.reduce(x, pattern, collect, **kwargs)).ravel()
    if not seen:  # no axis is reduced: each cell holds one element
        return Routes(*known, np.ones_like(out), out, out)
    rows = seen[0]
    groups = rows[out]
    return Routes(*known, np.full(len(out), rows.shape[1]), groups[:, 0], groups[:, -1], rows=rows, row_of=out)


def _scatter_routes(x: Any, pattern: str, reduction: object, kwargs: dict, known: tuple) -> Routes:
    """Each target's sources from four scatters: the count, the smallest, the largest and the sum (which
    gives the third of three); then the caller's own reduction once, which may refuse the indices."""
    import numpy as np

    from .. import api

    count, low, high, total = (np.asarray(api.scatter(v, pattern, r, **kwargs)).ravel() for v, r in
                               ((np.ones_like(x), "sum"), (x, "min"), (x, "max"), (x, "sum")))
    error = None
    try:  # 'set' refuses two writes to one target
        api.scatter(x.astype(np.float64), pattern, reduction, **kwargs)
    except RearrError as err:
        error = f"{err.code}: {err.message}"
    return Routes(*known, count, low, high, middle=total - low - high, error=error)


# --- one drawn cell and one tensor -------------------------------------------------


class Cell(Record):
    text: str
    sub: str  # a second, smaller line ('' for none)
    fills: tuple[str, ...]  # one colour, or stripes
    attrs: tuple[tuple[str, str], ...]  # the machine-readable data-* attributes
    title: str  # the tooltip
    faded: bool = False
    marked: bool = False  # framed in red: another computation's cell that holds the wrong element


Factor = tuple[str, int, str]  # one elementary axis of a dim: its name, its length, and its name as shown


class Tensor(Record):
    """A tensor to draw: its name, shape, the label of each dim, and each cell's look by index.

    ``factors``: each dim's elementary axes, row-major (``()`` where they are not known), which place the
    group seams; ``bounds``: for an elementary axis, the positions along it where an index changes (the
    index boundaries). The elision keeps both (``_axis``)."""

    name: str
    shape: tuple[int, ...]
    dims: tuple[str, ...]
    cell: Callable[[tuple[int, ...]], Cell]
    factors: tuple[tuple[Factor, ...], ...] = ()
    bounds: tuple[tuple[str, tuple[int, ...]], ...] = ()


# --- what an elided axis keeps -----------------------------------------------------
# A drawn axis (the rows or the columns of a panel, or the panels) runs over the elementary axes of
# its dims, row-major. A seam is a position p where something changes between p - 1 and p:
# - a group seam: the outer axis of a merged dim changes (c in (c h)), then its other axes but the last;
# - an index boundary: an index tensor's value changes along the elementary axis there, or what the
#   indexed axis holds changes (how often an element is read; how many writes a target gets).
# The elision keeps both cells of every seam, up to `limit` seams an axis (the most telling first: the
# outer group seams, the index boundaries, the inner group seams; a kind with more than fit keeps its
# first and last ones, and the caption says so), the first and the last two positions, and fills the
# rest of the `limit` cells from the start of each block.


class _Level(Record):
    """The seams of one elementary axis of a drawn axis: the m-th is at
    ``(m // len(values)) * length * step + values[m % len(values)] * step``."""

    kind: str  # 'group' (the outer axis of a merged dim), 'inner' (another axis of it), 'index'
    shown: str  # the axis's name, for the caption and the labels
    length: int
    step: int  # the stride of the axis along the drawn one
    values: tuple[int, ...]  # the axis's own positions where it changes
    outer: int  # how many times the axis runs through its values

    @property
    def count(self) -> int:
        return self.outer * len(self.values)

    def at(self, m: int) -> int:
        q, k = divmod(m, len(self.values))
        return q * self.length * self.step + self.values[k] * self.step


def _levels(dims: tuple[tuple[Factor, ...], ...], bounds: dict[str, tuple[int, ...]]) -> list[_Level]:
    """The seams along a drawn axis over these dims, the most telling kind first."""
    flat = [f for dim in dims for f in dim]
    lengths = [n for _, n, _ in flat]

    def level(kind: str, k: int, values: tuple[int, ...]) -> _Level:
        return _Level(kind, flat[k][2], lengths[k], math.prod(lengths[k + 1:]), values, math.prod(lengths[:k]))

    groups, inner, index = [], [], []
    start = 0
    for dim in dims:
        big = [k for k in range(start, start + len(dim)) if lengths[k] > 1]
        for rank, k in enumerate(big[:-1]):  # a merged dim's axes but its last
            (groups if rank == 0 else inner).append(level("group" if rank == 0 else "inner", k,
                                                          tuple(range(1, lengths[k]))))
        start += len(dim)
    for k, (name, n, _) in enumerate(flat):
        values = tuple(v for v in bounds.get(name, ()) if 0 < v < n)
        if values:
            index.append(level("index", k, values))
    return groups + index + inner


class _Axis(Record):
    """What one drawn axis of length n shows: the positions (None: a gap), the group seams drawn as lines
    ((position, 0 for an outer axis, 1 for an inner one)), the labels of the outer axis's blocks
    ((position, 'c=1')), and the caption's words for seams it could not keep."""

    n: int
    shown: tuple[int | None, ...]
    lines: tuple[tuple[int, int], ...] = ()
    labels: tuple[tuple[int, str], ...] = ()
    left_out: tuple[str, ...] = ()


def _axis(n: int, limit: int, levels: Sequence[_Level] = ()) -> _Axis:
    """The positions drawn along an axis of length n: every one up to ``limit``, else the seams (at most
    ``limit`` of them), the first and the last two, and the start of each block, about ``limit`` in all."""
    limit = max(limit, 4)  # at least the first, the gap and the last two
    kept: dict[int, _Level] = {}  # each seam kept, and its level
    left_out = []
    for lv in levels:
        room = (n if n <= limit else limit) - len(kept)
        if lv.count <= room:
            picks = list(range(lv.count))
        else:  # the most telling kind keeps its first and last seams; a later one that does not fit, none
            picks = [*range(room - 2), lv.count - 2, lv.count - 1] if room >= 3 and not kept else []
            what = "places where an index changes along" if lv.kind == "index" else "seams where"
            left_out.append(f"{len(picks)} of {lv.count} {what} {lv.shown}" + (" changes" * (lv.kind != "index")))
        for m in picks:
            kept.setdefault(lv.at(m), lv)
    keep = set(range(n)) if n <= limit else {0, n - 2, n - 1} | {q for p in kept for q in (p - 1, p)}
    starts = sorted({0, *kept})
    grew = True
    while grew and len(keep) < limit - 1:  # fill from the start of each block, in turn
        grew = False
        for s in starts:
            q = s
            while q in keep:
                q += 1
            if q < n and len(keep) < limit - 1:
                keep.add(q)
                grew = True
    order = sorted(keep)
    shown: list[int | None] = []
    for p in order:
        if shown and p - 1 not in keep:
            shown.append(None)
        shown.append(p)
    lines = tuple(sorted((p, 0 if lv.kind == "group" else 1) for p, lv in kept.items() if lv.kind != "index"))
    outer = next((lv for lv in levels if lv.kind == "group"), None)
    labels = () if outer is None else tuple((p, f"{outer.shown}={(p // outer.step) % outer.length}")
                                            for p in [0, *sorted(p for p, lv in kept.items() if lv is outer)])
    return _Axis(n, tuple(shown), lines, labels, tuple(left_out) if n > limit else ())


def _runs(shown: tuple[int | None, ...]) -> str:
    """'0-5, 31-37 and 62-63': the runs of positions shown."""
    runs: list[list[int]] = [[]]
    for p in shown:
        if p is None:
            runs.append([])
        else:
            runs[-1].append(p)
    text = [f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs if r]
    return ", ".join(text[:-1]) + f" and {text[-1]}" if len(text) > 1 else text[0]


# The characters XML 1.0 holds; no other may appear in a document, not even as a reference (&#1;).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _holdable(s: str) -> str:
    """s with each character XML cannot hold (a control character, a lone surrogate, U+FFFE) written
    as Python writes it in a string (\\x01, \\ud800): a callable's __name__ may hold anything."""
    return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], s)


def escape(s: str) -> str:
    """s as XML character data."""
    return saxutils.escape(_holdable(s))


def quoteattr(s: str) -> str:
    """s as a quoted XML attribute value."""
    return saxutils.quoteattr(_holdable(s))


class _Svg:
    """The SVG's elements, drawn top to bottom; the width grows to the widest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.width = 0.0
        self.y = float(PAD)

    def text(self, x: float, y: float, s: str, size: int = FONT, anchor: str = "start", cls: str = "",
             extra: str = "") -> None:
        klass = f" class={quoteattr(cls)}" if cls else ""
        self.parts.append(f'<text x="{x:g}" y="{y:g}" font-size="{size}" text-anchor="{anchor}"{klass}{extra}>'
                          f"{escape(s)}</text>")
        self.width = max(self.width, x + (len(s) * CHAR * size / FONT if anchor == "start" else 0))

    def line(self, s: str, size: int = FONT, cls: str = "") -> None:
        self.y += size + 5
        self.text(PAD, self.y, s, size, cls=cls)

    def seam(self, x1: float, y1: float, x2: float, y2: float, rank: int) -> None:
        self.parts.append(f'<line class="seam" x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{INK}" '
                          f'stroke-width="{2.5 if rank == 0 else 1}"/>')

    def done(self, heading: str) -> str:
        width, height = math.ceil(self.width + PAD), math.ceil(self.y + PAD)
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
                f'fill="{INK}">')
        return "\n".join([head, f"<title>{escape(heading)}</title>",
                          f'<rect width="{width}" height="{height}" fill="{BACKGROUND}"/>', *self.parts, "</svg>"])


class _Layout(Record):
    """Which positions of a tensor are drawn: its rows and columns (of each panel) and its panels
    (positions of the leading axes, row-major), and each drawn cell's look."""

    rows: _Axis
    cols: _Axis
    panels: _Axis
    combos: tuple[tuple[int, ...], ...]  # the index of the leading axes of each panel position
    looks: dict


def _layout(t: Tensor, max_rows: int, max_cols: int) -> _Layout:
    rank = len(t.shape)
    factors = t.factors if len(t.factors) == rank and all(
        math.prod(n for _, n, _ in f) == size for f, size in zip(t.factors, t.shape)) else ((),) * rank
    bounds = dict(t.bounds)
    rows = _axis(t.shape[-2], max_rows, _levels(factors[-2:-1], bounds)) if rank >= 2 else _Axis(1, (0,))
    cols = _axis(t.shape[-1], max_cols, _levels(factors[-1:], bounds)) if rank >= 1 else _Axis(1, (0,))
    combos = tuple(itertools.product(*(range(n) for n in t.shape[:-2])))
    panels = _axis(len(combos), MAX_PANELS, _levels(factors[:-2], bounds)) if rank >= 3 else _Axis(1, (0,))
    looks = {ix: t.cell(ix) for p in panels.shown if p is not None for r in rows.shown if r is not None
             for c in cols.shown if c is not None for ix in [_at(combos[p], r, c, rank)]}
    return _Layout(rows, cols, panels, combos, looks)


def elided(t: Tensor, lay: _Layout) -> list[str]:
    """What the drawing of t leaves out, as sentences for the caption."""
    out = []
    for what, axis in (("panels", lay.panels), ("rows", lay.rows), ("columns", lay.cols)):
        shown = [p for p in axis.shown if p is not None]
        if len(shown) < axis.n:
            out.append(f"{len(shown)} of {axis.n} {what} ({'; '.join([_runs(axis.shown), *axis.left_out])})")
    return [f"{t.name}: showing {', '.join(out)}"] if out else []


def _at(panel: tuple[int, ...], row: int, col: int, rank: int) -> tuple[int, ...]:
    """The index of a cell: its panel's position, then its row and column (as far as the rank has them)."""
    return (*panel, *([row] if rank >= 2 else []), *([col] if rank >= 1 else []))


def draw_tensor(svg: _Svg, t: Tensor, lay: _Layout) -> None:
    """One tensor: a title, then a row of 2-d panels (one per position of the leading axes)."""
    svg.line(f"{t.name}  shape {t.shape}" + (f"  axes: {'  '.join(t.dims)}" if t.dims else ""), cls="tensor")
    if 0 in t.shape:
        svg.line("  (no element: an axis has length 0)")
        return
    rank = len(t.shape)
    width = max(28.0, max(max(len(c.text), len(c.sub) * 0.8) for c in lay.looks.values()) * CHAR + 10)
    height = ROW2 if any(c.sub for c in lay.looks.values()) else ROW
    numbers = len(str(max(t.shape[-2] - 1, 0))) * CHAR + 6 if rank >= 2 else 0  # the row numbers' column
    left = PAD + FONT + 4 + numbers
    top = svg.y + 8 + (FONT + 4 if rank >= 3 else 0) + (FONT + 2)
    grid_h = sum(GAP if r is None else height for r in lay.rows.shown)
    grid_w = sum(GAP if c is None else width for c in lay.cols.shown)
    if rank >= 2:  # the row axis, written upwards beside the first panel
        label, mid = f"{t.dims[-2]} ({t.shape[-2]})", top + grid_h / 2
        svg.text(PAD + FONT, mid, label, anchor="middle", extra=f' transform="rotate(-90 {PAD + FONT:g} {mid:g})"')
    x0 = left
    for k, p in enumerate(lay.panels.shown):
        if p is None:
            svg.text(x0 + 4, top + grid_h / 2, "…", size=FONT + 4)
            x0 += 28
            continue
        _panel(svg, t, lay, lay.combos[p], k == 0, (x0, top, width, height))
        x0 += grid_w + 22
    for r, label in lay.rows.labels:  # the blocks of the row axis's outer axis, right of the last panel
        svg.text(x0 - 18, top + _offset(lay.rows.shown, r, height) + FONT, label, size=FONT - 2, cls="block")
    svg.width = max(svg.width, x0 + (max((len(s) for _, s in lay.rows.labels), default=0) * CHAR))
    below = top + grid_h + FONT + 4
    if lay.cols.labels:  # the blocks of the column axis's outer axis, under each panel's columns
        below += FONT + 2
    if rank >= 1:
        svg.text(left, below, f"{t.dims[-1]} ({t.shape[-1]}) →", cls="axis")
    svg.y = below + 4


def _offset(shown: tuple[int | None, ...], position: int, size: float) -> float:
    """Where a position's cell starts along a drawn axis, from the axis's start."""
    at = 0.0
    for p in shown:
        if p == position:
            return at
        at += GAP if p is None else size
    raise ValueError(position)


def _panel(svg: _Svg, t: Tensor, lay: _Layout, panel: tuple[int, ...], first: bool,
           box: tuple[float, float, float, float]) -> None:
    """One 2-d panel at (x0, top) with cells of the given width and height; the first numbers its rows.
    A line marks each group seam; the column blocks are labelled under the panel."""
    x0, top, width, height = box
    rank = len(t.shape)
    if rank >= 3:
        svg.text(x0, top - FONT - 6, ", ".join(f"{d}={i}" for d, i in zip(t.dims, panel)), cls="panel")
    y = top
    for r in lay.rows.shown:
        if r is None:
            svg.text(x0 + 2, y + GAP - 3, "⋮", cls="gap")
            y += GAP
            continue
        if rank >= 2 and first:
            svg.text(x0 - 4, y + height / 2 + 4, str(r), size=FONT - 2, anchor="end")
        x = x0
        for c in lay.cols.shown:
            if c is None:
                svg.text(x + 2, y + height / 2 + 4, "…", cls="gap")
                x += GAP
                continue
            if r == lay.rows.shown[0]:
                svg.text(x + width / 2, top - 3, str(c), size=FONT - 2, anchor="middle")
            ix = _at(panel, r, c, rank)
            svg.parts.append(_cell(lay.looks[ix], t.name, ix, x, y, width, height))
            x += width
        y += height
    right, bottom = x, y
    for c, level in lay.cols.lines:
        x = x0 + _offset(lay.cols.shown, c, width)
        svg.seam(x, top - 1, x, bottom + 1, level)
    for r, level in lay.rows.lines:
        y = top + _offset(lay.rows.shown, r, height)
        svg.seam(x0 - 1, y, right + 1, y, level)
    for c, label in lay.cols.labels:
        svg.text(x0 + _offset(lay.cols.shown, c, width) + 3, bottom + FONT + 1, label, size=FONT - 2, cls="block")


def _cell(c: Cell, name: str, ix: tuple[int, ...], x: float, y: float, w: float, h: float) -> str:
    attrs = "".join(f" {k}={quoteattr(v)}" for k, v in (("data-tensor", name), ("data-index", _csv(ix)),
                                                         *c.attrs))
    stripe = w / len(c.fills)
    rects = "".join(f'<rect x="{x + k * stripe:g}" y="{y:g}" width="{stripe:g}" height="{h:g}" fill="{f}"/>'
                    for k, f in enumerate(c.fills))
    frame = f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="none" stroke="#ffffff" stroke-width="1"/>'
    if c.marked:
        frame = (f'<rect x="{x + 1.5:g}" y="{y + 1.5:g}" width="{w - 3:g}" height="{h - 3:g}" fill="none" '
                 f'stroke="{WRONG}" stroke-width="3"/>')
    line1 = y + (h / 2 + 4 if not c.sub else 13)
    texts = f'<text x="{x + w / 2:g}" y="{line1:g}" font-size="{FONT}" text-anchor="middle">{escape(c.text)}</text>'
    if c.sub:
        texts += (f'<text x="{x + w / 2:g}" y="{y + h - 5:g}" font-size="{FONT - 3}" text-anchor="middle">'
                  f"{escape(c.sub)}</text>")
    faded = ' opacity="0.35"' if c.faded else ""
    return f'<g class="cell"{attrs}{faded}>{rects}{frame}{texts}<title>{escape(c.title)}</title></g>'


def _csv(values: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(v) for v in values)


# --- the picture of an explanation ------------------------------------------------------


def _dims_text(dims: tuple[tuple[str, ...], ...], show: Callable[[str], str], marks: dict[str, str]) -> tuple[str, ...]:
    """Each dim as the pattern writes it: c, (c h), n[idx], 1 for a unit dim."""
    out = []
    for d in dims:
        names = [show(a) + (f"[{marks[a]}]" if a in marks else "") for a in d]
        out.append(names[0] if len(names) == 1 else f"({' '.join(names)})" if names else "1")
    return tuple(out)


def svg(e: Any, show_axis: Callable[[str], str], max_rows: int = MAX_ROWS, max_cols: int = MAX_COLS,
        compare: tuple[tuple[str, Any], ...] = ()) -> str:
    """The picture of an Explanation as an SVG document; show_axis writes an elementary axis's name.
    ``compare``: (name, array) of other code's results on the same arange input, drawn under the result."""

    heading = str(e).splitlines()[0]
    out = _Svg()
    out.line(heading, FONT + 1, cls="heading")
    if e.op == "einsum":
        if compare:
            raise RearrError("to_svg(compare=...) draws other results next to a rearrange, repeat, reduce or "
                             "scatter, not an einsum", code="RA100", hint="drop compare=")
        return _einsum(out, e, heading, max_rows, max_cols)
    plan = e.plan
    n, n_out = math.prod(plan.in_shape), math.prod(plan.out_shape)
    if not n or not n_out:
        out.line(f"nothing to draw: the {'input' if not n else 'result'} has no element")
        return out.done(heading)
    if max(n, n_out) > RUN_LIMIT:
        out.line(f"not drawn: the input has {n:,} and the result {n_out:,} elements (the picture runs rearr on "
                 f"at most {RUN_LIMIT:,}); explain a smaller shape to see where the elements go")
        return out.done(heading)
    r = routes(e)
    in_dims = _dims_text(plan.in_dims, show_axis, {s.axis: s.name for s in plan.gathers})
    out_dims = _dims_text(plan.out_dims, show_axis, {s.axis: s.name for s in plan.scatters})
    length = {name: v for name, v, _ in plan.lengths}
    factors = lambda dims: tuple(tuple((a, length[a], show_axis(a)) for a in d) for d in dims)  # noqa: E731
    bounds = _index_bounds(plan, r.indices)
    reads = _changes(r.reads, plan.in_dims, length, [s.axis for s in plan.gathers])
    writes = _changes(r.count, plan.out_dims, length, [s.axis for s in plan.scatters])
    tensors = [_input(e, r, n, in_dims).replace(factors=factors(plan.in_dims), bounds=_merged(bounds, reads))]
    for u, (name, value) in zip(plan.indices, r.indices):
        tensors.append(_index(name, value, tuple(show_axis(a) for a in u.axes)).replace(
            factors=factors((a,) for a in u.axes), bounds=_merged(bounds)))
    result = _output(e, r, n, out_dims).replace(factors=factors(plan.out_dims), bounds=_merged(bounds, writes))
    tensors.append(result)
    legend = _legend(e, r)
    if compare:
        tensors += [_compared(name, value, r, n, result) for name, value in compare]
        legend += [f"under the result: {', '.join(name for name, _ in compare)}, run on the same input;",
                   "  a red frame: a cell that holds another element than the result; want k: the one it should hold"]
    arrow = f"↓ {e.op}" + (f" ({_reduction(e.reduction)})" if e.reduction else "")
    return _draw(out, heading, tensors, arrow, legend, max_rows, max_cols, arrow_at=len(tensors) - len(compare) - 1)


def _compared(name: str, value: Any, r: Routes, n: int, result: Tensor) -> Tensor:
    """Another computation's result on the same input: each cell the flat position of the element it holds.
    Where its shape is the result's and a result cell holds one element, a cell that holds another is marked."""
    import numpy as np

    from .. import api

    a = np.asarray(api.asnumpy(value))
    if a.dtype.kind not in "iu" or (a.size and (a.min() < 0 or a.max() >= n)):
        raise RearrError(f"to_svg(compare=...): {name!r} holds no flat positions of the input (integers "
                         f"0 to {n - 1})", code="RA100",
                         hint="compute it from the arange input: np.arange(n).reshape(shape), as the picture does")
    same = tuple(a.shape) == tuple(result.shape)
    flat = a.ravel()

    def cell(ix: tuple[int, ...]) -> Cell:
        k = _flat(ix, tuple(a.shape))
        v = int(flat[k])
        s = r.sources(k) if same else None
        wrong = s is not None and s.count == 1 and s.listed[0] != v
        where = f"{name}[{', '.join(map(str, ix))}]"
        return Cell(str(v), f"want {s.listed[0]}" if wrong else "", (colour(v, n),), (("data-sources", str(v)),),
                    f"{where}: flat position {v}" + (f", where the result holds {s.listed[0]}" if wrong else ""),
                    marked=wrong)

    return Tensor(name, tuple(a.shape), _numbered(tuple(a.shape)), cell)


def _index_bounds(plan: Any, indices: tuple[tuple[str, Any], ...]) -> dict[str, set[int]]:
    """For each axis of an index tensor, the positions along it where the index's value changes."""
    out: dict[str, set[int]] = {}
    values = dict(indices)
    for u in plan.indices:
        for axis, positions in _changes(values[u.name], tuple((a,) for a in u.axes),
                                        dict(zip(u.axes, u.shape)), list(u.axes)).items():
            out.setdefault(axis, set()).update(positions)
    return out


def _changes(values: Any, dims: tuple[tuple[str, ...], ...], length: dict[str, int],
             axes: list[str]) -> dict[str, set[int]]:
    """For each of the named elementary axes, the positions p along it where ``values`` (laid out over the
    dims' elementary axes, row-major) differ anywhere from those at p - 1."""
    import numpy as np

    names = [a for d in dims for a in d]
    if values is None or math.prod(length[a] for a in names) != np.size(values):
        return {}
    grid = np.asarray(values).reshape([length[a] for a in names])
    out = {}
    for axis in dict.fromkeys(axes):
        j = names.index(axis)
        if grid.shape[j] > 1:
            changed = np.moveaxis(np.diff(grid, axis=j) != 0, j, 0).reshape(grid.shape[j] - 1, -1).any(axis=1)
            out[axis] = set((np.flatnonzero(changed) + 1).tolist())
    return out


def _merged(*parts: dict[str, set[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    union: dict[str, set[int]] = {}
    for part in parts:
        for axis, positions in part.items():
            union.setdefault(axis, set()).update(positions)
    return tuple((axis, tuple(sorted(positions))) for axis, positions in union.items())


def _reduction(reduction: object) -> str:
    return reduction if isinstance(reduction, str) else getattr(reduction, "__name__", "a callable")


def _input(e: Any, r: Routes, n: int, dims: tuple[str, ...]) -> Tensor:
    """The input: each cell its flat position; reduce colours it by the result cell it goes into."""
    import numpy as np

    shape = e.plan.in_shape
    reads = r.reads
    target = None
    if e.op == "reduce":  # each element's result cell
        target = np.zeros(n, dtype=np.int64)
        if r.rows is None:
            target[r.first] = np.arange(r.size)
        else:
            target[r.rows[r.row_of].ravel()] = np.repeat(np.arange(r.size), r.rows.shape[1])

    def cell(ix: tuple[int, ...]) -> Cell:
        flat = _flat(ix, shape)
        k = None if reads is None else int(reads[flat])
        fill = colour(flat, n) if target is None else colour(int(target[flat]), r.size)
        title = f"{e.input_name}[{', '.join(map(str, ix))}]: flat position {flat}" + (
            f", read {k} times" if k is not None and k != 1 else "")
        return Cell(str(flat), f"×{k}" if k is not None and k > 1 else "", (fill,), (("data-sources", str(flat)),),
                    title, k == 0)

    return Tensor(e.input_name, shape, dims, cell)


def _index(name: str, value: Any, axes: tuple[str, ...]) -> Tensor:
    shape = tuple(value.shape)
    flat = value.ravel().tolist()

    def cell(ix: tuple[int, ...]) -> Cell:
        v = int(flat[_flat(ix, shape)])
        return Cell(str(v), "", (INDEX,), (("data-value", str(v)),), f"{name}[{', '.join(map(str, ix))}] = {v}")

    return Tensor(name, shape, axes if len(axes) == len(shape) else _numbered(shape), cell)


def _numbered(shape: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(f"dim {k}" for k in range(len(shape)))


def _output(e: Any, r: Routes, n: int, dims: tuple[str, ...]) -> Tensor:
    shape = r.out_shape
    by_target = e.op == "reduce"
    how = _reduction(e.reduction) if e.reduction is not None else ""

    def cell(ix: tuple[int, ...]) -> Cell:
        flat = _flat(ix, shape)
        s = r.sources(flat)
        fills = (colour(flat, r.size),) if by_target else tuple(colour(v, n) for v in s.listed) or (EMPTY,)
        if len(fills) > LISTED:
            fills = (fills[0], fills[-1])
        text = ",".join(map(str, s.listed)) if s.count <= LISTED else f"{s.listed[0]}…{s.listed[-1]}"
        sub = f"{how} of {s.count}" if s.count > 1 and how else ""
        attrs: tuple[tuple[str, str], ...] = (("data-count", str(s.count)),)
        if s.complete and s.count <= ATTRIBUTE_LIMIT:
            attrs += (("data-sources", _csv(s.listed)),)
        else:
            attrs += (("data-min", str(s.listed[0])), ("data-max", str(s.listed[-1])))
        where = f"out[{', '.join(map(str, ix))}]"
        if s.count == 0:
            return Cell("·", "", fills, attrs, f"{where}: no element is written here (fill)")
        listed = ", ".join(map(str, s.listed[:20])) + (", …" if len(s.listed) > 20 or not s.complete else "")
        return Cell(text, sub, fills, attrs, f"{where} <- {e.input_name} at flat position {listed}")

    return Tensor("out", shape, dims, cell)


def _legend(e: Any, r: Routes) -> list[str]:
    x = e.input_name
    lines = [f"each cell: the flat (row-major) position in {x} of the element it holds; "
             + ("colour: the result cell it goes into" if e.op == "reduce" else "the same colour in input and result")]
    if r.reads is not None and (r.reads != 1).any():
        lines.append(f"in {x}: ×k: read k times; faded: not read")
    if r.size and r.count.max() > 1:
        lines.append(f"a cell with several sources combines them by {_reduction(e.reduction)}; "
                     f"it names up to {LISTED}, else the first…last")
    if e.op == "scatter":
        lines.append("·: no element is written there, it holds the fill (0 by default)")
    lines.append(f"formula: {e.formula}")
    if r.example:
        names = ", ".join(n for n, _ in r.indices)
        lines.append(f"{names}: example values (explain was given shapes only); pass the index itself, "
                     f"e.g. {r.indices[0][0]}=tensor, to draw yours")
    if r.error:
        lines.append(f"the call itself raises for these indices: {r.error}")
    return lines


def _einsum(out: _Svg, e: Any, heading: str, max_rows: int, max_cols: int) -> str:
    """einsum: the operands and the result's shapes, each cell its own flat position; the formula says the rest."""
    sides = e.pattern.split("->")
    dims = [_tokens(text) for text in sides[0].split(",")] + [_tokens(sides[-1])]
    shapes = [shape for _, shape in e.operands] + [e.out_shape]
    names = [name for name, _ in e.operands] + ["out"]
    tensors = [_plain(name, tuple(shape), d) for name, shape, d in zip(names, shapes, dims)]
    legend = ["each cell: its own flat (row-major) position; each result element sums products of "
              "the operands' elements:", f"formula: {e.formula}"]
    return _draw(out, heading, tensors, "↓ einsum", legend, max_rows, max_cols)


def _draw(out: _Svg, heading: str, tensors: list[Tensor], arrow: str, legend: list[str], max_rows: int,
          max_cols: int, arrow_at: int | None = None) -> str:
    """The tensors top to bottom, the arrow before the result (the last, or tensors[arrow_at]), then the
    legend and what was elided."""
    captions = list(legend)
    for k, t in enumerate(tensors):
        if k == (len(tensors) - 1 if arrow_at is None else arrow_at):
            out.y += 6
            out.line(arrow, cls="arrow")
        lay = _layout(t, max_rows, max_cols)
        draw_tensor(out, t, lay)
        out.y += 6
        captions += elided(t, lay)
    for line in captions:
        out.line(line, FONT - 1, cls="caption")
    return out.done(heading)


def _tokens(text: str) -> tuple[str, ...]:
    """The dims of one side of an einsum pattern as written: a, (a b), ..."""
    return tuple(re.findall(r"\([^()]*\)|[^\s()]+", text))


def _plain(name: str, shape: tuple[int, ...], dims: tuple[str, ...]) -> Tensor:
    """A tensor whose cells show their own flat position, in one neutral colour."""

    def cell(ix: tuple[int, ...]) -> Cell:
        flat = _flat(ix, shape)
        return Cell(str(flat), "", (INDEX,), (), f"{name}[{', '.join(map(str, ix))}]")

    return Tensor(name, shape, dims if len(dims) == len(shape) else _numbered(shape), cell)


def _flat(ix: tuple[int, ...], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, n in zip(ix, shape):
        flat = flat * n + i
    return flat
