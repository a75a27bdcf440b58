"""Explanation.to_svg(): the input, its index tensors and the result drawn as grids of labelled elements.

The picture is computed, not inferred: it runs the real rearr (on numpy) on
``np.arange(n).reshape(shape)``, so each result cell holds the flat position of
the input element it came from, and the cell is labelled and coloured by that
position. Reduce and scatter combine several elements in one cell; the picture
finds them by running rearr again with other reductions (a callable that
collects each group for reduce; min, max, sum and a count for scatter), so that
it names the sources of every cell with up to three and the first and last of
larger ones.

SVG is text: this module needs only the standard library, and numpy when it
runs (numpy is a dependency of rearr).
"""

from __future__ import annotations

import colorsys
import itertools
import math
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from .._record import Record

MAX_ROWS = 12  # a panel shows every row up to this many, else its first MAX_ROWS - 3 and last 2
MAX_COLS = 16
MAX_PANELS = 6  # rank > 2: panels for the leading axes, at most this many (first ones and the last)
RUN_LIMIT = 1 << 22  # the picture runs rearr on inputs and results of at most this many elements
LISTED = 3  # a cell names all its sources up to this many, else the first and the last

FONT = 11
CHAR = 6.7  # the width of one monospace character at FONT
ROW = 22  # a cell's height; cells with a second line are taller
ROW2 = 32
GAP = 14  # the gap that stands for elided rows or columns
PAD = 16
BACKGROUND = "#ffffff"
INK = "#222222"
EMPTY = "#f1f1f1"  # a result cell that no element writes (scatter's fill)
INDEX = "#e4e4e4"  # the cells of an index tensor


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


class Routes(Record):
    """Where each element goes: the result's shape and the sources of each of its cells, row-major."""

    out_shape: tuple[int, ...]
    cells: tuple[Sources, ...]
    indices: tuple[tuple[str, Any], ...]  # the index tensors it ran with (numpy)
    example: bool  # True when the indices are explain's examples, not the caller's
    error: str | None = None  # the caller's reduction refused these indices (set with duplicates)


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
    n = math.prod(plan.in_shape)
    x = np.arange(n, dtype=np.int64).reshape(plan.in_shape)
    kwargs = dict(e.lengths, **indices)
    error = None
    if e.op == "reduce":
        cells = _reduce_routes(x, e.pattern, kwargs)
    elif e.op == "scatter":
        cells = _scatter_routes(x, e.pattern, kwargs)
        try:  # the caller's own reduction, once: 'set' refuses duplicate targets
            api.scatter(x.astype(np.float64), e.pattern, e.reduction, **kwargs)
        except Exception as err:  # a RearrError, or what a callable raises
            error = f"{type(err).__name__}: {getattr(err, 'message', err)}"
    else:
        out = np.asarray(getattr(api, e.op)(x, e.pattern, **kwargs))
        cells = tuple(Sources((int(s),), 1) for s in out.ravel())
    return Routes(tuple(plan.out_shape), cells, tuple(indices.items()), example and bool(indices), error)


def _reduce_routes(x: Any, pattern: str, kwargs: dict) -> tuple[Sources, ...]:
    """A reduce with a callable that records each group of inputs and keeps its smallest position."""
    import numpy as np

    from .. import api

    groups: dict[int, tuple[int, ...]] = {}

    def collect(y: Any, axes: tuple[int, ...]) -> Any:
        y = np.asarray(y)
        axes = tuple(axes)
        width = math.prod(y.shape[a] for a in axes)
        rows = np.moveaxis(y, axes, tuple(range(y.ndim - len(axes), y.ndim))).reshape(-1, width)
        for row in rows:
            groups[int(row.min())] = tuple(sorted(int(v) for v in row))
        return y.min(axis=axes)

    out = np.asarray(api.reduce(x, pattern, collect, **kwargs))
    return tuple(Sources(groups.get(int(v), (int(v),)), len(groups.get(int(v), (v,)))) for v in out.ravel())


def _scatter_routes(x: Any, pattern: str, kwargs: dict) -> tuple[Sources, ...]:
    """Each target's sources from four scatters: the count, the smallest, the largest and the sum."""
    import numpy as np

    from .. import api

    count, low, high, total = (np.asarray(api.scatter(v, pattern, r, **kwargs)).ravel().tolist() for v, r in
                               ((np.ones_like(x), "sum"), (x, "min"), (x, "max"), (x, "sum")))
    cells = []
    for c, lo, hi, s in zip(count, low, high, total):
        c, lo, hi, s = int(c), int(lo), int(hi), int(s)
        listed = {0: (), 1: (lo,), 2: (lo, hi), 3: (lo, s - lo - hi, hi)}.get(c, (lo, hi))
        cells.append(Sources(listed, c, c <= LISTED))
    return tuple(cells)


# --- one drawn cell and one tensor -------------------------------------------------


class Cell(Record):
    text: str
    sub: str  # a second, smaller line ('' for none)
    fills: tuple[str, ...]  # one colour, or stripes
    attrs: tuple[tuple[str, str], ...]  # the machine-readable data-* attributes
    title: str  # the tooltip
    faded: bool = False


class Tensor(Record):
    """A tensor to draw: its name, shape, the label of each dim, and each cell's look by index."""

    name: str
    shape: tuple[int, ...]
    dims: tuple[str, ...]
    cell: Callable[[tuple[int, ...]], Cell]


def _shown(n: int, limit: int) -> list[int | None]:
    """The positions drawn along an axis of length n; None is the gap of the elided ones."""
    if n <= limit:
        return list(range(n))
    head = limit - 3
    return [*range(head), None, n - 2, n - 1]


def elided(t: Tensor, max_rows: int, max_cols: int) -> list[str]:
    """What the drawing of t leaves out, as sentences for the caption."""
    rows, cols, panels = _grid(t.shape)
    out = []
    for what, n, limit in (("panels", panels, MAX_PANELS), ("rows", rows, max_rows), ("columns", cols, max_cols)):
        shown = [p for p in _shown(n, limit) if p is not None]
        if len(shown) < n:
            out.append(f"{len(shown)} of {n} {what} ({_ranges(shown)})")
    return [f"{t.name}: showing {', '.join(out)}"] if out else []


def _ranges(shown: list[int]) -> str:
    head = [p for p in shown if p < shown[-1] - 1] or shown[:1]
    return f"{head[0]}-{head[-1]} and {shown[-2]}-{shown[-1]}"


def _grid(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(rows, columns, panels) of a tensor drawn as 2-d panels over its leading axes."""
    if len(shape) <= 1:
        return 1, (shape[0] if shape else 1), 1
    return shape[-2], shape[-1], math.prod(shape[:-2])


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

    def done(self, heading: str) -> str:
        width, height = math.ceil(self.width + PAD), math.ceil(self.y + PAD)
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
                f'fill="{INK}">')
        return "\n".join([head, f"<title>{escape(heading)}</title>",
                          f'<rect width="{width}" height="{height}" fill="{BACKGROUND}"/>', *self.parts, "</svg>"])


def draw_tensor(svg: _Svg, t: Tensor, max_rows: int, max_cols: int) -> None:
    """One tensor: a title, then a row of 2-d panels (one per position of the leading axes)."""
    svg.line(f"{t.name}  shape {t.shape}" + (f"  axes: {'  '.join(t.dims)}" if t.dims else ""), cls="tensor")
    if 0 in t.shape:
        svg.line("  (no element: an axis has length 0)")
        return
    rank = len(t.shape)
    rows = _shown(t.shape[-2], max_rows) if rank >= 2 else [0]
    cols = _shown(t.shape[-1], max_cols) if rank >= 1 else [0]
    lead = t.shape[:-2] if rank >= 2 else ()
    combos = list(itertools.product(*(range(n) for n in lead)))
    panels: list[tuple[int, ...] | None] = [combos[p] if p is not None else None
                                            for p in _shown(len(combos), MAX_PANELS)]
    shown = [(*lead_ix, *([r] if rank >= 2 else []), *([c] if rank >= 1 else []))
             for lead_ix in (p for p in panels if p is not None) for r in rows if r is not None
             for c in cols if c is not None]
    looks = {ix: t.cell(ix) for ix in shown}
    width = max(28.0, max(max(len(c.text), len(c.sub) * 0.8) for c in looks.values()) * CHAR + 10)
    height = ROW2 if any(c.sub for c in looks.values()) else ROW
    number = len(str(max(t.shape[-2] - 1, 0))) * CHAR + 6 if rank >= 2 else 0  # the row numbers' column
    left = PAD + (FONT + 4 if rank >= 2 else 0) + number
    top = svg.y + 8 + (FONT + 4 if rank >= 3 else 0) + (FONT + 2)
    grid_h = sum(GAP if r is None else height for r in rows)
    grid_w = sum(GAP if c is None else width for c in cols)
    if rank >= 2:  # the row axis, written upwards beside the first panel
        label, mid = f"{t.dims[-2]} ({t.shape[-2]})", top + grid_h / 2
        svg.text(PAD + FONT, mid, label, anchor="middle", extra=f' transform="rotate(-90 {PAD + FONT:g} {mid:g})"')
    x0 = left
    for p in panels:
        if p is None:
            svg.text(x0 + 4, top + grid_h / 2, "…", size=FONT + 4)
            x0 += 28
            continue
        _panel(svg, t, p, rows, cols, looks, x0, top, width, height, number)
        x0 += grid_w + 22
    svg.width = max(svg.width, x0)
    if rank >= 1:
        svg.text(left, top + grid_h + FONT + 4, f"{t.dims[-1]} ({t.shape[-1]}) →", cls="axis")
    svg.y = top + grid_h + FONT + 8


def _panel(svg: _Svg, t: Tensor, lead: tuple[int, ...], rows: list, cols: list, looks: dict, x0: float,
           top: float, width: float, height: float, number: float) -> None:
    rank = len(t.shape)
    if rank >= 3:
        title = ", ".join(f"{d}={i}" for d, i in zip(t.dims, lead))
        svg.text(x0, top - FONT - 6, title, cls="panel")
    y = top
    for r in rows:
        if r is None:
            svg.text(x0 + 2, y + GAP - 3, "⋮", cls="gap")
            y += GAP
            continue
        if rank >= 2 and lead == next(iter(looks))[:len(lead)]:
            svg.text(x0 - 4, y + height / 2 + 4, str(r), size=FONT - 2, anchor="end")
        x = x0
        for c in cols:
            if c is None:
                svg.text(x + 2, y + height / 2 + 4, "…", cls="gap")
                x += GAP
                continue
            if r == rows[0]:
                svg.text(x + width / 2, top - 3, str(c), size=FONT - 2, anchor="middle")
            ix = (*lead, *([r] if rank >= 2 else []), *([c] if rank >= 1 else []))
            svg.parts.append(_cell(looks[ix], t.name, ix, x, y, width, height))
            x += width
        y += height


def _cell(c: Cell, name: str, ix: tuple[int, ...], x: float, y: float, w: float, h: float) -> str:
    attrs = "".join(f" {k}={quoteattr(v)}" for k, v in (("data-tensor", name), ("data-index", _csv(ix)),
                                                         *c.attrs))
    stripe = w / len(c.fills)
    rects = "".join(f'<rect x="{x + k * stripe:g}" y="{y:g}" width="{stripe:g}" height="{h:g}" fill="{f}"/>'
                    for k, f in enumerate(c.fills))
    frame = f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="none" stroke="#ffffff" stroke-width="1"/>'
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


def svg(e: Any, show_axis: Callable[[str], str], max_rows: int = MAX_ROWS, max_cols: int = MAX_COLS) -> str:
    """The picture of an Explanation as an SVG document; show_axis writes an elementary axis's name."""

    heading = str(e).splitlines()[0]
    out = _Svg()
    out.line(heading, FONT + 1, cls="heading")
    if e.op == "einsum":
        return _einsum(out, e, heading, max_rows, max_cols)
    plan = e.plan
    n, n_out = math.prod(plan.in_shape), math.prod(plan.out_shape)
    if max(n, n_out) > RUN_LIMIT:
        out.line(f"not drawn: the input has {n:,} and the result {n_out:,} elements (the picture runs rearr on "
                 f"at most {RUN_LIMIT:,}); explain a smaller shape to see where the elements go")
        return out.done(heading)
    r = routes(e)
    in_dims = _dims_text(plan.in_dims, show_axis, {s.axis: s.name for s in plan.gathers})
    out_dims = _dims_text(plan.out_dims, show_axis, {s.axis: s.name for s in plan.scatters})
    tensors = [_input(e, r, n, in_dims)]
    tensors += [_index(name, value) for name, value in r.indices]
    tensors.append(_output(e, r, n, out_dims))
    captions: list[str] = []
    for k, t in enumerate(tensors):
        if k == len(tensors) - 1:
            out.y += 6
            out.line(f"↓ {e.op}" + (f" ({_reduction(e.reduction)})" if e.reduction else ""), cls="arrow")
        draw_tensor(out, t, max_rows, max_cols)
        out.y += 6
        captions += elided(t, max_rows, max_cols)
    for line in _legend(e, r) + captions:
        out.line(line, FONT - 1, cls="caption")
    return out.done(heading)


def _reduction(reduction: object) -> str:
    return reduction if isinstance(reduction, str) else getattr(reduction, "__name__", "a callable")


def _input(e: Any, r: Routes, n: int, dims: tuple[str, ...]) -> Tensor:
    """The input: each cell its flat position; reduce colours it by the result cell it goes into."""
    shape = e.plan.in_shape
    reads = [0] * n
    target = [0] * n
    for t, cell in enumerate(r.cells):
        for s in cell.listed if cell.complete else ():
            reads[s] += 1
            target[s] = t
    by_target = e.op == "reduce"
    counted = e.op != "scatter" or all(c.complete for c in r.cells)

    def cell(ix: tuple[int, ...]) -> Cell:
        flat = _flat(ix, shape)
        k = reads[flat]
        sub = f"×{k}" if counted and k > 1 else ""
        fill = colour(target[flat], len(r.cells)) if by_target else colour(flat, n)
        title = f"{e.input_name}[{', '.join(map(str, ix))}]: flat position {flat}" + (
            f", read {k} times" if counted and k != 1 else "")
        return Cell(str(flat), sub, (fill,), (("data-sources", str(flat)),), title, counted and k == 0)

    return Tensor(e.input_name, shape, dims, cell)


def _index(name: str, value: Any) -> Tensor:
    shape = tuple(value.shape)
    flat = value.ravel().tolist()

    def cell(ix: tuple[int, ...]) -> Cell:
        v = int(flat[_flat(ix, shape)])
        return Cell(str(v), "", (INDEX,), (("data-value", str(v)),), f"{name}[{', '.join(map(str, ix))}] = {v}")

    return Tensor(name, shape, tuple(f"dim {k}" for k in range(len(shape))), cell)


def _output(e: Any, r: Routes, n: int, dims: tuple[str, ...]) -> Tensor:
    shape = r.out_shape
    by_target = e.op == "reduce"
    how = _reduction(e.reduction) if e.reduction is not None else ""

    def cell(ix: tuple[int, ...]) -> Cell:
        flat = _flat(ix, shape)
        s = r.cells[flat]
        fills = (colour(flat, len(r.cells)),) if by_target else tuple(colour(v, n) for v in s.listed) or (EMPTY,)
        if len(fills) > LISTED:
            fills = (fills[0], fills[-1])
        text = ",".join(map(str, s.listed)) if s.count <= LISTED else f"{s.listed[0]}…{s.listed[-1]}"
        sub = f"{how} of {s.count}" if s.count > 1 and how else ""
        attrs: tuple[tuple[str, str], ...] = (("data-count", str(s.count)),)
        if s.complete:
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
    if e.op in ("rearrange", "repeat") and any(c.listed for c in r.cells):
        lines.append("×k: read k times; faded: not read")
    if any(c.count > 1 for c in r.cells):
        lines.append(f"a cell with several sources combines them by {_reduction(e.reduction)}; "
                     f"it names up to {LISTED}, else the first…last")
    if e.op == "scatter":
        lines.append("·: no element is written there, it holds the fill (0 by default)")
    if r.example:
        names = ", ".join(n for n, _ in r.indices)
        lines.append(f"{names}: example values (explain was given shapes only); pass the index itself, "
                     f"e.g. {r.indices[0][0]}=tensor, to draw yours")
    if r.error:
        lines.append(f"the call itself raises for these indices: {r.error}")
    return lines


def _einsum(out: _Svg, e: Any, heading: str, max_rows: int, max_cols: int) -> str:
    """einsum: the operands and the result's shapes, each cell its own flat position; the formula says the rest."""
    tensors = [_plain(name, shape) for name, shape in e.operands] + [_plain("out", e.out_shape)]
    captions = []
    for k, t in enumerate(tensors):
        if k == len(tensors) - 1:
            out.line("↓ einsum", cls="arrow")
        draw_tensor(out, t, max_rows, max_cols)
        out.y += 6
        captions += elided(t, max_rows, max_cols)
    for line in [f"each cell: its own flat position; {e.formula}"] + captions:
        out.line(line, FONT - 1, cls="caption")
    return out.done(heading)


def _plain(name: str, shape: tuple[int, ...]) -> Tensor:
    n = math.prod(shape)

    def cell(ix: tuple[int, ...]) -> Cell:
        flat = _flat(ix, shape)
        return Cell(str(flat), "", (colour(flat, n),), (), f"{name}[{', '.join(map(str, ix))}]")

    return Tensor(name, tuple(shape), tuple(f"dim {k}" for k in range(len(shape))), cell)


def _flat(ix: tuple[int, ...], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, n in zip(ix, shape):
        flat = flat * n + i
    return flat
