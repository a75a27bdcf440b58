"""The stand-alone LALR parser (rearr/_lalr.py): made from grammar.lark by Lark, cached, never stale."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from rearr import _lalr, parser

REPO = Path(__file__).resolve().parents[1]

VALID = [
    "b c h w -> b (c h w)", "a b c->(a b)c", "b (h w) c -> b h w c", "... h w -> ... (h w)",
    "b n[idx] -> b k", "b n[idx: b k] c -> b k c", "v[src: e] c -> v[dst: e] c", "h[y: p] c w[x: p] -> p c",
    "b * c", "b _ h w", "i j, j k -> i k", "() a 1 -> a", "b 2 -> (b 2)", "α β -> β α", "… a -> a …",
    "", "->", "a,b,->c", "n [ idx : ] -> ", "x_1 y2 -> y2 x_1",
]
INVALID = ["a -> b -> c", "(a (b)) -> a", "a) -> a", "a[ -> a", "1a -> a", "a.b -> a", "a - > b", "a [i] [j] -> a",
           "a -> b]", "a: b -> a", "(a -> a", "a[i: 2] -> a", "a $ b", "a[i:b c"]


def _lark_parser() -> Lark:
    """Lark proper, building the grammar the usual way: the reference the stand-alone parser must equal."""
    return Lark(_lalr.GRAMMAR.read_text(encoding="utf-8"), parser="lalr", start=_lalr.START, lexer=_lalr.LEXER,
                transformer=parser._ToIR())


@pytest.mark.parametrize("text", VALID)
def test_same_ir_as_lark_itself(text):
    module, standalone = parser._lalr()
    assert standalone.parse(text) == _lark_parser().parse(text)
    assert module.__version__  # the module Lark generated, with its version


@pytest.mark.parametrize("text", INVALID)
def test_same_errors_as_lark_itself(text):
    module, standalone = parser._lalr()
    with pytest.raises(module.UnexpectedInput) as ours:
        standalone.parse(text)
    with pytest.raises((UnexpectedCharacters, UnexpectedToken)) as theirs:
        _lark_parser().parse(text)
    assert type(ours.value).__name__ == type(theirs.value).__name__
    assert ours.value.pos_in_stream == theirs.value.pos_in_stream
    assert getattr(ours.value, "token", None) == getattr(theirs.value, "token", None)


class _NoTransform:
    pass


def test_cache_is_written_then_read_without_lark(tmp_path, monkeypatch):
    monkeypatch.setenv("REARR_CACHE_DIR", str(tmp_path))
    _lalr.load(_NoTransform())
    (cached,) = tmp_path.iterdir()
    assert cached.name.endswith(f"-{sys.implementation.cache_tag}.bin")
    # a fresh process finds it and never imports lark
    code = ("import sys, numpy as np, rearr; rearr.rearrange(np.zeros((2, 3)), 'a b -> b a');"
            "print('lark' in sys.modules)")
    env = {**os.environ, "REARR_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]
    assert list(tmp_path.iterdir()) == [cached]


def _cached_file(tmp_path: Path) -> Path:
    (path,) = tmp_path.iterdir()
    return path


def test_a_parser_made_from_another_grammar_text_is_not_used(tmp_path, monkeypatch):
    """grammar.lark stays the one definition: a cache entry records the text it was made from."""
    monkeypatch.setenv("REARR_CACHE_DIR", str(tmp_path))
    _lalr.load(_NoTransform())
    path = _cached_file(tmp_path)
    fmt, text, code = marshal.loads(path.read_bytes())
    stale = compile("raise AssertionError('a stale parser ran')", "stale", "exec")
    path.write_bytes(marshal.dumps((fmt, text + "\n// edited", stale)))
    module, _ = _lalr.load(_NoTransform())  # made again, not the stale code
    assert hasattr(module, "Lark_StandAlone")
    assert marshal.loads(path.read_bytes())[1] == text  # and the entry is replaced


@pytest.mark.parametrize("damage", [b"", b"not marshal data", marshal.dumps((1, 2))])
def test_a_damaged_cache_file_is_made_again(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("REARR_CACHE_DIR", str(tmp_path))
    _lalr.load(_NoTransform())
    path = _cached_file(tmp_path)
    path.write_bytes(damage)
    module, _ = _lalr.load(_NoTransform())
    assert hasattr(module, "Lark_StandAlone")
    assert marshal.loads(path.read_bytes())[0] == _lalr.FORMAT


def test_no_cache_when_the_folder_cannot_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "a file, not a folder"
    blocker.write_text("")
    monkeypatch.setenv("REARR_CACHE_DIR", str(blocker / "rearr"))
    module, standalone = _lalr.load(parser._ToIR())  # made in memory
    assert standalone.parse("a b -> b a").outputs[0].dims[0].name == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a file, not a folder"]


def test_empty_cache_dir_means_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REARR_CACHE_DIR", "")
    assert _lalr.cache_dir() is None
    monkeypatch.chdir(tmp_path)
    _lalr.load(_NoTransform())
    assert list(tmp_path.iterdir()) == []


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("REARR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _lalr.cache_dir() == tmp_path / "rearr"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert _lalr.cache_dir() == Path.home() / ".cache" / "rearr"
