"""A checked jitted gather on 4 jax devices against the same check written by hand (the goal: <= 1.1x).

    python benchmarks/bench_jax_sharded.py [--rounds N] [--sizes small,large]

The script runs itself again in a child process with XLA_FLAGS=--xla_force_host_platform_device_count=4
(jax reads the device count once, at import). x is replicated, the index and the result are sharded over
the 4 devices, and every candidate is one jax.jit program with those in/out shardings:

- ``unchecked``: ``jnp.take(x, i, axis=0, mode="fill")``, no check (the floor);
- ``hand``: the check as one writes it by hand so that a bad value raises on every device: one fused
  ``any()`` (a reduction per shard, one all-reduce of a bool), a ``lax.cond`` whose branch calls back on
  every device (a ``pure_callback`` in a ``shard_map`` over the mesh) and returns the 0 that the wrap of
  negative values reads;
- ``rearr``: ``rearr.rearrange(x, "v[ids: e] c -> e c", ids=i)``, checked (the default);
- ``rearr unchecked``: the same with ``check_bounds=False``.

Each round runs every candidate, in a shuffled order, ``calls`` times, each call waited for (XLA:CPU's
forced devices can deadlock with many multi-device calls in flight on a small machine); the figure is the
median wall time per call over the rounds. Before timing, each candidate's result is compared with
numpy's, rearr's bad index is checked to raise RA501, and the compiled programs' collectives and
callbacks are counted (a count does not depend on the machine's load).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"small": (1000, 16, 4096), "large": (20000, 32, 200_000)}  # V rows, C columns, E index entries
CALLS = {"small": 50, "large": 5}
FLAG = "--xla_force_host_platform_device_count=4"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--sizes", default="small,large")
    args = parser.parse_args()
    if FLAG not in os.environ.get("XLA_FLAGS", ""):
        env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {FLAG}".strip(), "JAX_PLATFORMS": "cpu",
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        return subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env).returncode
    import logging

    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)  # the bad call's traceback, per device
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a loaded machine times noise too)")
    for size in args.sizes.split(","):
        run(size, args.rounds)
    return 0


def run(size: str, rounds: int) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import rearr

    V, C, E = SIZES[size]
    mesh = Mesh(np.array(jax.devices()), ("d",))
    S, R = NamedSharding(mesh, P("d")), NamedSharding(mesh, P())
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((V, C)).astype(np.float32), R)
    idx = jax.device_put(rng.integers(0, V, E).astype(np.int32), S)

    def refuse(flag, low, high):
        if bool(flag):
            raise IndexError(f"index holds {int(high) if int(high) >= V else int(low)}, outside axis of length {V}")
        return np.zeros((), np.int32)

    def hand(x, i):
        flag = jnp.any((i < -V) | (i >= V))

        def on_bad(i):
            scalars = (flag, jnp.min(i), jnp.max(i))
            return jax.shard_map(lambda *s: jax.pure_callback(refuse, jax.ShapeDtypeStruct((), jnp.int32), *s),
                                 mesh=mesh, in_specs=(P(), P(), P()), out_specs=P())(*scalars)

        zero = lax.cond(flag, on_bad, lambda i: jnp.zeros((), jnp.int32), i)
        return jnp.take(x, jnp.where(i < zero, i + V, i), axis=0, mode="fill")

    def jit(f):
        return jax.jit(f, in_shardings=(R, S), out_shardings=S)

    candidates = {
        "unchecked": jit(lambda x, i: jnp.take(x, i, axis=0, mode="fill")),
        "hand": jit(hand),
        "rearr": jit(lambda x, i: rearr.rearrange(x, "v[ids: e] c -> e c", ids=i)),
        "rearr unchecked": jit(lambda x, i: rearr.rearrange(x, "v[ids: e] c -> e c", ids=i, check_bounds=False)),
    }
    want = np.asarray(x)[np.asarray(idx)]
    for name, f in candidates.items():
        assert np.array_equal(np.asarray(f(x, idx)), want), name
    print(f"{size}: V={V} C={C} E={E} float32, x replicated, index and result sharded over 4 forced CPU devices;")
    print(f"  compiled programs ({', '.join(COUNTED)}):")
    for name, f in candidates.items():
        text = f.lower(x, idx).compile().as_text()
        counts = ", ".join(f"{len(re.findall(pattern, text))}" for pattern in COUNTED.values())
        print(f"    {name:16s} {counts}")
    bad = jax.device_put(np.asarray(idx).copy(), S)
    bad = bad.at[-1].set(V + 5)
    t0 = time.perf_counter()
    try:
        candidates["rearr"](x, bad).block_until_ready()
        raise AssertionError("rearr did not refuse the bad index")
    except Exception as e:  # noqa: BLE001 - jax reports the RearrError as a JaxRuntimeError
        assert "RA501" in str(e), str(e)[:500]
        print(f"  a bad value on the last device: RA501 on the caller in {time.perf_counter() - t0:.3f} s")
    calls = CALLS[size]
    times: dict[str, list[float]] = {k: [] for k in candidates}
    for _ in range(rounds):
        order = list(candidates)
        random.shuffle(order)
        for name in order:
            f = candidates[name]
            f(x, idx).block_until_ready()
            t0 = time.perf_counter()
            for _ in range(calls):
                f(x, idx).block_until_ready()
            times[name].append((time.perf_counter() - t0) / calls)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"  {rounds} rounds x {calls} calls, shuffled, each call waited for; median wall time per call:")
    for k, v in med.items():
        print(f"    {k:16s} {v * 1e6:9.1f} us   {v / med['hand']:.3f}x hand   {v / med['unchecked']:.3f}x unchecked")
    print(f"  rearr / hand = {med['rearr'] / med['hand']:.3f} (goal <= 1.1)")


COUNTED = {"all-reduce": r"= \S+ all-reduce(?:-start)?\(", "all-gather": r"= \S+ all-gather(?:-start)?\(",
           "conditional": r"= \S+ conditional\(", "callback": r"custom_call_target=\"\S*callback"}

if __name__ == "__main__":
    sys.exit(main())
