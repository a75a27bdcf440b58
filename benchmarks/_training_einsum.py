"""bench_training.py's einsum section: an attention block, eager and compiled (inductor), rearr against
the same block written by hand.

The block: split heads ``b n (h d) -> b h n d``, ``q kᵀ`` scaled, softmax, ``· v``, merge heads
``b h n d -> b n (h d)``, at (b, n, dim, heads) = (8, 128, 256, 8), float32. Variants:

    rearr     rearr.rearrange + rearr.einsum("b h i d, b h j d -> b h i j") ...
    matmul    x.view(b, n, h, d).transpose(1, 2), q @ k.transpose(-2, -1), a @ v   (the best by hand)
    bmm       the same with the heads folded into the batch: reshape to (b h) n d, torch.bmm
    einsum    the view/transpose of matmul, torch.einsum("bhid,bhjd->bhij") ...
    einops    einops.rearrange + einops.einsum

Four modes: eager and compiled (torch.compile(fullgraph=True), inductor), each forward and forward +
backward (``out.backward(g)``). Each compiled variant is compiled once, outside the timing, with
inductor's FX graph cache off so that its pattern passes run and the "sdpa" column can say whether
inductor fused the block into one scaled-dot-product-attention kernel (its fuse_attention pass
matches the matmul form). Every variant's output (and gradients) are checked against matmul's first.
Goal: rearr <= 1.05x the best hand-written variant (matmul, bmm, torch.einsum) in each mode.
Interleaved rounds, medians, torch on one thread; see benchmarks/README.md, "Method".

    python benchmarks/_training_einsum.py [--small] [--rounds N] [--clock cpu|wall]

``--small``: tiny sizes and eager only, goals not checked (compiling takes longer than the smoke run
may; tests/test_compile.py compiles the block with inductor). Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import _harness  # benchmarks/_harness.py: the clock, interleaved rounds, malloc pinning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import einops  # noqa: E402
import torch  # noqa: E402

import rearr  # noqa: E402

GOAL = 1.05
HAND = ("matmul", "bmm", "einsum")  # the hand-written variants: the best of them is the reference
SIZES = {False: (8, 128, 256, 8), True: (2, 16, 32, 2)}  # (b, n, dim, heads), by --small


def blocks(heads: int) -> dict[str, Callable]:
    """Each variant of the attention block, f(q, k, v) -> out with q, k, v of shape (b, n, dim)."""

    def by_matmul(q, k, v):
        b, n, dim = q.shape
        q, k, v = (t.view(b, n, heads, dim // heads).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-2, -1) * (dim // heads) ** -0.5).softmax(-1)
        return (a @ v).transpose(1, 2).reshape(b, n, dim)

    def by_bmm(q, k, v):
        b, n, dim = q.shape
        d = dim // heads
        q, k, v = (t.view(b, n, heads, d).transpose(1, 2).reshape(b * heads, n, d) for t in (q, k, v))
        a = (torch.bmm(q, k.transpose(1, 2)) * d ** -0.5).softmax(-1)
        return torch.bmm(a, v).view(b, heads, n, d).transpose(1, 2).reshape(b, n, dim)

    def by_einsum(q, k, v):
        b, n, dim = q.shape
        q, k, v = (t.view(b, n, heads, dim // heads).transpose(1, 2) for t in (q, k, v))
        a = (torch.einsum("bhid,bhjd->bhij", q, k) * (dim // heads) ** -0.5).softmax(-1)
        return torch.einsum("bhij,bhjd->bhid", a, v).transpose(1, 2).reshape(b, n, dim)

    def by_rearr(q, k, v):
        q, k, v = (rearr.rearrange(t, "b n (h d) -> b h n d", h=heads) for t in (q, k, v))
        a = (rearr.einsum(q, k, "b h i d, b h j d -> b h i j") * q.shape[-1] ** -0.5).softmax(-1)
        return rearr.rearrange(rearr.einsum(a, v, "b h i j, b h j d -> b h i d"), "b h n d -> b n (h d)")

    def by_einops(q, k, v):
        q, k, v = (einops.rearrange(t, "b n (h d) -> b h n d", h=heads) for t in (q, k, v))
        a = (einops.einsum(q, k, "b h i d, b h j d -> b h i j") * q.shape[-1] ** -0.5).softmax(-1)
        return einops.rearrange(einops.einsum(a, v, "b h i j, b h j d -> b h i d"), "b h n d -> b n (h d)")

    return {"rearr": by_rearr, "matmul": by_matmul, "bmm": by_bmm, "einsum": by_einsum, "einops": by_einops}


def _compiled(f: Callable, args: tuple, backward: bool) -> tuple[Callable, bool]:
    """f compiled by inductor and run once (its compile, outside the timing); whether it fused attention."""
    from torch._dynamo.utils import counters
    from torch._inductor import config

    counters.clear()  # not torch._dynamo.reset(): it would drop the variants compiled before this one
    g = torch.compile(f, fullgraph=True)
    with config.patch(fx_graph_cache=False):  # a cache hit skips the passes (and their counters)
        out = g(*args)
        if backward:
            out.backward(torch.ones_like(out))
    return g, counters["inductor"]["fuse_attention"] > 0


def _step(f: Callable, args: tuple, grad: torch.Tensor | None) -> Callable[[], object]:
    if grad is None:
        return lambda: f(*args)

    def forward_backward():
        for t in args:
            t.grad = None
        f(*args).backward(grad)

    return forward_backward


def _check(name: str, f: Callable, args: tuple, want: tuple, backward: bool) -> None:
    """f's output (and its gradients) against matmul's: float32, einsum's and bmm's own rounding."""
    for t in args:
        t.grad = None
    out = f(*args)
    got = (out,)
    if backward:
        out.backward(torch.ones_like(out))
        got += tuple(t.grad for t in args)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def run(args: argparse.Namespace) -> list[str]:
    """Print the section's rows; return the goals missed (one line each)."""
    torch.set_num_threads(1)  # and inductor's kernels: the thread clock sees this thread only
    _harness.set_clock(args.clock)
    b, n, dim, heads = SIZES[args.small]
    fns = blocks(heads)
    target = 0.002 if args.small else 0.05
    missed = []
    summary = getattr(args, "summary", [])  # bench_training's table of every section's rows
    print(f"\nattention block (b, n, dim, heads) = ({b}, {n}, {dim}, {heads}), float32; ms per call, "
          f"median of {args.rounds} interleaved rounds; ratio: against the best hand-written variant "
          f"({', '.join(HAND)}); sdpa: the variants whose block inductor fused into one attention kernel")
    print(f"{'mode':<24} " + " ".join(f"{k:>8}" for k in fns) + f" {'rearr/matmul':>13} {'rearr/best':>11}  sdpa")
    modes = [(False, False), (False, True)] + ([] if args.small else [(True, False), (True, True)])
    for compiled, backward in modes:
        gen = torch.Generator().manual_seed(0)
        inputs = tuple(torch.randn(b, n, dim, generator=gen, requires_grad=backward) for _ in range(3))
        want_out = fns["matmul"](*inputs)
        if backward:
            want_out.backward(torch.ones_like(want_out))
        want = (want_out.detach(),) + (tuple(t.grad.clone() for t in inputs) if backward else ())  # a later
        # backward would add into these very tensors
        calls, fused = {}, {}
        torch._dynamo.reset()  # once per mode: every variant's compile is kept until it is timed
        for name, f in fns.items():
            if compiled:
                f, fused[name] = _compiled(f, inputs, backward)
            _check(name, f, inputs, want, backward)
            calls[name] = _step(f, inputs, torch.ones_like(want_out) if backward else None)
        t = _harness.interleaved(calls, args.rounds, target)
        best = min(HAND, key=t.__getitem__)
        ratio = t["rearr"] / t[best]
        mode = f"{'compiled' if compiled else 'eager'} {'fwd+bwd' if backward else 'forward'}"
        sdpa = ", ".join(k for k in fns if fused.get(k)) or "none" if compiled else ""
        print(f"{mode:<24} " + " ".join(f"{t[k] * 1e3:8.3f}" for k in fns)
              + f" {t['rearr'] / t['matmul']:12.2f}x {ratio:10.2f}x  {sdpa}")
        summary.append(("einsum", f"attention {mode}", str((b, n, dim, heads)), t["rearr"], best, t[best], None,
                        GOAL, ratio <= GOAL))
        if ratio > GOAL and not args.small:  # tiny sizes time rearr's per-call overhead, not the goal's block
            missed.append(f"einsum attention, {mode}: rearr {ratio:.2f}x {best} (goal <= {GOAL}x)")
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--small", action="store_true", help="tiny sizes, eager only: a smoke run")
    _harness.add_options(parser)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__} (1 thread), einops {einops.__version__}; "
          f"{_harness.machine_state()}")
    _harness.setup(args.clock, args.malloc)
    missed = run(args)
    for line in missed:
        print(f"goal missed: {line}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
