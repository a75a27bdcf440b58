"""rearr's LALR driver (rearr/syntax/driver.py, running _tables.py) parses exactly what Lark parses
from rearr/grammar.lark: the same IR, and on bad input the same error, with its class, its column,
its token and the set of terminals Lark expected there (what the RA1xx messages are chosen from).

The texts: the einops corpus, every string literal of tests/, examples/, benchmarks/ and rearr/
and every quoted string of docs/ and README.md (patterns and not), every sequence of up to three
pieces of the language (four in a slow test), and hypothesis' valid patterns (tests/strategies.py),
random strings and mutated patterns.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedToken
from strategies import PATTERN_ALPHABET, any_case, mutated

from rearr import RearrError
from rearr.syntax import _lalr, driver, parser

REPO = Path(__file__).resolve().parents[2]
LARK = Lark(_lalr.GRAMMAR.read_text(encoding="utf-8"), parser="lalr", start=_lalr.START, lexer=_lalr.LEXER,
            transformer=parser._ToIR())

VALID = [
    "b c h w -> b (c h w)", "a b c->(a b)c", "b (h w) c -> b h w c", "... h w -> ... (h w)",
    "b n[idx] -> b k", "b n[idx: b k] c -> b k c", "v[src: e] c -> v[dst: e] c", "h[y: p] c w[x: p] -> p c",
    "b * c", "b _ h w", "i j, j k -> i k", "() a 1 -> a", "b 2 -> (b 2)", "α β -> β α", "… a -> a …",
    "", "->", "a,b,->c", "n [ idx : ] -> ", "x_1 y2 -> y2 x_1", "\ta\n->\fa\r",
]
INVALID = ["a -> b -> c", "(a (b)) -> a", "a) -> a", "a[ -> a", "1a -> a", "a.b -> a", "a - > b", "a [i] [j] -> a",
           "a -> b]", "a: b -> a", "(a -> a", "a[i: 2] -> a", "a $ b", "a[i:b c", "٣ a", "a\u00a0b",
           "a -> " + "9" * 5000]


def lark_outcome(text: str) -> tuple:
    """What Lark makes of the text: ("ir", IR), or the error's class, column, token and expected terminals."""
    try:
        return "ir", LARK.parse(text)
    except UnexpectedCharacters as e:
        return "characters", e.pos_in_stream
    except UnexpectedToken as e:
        end = e.token.type == "$END"  # Lark puts END at the last token; rearr's column for it is len(text)
        return "token", e.token.type, e.token.value, len(text) if end else e.token.start_pos, frozenset(e.expected)
    except RearrError as e:  # raised by the transformer, rearr's own
        return "rearr", e.code, e.col, e.message


def our_outcome(text: str) -> tuple:
    try:
        return "ir", parser._parser().parse(text)
    except driver.UnexpectedCharacters as e:
        return "characters", e.pos
    except driver.UnexpectedToken as e:
        return "token", e.token.type, e.token.value, e.token.start_pos, e.expected
    except RearrError as e:
        return "rearr", e.code, e.col, e.message


def assert_same(texts) -> dict[str, int]:
    """Every text parses alike; how many of each outcome there were (so that no check is empty)."""
    kinds: dict[str, int] = {}
    wrong = []
    for text in texts:
        ours, theirs = our_outcome(text), lark_outcome(text)
        if ours != theirs:
            wrong.append((text, ours, theirs))
        kinds[ours[0]] = kinds.get(ours[0], 0) + 1
    assert not wrong, f"{len(wrong)} texts differ, the first: {wrong[:3]}"
    return kinds


@pytest.mark.parametrize("text", VALID)
def test_valid_examples(text):
    assert our_outcome(text) == lark_outcome(text)
    assert our_outcome(text)[0] == "ir"


@pytest.mark.parametrize("text", INVALID)
def test_invalid_examples(text):
    assert our_outcome(text) == lark_outcome(text)
    assert our_outcome(text)[0] != "ir"
    with pytest.raises(RearrError):
        parser.parse(text)


def test_the_einops_corpus():
    with open(REPO / "tests" / "fixtures" / "einops_corpus.jsonl", encoding="utf-8") as f:
        patterns = [json.loads(line)["pattern"] for line in f if line.strip()]
    kinds = assert_same(patterns)
    assert kinds["ir"] > 600, kinds


def _python_strings(folder: str) -> set[str]:
    out = set()
    for path in (REPO / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def _quoted_strings(paths) -> set[str]:
    quoted = re.compile(r'"([^"\n]*)"|\'([^\'\n]*)\'|`([^`\n]*)`')
    return {a or b or c for path in paths for a, b, c in quoted.findall(path.read_text(encoding="utf-8"))}


@pytest.mark.slow
def test_every_string_literal_of_the_repository():
    texts = set().union(*(_python_strings(folder) for folder in ("tests", "examples", "benchmarks", "rearr")))
    texts |= _quoted_strings([*(REPO / "docs").rglob("*.md"), REPO / "README.md"])
    kinds = assert_same(sorted(texts))
    assert kinds["ir"] > 1000 and kinds["token"] > 1000 and kinds["characters"] > 1000, kinds


PIECES = ["a", "_", "1", "...", "(", ")", "[", "]", ":", ",", "->", "*", " ", "-", "$"]


@pytest.mark.parametrize("most", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_every_sequence_of_a_few_pieces(most):
    texts = ("".join(p) for n in range(most + 1) for p in itertools.product(PIECES, repeat=n))
    kinds = assert_same(texts)
    assert sum(kinds.values()) == sum(len(PIECES) ** n for n in range(most + 1))
    assert kinds["ir"] > 100 * most, kinds


@given(any_case())
def test_valid_patterns_of_the_strategies(case):
    assert our_outcome(case.pattern) == lark_outcome(case.pattern)
    assert our_outcome(case.pattern)[0] == "ir"


@given(st.text(alphabet=PATTERN_ALPHABET + "$.-><٣²ä\u00a0", max_size=40))
def test_random_strings_over_the_alphabet(text):
    assert our_outcome(text) == lark_outcome(text)


@given(st.text(max_size=30))
def test_random_unicode_strings(text):
    assert our_outcome(text) == lark_outcome(text)


@given(mutated(any_case().map(lambda c: c.pattern)))
def test_mutated_valid_patterns(text):
    assert our_outcome(text) == lark_outcome(text)


def test_a_token_refused_names_what_was_expected():
    with pytest.raises(driver.UnexpectedToken) as info:
        parser._parser().parse("a[i -> b")
    assert info.value.token == driver.Token("ARROW", "->", 4)
    assert info.value.expected == {"COLON", "RSQB"}


def test_the_end_token_stands_after_the_text():
    with pytest.raises(driver.UnexpectedToken) as info:
        parser._parser().parse("(a b  ")
    assert info.value.token == driver.Token(driver.END, "", 6)
    assert info.value.expected == {"ELLIPSIS", "INT", "NAME", "RPAR"}


def test_a_builder_without_a_rule_is_refused():
    class Partial:
        def named(self, children):
            return children

    with pytest.raises(TypeError, match="lacks a method for the rules"):
        driver.Parser(parser.tables(), Partial())
