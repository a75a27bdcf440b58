"""At the edge: explain (a pattern as the backend code it runs), lint (`rearr check`'s search for pattern
literals) and cli (the `rearr` command). Nothing below imports them."""
