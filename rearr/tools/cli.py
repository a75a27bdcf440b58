"""The `rearr` command: `rearr check [PATH ...]` and `rearr explain PATTERN --shape ... [--svg FILE]`.

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
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from urllib.parse import quote

from ..errors import CODES, RearrError
from . import config, ignore, lint


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # bad usage (2) or --help (0): a return value, as the signature says
        return int(e.code or 0)
    if args.version:
        from .._version import __version__

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
    for flag, what in (("--select", "codes or prefixes to report (default: RA, all)"),
                       ("--ignore", "codes or prefixes not to report, e.g. RA301,RA2"),
                       ("--exclude", "globs of files and folders to leave out, in place of the defaults"),
                       ("--extend-exclude", "globs to leave out besides the defaults")):
        check.add_argument(flag, action="append", metavar="LIST", help=f"{what}; comma-separated, repeatable")
    check.add_argument("-q", "--quiet", action="store_true", help="print the findings only: no summary, no progress")
    check.add_argument("--statistics", action="store_true", help="print the count of each code instead of the findings")
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
    explain.add_argument("--svg", metavar="FILE", help="also write the picture (the input and the result as "
                         "grids of labelled elements) to FILE, an SVG")
    explain.add_argument("--requires-grad", action="store_true",
                         help="torch: the code that runs when the input records a backward")
    explain.set_defaults(run=_explain)
    return parser


# --- check ---------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    notes: list[str] = []
    try:
        settings = _settings(args, notes)
    except config.ConfigError as e:
        _say(f"rearr check: {e}")
        return 2
    files, unreadable, walk_notes = python_files(args.paths, settings)
    notes += walk_notes
    for message in unreadable:
        _say(f"rearr check: {message}")
    if not files and not unreadable:
        _say(f"rearr check: warning: no Python file found in {' '.join(args.paths)}")
        return 2
    tally = lint.Tally()
    progress = _Progress(len(files)) if not args.quiet and sys.stderr.isatty() else None
    problems = []
    for done, path in enumerate(files, 1):
        problems += lint.check_file(path, einops=args.einops, notes=notes, tally=tally)
        if progress:
            progress.show(done)
    if progress:
        progress.clear()
    problems = [p for p in problems if settings.enabled(p.code)]
    for note in notes:
        _say(f"rearr check: note: {note}")
    code = 2 if unreadable or any(p.code in lint.UNCHECKED for p in problems) else 1 if problems else 0
    out = format_statistics(problems, args.format) if args.statistics else FORMATS[args.format](problems)
    if args.format == "text" and not args.quiet:
        out = "\n".join(filter(None, [out, summary(problems, len(files), tally.patterns, len(unreadable))]))
    if out:
        try:
            _print_out(out, problems if args.format == "json" and not args.statistics else None)
        except BrokenPipeError:  # `rearr check | head`: the reader has all it wanted; the verdict stands
            _drop_stdout()
    return code


def _settings(args: argparse.Namespace, notes: list[str]) -> config.Settings:
    """pyproject.toml's `[tool.rearr.check]` (the nearest, from the first path up), under the command line."""
    if args.statistics and args.format not in ("text", "json"):
        raise config.ConfigError("--statistics prints text or json: use --format text or --format json")
    settings = config.load(config.find_pyproject(args.paths[0]), notes)
    config.override(settings, select=config.split_codes(args.select), ignore=config.split_codes(args.ignore),
                    exclude=_split(args.exclude), extend_exclude=_split(args.extend_exclude))
    return settings


def _split(values: list[str] | None) -> list[str] | None:
    return None if values is None else [v.strip() for value in values for v in value.split(",") if v.strip()]


class _Progress:
    """'files done/total' on a terminal's stderr, redrawn in place at most a few times a second."""

    def __init__(self, total: int) -> None:
        self.total, self.shown, self.last = total, False, time.monotonic()

    def show(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last >= 0.2:
            sys.stderr.write(f"\rrearr check: {done:,}/{self.total:,} files")
            sys.stderr.flush()
            self.shown, self.last = True, now

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def summary(problems: list[lint.Problem], files: int, patterns: int, unreadable: int = 0) -> str:
    """'Found 3 problems in 2 files (1,245 files, 9,876 patterns checked).' or 'All checks passed (...).'

    When some path could not be read, a clean result is not 'All checks passed'."""
    checked = f"({_count(files, 'file')}, {_count(patterns, 'pattern')} checked)."
    unread = f" {_count(unreadable, 'path')} could not be read." if unreadable else ""
    if not problems:
        return f"{'No problem found' if unreadable else 'All checks passed'} {checked}{unread}"
    in_files = _count(len({p.path for p in problems}), "file")
    return f"Found {_count(len(problems), 'problem')} in {in_files} {checked}{unread}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def format_statistics(problems: list[lint.Problem], fmt: str) -> str:
    """The count of each code, most frequent first."""
    counts = sorted(Counter(p.code for p in problems).items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        return json.dumps([{"code": c, "count": n, "meaning": CODES.get(c)} for c, n in counts], indent=2)
    width = len(str(counts[0][1])) if counts else 1
    return "\n".join(f"{n:>{width}}  {c}  {CODES.get(c, '')}" for c, n in counts)


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


def python_files(paths: Iterable[str], settings: config.Settings | None = None
                 ) -> tuple[list[str], list[str], list[str]]:
    """The files to check, each folder's in sorted order; a message for each path that cannot be read;
    and a note for each file in a folder that is skipped because it is not a regular file (a FIFO).

    A file named on the command line is checked whatever its suffix, and whatever `exclude` or a
    .gitignore says; in folders, only *.py files that neither leaves out.
    """
    settings = settings or config.Settings()
    excludes = [ignore.Globs.parse(settings.bases["exclude"], settings.exclude),
                ignore.Globs.parse(settings.bases["extend_exclude"], settings.extend_exclude)]
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
        for file in _walk(path, excludes, unreadable):
            kind = _not_regular(file)
            if kind is None:
                files.append(file)
            else:
                notes.append(f"{file}: skipped: not a regular file ({kind})")
    return list(dict.fromkeys(files)), unreadable, notes


def _walk(top: str, excludes: list[ignore.Globs], unreadable: list[str]) -> list[str]:
    """The *.py files under a folder, sorted, less what `exclude` and (in a git work tree) .gitignore leave out."""
    tree = ignore.work_tree(top)
    gitignores = {os.path.abspath(top): _gitignores_above(os.path.abspath(top), tree)}
    found = []
    for root, dirs, names in os.walk(top, onerror=lambda e: unreadable.append(f"{e.filename}: {e.strerror}")):
        here = os.path.abspath(root)
        chain = gitignores.pop(here, [])
        if tree is not None and (own := ignore.gitignore(here)) is not None:
            chain = [*chain, own]
        kept = []
        for d in dirs:
            full = os.path.join(here, d)
            if not _left_out(full, True, excludes, chain):
                kept.append(d)
                gitignores[full] = chain
        dirs[:] = kept
        found += [os.path.join(root, n) for n in names
                  if n.endswith(".py") and not _left_out(os.path.join(here, n), False, excludes, chain)]
    return sorted(os.path.normpath(f) for f in found)


def _gitignores_above(folder: str, tree: str | None) -> list[ignore.Globs]:
    """The .gitignore files from the work tree's root down to ``folder``'s parent, root first."""
    chain: list[ignore.Globs] = []
    if tree is None or folder == tree:
        return chain
    parts = os.path.relpath(os.path.dirname(folder), tree).split(os.sep)
    for i in range(len(parts) + 1):
        own = ignore.gitignore(os.path.join(tree, *[p for p in parts[:i] if p != os.curdir]))
        if own is not None:
            chain.append(own)
    return chain


def _left_out(path: str, is_dir: bool, excludes: list[ignore.Globs], gitignores: list[ignore.Globs]) -> bool:
    return ignore.left_out(excludes, path, is_dir) or ignore.left_out(gitignores, path, is_dir)


def _not_regular(path: str) -> str | None:
    """What the file is when it exists and is not a regular file; None otherwise (a file that
    cannot be stat'ed, such as a link loop, is checked, and reported by check_file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else lint.file_kind(mode)


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


def format_sarif(problems: list[lint.Problem]) -> str:
    """SARIF 2.1.0, as GitHub code scanning reads it: one run, every code as a rule, one result per problem."""
    from .._version import __version__

    rules = [{"id": code, "shortDescription": {"text": meaning}} for code, meaning in CODES.items()]
    index = {code: i for i, code in enumerate(CODES)}
    results = [{
        "ruleId": p.code, "ruleIndex": index[p.code], "level": "error", "message": {"text": p.text},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": _uri(p.path)},
            "region": {"startLine": p.line, "startColumn": p.col, "endLine": p.end_line, "endColumn": p.end_col},
        }}],
    } for p in problems]
    driver = {"name": "rearr", "version": __version__, "informationUri": "https://pypi.org/project/rearr/",
              "rules": rules}
    log = {"version": "2.1.0", "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
           "runs": [{"tool": {"driver": driver}, "results": results}]}
    return json.dumps(log, indent=2)  # ASCII escapes: it prints on any stdout


def _uri(path: str) -> str:
    """A relative path as a relative URI ('src/a b.py' -> 'src/a%20b.py'); an absolute one as file://."""
    return Path(path).as_uri() if os.path.isabs(path) else quote(Path(path).as_posix())


FORMATS: dict[str, Callable[[list[lint.Problem]], str]] = {
    "text": format_text,
    "github": format_github,
    "json": format_json,
    "sarif": format_sarif,
}


# --- explain -------------------------------------------------------------------


def _explain(args: argparse.Namespace) -> int:
    from .explain import explain  # imports the planner and a backend: only this command needs them

    options = {"backend": args.backend} if args.backend else {}
    if args.requires_grad:
        options["requires_grad"] = True
    try:
        result = explain(args.pattern, *args.shape, op=args.op, reduction=args.reduction, show=args.show,
                         **options, **dict(args.lengths))
    except RearrError as e:
        print(f"rearr explain: {e}", file=sys.stderr)  # str(e) starts with the code
        return 1
    if args.svg:  # first: a reader that closes stdout early (`| head`) does not lose the file
        try:
            Path(args.svg).write_text(result.to_svg() + "\n", encoding="utf-8")
        except RearrError as e:
            print(f"rearr explain: {e}", file=sys.stderr)
            return 1
        except OSError as e:
            print(f"rearr explain: cannot write {args.svg}: {lint.describe_os_error(e)}", file=sys.stderr)
            return 2
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
