"""The careful path in instructions: import + first call, module by module, and a new pattern, stage by stage.

    python benchmarks/count_instructions.py [--rev REV ...] [--torch] [--einops] [--patterns N]

Not a timing: each candidate (this checkout, and rearr at each --rev, extracted as bench_cold.py
extracts it) runs once in a child under valgrind's callgrind, which counts the instructions the CPU
executes, deterministic to about 0.1 % and blind to how loaded the machine is. The child calls
os.getppid() between stages and callgrind dumps its counts there (--dump-before=os_getppid), so each
stage is counted apart. Bytecode is compiled first, the hash seed fixed, the garbage collector off
(what it costs is bench_cold.py's `of which gc`). Instructions are not time: a module's import costs
more time per instruction than a warm call (cold caches, the kernel's file reads, which callgrind
does not count), so the times stay bench_cold.py's; these say where the work is and what a change
saved. A module's row may hold a one-off that is not its own: when the interpreter's table of
interned strings grows (about 0.7 million instructions at this size), the module whose names cross
the threshold pays it; the sum over the rows does not depend on which.

- ``import + first call``: `import rearr`, then each module that the first
  ``rearrange(x, "b c h w -> b (h w) c")`` imports, each alone with what it runs at import (its
  parents and the modules it imports are imported before it: the order is read from a first child,
  without valgrind), then that call with every module in place (the parser's tables, the backend's
  load and check, the plan);
- ``new pattern``: the mean over --patterns patterns never seen before (``b c h wN -> b (h wN) c``)
  of the whole call, then of each stage called alone on other new patterns: parse
  (rearr.syntax.parser.parse), rules (rearr.rules.recipe.analyze), plan (planner.plan), compile
  (rearr.run.program's compile_plan and one_function), run (the compiled program).

--einops: also einops' import + first call (one number: einops has no stages to count apart) and the
modules it loads, for the ratio the cold start's goal is stated in.

Settings: numpy (x a numpy array), and with --torch a torch tensor (torch imported first; a child
takes some minutes under valgrind). Needs valgrind; without it the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import compileall
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _harness  # benchmarks/_harness.py: the repository root
import bench_cold  # noqa: E402  its extract(): a revision's rearr/ in a folder of its own

PATTERN = "b c h w -> b (h w) c"
SETTINGS = {"numpy": "import numpy as np\nx = np.zeros((2, 3, 4, 5))\n",
            "torch": "import numpy as np, torch\ntorch.set_num_threads(1)\nx = torch.zeros(2, 3, 4, 5)\n"}

# The first call's modules in the order their imports end (-X importtime's lines), so that each is
# imported after everything it imports; a module that importlib.import_module loads (the backend)
# has no line there and comes last.
ORDER = """import sys, json
sys.path.insert(0, {root!r})
{setting}import rearr
before = list(sys.modules)
print("MARK", file=sys.stderr)
rearr.rearrange(x, {pattern!r})
print(json.dumps([m for m in sys.modules if m not in before and m.startswith("rearr.")]))
"""
# The stages, each ended by os.getppid(): callgrind's dump before it closes the stage's count.
COUNT = """import sys, os, gc, importlib
sys.path.insert(0, {root!r})
{setting}gc.disable()
os.getppid()
import rearr
os.getppid()
for name in {modules!r}:
    if name not in sys.modules:
        importlib.import_module(name)
    os.getppid()
rearr.rearrange(x, {pattern!r})
os.getppid()
n = {n}
for i in range(n):
    rearr.rearrange(x, {pattern!r}.replace("w", f"w{{i}}"))
os.getppid()
from rearr.backends import backend_for
from rearr.planning import planner
from rearr.rules import recipe
from rearr.run import program
from rearr.syntax import parser
backend = backend_for(x)
texts = [{pattern!r}.replace("w", f"v{{i}}") for i in range(n)]
os.getppid()
patterns = [parser.parse(t) for t in texts]
os.getppid()
recipes = [recipe.analyze(t, "rearrange", None, ()) for t in texts]
os.getppid()
plans = [planner.plan(r, tuple(x.shape), ()) for r in recipes]
os.getppid()
programs = [program.one_function(program.compile_plan(p.steps, backend)) for p in plans]
os.getppid()
for run in programs:
    run(x, None)
os.getppid()
"""

# einops beside it: its import + first call, and the modules that loads (its own and the rest).
EINOPS = """import sys, os, gc, json
{setting}gc.disable()
before = set(sys.modules)
os.getppid()
import einops
einops.rearrange(x, {pattern!r})
os.getppid()
print(json.dumps(sorted(m for m in sys.modules if m not in before)))
"""


def _counts(folder: str) -> list[int]:
    """The instructions of each dump callgrind wrote in folder, in the order it wrote them."""
    files = sorted(glob.glob(os.path.join(folder, "cg.*")), key=lambda f: int(f.rsplit(".", 1)[1]))
    out = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            out.append(next(int(line.split()[1]) for line in f if line.startswith("summary:")))
    return out


def count(root: Path, setting: str, n: int) -> list[tuple[str, float]]:
    """(stage, instructions) of one candidate in one setting; per pattern for the new-pattern stages."""
    prelude = SETTINGS[setting]
    done = bench_cold.child(ORDER.format(root=str(root), setting=prelude, pattern=PATTERN), ["-X", "importtime"])
    loaded = json.loads(done.stdout)
    ended = [line.rsplit("|", 1)[1].strip() for line in done.stderr.split("MARK\n", 1)[1].splitlines()
             if line.startswith("import time:") and "|" in line]
    modules = [m for m in ended if m in loaded] + [m for m in loaded if m not in ended]
    code = COUNT.format(root=str(root), setting=prelude, pattern=PATTERN, modules=modules, n=n)
    counts, _ = _callgrind(code)
    names = ["import rearr", *(f"  import {m}" for m in modules), "  the first call itself", "new pattern (the call)",
             None, "  parse", "  rules", "  plan", "  compile", "  run"]
    rows = [(name, float(c)) for name, c in zip(names, counts) if name is not None]
    first = sum(c for name, c in rows[: len(modules) + 2])
    rows.insert(1, ("import + first call", first))
    return [(name, c / n if name.startswith(("new", "  parse", "  rules", "  plan", "  compile", "  run")) else c)
            for name, c in rows]


def _callgrind(code: str) -> tuple[list[int], str]:
    """The instructions of each stage of code (ended by os.getppid()), after the interpreter's start; its stdout."""
    with tempfile.TemporaryDirectory() as folder:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        done = subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=os_getppid",
                               f"--callgrind-out-file={folder}/cg", sys.executable, "-c", code],
                              env={**env, "PYTHONHASHSEED": "0"}, cwd=tempfile.gettempdir(), capture_output=True,
                              text=True, check=True)
        return _counts(folder)[1:], done.stdout


def count_einops(setting: str) -> tuple[float, list[str]]:
    """einops' import + first call in instructions, and the modules it loads."""
    counts, out = _callgrind(EINOPS.format(setting=SETTINGS[setting], pattern=PATTERN))
    return float(counts[0]), json.loads(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", action="append", default=[], help="also rearr at this git revision (repeatable)")
    parser.add_argument("--torch", action="store_true", help="also the torch setting (minutes per child)")
    parser.add_argument("--patterns", type=int, default=200, help="new patterns per stage")
    parser.add_argument("--einops", action="store_true", help="also einops' import + first call, and its modules")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: no counts (apt-get install valgrind)")
        return 0
    candidates = {"rearr": _harness.ROOT, **{f"rearr@{rev}": bench_cold.extract(rev) for rev in args.rev}}
    for root in candidates.values():
        compileall.compile_dir(root / "rearr", quiet=1)
    print(f"{_harness.tree_state()}; instructions (callgrind, gc off, PYTHONHASHSEED=0); new pattern: per pattern, "
          f"mean of {args.patterns}")
    for setting in ("numpy", "torch") if args.torch else ("numpy",):
        tables = {name: dict(count(root, setting, args.patterns)) for name, root in candidates.items()}
        stages = list(dict.fromkeys(stage for table in tables.values() for stage in table))
        names = list(tables)
        print(f"\n{setting}: {'stage':40}" + "".join(f" {name:>16}" for name in names)
              + ("".join(f" {name + '/rearr':>18}" for name in names[1:])))
        for stage in stages:
            cells = "".join(f" {tables[n][stage]:16,.0f}" if stage in tables[n] else f" {'-':>16}" for n in names)
            ratios = "".join(f" {tables[n][stage] / tables['rearr'][stage]:18.3f}"
                             if stage in tables[n] and stage in tables["rearr"] else f" {'-':>18}" for n in names[1:])
            print(f"{setting}: {stage:40}{cells}{ratios}")
        if args.einops:
            total, loaded = count_einops(setting)
            print(f"{setting}: einops' import + first call {total:,.0f} instructions, {len(loaded)} modules "
                  f"({', '.join(loaded)}); rearr's is {tables['rearr']['import + first call'] / total:.2f}x that")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
