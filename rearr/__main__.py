"""``python -m rearr check ...``: the same command line as the ``rearr`` script (rearr/tools/cli.py)."""

from .tools.cli import main

raise SystemExit(main())
