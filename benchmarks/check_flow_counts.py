"""How often `rearr check`'s shape flow had something to follow, and what it found, per tree.

    python benchmarks/check_flow_counts.py [--list] [--mutate] TREE [TREE ...]

For each tree: the *.py files read, the einops and rearr calls with a literal pattern, the parameters
whose shape a jaxtyping annotation or a docstring gave, the calls whose tensor had a known shape (from
an earlier call of the same function body, a parameter, `b, n, _ = x.shape`, a rank test, a layer
attribute's run, a tensor attribute), the layers that had a known layer before them, and the
shape-flow findings among them by code. --list prints each finding, to be read by hand. --mutate gives
each followed call's pattern one more axis ('b c -> c b' becomes 'b c zz -> c b zz'), a bug that fails
for certain when the tensor's rank is fixed and the pattern has no '...', and counts how many of those
the shape flow finds. docs/check.md gives the figures for the trees measured.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from rearr.tools import flow, lint  # noqa: E402


def mutated(source: str, call: ast.Call) -> str | None:
    """The source with the followed call's pattern given one more axis, or None when it is not a plain
    one-line literal."""
    literal = next((a for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)), None)
    if literal is None or literal.lineno != literal.end_lineno or "->" not in literal.value:
        return None
    inputs, _, outputs = literal.value.partition("->")
    is_reduce = isinstance(call.func, (ast.Name, ast.Attribute)) and "reduce" in ast.unparse(call.func).lower()
    wrong = f"{inputs.rstrip()} zz -> {outputs.strip()}" + ("" if is_reduce else " zz")
    lines = source.splitlines(keepends=True)
    line = lines[literal.lineno - 1]
    text = line.encode("utf-8")[literal.col_offset:literal.end_col_offset].decode("utf-8")
    if literal.value not in text:
        return None
    lines[literal.lineno - 1] = line.replace(text, text.replace(literal.value, wrong), 1)
    return "".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print each finding")
    parser.add_argument("--mutate", action="store_true",
                        help="also give each followed call's pattern one more axis, and count those found")
    parser.add_argument("trees", nargs="+")
    args = parser.parse_args(argv)
    for tree in args.trees:
        stats, tally = flow.Stats(), lint.Tally()
        findings, mutations, caught = [], 0, 0
        files = sorted(pathlib.Path(tree).rglob("*.py"))
        for path in files:
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            seen = len(stats.followed)
            for p in lint.check_source(source, str(path), tally=tally, stats=stats):
                if p.code in ("RA302", "RA303", "RA304"):
                    findings.append(f"  {p.path}:{p.line}: {p.code} {p.message}")
            for call in stats.followed[seen:] if args.mutate else ():
                changed = mutated(source, call)
                if changed is None:
                    continue
                mutations += 1
                caught += any(p.code == "RA304" and call.lineno <= p.line <= (call.end_lineno or call.lineno)
                              for p in lint.check_source(changed, str(path)))
        c = stats.counts
        codes = ", ".join(f"{c[code]} {code}" for code in ("RA302", "RA303", "RA304"))
        print(f"{tree}: {len(files)} files, {tally.einops + tally.rearr} calls with a literal pattern, "
              f"{c['annotation']} parameters annotated, {c['docstring']} described in a docstring, "
              f"{c['followed']} calls followed, {c['layers']} layers followed; findings: {codes}")
        if args.mutate:
            print(f"  with one more axis: {caught} of {mutations} found (RA304)")
        if args.list:
            print("\n".join(findings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
