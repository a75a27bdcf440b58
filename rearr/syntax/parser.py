"""Pattern text -> IR: driver.py runs the tables that Lark made from rearr/grammar.lark, building
the IR of ir.py with _ToIR, and a syntax error becomes a RearrError (RA1xx, RA204) with a column.

The tables are _tables.py, shipped in the package. A checkout whose grammar.lark was edited after
they were written (``python -m rearr.syntax._lalr``) parses by the edited grammar: the tables are
made in memory with lark, and stderr says once how to write them. A package without its data files
(a zip, a frozen application) has only _tables.py, and uses it.
"""

from __future__ import annotations

import sys
from _thread import allocate_lock
from functools import lru_cache

from ..errors import RearrError
from . import GRAMMAR, driver, ir

Token = driver.Token
_LOCK = allocate_lock()

_TOKEN_WORDS = {
    "ARROW": "'->'",
    "COMMA": "','",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COLON": "':'",
    "STAR": "'*'",
    "ELLIPSIS": "'...'",
    "INT": "an integer",
    "NAME": "an axis name",
    "$END": "the end of the pattern",
}


class _ToIR:
    """One method per rule alias of grammar.lark; builds IR nodes directly (Lark calls them by name)."""

    def named(self, children: list) -> ir.Axis:
        name: Token = children[0]
        index = children[1] if len(children) > 1 else None
        if name.value == "_" and index is None:
            return ir.Skip(name.start_pos)  # type: ignore[return-value]
        return ir.Axis(name.value, name.start_pos, index)

    def anon(self, children: list) -> ir.Anon:
        tok: Token = children[0]
        try:
            value = int(tok.value)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            raise RearrError(f"an integer of {len(tok.value)} digits is too long for a length", code="RA100",
                             col=tok.start_pos, hint="an anonymous axis is a length (at most 19 digits): write a "
                             "smaller one, or a named axis with a length keyword") from None
        return ir.Anon(value, tok.start_pos)

    def ellipsis(self, children: list) -> ir.Ellipsis:
        return ir.Ellipsis(children[0].start_pos)

    def star(self, children: list) -> ir.Star:
        return ir.Star(children[0].start_pos)

    def group(self, children: list) -> ir.Group:
        return ir.Group(tuple(children[1:-1]), children[0].start_pos)  # LPAR axis* RPAR: the axes

    def index_default(self, children: list) -> ir.Index:
        return ir.Index(children[1].value, children[1].start_pos)

    def index_axes(self, children: list) -> ir.Index:
        names = children[3:-1]  # LSQB NAME COLON NAME* RSQB
        return ir.Index(
            children[1].value,
            children[1].start_pos,
            tuple(n.value for n in names),
            tuple(n.start_pos for n in names),
        )

    def operand(self, children: list) -> ir.Operand:
        return ir.Operand(tuple(children), children[0].col if children else -1)

    def side(self, children: list) -> tuple[ir.Operand, ...]:
        # An empty operand has no token to take a column from: use the comma's.
        out = []
        for i, child in enumerate(children):
            if isinstance(child, ir.Operand):
                if child.col < 0 and i > 0:
                    child = child.replace(col=children[i - 1].start_pos + 1)
                out.append(child)
        return tuple(out)

    def arrow_pattern(self, children: list) -> ir.Pattern:
        left, arrow, right = children
        right = tuple(
            op.replace(col=arrow.start_pos + 2) if op.col < 0 else op for op in right
        )
        left = tuple(op.replace(col=0) if op.col < 0 else op for op in left)
        return ir.Pattern("", left, right, arrow.start_pos)

    def bare_pattern(self, children: list) -> ir.Pattern:
        left = tuple(op.replace(col=0) if op.col < 0 else op for op in children[0])
        return ir.Pattern("", left, None, None)


@lru_cache(maxsize=1024)
def parse(text: str) -> ir.Pattern:
    """Parse a pattern into its IR; a syntax error is a RearrError with a column."""
    try:
        tree = _parser().parse(text)
    except driver.UnexpectedCharacters as e:
        raise _bad_character(text, e.pos) from None
    except driver.UnexpectedToken as e:
        raise _syntax_error(text, e.token) from None
    except RearrError as e:  # raised by _ToIR, which sees a token but not the text
        raise e.with_context(pattern=text) from None
    return tree.replace(text=text)


def _parser() -> driver.Parser:
    """The parser of this process, made on its first pattern (one thread makes it, the others wait)."""
    with _LOCK:
        return _made()


@lru_cache(maxsize=1)
def _made() -> driver.Parser:
    return driver.Parser(tables(), _ToIR())


def tables() -> driver.Tables:
    """The shipped tables, or, when grammar.lark says otherwise, tables made now from it with lark."""
    from . import _tables as shipped

    try:
        with open(GRAMMAR, encoding="utf-8") as f:
            text = f.read()
    except OSError:  # a package without its data files: the tables are all there is
        text = shipped.GRAMMAR
    if text == shipped.GRAMMAR:
        return driver.Tables(shipped.TERMINALS, shipped.IGNORE, shipped.RULES, shipped.ACTIONS, shipped.GOTOS)
    from . import _lalr

    try:
        made = _lalr.analyse(text)
    except ImportError:
        raise RearrError("grammar.lark was edited after rearr/syntax/_tables.py was written, and lark is not "
                         "installed to make the tables from it", code="RA100",
                         hint="pip install lark, then run python -m rearr.syntax._lalr") from None
    print("rearr: rearr/syntax/_tables.py was made from another grammar.lark; the tables were made in memory "
          "(run `python -m rearr.syntax._lalr` to write them)", file=sys.stderr)
    return made


def _syntax_error(text: str, tok: Token) -> RearrError:
    col = tok.start_pos  # END's is len(text)
    open_paren = _unclosed_paren(text, col)
    in_bracket = text.rfind("[", 0, col) > text.rfind("]", 0, col)
    if tok.type == "RSQB" and not in_bracket:
        return RearrError("']' without a matching '['", code="RA204", pattern=text, col=col,
                          hint="an index bracket opens right after an axis name, as in 'n[idx]'")
    if tok.type == "COLON" and not in_bracket:
        return RearrError("':' is only used inside an index bracket", code="RA204", pattern=text, col=col,
                          hint="declare an index's axes as in 'n[idx: b k]'")
    if in_bracket and tok.type in ("ARROW", "COMMA", "$END"):
        return RearrError("'[' is never closed", code="RA204", pattern=text, col=text.rfind("[", 0, col),
                          hint="close the index bracket with ']', as in 'n[idx]'")
    if in_bracket and tok.type in ("INT", "ELLIPSIS", "LPAR", "RPAR", "STAR", "LSQB"):
        return RearrError(f"{_describe(tok)} cannot appear in an index bracket", code="RA204", pattern=text,
                          col=col, hint="a bracket holds the index's keyword name and, after ':', axis names: "
                          "'n[idx]' or 'n[idx: b k]', closed by ']'")
    if tok.type == "LPAR" and open_paren is not None:
        return RearrError(
            "nested parentheses are not allowed",
            code="RA102", pattern=text, col=col,
            hint="a group is one level deep: write '(a b c)', not '(a (b c))'",
        )
    if tok.type == "RPAR" and open_paren is None:
        return RearrError(
            "')' without a matching '('",
            code="RA102", pattern=text, col=col, hint="remove it, or open the group with '('",
        )
    if tok.type in ("$END", "ARROW", "COMMA", "STAR") and open_paren is not None:
        return RearrError(
            "'(' is never closed",
            code="RA102", pattern=text, col=open_paren, hint="close the group with ')'",
        )
    if tok.type == "ARROW":
        return RearrError(
            "'->' appears twice", code="RA101", pattern=text, col=col,
            hint="a pattern has one '->' between inputs and outputs",
        )
    if tok.type == "LSQB":
        return RearrError(
            "an index bracket must follow an axis name",
            code="RA204", pattern=text, col=col,
            hint="write it right after the axis it indexes, as in 'b n[idx] -> b'",
        )
    if tok.type == "$END":
        return RearrError("the pattern ends too early", code="RA100", pattern=text, col=col,
                          hint="complete it; see docs/language.md for the syntax")
    return RearrError(
        f"unexpected {_describe(tok)}", code="RA100", pattern=text, col=col,
        hint="see docs/language.md for the pattern syntax",
    )


def _describe(tok: Token) -> str:
    if tok.type == "INT":
        return f"integer {tok.value!r}"
    if tok.type == "NAME":
        return f"axis name {tok.value!r}"
    return _TOKEN_WORDS.get(tok.type, repr(tok.value))


def _bad_character(text: str, pos: int) -> RearrError:
    char = text[pos]
    if char.isalnum() or char == "_":
        end = pos
        while end < len(text) and (text[end].isalnum() or text[end] == "_"):
            end += 1
        word = text[pos:end]
        return RearrError(
            f"{word!r} is not a valid axis name",
            code="RA104", pattern=text, col=pos,
            hint="axis names are Python identifiers; an integer stands alone, as in '(h 2)'",
        )
    if char == ".":
        return RearrError(
            "'.' is not part of the pattern language", code="RA103", pattern=text, col=pos,
            hint="an ellipsis is written '...' (three dots)",
        )
    if char == "-" or char == ">":
        return RearrError(
            f"stray {char!r}", code="RA101", pattern=text, col=pos,
            hint="the arrow is written '->'",
        )
    return RearrError(
        f"unknown character {char!r}", code="RA103", pattern=text, col=pos,
        hint="patterns use axis names, integers, ( ) [ ] : , -> ... * and spaces",
    )


def _unclosed_paren(text: str, end: int) -> int | None:
    """Column of the '(' still open at position ``end``, if any."""
    opened = None
    for i, ch in enumerate(text[:end]):
        if ch == "(":
            opened = i
        elif ch == ")":
            opened = None
    return opened
