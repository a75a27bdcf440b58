"""How much `rearr check` costs over Python's own parser.

Reads every .py file of the installed torch package into memory (torch is
found, not imported), then times `rearr.tools.lint.check_source` and a bare
`ast.parse` over the same in-memory sources, alternating rounds, and prints
the medians and their ratio. The goal is a ratio of at most 1.5.

Times are this process's CPU time (time.process_time): the work is
single-threaded and CPU-bound, and on a shared machine wall-clock time
mostly measures the neighbours.

    python benchmarks/bench_check.py [--rounds N] [--einops]

The second line is a worst case: the same files, each with
`import rearr` and `from rearr import *` added on top, so that every line
naming rearrange, reduce, repeat, einsum, pack, ... is searched for calls, and
the calls found are validated as rearr's.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import pathlib
import statistics
import sys
import time
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

from rearr.tools import lint  # noqa: E402


def torch_sources() -> list[tuple[str, str]]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed: nothing to time")
    sources = []
    for root in spec.submodule_search_locations:
        for path in sorted(pathlib.Path(root).rglob("*.py")):
            try:
                sources.append((str(path), path.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError):
                continue
    return sources


def time_once(fn, sources: list[tuple[str, str]]) -> float:
    start = time.process_time()
    for path, text in sources:
        fn(text, path)
    return time.process_time() - start


def parse_only(text: str, path: str) -> None:
    try:
        ast.parse(text, path)
    except (SyntaxError, ValueError, RecursionError):
        pass


def compare(name: str, check, sources: list[tuple[str, str]], rounds: int) -> float:
    base, ours = [], []
    for _ in range(rounds):  # alternate, so that drift in the machine's speed hits both alike
        base.append(time_once(parse_only, sources))
        ours.append(time_once(check, sources))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"{name:>26}: ast.parse {b * 1e3:8.1f} ms   rearr check {o * 1e3:8.1f} ms   ratio {o / b:.3f}")
    return o / b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--einops", action="store_true", help="check einops' calls too")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the baseline would print torch's SyntaxWarnings
    sources = torch_sources()
    print(f"{len(sources)} files, {sum(len(t) for _, t in sources) / 1e6:.1f} M characters")
    def check(text: str, path: str) -> None:
        lint.check_source(text, path, einops=args.einops)

    ratio = compare("torch as it is", check, sources, args.rounds)
    # A worst case: every file imports all of rearr's names, so every tree is searched for calls.
    header = "import rearr\nfrom rearr import *\n" + ("from einops import *\n" if args.einops else "")
    compare("every file imports rearr *", check, [(path, header + text) for path, text in sources], args.rounds)
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
