"""The `rearr` command: `rearr check [PATH ...]` and `rearr explain PATTERN --shape ... [--svg FILE]`.

`check` exits 0 when every pattern is valid, 1 when it found problems, and 2
when it could not check everything it was asked to (bad usage, a malformed
setting, a missing path, a file that cannot be read, is not UTF-8 or is not
valid Python) -- whatever else it found. Every malformed input is one line on
stderr, never a traceback. `check` needs nothing of rearr but the rules and
rearr.tools' own modules, and never imports torch; `explain` imports the
planner and the backends when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ..errors import RearrError
from . import config, files, fix, lint, report
from .report import printable


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
    except _OutputError as e:  # stdout on a full disk: what was found is lost, so it is no verdict
        _drop_stdout()
        _say(f"rearr {args.command}: cannot write the output: {lint.describe_os_error(e.error)}")
        return 2


class _OutputError(Exception):
    """Writing to stdout failed (other than a closed pipe)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _drop_stdout() -> None:
    """After a closed pipe: point stdout at devnull, so that the flush at exit does not fail again."""
    if sys.stdout is None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _Parser(argparse.ArgumentParser):
    """argparse, with its messages made printable: an unknown option is written back as given, and a
    terminal would act on an escape sequence in it."""

    def error(self, message: str) -> NoReturn:
        if sys.stderr is not None:  # closed (2>&-): argparse would print the usage to stdout
            self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rearr", description="Check and explain rearr patterns.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.set_defaults(command=None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="validate the pattern literals in Python files")
    check.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                       help="files or folders (default: .); - reads the source from stdin")
    check.add_argument("--config", metavar="FILE", help="read the settings from FILE (a rearr.toml or a "
                       "pyproject.toml) for every file, in place of each file's nearest one")
    check.add_argument("--einops", action="store_true", default=None,
                       help="check einops' calls (the default; turns `einops = false` off)")
    check.add_argument("--no-einops", action="store_false", dest="einops", help="leave einops' calls alone")
    check.add_argument("--output-format", "--format", dest="format", choices=sorted(report.FORMATS), default="text",
                       help="output format (default: text)")
    for flag, what in (("--select", "comma-separated codes or prefixes to report, in place of the config's"),
                       ("--extend-select", "codes or prefixes to report besides the selected ones"),
                       ("--ignore", "codes or prefixes not to report, e.g. RA301,RA2 (besides the config's)"),
                       ("--extend-ignore", "the same as --ignore"),
                       ("--per-file-ignores", "GLOB:CODES, e.g. 'tests/**:RA2': codes not to report in those files,"
                        " in place of the config's"),
                       ("--extend-per-file-ignores", "GLOB:CODES besides the config's per-file-ignores"),
                       ("--exclude", "globs of files and folders to leave out, in place of the defaults"),
                       ("--extend-exclude", "globs to leave out besides the defaults")):
        check.add_argument(flag, action="append", metavar="LIST", help=f"{what}; repeatable")
    check.add_argument("--force-exclude", action="store_true", default=None,
                       help="leave out the paths named on the command line too, when the excludes name them")
    check.add_argument("--no-force-exclude", action="store_false", dest="force_exclude",
                       help="check every path named (the default)")
    check.add_argument("--stdin-filename", metavar="PATH", help="with -: the path of the source read from stdin "
                       "(its config, per-file-ignores and the path printed)")
    check.add_argument("--fix", action="store_true", help="apply the fixes that are literal (a renamed axis or "
                       "keyword, a letter-style einsum spaced, an unused noqa code removed) in place, and check again")
    check.add_argument("--diff", action="store_true", help="print the fixes as a diff, and write nothing")
    check.add_argument("--add-noqa", action="store_true", help="add a `# noqa: CODES` comment to each line with a "
                       "finding, in place")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 when problems are found (2 still says "
                       "that some input could not be checked)")
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
    try:
        os.getcwd()
    except OSError as e:  # every relative path, and where a config search stops, is relative to it
        _say(f"rearr check: the current folder cannot be read ({lint.describe_os_error(e)}): "
             "run rearr check from a folder that exists")
        return 2
    try:
        configs = _configs(args)
        if args.paths == ["-"]:
            return _check_stdin(args, configs)
        if "-" in args.paths:
            raise config.ConfigError("- (stdin) cannot be named with other paths")
        found = files.find(args.paths, configs)
    except config.ConfigError as e:
        _say(f"rearr check: {e}")
        return 2
    for message in found.unreadable:
        _say(f"rearr check: {message}")
    if not found.files and not found.unreadable:
        if found.excluded:  # force-exclude: the paths named are left out on purpose (pre-commit)
            if args.format == "text" and not args.quiet:
                _print_out(f"Nothing to check: {report.count(found.excluded, 'path')} named, left out by the "
                           "excludes (force-exclude).", None)
            return 0
        _say(f"rearr check: warning: no Python file found in {printable(' '.join(args.paths))}")
        return 2
    tally = lint.Tally()
    run = _Run(args, tally)
    progress = _Progress(len(found.files)) if not args.quiet and sys.stderr is not None and sys.stderr.isatty() \
        else None
    for done, source in enumerate(found.files, 1):
        try:
            run.check(source.path, source.settings)
        except Exception as e:  # a bug of the checker: that file is not checked, the others are
            _say(f"rearr check: {source.path}: not checked: rearr check failed on it ({type(e).__name__}: {e}); "
                 "this is a bug of rearr check, please report it")
            run.failed += 1
        if progress:
            progress.show(done)
    if progress:
        progress.clear()
    for note in (*configs.notes, *found.notes):
        _say(f"rearr check: note: {printable(note)}")
    return run.finish(len(found.files), len(found.unreadable))


class _Run:
    """One run over the files: each file's findings as its settings select them, and what --fix, --diff and
    --add-noqa did to it."""

    def __init__(self, args: argparse.Namespace, tally: lint.Tally) -> None:
        self.args, self.tally = args, tally
        self.problems: list[lint.Problem] = []
        self.fixed = 0  # fixes applied (or, with --diff, that would be)
        self.noqa = 0  # lines given a noqa comment
        self.changed = 0  # files written (or, with --diff, shown)
        self.failed = 0  # files that the checker failed on
        self.unwritten = 0  # files whose fixes could not be written

    def check(self, path: str, settings: config.Settings, text: str | lint.Problem | None = None) -> str | None:
        """Check one file (its text given, or read from ``path``) and, when --fix or --add-noqa changed it,
        write it; the text it should then have (stdin: written by the caller)."""
        read = text is None
        text = lint.read_text(path) if text is None else text
        if isinstance(text, lint.Problem):
            self.problems.append(text)
            return None
        bom, body = text.startswith("\ufeff"), text.removeprefix("\ufeff")
        full = os.path.abspath(path)
        unused = settings.enabled("RA010", full)

        def selected(source: str, tally: lint.Tally | None = None) -> list[lint.Problem]:
            found = lint.check_source(source, path, einops=settings.einops, tally=tally or lint.Tally(),
                                      unused_noqa=unused)
            return [p for p in found if settings.enabled(p.code, full)]

        problems = found = selected(body, self.tally)
        new, applied, added = body, 0, 0
        if self.args.fix or self.args.diff:
            new, applied, problems = fix.fixed(body, lambda source: selected(source) if source != body else found)
        if self.args.add_noqa:
            wanted: dict[tuple[int, ...], set[str]] = {}
            for p in problems:
                if p.code not in lint.UNCHECKED and p.code != "RA010" and p.noqa_lines:
                    wanted.setdefault(p.noqa_lines, set()).add(p.code)
            new, added = fix.add_noqa(new, wanted)
            problems = selected(new)
        if new == body:
            self.problems += problems
            return None
        if self.args.diff:
            _print_out(fix.diff(path, body, new).rstrip("\n"), None)
        elif read and not self._write(path, ("\ufeff" if bom else "") + new):
            self.problems += found  # nothing was written: the file holds what it held
            return None
        self.problems += problems
        self.fixed += applied
        self.noqa += added
        self.changed += 1
        return None if self.args.diff else ("\ufeff" if bom else "") + new

    def _write(self, path: str, text: str) -> bool:
        try:
            with open(path, "wb") as f:  # bytes: the line ends stay as they are
                f.write(text.encode("utf-8"))
        except OSError as e:
            _say(f"rearr check: {path}: cannot write the fixes: {lint.describe_os_error(e)}")
            self.unwritten += 1
            return False
        return True

    def _unchecked(self) -> bool:
        """Print the files that could not be checked (--diff and --add-noqa print no findings); whether any."""
        unchecked = [p for p in self.problems if p.code in lint.UNCHECKED]
        for line in report.format_text(unchecked).splitlines():
            _say(line)
        return bool(unchecked)

    def finish(self, files_checked: int, unreadable: int) -> int:
        args = self.args
        if args.diff or args.add_noqa:
            unchecked = self._unchecked()
            if not args.quiet:
                _say(f"Would fix {report.count(self.fixed, 'problem')} in {report.count(self.changed, 'file')}."
                     if args.diff else
                     f"Added {report.count(self.noqa, 'noqa comment')} to {report.count(self.changed, 'file')}.")
            if unreadable or self.failed or self.unwritten or unchecked:
                return 2
            return 1 if args.diff and self.fixed else 0
        return _report(args, self.problems, files_checked, self.tally, unreadable + self.failed, self.fixed,
                       self.unwritten)


def _configs(args: argparse.Namespace) -> config.Configs:
    if args.statistics and args.format not in ("text", "json"):
        raise config.ConfigError("--statistics prints text or json: use --output-format text or json")
    if args.stdin_filename is not None and args.paths != ["-"]:
        raise config.ConfigError("--stdin-filename names the source read from stdin: pass - as the path")
    if args.add_noqa and args.paths == ["-"]:
        raise config.ConfigError("--add-noqa writes the files it checks: it cannot take - (stdin)")
    if sum((args.fix, args.diff, args.add_noqa)) > 1:
        raise config.ConfigError("--fix, --diff and --add-noqa do one thing each: give one of them")
    split = config.split
    layer = config.command_line(
        select=split(args.select), extend_select=split(args.extend_select), ignore=split(args.ignore),
        extend_ignore=split(args.extend_ignore), per_file_ignores=args.per_file_ignores,
        extend_per_file_ignores=args.extend_per_file_ignores, exclude=split(args.exclude),
        extend_exclude=split(args.extend_exclude), force_exclude=args.force_exclude, einops=args.einops)
    return config.Configs(layer, args.config)


def _check_stdin(args: argparse.Namespace, configs: config.Configs) -> int:
    """`rearr check - --stdin-filename PATH`: the source from stdin, checked as the file PATH would be."""
    path = args.stdin_filename or "-"
    full = os.path.abspath(path if args.stdin_filename else "stdin.py")
    settings = configs.for_folder(os.path.dirname(full), files.work_root(full, full))
    if args.stdin_filename and settings.force_exclude and files.forced_out(full, configs):
        if args.format == "text" and not args.quiet:
            _print_out("Nothing to check: the file is left out by the excludes (force-exclude).", None)
        return 0
    run = _Run(args, lint.Tally())
    data = sys.stdin.buffer.read()
    text = run.check(path, settings, lint.decode(data, path))
    if not args.fix:
        return run.finish(1, 0)
    # --fix on stdin, as an editor asks for it: the fixed source on stdout, what is left on stderr.
    sys.stdout.buffer.write(text.encode("utf-8") if text is not None else data)
    sys.stdout.flush()
    for line in report.format_text(run.problems).splitlines():
        _say(line)
    return 2 if any(p.code in lint.UNCHECKED for p in run.problems) else 1 if run.problems and not args.exit_zero \
        else 0


def _report(args: argparse.Namespace, problems: list[lint.Problem], files_checked: int, tally: lint.Tally,
            unreadable: int, fixed: int = 0, unwritten: int = 0) -> int:
    """Print the findings (and the summary) as asked; the exit code."""
    code = 2 if unreadable or unwritten or any(p.code in lint.UNCHECKED for p in problems) else 1 if problems else 0
    if code == 1 and args.exit_zero:
        code = 0
    out = report.format_statistics(problems, args.format) if args.statistics else report.FORMATS[args.format](problems)
    if args.format == "text" and not args.quiet:
        out = "\n".join(filter(None, [out, report.summary(problems, files_checked, tally, unreadable, fixed,
                                                           unwritten)]))
    if out:
        try:
            _print_out(out, problems if args.format == "json" and not args.statistics else None)
        except BrokenPipeError:  # `rearr check | head`: the reader has all it wanted; the verdict stands
            _drop_stdout()
    return code


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


def _say(message: str) -> None:
    if sys.stderr is None:  # closed (2>&-): nothing can be said, and stdout is no place for it
        return
    try:
        print(printable(message), file=sys.stderr)
    except OSError:  # stderr on a full disk too: the exit code is all that is left
        pass


def _print_out(out: str, json_problems: list[lint.Problem] | None) -> None:
    """Print to stdout whatever its encoding: JSON as ASCII escapes, text with backslash escapes."""
    if sys.stdout is None:  # closed (>&-): no one reads it; the exit code still says the verdict
        return
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        out.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        if json_problems is not None:
            out = report.format_json(json_problems, ascii_only=True)
        else:
            out = out.encode(encoding, "backslashreplace").decode(encoding)
    try:
        print(out)
        sys.stdout.flush()  # a closed pipe shows here, inside main's handler, not at exit
    except BrokenPipeError:
        raise
    except OSError as e:
        raise _OutputError(e) from None


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
