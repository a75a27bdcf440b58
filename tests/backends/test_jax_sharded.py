"""rearr on 4 jax devices: under jit with NamedSharding (committed arguments, in_shardings, jax.set_mesh,
a 2-d mesh, a one-device program among several), in shard_map (over every axis or some), in pmap,
eagerly on sharded arrays, and under vmap, lax.scan, grad and jax.checkpoint. Every op's result equals
numpy's; a bad index (out of range, a duplicate under 'set', an unsigned value beyond int32) raises
RA501 on the caller within a second, with jax's one-device message, and nothing aborts, hangs or
gathers the index onto one device (XLA's "Involuntary full rematerialization").

The cases run in one child process per test (tests/_jax_sharded.py), since the device count is set
before jax is imported; the child's whole process group is killed if it outlives its time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _docs_blocks import ALL

pytest.importorskip("jax")

CHILD = Path(__file__).resolve().parents[1] / "_jax_sharded.py"
INDEXED = ["gather", "gather_along", "advanced", "scatter_sum", "scatter_mean", "scatter_max", "scatter_min",
           "scatter_prod", "scatter_set", "scatter_along", "message", "fill", "into", "unsigned", "empty"]
PLAIN = ["rearrange", "reduce", "repeat", "einsum", "pack"]
CONTEXTS = ["eager", "jit", "jit_in_shardings", "set_mesh", "jit_2d", "one_device", "shard_map",
            "shard_map_partial", "pmap"]
# A shard_map or pmap whose every result is empty runs no callback of its body (no effect either), so no
# check: nothing is read and nothing is returned (docs/scaling.md).
SKIPPED = {"shard_map:empty", "shard_map_partial:empty", "pmap:empty"}
TRANSFORMS = [f"{t}_{h}:{op}" for t in ("vmap", "scan", "grad", "checkpoint") for h in ("jit", "in_shardings")
              for op in ("gather", "scatter_sum")]
# The fast loop: the contexts of the issue (jit, shard_map, pmap, and the fallback without a mesh) on the
# ops that take an index, one of each kind.
FAST = [f"{c}:{op}" for c in ("jit", "jit_in_shardings", "shard_map", "pmap")
        for op in ("gather", "scatter_sum", "scatter_set", "unsigned")] + \
    ["eager:gather", "jit:rearrange", "refused:index_mesh", "refused:into_mesh"]
# An Explicit mesh asks each gather and scatter for its output's sharding: rearr's call inside auto_axes.
EXPLICIT = [f"auto_axes:{op}" for op in ("gather", "scatter_sum", "scatter_set", "message")]
EVERY = [f"{c}:{op}" for c in CONTEXTS for op in PLAIN + INDEXED if f"{c}:{op}" not in SKIPPED] + TRANSFORMS + EXPLICIT
# What a device left behind, or an index moved to one device, prints on stderr.
BROKEN = ("Involuntary full rematerialization", "Termination timeout", "terminate called", "Fatal Python error",
          "Exception ignored", "Aborted", "Segmentation fault")


def docs_blocks() -> list:
    """The docs' blocks marked `<!-- devices: 4 -->` (tests/docs/test_docs_run.py reads the pages and
    leaves these to this file), each with the output block after it."""
    return [b for b in ALL if b.kind == "devices" and b.marker.partition(":")[2].strip() == "4"]


def run_child(cases: list[str], timeout: float, docs: str | None = None) -> tuple[dict, str]:
    """Every case's report, and the child's stderr; the child's process group killed past timeout."""
    env = {**os.environ, **({"REARR_DOCS_BLOCKS": docs} if docs else {}),
           "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join(p for p in (str(CHILD.parents[1]), os.environ.get("PYTHONPATH")) if p)}
    env.pop("JAX_ENABLE_X64", None)
    child = subprocess.Popen([sys.executable, str(CHILD), *cases], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        started = [line for line in out.splitlines() if line.startswith("START")]
        pytest.fail(f"no answer within {timeout} s (a device left waiting in a collective?); last {started[-1:]}"
                    f"\n{err[-3000:]}")
    reports = {r["case"]: r for r in (json.loads(line[5:]) for line in out.splitlines() if line.startswith("CASE "))}
    assert child.returncode == 0, f"rc={child.returncode}\n{err[-4000:]}"
    return reports, err


def problems(report: dict) -> list[str]:
    """What is wrong with one case's report (nothing: an empty list)."""
    found = [] if report["right"] else [f"wrong result: {report.get('detail')}"]
    if "want" in report:
        if report.get("message") != report["want"]:
            found.append(f"error {report.get('message')!r}, want {report['want']!r}")
        elif report["seconds"] >= 1.0:
            found.append(f"the error took {report['seconds']:.2f} s")
        if not report.get("fix"):
            found.append("the error gives no fix")
        if not report.get("healthy"):
            found.append("the devices run no program after the error")
    return found


def check_all(cases: list[str], timeout: float, docs: str | None = None) -> dict:
    """Every case's report, once each is right and the child's stderr shows nothing broken."""
    reports, err = run_child(cases, timeout, docs)
    wrong = {c: problems(reports[c]) if c in reports else ["no report"] for c in cases}
    wrong = {c: p for c, p in wrong.items() if p}
    assert not wrong, json.dumps(wrong, indent=1)[:6000]
    broken = [line for line in err.splitlines() if any(b in line for b in BROKEN)]
    assert not broken, "\n".join(broken[:20])
    return reports


@pytest.mark.slow
def test_the_issue_contexts_check_a_bad_index_on_every_device(tmp_path: Path) -> None:
    """jit over a mesh, jit(in_shardings=) with host arrays, shard_map and pmap, each with a collective
    after the op: before, a bad value on one device raised there while the others waited in an all-reduce
    until XLA aborted the process (about a minute later). An index or into= on another mesh is refused.
    The docs' 4-device examples print what the pages show (in the same child)."""
    blocks = docs_blocks()
    assert blocks, "docs/scaling.md shows a 4-device jax example"
    listed = tmp_path / "blocks.json"
    listed.write_text(json.dumps([(b.where, "\n" * (b.line - 1) + b.body) for b in blocks]), encoding="utf-8")
    shown = [f"docs:{k}" for k in range(len(blocks))]
    reports = check_all(FAST + shown, timeout=240, docs=str(listed))
    for case, block in zip(shown, blocks):
        assert block.output is not None, f"{block.where}: the output block after it"
        assert reports[case]["printed"] == block.output.body, f"{block.where} printed {reports[case]['printed']!r}"


@pytest.mark.slow  # every op in every context, in one child process: about a minute
def test_every_op_in_every_context_and_transform() -> None:
    check_all([c for c in EVERY if c not in FAST], timeout=600)
