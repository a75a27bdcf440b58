"""The stand-alone LALR parser (rearr/syntax/_lalr.py): generated from grammar.lark by Lark, shipped in the package,
never stale; nothing read from or written to a cache folder."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from rearr.syntax import _lalr, parser

REPO = Path(__file__).resolve().parents[2]

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


def test_shipped_parser_matches_grammar_lark():
    """Fails when grammar.lark was edited and `python -m rearr.syntax._lalr` was not run again."""
    import rearr.syntax._lalr_standalone as shipped

    assert shipped.GRAMMAR_SHA256 == _lalr.grammar_digest(_lalr.GRAMMAR.read_text(encoding="utf-8"))
    module, _ = _lalr.load(_NoTransform())
    assert module is shipped


def test_regenerating_gives_a_parser_with_the_same_answers(tmp_path):
    """The generator still works with the installed lark, and what it writes parses like the shipped file."""
    source = _lalr.generate(_lalr.GRAMMAR.read_text(encoding="utf-8"))
    assert source.startswith(_lalr.HEADER)
    path = tmp_path / "regenerated.py"
    path.write_text(source, encoding="utf-8")
    code = ("import sys, runpy; sys.path.insert(0, sys.argv[1]); import rearr.syntax.parser as p;"
            "m = runpy.run_path(sys.argv[2], run_name='rearr.syntax._lalr_standalone');"
            "new = m['Lark_StandAlone'](transformer=p._ToIR());"
            "print([new.parse(t) == p._lalr()[1].parse(t) for t in sys.argv[3:]])")
    out = subprocess.run([sys.executable, "-c", code, str(REPO), str(path), *VALID], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == repr([True] * len(VALID))


def _fresh_process(env: dict, cwd: Path) -> subprocess.CompletedProcess:
    code = ("import sys, numpy as np, rearr; rearr.rearrange(np.zeros((2, 3)), 'a b -> b a');"
            "print('lark' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=cwd)


def test_a_fresh_process_imports_no_lark_and_writes_no_file(tmp_path):
    home, cache, cwd = (tmp_path / d for d in ("home", "cache", "cwd"))
    for d in (home, cache, cwd):
        d.mkdir()
    out = _fresh_process({"HOME": str(home), "XDG_CACHE_HOME": str(cache), "REARR_CACHE_DIR": str(cache / "r")}, cwd)
    assert out.stdout.split() == ["False"]
    assert out.stderr == ""
    assert [p for d in (home, cache, cwd) for p in d.rglob("*")] == []


def _old_entry_name() -> str:
    """The name under which the parser cache of earlier versions kept its entry."""
    text = _lalr.GRAMMAR.read_text(encoding="utf-8")
    key = zlib.crc32(f"1\n{_lalr.START}\n{_lalr.LEXER}\n{text}".encode())
    return f"lalr-{key:08x}-{sys.implementation.cache_tag}.bin"


def test_a_planted_cache_entry_is_never_executed(tmp_path):
    """An entry that another user could plant in a shared cache folder: rearr reads no cache folder at all."""
    text = _lalr.GRAMMAR.read_text(encoding="utf-8")
    evil = compile("import sys; sys.stdout.write('PLANTED RAN'); raise SystemExit(3)", "planted", "exec")
    (tmp_path / _old_entry_name()).write_bytes(marshal.dumps((1, text, evil)))
    out = _fresh_process({"REARR_CACHE_DIR": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}, tmp_path)
    assert out.stdout.split() == ["False"]


@pytest.mark.parametrize("body", ["raise RuntimeError('broken entry')", "x = 1", "def Lark_StandAlone(**kw): return 3"])
def test_an_entry_that_fails_when_executed_breaks_nothing(tmp_path, monkeypatch, body):
    """A well-formed entry whose code raises, lacks Lark_StandAlone or returns the wrong type."""
    text = _lalr.GRAMMAR.read_text(encoding="utf-8")
    (tmp_path / _old_entry_name()).write_bytes(marshal.dumps((1, text, compile(body, "bad", "exec"))))
    monkeypatch.setenv("REARR_CACHE_DIR", str(tmp_path))
    module, standalone = _lalr.load(parser._ToIR())
    assert standalone.parse("a b -> b a").outputs[0].dims[0].name == "b"


def test_a_planted_symlink_is_not_followed(tmp_path, monkeypatch):
    """The temporary file name of the earlier cache writer, planted as a link to a victim file."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / f"{_old_entry_name()}.{os.getpid()}.tmp").symlink_to(victim)
    monkeypatch.setenv("REARR_CACHE_DIR", str(shared))
    _lalr.load(_NoTransform())
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in shared.iterdir()) == [f"{_old_entry_name()}.{os.getpid()}.tmp"]


def test_an_edited_grammar_is_built_in_memory_with_one_note(tmp_path, monkeypatch, capsys):
    """A checkout whose grammar.lark changed after generation parses by the edited grammar, never the stale one."""
    edited = tmp_path / "grammar.lark"
    edited.write_text(_lalr.GRAMMAR.read_text(encoding="utf-8") + "\n// edited\n", encoding="utf-8")
    monkeypatch.setattr(_lalr, "GRAMMAR", edited)
    monkeypatch.setattr(_lalr, "_noted", [])
    monkeypatch.setitem(sys.modules, _lalr.MODULE, sys.modules[_lalr.MODULE])  # restored afterwards
    for _ in range(2):
        module, standalone = _lalr.load(parser._ToIR())
        assert module.__file__ == "<in memory>"
        assert standalone.parse("a b -> b a").outputs[0].dims[0].name == "b"
    assert capsys.readouterr().err.count("python -m rearr.syntax._lalr") == 1


def _stale_checkout(tmp_path: Path) -> Path:
    """A copy of the package whose grammar.lark was edited after the parser was generated."""
    import shutil

    shutil.copytree(REPO / "rearr", tmp_path / "rearr", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "rearr" / "syntax" / "grammar.lark", "a", encoding="utf-8") as f:
        f.write("\n// an edit\n")
    return tmp_path


def test_threads_that_parse_first_in_a_stale_checkout_all_get_the_rebuilt_parser(tmp_path):
    root = _stale_checkout(tmp_path)
    code = ("import sys, threading, numpy as np, rearr\n"
            "res = []\n"
            "def go(i):\n"
            "    try: res.append(rearr.rearrange(np.ones((2, 3)), 'a b -> b a' + ' ' * i).shape)\n"
            "    except Exception as e: res.append(repr(e))\n"
            "ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "import rearr.syntax._lalr_standalone as m\n"
            "print(res == [(3, 2)] * 8, sys.modules[m.__name__] is rearr.syntax._lalr_standalone, m.__file__)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == ["True", "True", "<in", "memory>"], out.stdout + out.stderr
    assert out.stderr.count("python -m rearr.syntax._lalr") == 1


def test_a_zipped_package_parses_with_its_generated_module(tmp_path):
    import zipfile

    with zipfile.ZipFile(tmp_path / "rearr.zip", "w") as z:
        for p in (REPO / "rearr").rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                z.write(p, p.relative_to(REPO))
    code = "import numpy as np, rearr; print(rearr.rearrange(np.ones((2, 3)), 'a b -> b a').shape)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(tmp_path / "rearr.zip")},
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "(3, 2)"
