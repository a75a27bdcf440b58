"""At the edge: `rearr explain` (explain.py: a pattern as the backend code it runs), `rearr check` (lint.py
and the modules it uses: a search for pattern literals, checked without running them) and cli.py (the
`rearr` command). Nothing below imports them."""
