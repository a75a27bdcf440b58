"""``python -m rearr check ...``: the same command line as the ``rearr`` script (rearr/cli.py)."""

from .cli import main

raise SystemExit(main())
