"""Every code of `rearr.errors.CODES` as a rule of `rearr check`: a name, a full description and the
place in docs/check.md that explains it (SARIF's rules, and docs/check.md's "Codes" section, which a
test keeps equal to these descriptions)."""

from __future__ import annotations

from dataclasses import dataclass

DOCS = "https://github.com/rearr-dev/rearr/blob/main/docs/check.md"


@dataclass(frozen=True)
class Rule:
    name: str
    description: str


RULES: dict[str, Rule] = {
    "RA001": Rule("python-syntax-error", "The file names rearr or einops, but the Python that runs rearr check "
                  "cannot parse it, so its patterns went unchecked. Always reported, whatever is selected."),
    "RA002": Rule("unreadable-file", "The file could not be read: it is missing, not a regular file, larger "
                  "than 16 MiB or not UTF-8. Always reported, whatever is selected."),
    "RA003": Rule("newer-python-syntax", "The file uses syntax that a newer Python added: run rearr check with "
                  "that Python. Always reported, whatever is selected."),
    "RA010": Rule("unused-noqa", "A `# noqa: CODES` comment names a code that silences nothing on its line, or "
                  "a `# rearr: noqa` silences nothing in its file (a bare `# noqa` may be another tool's, and is "
                  "left alone). Not selected by default: --extend-select RA010; --fix removes the codes."),
    "RA100": Rule("pattern-syntax-error", "The pattern does not parse: a character or a sequence that the "
                  "pattern language does not have."),
    "RA101": Rule("arrow", "'->' is missing where the operation needs an input and an output side, or is "
                  "present where it takes one side only (pack, unpack, parse_shape)."),
    "RA102": Rule("parentheses", "A parenthesis is unbalanced, or groups are nested: a group is one level of "
                  "parentheses."),
    "RA103": Rule("unknown-character", "A character that no pattern may hold."),
    "RA104": Rule("axis-name", "An axis name that is not an identifier, or that starts with an underscore or a "
                  "digit where a name is expected."),
    "RA200": Rule("one-sided-axis", "An axis appears on one side of the pattern only, where the operation "
                  "needs it on both: rearrange moves axes, reduce may only drop input axes, repeat may only add "
                  "output axes."),
    "RA201": Rule("duplicate-axis", "The same axis appears twice on one side of the pattern."),
    "RA202": Rule("ellipsis", "'...' is used twice on a side, inside an input group, or on one side only."),
    "RA203": Rule("anonymous-axis", "An integer stands for an axis where the operation takes none."),
    "RA204": Rule("index-bracket", "An index bracket is misused: on the wrong side, with axes that are not "
                  "the output's, on an axis also read from the input, or on a layer that takes none."),
    "RA205": Rule("star-or-underscore", "'*' or '_' in a pattern whose operation does not take them (only "
                  "pack, unpack and parse_shape do)."),
    "RA206": Rule("operand-count", "An einsum is given another number of tensors than its pattern has "
                  "operands."),
    "RA300": Rule("unused-length", "A length keyword names no axis of the pattern: most likely a misspelt "
                  "axis."),
    "RA301": Rule("missing-length", "A length cannot be inferred: a new axis of repeat without a length, two "
                  "axes of unknown length in one input group, or an index that the call does not pass."),
    "RA302": Rule("indivisible-length", "A dimension's length is not divisible by the lengths written for its "
                  "group."),
    "RA303": Rule("conflicting-lengths", "The lengths written give a dimension another length than the one it "
                  "has."),
    "RA304": Rule("rank", "The tensor has another number of dimensions than the input side of the pattern."),
    "RA305": Rule("length-value", "A length keyword's value is not a non-negative integer that int64 counts."),
    "RA400": Rule("reduction", "The reduction is unknown (a misspelt name) or not one that the operation "
                  "takes."),
    "RA500": Rule("unsupported-input", "An argument the operation cannot take: a tensor of another type, "
                  "dtype or device, the pattern where the tensor goes, or an option's value that is not one "
                  "of its choices."),
    "RA501": Rule("index-values", "The values of an index tensor are refused: not integers, out of range, or "
                  "duplicates under 'set'."),
}

def help_uri(code: str | None) -> str:
    """The place in docs/check.md that explains a code (the page itself for None)."""
    return DOCS if code is None else f"{DOCS}#{code.lower()}"
