"""Recipe + shapes + lengths -> Plan (rearr/planning/plan.py): the native calls a careful person would write.

The planner never sees a tensor: only shapes, so plans are cached on
(pattern, shapes, lengths).
"""

from __future__ import annotations

import math
import re

from ..errors import RearrError, shown_int
from ..rules.arguments import symbolic
from ..rules.recipe import ELLIPSIS, INT64_MAX, Dim, IndexSpec, Recipe, index_not_passed
from .lengths import (
    KEYWORD,
    Lengths,
    expand_names,
    known_shape,
    resolve,
)
from .lengths import show as _show
from .plan import (
    PLAIN,
    AdvancedIndex,
    Expand,
    GatherAlong,
    IndexTerm,
    IndexUse,
    Layout,
    Permute,
    Plan,
    Reduce,
    Reshape,
    Results,
    ScatterAlong,
    ScatterRows,
    Step,
    TakeRows,
)

# --- shape arithmetic --------------------------------------------------------


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def order_k_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a copy in the memory order of the original (numpy's order='K'): the axes by
    decreasing stride, ties in their own order."""
    out, acc = [0] * len(shape), 1
    for k in sorted(range(len(shape)), key=lambda k: (strides[k], -k)):
        out[k] = acc
        acc *= max(shape[k], 1)
    return tuple(out)


def view_strides(shape: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides of ``new`` as a view of (shape, strides), or None when a copy is needed.

    The algorithm of numpy's _attempt_nocopy_reshape (torch's computeStride).
    """
    if math.prod(shape) == 0:
        return contiguous_strides(new)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    dims, strs = [n for n, _ in old], [s for _, s in old]
    out = [0] * len(new)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new) and oi < len(dims):
        np_, op_ = new[ni], dims[oi]
        while np_ != op_:
            if np_ < op_:
                np_ *= new[nj]
                nj += 1
            else:
                op_ *= dims[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if strs[ok] != dims[ok + 1] * strs[ok + 1]:
                return None
        out[nj - 1] = strs[oj - 1]
        for nk in range(nj - 1, ni, -1):
            out[nk - 1] = out[nk] * new[nk]
        ni, oi = nj, oj
        nj, oj = nj + 1, oj + 1
    last = out[ni - 1] if ni >= 1 else 1
    for nk in range(ni, len(new)):
        out[nk] = last
    return tuple(out)


class _Tracker:
    """Follows shape and strides through the steps, to mark each view or copy.

    ``layouts`` holds the tensor before each step and after the last: the Plan
    records them, and explain reads them.
    """

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = tuple(shape)
        self.strides = contiguous_strides(self.shape)
        self.steps: list[Step] = []
        self.layouts: list[Layout] = [Layout(self.shape, self.strides)]

    def take(self, trial: _Tracker) -> None:
        """Continue from a trial's steps, planned from this tracker's start (rather than plan them again)."""
        self.shape, self.strides, self.steps, self.layouts = trial.shape, trial.strides, trial.steps, trial.layouts

    def _add(self, step: Step, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        self.steps.append(step)
        self.shape, self.strides = shape, strides
        self.layouts.append(Layout(shape, strides))

    def reshape(self, shape: tuple[int, ...]) -> None:
        shape = tuple(shape)
        if self.steps and isinstance(self.steps[-1], Reshape):  # two reshapes in a row are one
            self.steps.pop()
            self.layouts.pop()
            self.shape, self.strides = self.layouts[-1].shape, self.layouts[-1].strides
        if shape == self.shape:
            return
        strides = view_strides(self.shape, self.strides, shape)
        self._add(Reshape(shape, strides is not None), shape, strides or contiguous_strides(shape))

    def permute(self, perm: tuple[int, ...], copy: bool = False) -> None:
        """Reorder the axes: a view, or with ``copy`` written out in the new order (contiguous)."""
        perm = tuple(perm)
        if perm == tuple(range(len(perm))):
            return
        shape = tuple(self.shape[p] for p in perm)
        strides = contiguous_strides(shape) if copy else tuple(self.strides[p] for p in perm)
        self._add(Permute(perm, view=not copy), shape, strides)

    def fresh(self, step: Step, shape: tuple[int, ...]) -> None:
        """A step that makes a new (contiguous) tensor."""
        self._add(step, tuple(shape), contiguous_strides(tuple(shape)))

    def expand(self, shape: tuple[int, ...], copy: bool = False) -> None:
        """Repeat to ``shape``: a stride-0 view, or with ``copy`` the values written out into a new
        tensor (as np.tile: C order, or the input's own order, numpy's 'K', where nothing repeats)."""
        shape = tuple(shape)
        if copy:
            strides = order_k_strides(shape, self.strides) if shape == self.shape else contiguous_strides(shape)
            self._add(Expand(shape, view=False), shape, strides)
        elif shape != self.shape:
            strides = tuple(s if n == m else 0 for n, m, s in zip(self.shape, shape, self.strides))
            self._add(Expand(shape), shape, strides)


# --- errors and index specs (the lengths: lengths.py) -------------------------


def _err(recipe: Recipe, code: str, message: str, col: int | None, hint: str | None = None) -> RearrError:
    return RearrError(message, code=code, pattern=recipe.text, col=col, hint=hint)


def _specs(specs: tuple[IndexSpec, ...], ellipsis_axes: tuple[str, ...]) -> tuple[IndexSpec, ...]:
    return tuple(IndexSpec(s.name, s.axis, expand_names(s.axes, ellipsis_axes), s.col, s.declared) for s in specs)


# --- planning ----------------------------------------------------------------


def plan(
    recipe: Recipe,
    shape: tuple[int, ...],
    lengths: tuple[tuple[str, object], ...] = (),
    index_shapes: tuple[tuple[str, tuple[int, ...]], ...] = (),
    into_shape: tuple[int, ...] | None = None,
    results: Results = PLAIN,
) -> Plan:
    """Plan one call; raises RearrError for shapes and lengths that do not fit. ``results``: what the
    backend's calls make of a result (contract.Backend.RESULTS)."""
    try:
        shape = known_shape(shape)
        index_shapes = tuple((name, known_shape(index_shape, f"index {name!r}", name, _index_col(recipe, name)))
                             for name, index_shape in index_shapes)
    except RearrError as e:
        raise e.with_context(pattern=recipe.text) from None
    ins, outs, ellipsis_axes, lens = resolve(recipe, shape, lengths)
    gathers, scatters = _specs(recipe.gathers, ellipsis_axes), _specs(recipe.scatters, ellipsis_axes)
    if into_shape is not None:
        _into_lengths(recipe, outs, into_shape, lens)
    indices = _index_lengths(recipe, gathers + scatters, dict(index_shapes), lens)
    in_axes = [n for d in ins for n in d.names]
    out_axes = [n for d in outs for n in d.names]
    for name in out_axes:
        if name not in lens.value:  # RA301, at the axis's column (looked up for the error only)
            lens.need(name, "output axis", recipe.col(name), ", or pass into=" if recipe.op == "scatter" else "")
    size = lens.value.__getitem__
    track = _Tracker(shape)
    out_shape = tuple(math.prod(size(n) for n in d.names) for d in outs)
    if gathers or scatters:
        _plan_indexing(recipe, track, in_axes, out_axes, gathers, scatters, lens, into_shape)
    else:
        _plan_transform(recipe, track, ins, out_axes, size, out_shape, results)
    track.reshape(out_shape)
    if not track.steps and not gathers and not scatters and any(len(d.names) != 1 for d in ins + outs):
        # Where einops reshapes (a group, a unit axis) but the shape stays, the result is still a
        # new view of x, not x itself, as einops' reshape gives.
        track.steps.append(Reshape(out_shape))
        track.layouts.append(track.layouts[-1])
    _check_ndim(recipe, track.steps, out_shape)
    return Plan(
        recipe.op, recipe.text, shape, out_shape, tuple(track.steps),
        tuple(d.names for d in ins), tuple(d.names for d in outs),
        tuple((n, lens.value[n], lens.source[n]) for n in lens.value),
        indices, gathers, scatters, recipe.reduction, into_shape, tuple(track.layouts),
    )


def _index_col(recipe: Recipe, name: str) -> int | None:
    return next((s.col for s in recipe.gathers + recipe.scatters if s.name == name), None)


MAX_DIMS = 64  # numpy's limit (NPY_MAXDIMS), and torch's for most kernels


def _check_ndim(recipe: Recipe, steps: list[Step], out_shape: tuple[int, ...]) -> None:
    """Refuse what no backend can hold: over 64 dimensions, or more elements than int64 counts."""
    shapes = [out_shape] + [s.shape for s in steps if isinstance(s, Reshape | Expand)]
    most = max([len(out_shape)] + [len(getattr(s, "shape", getattr(s, "perm", ()))) for s in steps])
    if most > MAX_DIMS:
        raise _err(recipe, "RA304", f"the plan needs a tensor of {most} dimensions; numpy and torch stop at "
                   f"{MAX_DIMS}", None, "group axes with parentheses so fewer dimensions are needed")
    largest = max(math.prod(shape) for shape in shapes)
    if largest > INT64_MAX:
        raise _err(recipe, "RA305", f"the result would hold {shown_int(largest)} elements, more than int64 can count",
                   None, "use smaller lengths")


def _plan_transform(
    recipe: Recipe, track: _Tracker, ins: tuple[Dim, ...], out_axes: list[str], size, out_shape: tuple[int, ...],
    results: Results,
) -> None:
    """rearrange / reduce / repeat: reshape, reduce, permute, expand (final reshape by the caller).

    Merging the axes of one input dimension that travel together lets a view suffice more often
    ('b (h w) c -> b c (h w)' is one transpose of the input), but can cost calls where a plain permute
    is already a view: plan both, keep the one with fewer copies, then fewer calls. Axes of two input
    dimensions are never merged first: on a strided input that merge would copy before the permute,
    where einops copies in the last reshape (a C-contiguous result). A callable reduction gets einops'
    tensor: every axis split, the reduced ones last.
    """
    dim_of = {n: k for k, d in enumerate(ins) for n in d.names}
    in_axes = [n for d in ins for n in d.names]
    candidates = []
    # Merging joins axes of one input dimension only: with none that holds two, both trials are one.
    merges = (False, True) if not callable(recipe.reduction) and any(len(d.names) > 1 for d in ins) else (False,)
    for merge in merges:
        trial = _Tracker(track.shape)
        _transform_steps(recipe, trial, in_axes, out_axes, size, dim_of if merge else None, results)
        trial.reshape(out_shape)
        candidates.append((sum(not s.view for s in trial.steps), len(trial.steps), merge, trial))
    track.take(min(candidates, key=lambda c: c[:3])[3])


def _transform_steps(
    recipe: Recipe, track: _Tracker, in_axes: list[str], out_axes: list[str], size,
    dim_of: dict[str, int] | None, results: Results,
) -> None:
    """The steps, each result laid out as einops' (which reduces after its permute): ``dim_of`` (each
    axis's input dimension), where given, merges the axes of one input dimension that stay together.
    The reduction runs on the axes in place, then the permute: numpy lays a reduction's result out as
    its input, so the permuted view is einops' result; torch makes it contiguous, so the permute is
    written out (``results.reduction_contiguous``). A callable is called as einops calls it, after
    the permute, on the kept axes in output order and the reduced ones last."""
    out_pos = {n: i for i, n in enumerate(out_axes)}
    blocks: list[list[str]] = []
    for name in in_axes:
        if blocks and dim_of is not None and dim_of[name] == dim_of[blocks[-1][-1]]:
            prev = blocks[-1][-1]
            same_reduced = name not in out_pos and prev not in out_pos
            adjacent = name in out_pos and prev in out_pos and out_pos[name] == out_pos[prev] + 1
            if same_reduced or adjacent:
                blocks[-1].append(name)
                continue
        blocks.append([name])
    reduced = tuple(i for i, b in enumerate(blocks) if b[0] not in out_pos)
    kept = [i for i, b in enumerate(blocks) if b[0] in out_pos]
    order = sorted(kept, key=lambda i: out_pos[blocks[i][0]])
    in_set = set(in_axes)
    new = [n for n in out_axes if n not in in_set]
    if recipe.op == "reduce" and not reduced and not callable(recipe.reduction):
        # Reducing no axis still applies the reduction's dtype rule, as numpy's axis=() does: 'any' gives
        # bools, 'sum' of bools counts, integer 'mean' is refused. (einops returns the input unchanged.)
        track.fresh(Reduce(recipe.reduction, ()), track.shape)
    if not reduced and not new and order == kept:
        return  # the axes keep their order: the caller's one reshape does it all
    track.reshape(tuple(math.prod(size(n) for n in b) for b in blocks))
    if reduced and recipe.reduction in ("min", "max") and any(track.shape[i] == 0 for i in reduced):
        axis = next(n for i in reduced for n in blocks[i] if size(n) == 0)
        raise _err(recipe, "RA400", f"'{recipe.reduction}' over the empty axis {_show(axis)} has no value",
                   recipe.col(axis), "reduce over non-empty axes, or use 'sum'/'any' whose empty result is defined")
    if reduced and callable(recipe.reduction):
        track.permute(tuple(order) + reduced)
        track.fresh(Reduce(recipe.reduction, tuple(range(len(order), len(blocks)))), track.shape[:len(order)])
    elif reduced:
        track.fresh(Reduce(recipe.reduction, reduced), tuple(track.shape[i] for i in kept))
        track.permute(tuple(kept.index(i) for i in order), copy=results.reduction_contiguous)
    else:
        track.permute(tuple(order))
    if new:
        firsts = {blocks[i][0]: blocks[i] for i in order}
        units = [(n, size(n)) if n not in in_set else (n, math.prod(size(a) for a in firsts[n]))
                 for n in out_axes if n not in in_set or n in firsts]
        track.reshape(tuple(1 if n not in in_set else length for n, length in units))
        # numpy's repeat writes the repeated values out, as einops' np.tile: a fresh, writable array
        track.expand(tuple(length for _, length in units), copy=results.repeat_copies)


def _index_lengths(recipe: Recipe, specs, shapes: dict[str, tuple[int, ...]], lens: Lengths) -> tuple[IndexUse, ...]:
    uses = []
    for spec in specs:
        shape = shapes.get(spec.name)
        if shape is None:
            raise index_not_passed(recipe, spec)
        if len(shape) != len(spec.axes):
            axes = " ".join(_show(a).strip("'") for a in spec.axes) or "(none)"
            raise _err(recipe, "RA304",
                       f"index {spec.name!r} has {len(shape)} dimensions, "
                       f"the pattern gives it {len(spec.axes)}: {axes}",
                       spec.col, _index_hint(recipe, spec, shape, guess=_guess_axes(spec.axes, shape, lens.value),
                                             known=lens.value))
        for axis, n in zip(spec.axes, shape):
            if axis in lens.value and lens.value[axis] != n:
                raise _length_conflict(recipe, spec, shape, axis, n, lens, specs)
            lens.set(axis, n, f"index {spec.name}", spec.col)
    for spec in specs:
        n = lens.need(spec.axis, "axis", spec.col - 1, ", or pass into=")
        uses.append(IndexUse(spec.name, spec.axis, n, spec.axes, shapes[spec.name], spec.col))
    return tuple(uses)


def _length_conflict(recipe: Recipe, spec: IndexSpec, shape, axis: str, n: int, lens: Lengths,
                     specs: tuple[IndexSpec, ...]) -> RearrError:
    """RA303 for an index whose length on an axis disagrees with a length known before: the fix
    depends on where that length came from (the tensor, a keyword, or another index)."""
    m, source = lens.value[axis], lens.source[axis]
    other = next((s for s in specs if source == f"index {s.name}"), None)
    if other is not None:  # neither length is the tensor's: slicing the tensor cannot help
        cut, k = (other, n) if m > n else (spec, m)
        where = ", ".join([":"] * cut.axes.index(axis) + [f":{k}"])
        return _err(recipe, "RA303", f"index {spec.name!r} has length {n} on axis {_show(axis)}, "
                    f"index {other.name!r} has {m}", spec.col,
                    f"give both indices one length along {_show(axis)}; to use the first {k} of each, "
                    f"pass {cut.name}={cut.name}[{where}]")
    tensors = recipe.inputs + (recipe.outputs if recipe.op == "scatter" else ())  # the input's, and into='s
    if source == KEYWORD and axis not in {n for side in tensors for dim in side for n in dim.names}:
        return _err(recipe, "RA303", f"index {spec.name!r} has length {n} on axis {_show(axis)}, "
                    f"the keyword {axis}= says {m}", spec.col,
                    f"pass {axis}={n} instead, or drop {axis}= to take the index's length")
    return _err(recipe, "RA303", f"index {spec.name!r} has length {n} on axis {_show(axis)}, "
                f"the tensor has {m} ({source})", spec.col, _index_hint(recipe, spec, shape, axis, n, known=lens.value))


def _guess_axes(axes: tuple[str, ...], shape: tuple[int, ...], known: dict[str, int]) -> list[str] | None:
    """The axes an index of this shape most likely has: in order, lengths matching."""
    out: list[str] = []
    rest = list(axes)
    for n in shape:
        while rest and known.get(rest[0], n) != n:
            rest.pop(0)
        if not rest:
            return None
        out.append(rest.pop(0))
    return out


def _index_hint(
    recipe: Recipe, spec: IndexSpec, shape, axis: str | None = None, n: int | None = None,
    guess: list[str] | None = None, known: dict[str, int] | None = None,
) -> str:
    if n is not None and n == 1:  # np.take_along_axis would broadcast this silently
        known = known or {}
        keep = [a for a, m in zip(spec.axes, shape) if not (m == 1 and known.get(a, 1) != 1)]
        return (f"an index is never broadcast silently; to share one index across {_show(axis or '')}, "
                f"declare the axes it has, {_with_axes(recipe, spec, keep)!r}, and drop its length-1 axes")
    if n is not None and known and n > known.get(axis or "", n):  # longer than the tensor: cut the index
        m = known[axis or ""]
        cut = "[" + ", ".join([":"] * spec.axes.index(axis) + [f":{m}"]) + "]"
        return (f"the index is longer than the tensor along {_show(axis or '')}; to use its first {m}, "
                f"pass {spec.name}={spec.name}{cut}")
    if n is not None:  # torch.gather would silently use the first rows only
        return (f"an index is never truncated silently; to index only the first {n} along {_show(axis or '')}, "
                f"as torch.gather would, slice the tensor first, e.g. x{_slice(recipe, axis or '', n)}")
    if guess is not None:  # [] for a 0-d index: '[i:]', one value shared by every position
        return f"declare the axes the index has, after ':': {_with_axes(recipe, spec, guess)!r}"
    fresh = _with_new_axes(recipe, spec, shape, known or {})
    if fresh is not None:
        return f"declare the axes the index has, after ':', the new ones on the output too: {fresh!r}"
    want = tuple((known or {}).get(a) for a in spec.axes)
    if None not in want:
        return f"pass an index of shape {want} (axes {' '.join(spec.axes)})"
    return f"declare the axes the index has after ':', e.g. '[{spec.name}: b k]', to match its shape {tuple(shape)}"


def _with_new_axes(recipe: Recipe, spec: IndexSpec, shape, known: dict[str, int]) -> str | None:
    """For a gather whose index has more axes than the output: the pattern with each index axis
    named (the output's where lengths match, in order, new ones otherwise) and the new ones output."""
    if spec.name not in {s.name for s in recipe.gathers} or any(a.startswith(ELLIPSIS) for a in spec.axes):
        return None
    taken = {n for dims in recipe.inputs + recipe.outputs for d in dims for n in d.names} | set(known)
    rest, axes, new = list(spec.axes), [], []
    for n in shape:
        if rest and known.get(rest[0], n) == n:  # an axis only the index gives takes its length
            axes.append(rest.pop(0))
            continue
        name = next(f"k{j}" if j else "k" for j in range(len(taken) + 2) if (f"k{j}" if j else "k") not in taken)
        taken.add(name)
        axes.append(name)
        new.append(name)
    return f"{_with_axes(recipe, spec, axes)} {' '.join(new)}"


def _slice(recipe: Recipe, axis: str, n: int) -> str:
    """``[:, :n]`` that cuts the input dimension holding ``axis`` (a whole dimension) to n."""
    (ins,) = recipe.inputs
    for k, dim in enumerate(ins):
        if dim.names == (axis,) and ELLIPSIS not in [d.names[0] for d in ins[:k] if d.names]:
            return "[" + ", ".join([":"] * k + [f":{n}"]) + "]"
    return f"[...] (axis {_show(axis)} cut to {n})"


def _with_axes(recipe: Recipe, spec: IndexSpec, axes: list[str]) -> str:
    """The pattern with this index's axes written out, as the user would write it."""
    text = recipe.text
    end = text.find("]", spec.col)
    if any(a.startswith(ELLIPSIS) for a in axes) or end < 0:
        return text
    out = f"{text[:spec.col]}{spec.name}:{''.join(' ' + a for a in axes)}{text[end:]}"
    if spec.name in {s.name for s in recipe.gathers} and "->" in out:
        # An output axis that only the index gave a length is gone with the index's axis: drop it too.
        given = {n for d in recipe.inputs[0] for n in d.names}
        left, right = out.split("->", 1)
        for a in spec.axes:
            if a not in axes and a not in given:
                right = re.sub(rf"(?<!\w){re.escape(a)}(?!\w)", "", right)
        right = " ".join(right.split()).replace("( ", "(").replace(" )", ")")
        out = f"{left}-> {right}" if right else f"{left}->"
    return out


def _into_lengths(recipe: Recipe, outs: tuple[Dim, ...], into_shape: tuple[int, ...], lens: Lengths) -> None:
    if len(into_shape) != len(outs):
        raise _err(recipe, "RA304", f"into= has {len(into_shape)} dimensions, the output has {len(outs)}",
                   recipe.outputs[0][0].col if recipe.outputs[0] else None, "pass into= with the output's shape")
    lens.solve([(dim, n, f"dimension {k} of into=") for k, (dim, n) in enumerate(zip(outs, into_shape))])


def _plan_indexing(recipe, track, in_axes, out_axes, gathers, scatters, lens, into_shape) -> None:
    size = lens.value.__getitem__
    # Input elementary axes; gathers turn them into the "middle" axes.
    track.reshape(tuple(size(n) for n in in_axes))
    axes = list(in_axes)
    if gathers:
        axes = _plan_gather(track, axes, gathers, out_axes if not scatters else None, size)
    if scatters:
        _plan_scatter(recipe, track, axes, out_axes, scatters, size, into_shape)
    else:
        track.permute(tuple(axes.index(n) for n in out_axes))


def _terms(space: list[str], lead: list[str], specs, size, with_strides: bool) -> tuple[IndexTerm, ...]:
    """A coordinate per leading axis, over the index space, with row-major strides."""
    by_axis = {s.axis: s for s in specs}
    terms = []
    for i, axis in enumerate(lead):
        stride = math.prod(size(a) for a in lead[i + 1:]) if with_strides else 1
        spec = by_axis.get(axis)
        if spec is not None:
            order = sorted(range(len(spec.axes)), key=lambda j: space.index(spec.axes[j]))
            shape = tuple(size(a) if a in spec.axes else 1 for a in space)
            terms.append(IndexTerm(spec.name, size(axis), tuple(order), shape, stride, _source(spec, size)))
        else:
            shape = tuple(size(a) if a == axis else 1 for a in space)
            terms.append(IndexTerm(None, size(axis), (), shape, stride))
    return tuple(terms)


# Row moves (index_select / index_add on a (rows, width) view) win on large
# tensors with trailing free axes; below this many moved elements, the fewer
# native calls of torch.gather / scatter_reduce with an expanded index win.
ROWS_MIN_ELEMENTS = 1 << 15


def _large(elements: object) -> bool:
    """Whether a move is large enough for the row lowering. Never under torch.compile's dynamic shapes:
    comparing a symbolic size with ROWS_MIN_ELEMENTS would add a guard, and a recompile (or, under
    torch.export, a failed guard) when the size crosses it; the lowering along an axis serves every size."""
    return not symbolic(elements) and elements >= ROWS_MIN_ELEMENTS


def _source(spec: IndexSpec, size) -> tuple[int, ...]:
    return tuple(size(a) for a in spec.axes)


def _plan_gather(track: _Tracker, axes: list[str], specs, out_axes, size) -> list[str]:
    """Read the gathered axes at their indices; returns the new axis order."""
    gathered = [s.axis for s in specs]
    space = list(dict.fromkeys(a for s in specs for a in s.axes))
    if out_axes is not None:  # order the index space as the output, so the last permute is often identity
        space.sort(key=out_axes.index)
    lead = [a for a in axes if a in gathered or a in space]
    free = [a for a in axes if a not in lead]
    rows_ok = axes[: len(lead)] == lead
    big = _large(math.prod(size(a) for a in space + free))
    if len(specs) == 1 and _gather_along_ok(axes, specs[0]) and not (rows_ok and free and big):
        spec = specs[0]
        new = [a for a in spec.axes if a not in axes]
        dim = axes.index(spec.axis)
        target = [a if a != spec.axis else (new[0] if new else spec.axis) for a in axes]
        order = sorted(range(len(spec.axes)), key=lambda j: target.index(spec.axes[j]))
        ishape = tuple(size(a) if a in spec.axes else 1 for a in target)
        shape = tuple(size(a) if a != spec.axis else (size(new[0]) if new else 1) for a in target)
        term = IndexTerm(spec.name, size(spec.axis), tuple(order), ishape, 1, _source(spec, size))
        track.fresh(GatherAlong(dim, term, shape), shape)
        if not new:  # the index added no axis: drop the unit axis left where spec.axis was
            target.remove(spec.axis)
            track.reshape(tuple(size(a) for a in target))
        return target
    if rows_ok:  # whole rows move: index_select on a (rows, width) view
        track.reshape((math.prod(size(a) for a in lead), math.prod(size(a) for a in free)))
        terms = _terms(space, lead, specs, size, True)
        space_shape = tuple(size(a) for a in space)
        track.fresh(TakeRows(terms, space_shape), (math.prod(space_shape), track.shape[1]))
        track.reshape(space_shape + tuple(size(a) for a in free))
        return space + free
    track.permute(tuple(axes.index(a) for a in lead + free))
    terms = _terms(space, lead, specs, size, False)
    shape = tuple(size(a) for a in space + free)
    track.fresh(AdvancedIndex(terms), shape)
    return space + free


def _gather_along_ok(axes: list[str], spec: IndexSpec) -> bool:
    """torch.gather fits: the index has the tensor's axes (or is broadcast over them) and one new axis at most."""
    return len([a for a in spec.axes if a not in axes]) <= 1 and spec.axis not in spec.axes


def _plan_scatter(recipe, track, axes, out_axes, specs, size, into_shape) -> None:
    """Combine the middle tensor (axes) into the output at the scattered positions."""
    reduction = recipe.reduction
    written = [s.axis for s in specs]
    space = list(dict.fromkeys(a for s in specs for a in s.axes))
    kept_out = [a for a in out_axes if a not in written]
    lead = [a for a in out_axes if a in written or a in space]
    free = [a for a in kept_out if a not in space]
    combined = [a for a in axes if a not in out_axes]
    big = _large(math.prod(size(a) for a in axes))
    if len(specs) == 1 and len(combined) == 1 and combined[0] in specs[0].axes and not (free and big):
        spec = specs[0]
        src_order = [a if a != spec.axis else combined[0] for a in out_axes]
        track.permute(tuple(axes.index(a) for a in src_order))
        order = sorted(range(len(spec.axes)), key=lambda j: src_order.index(spec.axes[j]))
        shape = tuple(size(a) for a in out_axes)
        into = _into_steps(into_shape, out_axes, out_axes, shape, size) if into_shape is not None else ()
        ishape = tuple(size(a) if a in spec.axes else 1 for a in src_order)
        term = IndexTerm(spec.name, size(spec.axis), tuple(order), ishape, 1, _source(spec, size))
        src_shape = tuple(size(a) for a in src_order)
        track.fresh(ScatterAlong(reduction, out_axes.index(spec.axis), term, shape, src_shape, into), shape)
        return
    # Rows: the middle tensor as (index space, free) rows, combined into (lead, free) rows.
    track.permute(tuple(axes.index(a) for a in space + free))
    width = math.prod(size(a) for a in free)
    track.reshape((math.prod(size(a) for a in space), width))
    terms = _terms(space, lead, specs, size, True)
    rows = math.prod(size(a) for a in lead)
    into = _into_steps(into_shape, out_axes, lead + free, (rows, width), size) if into_shape is not None else ()
    track.fresh(ScatterRows(reduction, rows, terms, tuple(size(a) for a in space), into), (rows, width))
    track.reshape(tuple(size(a) for a in lead + free))
    order = lead + free
    track.permute(tuple(order.index(a) for a in out_axes))


def _into_steps(
    into_shape: tuple[int, ...], out_axes: list[str], order: list[str], final: tuple[int, ...], size
) -> tuple[Step, ...]:
    """Steps that bring into= (the output's shape) to the scatter's layout ``final``."""
    track = _Tracker(into_shape)
    track.reshape(tuple(size(a) for a in out_axes))
    track.permute(tuple(out_axes.index(a) for a in order))
    track.reshape(final)
    return tuple(track.steps)
