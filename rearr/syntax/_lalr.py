"""The generator of rearr/syntax/_tables.py: Lark analyses rearr/grammar.lark, and its LALR(1) tables
are written out as plain data for driver.py (``python -m rearr.syntax._lalr``; needs lark).

grammar.lark stays the one definition of the language and Lark the generator: this module asks Lark
for the lexer's terminals (in the order its lexer tries them), the rules with the shape Lark's tree
builder gives their values, and the parse table, and writes them as literals. The states are
renumbered breadth-first from the start state, so that the file is the same on every run (Lark
numbers them in an order that depends on string hashing). A grammar that needs more of Lark than
driver.py does (placeholders, keywords that a regex terminal also matches, ...) is refused here.

At run time this module is never imported: rearr loads _tables.py, and only a checkout whose
grammar.lark was edited after the tables were written builds them in memory with this module
(rearr.syntax.parser says so once on stderr). tests/syntax/test_tables.py fails until they are
written again.
"""

from __future__ import annotations

import gc
import pprint
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import GRAMMAR as _GRAMMAR
from .driver import END, Tables

GRAMMAR = Path(_GRAMMAR)
TABLES = Path(__file__).with_name("_tables.py")
START = "pattern"
LEXER = "basic"  # the grammar's terminals never overlap: one regex, where "contextual" needs one per state


def analyse(text: str) -> Tables:
    """Lark's LALR(1) analysis of the grammar text, as the plain data that driver.Parser runs."""
    lark = _lark(text)
    lexer = lark.parser.lexer
    scanner = lexer.scanner  # the terminals as Lark's lexer tries them, after its own rewriting
    _require(not lexer.callback, "a string terminal that a regex terminal also matches (Lark's 'unless')")
    _require(not lexer.g_regex_flags and not lexer.use_bytes, "regex flags or a bytes lexer")
    _require(not lark.options.postlex and not lark.options.lexer_callbacks, "a post-lexer or lexer callbacks")
    _require(len(scanner._mres) == 1, "more terminals than one regular expression holds")
    terminals = tuple((str(t.name), t.pattern.to_regexp()) for t in scanner.terminals)
    rules = tuple(_rule(rule, lark.options.maybe_placeholders) for rule in lark.rules)
    number = {rule: i for i, rule in enumerate(lark.rules)}
    actions, gotos = _renumbered(lark.parser.parser.parser.parse_table, number, {t.name for t in lark.terminals})
    return Tables(terminals, tuple(sorted(map(str, lexer.ignore_types))), rules, actions, gotos)


def _lark(text: str) -> Any:
    from lark import Lark

    with _no_gc():
        return Lark(text, parser="lalr", start=START, lexer=LEXER)


def _rule(rule: Any, placeholders: bool) -> tuple[str, str, str, bool]:
    """A Lark rule as driver.Rule's fields: what Lark's parse-tree builder makes of its children."""
    options = rule.options
    _require(not (placeholders and options.empty_indices), f"a [optional] placeholder in {rule}")
    _require(not options.keep_all_tokens and options.template_source is None, f"'!' or a template in {rule}")
    children = "".join("d" if sym.is_term and sym.filter_out else "s" if not sym.is_term and sym.name.startswith("_")
                       else "k" for sym in rule.expansion)
    name = rule.alias or rule.origin.name
    return str(rule.origin.name), str(name), children, bool(options.expand1 and not rule.alias)


def _renumbered(table: Any, number: dict, terminals: set[str]) -> tuple[tuple, tuple]:
    """Lark's parse table split into actions (on terminals) and gotos (on nonterminals), its states
    numbered breadth-first from the start state, symbols sorted; ``accept`` on END in the end state
    (its 0 stands for nothing: every action is a pair of a word and a number)."""
    start, end = table.start_states[START], table.end_states[START]
    order = [start]
    new = {start: 0}
    for state in order:  # grows while it is walked
        for _, (action, arg) in sorted(table.states[state].items()):
            if action.name == "Shift" and arg not in new:
                new[arg] = len(order)
                order.append(arg)
    _require(len(order) == len(table.states), "states that the start state does not reach")
    actions, gotos = [], []
    for state in order:
        items = sorted((str(sym), step) for sym, step in table.states[state].items())
        _require(all((sym in terminals or sym == END) == sym.isupper() for sym, _ in items), "a lowercase terminal")
        actions.append({sym: ("shift", new[arg]) if action.name == "Shift" else ("reduce", number[arg])
                        for sym, (action, arg) in items if sym.isupper()})
        gotos.append({sym: new[arg] for sym, (action, arg) in items if not sym.isupper()})
    _require(not actions[new[end]] and not gotos[new[end]], "an end state with actions")
    actions[new[end]][END] = ("accept", 0)
    return tuple(actions), tuple(gotos)


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise NotImplementedError(f"grammar.lark uses {what}, which rearr/syntax/driver.py does not run")


def source(text: str, tables: Tables) -> str:
    """_tables.py: the grammar text it was made from, then each table as a literal, one entry a line."""
    import lark

    rules = [f"{rule.origin.name}: {' '.join(sym.name for sym in rule.expansion) or '(nothing)'}"
             for rule in _lark(text).rules]
    lines = [
        f"# Generated from rearr/grammar.lark by `python -m rearr.syntax._lalr`: Lark {lark.__version__}'s LALR(1)",
        "# analysis as plain data, which rearr/syntax/driver.py runs. Do not edit: edit grammar.lark, run it again.",
        "",
        "GRAMMAR = (  # the text these tables were made from",
        *(f"    {line!r}" for line in text.splitlines(keepends=True)),
        ")",
        f"START = {START!r}",
        f"LEXER = {LEXER!r}",
        "",
        "# (name, regular expression), in the order the lexer tries them",
        *_literal("TERMINALS", tables.terminals),
        "# the terminals the lexer skips",
        f"IGNORE: {Tables.__annotations__['ignore']} = {tables.ignore!r}",
        "",
        "# rule number: (origin, builder method, children: k keep / s splice / d drop, ?rule with one child)",
        *_literal("RULES", tables.rules, [f"{i}: {r}" for i, r in enumerate(rules)]),
        "# per state (0 starts): terminal -> (shift, state) | (reduce, rule number) | (accept, 0)",
        *_literal("ACTIONS", tables.actions, [f"state {i}" for i in range(len(tables.actions))]),
        "# per state: nonterminal -> the state after it",
        *_literal("GOTOS", tables.gotos, [f"state {i}" for i in range(len(tables.gotos))]),
    ]
    return "\n".join(lines)


def _literal(name: str, items: tuple, comments: list[str] | None = None) -> list[str]:
    """``NAME = (``, one item a line (wrapped by pprint when long), each after its comment, ``)``."""
    lines = [f"{name}: {Tables.__annotations__[name.lower()]} = ("]  # as driver.py writes it
    for i, item in enumerate(items):
        if comments:
            lines.append(f"    # {comments[i]}")
        lines += [f"    {line}" for line in pprint.pformat(item, width=112, sort_dicts=False).splitlines()]
        lines[-1] += ","
    return [*lines, ")", ""]


@contextmanager
def _no_gc() -> Iterator[None]:
    """No garbage collection while Lark analyses: the many young objects it makes would each time walk
    the process's objects again (with torch loaded, millions), the greater part of the cost."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def main() -> None:
    """``python -m rearr.syntax._lalr``: write rearr/syntax/_tables.py from rearr/grammar.lark."""
    text = GRAMMAR.read_text(encoding="utf-8")
    TABLES.write_text(source(text, analyse(text)), encoding="utf-8")
    print(f"wrote {TABLES}")


if __name__ == "__main__":
    main()
