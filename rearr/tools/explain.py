"""explain(pattern, shape): the plan as the code one would write by hand.

The report is built from the planner's Plan and nothing else: the shapes and
strides between the steps are the plan's, and the code lines come from the
backend's CODE table, whose template for each step sits next to the function
that runs it (rearr/backends/torch.py, numpy.py, dask.py, array_api.py, jax.py), so
that pasting them gives rearr's result (tests/tools/test_explain.py runs them). This
module keeps the prose: the axes, why each step is a view or a copy, the index
formula. Neither importing it nor explaining imports torch, numpy or dask (the
backend modules bind their framework late); numpy is loaded only for
``show=True`` and the picture (``to_svg()``, rearr/tools/picture.py), which run
the real rearr on an example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import backends
from .._record import Record
from ..backends._code import CodeNames
from ..errors import RearrError, nearest
from ..planning import planner
from ..planning.lengths import index_shapes
from ..planning.plan import (
    AdvancedIndex,
    Expand,
    GatherAlong,
    Permute,
    Plan,
    Reduce,
    Reshape,
    ScatterAlong,
    ScatterRows,
    Step,
    TakeRows,
)
from ..rules import recipe

OPS = ("rearrange", "reduce", "repeat", "scatter", "einsum")
BACKENDS = ("torch", "numpy", "dask", "array_api", "jax")  # the backends that ship explain templates (a CODE table)
SHOW_LIMIT = 64  # --show prints arrays of at most this many elements

Names = tuple[tuple[str, ...], ...]  # the elementary axes of each dimension


class Explanation(Record):
    """What a pattern lowers to for one shape; ``str()`` is the report.

    ``code`` holds the backend lines: run them with ``input_name`` bound to the
    input (and each index bound to its tensor) and ``input_name`` holds the result.
    Two explanations are equal when their reports' facts are (``layout``,
    ``plan``, ``lengths`` and ``index_values`` are left out of ``==`` and the repr).
    ``to_svg()`` draws it; in Jupyter it shows as one HTML output that holds the report and that picture.
    """

    _uncompared = ("layout", "plan", "lengths", "index_values")

    pattern: str
    op: str
    reduction: object
    backend: str
    shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    axes: tuple[tuple[str, int, str], ...]  # (shown name, length, where the length came from)
    indices: tuple[str, ...]  # one line per index tensor
    input_name: str
    code: tuple[str, ...]
    is_view: bool
    copies: int
    formula: str
    notes: tuple[str, ...] = ()
    layout: Any = None  # show=True: the numpy result on arange input
    show_note: str | None = None
    plan: Any = None  # a Plan; einsum: rearr.planning.einsum's EinsumPlan
    operands: tuple[tuple[str, tuple[int, ...]], ...] = ()  # einsum: each operand's name and shape
    lengths: tuple[tuple[str, Any], ...] = ()  # the axis-length keywords of the call
    index_values: tuple[tuple[str, Any], ...] = ()  # the index tensors given in place of their shapes

    def __str__(self) -> str:
        what = f"{self.op} {self.pattern!r}" + (f", {_reduction_name(self.reduction)}" if self.reduction else "")
        given = ", ".join(f"{name} {shape}" for name, shape in self.operands) or f"{self.input_name} {self.shape}"
        lines = [f"{what}: {given} -> {self.out_shape}", "", "axes:"]
        width = max((len(name) for name, _, _ in self.axes), default=0)
        lines += [f"  {name:<{width}}  {length:>4}  {source}" for name, length, source in self.axes]
        if self.indices:
            lines += ["", "indices:"] + [f"  {line}" for line in self.indices]
        inputs = ", ".join(name for name, _ in self.operands[1:])
        role = f"{self.input_name}, {inputs} are the operands, then {self.input_name} is" if inputs \
            else f"{self.input_name} is the input, then"
        lines += ["", f"{self.backend} code ({role} the result):"]
        lines += [f"  {line}" for line in self.code]
        if self.is_view:
            lines += ["", f"result: a view of {self.input_name} (no copy)"]
        else:
            lines += ["", f"result: a new tensor ({self.copies} cop{'y' if self.copies == 1 else 'ies'})"]
        lines.append(f"formula: {self.formula}")
        lines += [f"note: {note}" for note in self.notes]
        if self.show_note:
            lines += ["", self.show_note]
        if self.layout is not None:
            lines += [f"  {row}".rstrip() for row in str(self.layout).splitlines()]
        return "\n".join(lines)

    def to_svg(self, max_rows: int | None = None, max_cols: int | None = None,
               compare: dict[str, Any] | None = None) -> str:
        """The picture: the input, its index tensors and the result as grids of labelled elements.

        rearr runs on ``arange`` input (with the index tensors passed to explain, or
        example ones), so each result cell shows the flat position of the element it
        holds, in that element's colour; gathers and scatters show which elements
        each cell reads or combines. Axes longer than ``max_rows`` / ``max_cols`` are
        elided (by default picture.MAX_ROWS and MAX_COLS), keeping every group seam and
        index boundary, and the caption says what it left out. ``compare``: other code's
        results on the same input, ``np.arange(n).reshape(shape)`` (name -> array), drawn
        under the result, each cell that holds another element than the result's in a red frame.
        """
        from . import picture  # it imports xml.sax.saxutils, which imports urllib: only when drawing

        return picture.svg(self, _show_axis, max_rows or picture.MAX_ROWS, max_cols or picture.MAX_COLS,
                           tuple((compare or {}).items()))

    # A notebook shows the report and the picture as one HTML output, and keeps nothing else but the
    # plain-text report: an image/svg+xml output as well would store the same picture twice.
    def _repr_html_(self) -> str:
        from xml.sax.saxutils import escape

        try:
            drawn = self.to_svg()
        except RearrError as e:  # the caller's index tensor cannot run: say so under the report
            drawn = f"<p>not drawn: {escape(str(e))}</p>"
        return f"<div><pre>{escape(str(self))}</pre>\n{drawn}</div>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def explain(
    pattern: str,
    *shapes: Sequence[int],
    op: str = "rearrange",
    reduction: object = None,
    backend: str = "torch",
    show: bool = False,
    requires_grad: bool = False,
    **lengths: Any,
) -> Explanation:
    """Explain ``op(x, pattern, ...)`` for an input of the given shape; ``op="einsum"`` takes one
    shape per operand: ``explain("i j, j k -> i k", (2, 3), (3, 4), op="einsum")``.

    Keywords are axis lengths (``h=4``), or, for a name that is an index of the
    pattern, that index's shape (``idx=(2, 4)``; an int n means ``(n,)``) or the
    index tensor itself (an array: its shape is used, and ``to_svg()`` draws its
    values). An index whose shape is not given gets the shape of its axes when
    their lengths are known.

    ``requires_grad=True`` (torch): the code that runs when the input records a
    backward, where it differs (a scatter's mean, max, min and prod).
    """
    try:
        return _explain(pattern, shapes, op, reduction, backend, show, lengths, requires_grad)
    except RearrError as e:
        shape = tuple(shapes[0]) if len(shapes) == 1 and isinstance(shapes[0], Sequence) else None
        raise e.with_context(pattern=pattern if isinstance(pattern, str) else None, shape=shape, op=op) from None


def _explain(pattern, shapes, op, reduction, backend, show, kwargs, requires_grad=False) -> Explanation:
    if op not in OPS:
        guess = nearest(str(op), OPS)
        raise RearrError(f"explain covers {', '.join(OPS)}, not {op!r}", code="RA100",
                         hint=f"use op={guess!r}" if guess else "explain one of those operations")
    templates = backends.code_templates(backend)  # the RearrError for an unknown backend, or one without them
    if requires_grad and backend != "torch":
        raise RearrError(f"explain's requires_grad= is torch's: {backend} code is the same with or without it",
                         code="RA100", hint="drop requires_grad=, or pass backend='torch'")
    if op == "einsum":
        if reduction is not None or show:
            raise RearrError("explain's einsum takes neither reduction= nor show=", code="RA100",
                             hint="drop reduction= and show=")
        return _explain_einsum(pattern, shapes, backend, templates, kwargs)
    if len(shapes) != 1:
        raise RearrError(f"explain takes one input shape, {len(shapes)} given", code="RA304",
                         hint="pass the input's shape once, e.g. explain('c b h -> b (c h)', (2, 5, 32))")
    shape = _as_shape(shapes[0], "the input shape")
    if not isinstance(pattern, str):
        recipe.parse(pattern)  # raises the library's own error for a pattern that is not a string
    r = recipe.analyze(pattern, op, reduction, tuple(sorted(kwargs)))
    lengths = tuple((n, v) for n, v in kwargs.items() if n not in r.index_names)
    tensors = tuple((n, v) for n, v in kwargs.items() if n in r.index_names and _is_tensor(v))
    given = {n: _as_shape(tuple(v.shape) if _is_tensor(v) else v, f"the shape of index {n!r}")
             for n, v in kwargs.items() if n in r.index_names}
    index_shapes = _index_shapes(r, shape, lengths, given)
    plan = planner.plan(r, shape, lengths, tuple(sorted(index_shapes.items())),
                        results=backends.backend_named(backend).RESULTS)

    used = {n for n, _, _ in plan.lengths} | set(r.index_names) | {_show_axis(n) for n, _, _ in plan.lengths}
    x, out = _fresh("x", used), _fresh("out", used)
    coder = _Code(plan, templates, x, used | {x}, bool(requires_grad))
    notes = []
    if plan.indices:
        dtype = {"array_api": "the namespace's default integer dtype",
                 "jax": "int32 (int64 with jax_enable_x64)"}.get(backend, "int64")
        notes.append(f"rearr first converts each index to {dtype}, checks -n <= i < n and counts negative "
                     "values from the end (check_bounds=False skips this)")
    if backend == "array_api":
        notes.append(f"xp is {x}'s own namespace: xp = array_api_compat.array_namespace({x})")
    if backend == "jax":
        notes.append("jnp is jax.numpy")
    if callable(reduction):
        notes.append(f"{coder.names.reduction}(x, axes) in the code is the callable you passed as reduction")
    if op == "scatter":
        notes.append("positions that no index writes hold fill (0 here; scatter's fill= changes it)")
    if requires_grad:
        notes.append(f"requires_grad=True: the code that runs when {x} records a backward")
    layout, show_note = _show(plan, r, lengths, reduction, tensors) if show else (None, None)
    return Explanation(
        pattern, op, reduction, backend, shape, plan.out_shape, _axes(plan), _index_lines(plan), x, coder.lines(),
        plan.is_view, sum(not s.view for s in plan.steps), _formula(plan, x, out, set(used)), tuple(notes),
        layout, show_note, plan, lengths=lengths, index_values=tensors,
    )


def _explain_einsum(pattern: str, shapes: tuple, backend: str, templates: dict, lengths: dict) -> Explanation:
    """einsum(x, y, ..., pattern) for operands of the given shapes: the einsum plan, in the backend's code."""
    from ..planning import einsum as planner_einsum  # as api: only einsum needs it

    shapes = tuple(_as_shape(s, f"the shape of operand {k}") for k, s in enumerate(shapes))
    if not isinstance(pattern, str):
        recipe.parse(pattern)
    r = recipe.analyze(pattern, "einsum", None, tuple(sorted(lengths)))
    count = recipe.einsum_operand_count(r, len(shapes))
    if count is not None:
        raise count
    plan = planner_einsum.plan(pattern, shapes, tuple(lengths.items()))
    sides = list(r.inputs) + [r.outputs[0]]
    used = {n for dims in sides for d in dims for n in d.names}
    operands: list[str] = []
    for k in range(len(shapes)):
        operands.append(_fresh("xyzuvw"[k] if k < 6 else "x", used | set(operands)))
    letters = {planner_einsum._LETTERS[k]: unit for k, unit in enumerate(planner_einsum._units(sides))}
    sizes, out_shape = _einsum_sizes(plan, shapes)
    axes = tuple((" ".join(unit), sizes[letter], f"einsum axis {letter}") for letter, unit in letters.items()
                 if letter in sizes)
    show = {letter: unit[0] if len(unit) == 1 else f"({' '.join(unit)})" for letter, unit in letters.items()}
    ins, out = plan.spec.split("->")
    index = lambda text: ", ".join(show.get(c, "...") for c in text.replace("...", "."))  # noqa: E731
    summed = [show[c] for c in dict.fromkeys(ins.replace(",", "").replace(".", "")) if c not in out]
    product = " * ".join(f"{name}[{index(text)}]" for name, text in zip(operands, ins.split(",")))
    formula = f"{_fresh('out', used)}[{index(out)}] = " + (f"sum over {', '.join(summed)} of " * bool(summed)) + product
    notes = ["the formula indexes each operand as the einsum sees it: after its reshape, before the result's"] \
        if plan.pre or plan.post is not None else []
    if backend == "array_api":
        notes.append(f"xp is {operands[0]}'s own namespace: xp = array_api_compat.array_namespace({operands[0]})")
    return Explanation(
        pattern, "einsum", None, backend, shapes[0], out_shape, axes, (), operands[0],
        tuple(templates["einsum"](plan, tuple(operands))), False, 1, formula, tuple(notes), None, None, plan,
        tuple(zip(operands, shapes)),
    )


def _einsum_sizes(plan: Any, shapes: tuple) -> tuple[dict[str, int], tuple[int, ...]]:
    """Each einsum letter's length, and the result's shape: from the operands as the backend's einsum gets them."""
    from ..planning.einsum import _broadcast

    sizes: dict[str, int] = {}
    ellipses = []
    ins, out = plan.spec.split("->")
    for k, text in enumerate(ins.split(",")):
        shape = plan.pre[k] if plan.pre and plan.pre[k] is not None else shapes[k]
        text = text.replace("...", ".")
        n_ell = len(shape) - len(text) + 1
        pos = 0
        for c in text:
            if c == ".":
                ellipses.append(tuple(shape[pos:pos + n_ell]))
                pos += n_ell
            else:
                sizes[c] = shape[pos]
                pos += 1
    if plan.post is not None:
        return sizes, tuple(plan.post)
    ell = _broadcast(plan.spec, ellipses)
    return sizes, tuple(n for c in out.replace("...", ".") for n in (ell if c == "." else (sizes[c],)))


def _is_tensor(value: object) -> bool:
    """An array of any framework (it has a shape), as opposed to a shape written as a tuple or an int."""
    return hasattr(value, "shape") and not isinstance(value, Sequence | int)


def _as_shape(value: object, what: str) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, Sequence) or isinstance(value, str) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value
    ):
        raise RearrError(f"{what} must be a tuple of non-negative ints, not {value!r}", code="RA304",
                         hint="e.g. (2, 5, 32)")
    return tuple(value)


def _index_shapes(r: recipe.Recipe, shape, lengths, given: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Each index's shape: as given, or from the lengths of its axes (the length solver's)."""
    return index_shapes(r, shape, lengths, given)


def _fresh(base: str, used: set[str], sep: str = "") -> str:
    """base, or base1, base2 ... (with sep between) when that name is taken."""
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}{sep}{k}"
    return name


def _show_axis(name: str) -> str:
    """How an elementary axis is written for people: ...[0] for the ellipsis, 3 for an anonymous axis."""
    if name.startswith(recipe.ELLIPSIS):
        return f"...[{name[len(recipe.ELLIPSIS):]}]"
    anonymous = recipe.anonymous_length(name)
    return name if anonymous is None else str(anonymous)


def _reduction_name(reduction: object) -> str:
    name = reduction if isinstance(reduction, str) else getattr(reduction, "__name__", "reduction")
    return name if name.isidentifier() else "reduction"


def _axes(plan: Plan) -> tuple[tuple[str, int, str], ...]:
    """Plan.lengths, input axes first in input order."""
    order = {n: i for i, n in enumerate(n for d in plan.in_dims for n in d)}
    rows = sorted(plan.lengths, key=lambda row: order.get(row[0], len(order)))
    return tuple((_show_axis(n), v, src) for n, v, src in rows)


def _index_lines(plan: Plan) -> tuple[str, ...]:
    return tuple(
        f"{u.name}: shape {u.shape}, axes ({' '.join(_show_axis(a) for a in u.axes)}), "
        f"positions along {_show_axis(u.axis)} (length {u.length})"
        for u in plan.indices
    )


# --- shapes, strides and axis names between the steps ----------------------------


class _State(Record):
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    names: Names | None  # None where the plan does not say (between gather and scatter)


def _regroup(names: list[str], length: dict[str, int], shape: tuple[int, ...]) -> Names | None:
    """Row-major axes cut into dims of the given sizes; None if they do not fit. A dim of length 1 takes
    the next axis if that has length 1 too; other unit axes join the next dim (the last dim takes the rest)."""
    out, i = [], 0
    for k, size in enumerate(shape):
        group, prod = [], 1
        if size == 1 and i < len(names) and length[names[i]] == 1 and k < len(shape) - 1:
            group, i = [names[i]], i + 1
        while i < len(names) and (prod < size or k == len(shape) - 1):
            group.append(names[i])
            prod *= length[names[i]]
            i += 1
        if prod != size:
            return None
        out.append(tuple(group))
    return tuple(out) if i == len(names) else None


def _states(plan: Plan) -> list[_State]:
    """The tensor before each step and after the last: the plan's layouts, with axis names where they are known."""
    length = {n: v for n, v, _ in plan.lengths}
    shapes = [layout.shape for layout in plan.layouts]
    strides = [layout.strides for layout in plan.layouts]
    # Names forward from the input until a step that makes new axes, and backward from the output.
    names: list[Names | None] = [None] * len(shapes)
    cur: Names | None = plan.in_dims
    for i, step in enumerate((None,) + plan.steps):
        if i and cur is not None:
            cur = _move(cur, step, length, shapes[i], forward=True)
        if cur is None:
            break
        names[i] = cur
    cur, lengths_before = plan.out_dims, dict(length)
    for i in range(len(plan.steps), -1, -1):
        if names[i] is None:
            names[i] = cur
        if i == 0:
            break
        step = plan.steps[i - 1]
        if isinstance(step, Expand):  # before it, the repeated axes have length 1
            lengths_before.update({a: 1 for d, n in enumerate(shapes[i - 1]) if n != step.shape[d] for a in cur[d]})
        cur = _move(cur, step, lengths_before, shapes[i - 1], forward=False)
        if cur is None:
            break
    return [_State(sh, st, nm) for sh, st, nm in zip(shapes, strides, names)]


def _move(names: Names, step: Step, length: dict[str, int], shape, forward: bool) -> Names | None:
    """Axis names after (forward) or before (backward) a step that only moves axes; else None."""
    if isinstance(step, Permute):
        if forward:
            return tuple(names[p] for p in step.perm)
        inverse = sorted(range(len(step.perm)), key=step.perm.__getitem__)
        return tuple(names[p] for p in inverse)
    if isinstance(step, Reshape):
        return _regroup([n for d in names for n in d], length, shape)
    if isinstance(step, Expand) and not forward:
        return names
    return None


def _elementary(state: _State, length: dict[str, int]) -> list[tuple[str, int, int]]:
    """(name, length, stride) of each elementary axis; a dim's axes are contiguous among themselves."""
    out = []
    assert state.names is not None
    for dim, stride in zip(state.names, state.strides):
        sizes = [length[n] for n in dim]
        for j, n in enumerate(dim):
            out.append((n, sizes[j], stride * math.prod(sizes[j + 1:])))
    return out


def _why(step: Step, before: _State, after: _State, length: dict[str, int]) -> str:
    """The '# view: ...' / '# copy: ...' comment of one step: what the step itself does, from its shapes."""
    show = lambda names: ", ".join(_show_axis(n) for n in names)
    if isinstance(step, Permute):
        if not step.view:  # after a reduction, on torch
            return "copy: reorders the axes, written out contiguous (as einops' reduction gives)"
        return "view: reorders the axes (strides only)"
    if isinstance(step, Expand):
        grown = [d for d, (a, b) in enumerate(zip(before.shape, step.shape)) if a != b]
        new = [n for d in grown for n in after.names[d] if length[n] != 1] if after.names is not None else []
        if not step.view and not new:  # a backend whose repeat copies (numpy, as einops' np.tile)
            return "copy: a new array, as einops' np.tile gives, though nothing repeats"
        if not step.view:
            return f"copy: writes the repeats of {show(new)} out, as einops' np.tile"
        return f"view: repeats {show(new) or 'the new axes'} with stride 0"
    if isinstance(step, Reshape):
        if not step.view:
            if before.names is None or after.names is None:
                return "copy: the merged axes are not adjacent in memory"
            return "copy: " + _not_adjacent(before, after.names, length)
        return "view: " + _reshaped(before, after, length)
    if isinstance(step, Reduce):
        if not step.axes:
            return f"copy: {_reduction_name(step.reduction)} over no axis (its result dtype, as numpy's axis=())"
        names = [n for a in step.axes for n in (before.names or ((),) * len(before.shape))[a]]
        return f"copy: {_reduction_name(step.reduction)} over {show(names) or 'axes ' + str(step.axes)}"
    if isinstance(step, TakeRows):
        return f"copy: picks {math.prod(step.space)} rows of the {before.shape} view"
    if isinstance(step, GatherAlong):
        return f"copy: picks along dim {step.dim} at {step.term.index}"
    if isinstance(step, AdvancedIndex):
        return "copy: advanced indexing always copies"
    assert isinstance(step, ScatterRows | ScatterAlong)
    if step.reduction == "set":
        return "copy: a new tensor; no two writes may meet ('set')"
    return f"copy: a new tensor; writes that meet combine by {step.reduction}"


def _matched(before: tuple[int, ...], after: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """A reshape's dims of length other than 1, matched up: the shortest runs before and after with equal
    products, in order (the runs that numpy's and torch's view check match)."""
    old = [d for d, n in enumerate(before) if n != 1]
    new = [d for d, n in enumerate(after) if n != 1]
    blocks: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old) and j < len(new):
        b, a = [old[i]], [new[j]]
        p, q = before[old[i]], after[new[j]]
        i, j = i + 1, j + 1
        while p != q:
            if p < q:
                b.append(old[i])
                p, i = p * before[old[i]], i + 1
            else:
                a.append(new[j])
                q, j = q * after[new[j]], j + 1
        blocks.append((b, a))
    return blocks


def _reshaped(before: _State, after: _State, length: dict[str, int]) -> str:
    """What a reshape that is a view does: the axes it merges (an axis of length > 1 from several dims
    into one) and splits (one dim's into several), and whether unit axes come or go. Only the axes of
    length other than 1 are named: the lengths place them without doubt."""
    if 0 in before.shape or 0 in after.shape:
        return "same memory, new shape"
    if before.names is None or after.names is None:  # between gather and scatter: the dims by number
        dims = lambda ds: f"dim{'s' if len(ds) > 1 else ''} {', '.join(map(str, ds))}"  # noqa: E731
        what = [f"merges ({dims(b)})" if len(a) == 1 else f"splits ({dims(b)})" if len(b) == 1
                else f"regroups ({dims(b)})" for b, a in _matched(before.shape, after.shape) if len(a) + len(b) > 2]
    else:
        big = lambda names: [n for n in names if length[n] != 1]  # noqa: E731
        home = [{n: d for d, dim in enumerate(state.names) for n in big(dim)} for state in (before, after)]
        show = lambda names: ", ".join(_show_axis(n) for n in names)  # noqa: E731
        what = [f"merges ({show(big(dim))})" for dim in after.names if len({home[0][n] for n in big(dim)}) > 1]
        what += [f"splits ({show(big(dim))})" for dim in before.names if len({home[1][n] for n in big(dim)}) > 1]
    units = [sum(n == 1 for n in shape) for shape in (before.shape, after.shape)]
    if units[1] != units[0]:
        what.append("adds unit axes" if units[1] > units[0] else "drops unit axes")
    return "; ".join(what) or "moves unit axes"


def _not_adjacent(before: _State, groups: Names, length: dict[str, int]) -> str:
    axes = {n: (size, stride) for n, size, stride in _elementary(before, length)}
    for group in groups:
        run = [n for n in group if axes[n][0] != 1]
        for a, b in zip(run, run[1:]):
            if axes[a][1] == 0 or axes[b][1] == 0:
                return f"axis {_show_axis(a if axes[a][1] == 0 else b)} is repeated (stride 0) and must be written out"
            if axes[a][1] != axes[b][0] * axes[b][1]:
                return f"axes {_show_axis(a)}, {_show_axis(b)} are not adjacent in memory"
    return "the axes it merges are not adjacent in memory"


# --- the code ------------------------------------------------------------------


class _Code:
    """The plan's steps as backend lines: each from the backend's template, with explain's view/copy comment."""

    def __init__(self, plan: Plan, templates: dict, x: str, used: set[str], grad: bool = False) -> None:
        self.plan, self.templates = plan, templates
        self.names = CodeNames(
            x=x, out=_fresh("out", used), flat=_fresh("flat", used), pos=_fresh("pos", used),
            counts=_fresh("counts", used), sums=_fresh("sums", used), offset=_fresh("offset", used),
            reduction=_fresh("reduction", used), hit=_fresh("hit", used),
            index_shapes={u.name: u.shape for u in plan.indices}, grad=grad,
        )

    def lines(self) -> tuple[str, ...]:
        plan = self.plan
        if not plan.steps:
            return (f"# nothing to run: the result is {self.names.x} itself",)
        length = {n: v for n, v, _ in plan.lengths}
        states = _states(plan)
        rows: list[tuple[str, str]] = []
        for k, step in enumerate(plan.steps):
            code = self.templates[type(step)](step, plan.layouts[k], self.names)
            why = _why(step, states[k], states[k + 1], length)
            rows += [(line, "") for line in code[:-1]] + [(code[-1], why)]
        # Comments line up, except after a line too long to wait for.
        width = max((len(c) for c, w in rows if w and len(c) <= 64), default=0)
        return tuple(f"{c:<{width}}  # {w}" if w else c for c, w in rows)


# --- the formula ---------------------------------------------------------------


def _formula(plan: Plan, x: str, out: str, used: set[str]) -> str:
    """out[...] = x[...] with each coordinate written from the loop variables."""
    length = {n: v for n, v, _ in plan.lengths}
    in_axes = [n for d in plan.in_dims for n in d]
    gathered = {s.axis: s for s in plan.gathers}
    scattered = {s.axis: s for s in plan.scatters}
    if plan.op == "scatter":  # one loop variable per source element
        loop = [d for d in plan.in_dims if not (len(d) == 1 and d[0] in gathered)]
        loop += [(a,) for a in dict.fromkeys(a for s in plan.gathers for a in s.axes) if a not in in_axes]
    else:  # one loop variable per output dim (a group gets one)
        loop = list(plan.out_dims)
    pool = [n for n in "klmpqrsuvwij" if n not in used]
    names: dict[str, str] = {}  # axis -> its variable, where the axis has one

    def var(axis: str) -> str:  # an axis's own name; _3, _3_1 for anonymous axes of length 3
        if axis not in names:
            names[axis] = _var(axis) if recipe.anonymous_length(axis) is None else _fresh(_var(axis), used, "_")
            used.add(names[axis])
        return names[axis]

    where: dict[str, tuple[str, tuple[str, ...], int]] = {}  # axis -> (variable, its group, position in it)
    for dim in loop:
        v = var(dim[0]) if len(dim) == 1 else (pool.pop(0) if pool else _fresh("k", used))
        used.add(v)
        where.update({a: (v, dim, i) for i, a in enumerate(dim)})
    reduced: list[str] = []  # reduce's axes: input axes that no loop variable covers

    def dim_expr(dims: tuple[str, ...], indexed: dict) -> str:
        """One dimension's coordinate: its axes' coordinates, row-major."""
        terms, i = [], 0
        while i < len(dims):
            a, j = dims[i], i + 1
            spec = indexed.get(a)
            if spec is not None:
                t = f"{spec.name}[{', '.join(dim_expr((b,), {}) for b in spec.axes) or '()'}]"
            else:
                if a not in where:
                    reduced.append(a)
                    where[a] = (var(a), (a,), 0)
                v, group, pos = where[a]
                while j < len(dims) and dims[j] in where and where[dims[j]][:2] == (v, group) \
                        and where[dims[j]][2] == pos + j - i:
                    j += 1  # a run of the same group, in order: one term
                stride = math.prod(length[b] for b in group[pos + j - i:])
                t = v + (f" // {stride}" if stride != 1 else "")
                t += f" % {math.prod(length[b] for b in group[pos:pos + j - i])}" if pos else ""
            scale = math.prod(length[b] for b in dims[j:])
            terms.append(t if scale == 1 else (f"{t} * {scale}" if t.isidentifier() or t.endswith("]")
                                               else f"({t}) * {scale}"))
            i = j
        return " + ".join(terms) or "0"

    left = f"{out}[{', '.join(dim_expr(d, scattered) for d in plan.out_dims) or '()'}]"
    right = f"{x}[{', '.join(dim_expr(d, gathered) for d in plan.in_dims) or '()'}]"
    if plan.op == "reduce" and reduced:
        return f"{left} = {_reduction_name(plan.reduction)} over {', '.join(var(a) for a in reduced)} of {right}"
    if plan.op == "scatter":
        op = {"sum": "+=", "prod": "*=", "set": "="}.get(str(plan.reduction), f"<- {plan.reduction} of")
        return f"{left} {op} {right}"
    free = [var(d[0]) for d in plan.out_dims if plan.op == "repeat" and len(d) == 1 and d[0] not in in_axes]
    return f"{left} = {right}" + (f"   (the same for every {', '.join(free)})" if free else "")


def _var(axis: str) -> str:
    """The loop variable of a single-axis dim: its name; _3 for an anonymous axis 3."""
    anonymous = recipe.anonymous_length(axis)
    return _show_axis(axis) if anonymous is None else f"_{anonymous}"


# --- show ----------------------------------------------------------------------


def _show(plan: Plan, r: recipe.Recipe, lengths, reduction, tensors) -> tuple[Any, str]:
    """Run the real rearr on arange(N) (and the given or example indices): where each input element lands."""
    import numpy as np

    from .. import api
    from . import picture

    size, out_size = math.prod(plan.in_shape), math.prod(plan.out_shape)
    if max(size, out_size) > SHOW_LIMIT:
        return None, f"show: skipped, the input has {size} and the result {out_size} elements (at most {SHOW_LIMIT})"
    floats = reduction == "mean"
    x = np.arange(size, dtype=np.float64 if floats else np.int64).reshape(plan.in_shape)
    indices = dict(picture.example_indices(plan), **{n: np.asarray(api.asnumpy(v)) for n, v in tensors})
    kwargs = dict(lengths, **indices)
    try:
        if r.op == "scatter":
            result = api.scatter(x, r.text, reduction, **kwargs)
        elif r.op == "reduce":
            result = api.reduce(x, r.text, reduction, **kwargs)
        else:
            result = getattr(api, r.op)(x, r.text, **kwargs)
    except RearrError as e:
        return None, f"show: the example did not run: {e.message}"
    given = "".join(f"; {name} = {value.tolist()}" for name, value in indices.items())
    head = f"show: x = np.arange({size}).reshape{plan.in_shape}{given}; the result of {r.op}:"
    return result, head
