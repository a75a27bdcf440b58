"""IR + operation -> Recipe: every rule that needs no shapes.

The same code serves the library (which raises) and ``rearr check`` (which
reports): `validate` returns the RearrError instead of raising it.
"""

from __future__ import annotations

import math
import numbers
import operator
import reprlib
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import get_args

from .._record import Record
from .._types import ReductionName, ScatterReduction
from ..errors import RearrError, nearest, shown_int
from ..syntax import ir
from ..syntax.parser import parse as _parse  # every rule reads a parsed pattern: they load together

ELLIPSIS = "…"  # the elementary-axis name that '...' stands for until shapes are known

REDUCTIONS: tuple[str, ...] = get_args(ReductionName)  # as the public signatures type them
SCATTER_REDUCTIONS: tuple[str, ...] = get_args(ScatterReduction)
ARROW_OPS = ("rearrange", "reduce", "repeat", "scatter", "einsum")
BARE_OPS = ("pack", "unpack", "parse_shape")
OPS = ARROW_OPS + BARE_OPS

Reduction = str | Callable | None


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


# A value not known without running (`rearr check`: an argument that is not a literal); the rules that
# need it are skipped. Not None: None is a value, and a wrong one for a length.
UNKNOWN: object = _Unknown()
INT64_MAX = 2**63 - 1  # numpy and torch count elements in int64

# The keyword parameters of the functions that take indices: an index of one of these names could not be passed.
CALL_KEYWORDS = {"rearrange": ("check_bounds",), "scatter": ("fill", "into", "check_bounds")}


def anonymous_axis(value: int, col: int) -> str:
    """The name that an anonymous axis (the 3 of '(h 3)') gets: its length and column, which no axis name
    can be, so that two anonymous axes of one length stay two axes."""
    return f"{value}@{col}"


def anonymous_length(name: str) -> int | None:
    """The length of an anonymous axis's name (see anonymous_axis), None for a named axis."""
    value, at, _ = name.partition("@")
    return int(value) if at else None


class Dim(Record):
    """One dimension of an operand: its elementary axis names (row-major)."""

    names: tuple[str, ...]
    col: int
    group: bool = False  # written in parentheses: '(...)' stays one dimension


class IndexSpec(Record):
    """An index operand: which axis it indexes, and its own axes (in order)."""

    name: str
    axis: str
    axes: tuple[str, ...]  # may contain ELLIPSIS
    col: int
    declared: bool


class Recipe(Record):
    op: str
    text: str
    reduction: Reduction
    inputs: tuple[tuple[Dim, ...], ...]
    outputs: tuple[tuple[Dim, ...], ...]
    anon: tuple[tuple[str, int], ...]  # anonymous axes' names and lengths
    gathers: tuple[IndexSpec, ...] = ()
    scatters: tuple[IndexSpec, ...] = ()
    cols: tuple[tuple[str, int], ...] = ()  # first column of every axis name

    def col(self, name: str) -> int | None:
        return dict(self.cols).get(name)

    @property
    def index_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.gathers + self.scatters)



def _err(text: str, code: str, message: str, col: int | None, hint: str | None = None) -> RearrError:
    return RearrError(message, code=code, pattern=text, col=col, hint=hint)


def parse(text: object) -> ir.Pattern:
    if not isinstance(text, str):
        raise RearrError(
            f"the pattern must be a string, not {type(text).__name__}",
            code="RA100",
            hint="pass the pattern as a str, e.g. 'b c h -> b (c h)'",
        )
    return _parse(text)


@lru_cache(maxsize=1024)
def analyze(text: str, op: str, reduction: Reduction = None, length_names: tuple[str, ...] = ()) -> Recipe:
    """Check everything about a pattern that needs no shapes; raise RearrError."""
    pattern = parse(text)
    if op not in OPS:
        guess = nearest(str(op), OPS)
        raise RearrError(f"unknown operation {op!r}", code="RA100",
                         hint=(f"use {guess!r}; the operations are " if guess else "one of ") + ", ".join(OPS))
    _check_arrow(pattern, op)
    _check_tokens(pattern, op)
    if op == "einsum":
        return _einsum_recipe(pattern, length_names)
    if op in BARE_OPS:
        return _bare_recipe(pattern, op, length_names)
    if len(pattern.inputs) != 1 or len(pattern.outputs or ()) != 1:
        extra = pattern.inputs[1] if len(pattern.inputs) > 1 else pattern.outputs[1]  # type: ignore[index]
        raise _err(
            text, "RA206", f"{op} takes one operand on each side; ',' separates operands only in einsum",
            extra.col, "remove the ',' (or use rearr.einsum for several tensors)",
        )
    _check_reduction(text, op, reduction)
    return _transform_recipe(pattern, op, reduction, length_names)


def operation(op: str, reduction: Reduction) -> tuple[str, Reduction]:
    """The operation a call stands for: as einops, ``reduce(x, p, "rearrange")`` is a rearrange (a
    reduce that reduces nothing). Every caller -- the api, the layers, `rearr check` -- asks here."""
    if op == "reduce" and reduction.__class__ is str and reduction == "rearrange":
        return "rearrange", None
    return op, reduction


def validate(
    text: object,
    op: str,
    reduction: Reduction = None,
    lengths: Mapping[str, object] | None = None,
    complete: bool = False,
) -> RearrError | None:
    """The library's own checks, as a value: None when the call is valid.

    ``lengths`` maps keyword names to their values, or to UNKNOWN where the
    value is not known without running (a variable). `rearr check` and the
    layers' constructors use this; the library raises the same errors.
    With ``complete``, the keywords are all that the call passes (a function
    call without ``**kwargs``; a layer takes its indexes later): an index among
    none of them was not passed.
    """
    lengths = dict(lengths or {})
    try:
        recipe = analyze(text, op, reduction, tuple(sorted(lengths)))  # type: ignore[arg-type]
        for name, value in lengths.items():
            if value is not UNKNOWN and name not in recipe.index_names:
                check_length_value(recipe, name, value)
        if complete:
            missing = [s for s in recipe.gathers + recipe.scatters if s.name not in lengths]
            if missing:
                raise index_not_passed(recipe, missing[0])
    except RearrError as e:
        return e
    return None


def swapped_arguments(op: str, pattern: str) -> RearrError:
    """A call that passes the pattern where the tensor goes: ``rearrange('b c -> c b', x)``."""
    return RearrError(f"{op} was given the pattern first: the tensor comes first, then the pattern", code="RA500",
                      pattern=pattern, hint=f"swap them: {op}(x, {pattern!r}, ...)", op=op)


def index_not_passed(recipe: Recipe, spec: IndexSpec) -> RearrError:
    """An index of the pattern that the call does not pass (the planner; rearr check for a call that
    passes every keyword in its source)."""
    return _err(recipe.text, "RA301", f"index {spec.name!r} was not passed", spec.col,
                f"pass it as a keyword: {spec.name}=<integer tensor>")


def einsum_operand_count(recipe: Recipe, tensors: int) -> RearrError | None:
    """The error of an einsum given another number of tensors than its pattern has operands, or None."""
    if len(recipe.inputs) == tensors:
        return None
    return RearrError(f"the pattern has {len(recipe.inputs)} input operands, {tensors} tensors were given",
                      code="RA206", pattern=recipe.text, hint="give one operand per tensor, separated by ','")


def check_length_value(recipe: Recipe, name: str, value: object,
                       fitting: Callable[[int], int] | None = None) -> int:
    """The int a length keyword stands for (the cache key is always that int), or RA305 saying why not.
    ``fitting(near)``: the length nearest to ``near`` that the call's shapes take for ``name``, which the
    fix offers (the library knows the shapes; `rearr check` does not, and offers ``near``)."""
    value = traced_length(value)
    number = value if isinstance(value, numbers.Integral) else _zero_d_integer(value)
    if not isinstance(value, bool) and number is not None and 0 <= int(number) <= INT64_MAX:
        return int(number)
    what, fix = _not_a_length(name, value, number, fitting or _as_is)
    raise _err(recipe.text, "RA305", f"length {name}={_shown(value)} {what}", recipe.col(name), fix)


def _as_is(near: int) -> int:
    return near


def _not_a_length(name: str, value: object, number: object, fitting: Callable[[int], int]) -> tuple[str, str]:
    """What a length keyword's value is instead of a length, and the keyword as it should be passed: the
    int the value stands for where it is a length that fits, else a length that fits."""
    sized, held = _sized(value), None  # held: the int the value stands for
    if isinstance(value, bool) or "bool" in str(getattr(value, "dtype", "")) and not sized:
        what, held = "is a bool, not a length", int(bool(value))
    elif number is not None:
        held = int(number)  # type: ignore[call-overload]
        what = "is negative" if held < 0 else "is larger than int64 counts (2**63 - 1)"
    else:
        shape = getattr(value, "shape", None)
        what = f"is an array of shape {tuple(shape)}, not one integer" if shape is not None and sized else \
            f"is a {type(value).__name__}, not an integer"
        held = _held_integer(value)
    if held is not None and held < 0:
        return what, f"pass a length of 0 or more, e.g. {name}={fitting(4)}"
    if held is not None and held > INT64_MAX:
        return what, f"pass a length below 2**63, e.g. {name}={fitting(4)}"
    if held is None:
        return what, f"pass an int, e.g. {name}={fitting(_nearest_int(value))}"
    fits = fitting(held)
    if fits != held:
        return what, f"pass an int that fits the shape: {name}={held} does not, {name}={fits} does"
    holds = sized or isinstance(value, list | tuple)
    return what, f"pass the int it holds: {name}={held}" if holds else f"pass {name}={held}"


def _sized(value: object) -> bool:
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) > 0


def _held_integer(value: object) -> int | None:
    """The integer a value that is no length stands for, else None: a whole float (2.0, np.float32(2.0),
    np.array(2.0)), the one element of a list, tuple, array or tensor ([3], (3,), np.array([3], '>i8'),
    torch.tensor([3.0])), a str of digits ('3'). Bools stand for none."""
    while isinstance(value, list | tuple) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        return int(value) if value.isascii() and value.isdigit() and len(value) <= 20 else None
    if getattr(value, "shape", None) is not None:
        try:
            if math.prod(value.shape) != 1:  # type: ignore[attr-defined]
                return None
            value = value.reshape(()).item()  # type: ignore[attr-defined]  # a Python int, float or bool
        except (TypeError, ValueError, AttributeError, RuntimeError, NotImplementedError):
            return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    f = float(value)
    return int(f) if math.isfinite(f) and f.is_integer() else None


def _nearest_int(value: object) -> int:
    """The length a fix offers near a value that stands for no integer: 3.5 -> 4 (round), else 4."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value)):
        return min(max(round(float(value)), 1), INT64_MAX)
    return 4


def _shown(value: object) -> str:
    """value as a message writes it: an integer as errors.shown_int writes it (2**70 short, a uint64 as
    written), anything else as repr writes it, cut short (a list of a million items)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return shown_int(value)  # type: ignore[arg-type]
    return _REPR.repr(value)


_REPR = reprlib.Repr()
_REPR.maxother = _REPR.maxstring = 60


def traced_length(n: object) -> object:
    """A length that torch.jit.trace hands out as a 0-d tensor (x.shape[i] while it traces) as its int,
    read without the tracer's TracerWarning; anything else as it is. The plan is made for the traced
    shapes, which the trace keeps as constants (docs/torch_compile.md), as torch's own modules do with
    theirs, whose warnings torch silences alike."""
    torch = sys.modules.get("torch")  # a tensor's library is imported: rearr never imports it for this
    if torch is None or type(n) is not torch.Tensor or not torch.jit.is_tracing():
        return n
    with warnings.catch_warnings():  # only while tracing, which is one thread's work
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return int(n)


def _zero_d_integer(value: object) -> int | None:
    """A 0-d integer array or tensor as einops accepts it (np.array(2), torch.tensor(2), and
    x.shape[0] under torch.jit.trace), else None. Bools and floats are not lengths."""
    dtype = getattr(value, "dtype", None)
    if getattr(value, "shape", None) != () or dtype is None or "bool" in str(dtype):
        return None
    try:
        return operator.index(value)  # integer dtypes only: 2.0 is refused here, as a float is
    except TypeError:
        return None


# --- the parts of analyze ----------------------------------------------------


def _check_arrow(pattern: ir.Pattern, op: str) -> None:
    if op in ARROW_OPS and pattern.outputs is None:
        raise _err(
            pattern.text, "RA101", f"{op} needs '->' between input and output", len(pattern.text),
            "write the input axes, '->', then the output axes, e.g. 'b c h -> b (c h)'",
        )
    if op in BARE_OPS and pattern.outputs is not None:
        raise _err(
            pattern.text, "RA101", f"{op} takes no '->'", pattern.arrow,
            "write one side only, e.g. 'b * c'" if op != "parse_shape" else "write one side only, e.g. 'b _ h w'",
        )


def _walk(pattern: ir.Pattern):
    """Every node with the side it is on: (side, operand index, node, in_group)."""
    for side, operands in (("input", pattern.inputs), ("output", pattern.outputs or ())):
        for k, operand in enumerate(operands):
            for dim in operand.dims:
                if isinstance(dim, ir.Group):
                    yield side, k, dim, False
                    for item in dim.items:
                        yield side, k, item, True
                else:
                    yield side, k, dim, False


def _check_tokens(pattern: ir.Pattern, op: str) -> None:
    text = pattern.text
    for side, _, node, in_group in _walk(pattern):
        if isinstance(node, ir.Star) and op not in ("pack", "unpack"):
            raise _err(text, "RA205", f"'*' is only for pack and unpack, not {op}", node.col,
                       "name the axes, or use '...' for any number of axes")
        if isinstance(node, ir.Skip) and op != "parse_shape":
            raise _err(text, "RA205", f"'_' is only for parse_shape, not {op}", node.col,
                       "give the axis a name")
        if isinstance(node, ir.Axis):
            _check_name(text, node.name, node.col)
            if node.index is not None:
                idx = node.index
                if op not in ("rearrange", "scatter") or (op == "rearrange" and side == "output"):
                    where = "on the output side of rearrange" if op == "rearrange" else f"in {op}"
                    raise _err(text, "RA204", f"an index bracket is not allowed {where}", idx.col - 1,
                               "gather with rearrange (bracket on the input side); "
                               "scatter with rearr.scatter (bracket on the output side)")
                if in_group:
                    raise _err(text, "RA204", "an index bracket cannot be inside a group", idx.col - 1,
                               "index the axis outside the parentheses, then group the result")
                _check_name(text, idx.name, idx.col)
                for name, col in zip(idx.axes or (), idx.axes_cols):
                    _check_name(text, name, col)
        if isinstance(node, ir.Anon) and node.value == 0:
            raise _err(text, "RA203", "an axis of length 0 cannot be written as a literal", node.col,
                       "use 1 or () for a unit axis, or a named axis")


def _check_name(text: str, name: str, col: int) -> None:
    if name.startswith("_") or name.endswith("_"):
        raise _err(text, "RA104", f"axis name {name!r} must not start or end with '_'", col,
                   "rename it; '_' alone means 'skip' in parse_shape only")


def _operand_dims(
    text: str, operand: ir.Operand, side: str, op: str, anon: dict[str, int], cols: dict[str, int]
) -> tuple[Dim, ...]:
    """Flatten one operand into Dims of elementary names; anon axes get unique names."""
    dims: list[Dim] = []
    seen_ellipsis: int | None = None
    for dim in operand.dims:
        items = dim.items if isinstance(dim, ir.Group) else (dim,)
        names: list[str] = []
        for item in items:
            if isinstance(item, ir.Ellipsis):
                if seen_ellipsis is not None:
                    raise _err(text, "RA202", "'...' appears twice on one side", item.col,
                               "an ellipsis stands for any number of axes: use it once a side")
                if isinstance(dim, ir.Group) and side == "input" and op != "einsum":
                    raise _err(text, "RA202", "'...' cannot be inside a group on the input side", item.col,
                               "write '... c -> (...) c' rather than '(... c) -> ...'")
                seen_ellipsis = item.col
                names.append(ELLIPSIS)
                cols.setdefault(ELLIPSIS, item.col)
            elif isinstance(item, ir.Anon):
                if item.value == 1:
                    continue  # a unit axis: no elementary axis at all
                allowed = (op == "reduce" and side == "input") or (op == "repeat" and side == "output")
                if not allowed:
                    hint = {
                        "rearrange": "use a named axis with a length keyword, e.g. '(h h2)' and h2=2",
                        "reduce": "an integer on the output side of reduce is not allowed; use 1 or ()",
                        "repeat": "an integer on the input side of repeat is not allowed; use 1 or ()",
                    }.get(op, "use a named axis")
                    raise _err(text, "RA203", f"an anonymous axis ({item.value}) is not allowed here in {op}",
                               item.col, hint)
                name = anonymous_axis(item.value, item.col)
                anon[name] = item.value
                cols[name] = item.col
                names.append(name)
            else:
                assert isinstance(item, ir.Axis)
                names.append(item.name)
                cols.setdefault(item.name, item.col)
        dims.append(Dim(tuple(names), dim.col, isinstance(dim, ir.Group)))
    return tuple(dims)


def _check_duplicates(text: str, operand: ir.Operand) -> None:
    seen: set[str] = set()
    for dim in operand.dims:
        for node in dim.items if isinstance(dim, ir.Group) else (dim,):
            if isinstance(node, ir.Axis):
                if node.name in seen:
                    raise _err(text, "RA201", f"axis {node.name!r} appears twice on one side", node.col,
                               "each axis appears at most once a side; rename one of them")
                seen.add(node.name)


def _axis_names(dims: tuple[Dim, ...]) -> list[str]:
    """The elementary axis names of a side, in order (groups opened)."""
    return [n for d in dims for n in d.names]


class _Sides(Record):
    """A transform's two sides as _transform_recipe reads them, its brackets resolved."""

    text: str
    ins: tuple[Dim, ...]
    outs: tuple[Dim, ...]
    anon: dict[str, int]  # anonymous axes' names and lengths
    cols: dict[str, int]  # first column of every axis name
    gathers: tuple[IndexSpec, ...]
    scatters: tuple[IndexSpec, ...]
    only_in: list[str]  # axes of the (gathered) input that the output lacks
    only_out: list[str]  # output axes that the (gathered) input lacks

    @property
    def index_names(self) -> list[str]:
        return [s.name for s in self.gathers + self.scatters]


def _transform_recipe(pattern: ir.Pattern, op: str, reduction: Reduction, length_names: tuple[str, ...]) -> Recipe:
    """rearrange, reduce, repeat and scatter: the sides and brackets, then what the operation allows of
    the axes on one side only (_ONE_SIDED), then the length keywords."""
    s = _sides(pattern, op)
    _ONE_SIDED[op](s, op, reduction, length_names)
    _check_keywords(s, length_names)
    _check_inferable(s.text, s.ins, set(length_names) | set(s.anon))
    return Recipe(op, s.text, reduction, (s.ins,), (s.outs,), tuple(s.anon.items()), s.gathers, s.scatters,
                  tuple(s.cols.items()))


def _sides(pattern: ir.Pattern, op: str) -> _Sides:
    """Each side's dims and brackets (RA201-RA204): '...' on both sides (reduce may drop it), a gather's
    axes among the output's, a scatter's among the gathered input's, no axis both read through an index
    and kept."""
    text = pattern.text
    anon: dict[str, int] = {}
    cols: dict[str, int] = {}
    (left,), (right,) = pattern.inputs, pattern.outputs  # type: ignore[misc]
    _check_duplicates(text, left)
    _check_duplicates(text, right)
    ins = _operand_dims(text, left, "input", op, anon, cols)
    outs = _operand_dims(text, right, "output", op, anon, cols)
    gathers, scatters = _index_specs(text, left), _index_specs(text, right)
    if op == "scatter" and not scatters:
        raise _err(text, "RA204", "scatter needs an index bracket on the output side", right.col,
                   "write the axis that is written to with its index, e.g. 'b k -> b n[idx]'")
    gathered, scattered = {g.axis for g in gathers}, {s.axis for s in scatters}
    in_axes = [n for n in _axis_names(ins) if n not in gathered]
    out_axes = [n for n in _axis_names(outs) if n not in scattered]
    _check_ellipsis(text, op, ELLIPSIS in in_axes, ELLIPSIS in _axis_names(outs), cols)
    gathers, scatters, middle = _resolve_indexes(text, op, gathers, scatters, in_axes, out_axes, cols)
    out_set, middle_set = set(out_axes), set(middle)  # sets: patterns with 10,000 axes stay linear
    return _Sides(text, ins, outs, anon, cols, gathers, scatters, [a for a in middle if a not in out_set],
                  [a for a in out_axes if a not in middle_set])


def _check_ellipsis(text: str, op: str, in_has: bool, out_has: bool, cols: dict[str, int]) -> None:
    if out_has and not in_has:
        raise _err(text, "RA202", "'...' on the output side but not on the input side", cols[ELLIPSIS],
                   "add '...' to the input side too")
    if in_has and not out_has and op != "reduce":
        raise _err(text, "RA202", "'...' on the input side but not on the output side", cols[ELLIPSIS],
                   "add '...' to the output side (only reduce may drop it, by reducing those axes)")


def _resolve_indexes(text: str, op: str, gathers: tuple[IndexSpec, ...], scatters: tuple[IndexSpec, ...],
                     in_axes: list[str], out_axes: list[str], cols: dict[str, int]
                     ) -> tuple[tuple[IndexSpec, ...], tuple[IndexSpec, ...], list[str]]:
    """The brackets with their axes (declared, or the default ones), and the gathered tensor's axes
    (the middle tensor's, which a scatter writes from)."""
    if not gathers and not scatters:  # no bracket: the middle tensor is the input
        return gathers, scatters, in_axes
    if gathers and scatters:
        for spec in gathers + scatters:
            if not spec.declared:
                raise _err(text, "RA204", f"index {spec.name!r} needs its axes written out when both sides are indexed",
                           spec.col, f"write them after ':', e.g. '[{spec.name}: e]'")
    # Gathers: an index's default axes are the output's; declared ones must be output axes.
    # (With brackets on both sides, a gather's axes are the middle tensor's, checked as the scatter's source.)
    gathers = tuple(_resolve_index(text, g, out_axes, "both" if scatters else "output", cols) for g in gathers)
    introduced = [a for g in gathers for a in g.axes if a not in in_axes]
    middle = in_axes + list(dict.fromkeys(introduced))
    scatters = tuple(_resolve_index(text, s, middle, "input", cols) for s in scatters)
    _check_index_names(text, op, gathers + scatters, set(in_axes) | set(out_axes) | set(middle))
    for s in scatters:
        if s.axis in middle:
            raise _err(text, "RA204", f"axis {s.axis!r} is written by index {s.name!r} but also read from the input",
                       s.col - 1, f"the written axis is new on the output side: rename it, e.g. '{s.axis}2[{s.name}]'")
    for g in gathers:
        if g.axis in out_axes:
            raise _err(text, "RA204",
                       f"axis {g.axis!r} is read through index {g.name!r} and must not also be an output axis",
                       cols.get(g.axis), f"drop {g.axis!r} from the output side; the index's axes take its place")
    return gathers, scatters, middle


# --- what each operation allows of an axis on one side only ---------------------------------------


def _rearrange_sides(s: _Sides, op: str, reduction: Reduction, length_names: tuple[str, ...]) -> None:
    """None: every axis is on both sides."""
    _renamed(s.text, op, reduction, length_names, s.only_in, s.only_out, s.cols)
    _one_side(s.text, s.only_in, s.cols, "input", op, "use rearr.reduce to aggregate it, or add it to the output")
    _one_side(s.text, s.only_out, s.cols, "output", op, "use rearr.repeat to add a new axis, or add it to the input")


def _reduce_sides(s: _Sides, op: str, reduction: Reduction, length_names: tuple[str, ...]) -> None:
    """Input axes: those are reduced."""
    _renamed(s.text, op, reduction, length_names, s.only_in, s.only_out, s.cols)
    _one_side(s.text, s.only_out, s.cols, "output", op, "an output axis must come from the input")


def _repeat_sides(s: _Sides, op: str, reduction: Reduction, length_names: tuple[str, ...]) -> None:
    """Output axes, each with a length (a keyword, or an anonymous axis's): the input repeats along them."""
    new = [a for a in s.only_out if a not in length_names and a not in s.anon]  # no length given
    _renamed(s.text, op, reduction, length_names, s.only_in, new, s.cols)
    _one_side(s.text, s.only_in, s.cols, "input", op, "use rearr.reduce to remove an axis")
    if new:
        axes = set(_axis_names(s.ins)) | set(_axis_names(s.outs))
        given = unused_rename(new, [n for n in length_names if n not in axes and n not in s.index_names])
        raise _err(s.text, "RA301", f"the new axis {new[0]!r} has no length", s.cols.get(new[0]),
                   f"rename {given}= to {new[0]}=" if given else f"pass its length as a keyword, e.g. {new[0]}=3")


def unused_rename(missing: Sequence[str], unused: Sequence[str]) -> str | None:
    """The unused keyword that most likely is the length of ``missing[0]``: the only one beside the only axis
    without a length, however it is spelt, or else the nearest in spelling (repeat here, EinMix's weight)."""
    if len(missing) == 1 and len(unused) == 1:
        return unused[0]
    return nearest(missing[0], list(unused))


def _scatter_sides(s: _Sides, op: str, reduction: Reduction, length_names: tuple[str, ...]) -> None:
    """Input axes that an index combines (its axes), by the reduction."""
    _renamed(s.text, op, reduction, length_names, s.only_in, s.only_out, s.cols)
    _one_side(s.text, s.only_out, s.cols, "output", op, "an output axis must come from the input or an index")
    combined = {a for spec in s.scatters for a in spec.axes}
    _one_side(s.text, [a for a in s.only_in if a not in combined], s.cols, "input", op,
              "add it to the output, or to the index's axes so that it is combined by the reduction")


_ONE_SIDED = {"rearrange": _rearrange_sides, "reduce": _reduce_sides, "repeat": _repeat_sides,
              "scatter": _scatter_sides}


def _check_keywords(s: _Sides, length_names: tuple[str, ...]) -> None:
    """Every length keyword names an axis or an index; one that names neither is most likely a
    misspelt index (named where it is) or axis."""
    if not length_names:
        return
    known = set(_axis_names(s.ins)) | set(_axis_names(s.outs)) | {a for i in s.gathers + s.scatters for a in i.axes}
    for name in length_names:
        if name in s.index_names or name in known:
            continue
        missing = [i for i in s.gathers + s.scatters if i.name not in length_names]
        if missing:  # most likely a misspelt index: name it, where it is
            guess = nearest(name, [i.name for i in missing])
            missing = [i for i in missing if i.name == guess] or missing
            wanted = " or ".join(f"{i.name}=" for i in missing)
            raise _err(s.text, "RA300", f"keyword {name}= names no axis or index of the pattern, and index "
                       f"{missing[0].name!r} was not passed", missing[0].col,
                       f"if {name}= is the index, rename it to {wanted}")
        raise _unused_keyword(s.text, name, known, length_names, (s.ins,))


def _check_inferable(text: str, dims: Sequence[Dim], known: set[str]) -> None:
    """An input group gives the length of one axis that nothing else gives (a keyword, another input
    dimension), never of two: fails whatever the shapes."""
    groups = [d for d in dims if len(d.names) > 1]  # only a group can hold two unknown axes
    if not groups:
        return
    dims_of = Counter(n for d in dims for n in set(d.names))  # how many dimensions hold each axis
    for dim in groups:
        unknown = [n for n in dim.names if n not in known and dims_of[n] == 1]
        if len(unknown) > 1:
            raise two_unknowns(text, unknown, dim.col)


def two_unknowns(text: str, unknown: Sequence[str], col: int | None, where: str = "one input dimension",
                 example: str | None = None) -> RearrError:
    """RA301 for a group with two axes or more whose lengths nothing gives, in one wording: found here
    from the pattern alone, or by the length solver (planning/lengths.py) from the shapes."""
    names = ", ".join(map(repr, unknown[:-1])) + f" and {unknown[-1]!r}"
    both = "both " if len(unknown) == 2 else ""
    return _err(text, "RA301", f"cannot infer {both}{names} from {where}", col,
                f"pass the length of all but one axis of the group, e.g. {example or unknown[0] + '=...'}")


def _unused_keyword(text: str, name: str, known: set[str], given: tuple[str, ...],
                    inputs: Sequence[Sequence[Dim]] = ()) -> RearrError:
    """RA300 for a length keyword that names no axis: the axis it most likely misspells, where renaming
    it can help; an axis that is a whole input dimension has its length from the input (``inputs``: the
    input operands' dims), and one already given has it from its own keyword."""
    axes = sorted(known - {ELLIPSIS})
    fixed = {d.names[0] for dims in inputs for d in dims if len(d.names) == 1}
    guess = nearest(name, [a for a in axes if a not in given and a not in fixed])
    near = guess or nearest(name, axes)
    if guess:
        hint = f"rename {name}= to {guess}= (the axes are {', '.join(axes)})"
    elif near in given:
        hint = f"remove {name}=: {near}= is given already"
    elif near:
        hint = f"remove {name}=: the input's shape gives {near!r} its length"
    else:
        hint = f"remove {name}=, or check its spelling (axes: {', '.join(axes)})"
    return _err(text, "RA300", f"length keyword {name}= names no axis of the pattern", None, hint)


def _renamed(text: str, op: str, reduction: Reduction, length_names: tuple[str, ...], only_in: list[str],
             only_out: list[str], cols: dict[str, int]) -> None:
    """Axes on one side only, on both sides: most likely one axis under two names (or one axis written
    as two). Name them all, and offer the first fix whose pattern is valid with the call's keywords:
    the output's names renamed to the input's, the input's to the output's (when the keywords name
    the output's), an input axis written as the output's group it spells (`rd` as `(r d)`), or an
    output axis as the input's group. With no valid fix, none is offered.

    rearrange and repeat take every one-sided axis; reduce and scatter, which drop input axes on
    purpose, only an output axis with an input axis of a close name."""
    only_in, only_out = [a for a in only_in if a != ELLIPSIS], [a for a in only_out if a != ELLIPSIS]
    if op in ("rearrange", "repeat"):
        ins, outs = only_in, only_out
    else:
        pairs = [(o, guess) for o in only_out if (guess := nearest(o, only_in))]
        ins, outs = [i for _, i in pairs], [o for o, _ in pairs]
    if not ins or not outs:
        return
    message = (f"{_names(ins)} {'appears' if len(ins) == 1 else 'appear'} only on the input side and "
               f"{_names(outs, axes=False)} only on the output side of {op}")

    def valid(fixed: str, extra: tuple[str, ...] = ()) -> bool:
        try:
            analyze(fixed, op, reduction, length_names + extra)
        except RearrError:
            return False
        return True

    hint = None
    for fix, says, first in _fixes(text, ins, outs, cols):
        if valid(fix):
            hint = f"{says}: '{fix}'"
            break
        if first is not None and first not in length_names and valid(fix, (first,)):  # the group needs a length
            hint = f"{says}, and pass {first}= its length: '{fix}'"
            break
    raise _err(text, "RA200", message, cols.get(ins[0]), hint or (
        "give each axis one name on both sides" + ("" if op != "rearrange" else
                                                   " (rearr.reduce drops axes, rearr.repeat adds them)")))


def _names(names: list[str], axes: bool = True) -> str:
    """"axis 'a'", "axes 'a', 'b'" (or without the noun)."""
    listed = ", ".join(map(repr, names))
    return f"{'axis' if len(names) == 1 else 'axes'} {listed}" if axes else listed


def _fixes(text: str, ins: list[str], outs: list[str], cols: dict[str, int]
           ) -> Iterator[tuple[str, str, str | None]]:
    """(the fixed pattern, what the fix says, the first axis of the group it writes, if it writes one) for
    each way that one-sided axes may be one axis."""
    if len(ins) == len(outs):
        renames = list(zip(outs, ins))
        yield (_replace(text, {o: i for o, i in renames}, cols),
               f"if the output's {_names(outs, False)} {'is' if len(outs) == 1 else 'are'} the input's "
               f"{_names(ins, False)}, rename " + " and ".join(f"{o!r} to {i!r}" for o, i in renames), None)
        yield (_replace(text, {i: o for o, i in renames}, cols),
               f"if the input's {_names(ins, False)} {'is' if len(ins) == 1 else 'are'} the output's "
               f"{_names(outs, False)}, rename " + " and ".join(f"{i!r} to {o!r}" for o, i in renames), None)
    for whole, parts, side in [*((i, outs, "input") for i in ins), *((o, ins, "output") for o in outs)]:
        spelt = _spelt_by(whole, parts, text, cols)
        if spelt:
            group = f"({' '.join(spelt)})"
            other = "output" if side == "input" else "input"
            yield (_replace(text, {whole: group}, cols),
                   f"if the {side}'s {whole!r} is the {other}'s {' and '.join(map(repr, spelt))} together, "
                   f"write it '{group}'", spelt[0])


def _spelt_by(whole: str, parts: list[str], text: str, cols: dict[str, int]) -> list[str] | None:
    """The one-sided axes of the other side that spell ``whole`` in the order they are written, or None."""
    ordered = sorted((p for p in parts if p in whole), key=lambda p: cols.get(p, -1))
    for start in range(len(ordered)):
        for end in range(start + 2, len(ordered) + 1):
            if "".join(ordered[start:end]) == whole:
                return ordered[start:end]
    return None


def _replace(text: str, renames: dict[str, str], cols: dict[str, int]) -> str:
    """The pattern with each axis (at its column) written anew; from the right, so that columns stay."""
    for name in sorted(renames, key=lambda n: -cols.get(n, -1)):
        at = cols.get(name, -1)
        if at < 0 or text[at: at + len(name)] != name:
            return ""
        text = text[:at] + renames[name] + text[at + len(name):]
    return text


def _one_side(text: str, names: list[str], cols: dict[str, int], side: str, op: str, hint: str) -> None:
    if names:
        name = names[0]
        what = "'...'" if name == ELLIPSIS else f"axis {name!r}"
        raise _err(text, "RA200", f"{what} appears only on the {side} side of {op}", cols.get(name), hint)


def index_specs(pattern: ir.Pattern) -> tuple[IndexSpec, ...]:
    """Every bracket of a pattern, both sides, as written."""
    return tuple(s for op in pattern.inputs + (pattern.outputs or ()) for s in _index_specs(pattern.text, op))


def _index_specs(text: str, operand: ir.Operand) -> tuple[IndexSpec, ...]:
    out = []
    for dim in operand.dims:
        if isinstance(dim, ir.Axis) and dim.index is not None:
            idx = dim.index
            out.append(IndexSpec(idx.name, dim.name, tuple(idx.axes or ()), idx.col, idx.axes is not None))
    return tuple(out)


def _resolve_index(text: str, spec: IndexSpec, other: list[str], side: str, cols: dict[str, int]) -> IndexSpec:
    if not spec.declared:
        return IndexSpec(spec.name, spec.axis, tuple(other), spec.col, False)
    seen: set[str] = set()
    for name in spec.axes:
        if name in seen:
            raise _err(text, "RA201", f"axis {name!r} appears twice in index {spec.name!r}", spec.col,
                       "each axis of an index appears once")
        seen.add(name)
        if side == "input" and name not in other:
            raise _err(text, "RA204", f"index {spec.name!r} has axis {name!r}, which the source does not have",
                       spec.col, f"the axes of a scatter index are the input's: {' '.join(other)}")
        if side == "output" and name not in other:
            raise _err(text, "RA204", f"index {spec.name!r} has axis {name!r}, which the output does not have",
                       spec.col, f"the axes of a gather index are output axes: {' '.join(other)}")
        cols.setdefault(name, spec.col)
    return spec


def _check_index_names(text: str, op: str, specs: tuple[IndexSpec, ...], axes: set[str]) -> None:
    seen: set[str] = set()
    for s in specs:
        if s.name in CALL_KEYWORDS.get(op, ()):
            raise _err(text, "RA204", f"index {s.name!r} has the name of {op}'s own keyword {s.name}=", s.col,
                       f"rename the index, e.g. [{s.name}_idx], and pass it as {s.name}_idx=")
        if s.name in seen:
            raise _err(text, "RA204", f"index {s.name!r} is used twice", s.col,
                       "give each indexed axis its own index keyword")
        if s.name in axes:
            raise _err(text, "RA204", f"index {s.name!r} has the name of an axis", s.col,
                       "rename the index keyword so that it differs from every axis name")
        seen.add(s.name)


def _check_reduction(text: str, op: str, reduction: Reduction) -> None:
    if op == "reduce":
        if callable(reduction) or reduction in REDUCTIONS:
            return
        choices = REDUCTIONS
    elif op == "scatter":
        if reduction in SCATTER_REDUCTIONS:
            return
        choices = SCATTER_REDUCTIONS
    else:
        return
    # One edit at most: a guess two edits away ('median' -> 'mean') would compute something else.
    guess = nearest(reduction, choices, limit=1) if isinstance(reduction, str) else None
    callable_too = " or a callable f(x, axes)" if op == "reduce" else ""
    hint = (f"use {guess!r} (the reductions are {', '.join(choices)}{callable_too})" if guess
            else f"use one of {', '.join(choices)}{callable_too}")
    raise RearrError(f"unknown reduction {reduction!r} for {op}", code="RA400", pattern=text, hint=hint)


def _einsum_recipe(pattern: ir.Pattern, length_names: tuple[str, ...]) -> Recipe:
    """An einsum's recipe; a pattern in numpy's letter style ('ij,jk->ik') that fails is told that
    names are words, with the spaced pattern when that one is valid."""
    try:
        return _einsum_words(pattern, length_names)
    except RearrError as e:
        spaced = _spaced(pattern)
        if spaced is None:
            raise
        try:
            analyze(spaced, "einsum", None, length_names)
        except RearrError:
            raise e from None
        raise _err(pattern.text, e.code, f"{e.message}: names are words separated by spaces, so each of "
                   f"{', '.join(_words(pattern))} is one axis", e.col,
                   f"write each letter as its own axis: '{spaced}'") from None


def _words(pattern: ir.Pattern) -> list[str]:
    return [repr(d.name) for op in pattern.inputs + (pattern.outputs or ()) for d in op.dims if isinstance(d, ir.Axis)]


def _spaced(pattern: ir.Pattern) -> str | None:
    """'ij,jk->ik' as 'i j, j k -> i k': when every operand is one word of letters (after a '...'), and
    some word has more than one; None otherwise."""
    operands = []
    for operand in pattern.inputs + (pattern.outputs or ()):
        dims = operand.dims
        ellipsis = bool(dims) and isinstance(dims[0], ir.Ellipsis)
        words = dims[1:] if ellipsis else dims
        if len(words) > 1 or any(not isinstance(d, ir.Axis) or d.index is not None or not d.name.isalpha()
                                 for d in words):
            return None
        operands.append(" ".join((["..."] if ellipsis else []) + [c for d in words for c in d.name]))
    if all(len(d.name) == 1 for op in pattern.inputs + (pattern.outputs or ()) for d in op.dims
           if isinstance(d, ir.Axis)):
        return None
    return ", ".join(operands[:-1]) + " -> " + operands[-1]


def _einsum_words(pattern: ir.Pattern, length_names: tuple[str, ...]) -> Recipe:
    """Operands of names, '...', groups '(h w)' and unit axes ('1', '()'); groups are lowered by the
    api to reshapes around the backend's einsum, so each group needs its lengths (keywords or other
    operands)."""
    text = pattern.text
    cols: dict[str, int] = {}
    if len(pattern.outputs or ()) != 1:  # checked before unpacking: 'i j -> i, j' is a RearrError too
        raise _err(text, "RA206", "einsum has exactly one output operand", pattern.arrow,
                   "write one operand after '->'")
    (right,) = pattern.outputs  # type: ignore[misc]
    sides = []
    for k, operand in enumerate(pattern.inputs + (right,)):
        for dim in operand.dims:
            for item in dim.items if isinstance(dim, ir.Group) else (dim,):
                if isinstance(item, ir.Ellipsis) and isinstance(dim, ir.Group):
                    raise _err(text, "RA202", "'...' cannot be inside a group in einsum", item.col,
                               "write '...' as its own dimension; rearrange before or after the einsum")
                if isinstance(item, ir.Anon) and item.value != 1:
                    raise _err(text, "RA203", f"an anonymous axis ({item.value}) is not allowed in einsum",
                               item.col, f"name it and pass its length, e.g. 'a{item.value}' with "
                               f"a{item.value}={item.value}")
        side = "output" if k == len(pattern.inputs) else "input"
        try:
            sides.append(_operand_dims(text, operand, side, "einsum", {}, cols))
        except RearrError as e:  # '...' twice in one operand
            raise _err(text, e.code, "'...' appears twice in one operand", e.col, "use it once an operand") from None
    _check_duplicates(text, right)
    ins = {n for dims in sides[:-1] for n in _axis_names(dims)}
    for dim in sides[-1]:
        for name in dim.names:
            if name not in ins:
                what = "'...'" if name == ELLIPSIS else f"axis {name!r}"
                raise _err(text, "RA200", f"{what} appears only on the output side of einsum", cols.get(name, dim.col),
                           "every output axis must be in some input")
    known = ins | set(_axis_names(sides[-1]))
    for name in length_names:
        if name not in known or name == ELLIPSIS:
            raise _unused_keyword(text, name, known, length_names, sides[:-1])
    _check_inferable(text, [d for dims in sides[:-1] for d in dims], set(length_names))
    return Recipe("einsum", text, None, tuple(sides[:-1]), (sides[-1],), (), cols=tuple(cols.items()))


def _bare_recipe(pattern: ir.Pattern, op: str, length_names: tuple[str, ...]) -> Recipe:
    text = pattern.text
    if len(pattern.inputs) != 1:
        raise _err(text, "RA206", f"{op} takes one operand (no ',')", pattern.inputs[1].col, "remove the ','")
    (operand,) = pattern.inputs
    _check_duplicates(text, operand)
    dims = []
    stars = []
    cols: dict[str, int] = {}
    ellipsis = False
    for dim in operand.dims:
        if isinstance(dim, ir.Star):
            stars.append(dim.col)
            dims.append(Dim(("*",), dim.col))
        elif isinstance(dim, ir.Skip):
            dims.append(Dim(("_",), dim.col))
        elif isinstance(dim, ir.Ellipsis):
            if op != "parse_shape" or ellipsis:
                raise _err(text, "RA202", f"'...' is not allowed {'twice ' if ellipsis else ''}in {op}", dim.col,
                           "name the axes" if op != "parse_shape" else "use '...' once")
            ellipsis = True
            dims.append(Dim((ELLIPSIS,), dim.col))
        elif isinstance(dim, ir.Axis):
            if dim.index is not None:
                raise _err(text, "RA204", f"an index bracket is not allowed in {op}", dim.index.col - 1, "remove it")
            dims.append(Dim((dim.name,), dim.col))
            cols[dim.name] = dim.col
        elif isinstance(dim, ir.Anon) and op == "parse_shape":
            dims.append(Dim((anonymous_axis(dim.value, dim.col),) if dim.value != 1 else (), dim.col))
        elif isinstance(dim, ir.Group) and op == "parse_shape" and not dim.items:
            dims.append(Dim((), dim.col))
        else:
            what = "a group" if isinstance(dim, ir.Group) else "an integer axis"
            raise _err(text, "RA203", f"{what} is not allowed in {op}", dim.col, "use plain axis names")
    if op in ("pack", "unpack") and len(stars) != 1:
        raise _err(text, "RA205", f"{op} needs exactly one '*' (found {len(stars)})",
                   stars[1] if len(stars) > 1 else len(text), "mark the packed axes with one '*', e.g. 'b * c'")
    if length_names:
        raise _err(text, "RA300", f"{op} takes no length keywords ({', '.join(length_names)}=)", None, "remove them")
    return Recipe(op, text, None, (tuple(dims),), (), (), cols=tuple(cols.items()))
