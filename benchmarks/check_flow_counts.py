"""How often `rearr check`'s shape flow had something to follow, and what it found, per tree.

    python benchmarks/check_flow_counts.py TREE [TREE ...]

For each tree: the *.py files read, the calls whose tensor had a known rank (a name bound by an
earlier followed call of the same function body), the neighbouring layers of an nn.Sequential
compared, and the RA304 findings among each (einops' calls and layers included).
docs/check.md gives the figures for the trees measured.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from rearr.tools import flow, lint  # noqa: E402


def main(trees: list[str]) -> int:
    counts = {"followed": 0, "found": 0, "pairs": 0, "chain_found": 0}
    mismatch, chain = flow._mismatch, flow._chain

    def counting(call, op, pattern, known):
        first = call.args[0] if call.args else None
        counts["followed"] += getattr(first, "id", None) in known
        found = mismatch(call, op, pattern, known)
        counts["found"] += found is not None
        return found

    def counting_chain(before, after, layers):
        counts["pairs"] += 1
        found = chain(before, after, layers)
        counts["chain_found"] += found is not None
        return found

    flow._mismatch, flow._chain = counting, counting_chain
    for tree in trees:
        counts.update(followed=0, found=0, pairs=0, chain_found=0)
        files = sorted(pathlib.Path(tree).rglob("*.py"))
        for path in files:
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            lint.check_source(source, str(path), einops=True)
        print(f"{tree}: {len(files)} files, {counts['followed']} calls followed ({counts['found']} RA304), "
              f"{counts['pairs']} nn.Sequential neighbours ({counts['chain_found']} RA304)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
