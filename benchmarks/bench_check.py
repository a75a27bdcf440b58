"""How much `rearr check` costs over Python's own parser.

Reads every .py file of the installed torch package into memory (torch is
found, not imported), then times `rearr.tools.lint.check_source` and a bare
`ast.parse` over the same in-memory sources, alternating rounds, and prints
the medians and their ratio. The goal is a ratio of at most 1.5.

Times are this process's CPU time (time.process_time): the work is
single-threaded and CPU-bound, and on a shared machine wall-clock time
mostly measures the neighbours.

    python benchmarks/bench_check.py [--rounds N] [--einops] [--tree DIR] [--small]
    python benchmarks/bench_check.py --cli TREE [--rev REV] [--rounds N]

The second line is a worst case: the same files, each with
`import rearr` and `from rearr import *` added on top, so that every line
naming rearrange, reduce, repeat, einsum, pack, ... is searched for calls, and
the calls found are validated as rearr's. The third line times the same
worst case with rearr check's shape flow on and off (each file also names
jaxtyping, so its annotations are read): the goal is a ratio of at most 1.5.

`--cli TREE` times the whole command instead, `rearr check --quiet TREE` in a subprocess (the
walk, the reads, the text prefilter, the checks), and prints the megabytes of *.py files per
second of its CPU time (and of wall time); the goal is 50 MB/s on a large tree where few files use
einops, such as a copy of a site-packages folder. `--rev REV` times rearr at that git revision
too (`git archive`, with `--einops`, which older revisions need to check einops' calls), the two
interleaved round by round.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

from rearr.tools import flow, lint  # noqa: E402


def torch_sources() -> list[tuple[str, str]]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed: nothing to time")
    return [source for root in spec.submodule_search_locations for source in tree_sources(root)]


def tree_sources(root: str) -> list[tuple[str, str]]:
    """(path, text) of every .py file under root that reads as UTF-8, in sorted order."""
    sources = []
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


def compare(name: str, check, sources: list[tuple[str, str]], rounds: int, base_fn=parse_only,
            labels: tuple[str, str] = ("ast.parse", "rearr check")) -> float:
    base, ours = [], []
    for _ in range(rounds):  # alternate, so that drift in the machine's speed hits both alike
        base.append(time_once(base_fn, sources))
        ours.append(time_once(check, sources))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"{name:>26}: {labels[0]} {b * 1e3:8.1f} ms   {labels[1]} {o * 1e3:8.1f} ms   ratio {o / b:.3f}")
    return o / b


def without_flow(check):
    """The check with shape flow turned off (what rearr check did before it followed shapes)."""
    def run(text: str, path: str) -> None:
        saved = flow.check_functions, flow.check_sequential
        flow.check_functions = flow.check_sequential = lambda *a, **k: iter(())  # type: ignore[assignment]
        try:
            check(text, path)
        finally:
            flow.check_functions, flow.check_sequential = saved
    return run


def tree_megabytes(tree: str) -> float:
    """The size of the tree's *.py files (regular files, not links), in MB."""
    return sum(p.stat().st_size for p in pathlib.Path(tree).rglob("*.py")
               if p.is_file() and not p.is_symlink()) / 1e6


def revision(rev: str) -> str:
    """A folder holding rearr at git revision ``rev`` (git archive), for PYTHONPATH."""
    root = pathlib.Path(__file__).resolve().parents[1]
    data = subprocess.run(["git", "-C", str(root), "archive", rev, "rearr"], capture_output=True, check=True).stdout
    folder = tempfile.mkdtemp(prefix="rearr_rev_")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def time_cli(checkout: str, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one `rearr check` run in a subprocess, with the rearr of ``checkout``
    (run there: `python -m` puts the current folder first on sys.path)."""
    env = {**os.environ, "PYTHONPATH": checkout}
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "rearr.tools.cli", "check", "--quiet", *args], env=env, cwd=checkout,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def cli(tree: str, rev: str | None, rounds: int) -> int:
    tree = os.path.abspath(tree)
    megabytes = tree_megabytes(tree)
    here = str(pathlib.Path(__file__).resolve().parents[1])
    sides = [("this checkout", here, [tree])] + ([(rev, revision(rev), ["--einops", tree])] if rev else [])
    print(f"{tree}: {megabytes:,.1f} MB of *.py files")
    times: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in sides}
    time_cli(here, [tree])  # the page cache holds the tree from here on
    for _ in range(rounds):  # interleaved, so that drift in the machine's speed hits both alike
        for label, checkout, args in sides:
            times[label].append(time_cli(checkout, args))
    rate = 0.0
    for label, _, _ in sides:
        cpu = statistics.median(t[0] for t in times[label])
        wall = statistics.median(t[1] for t in times[label])
        print(f"{label:>16}: {cpu:7.2f} s CPU ({megabytes / cpu:6.1f} MB/s), {wall:7.2f} s wall "
              f"({megabytes / wall:6.1f} MB/s)")
        rate = rate or megabytes / cpu
    return 0 if rate >= 50 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cli", metavar="TREE", help="time the whole command on TREE (MB/s)")
    parser.add_argument("--rev", help="with --cli: time rearr at this git revision too")
    parser.add_argument("--einops", action="store_true", help="check einops' calls too")
    parser.add_argument("--tree", help="time this folder's *.py files instead of torch's")
    parser.add_argument("--small", action="store_true", help="the first 300 files only: a smoke run")
    args = parser.parse_args()
    if args.cli:
        return cli(args.cli, args.rev, args.rounds)
    warnings.simplefilter("ignore")  # the baseline would print torch's SyntaxWarnings
    sources = tree_sources(args.tree) if args.tree else torch_sources()
    sources = sources[:300] if args.small else sources
    print(f"{len(sources)} files, {sum(len(t) for _, t in sources) / 1e6:.1f} M characters")

    def check(text: str, path: str) -> None:
        lint.check_source(text, path, einops=args.einops)

    ratio = compare("as it is", check, sources, args.rounds)
    # A worst case: every file imports all of rearr's names (and jaxtyping), so every tree is searched
    # for calls and every function with a call is followed.
    header = "import rearr\nimport jaxtyping\nfrom rearr import *\n" + ("from einops import *\n" if args.einops else "")
    worst = [(path, header + text) for path, text in sources]
    compare("every file imports rearr *", check, worst, args.rounds)
    # The goal: shape flow costs at most half again the check without it.
    flow_ratio = compare("shape flow on / off", check, worst, args.rounds, without_flow(check),
                         ("flow off", "flow on"))
    return 0 if ratio <= 1.5 and flow_ratio <= 1.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
