"""`rearr check`'s settings: the nearest config file of each checked file, under the command line's.

A config file is a `rearr.toml` (its `[check]` table) or a `pyproject.toml` with a
`[tool.rearr.check]` table. For each file checked, the nearest one is looked for from the file's
folder upward, and never above its **work tree**: the root of the git work tree that holds it (the
nearest folder with a `.git`); outside git, the current folder when the file is inside it, else the
folder named on the command line (or the named file's own folder). So a config in a shared parent
folder never changes a project's checks. `--config FILE` names one file for every checked file.

Files are parsed as TOML, with tomllib (Python 3.11+) or its backport tomli (Python 3.10, the
`check` extra). A `pyproject.toml` is parsed only when its text could name rearr (the word, or a
TOML escape, that could spell it in a quoted key), so a broken pyproject of another tool never stops
the check. A config that does not parse, or whose table holds an unknown key, a value of the wrong
type, an unknown code or a glob that is a typo, is a `ConfigError`: exit 2, one line.

Codes are selected as ruff does: defaults, then the config file, then the command line, each a
layer; within a layer the longer selector wins, and `ignore` wins a tie; a layer with `select`
starts over from it, one without changes what the layers before chose.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType

from ..errors import CODES
from . import ignore
from .lint import UNCHECKED, file_kind
from .report import printable

# What is selected when nothing says otherwise: every code but the unused-noqa report (RA01x), as ruff.
DEFAULT_SELECT = ("RA00", "RA1", "RA2", "RA3", "RA4", "RA5")

# The folders that hold no code of the project's own, as ruff's default `exclude` does; `exclude` replaces them.
DEFAULT_EXCLUDE = (".*/", "__pycache__/", "venv/", "build/", "dist/", "*.egg-info/")

CODE_LISTS = ("select", "extend-select", "ignore", "extend-ignore")
GLOB_LISTS = ("exclude", "extend-exclude")
TABLES = ("per-file-ignores", "extend-per-file-ignores")
FLAGS = ("force-exclude", "einops")
KEYS = (*CODE_LISTS, *TABLES, *GLOB_LISTS, *FLAGS)


class ConfigError(Exception):
    """A setting that cannot be used: rearr check stops with exit 2."""


@dataclass(frozen=True)
class Layer:
    """The settings that one source gives (a config file, or the command line); None: not given."""

    source: str  # 'pyproject.toml', 'the command line', ...
    base: str  # the folder its globs are relative to (absolute)
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    extend_per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool | None = None
    einops: bool | None = None


DEFAULTS = Layer("the defaults", os.sep, select=DEFAULT_SELECT, exclude=DEFAULT_EXCLUDE, force_exclude=False,
                 einops=True)


@dataclass(frozen=True)
class _FileIgnore:
    """One `per-file-ignores` entry: the files it names (a gitignore-style glob; '!' for the others)."""

    globs: ignore.Globs
    negated: bool
    codes: tuple[str, ...]

    def applies(self, path: str) -> bool:
        return _names(self.globs, path) is not self.negated


@dataclass
class Settings:
    """What applies to the files of one config (or of none): the codes reported, and what is left out."""

    enabled_codes: frozenset[str] = field(default_factory=lambda: frozenset(_select([DEFAULTS])))
    file_ignores: tuple[_FileIgnore, ...] = ()
    excludes: tuple[ignore.Globs, ...] = ()
    force_exclude: bool = False
    einops: bool = True
    source: str | None = None  # the config file read, if any

    def enabled(self, code: str, path: str | None = None) -> bool:
        """Whether a code is reported (in ``path``, when given: its per-file-ignores apply)."""
        if code in UNCHECKED:
            return True
        if code not in self.enabled_codes:
            return False
        return path is None or not any(code.startswith(c) for f in self.file_ignores if f.applies(path)
                                       for c in f.codes)

    def left_out(self, path: str, is_dir: bool) -> bool:
        """Whether `exclude`/`extend-exclude` leave ``path`` (absolute) out."""
        return ignore.left_out(list(self.excludes), path, is_dir)


def _names(globs: ignore.Globs, path: str) -> bool:
    """Whether a glob names the file or one of its folders below the glob's base (a folder names what it holds)."""
    if globs.match(path, False):
        return True
    folder = os.path.dirname(path)
    base = os.fsdecode(globs.base)
    while len(folder) > len(base) and folder.startswith(base):
        if globs.match(folder, True):
            return True
        folder = os.path.dirname(folder)
    return False


def resolve(layers: list[Layer], source: str | None = None) -> Settings:
    """The settings of the layers (lowest first: the defaults, a config file, the command line)."""
    layers = [DEFAULTS, *layers]
    enabled = _select(layers)
    if not enabled - set(UNCHECKED):
        chose = next(layer.source for layer in reversed(layers) if layer.select is not None or layer.ignore)
        raise ConfigError(f"{chose}: no code is selected: select codes or prefixes, e.g. select = [\"RA\"] "
                          "(to leave files out, use exclude)")
    file_ignores: list[_FileIgnore] = []
    for layer in layers:
        if layer.per_file_ignores is not None:
            file_ignores = []
        for glob, codes in (*(layer.per_file_ignores or ()), *layer.extend_per_file_ignores):
            negated = glob.startswith("!")
            file_ignores.append(_FileIgnore(ignore.Globs.parse(layer.base, [glob.removeprefix("!")]), negated,
                                            codes))
    base_exclude, extended = _DEFAULT_GLOBS, []  # exclude replaces the one before; extend-exclude adds
    for layer in layers[1:]:
        if layer.exclude is not None:
            base_exclude = ignore.Globs.parse(layer.base, list(layer.exclude))
        if layer.extend_exclude:
            extended.append(ignore.Globs.parse(layer.base, list(layer.extend_exclude)))
    excludes = (base_exclude, *extended)
    force = next(layer.force_exclude for layer in reversed(layers) if layer.force_exclude is not None)
    einops = next(layer.einops for layer in reversed(layers) if layer.einops is not None)
    return Settings(frozenset(enabled), tuple(file_ignores), excludes, bool(force), bool(einops), source)


_DEFAULT_GLOBS = ignore.Globs.parse(os.sep, list(DEFAULT_EXCLUDE))


def _select(layers: list[Layer]) -> set[str]:
    """The codes enabled by the layers, in ruff's way (see the module's docstring)."""
    selected: set[str] = set()
    for layer in layers:
        updates: dict[str, bool] = {}
        chosen = (*(layer.select or ()), *layer.extend_select)
        for length in sorted({len(s) for s in (*chosen, *layer.ignore)}):  # least specific first
            for s in chosen:
                if len(s) == length:
                    updates.update(dict.fromkeys(_codes(s), True))
            for s in layer.ignore:
                if len(s) == length:
                    updates.update(dict.fromkeys(_codes(s), False))
        if layer.select is not None:
            selected = {c for c, on in updates.items() if on}
        else:
            selected |= {c for c, on in updates.items() if on}
            selected -= {c for c, on in updates.items() if not on}
    return selected


def _codes(selector: str) -> list[str]:
    return [c for c in CODES if c.startswith(selector)]


# --- reading a config file -------------------------------------------------------------------


def _toml() -> ModuleType | None:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:
        import tomli
    except ImportError:
        return None
    return tomli


def shown(path: str) -> str:
    """A path as messages show it: relative to the current folder when inside it, printable."""
    try:
        rel = os.path.relpath(path)
    except (ValueError, OSError):  # '' names nothing; a current folder that was deleted
        return printable(path)
    return printable(path if rel.startswith(os.pardir) else rel)


MAX_CONFIG = 16 * 2**20  # as a source file: a larger config is no hand-written one


def _parse(path: str, data: bytes) -> dict[str, object]:
    toml = _toml()
    if toml is None:
        raise ConfigError(f"{shown(path)}: Python 3.10 reads TOML with tomli, which is not installed: "
                          "pip install 'rearr[check]' (or pip install tomli)")
    if data.startswith(b"\xef\xbb\xbf"):  # TOML allows none; an editor shows nothing at line 1, column 1
        raise ConfigError(f"{shown(path)}: invalid TOML: the file starts with a UTF-8 BOM (save it without one)")
    try:
        return toml.loads(data.decode("utf-8"))  # type: ignore[no-any-return]
    except UnicodeDecodeError as e:
        raise ConfigError(f"{shown(path)}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})") from None
    except toml.TOMLDecodeError as e:
        raise ConfigError(f"{shown(path)}: invalid TOML: {printable(str(e))}") from None
    except RecursionError:  # tomllib recurses into each nested array or inline table
        raise ConfigError(f"{shown(path)}: invalid TOML: a value is nested too deeply (arrays or inline tables "
                          "inside one another)") from None


def _could_name_rearr(data: bytes) -> bool:
    """Whether a pyproject.toml's text could hold a rearr table: the word, or an escape that could spell it."""
    return b"rearr" in data or b"\\u" in data or b"\\U" in data


def read(path: str) -> Layer | None:
    """The layer of a config file: `rearr.toml`'s `[check]` (any other name reads the same), or a
    pyproject.toml's `[tool.rearr.check]`; None when it has no such table (it is no config of rearr's)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG + 1)
    except OSError as e:
        raise ConfigError(f"{shown(path)}: cannot read it: {e.strerror or e}") from None
    if len(data) > MAX_CONFIG:
        raise ConfigError(f"{shown(path)}: too large to be a config (over {MAX_CONFIG // 2**20} MiB)")
    pyproject = os.path.basename(path) == "pyproject.toml"
    if pyproject and not _could_name_rearr(data):
        return None
    document = _parse(path, data)
    where = "[tool.rearr.check]" if pyproject else "[check]"
    keys = ("tool", "rearr", "check") if pyproject else ("check",)
    table: object = document
    for i, key in enumerate(keys):
        if not isinstance(table, dict) or key not in table:
            return None
        table = table[key]
        if not isinstance(table, dict):
            raise ConfigError(f"{shown(path)}: {'.'.join(keys[: i + 1])} must be a table, e.g. {where}")
    assert isinstance(table, dict)
    return layer(table, f"{shown(path)} {where}", os.path.dirname(os.path.abspath(path)))


def layer(table: dict[str, object], source: str, base: str) -> Layer:
    """A table of settings as a layer, each value checked."""
    values: dict[str, object] = {}
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(f"{source}: unknown key {printable(repr(key))} (keys: {', '.join(KEYS)})")
        attribute = key.replace("-", "_")
        if key in FLAGS:
            if not isinstance(value, bool):
                raise ConfigError(f"{source}: {key} must be true or false")
            values[attribute] = value
        elif key in TABLES:
            values[attribute] = _file_ignores(value, f"{source}: {key}")
        else:
            strings = _strings(value, f"{source}: {key}", f'{key} = ["RA2"]' if key in CODE_LISTS
                               else f'{key} = ["tests/"]')
            values[attribute] = codes(strings, f"{source}: {key}", "ignore" in key) if key in CODE_LISTS else globs(
                strings, f"{source}: {key}")
    extend_ignore = values.pop("extend_ignore", ())
    values["ignore"] = (*values.get("ignore", ()), *extend_ignore)  # type: ignore[misc]
    return Layer(source, base, **values)  # type: ignore[arg-type]


def _strings(value: object, where: str, example: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings, e.g. {example}")
    return value


def _file_ignores(value: object, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f'{where} must be a table of globs and codes, e.g. {{"tests/**" = ["RA2"]}}')
    found = []
    for glob, listed in value.items():
        globs((glob.removeprefix("!"),), f"{where}: {printable(repr(glob))}")
        found.append((glob, codes(_strings(listed, f"{where}: {printable(repr(glob))}", '["RA2"]'), where,
                                  ignoring=True)))
    return tuple(found)


def codes(values: Iterable[str], where: str, ignoring: bool = False) -> tuple[str, ...]:
    """Codes or prefixes, upper-cased and checked: each must name a code."""
    found = []
    for value in values:
        code = value.strip().upper()
        if not code or not _codes(code):
            raise ConfigError(f"{where}: unknown code or prefix {printable(repr(value))} "
                              "(codes: RA001 to RA501, prefixes such as RA2)")
        if ignoring and all(c in UNCHECKED for c in _codes(code)):
            raise ConfigError(f"{where}: {code} cannot be ignored: {', '.join(UNCHECKED)} say that a file could not "
                              "be checked, and are always reported (leave the file out with exclude)")
        found.append(code)
    return tuple(found)


def globs(values: Iterable[str], where: str) -> tuple[str, ...]:
    """gitignore-style globs, each checked: one that is most likely a typo is refused."""
    for value in values:
        parsed = ignore.parse_line(value.encode("utf-8", "surrogateescape"))
        error = "it names nothing (a blank or a comment)" if parsed is None or not parsed.pattern else \
            ignore.glob_error(value)
        if error is not None:
            raise ConfigError(f"{where}: the glob {printable(repr(value))} is malformed: {error}")
    return tuple(values)


# --- which config applies to a file -----------------------------------------------------------


CONFIG_NAMES = ("rearr.toml", "pyproject.toml")  # in one folder, rearr.toml wins


class Configs:
    """The settings of each checked file: its nearest config file (or ``--config``), under the command line's."""

    def __init__(self, command_line: Layer, config: str | None = None) -> None:
        self.command_line = command_line
        self.found: dict[tuple[str, str], str | None] = {}  # (folder, root) -> the config file that applies there
        self.layers: dict[str, Layer | None] = {}
        self.settings: dict[str | None, Settings] = {}
        self.forced = None if config is None else os.path.abspath(config)
        self.notes: list[str] = []  # config files skipped: links to a file outside the work tree
        if config == "":
            raise ConfigError("--config names no file: name a rearr.toml or a pyproject.toml, e.g. --config rearr.toml")
        if self.forced is not None:
            if not os.path.isfile(self.forced):
                raise ConfigError(f"--config {shown(config or '')}: {_not_a_file(self.forced)}")
            forced = read(self.forced)
            if forced is None:
                table = "[tool.rearr.check]" if os.path.basename(self.forced) == "pyproject.toml" else "[check]"
                raise ConfigError(f"--config {shown(self.forced)}: it has no {table} table")
            self.settings[self.forced] = self._resolve([forced], self.forced)
        self.settings.setdefault(None, self._resolve([], None))

    def _resolve(self, layers: list[Layer], source: str | None) -> Settings:
        return resolve([*layers, self.command_line], source)

    def for_folder(self, folder: str, root: str) -> Settings:
        """The settings of the files in ``folder`` (absolute), whose work tree is ``root``."""
        if self.forced is not None:
            return self.settings[self.forced]
        path = self._nearest(folder, root)
        if path not in self.settings:
            found = None if path is None else self._layer(path)
            self.settings[path] = self._resolve([] if found is None else [found], path)
        return self.settings[path]

    def _layer(self, path: str) -> Layer | None:
        if path not in self.layers:
            self.layers[path] = read(path)
        return self.layers[path]

    def _nearest(self, folder: str, root: str) -> str | None:
        """The nearest config file from ``folder`` up to ``root``, both included."""
        key = (folder, root)
        if key not in self.found:
            found = next((candidate for name in CONFIG_NAMES
                          if os.path.isfile(candidate := os.path.join(folder, name))
                          and self._inside(candidate, root) and self._layer(candidate) is not None), None)
            if found is None and folder != root and inside(folder, root):
                found = self._nearest(os.path.dirname(folder), root)
            self.found[key] = found
        return self.found[key]


    def _inside(self, candidate: str, root: str) -> bool:
        """Whether a config file found is read: not a symbolic link to a file outside the work tree (a link
        cannot make the checks of a tree depend on a file elsewhere), which is skipped with a note."""
        if not os.path.islink(candidate):
            return True
        target = os.path.realpath(candidate)
        if inside(target, os.path.realpath(root)):
            return True
        note = f"{shown(candidate)}: skipped: a symbolic link to a file outside the work tree ({target})"
        if note not in self.notes:
            self.notes.append(note)
        return False


def _not_a_file(path: str) -> str:
    """Why ``path`` (absolute), which is no regular file, cannot be a config."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        return "no such file" if e.errno == errno.ENOENT else f"cannot read it: {e.strerror or e}"
    return "a folder, not a file" if stat.S_ISDIR(mode) else f"not a regular file ({file_kind(mode)})"


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def command_line(**given: object) -> Layer:
    """The command line's layer: codes and globs checked as a config's are; globs relative to the current folder."""
    values: dict[str, object] = {}
    for key, value in given.items():
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if key in ("select", "extend_select", "ignore", "extend_ignore"):
            values[key] = codes(value, flag, ignoring="ignore" in key)  # type: ignore[arg-type]
            if key in ("select", "extend_select") and not values[key]:
                raise ConfigError(f"{flag} names no code: name codes or prefixes, e.g. {flag} RA2")
        elif key in ("exclude", "extend_exclude"):
            values[key] = globs(value, flag)  # type: ignore[arg-type]
        elif key in ("per_file_ignores", "extend_per_file_ignores"):
            values[key] = _per_file_option(value, flag)  # type: ignore[arg-type]
        else:
            values[key] = value
    extend_ignore = values.pop("extend_ignore", ())
    if extend_ignore:
        values["ignore"] = (*values.get("ignore", ()), *extend_ignore)  # type: ignore[misc]
    return Layer("the command line", os.getcwd(), **values)  # type: ignore[arg-type]


def _per_file_option(values: list[str], flag: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`--per-file-ignores 'tests/**:RA2,RA301'` (repeatable) as the entries of a table."""
    found = []
    for value in values:
        glob, colon, listed = value.rpartition(":")
        if not colon or not glob:
            raise ConfigError(f"{flag} {printable(repr(value))}: write GLOB:CODES, e.g. {flag} 'tests/**:RA2'")
        globs((glob.removeprefix("!"),), flag)
        found.append((glob, codes([c for c in listed.split(",") if c.strip()] or [""], flag, ignoring=True)))
    return tuple(found)


def split(values: list[str] | None) -> list[str] | None:
    """`--select RA2,RA3 --select RA400` -> ['RA2', 'RA3', 'RA400'] (None when not given)."""
    if values is None:
        return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]

