"""`rearr check`'s settings: `[tool.rearr.check]` of the nearest pyproject.toml, under the command line's.

The nearest pyproject.toml is the first one, from the folder of the first path upward, that has a
`[tool.rearr.check]` table. It is read with tomllib (Python 3.11+); Python 3.10 has no TOML parser
and rearr adds no dependency for one, so there the table is skipped with a note on stderr.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from ..errors import CODES

KEYS = ("select", "ignore", "exclude", "extend-exclude")

# The folders that hold no code of the project's own, as ruff's default `exclude` does; `exclude` replaces them.
DEFAULT_EXCLUDE = (".*/", "__pycache__/", "venv/", "build/", "dist/", "*.egg-info/")

_TABLE = re.compile(r"^\s*\[\s*tool\s*\.\s*rearr\s*\.\s*check\s*\]", re.MULTILINE)


class ConfigError(Exception):
    """A setting that cannot be used: rearr check stops with exit 2."""


@dataclass
class Settings:
    select: list[str] = field(default_factory=lambda: ["RA"])
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    # The folder that each list of globs is relative to: the pyproject.toml's, or the current one.
    bases: dict[str, str] = field(default_factory=lambda: {"exclude": ".", "extend_exclude": "."})
    source: str | None = None  # the pyproject.toml read, if any

    def enabled(self, code: str) -> bool:
        """Whether a code is reported: the longest selector that names it decides, `ignore` on a tie (as ruff)."""
        chosen = max((len(s) for s in self.select if code.startswith(s)), default=-1)
        ignored = max((len(s) for s in self.ignore if code.startswith(s)), default=-1)
        return chosen > ignored


def find_pyproject(start: str) -> str | None:
    """The nearest pyproject.toml above ``start`` (a file or a folder) with a `[tool.rearr.check]` table."""
    folder = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        try:
            with open(candidate, encoding="utf-8") as f:
                if _TABLE.search(f.read()):
                    return candidate
        except (OSError, UnicodeDecodeError):
            pass
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load(path: str | None, notes: list[str]) -> Settings:
    """The settings of the pyproject.toml at ``path`` (the defaults when None)."""
    settings = Settings()
    if path is None:
        return settings
    if sys.version_info < (3, 11):
        notes.append(f"{path}: [tool.rearr.check] not read: Python 3.10 has no TOML parser "
                     "(run rearr check with Python 3.11+, or pass the options on the command line)")
        return settings
    import tomllib

    try:
        with open(path, "rb") as f:
            table = tomllib.load(f).get("tool", {}).get("rearr", {}).get("check", {})
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(f"{path}: [tool.rearr.check]: unknown key {key!r} (keys: {', '.join(KEYS)})")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [tool.rearr.check]: {key} must be a list of strings, e.g. {key} = [\"RA2\"]")
        setattr(settings, key.replace("-", "_"), list(value))
    settings.source = path
    settings.bases = dict.fromkeys(settings.bases, os.path.dirname(os.path.abspath(path)))
    check_codes(settings)
    return settings


def override(settings: Settings, **given: list[str] | None) -> None:
    """The command line's values, where given, replace the file's; its globs are relative to the current folder."""
    for key, value in given.items():
        if value is not None:
            setattr(settings, key, value)
            if key in settings.bases:
                settings.bases[key] = os.getcwd()
    check_codes(settings)


def check_codes(settings: Settings) -> None:
    for selector in settings.select + settings.ignore:
        if not any(code.startswith(selector) for code in CODES):
            raise ConfigError(f"unknown code or prefix {selector!r} (codes: RA001 to RA501, prefixes such as RA2)")


def split_codes(values: list[str] | None) -> list[str] | None:
    """`--select RA2,RA3 --select RA400` -> ['RA2', 'RA3', 'RA400']."""
    if values is None:
        return None
    return [code.strip().upper() for value in values for code in value.split(",") if code.strip()]
