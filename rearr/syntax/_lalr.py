"""The LALR(1) parser of rearr/syntax/grammar.lark: Lark's stand-alone parser, generated once by a developer and
shipped in the package as rearr/syntax/_lalr_standalone.py.

Lark's stand-alone generator (``lark.tools.standalone``) writes a module that holds Lark's LALR runtime
and the analysed grammar's tables and imports nothing of lark. It is a build step: the module is made from
grammar.lark with ``python -m rearr.syntax._lalr`` and committed. So at run time rearr imports lark never, writes
no file, and executes nothing but its own package (read by Python's import system under its own rules for
``__pycache__``); a fresh machine pays no grammar analysis on its first pattern.

grammar.lark stays the one definition of the language. The generated module records the SHA-256 of the
grammar text it was made from; when grammar.lark says otherwise (an edit not yet regenerated, in a
checkout), the parser is built in memory from grammar.lark with lark, and stderr says once how to
regenerate. tests/syntax/test_parser_cache.py fails until the committed module matches.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import sys
from _thread import allocate_lock
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import RearrError

GRAMMAR = Path(__file__).with_name("grammar.lark")
GENERATED = Path(__file__).with_name("_lalr_standalone.py")
MODULE = "rearr.syntax._lalr_standalone"  # the generated module (its dataclasses look themselves up by this name)
START = "pattern"
LEXER = "basic"  # the grammar's terminals never overlap: one regex, where "contextual" compiles one per state
HEADER = ("# Generated from rearr/syntax/grammar.lark by `python -m rearr.syntax._lalr`\n"
          "# (Lark's stand-alone generator). Do not edit: edit grammar.lark and run that command again.\n")
_noted: list[bool] = []  # the stale-module note is printed once per process
_LOCK = allocate_lock()


def grammar_digest(text: str) -> str:
    """What the generated module records of the grammar text (and of the options) it was made from."""
    return hashlib.sha256(f"{START}\n{LEXER}\n{text}".encode()).hexdigest()


def load(transformer: object) -> tuple[ModuleType, Any]:
    """The generated parser module and its parser, calling ``transformer``'s methods on each rule.
    One thread at a time: a stale module is replaced before another thread can see it."""
    try:
        text: str | None = GRAMMAR.read_text(encoding="utf-8")
    except OSError:  # a package without its data files (a zip, a frozen app): the module is all there is
        text = None
    with _LOCK, _no_gc():
        module = importlib.import_module(MODULE)
        if text is not None and module.GRAMMAR_SHA256 != grammar_digest(text):
            module = _in_memory(text)
        return module, module.Lark_StandAlone(transformer=transformer)


def _in_memory(text: str) -> ModuleType:
    """The parser made now from grammar.lark (a checkout whose grammar was edited after generation)."""
    if not _noted:
        _noted.append(True)
        print(f"rearr: {GENERATED.name} was made from another grammar.lark; building the parser in memory "
              f"(run `python -m rearr.syntax._lalr` to regenerate it)", file=sys.stderr)
    try:
        source = generate(text)
    except ImportError:
        raise RearrError(f"grammar.lark was edited after {GENERATED.name} was made, and lark is not installed to "
                         "build the parser from it", code="RA100",
                         hint="pip install lark, then run python -m rearr.syntax._lalr") from None
    module = ModuleType(MODULE)
    module.__dict__["__file__"] = "<in memory>"
    stale = sys.modules[MODULE]
    sys.modules[MODULE] = module  # the generated dataclasses look their module up while it runs
    try:
        exec(compile(source, f"<lark stand-alone parser of {GRAMMAR}>", "exec"), module.__dict__)
    except BaseException:
        sys.modules[MODULE] = stale
        raise
    setattr(sys.modules[__package__], MODULE.rpartition(".")[2], module)  # rearr.syntax._lalr_standalone too
    return module


def generate(text: str) -> str:
    """The stand-alone parser's source, made by Lark from the grammar text, with its header."""
    import io

    from lark import Lark
    from lark.tools.standalone import gen_standalone

    out = io.StringIO()
    with _no_gc():
        gen_standalone(Lark(text, parser="lalr", start=START, lexer=LEXER), out=out)
    return f"{HEADER}GRAMMAR_SHA256 = {grammar_digest(text)!r}\n\n{out.getvalue()}"


@contextmanager
def _no_gc() -> Iterator[None]:
    """No garbage collection while building: the many young objects made would each time walk the
    process's objects again (with torch loaded, millions), the greater part of the build's cost."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def main() -> None:
    """``python -m rearr.syntax._lalr``: write rearr/syntax/_lalr_standalone.py from grammar.lark (needs lark)."""
    GENERATED.write_text(generate(GRAMMAR.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {GENERATED}")


if __name__ == "__main__":
    main()
