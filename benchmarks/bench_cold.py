"""Cold start: rearr against einops in fresh processes, and a new pattern in a warm process.

    python benchmarks/bench_cold.py [--rounds N] [--patterns N] [--rev REV ...] [--clock cpu|wall]
                                    [--stages] [--gc] [--profile] [--importtime] [--profile-runs N]

Every figure comes from a child interpreter (cwd: a neutral folder), started for one candidate at a
time; a round starts one child per candidate and setting, the candidates in alternating order (forward
on even rounds, reversed on odd ones), so that a drift of a shared machine hits them alike. The
figure is the median over --rounds of what each child measured with its own clock (this thread's
CPU time by default; --clock wall: perf_counter). Bytecode is warm, as after an install.

The candidates: einops (installed), rearr of this checkout, and rearr at each --rev (its rearr/
extracted with `git archive`): the before/after of a change in one run. Settings: numpy loaded
before the clock starts, or numpy and torch loaded (one thread).

- ``import``: ``import rearr`` (``import einops``);
- ``first call``: then the first ``rearrange(x, "b c h w -> b (h w) c")`` on a (2, 3, 4, 5) array of
  the setting's library, x made before the clock starts;
- ``import + first call``: both, as a script, a CLI or a test worker pays them; ``of which gc``: the
  garbage collections inside them. With torch loaded, the young objects torch's import left make a
  collection of generation 1 cost milliseconds, and which call pays it depends on how many objects
  were allocated before: the figure says how much of the time that is;
- ``new pattern``, in a warm process (the library imported and called once before): the median over
  --patterns calls of a 4-axis pattern not seen before (``b c h wN -> b (h wN) c``, N new each
  time): parse, rules, plan and compile, then run.

Goals (issue 30): import + first call <= 2x einops on both settings; the first call <= 5 ms with torch
loaded; a new pattern <= 0.3 ms on both. They print next to the figures; the exit status is 0.

--gc: the objects that the garbage collector tracks which each candidate's import + first call
leaves (gc off), against how many a program may allocate in the setting before the first
collection of generation 1 or 2, and what that collection takes (it sweeps the objects the
setting's own imports left young: whoever allocates past the count pays it).
--stages: rearr's import + first call in stages, each loading one layer and doing its part (import
rearr; syntax: load, parse; rules: load, analyze; planning: load; the backend and run/program: load;
the call: plan, compile, run), gc off, for this checkout and each --rev.
--profile: where rearr's time goes, by cProfile, grouped by the package layer (rearr/syntax,
rules, planning, run, backends, ...), Python's import system, numpy, torch and the rest: import +
first call per setting, and --patterns new patterns; the median of --profile-runs children for each
group, on the child's CPU clock. --importtime: the modules that `import rearr` and its first call
load (`python -X importtime`, a wall clock: on a loaded machine it times the neighbours too),
each with its own time, the median of --profile-runs children. Both run with the
garbage collector off: a collection would land on whichever function allocated last, and its
cost is the ``of which gc`` figure.
"""

from __future__ import annotations

import argparse
import compileall
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import _harness  # benchmarks/_harness.py: the repository root

PATTERN = "b c h w -> b (h w) c"
SETTINGS = {"numpy": "import numpy as np\nx = np.zeros((2, 3, 4, 5))\n",
            "torch": "import numpy as np, torch\ntorch.set_num_threads(1)\nx = torch.zeros(2, 3, 4, 5)\n"}
CLOCKS = {"cpu": "time.thread_time", "wall": "time.perf_counter"}

# The child: the setting's library and input first, then the measured statements on its own clock,
# and the time the garbage collector took inside them (its callbacks on the same clock).
GC = """import gc
collecting = [0.0, 0.0]
def timed(phase, info):
    if phase == "start":
        collecting[1] = clock()
    else:
        collecting[0] += clock() - collecting[1]
gc.callbacks.append(timed)
"""
COLD = """import sys, time, json
sys.path.insert(0, {root!r})
{setting}clock = {clock}
{gc}t0 = clock()
import {lib}
t1 = clock()
{lib}.rearrange(x, {pattern!r})
t2 = clock()
print(json.dumps({{"import": t1 - t0, "first call": t2 - t1, "import + first call": t2 - t0,
                  "  of which gc": collecting[0]}}))
"""
WARM = """import sys, time, json, statistics
sys.path.insert(0, {root!r})
{setting}clock = {clock}
import {lib}
{lib}.rearrange(x, {pattern!r})
patterns = [{pattern!r}.replace("w", f"w{{i}}") for i in range({n})]
times = []
for p in patterns:
    t = clock()
    {lib}.rearrange(x, p)
    times.append(clock() - t)
print(json.dumps({{"new pattern": statistics.median(times)}}))
"""
PROFILE = """import sys, time, cProfile, pstats, gc
sys.path.insert(0, {root!r})
{setting}gc.disable()
profile = cProfile.Profile(time.thread_time)
{body}
pstats.Stats(profile).dump_stats({out!r})
"""
PROFILE_COLD = "profile.enable()\nimport rearr\nrearr.rearrange(x, {pattern!r})\nprofile.disable()"
PROFILE_WARM = ("import rearr\nrearr.rearrange(x, {pattern!r})\n"
                "patterns = [{pattern!r}.replace('w', f'w{{i}}') for i in range({n})]\n"
                "profile.enable()\nfor p in patterns:\n    rearr.rearrange(x, p)\nprofile.disable()")
# Import + first call of rearr in stages, each loading one layer (and what it needs that no earlier
# stage loaded) and doing its part of the work, on the child's clock with the garbage collector off.
STAGES = """import sys, time, json, gc
sys.path.insert(0, {root!r})
{setting}clock = {clock}
gc.disable()
t = [clock()]
import rearr
t.append(clock())
from rearr.syntax import parser
parser.parse({pattern!r})
t.append(clock())
from rearr.rules import recipe
recipe.analyze({pattern!r}, "rearrange")
t.append(clock())
import rearr.planning.lengths, rearr.planning.plan, rearr.planning.planner, rearr.planning.policy
t.append(clock())
import rearr.run.program, rearr.backends.contract, rearr.backends.{backend}
t.append(clock())
rearr.rearrange(x, {pattern!r})
t.append(clock())
print(json.dumps([b - a for a, b in zip(t, t[1:])]))
"""
STAGE_NAMES = ("import rearr", "syntax: load, parse", "rules: load, analyze", "planning: load",
               "backend and run/program: load", "the call: plan, compile, run")
# --gc: how many objects the garbage collector tracks that import + first call leaves (gc off), and,
# apart, how many the setting lets a program allocate before its first collection of generation 1 or
# 2, and what that collection takes: the objects that the setting's own imports left young are in it.
GC_ALLOCATED = """import sys, gc, json
sys.path.insert(0, {root!r})
{setting}gc.disable()
before = gc.get_count()[0]
import {lib}
{lib}.rearrange(x, {pattern!r})
print(json.dumps(gc.get_count()[0] - before))
"""
GC_PENDING = """import gc, json, time
{setting}found = []
started = [0.0]
def watch(phase, info):
    if phase == "start":
        started[0] = time.thread_time()
    elif info["generation"] >= 1 and not found:
        found.append((len(kept), info["generation"], time.thread_time() - started[0]))
kept = []
gc.callbacks.append(watch)
while not found:
    kept.append([])  # one tracked object each
print(json.dumps(found[0]))
"""
GOALS = {("import + first call", "numpy"): "<= 2x einops", ("import + first call", "torch"): "<= 2x einops",
         ("first call", "torch"): "rearr <= 5 ms", ("new pattern", "numpy"): "rearr <= 0.3 ms",
         ("new pattern", "torch"): "rearr <= 0.3 ms"}


def extract(rev: str) -> Path:
    """rearr/ at git revision rev, in a new temporary folder (the package keeps its name)."""
    data = subprocess.run(["git", "-C", str(_harness.ROOT), "archive", rev, "rearr"], capture_output=True,
                          check=True).stdout
    root = Path(tempfile.mkdtemp(prefix=f"rearr_{rev}_"))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(root, filter="data")
    return root


def child(code: str, args: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    done = subprocess.run([sys.executable, *(args or []), "-c", code], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child failed:\n{code}\n{done.stderr}")
    return done


def measure(candidates: dict[str, Path | None], rounds: int, patterns: int, clock: str) -> dict:
    """{(figure, setting): {candidate: median seconds}}, over rounds of alternating order."""
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    names = list(candidates)
    for r in range(rounds):
        for setting, prelude in SETTINGS.items():
            for name in names if r % 2 == 0 else names[::-1]:
                root = str(candidates[name] or tempfile.gettempdir())
                lib = "einops" if candidates[name] is None else "rearr"
                fmt = dict(root=root, setting=prelude, clock=CLOCKS[clock], gc=GC, lib=lib, pattern=PATTERN,
                           n=patterns)
                for code in (COLD, WARM):
                    for figure, seconds in json.loads(child(code.format(**fmt)).stdout).items():
                        samples.setdefault((figure, setting), {}).setdefault(name, []).append(seconds)
    return {key: {name: statistics.median(v) for name, v in by.items()} for key, by in samples.items()}


def report(figures: dict, names: list[str]) -> None:
    print(f"{'figure':22} {'setting':8}" + "".join(f" {n:>16}" for n in names) + "   rearr/einops  goal")
    for (figure, setting), med in figures.items():
        cells = "".join(f" {med[n] * 1e3:14.3f}ms" for n in names)
        ratios = " ".join(f"{med[n] / med['einops']:5.2f}" for n in names if n != "einops")
        print(f"{figure:22} {setting:8}{cells}   {ratios:>12}  {GOALS.get((figure, setting), '')}")


def _layer(filename: str) -> str:
    """The group a profiled function's file belongs to."""
    path = filename.replace(os.sep, "/")
    if "/rearr/" in path:
        rest = path.rsplit("/rearr/", 1)[1]
        return "rearr/" + (rest.split("/")[0] + "/" if "/" in rest else rest)
    if path.startswith("<frozen importlib") or path.startswith("<frozen zipimport"):
        return "import system (importlib)"
    for lib in ("torch", "numpy", "einops"):
        if f"/site-packages/{lib}/" in path:
            return lib
    return "built-in calls" if path == "~" else "Python's library and the rest"


def profile(root: Path, patterns: int, runs: int) -> None:
    """cProfile of import + first call (each setting) and of new patterns, grouped by _layer."""
    import pstats

    jobs = [(f"import + first call, {s}", s, PROFILE_COLD) for s in SETTINGS]
    jobs += [(f"{patterns} new patterns, {s}", s, PROFILE_WARM) for s in SETTINGS]
    for title, setting, body in jobs:
        samples: dict[str, list[float]] = {}
        for _ in range(runs):
            with tempfile.NamedTemporaryFile(suffix=".prof") as out:
                child(PROFILE.format(root=str(root), setting=SETTINGS[setting], out=out.name,
                                     body=body.format(pattern=PATTERN, n=patterns)))
                stats = pstats.Stats(out.name).stats  # type: ignore[attr-defined]
            groups: dict[str, float] = {}
            for (filename, _, _), (_, _, tottime, _, _) in stats.items():
                groups[_layer(filename)] = groups.get(_layer(filename), 0.0) + tottime
            for group, seconds in groups.items():
                samples.setdefault(group, []).append(seconds)
        medians = {group: statistics.median(v + [0.0] * (runs - len(v))) for group, v in samples.items()}
        total = sum(medians.values())
        per = patterns if "new patterns" in title else 1
        print(f"\n{title}: {total / per * 1e3:.3f} ms{' per pattern' if per > 1 else ''} under cProfile, gc off, CPU "
              f"(own time of each group's functions, median of {runs} children)")
        for group, seconds in sorted(medians.items(), key=lambda kv: -kv[1]):
            print(f"  {group:34} {seconds / per * 1e3:8.3f} ms {seconds / total:6.1%}")


def stages(candidates: dict[str, Path | None], runs: int, clock: str) -> None:
    """Import + first call of each rearr in STAGES, the median of ``runs`` children, alternating."""
    rearrs = {name: root for name, root in candidates.items() if root is not None}
    samples: dict[tuple[str, str], list[list[float]]] = {}
    for r in range(runs):
        for setting, prelude in SETTINGS.items():
            for name in list(rearrs) if r % 2 == 0 else list(rearrs)[::-1]:
                code = STAGES.format(root=str(rearrs[name]), setting=prelude, clock=CLOCKS[clock], pattern=PATTERN,
                                     backend=setting)
                samples.setdefault((name, setting), []).append(json.loads(child(code).stdout))
    columns = [(name, setting) for name in rearrs for setting in SETTINGS]
    print(f"\nimport + first call in stages, gc off, median ms of {runs} children:")
    print(f"{'stage':32}" + "".join(f" {f'{n}, {s}':>22}" for n, s in columns))
    for i, stage in enumerate((*STAGE_NAMES, "all")):
        cells = []
        for key in columns:
            values = [sum(run) if stage == "all" else run[i] for run in samples[key]]
            cells.append(f" {statistics.median(values) * 1e3:20.3f}ms")
        print(f"{stage:32}" + "".join(cells))


def collector(candidates: dict[str, Path | None], runs: int) -> None:
    """--gc: the tracked objects each candidate's import + first call leaves, against how many the
    setting allows before its first collection of generation >= 1, and that collection's time."""
    print(f"\nthe garbage collector (median of {runs} children each):")
    print(f"{'setting':8} {'allocations before a gen >= 1 collection':>42} {'its time':>10}" +
          "".join(f" {n + ': allocated':>22}" for n in candidates))
    for setting, prelude in SETTINGS.items():
        pending = [json.loads(child(GC_PENDING.format(setting=prelude)).stdout) for _ in range(runs)]
        allocated = []
        for root in candidates.values():
            code = GC_ALLOCATED.format(root=str(root or tempfile.gettempdir()), setting=prelude, pattern=PATTERN,
                                       lib="einops" if root is None else "rearr")
            allocated.append(statistics.median(json.loads(child(code).stdout) for _ in range(runs)))
        count = statistics.median(p[0] for p in pending)
        gens = sorted({p[1] for p in pending})
        seconds = statistics.median(p[2] for p in pending)
        print(f"{setting:8} {count:>30,.0f} (gen {'/'.join(map(str, gens))}) {seconds * 1e3:8.3f}ms" +
              "".join(f" {a:>22,.0f}" for a in allocated))


def importtime(root: Path, runs: int) -> None:
    """The modules that import + first call load, from `python -X importtime` (own time, microseconds)."""
    for setting, prelude in SETTINGS.items():
        code = f"import sys, gc\nsys.path.insert(0, {str(root)!r})\n{prelude}gc.disable()\n" \
               f"print('MARK', file=sys.stderr)\nimport rearr\nrearr.rearrange(x, {PATTERN!r})\n"
        samples: dict[str, list[int]] = {}
        for _ in range(runs):
            for line in child(code, ["-X", "importtime"]).stderr.split("MARK\n", 1)[1].splitlines():
                if line.startswith("import time:") and "|" in line:
                    own, _, name = line[len("import time:"):].split("|")
                    if own.strip().isdigit():
                        samples.setdefault(name.strip(), []).append(int(own))
        own_us = {name: statistics.median(v) for name, v in samples.items()}
        print(f"\nimport + first call, {setting} loaded, gc off: {len(own_us)} modules, "
              f"{sum(own_us.values()) / 1e3:.2f} ms own time in all (median of {runs} children); the 15 largest:")
        for name, us in sorted(own_us.items(), key=lambda kv: -kv[1])[:15]:
            print(f"  {us / 1e3:8.3f} ms  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21, help="fresh processes per candidate, figure and setting")
    parser.add_argument("--patterns", type=int, default=200, help="new patterns timed in each warm process")
    parser.add_argument("--rev", action="append", default=[], help="also rearr at this git revision (repeatable)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="cpu")
    parser.add_argument("--profile", action="store_true", help="cProfile of rearr, grouped by layer")
    parser.add_argument("--importtime", action="store_true", help="python -X importtime of rearr's first call")
    parser.add_argument("--stages", action="store_true", help="import + first call of each rearr in stages")
    parser.add_argument("--gc", action="store_true",
                        help="objects tracked by import + first call, against the setting's first collection")
    parser.add_argument("--profile-runs", type=int, default=5,
                        help="children per --stages / --profile / --importtime figure")
    args = parser.parse_args()
    candidates: dict[str, Path | None] = {"einops": None, "rearr": _harness.ROOT}
    candidates.update({f"rearr@{rev}": extract(rev) for rev in args.rev})
    for root in candidates.values():
        if root is not None:
            compileall.compile_dir(root / "rearr", quiet=1)
    import einops
    import numpy
    import torch

    print(f"{_harness.tree_state()}; einops {einops.__version__}, numpy {numpy.__version__}, torch "
          f"{torch.__version__}; {_harness.machine_state()}")
    if args.rounds:  # --rounds 0: only the sections asked for
        print(f"clock: {_harness.CLOCK_LINES[args.clock]} of each child; median of {args.rounds} fresh processes "
              f"per figure; new pattern: median of {args.patterns} patterns in each")
        report(measure(candidates, args.rounds, args.patterns, args.clock), list(candidates))
    if args.stages:
        stages(candidates, args.profile_runs, args.clock)
    if args.gc:
        collector(candidates, args.profile_runs)
    if args.profile:
        profile(_harness.ROOT, args.patterns, args.profile_runs)
    if args.importtime:
        importtime(_harness.ROOT, args.profile_runs)
    print(f"load average at the end: {_harness.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
