"""The shipped parser tables (rearr/syntax/_tables.py): written by Lark from rearr/grammar.lark, never
stale, shipped in the package, loaded without lark; nothing read from or written to a cache folder.
tests/syntax/test_driver.py checks that the driver running them parses what Lark parses."""

from __future__ import annotations

import marshal
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from rearr import RearrError
from rearr.syntax import GRAMMAR, _lalr, _tables, driver, ir, parser

REPO = Path(__file__).resolve().parents[2]


def test_the_grammar_is_rearr_grammar_lark():
    assert Path(GRAMMAR) == REPO / "rearr" / "grammar.lark" == _lalr.GRAMMAR
    assert not (REPO / "rearr" / "syntax" / "grammar.lark").exists()


def test_the_shipped_tables_are_what_lark_writes_from_grammar_lark():
    """Fails when grammar.lark was edited and `python -m rearr.syntax._lalr` was not run again (or when
    another Lark version analyses it differently): the file is exactly what the generator writes now."""
    text = _lalr.GRAMMAR.read_text(encoding="utf-8")
    assert _tables.GRAMMAR == text
    assert _lalr.TABLES.read_text(encoding="utf-8") == _lalr.source(text, _lalr.analyse(text))
    assert parser.tables() == _lalr.analyse(text)


@pytest.mark.slow
def test_the_generator_writes_the_same_file_whatever_the_hash_seed(tmp_path):
    code = "from rearr.syntax import _lalr; t = _lalr.GRAMMAR.read_text(); print(_lalr.source(t, _lalr.analyse(t)))"
    outs = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO),
                                                               "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, check=True).stdout for seed in ("1", "2", "3")}
    assert len(outs) == 1


def test_the_tables_are_plain_data():
    """_tables.py is assignments of literals (and their builtin types): it imports and runs nothing."""
    import ast

    tree = ast.parse(_lalr.TABLES.read_text(encoding="utf-8"))
    assert all(isinstance(node, (ast.Assign, ast.AnnAssign)) for node in tree.body)
    for node in tree.body:
        ast.literal_eval(node.value)  # raises on anything but a literal
        if isinstance(node, ast.AnnAssign):
            assert {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)} <= {"tuple", "dict", "str",
                                                                                           "int", "bool"}


@pytest.mark.parametrize("grammar, what", [
    ('start: a [b]\na: "a"\nb: "b"\n', "placeholder"),
    ('start: NAME | "if"\nNAME: /[a-z]+/\n', "unless"),
    ('!start: "a" "b"\n', "'!'"),
])
def test_the_generator_refuses_what_the_driver_does_not_run(grammar, what, monkeypatch):
    monkeypatch.setattr(_lalr, "START", "start")
    with pytest.raises(NotImplementedError, match=what):
        _lalr.analyse(grammar)


def _fresh_process(env: dict, cwd: Path, root: Path = REPO) -> subprocess.CompletedProcess:
    code = ("import sys, numpy as np, rearr; rearr.rearrange(np.zeros((2, 3)), 'a b -> b a');"
            "print('lark' in sys.modules, 'rearr.syntax._lalr' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=cwd)


def test_a_fresh_process_imports_neither_lark_nor_the_generator_and_writes_no_file(tmp_path):
    home, cache, cwd = (tmp_path / d for d in ("home", "cache", "cwd"))
    for d in (home, cache, cwd):
        d.mkdir()
    out = _fresh_process({"HOME": str(home), "XDG_CACHE_HOME": str(cache), "REARR_CACHE_DIR": str(cache / "r")}, cwd)
    assert out.stdout.split() == ["False", "False"]
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
    assert out.stdout.split() == ["False", "False"]


def test_a_planted_symlink_is_not_followed(tmp_path, monkeypatch):
    """The temporary file name of the earlier cache writer, planted as a link to a victim file."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / f"{_old_entry_name()}.{os.getpid()}.tmp").symlink_to(victim)
    monkeypatch.setenv("REARR_CACHE_DIR", str(shared))
    driver.Parser(parser.tables(), parser._ToIR()).parse("a b -> b a")
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in shared.iterdir()) == [f"{_old_entry_name()}.{os.getpid()}.tmp"]


EDIT = ('STAR: "*"\n', 'STAR: "*" | "%"\n')  # an edit that the shipped tables do not know: '%' as '*'


def _edited_grammar(path: Path) -> Path:
    text = _lalr.GRAMMAR.read_text(encoding="utf-8")
    assert EDIT[0] in text
    path.write_text(text.replace(*EDIT), encoding="utf-8")
    return path


def test_an_edited_grammar_is_analysed_in_memory_with_a_note(tmp_path, monkeypatch, capsys):
    """A checkout whose grammar.lark changed after the tables were written parses by the edited grammar."""
    shipped = driver.Parser(parser.tables(), parser._ToIR())
    monkeypatch.setattr(parser, "GRAMMAR", str(_edited_grammar(tmp_path / "grammar.lark")))
    edited = driver.Parser(parser.tables(), parser._ToIR())
    assert edited.parse("b % c").inputs[0].dims[1] == ir.Star(2)
    with pytest.raises(driver.UnexpectedCharacters):
        shipped.parse("b % c")
    assert capsys.readouterr().err.count("python -m rearr.syntax._lalr") == 1


def test_an_edited_grammar_without_lark_is_a_rearr_error(tmp_path, monkeypatch, capsys):
    """Each new pattern says so (nothing is cached while it fails), and stderr stays quiet."""
    monkeypatch.setattr(parser, "GRAMMAR", str(_edited_grammar(tmp_path / "grammar.lark")))
    monkeypatch.setitem(sys.modules, "lark", None)  # `import lark` raises ImportError
    for _ in range(2):
        with pytest.raises(RearrError, match="lark is not installed") as info:
            parser.tables()
        assert info.value.code == "RA100" and "python -m rearr.syntax._lalr" in info.value.hint
    assert capsys.readouterr().err == ""


def _stale_checkout(tmp_path: Path) -> Path:
    """A copy of the package whose grammar.lark was edited after the tables were written."""
    shutil.copytree(REPO / "rearr", tmp_path / "rearr", ignore=shutil.ignore_patterns("__pycache__"))
    _edited_grammar(tmp_path / "rearr" / "grammar.lark")
    return tmp_path


def test_threads_that_parse_first_in_a_stale_checkout_all_get_the_edited_grammar(tmp_path):
    root = _stale_checkout(tmp_path)
    code = ("import sys, threading, numpy as np, rearr\n"
            "res = []\n"
            "def go(i):\n"
            "    try: res.append(rearr.rearrange(np.ones((2, 3)), 'a b -> b a' + ' ' * i).shape)\n"
            "    except Exception as e: res.append(repr(e))\n"
            "ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "from rearr.syntax import parser\n"
            "print(res == [(3, 2)] * 8, parser.parse('b % c').inputs[0].dims[1])")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == ["True", "Star(col=2)"], out.stdout + out.stderr
    assert out.stderr.count("python -m rearr.syntax._lalr") == 1


def test_a_zipped_package_parses_with_its_tables(tmp_path):
    import zipfile

    with zipfile.ZipFile(tmp_path / "rearr.zip", "w") as z:
        for p in (REPO / "rearr").rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                z.write(p, p.relative_to(REPO))
    code = "import numpy as np, rearr; print(rearr.rearrange(np.ones((2, 3)), 'a b -> b a').shape)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(tmp_path / "rearr.zip")},
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "(3, 2)" and out.stderr == ""


def test_a_package_without_grammar_lark_uses_its_tables(tmp_path):
    """A frozen application or a trimmed install that dropped the data file."""
    shutil.copytree(REPO / "rearr", tmp_path / "rearr", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "rearr" / "grammar.lark").unlink()
    out = _fresh_process({}, tmp_path, root=tmp_path)
    assert out.stdout.split() == ["False", "False"] and out.stderr == ""
