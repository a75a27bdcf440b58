"""The rules of rearr.layers' constructors: the recipe stage of the layers, without torch.

rearr/layers.py raises what these functions find when a layer is built; `rearr check` (rearr/tools/lint.py,
which must never import torch) reports the same errors for the constructor calls it reads in source.
Each rule is written here once: neither of them has a copy.

EinMix's rules are einops' (einops/layers/_einmix.py). An EinMix is three steps: a rearrange of the
input to its flat axes, an einsum with the weight, a rearrange to the output; the two rearranges are
checked by `validate` itself, as the steps that run, and the einsum by `analyze`. rearr's EinMix also
takes groups and unit axes in weight_shape and bias_shape (``groups=True``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping

from .._record import Record
from ..errors import RearrError
from ..syntax import ir
from .arguments import check_bounds_error, fill_value, reduction_error
from .recipe import UNKNOWN, analyze, operation, parse, unused_rename, validate

LAYER_OPS = {"Rearrange": "rearrange", "Reduce": "reduce", "Repeat": "repeat", "Gather": "rearrange",
             "Scatter": "scatter"}


def layer_error(layer: str, pattern: object, reduction: object = None, lengths: Mapping[str, object] | None = None,
                fill: object = 0, check_bounds: object = True) -> RearrError | None:
    """What the constructor of ``layer`` (a key of LAYER_OPS) refuses in its arguments, or None.

    ``lengths`` maps names to values, UNKNOWN for a value that is not known (as in `validate`);
    a ``fill`` or ``check_bounds`` (Gather, Scatter) that is UNKNOWN is not checked. An index tensor
    comes with each call, never to the constructor: its name among the lengths is refused."""
    lengths = dict(lengths or {})
    op = LAYER_OPS[layer]
    if not isinstance(pattern, str):  # before any cache: a list pattern is not hashable
        try:
            parse(pattern)
        except RearrError as e:
            return e
    text = pattern if isinstance(pattern, str) else None
    err = reduction_error(op, reduction, text)
    if err is not None:
        return err
    op, reduction = operation(op, reduction)
    err = validate(pattern, op, reduction, lengths)
    if err is not None:
        return err
    r = analyze(pattern, op, reduction, tuple(sorted(lengths)))  # type: ignore[arg-type]  # valid: validated
    if layer == "Rearrange" and r.gathers:
        return RearrError("Rearrange takes no index brackets: their tensors come with each call", code="RA204",
                          pattern=text, col=r.gathers[0].col - 1,
                          hint=f"use rearr.layers.Gather({pattern!r}) and pass the index to forward")
    if layer == "Gather" and not r.gathers:
        return RearrError("Gather needs an index bracket on the input side", code="RA204", pattern=text, col=0,
                          hint="write the axis that is read with its index, e.g. 'b n[idx] -> b'; without one, "
                          "use rearr.layers.Rearrange")
    for spec in r.gathers + r.scatters:
        if spec.name in lengths:
            return RearrError(f"{spec.name!r} is an index: its tensor comes with each call, not to the constructor",
                              code="RA204", pattern=text, col=spec.col,
                              hint=f"drop {spec.name}= here and call the layer with {spec.name}=tensor")
    if layer == "Scatter" and fill is not UNKNOWN:
        try:
            fill_value(fill, text)
        except RearrError as e:
            return e
    if check_bounds is not UNKNOWN:
        err = check_bounds_error(check_bounds)
        if err is not None:
            return err.with_context(pattern=text)
    return None


# --- EinMix ----------------------------------------------------------------------------------


def validate_einmix(
    pattern: object, weight_shape: object, bias_shape: object = None, lengths: Mapping[str, object] | None = None,
    *, groups: bool = False,
) -> tuple[str, RearrError] | None:
    """EinMix's rules: None when they hold, else (the argument at fault -- 'pattern', 'weight_shape'
    or 'bias_shape' -- and the error, whose column is in that argument).

    ``groups``: rearr's EinMix, which takes groups and unit axes in the weight's and bias's shapes;
    einops' refuses them. A shape that is UNKNOWN skips the rules that need it; so does a length
    whose value is UNKNOWN."""
    lengths = dict(lengths or {})
    where = "pattern"
    try:
        if not isinstance(pattern, str):
            parse(pattern)  # raises: a pattern is a str
        assert isinstance(pattern, str)
        left, right = _einmix_sides(pattern, lengths)
        if weight_shape is not UNKNOWN:
            where = "weight_shape"
            weight = _einmix_axes(weight_shape, where, lengths, groups)
            for name, col in weight.items():
                if name not in lengths:
                    raise _no_length("weight", name, col, weight_shape, [n for n in weight if n not in lengths],
                                     [n for n in lengths if n not in left and n not in weight])
                if name not in left and name not in dict(right):
                    raise RearrError(f"weight axis {name!r} is neither an input nor an output axis", code="RA200",
                                     pattern=weight_shape, col=col, hint=f"remove {name!r} from weight_shape")
            where = "pattern"
            for name, col in right:
                if name not in left and name not in weight:
                    what = "'...'" if name == "..." else f"axis {name!r}"
                    raise RearrError(f"{what} appears only on the output side of EinMix", code="RA200",
                                     pattern=pattern, col=col, hint="add it to weight_shape (with its length), "
                                     "or to the input side")
            for name in lengths:
                if name not in left and name not in weight:
                    raise RearrError(f"length keyword {name}= names no axis of the input or the weight",
                                     code="RA300", pattern=pattern, hint=f"remove {name}=, or check its spelling")
            _as_einsum(pattern, str(weight_shape), right, lengths)
        if bias_shape is not None and bias_shape is not UNKNOWN:
            where = "bias_shape"
            bias = _einmix_axes(bias_shape, where, lengths, groups)
            for name, col in bias.items():
                if name not in dict(right):
                    raise RearrError(f"bias axis {name!r} is not an output axis", code="RA200", pattern=bias_shape,
                                     col=col, hint=f"remove {name!r} from bias_shape, or add it to the output")
                if name not in lengths:
                    raise _no_length("bias", name, col, bias_shape, [n for n in bias if n not in lengths],
                                     [n for n in lengths if n not in left and n not in bias and n not in (
                                         weight if weight_shape is not UNKNOWN else ())])
            where = "pattern"
            names = [name for name, _ in right]
            if "..." in names and any(name in bias for name in names[: names.index("...")]):
                raise RearrError("the bias axes must come after '...' in the output", code="RA202",
                                 pattern=pattern, col=dict(right)["..."],
                                 hint="move '...' before the bias axes in the output")
    except RearrError as e:
        return where, e
    return None


def _no_length(what: str, name: str, col: int, shape: object, missing: list[str], unused: list[str]) -> RearrError:
    """RA301 for a weight or bias axis without a length (the first of ``missing``): a keyword that names
    no axis (among ``unused``) is most likely its length."""
    given = unused_rename(missing, unused)
    return RearrError(f"{what} axis {name!r} has no length", code="RA301", pattern=shape, col=col,
                      hint=f"rename {given}= to {name}=" if given else f"pass its length as a keyword, e.g. {name}=...")


class EinMixSpec(Record):
    """What an EinMix that `validate_einmix` accepts computes, as plain data."""

    einsum: str  # the einsum of the input and the weight, to the output's flat axes
    post: str | None  # the rearrange from the flat axes to the output's groups, when it has any
    weight_shape: tuple[int, ...]
    bias_shape: tuple[int, ...] | None  # as einops: aligned with the flat output, a 1 for each other axis
    fan_in: int  # the product of the weight's axes that are not on the output (einops' initialisation)


def einmix_spec(pattern: str, weight_shape: str, bias_shape: str | None, lengths: Mapping[str, object]) -> EinMixSpec:
    """The EinMix of arguments that `validate_einmix` accepted (with ``groups=True``)."""
    p = parse(pattern)
    assert p.outputs is not None and p.arrow is not None
    ints = {name: operator.index(value) for name, value in lengths.items()}  # validated: ints or 0-d integers
    right_names = _names(p.outputs[0].dims)
    weight = parse(weight_shape).inputs[0].dims
    weight_names = _names(weight)
    flat_right = " ".join(right_names)
    einsum = f"{pattern[:p.arrow].strip()}, {weight_shape} -> {flat_right}"
    grouped = any(isinstance(d, ir.Group | ir.Anon) for d in p.outputs[0].dims)
    bias = None
    if bias_shape is not None:
        bias_names = set(_names(parse(bias_shape).inputs[0].dims))
        # '...' aligns to the trailing axes before the bias's: validate_einmix put the bias's after it.
        bias = tuple(ints[name] if name in bias_names else 1 for name in right_names if name != "...")
    return EinMixSpec(
        einsum=einsum,
        post=f"{flat_right} ->{pattern[p.arrow + 2:]}" if grouped else None,
        weight_shape=tuple(math.prod(ints[a] for a in _names((d,))) for d in weight),
        bias_shape=bias,
        fan_in=math.prod(ints[a] for a in weight_names if a not in right_names),
    )


def _names(dims: tuple) -> list[str]:
    """The axis names and '...' of some dims, in order (unit axes have none)."""
    out = []
    for dim in dims:
        for item in dim.items if isinstance(dim, ir.Group) else (dim,):
            if isinstance(item, ir.Axis):
                out.append(item.name)
            elif isinstance(item, ir.Ellipsis):
                out.append("...")
    return out


def _einmix_sides(pattern: str, lengths: dict[str, object]) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """The input's axes (name -> column) and the output's (in order); '...' is named '...'."""
    arrow = pattern.find("->")
    if arrow < 0:
        raise RearrError("EinMix's pattern is one input operand, '->', one output operand", code="RA206",
                         pattern=pattern, col=len(pattern), hint="e.g. 'b t c -> b t cout', with weight_shape='c cout'")
    parsed = parse(pattern)
    if len(parsed.inputs) != 1 or len(parsed.outputs or ()) != 1:
        extra = (parsed.inputs + (parsed.outputs or ()))[1 if len(parsed.inputs) > 1 else 2]
        raise RearrError("EinMix takes one operand on each side", code="RA206", pattern=pattern, col=extra.col,
                         hint="remove the ','")
    assert parsed.outputs is not None
    left = _einmix_items(pattern, parsed.inputs[0], "EinMix",
                         "rename one of them, e.g. {name}2: an input axis on neither the output nor the "
                         "weight is summed over")
    right = _einmix_items(pattern, parsed.outputs[0], "EinMix", "write it once on the output side")
    if ("..." in dict(left)) != ("..." in dict(right)):
        col = dict(left).get("...", dict(right).get("..."))
        raise RearrError("'...' must be on both sides of EinMix, or on neither", code="RA202", pattern=pattern,
                         col=col, hint="add '...' to the other side too")
    names = " ".join(name for name, _ in left)
    _as_rearrange(pattern, f"{pattern[:arrow]}-> {names}", 0, arrow, 0,
                  {k: v for k, v in lengths.items() if k in dict(left)})
    head = " ".join(name for name, _ in right) + " ->"
    _as_rearrange(pattern, head + pattern[arrow + 2:], len(head), len(pattern), arrow + 2, {})
    return dict(left), right


def _einmix_axes(text: object, arg: str, lengths: dict[str, object], groups: bool) -> dict[str, int]:
    """The axes of weight_shape or bias_shape (name -> column), each once; no '...'."""
    if not isinstance(text, str):
        raise RearrError(f"{arg} must be a string of axis names, not {type(text).__name__}", code="RA100",
                         hint=f"e.g. {arg}='c cout'")
    if "->" in text:
        raise RearrError(f"{arg} takes no '->'", code="RA101", pattern=text, col=text.index("->"),
                         hint="write its axes only, e.g. 'c d'")
    parsed = parse(text)
    if len(parsed.inputs) != 1:
        raise RearrError(f"{arg} is one list of axes", code="RA206", pattern=text, col=parsed.inputs[1].col,
                         hint="remove the ','")
    (operand,) = parsed.inputs
    for dim in operand.dims:
        if isinstance(dim, ir.Group) and not groups:
            raise RearrError(f"parentheses are not allowed in einops' {arg}", code="RA203", pattern=text,
                             col=dim.col, hint="list the axes one by one, without parentheses")
        for item in dim.items if isinstance(dim, ir.Group) else (dim,):
            if isinstance(item, ir.Ellipsis):
                raise RearrError(f"'...' is not allowed in {arg}: its shape must be known", code="RA202",
                                 pattern=text, col=item.col, hint="name the axes")
            if isinstance(item, ir.Anon) and item.value == 1 and not groups:
                raise RearrError(f"a unit axis is not allowed in einops' {arg}", code="RA203", pattern=text,
                                 col=item.col, hint="remove it")
    axes = dict(_einmix_items(text, operand, arg, f"write it once in {arg}: remove the second {{name!r}}"))
    _as_rearrange(text, f"{text}->{text}", 0, len(text), 0, {k: v for k, v in lengths.items() if k in axes})
    return axes


def _einmix_items(text: str, operand: ir.Operand, where: str, twice: str) -> list[tuple[str, int]]:
    """(name, column) of each axis and '...' of an operand, in order; unit axes have none. An axis
    written twice is refused, with the fix ``twice`` (a format of ``name``): einops' EinMix takes no
    diagonal, and rearr's follows it."""
    found: list[tuple[str, int]] = []
    for dim in operand.dims:
        for item in dim.items if isinstance(dim, ir.Group) else (dim,):
            if isinstance(item, ir.Axis) and item.index is not None:
                raise RearrError(f"an index bracket is not allowed in {where}", code="RA204", pattern=text,
                                 col=item.index.col - 1, hint="remove it")
            if isinstance(item, ir.Axis):
                if any(name == item.name for name, _ in found):
                    place = f"on one side of {where}" if where == "EinMix" else f"in {where}"
                    raise RearrError(f"axis {item.name!r} appears twice {place}", code="RA201", pattern=text,
                                     col=item.col, hint=twice.format(name=item.name))
                found.append((item.name, item.col))
            elif isinstance(item, ir.Ellipsis):
                found.append(("...", item.col))
            elif isinstance(item, ir.Anon) and item.value != 1:
                raise RearrError(f"an anonymous axis ({item.value}) is not allowed in {where}", code="RA203",
                                 pattern=text, col=item.col, hint="name the axis and pass its length as a keyword")
            elif isinstance(item, (ir.Star, ir.Skip)):
                mark = "*" if isinstance(item, ir.Star) else "_"
                raise RearrError(f"'{mark}' is not allowed in {where}", code="RA205", pattern=text, col=item.col,
                                 hint="name the axes")
    return found


def _as_rearrange(text: str, synthetic: str, start: int, end: int, at: int, lengths: dict[str, object]) -> None:
    """Check ``synthetic`` as a rearrange; its characters start:end are text's from ``at`` on."""
    err = validate(synthetic, "rearrange", None, lengths)
    if err is not None:
        col = err.col - start + at if err.col is not None and start <= err.col < end else None
        raise RearrError(err.message, code=err.code, pattern=text, col=col, hint=err.hint)


def _as_einsum(pattern: str, weight_shape: str, right: list[tuple[str, int]], lengths: dict[str, object]) -> None:
    """Check the einsum that EinMix runs, as the step that runs (the rules above imply it holds)."""
    arrow = pattern.index("->")
    synthetic = f"{pattern[:arrow]}, {weight_shape} -> {' '.join(name for name, _ in right)}"
    err = validate(synthetic, "einsum", None, lengths)
    if err is not None:
        col = err.col if err.col is not None and err.col < arrow else None
        raise RearrError(err.message, code=err.code, pattern=pattern, col=col, hint=err.hint)
