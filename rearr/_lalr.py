"""The LALR(1) parser of rearr/grammar.lark: Lark's stand-alone parser, generated once and cached.

Lark's stand-alone generator (``lark.tools.standalone``) writes a module that
holds Lark's LALR runtime and the analysed grammar's tables and imports
nothing of lark. Loading it costs a few ms; making it costs importing lark
(~25 ms) and analysing the grammar (~30 ms, plus a garbage collection over
every object of the process when torch is loaded: ~75 ms). So it is made once
per grammar text and Python version and kept, compiled, in the user's cache
directory:

    $REARR_CACHE_DIR (an empty value: no cache), else $XDG_CACHE_HOME/rearr,
    else ~/.cache/rearr

Nothing is written next to the package (site-packages may be read-only).
Where the cache cannot be written, each process makes the parser in memory.
grammar.lark stays the one definition of the language: a cached parser is used
only when the grammar text it was made from equals grammar.lark's.
"""

from __future__ import annotations

import gc
import marshal
import os
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

GRAMMAR = Path(__file__).with_name("grammar.lark")
START = "pattern"
LEXER = "basic"  # the grammar's terminals never overlap: one regex, where "contextual" compiles one per state
FORMAT = 1  # bump when the generator's options or the cache file's layout change
MODULE = "rearr._lalr_standalone"  # its name in sys.modules (the generated dataclasses look it up)


def cache_dir() -> Path | None:
    """Where the generated parser is kept, or None for no cache."""
    configured = os.environ.get("REARR_CACHE_DIR")
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rearr"


def load(transformer: object) -> tuple[ModuleType, Any]:
    """The generated parser module (from the cache when it matches grammar.lark, otherwise made now)
    and its parser, calling ``transformer``'s methods on each rule."""
    text = GRAMMAR.read_text(encoding="utf-8")
    directory = cache_dir()
    key = zlib.crc32(f"{FORMAT}\n{START}\n{LEXER}\n{text}".encode())
    path = directory / f"lalr-{key:08x}-{sys.implementation.cache_tag}.bin" if directory else None
    code = _read(path, text) if path else None
    if code is None:
        code = compile(generate(text), f"<lark stand-alone parser of {GRAMMAR}>", "exec")
        if path:
            _write(path, text, code)
    module = ModuleType(MODULE)
    sys.modules[MODULE] = module
    with _no_gc():
        exec(code, module.__dict__)
        return module, module.Lark_StandAlone(transformer=transformer)


def generate(text: str) -> str:
    """The stand-alone parser's source, made by Lark from the grammar text."""
    import io

    from lark import Lark
    from lark.tools.standalone import gen_standalone

    out = io.StringIO()
    with _no_gc():
        gen_standalone(Lark(text, parser="lalr", start=START, lexer=LEXER), out=out)
    return out.getvalue()


@contextmanager
def _no_gc() -> Iterator[None]:
    """No garbage collection while building: the many young objects made each collection walk the
    process's (with torch: millions of) objects again and again, ~75 ms of a 130 ms analysis."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(path: Path, text: str):
    """The cached code object, or None when missing, unreadable or made from another grammar text."""
    try:
        fmt, grammar, code = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return code if fmt == FORMAT and grammar == text else None


def _write(path: Path, text: str, code) -> None:
    """Store atomically (a concurrent process reads the old file or the new one); failures are ignored."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp.write_bytes(marshal.dumps((FORMAT, text, code)))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
