"""The `rearr` command: `rearr check [PATH ...]` and `rearr explain PATTERN --shape ...`.

`check` exits 0 when every pattern is valid, 1 when it found problems, and 2
when it could not check everything it was asked to (bad usage, a missing
path, a file that cannot be read, is not UTF-8 or is not valid Python) --
whatever else it found. `check` needs nothing of rearr but rearr.tools.lint, and never
imports torch; `explain` imports the planner and the backends when it runs.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence

from ..errors import RearrError
from . import lint

# Folders that hold no code of the project's own (hidden folders are skipped too).
SKIPPED_DIRS = frozenset({"__pycache__", "venv", "build", "dist"})


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # bad usage (2) or --help (0): a return value, as the signature says
        return int(e.code or 0)
    if args.version:
        from .. import __version__

        print(f"rearr {__version__}")
        return 0
    if args.command is None:
        parser.print_usage(sys.stderr)
        return 2
    try:
        return args.run(args)
    except BrokenPipeError:  # the reader of `rearr explain ... | head` stopped early
        _drop_stdout()
        return 1


def _drop_stdout() -> None:
    """After a closed pipe: point stdout at devnull, so that the flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rearr", description="Check and explain rearr patterns.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.set_defaults(command=None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="validate the pattern literals in Python files")
    check.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders (default: .)")
    check.add_argument("--einops", action="store_true", help="check einops' calls too")
    check.add_argument("--format", choices=sorted(FORMATS), default="text", help="output format (default: text)")
    check.set_defaults(run=_check)

    explain = commands.add_parser("explain", help="print the code that a pattern lowers to")
    explain.add_argument("pattern", metavar="PATTERN")
    explain.add_argument("--shape", action="append", type=_shape, required=True,
                         help="the input's shape, e.g. 2,5,32 (einsum: once per operand)")
    explain.add_argument("--op", choices=("rearrange", "reduce", "repeat", "scatter", "einsum"), default="rearrange")
    explain.add_argument("--reduction", metavar="NAME", help="the reduction of reduce or scatter, e.g. sum")
    # Written out, not asked of the registry: `check` must not import the backends (a test keeps it in step).
    explain.add_argument("--backend", metavar="NAME",
                         help="the backend whose code is shown: torch (default), numpy, dask, array_api or jax")
    explain.add_argument("-l", "--length", action="append", type=_length, default=[], metavar="NAME=INT",
                         dest="lengths", help="an axis length (-l h=4) or an index's shape (-l idx=2,4); repeatable")
    explain.add_argument("--show", action="store_true", help="also run the plan on an example and show the result")
    explain.set_defaults(run=_explain)
    return parser


# --- check ---------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    files, unreadable, notes = python_files(args.paths)
    for message in unreadable:
        _say(f"rearr check: {message}")
    problems = [p for path in files for p in lint.check_file(path, einops=args.einops, notes=notes)]
    for note in notes:
        _say(f"rearr check: note: {note}")
    code = 2 if unreadable or any(p.code in lint.UNCHECKED for p in problems) else 1 if problems else 0
    out = FORMATS[args.format](problems)
    if out:
        try:
            _print_out(out, problems if args.format == "json" else None)
        except BrokenPipeError:  # `rearr check | head`: the reader has all it wanted; the verdict stands
            _drop_stdout()
    return code


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _print_out(out: str, json_problems: list[lint.Problem] | None) -> None:
    """Print to stdout whatever its encoding: JSON as ASCII escapes, text with backslash escapes."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        out.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        if json_problems is not None:
            out = format_json(json_problems, ascii_only=True)
        else:
            out = out.encode(encoding, "backslashreplace").decode(encoding)
    print(out)
    sys.stdout.flush()  # a closed pipe shows here, inside main's handler, not at exit


def python_files(paths: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """The files to check, each folder's in sorted order; a message for each path that cannot be read;
    and a note for each file in a folder that is skipped because it is not a regular file (a FIFO).

    A file named on the command line is checked whatever its suffix; in folders, only *.py files.
    """
    files: list[str] = []
    unreadable: list[str] = []
    notes: list[str] = []
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError as e:  # a missing path, or a symlink loop
            reason = "no such file or folder" if e.errno == errno.ENOENT else lint.describe_os_error(e)
            unreadable.append(f"{path}: {reason}")
            continue
        if not stat.S_ISDIR(mode):
            files.append(os.path.normpath(path))  # a FIFO or a device named here is RA002: never read
            continue
        found = []
        for root, dirs, names in os.walk(path, onerror=lambda e: unreadable.append(f"{e.filename}: {e.strerror}")):
            dirs[:] = [d for d in dirs if not _skipped_dir(d)]
            for name in names:
                if name.endswith(".py"):
                    found.append(os.path.join(root, name))
        for file in sorted(os.path.normpath(f) for f in found):
            kind = _not_regular(file)
            if kind is None:
                files.append(file)
            else:
                notes.append(f"{file}: skipped: not a regular file ({kind})")
    return list(dict.fromkeys(files)), unreadable, notes


def _not_regular(path: str) -> str | None:
    """What the file is when it exists and is not a regular file; None otherwise (a file that
    cannot be stat'ed, such as a link loop, is checked, and reported by check_file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else lint.file_kind(mode)


def _skipped_dir(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRS or name.endswith(".egg-info")


def format_text(problems: list[lint.Problem]) -> str:
    return "\n".join(f"{p.path}:{p.line}:{p.col}: {p.code} {p.text}" for p in problems)


def format_github(problems: list[lint.Problem]) -> str:
    """GitHub Actions workflow commands, one annotation per problem."""
    lines = []
    for p in problems:
        # The runner drops an annotation that has columns and spans several lines.
        one_line = p.end_line == p.line
        span = {"col": p.col, "endLine": p.end_line, "endColumn": p.end_col} if one_line else {"endLine": p.end_line}
        props = {"file": p.path, "line": p.line, **span, "title": f"rearr {p.code}"}
        joined = ",".join(f"{k}={_escape_property(str(v))}" for k, v in props.items())
        lines.append(f"::error {joined}::{_escape_data(p.text)}")
    return "\n".join(lines)


def _escape_data(text: str) -> str:
    # The escapes of GitHub's runner (toolkit/core command.ts): '%' first, so the others stay.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_json(problems: list[lint.Problem], ascii_only: bool = False) -> str:
    keys = ("path", "line", "col", "end_line", "end_col", "code", "message", "hint", "pattern")
    return json.dumps([{k: getattr(p, k) for k in keys} for p in problems], indent=2, ensure_ascii=ascii_only)


FORMATS: dict[str, Callable[[list[lint.Problem]], str]] = {
    "text": format_text,
    "github": format_github,
    "json": format_json,
}


# --- explain -------------------------------------------------------------------


def _explain(args: argparse.Namespace) -> int:
    from .explain import explain  # imports the planner and a backend: only this command needs them

    options = {"backend": args.backend} if args.backend else {}
    try:
        result = explain(args.pattern, *args.shape, op=args.op, reduction=args.reduction, show=args.show,
                         **options, **dict(args.lengths))
    except RearrError as e:
        print(f"rearr explain: {e}", file=sys.stderr)  # str(e) starts with the code
        return 1
    print(str(result))
    return 0


def _shape(text: str) -> tuple[int, ...]:
    """'2,5,32' -> (2, 5, 32); '' is the shape of a scalar."""
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    if not all(p.isdecimal() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape: write integers and commas, e.g. 2,5,32")
    return tuple(int(p) for p in parts)


def _length(text: str) -> tuple[str, int | tuple[int, ...]]:
    """'h=4' -> ('h', 4): an axis length; 'idx=2,4' -> ('idx', (2, 4)): an index's shape."""
    name, eq, value = (part.strip() for part in text.partition("="))
    if eq and name.isidentifier() and value.isdecimal():
        return name, int(value)
    if eq and name.isidentifier() and "," in value:
        return name, _shape(value)
    raise argparse.ArgumentTypeError(f"{text!r} is not a length: write NAME=INT (e.g. h=4) or NAME=SHAPE (idx=2,4)")


if __name__ == "__main__":
    raise SystemExit(main())
