"""What rearr's bounds check costs on a tiny torch index, and the ways it could be made.

    python benchmarks/bench_bounds_check.py [--rounds N]

One process, the variants interleaved (_harness.interleaved: alternating order, the median over
rounds of this thread's CPU time per call), torch on one thread. The index is (2, 3) int64 on the
CPU, into an axis of length 8:

    rearr's check      backend.check_index, as the careful path and the direct path call it
                       (torch.aminmax: one pass, then both values read in one transfer)
    aminmax, read      the same native part alone: aminmax and the two .item()
    min, max, read     two reductions and two .item(), the obvious way
    the custom op      rearr::check_index, as torch.compile and jit.trace run it (the check inside
                       the op: the dispatcher, then the same kernel)

and the call it guards: the tiny torch gather of bench_table.py (whose bounds torch's own kernel
checks on the CPU, so rearr's check does not run there: `b n[idx] -> b k`), and a tiny embedding
look-up (`v[ids: b t] d -> b t d`, rows of a flat table, which rearr checks itself), each with
checks on and check_bounds=False. Prints us per call.
"""

from __future__ import annotations

import argparse
import sys

import _harness  # benchmarks/_harness.py: the repository root, the clock, interleaved rounds

sys.path.insert(0, str(_harness.ROOT))  # run from a checkout

import torch  # noqa: E402

import rearr  # noqa: E402
from rearr.backends import (
    _torch_ops,  # noqa: E402
    backend_for,  # noqa: E402
)
from rearr.planning.plan import IndexUse  # noqa: E402

torch.set_num_threads(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--target-ms", type=float, default=20.0, help="time per variant per round")
    _harness.add_options(parser)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, one thread; {_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)

    idx = torch.tensor([[1, 0, 7], [3, 3, 5]])
    x, table = torch.randn(2, 8), torch.randn(8, 4)
    backend = backend_for(x)
    use = IndexUse("idx", "n", 8, (), tuple(idx.shape), None)
    text = "b n[idx] -> b k"
    op = _torch_ops._define()[0]
    gather, lookup = "b n[idx] -> b k", "v[ids: b t] d -> b t d"

    def aminmax_read():
        lo, hi = torch.aminmax(idx)
        return lo.item(), hi.item()

    fns = {
        "rearr's check": lambda: backend.check_index(idx, use, text),
        "aminmax, read": aminmax_read,
        "min, max, read": lambda: (idx.min().item(), idx.max().item()),
        "the custom op": lambda: op(idx, 8, "idx", "n", -1, text, True),
        "gather, checks on": lambda: rearr.rearrange(x, gather, idx=idx),
        "gather, check_bounds=False": lambda: rearr.rearrange(x, gather, idx=idx, check_bounds=False),
        "look-up, checks on": lambda: rearr.rearrange(table, lookup, ids=idx),
        "look-up, check_bounds=False": lambda: rearr.rearrange(table, lookup, ids=idx, check_bounds=False),
    }
    for f in fns.values():
        f()
    med = _harness.interleaved(fns, args.rounds, args.target_ms / 1e3)
    for name, t in med.items():
        print(f"{name:30s} {t * 1e6:7.2f} us")
    on, off = med["look-up, checks on"], med["look-up, check_bounds=False"]
    print(f"the look-up's check: {(on - off) * 1e6:.2f} us per call ({on / off:.2f}x unchecked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
