"""rearr's version: the one place it is written (pyproject.toml reads it, rearr.__version__ and
`rearr --version` show it). A release is X.Y.Z, with its dated entry in CHANGELOG.md; between releases
main carries the next version's development release, X.Y.Z.devN (docs/releasing.md, "Versions")."""

__version__ = "0.2.0.dev0"
