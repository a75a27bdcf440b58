"""bench_training's jax section: rearr's gather and scatter on jax against the same code written in jnp.

    eager gather   b t[idx: b k] c -> b k c    vs jnp.take_along_axis(x, idx[..., None], axis=1)
    jitted gather  the same inside jax.jit      vs that take_along_axis inside jax.jit
    jitted scatter b k c -> b t[idx: b k] c, 'sum', inside jax.jit
                                                vs jnp.zeros((b, t, c)).at[arange(b)[:, None], idx].add(src)

rearr runs with its default checks (a traced index is checked inside the jitted program: see
docs/backends.md, "jax"), and with check_bounds=False. Jitted, each is compared with the hand-written
code that does as much: rearr with its checks against the same jnp with the same check written by
hand (a reduction finds a bad value, a ``lax.cond`` calls back to the host only then, where the
callback raises: the cheapest run-time check a jitted program can hold, and what an out-of-range
index needs to be an error rather than jax's silent fill or drop), rearr with check_bounds=False
against the bare jnp. Eager, rearr (checks on) is compared with the bare jnp. Every call waits for its result
(block_until_ready). XLA runs on one thread (XLA_FLAGS, set here unless jax is imported already), and
the clock is the process's CPU time (time.process_time) with --clock cpu: jax executes its programs on
threads of its own, which a thread's CPU clock does not see; --clock wall is perf_counter. Results are
compared with the hand-written ones before timing.

    python benchmarks/_training_jax.py [--small] [--rounds N]

Goals: eager gather <= 1.5x take_along_axis; jitted gather and scatter <= 1.1x the hand-written jnp,
at the tiny and the medium size, checked and unchecked.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _harness
import _harness  # noqa: E402

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

if "jax" not in sys.modules:  # one XLA thread, as torch runs on one in the other sections
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

GATHER = "b t[idx: b k] c -> b k c"
SCATTER = "b k c -> b t[idx: b k] c"
SIZES = {"tiny": (2, 8, 4, 3), "medium": (32, 1024, 64, 256)}  # b, t, c, k
GOALS = {"eager gather": 1.5, "jit gather": 1.1, "jit scatter sum": 1.1}


def _variants(size: tuple[int, int, int, int]) -> dict[str, tuple[dict, object]]:
    """Each row: {label: call} (rearr, rearr check_bounds=False, for jitted rows the hand-written code
    with the check by hand, the bare hand-written code last), and the result every call must give."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    import rearr

    b, t, c, k = size
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((b, t, c), dtype=np.float32))
    src = jnp.asarray(rng.standard_normal((b, k, c), dtype=np.float32))
    idx = jnp.asarray(rng.integers(0, t, (b, k), dtype=np.int32))
    rows = jnp.arange(b)[:, None]

    def hand_gather(x, i):
        return jnp.take_along_axis(x, i[..., None], axis=1)

    def hand_scatter(s, i):
        return jnp.zeros((b, t, c), s.dtype).at[jnp.arange(b)[:, None], i].add(s)

    def raise_if_bad(i):
        if ((i < -t) | (i >= t)).any():
            raise IndexError(f"an index value is out of range for length {t}")
        return np.zeros((), i.dtype)

    def checked(i):  # the bounds check by hand: the 0 that the cond returns keeps the callback in the program
        bad = jnp.any((i < -t) | (i >= t))
        zero = lax.cond(bad, lambda i: jax.pure_callback(raise_if_bad, jax.ShapeDtypeStruct((), i.dtype), i),
                        lambda i: jnp.zeros((), i.dtype), i)
        return i + zero

    def gather(x, i, check=True):
        return rearr.rearrange(x, GATHER, idx=i, check_bounds=check)

    def scatter(s, i, check=True):
        return rearr.scatter(s, SCATTER, "sum", idx=i, t=t, check_bounds=check)

    jg, jg_off, jh = jax.jit(gather), jax.jit(lambda x, i: gather(x, i, False)), jax.jit(hand_gather)
    js, js_off, jhs = jax.jit(scatter), jax.jit(lambda s, i: scatter(s, i, False)), jax.jit(hand_scatter)
    jh_checked = jax.jit(lambda x, i: hand_gather(x, checked(i)))
    jhs_checked = jax.jit(lambda s, i: hand_scatter(s, checked(i)))
    want_gather = np.asarray(x)[np.arange(b)[:, None], np.asarray(idx)]
    want_scatter = np.zeros((b, t, c), np.float32)
    np.add.at(want_scatter, (np.asarray(rows), np.asarray(idx)), np.asarray(src))
    return {
        "eager gather": ({"rearr": lambda: gather(x, idx).block_until_ready(),
                          "rearr check_bounds=False": lambda: gather(x, idx, False).block_until_ready(),
                          "take_along_axis": lambda: hand_gather(x, idx).block_until_ready()}, want_gather),
        "jit gather": ({"rearr": lambda: jg(x, idx).block_until_ready(),
                        "rearr check_bounds=False": lambda: jg_off(x, idx).block_until_ready(),
                        "checked by hand": lambda: jh_checked(x, idx).block_until_ready(),
                        "jit(take_along_axis)": lambda: jh(x, idx).block_until_ready()}, want_gather),
        "jit scatter sum": ({"rearr": lambda: js(src, idx).block_until_ready(),
                             "rearr check_bounds=False": lambda: js_off(src, idx).block_until_ready(),
                             "checked by hand": lambda: jhs_checked(src, idx).block_until_ready(),
                             "jit(zeros.at[rows, idx].add)": lambda: jhs(src, idx).block_until_ready()},
                            want_scatter),
    }


def run(args: argparse.Namespace) -> list[str]:
    """Print the jax rows; return the goals missed."""
    import jax
    import numpy as np

    clock = "the process's CPU time (time.process_time: XLA runs on threads of its own)"
    if args.clock == "cpu":
        _harness.CLOCK[0] = time.process_time
    else:
        _harness.set_clock(args.clock)
        clock = _harness.CLOCK_LINES[args.clock]
    print(f"\n## jax {jax.__version__} ({jax.devices()[0].platform}), float32, XLA_FLAGS="
          f"{os.environ.get('XLA_FLAGS', '')!r}; clock: {clock}")
    print(f"{'case':<18} {'size (b, t, c, k)':<20} {'rearr':>10} {'checked':>10} {'ratio':>6} {'check off':>10} "
          f"{'by hand':>10} {'ratio':>6}  hand-written")
    missed = []
    summary = getattr(args, "summary", [])  # bench_training's table of every section's rows
    rounds = max(3, args.rounds)
    target = 0.01 if args.small else 0.05
    for size_name, size in SIZES.items():
        if args.small and size_name != "tiny":
            continue
        for case, (calls, want) in _variants(size).items():
            for label, call in calls.items():
                np.testing.assert_allclose(np.asarray(_result(call)), want, rtol=1e-5, atol=1e-5, err_msg=label)
            times = _harness.interleaved(calls, rounds, target)
            hand_label = list(calls)[-1]
            on, off, hand = times["rearr"], times["rearr check_bounds=False"], times[hand_label]
            by_hand = times.get("checked by hand")  # jitted rows: the same check written by hand
            rows = [(case, on, hand_label if by_hand is None else f"{hand_label}, checked by hand",
                     hand if by_hand is None else by_hand)]
            if by_hand is not None:
                rows.append((f"{case}, check_bounds=False", off, hand_label, hand))
            checked = "-" if by_hand is None else f"{by_hand * 1e6:>8.1f}us"
            print(f"{case:<18} {str(size):<20} {on * 1e6:>8.1f}us {checked:>10} {rows[0][1] / rows[0][3]:>5.2f}x "
                  f"{off * 1e6:>8.1f}us {hand * 1e6:>8.1f}us {off / hand:>5.2f}x  {hand_label}")
            for name, mine, label, theirs in rows:
                ratio = mine / theirs
                summary.append(("jax", name, str(size), mine, label, theirs, None, GOALS[case], ratio <= GOALS[case]))
                if ratio > GOALS[case]:
                    missed.append(f"jax {name} {size_name}: {ratio:.2f}x > {GOALS[case]}x")
    if not args.small:
        _mechanisms(rounds, target)
    return missed


def _mechanisms(rounds: int, target: float) -> None:
    """Why rearr's check is a pure_callback in a cond (docs/backends.md, "jax"): the same tiny jitted
    take_along_axis, bare, with a cond that would call jax.debug.callback (an effect), and with a cond
    that would call a jax.pure_callback; no index is bad, so neither callback runs."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    b, t, c, k = SIZES["tiny"]
    x = jnp.ones((b, t, c))
    idx = jnp.asarray(np.random.default_rng(0).integers(0, t, (b, k)), jnp.int32)

    def take(x, i):
        return jnp.take_along_axis(x, i[..., None], axis=1)

    def raise_if(bad):
        if bad:
            raise IndexError("out of range")

    def debug_callback(x, i):
        bad = jnp.any((i < -t) | (i >= t))
        lax.cond(bad, lambda: jax.debug.callback(raise_if, bad), lambda: None)
        return take(x, i)

    def pure_callback(x, i):
        bad = jnp.any((i < -t) | (i >= t))
        same = jax.ShapeDtypeStruct(i.shape, i.dtype)
        return take(x, lax.cond(bad, lambda v: jax.pure_callback(np.asarray, same, v), lambda v: v, i))

    def timed(f):
        jitted = jax.jit(f)
        return lambda: jitted(x, idx).block_until_ready()

    calls = {"bare": timed(take), "cond + debug.callback": timed(debug_callback),
             "cond + pure_callback": timed(pure_callback)}
    times = _harness.interleaved(calls, rounds, target)
    print("\njit(take_along_axis) " + str(SIZES["tiny"]) + ", a check's callback that never runs: " +
          ", ".join(f"{name} {v * 1e6:.1f}us" for name, v in times.items()))


def _result(call):
    """The array a benchmark call returns (each returns its block_until_ready result)."""
    return call()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="the tiny size only, few repeats (a smoke run)")
    parser.add_argument("--rounds", type=int, default=9)
    _harness.add_options(parser)
    args = parser.parse_args()
    print(_harness.tree_state() + "; " + _harness.machine_state())
    print(_harness.pin_malloc(args.malloc))
    missed = run(args)
    print("\ngoals: " + ("all met" if not missed else "MISSED: " + "; ".join(missed)))
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
