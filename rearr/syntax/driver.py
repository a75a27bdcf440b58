"""The LALR(1) driver: runs the tables that Lark made from rearr/grammar.lark on a pattern text.

The tables are data (_tables.py, written by ``python -m rearr.syntax._lalr``); this module is the
whole run-time of the parser, two loops as in a compiler textbook:

- the lexer cuts the text into tokens with one regular expression, the grammar's terminals as
  named alternatives in the order Lark's lexer tries them (at each position the first that matches
  wins), skipping the ignored ones (white space);
- the parser keeps a stack of states. For each token it looks up the action of the state on top:
  ``shift`` pushes the token and the next state; ``reduce`` pops a rule's symbols, builds their
  value and pushes the state that the rule's nonterminal leads to (the goto table); ``accept``
  ends with the value built. A token the state has no action for is a syntax error, with the
  state's terminals as what was expected.

Values are built as Lark builds them for a ``transformer``: the builder's method named after the
rule's alias (else the rule) is called with the children's values, where a rule whose name starts
with ``_`` (Lark's helper rules for ``x*``) is spliced into its parent, a filtered token is left
out, and a ``?rule`` with one child is that child. tests/syntax/test_driver.py checks that this
parses exactly what Lark parses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .._record import Record

__all__ = ["END", "Parser", "Tables", "Token", "UnexpectedCharacters", "UnexpectedInput", "UnexpectedToken"]

END = "$END"  # the token after the last one: its position is the length of the text


class Token:
    """A terminal matched in the text (the fields of Lark's tokens that rearr reads)."""

    __slots__ = ("type", "value", "start_pos")

    def __init__(self, type: str, value: str, start_pos: int) -> None:  # Lark's field names
        self.type = type  # the terminal's name in grammar.lark, or END
        self.value = value  # the text it matched
        self.start_pos = start_pos  # its column: 0-based offset into the text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Token) and (self.type, self.value, self.start_pos) == (
            other.type, other.value, other.start_pos)

    def __hash__(self) -> int:
        return hash((self.type, self.value, self.start_pos))

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r}, {self.start_pos})"


class Tables(Record):
    """Lark's analysis of the grammar as plain data (see _lalr.py); state 0 is the start state."""

    terminals: tuple[tuple[str, str], ...]  # (name, regular expression), in the order they are tried
    ignore: tuple[str, ...]  # terminals the lexer skips
    # per rule: (origin: the nonterminal it makes; the builder's method: its alias, else its origin;
    # children: a letter per symbol, k keep, s splice (a _rule's children), d drop; expand1: a ?rule
    # without alias, whose single child stands for itself)
    rules: tuple[tuple[str, str, str, bool], ...]
    actions: tuple[dict[str, tuple[str, int]], ...]  # per state: terminal -> (shift, state) | (reduce, rule)
    gotos: tuple[dict[str, int], ...]  # per state: nonterminal -> the state after it


class UnexpectedInput(Exception):
    """A syntax error at ``pos`` (a column of the text)."""

    pos: int


class UnexpectedCharacters(UnexpectedInput):
    """No terminal matches the text at ``pos``."""

    def __init__(self, text: str, pos: int) -> None:
        super().__init__(f"no token matches {text[pos:pos + 10]!r} at column {pos}")
        self.pos = pos


class UnexpectedToken(UnexpectedInput):
    """``token`` cannot come here; ``expected``: the terminals that could."""

    def __init__(self, token: Token, expected: frozenset[str]) -> None:
        super().__init__(f"unexpected {token.type} {token.value!r} at column {token.start_pos}; "
                         f"expected one of {sorted(expected)}")
        self.pos = token.start_pos
        self.token = token
        self.expected = expected


class Parser:
    """The tables and a builder bound together; ``parse`` is safe to call from several threads."""

    def __init__(self, tables: Tables, builder: object) -> None:
        self.actions = tables.actions
        self.gotos = tables.gotos
        self.rules = tables.rules
        self.ignore = frozenset(tables.ignore)
        self.match = re.compile("|".join(f"(?P<{name}>{regex})" for name, regex in tables.terminals)).match
        self.methods: tuple[Any, ...] = tuple(getattr(builder, name, None) for _, name, _, _ in self.rules)
        missing = {name for (origin, name, children, expand1), method in zip(self.rules, self.methods)
                   if method is None and not origin.startswith("_") and not (expand1 and children == "k")}
        if missing:
            raise TypeError(f"{type(builder).__name__} lacks a method for the rules {sorted(missing)}")

    def tokens(self, text: str) -> Iterator[Token]:
        """The text's tokens, then END; UnexpectedCharacters where no terminal matches."""
        pos = 0
        while pos < len(text):
            m = self.match(text, pos)
            if m is None:
                raise UnexpectedCharacters(text, pos)
            if m.lastgroup not in self.ignore:
                yield Token(m.lastgroup, m.group(), pos)  # type: ignore[arg-type]
            pos = m.end()
        yield Token(END, "", len(text))

    def parse(self, text: str) -> Any:
        """The builder's value of the whole text; UnexpectedInput at the first error."""
        states = [0]
        values: list[Any] = []
        for token in self.tokens(text):  # lazily: an error stops the lexer where the parser stops
            while True:
                action = self.actions[states[-1]].get(token.type)
                if action is None:
                    raise UnexpectedToken(token, frozenset(self.actions[states[-1]]))
                kind, arg = action
                if kind == "shift":
                    states.append(arg)
                    values.append(token)
                    break
                if kind == "accept":
                    return values[-1]
                origin, _, children, _ = self.rules[arg]
                first = len(values) - len(children)
                value = self.build(arg, values[first:])
                del states[first + 1:], values[first:]
                states.append(self.gotos[states[-1]][origin])
                values.append(value)
        raise AssertionError("END is always accepted or refused")

    def build(self, r: int, children: list[Any]) -> Any:
        """The value of rule number ``r`` over its symbols' values, as Lark's tree builder shapes it."""
        origin, _, how, expand1 = self.rules[r]
        kept: list[Any] = []
        for letter, child in zip(how, children):
            if letter == "k":
                kept.append(child)
            elif letter == "s" and kept:
                kept.extend(child)
            elif letter == "s":  # first, as in a left-recursive x* helper: its own list grows, uncopied,
                kept = child  # so that n axes cost n steps, not n * n (no other value holds that list)
        if origin.startswith("_"):  # Lark inlines such a rule (its x* helpers among them): the parent
            return kept  # takes the children
        if expand1 and len(kept) == 1:
            return kept[0]
        return self.methods[r](kept)
