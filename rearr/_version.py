"""rearr's version: the one place it is written (pyproject.toml reads it, rearr.__version__ and
`rearr --version` show it, CHANGELOG.md has an entry for it)."""

__version__ = "0.1.0"
