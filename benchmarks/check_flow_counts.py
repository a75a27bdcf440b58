"""How often `rearr check`'s shape flow had something to follow, and what it found, per tree.

    python benchmarks/check_flow_counts.py [--list] [--mutate] TREE [TREE ...]

For each tree: the *.py files read, the parameters whose jaxtyping annotation gave their shape, the
calls whose tensor had a known shape (a name bound by an earlier followed call of the same function
body, an annotated parameter, or a followed call's result passed on), the layers of an nn.Sequential
that had a known layer before them, and the shape-flow findings among them by code (einops' calls
and layers included, as with --einops). --list prints each finding, to be read by hand. --mutate
gives each followed call's pattern one more axis ('b c -> c b' becomes 'b c zz -> c b zz'), a bug
that fails for certain when the tensor's rank is fixed and the pattern has no '...', and counts how
many of those the shape flow finds.
docs/check.md gives the figures for the trees measured.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from rearr.tools import flow, lint  # noqa: E402


class Counter:
    """Wraps the shape flow's steps to count what each one had to work with."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.findings: list[tuple[str, int, str, str]] = []
        self.path = ""
        self.mutate = False
        checked, chain, parameters = flow._checked, flow._chain, flow._parameters

        def counting_checked(call, calls, known, results):
            given = flow._tensor(call, calls, known, results)
            self.counts["followed"] += given is not None
            if given is not None and self.mutate:
                self.mutated(call, calls[call], given[1])
            for found in checked(call, calls, known, results):
                self.found(found)
                yield found

        def counting_chain(layer, layers, before):
            self.counts["layers"] += before is not None
            err, shape = chain(layer, layers, before)
            if err is not None:
                self.found((layer, None, err))
            return err, shape

        def counting_parameters(function, annotations):
            known = parameters(function, annotations)
            self.counts["annotated"] += len(known)
            return known

        flow._checked, flow._chain, flow._parameters = counting_checked, counting_chain, counting_parameters

    def mutated(self, call, op_pattern, given) -> None:
        """The call with one more axis on both sides (the input side only for reduce): a certain RA304
        when the tensor's rank is fixed and the pattern has no '...'."""
        op, pattern = op_pattern
        inputs, _, outputs = pattern.partition("->")
        wrong = f"{inputs.rstrip()} zz -> {outputs.strip()}" + ("" if op == "reduce" else " zz")
        recipe = flow._recipe(call, op, wrong)
        if recipe is None:
            return
        self.counts["mutated"] += 1
        err = flow._apply(recipe, flow._lengths(call), given, call.lineno, "call", "x")[0]
        self.counts["mutated_found"] += err is not None and err.code == "RA304"

    def found(self, found) -> None:
        call, _, err = found
        self.counts[err.code] += 1
        self.findings.append((self.path, call.lineno, err.code, err.message))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print each finding")
    parser.add_argument("--mutate", action="store_true",
                        help="also give each followed call's pattern one more axis, and count those found")
    parser.add_argument("trees", nargs="+")
    args = parser.parse_args(argv)
    counter = Counter()
    counter.mutate = args.mutate
    for tree in args.trees:
        counter.counts.clear()
        counter.findings.clear()
        files = sorted(pathlib.Path(tree).rglob("*.py"))
        for path in files:
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            counter.path = str(path)
            lint.check_source(source, str(path), einops=True)
        c = counter.counts
        codes = ", ".join(f"{c[code]} {code}" for code in ("RA302", "RA303", "RA304"))
        print(f"{tree}: {len(files)} files, {c['annotated']} annotated parameters, {c['followed']} calls followed, "
              f"{c['layers']} nn.Sequential layers followed; findings: {codes}")
        if args.mutate:
            print(f"  with one more axis: {c['mutated_found']} of {c['mutated']} found (RA304)")
        if args.list:
            for path, line, code, message in counter.findings:
                print(f"  {path}:{line}: {code} {message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
