"""The one exception class of rearr, and the codes that `rearr check` prints."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import SupportsInt

# Every user mistake has a stable code, so CI logs and `rearr check` output can
# be grepped and documented (docs/check.md lists them).
CODES: dict[str, str] = {
    "RA001": "Python syntax error in a checked file (rearr check)",
    "RA002": "checked file cannot be read or is not UTF-8 (rearr check)",
    "RA003": "checked file needs a newer Python than the one running rearr check",
    "RA010": "unused noqa comment (rearr check, when selected)",
    "RA100": "syntax error in the pattern",
    "RA101": "'->' missing, or present where the operation takes none",
    "RA102": "unbalanced or nested parentheses",
    "RA103": "unknown character",
    "RA104": "invalid axis name",
    "RA200": "axis on one side only",
    "RA201": "duplicate axis",
    "RA202": "ellipsis misuse ('...' twice, inside an input group, or on one side only)",
    "RA203": "anonymous axis (an integer) where the operation takes none",
    "RA204": "index bracket misuse",
    "RA205": "'*' or '_' misuse (only pack/unpack and parse_shape take them)",
    "RA206": "wrong number of operands",
    "RA300": "length keyword that the pattern does not use",
    "RA301": "length that cannot be inferred",
    "RA302": "length that does not divide",
    "RA303": "lengths that disagree",
    "RA304": "wrong number of dimensions",
    "RA305": "invalid length value",
    "RA400": "unknown or invalid reduction",
    "RA500": "unsupported input (type, dtype or device)",
    "RA501": "invalid index values (dtype, out of range, duplicates under 'set')",
}


class RearrError(ValueError, RuntimeError):
    """A mistake in a pattern, its lengths or its inputs.

    ``message`` says what is wrong, ``col`` (0-based, or None) where in
    ``pattern``, ``hint`` how to fix it, ``shape`` the input shape(s) when the
    failing call had any. ``str(err)`` shows all of them with a caret line.

    It is a ValueError and, like einops' EinopsError, a RuntimeError: code that
    catches either keeps working.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "RA100",
        pattern: str | None = None,
        col: int | None = None,
        hint: str | None = None,
        shape: object = None,
        op: str | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.pattern = pattern
        self.col = col
        self.hint = hint
        self.shape = shape
        self.op = op
        super().__init__(self._render())

    def __reduce__(self) -> tuple:
        # The default would call RearrError(rendered_text), which renders it a second time
        # ("RA100: RA302: ..."): copy, pickle and process pools rebuild it from its fields.
        return _rebuild, (self.message, self._fields())

    def _fields(self) -> dict[str, object]:
        return {"code": self.code, "pattern": self.pattern, "col": self.col, "hint": self.hint,
                "shape": self.shape, "op": self.op}

    def with_context(
        self,
        *,
        pattern: str | None = None,
        shape: object = None,
        op: str | None = None,
        col: int | None = None,
    ) -> RearrError:
        """A copy with the call's pattern, input shape and operation (and a column in the pattern)
        filled in where it has none."""
        return RearrError(
            self.message,
            code=self.code,
            pattern=self.pattern if self.pattern is not None else pattern,
            col=self.col if self.col is not None else col,
            hint=self.hint,
            shape=self.shape if self.shape is not None else shape,
            op=self.op if self.op is not None else op,
        )

    def _render(self) -> str:
        lines = [f"{self.code}: {self.message}"]
        if self.pattern is not None:
            where = f"{self.op}: " if self.op else ""
            lines.append(f"  {where}{self.pattern!r}" if "\n" in self.pattern else f"  {where}{self.pattern}")
            if self.col is not None and "\n" not in self.pattern:
                lines.append("  " + " " * len(where) + _caret_pad(self.pattern[: self.col]) + "^")
        if self.shape is not None:
            lines.append(f"  input shape: {_fmt_shape(self.shape)}")
        if self.hint:
            lines.append(f"  fix: {self.hint}")
        return "\n".join(lines)


def _rebuild(message: str, fields: dict) -> RearrError:
    return RearrError(message, **fields)


def _caret_pad(text: str) -> str:
    """Blanks as wide on screen as ``text``: its tabs kept (they reach the same tab stop on the
    line above, which has the same prefix), wide East Asian characters as two blanks."""
    import unicodedata  # here: only an error with a caret needs it, and `import rearr` need not pay for it

    return "".join(
        "\t" if ch == "\t" else "  " if unicodedata.east_asian_width(ch) in "WF" else ""
        if unicodedata.combining(ch) else " "
        for ch in text
    )


def _fmt_shape(shape: object) -> str:
    if isinstance(shape, Sequence) and shape and all(isinstance(s, tuple) for s in shape):
        return ", ".join(str(tuple(s)) for s in shape)
    return str(tuple(shape)) if isinstance(shape, Sequence) else str(shape)


def shown_int(n: SupportsInt) -> str:
    """An integer as a message writes it: in full where int64 holds it, or where it has at most 20 digits
    (a uint64 as written); beyond, short and exact where it can be (2**70, 2**64 - 1, 10**30), else its
    first four digits (7.179e+23), for any size (str() refuses over 4300 digits, float() over 1e308)."""
    n = int(n)
    if abs(n) <= 2**63 - 1:
        return str(n)
    sign, n = "-" if n < 0 else "", abs(n)
    if n & (n - 1) == 0:
        return f"{sign}2**{n.bit_length() - 1}"
    if n & (n + 1) == 0:
        return f"{sign}(2**{n.bit_length()} - 1)" if sign else f"2**{n.bit_length()} - 1"
    e = int(math.log10(n))  # the exponent of ten, corrected where the float is off by one
    e += (10 ** (e + 1) <= n) - (10**e > n)
    if n == 10**e:
        return f"{sign}10**{e}"
    if e < 20:
        return sign + str(n)
    lead = (n + 5 * 10 ** (e - 4)) // 10 ** (e - 3)  # four digits, rounded
    if lead == 10000:
        lead, e = 1000, e + 1
    return f"{sign}{lead // 1000}.{lead % 1000:03d}e+{e}"


# Names that mean another one elsewhere (numpy's, einops' older spellings): what a reader most likely meant.
ALIASES = {"avg": "mean", "average": "mean", "add": "sum", "maximum": "max", "amax": "max", "minimum": "min",
           "amin": "min", "product": "prod", "mul": "prod", "multiply": "prod", "assign": "set", "replace": "set"}


def nearest(name: str, choices: Iterable[str], limit: int | None = None) -> str | None:
    """The choice that a misspelt ``name`` most likely meant: its alias, the same name in another case,
    or the closest by edit distance (a swap of two neighbours counts one) when that is at most a third
    of the name's length (at least 1), or ``limit``, and leaves a letter in place; None when nothing is
    that close."""
    choices = list(dict.fromkeys(choices))
    for candidate in (ALIASES.get(name.lower()), name.lower()):
        if candidate in choices:
            return candidate
    limit = max(1, len(name) // 3) if limit is None else limit
    scored = sorted((_distance(name, c), i, c) for i, c in enumerate(choices))
    # 'd' is one edit from 'b', yet nothing alike: an edit must leave some letter in place.
    close = [c for d, _, c in scored if d <= limit and d < max(len(name), len(c))]
    return close[0] if close else None


def _distance(a: str, b: str) -> int:
    """Edit distance with transpositions (optimal string alignment)."""
    previous, row = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        before, previous, row = previous, row, [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if before is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], before[j - 2] + 1)
    return row[-1]
