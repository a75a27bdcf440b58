"""rearr under torch.compile (fullgraph, no graph break, no recompile) and torch.jit.trace.

Cheap backends ("eager", "aot_eager") throughout; inductor once. Small tensors: the cost is compiling.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
from torch._dynamo.testing import CompileCounter  # noqa: E402

import rearr  # noqa: E402
import rearr.layers  # noqa: E402
from rearr import RearrError  # noqa: E402

BACKENDS = ("eager", "aot_eager")
# The tests that run on REARR_TEST_DEVICE too (benchmarks/bench_gpu.py): those without a failing call,
# which on an accelerator would be a device-side assertion that poisons the context.
on_test_device = pytest.mark.usefixtures("on_test_device")


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _no_break(f, *args, **kwargs):
    explained = torch._dynamo.explain(f)(*args, **kwargs)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def _same(a, b):
    if isinstance(a, torch.Tensor):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b)
    elif isinstance(a, dict):
        assert a == b
    else:
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v)


# f(*args) for every public op; args are made fresh per test
def _gather(x, i):
    return rearr.rearrange(x, "b n[idx: b k] c -> b k c", idx=i)


def _message_passing(x, s, d):
    return rearr.scatter(x, "v[src: e] c -> v[dst: e] c", "mean", src=s, dst=d)


CASES = {
    "rearrange": (lambda x: rearr.rearrange(x, "b c (h w) -> b (w c) h", h=2), lambda: (torch.randn(3, 4, 6),)),
    "reduce": (lambda x: rearr.reduce(x, "b c (h h2) -> b h c", "max", h2=2), lambda: (torch.randn(3, 4, 6),)),
    "repeat": (lambda x: rearr.repeat(x, "b c -> b c r", r=3), lambda: (torch.randn(3, 4),)),
    "gather": (_gather, lambda: (torch.randn(3, 5, 2), torch.tensor([[0, 4], [1, -1], [2, 2]]))),
    "scatter": (lambda x, i: rearr.scatter(x, "b k -> b n[idx]", "sum", idx=i, n=4),
                lambda: (torch.randn(2, 3), torch.tensor([[0, 3, 3], [1, 1, -4]]))),
    "scatter_set": (lambda x, i: rearr.scatter(x, "k -> n[idx]", "set", idx=i, n=5),
                    lambda: (torch.randn(3), torch.tensor([4, 0, 2]))),
    "message_passing": (_message_passing, lambda: (torch.randn(4, 3), torch.tensor([0, 1, 2, 3, 3]),
                                                   torch.tensor([1, 1, 0, 2, 3]))),
    "einsum": (lambda x, y: rearr.einsum(x, y, "b i, b j -> b i j"), lambda: (torch.randn(2, 3), torch.randn(2, 4))),
    "pack_unpack": (lambda x, y: rearr.unpack(*rearr.pack([x, y], "b *"), "b *"),
                    lambda: (torch.randn(2, 3, 4), torch.randn(2, 5))),
    "parse_shape": (lambda x: x.reshape(rearr.parse_shape(x, "b _ h")["h"], -1), lambda: (torch.randn(2, 3, 4),)),
}


@pytest.mark.slow
@on_test_device
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_op_compiles_without_a_graph_break(name):
    f, make = CASES[name]
    args = make()
    _no_break(f, *args)
    for backend in BACKENDS:
        torch._dynamo.reset()
        _same(torch.compile(f, backend=backend, fullgraph=True)(*args), f(*args))


def _frames(f, make_args, sizes, dynamic_dims):
    """Compile f once per input; the inputs' dims in dynamic_dims are marked dynamic. Returns the frame count."""
    counter = CompileCounter()
    g = torch.compile(f, backend=counter, fullgraph=True)
    for n in sizes:
        args = make_args(n)
        for arg, dim in dynamic_dims:
            torch._dynamo.mark_dynamic(args[arg], dim)
        _same(g(*args), f(*args))
    return counter.frame_count


def test_a_dynamic_batch_compiles_one_frame():
    def f(x):
        y = rearr.rearrange(x, "b c (h w) -> b h (w c)", h=2)
        y = rearr.reduce(y, "b h wc -> b wc", "mean")
        return rearr.repeat(y, "b wc -> b wc r", r=2)

    assert _frames(f, lambda b: (torch.randn(b, 3, 4),), (2, 3, 5, 8), [(0, 0)]) == 1


@on_test_device
def test_a_dynamic_batch_with_gather_and_scatter_compiles_one_frame():
    def f(x, i):
        y = _gather(x, i)
        return rearr.scatter(y, "b k c -> b n[j: b k] c", "sum", j=i, n=5)

    def make(b):
        return torch.randn(b, 5, 2), torch.randint(-5, 5, (b, 3))

    assert _frames(f, make, (2, 3, 5, 8), [(0, 0), (1, 0)]) == 1


@on_test_device
def test_a_message_passing_scatter_with_changing_edges_compiles_one_frame():
    def make(e):
        return torch.randn(6, 3), torch.randint(0, 6, (e,)), torch.randint(-6, 6, (e,))

    assert _frames(_message_passing, make, (2, 3, 5, 8), [(1, 0), (2, 0)]) == 1


def test_a_dynamic_batch_through_einsums_matmul_compiles_one_frame():
    def f(x, w):  # a grouped matmul whose reshapes hold the symbolic batch
        return rearr.einsum(x, w, "b (h w) c, c d -> (b h) w d", h=2)

    assert _frames(f, lambda b: (torch.randn(b, 6, 4), torch.randn(4, 5)), (2, 3, 5, 8), [(0, 0)]) == 1


def _attention(x, heads):
    q, k, v = (rearr.rearrange(t, "b n (h d) -> b h n d", h=heads) for t in x.chunk(3, dim=-1))
    a = rearr.einsum(q, k, "b h i d, b h j d -> b h i j").softmax(-1)
    return rearr.rearrange(rearr.einsum(a, v, "b h i j, b h j d -> b h i d"), "b h n d -> b n (h d)")


@pytest.mark.slow
def test_inductor_fuses_an_einsum_attention_block_as_a_matmul_one():
    """Inductor's attention fusion matches matmul's graph: rearr's einsum lowers to it, torch.einsum does not."""
    from torch._dynamo.utils import counters
    from torch._inductor import config

    x = torch.randn(2, 16, 3 * 32)
    _no_break(_attention, x, 4)
    counters.clear()
    with config.patch(fx_graph_cache=False):  # a cache hit would skip the pass that counts
        g = torch.compile(_attention, fullgraph=True)
        torch.testing.assert_close(g(x, 4), _attention(x, 4))
    assert counters["inductor"]["fuse_attention"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_einsum_attention_block_trains_compiled(backend):
    """Forward and backward (on the CPU, the matmul's operands are copied in memory order there too)."""
    x = torch.randn(2, 16, 3 * 32, dtype=torch.float64, requires_grad=True)
    _no_break(_attention, x, 4)
    grads = []
    for f in (_attention, torch.compile(_attention, backend=backend, fullgraph=True)):
        x.grad = None
        out = f(x, 4)
        (out * torch.arange(out.numel()).reshape(out.shape)).sum().backward()
        grads.append((out.detach(), x.grad.clone()))
    _same(grads[0], grads[1])


@pytest.mark.slow
def test_einops_dynamic_shape_test_passes_against_rearr():
    """einops 0.8.2's test_torch_compile_with_dynamic_shape, with rearr's functions."""
    def func1(x):
        a, b, c, *other = x.shape
        x = rearr.rearrange(x, "(a a2) b c ... -> b (c a2) (a ...)", a2=2)
        return rearr.reduce(x, "b ca2 A -> b A", "sum", ca2=c * 2)

    static = torch.compile(func1, dynamic=False, fullgraph=True, backend="aot_eager")
    dynamic = torch.compile(func1, dynamic=True, fullgraph=True, backend="aot_eager")
    for shape in ([4, 5, 6, 3], [6, 3, 4, 2, 3]):
        x = torch.randn(size=shape)
        assert torch.allclose(static(x), func1(x), atol=1e-5)
        assert torch.allclose(dynamic(x), func1(x), atol=1e-5)


@on_test_device
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_compiled_under_no_grad_and_inference_mode(mode):
    x, i = CASES["gather"][1]()
    with mode():
        for name in ("rearrange", "reduce", "gather", "message_passing"):
            f, make = CASES[name]
            args = make()
            _same(torch.compile(f, backend="aot_eager", fullgraph=True)(*args), f(*args))
    del x, i


def test_vmap_over_rearrange_reduce_repeat():
    x = torch.randn(4, 3, 6)
    cases = [
        (lambda t: rearr.rearrange(t, "c (h w) -> w c h", h=2), lambda t: t.reshape(3, 2, 3).permute(2, 0, 1)),
        (lambda t: rearr.reduce(t, "c w -> w", "max"), lambda t: t.amax(0)),
        (lambda t: rearr.repeat(t, "c w -> c w r", r=2), lambda t: t[..., None].expand(3, 6, 2)),
    ]
    for ours, hand in cases:
        torch.testing.assert_close(torch.func.vmap(ours)(x), torch.func.vmap(hand)(x))


def test_vmap_over_checked_gathers_and_set_scatters_keeps_the_checks():
    x, i = torch.randn(4, 5, 2), torch.randint(-5, 5, (4, 3))
    gather = torch.func.vmap(lambda a, b: rearr.rearrange(a, "n[idx: k] c -> k c", idx=b))
    torch.testing.assert_close(gather(x, i), _gather(x, i))
    i[2, 1] = 7
    with pytest.raises(RearrError, match=r"holds 7 at position \(2, 1\)"):  # the vmapped axis first
        gather(x, i)

    def put(a, b):
        return rearr.scatter(a, "k c -> n[idx: k] c", "set", idx=b, n=5)

    s, j = torch.randn(4, 3, 2), torch.stack([torch.randperm(5)[:3] for _ in range(4)])
    torch.testing.assert_close(torch.func.vmap(put)(s, j), torch.stack([put(s[k], j[k]) for k in range(4)]))
    j[1] = torch.tensor([0, 4, 0])
    with pytest.raises(RearrError, match="more than once"):
        torch.func.vmap(put)(s, j)


@on_test_device
@pytest.mark.parametrize("name", ["rearrange", "reduce", "repeat", "gather", "scatter", "message_passing"])
def test_gradients_compiled_equal_eager(name):
    f, make = CASES[name]
    args = make()
    x = args[0].clone().requires_grad_(True)
    grads = []
    for g in (f, torch.compile(f, backend="aot_eager", fullgraph=True)):
        x.grad = None
        out = g(x, *args[1:])
        (out * torch.arange(out.numel()).reshape(out.shape)).sum().backward()
        grads.append(x.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


@pytest.mark.slow
def test_inductor_compiles_gather_scatter_and_keeps_the_bounds_check():
    def f(x, i):
        y = rearr.reduce(rearr.rearrange(x, "b n[idx: b k] c -> b k c", idx=i), "b k c -> b c", "sum")
        return rearr.scatter(y, "b c -> b n[j: b] c", "sum", j=i[:, 0], n=5)

    g = torch.compile(f, fullgraph=True)  # inductor, the default
    x, i = torch.randn(3, 5, 2), torch.tensor([[0, 4], [1, -1], [2, 2]])
    _same(g(x, i), f(x, i))
    with pytest.raises(RearrError, match="RA501") as caught:
        g(x, torch.tensor([[0, 4], [1, 5], [2, 2]]))
    assert "holds 5" in str(caught.value) and "'n' of length 5" in str(caught.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_out_of_range_under_compile_raises_rearr_error(backend):
    f = torch.compile(_gather, backend=backend, fullgraph=True)
    x = torch.randn(3, 5, 2)
    f(x, torch.tensor([[0, 4], [1, -1], [2, 2]]))
    for bad, value in ((torch.tensor([[0, 4], [1, 7], [2, 2]]), 7), (torch.tensor([[0, -6], [1, 1], [2, 2]]), -6)):
        with pytest.raises(RearrError, match="RA501") as caught:
            f(x, bad)
        assert f"holds {value}" in str(caught.value)
    g = torch.compile(_message_passing, backend=backend, fullgraph=True)
    with pytest.raises(RearrError, match="RA501"):
        g(torch.randn(4, 3), torch.tensor([0, 1]), torch.tensor([1, 4]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_duplicates_under_set_under_compile_raise_rearr_error(backend):
    along = torch.compile(CASES["scatter_set"][0], backend=backend, fullgraph=True)
    rows = torch.compile(lambda x, i: rearr.scatter(x, "k c -> n[idx: k] c", "set", idx=i, n=4),
                         backend=backend, fullgraph=True)
    along(torch.randn(3), torch.tensor([4, 0, 2]))
    rows(torch.randn(3, 2), torch.tensor([3, 0, 2]))
    with pytest.raises(RearrError, match="more than once"):
        along(torch.randn(3), torch.tensor([4, 0, 4]))
    with pytest.raises(RearrError, match="more than once"):
        rows(torch.randn(3, 2), torch.tensor([3, 0, -1]))


# --- torch.jit.trace -------------------------------------------


def test_jit_trace_keeps_the_bounds_and_duplicate_checks():
    x = torch.randn(3, 5, 2)
    traced = torch.jit.trace(_gather, (x, torch.tensor([[0, 4], [1, 1], [2, 2]])))
    assert "rearr::check_index" in str(traced.graph)
    torch.testing.assert_close(traced(x, torch.tensor([[0, -1], [1, 1], [2, 2]])),
                               _gather(x, torch.tensor([[0, -1], [1, 1], [2, 2]])))
    # The TorchScript interpreter re-raises an op's error as its own RuntimeError, with rearr's message.
    with pytest.raises(RuntimeError, match="RearrError: RA501: index 'idx' holds 9"):
        traced(x, torch.tensor([[0, 9], [1, 1], [2, 2]]))

    f = CASES["scatter_set"][0]
    traced = torch.jit.trace(f, (torch.randn(3), torch.tensor([4, 0, 2])))
    assert "rearr::check_unique" in str(traced.graph)
    with pytest.raises(RuntimeError, match="RearrError: RA501: .* more than once"):
        traced(torch.randn(3), torch.tensor([1, 1, 2]))


def test_the_direct_path_declines_under_jit_trace():
    """A call seen before runs its direct program, which leaves a CPU index to torch.gather's own
    check; under torch.jit.trace ready_index declines it, so a trace holds rearr's check op. (Its
    shapes hold 0-d tensors there, so the direct table's look-up misses too: this is the check that
    does not rest on that.)"""
    backend = rearr.backends.backend_for(torch.zeros(1))
    x, idx = torch.randn(3, 5), torch.tensor([[0, 4], [1, 1], [2, 2]])
    seen = []

    def gather(x, idx):
        seen.append(backend.ready_index(idx, x))
        return rearr.rearrange(x, "b n[idx] -> b k", idx=idx)

    gather(x, idx)
    traced = torch.jit.trace(gather, (x, idx), check_trace=False)
    assert seen == [True, False]
    assert "rearr::check_index" in str(traced.graph)
    with pytest.raises(RuntimeError, match="RearrError: RA501: index 'idx' holds 9"):
        traced(x, torch.tensor([[0, 9], [1, 1], [2, 2]]))


# Lengths read from the traced input (x.shape[i] is a 0-d tensor while torch.jit.trace runs), and layers.
TRACED = {
    **CASES,
    "lengths from the shape": (lambda x: rearr.rearrange(x, "(a c) d -> a c d", c=x.shape[1]),
                               lambda: (torch.zeros(4, 2),)),
    "repeat by the shape": (lambda x: rearr.repeat(x, "a d -> a d k", k=x.shape[0]), lambda: (torch.zeros(4, 2),)),
    "layers": (lambda x: rearr.layers.Reduce("b (h h2) c -> b h c", "mean", h2=2)(rearr.layers.Rearrange(
        "b c h -> b h c")(x)), lambda: (torch.randn(2, 3, 4),)),
    "einmix": (rearr.layers.EinMix("b t c -> b t d", "c d", c=3, d=5), lambda: (torch.randn(2, 4, 3),)),
}


@pytest.mark.parametrize("name", sorted(TRACED))
def test_jit_trace_raises_no_warning_from_rearr(name):
    """The planner once warned (TracerWarning) at each comparison of a traced length: the shapes are now
    read as ints once, without the tracer's warning, and the trace is the same (checks included)."""
    f, make = TRACED[name]
    args = make()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", module=r"rearr(\.|$)")  # any warning that rearr's own code raises
        warnings.filterwarnings("ignore", "`torch.jit.trace", DeprecationWarning)  # torch's, at the call
        traced = torch.jit.trace(f, args, check_trace=False)
    _same(traced(*args), f(*args))
    if name in ("gather", "scatter_set"):
        assert "rearr::check_" in str(traced.graph)


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_jit_trace_keeps_the_device_side_checks():
    """check_bounds="async" (the default on CUDA): the assertions are recorded as rearr's ops with a
    used output; the tracer drops a bare torch._assert_async, and a bad value would then be wrapped."""
    x = torch.arange(12.0).reshape(3, 4)
    gather = lambda x, i: rearr.rearrange(x, "b n[idx] -> b", idx=i, check_bounds="async")  # noqa: E731
    traced = torch.jit.trace(gather, (x, torch.tensor([0, 1, 2])))
    assert "rearr::check_index" in str(traced.graph)
    torch.testing.assert_close(traced(x, torch.tensor([3, -1, 0])), torch.tensor([3.0, 7.0, 8.0]))
    with pytest.raises(RuntimeError, match="RA501: index 'idx' holds a value outside axis 'n'"):
        traced(x, torch.tensor([3, 4, 0]))
    put = lambda v, i: rearr.scatter(v, "k -> n[idx]", "set", idx=i, n=4, check_bounds="async")  # noqa: E731
    traced = torch.jit.trace(put, (torch.ones(3), torch.tensor([0, 1, 2])))
    assert "rearr::check_unique" in str(traced.graph)
    with pytest.raises(RuntimeError, match="RA501: index 'idx' writes the same position more than once"):
        traced(torch.ones(3), torch.tensor([0, 3, -1]))


# --- check_bounds=False keeps torch's other errors ---------------


def test_unchecked_index_faults_are_ra501_and_other_errors_are_not_disguised():
    x = torch.randn(3, 5)
    with pytest.raises(RearrError, match="RA501"):
        rearr.rearrange(x, "b n[idx] -> b", idx=torch.tensor([0, 9, 1]), check_bounds=False)
    with pytest.raises(RearrError, match="RA501"):
        rearr.scatter(torch.randn(3), "k -> n[idx]", "sum", idx=torch.tensor([0, 9, 1]), n=4, check_bounds=False)
    # A failure that is not an index fault keeps torch's own error: here a failed allocation (4 TiB).
    with pytest.raises(RuntimeError, match="allocate") as caught:
        rearr.scatter(torch.randn(3), "k -> n[idx]", "sum", idx=torch.tensor([0, 1, 1]), n=2**40, check_bounds=False)
    assert not isinstance(caught.value, RearrError)


# --- reduce with an unhashable callable ----------------------


class _UnhashableSum:
    __hash__ = None  # type: ignore[assignment]

    def __call__(self, x, axes):
        return x.sum(axes)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_reduce_accepts_an_unhashable_callable(lib):
    np = pytest.importorskip("numpy")
    x = np.arange(24.0).reshape(2, 3, 4)
    x = torch.from_numpy(x) if lib == "torch" else x
    out = rearr.reduce(x, "a b c -> a c", _UnhashableSum())
    expected = x.sum(1)
    assert out.shape == expected.shape and (out == expected).all()


# --- registration: any order of imports and first calls ---------------------------

ORDERS = {
    # torch's backend loaded by an eager call before torch._dynamo exists: the import hook registers
    "eager call first": "import rearr, torch\nrearr.rearrange(torch.zeros(2, 3), 'a b -> b a')\n"
                        "assert 'torch._dynamo' not in sys.modules",
    # dynamo loaded before rearr: registered at import
    "dynamo first": "import torch, torch._dynamo, rearr",
}


def _fresh_python(code: str) -> str:
    """The last word code prints, run in a fresh interpreter on this checkout (nothing imported yet)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.split()[-1]


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.slow
def test_registration_does_not_depend_on_the_order_of_imports(order):
    code = "import sys\n" + ORDERS[order] + """
from torch._dynamo.testing import CompileCounter
counter = CompileCounter()
f = lambda x: rearr.reduce(rearr.rearrange(x, "b (h w) -> b h w", h=2), "b h w -> b w", "sum")
g = torch.compile(f, backend=counter, fullgraph=True)
for b in (2, 3, 5):
    x = torch.randn(b, 6)
    torch._dynamo.mark_dynamic(x, 0)
    assert torch.equal(g(x), f(x))
print(counter.frame_count)
"""
    assert _fresh_python(code) == "1"


@pytest.mark.slow
def test_a_plain_first_call_loads_no_indexing_piece_and_an_indexed_one_loads_them():
    code = """import sys, torch, rearr
ops, autograd, scatters = "rearr.backends._torch_ops", "rearr.backends._torch_autograd", "rearr.backends._torch_scatter"
rearr.rearrange(torch.zeros(2, 3), "a b -> b a")
rearr.reduce(torch.zeros(2, 3), "a b -> a", "sum")
assert ops not in sys.modules and autograd not in sys.modules and scatters not in sys.modules
assert "rearr.backends.numpy" not in sys.modules  # a torch tensor is offered to torch's backends first
x = torch.arange(6.0).reshape(2, 3)
assert rearr.rearrange(x, "a n[idx] -> a", idx=torch.tensor([2, 0])).tolist() == [2.0, 3.0]
assert ops in sys.modules  # the gather's check
src = torch.ones(2, 3, requires_grad=True)
rearr.scatter(src, "r c -> r m[idx: c]", "max", idx=torch.tensor([0, 1, 1]), m=2).sum().backward()
assert src.grad.tolist() == [[1.0, 0.5, 0.5], [1.0, 0.5, 0.5]], src.grad  # max's autograd function: ties share
assert autograd in sys.modules and scatters in sys.modules
print("ok")
"""
    assert _fresh_python(code) == "ok"


@pytest.mark.slow
def test_dynamic_shapes_through_list_input_pack_parse_shape_and_two_indices():
    cases = [
        (lambda x, y: rearr.rearrange([x, y], "s b c -> b (s c)"), lambda n: (torch.randn(n, 3), torch.randn(n, 3))),
        (lambda x, y: rearr.pack([x, y], "b *")[0], lambda n: (torch.randn(n, 3, 2), torch.randn(n, 4))),
        (lambda x: x.reshape(rearr.parse_shape(x, "b _")["b"], -1), lambda n: (torch.randn(n, 3),)),
        (lambda img, y, x: rearr.rearrange(img, "b h[y: b p] w[x: b p] c -> b p c", y=y, x=x),
         lambda n: (torch.randn(n, 5, 6, 3), torch.randint(0, 5, (n, 4)), torch.randint(-6, 6, (n, 4)))),
    ]
    for f, make in cases:
        torch._dynamo.reset()
        dims = [(k, 0) for k in range(len(make(2)))]
        assert _frames(f, make, (2, 3, 5), dims) == 1


def test_only_index_faults_count_as_index_faults():
    from rearr.backends import backend_for

    _index_fault = backend_for(torch.zeros(1)).index_fault  # the backend's hook: what its kernels raise
    assert _index_fault(IndexError("index out of range in self"))
    assert _index_fault(RuntimeError("index 9 is out of bounds for dimension 0 with size 4"))
    assert not _index_fault(RuntimeError("\"scatter_add_cpu\" not implemented for 'ComplexHalf'"))
    assert not _index_fault(RuntimeError("DefaultCPUAllocator: can't allocate memory"))


# --- the layers ----------------------------------------------------------------------------


def _layer_cases():
    from rearr.layers import EinMix, Gather, Rearrange, Reduce, Repeat, Scatter

    def idx(n, *shape):
        return lambda b: torch.randint(0, n, (b, *shape))

    return [
        (Rearrange("b (t c) -> b t c", c=4), lambda b: {}, (12,)),
        (Reduce("b t c -> b c", "mean"), lambda b: {}, (3, 4)),
        (Repeat("b c -> b c r", r=2), lambda b: {}, (4,)),
        (EinMix("b (h w) c -> b (h w) d", "(h w) c d", "d", h=2, w=3, c=4, d=5), lambda b: {}, (6, 4)),
        (Gather("b n[i: b k] c -> b k c"), lambda b: {"i": idx(6, 2)(b)}, (6, 4)),
        (Scatter("b k c -> b n[i: b k] c", "sum", n=6), lambda b: {"i": idx(6, 3)(b)}, (3, 4)),
    ]


@on_test_device
@pytest.mark.parametrize("case", range(6))
def test_every_layer_compiles_without_a_break_once_for_every_batch(case):
    """Each rearr.layers module: no graph break, compiled == eager (values and gradients), and one frame
    for batch sizes 2, 3, 5, 8 with the batch axis marked dynamic."""
    layer, indices, rest = _layer_cases()[case]
    torch.manual_seed(0)
    x = torch.randn(2, *rest)
    torch._dynamo.reset()
    assert torch._dynamo.explain(layer)(x, **indices(2)).graph_break_count == 0
    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(layer, backend=counter, fullgraph=True)
    for b in (2, 3, 5, 8):
        x = torch.randn(b, *rest, requires_grad=True)
        kw = indices(b)
        if b == 2:
            torch._dynamo.mark_dynamic(x, 0)
            for t in kw.values():
                torch._dynamo.mark_dynamic(t, 0)
        got, want = compiled(x, **kw), layer(x, **kw)
        torch.testing.assert_close(got, want)
        (g_got,) = torch.autograd.grad(got.sum(), x)
        (g_want,) = torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(g_got, g_want)
    assert counter.frame_count == 1


# --- calls that once raised a foreign error under compile (none returned a wrong value) ----------------
# Each test states the promise of docs/torch_compile.md that it checks. backend="eager" keeps them fast:
# the failures happened while dynamo ran rearr on fake tensors, before any backend.


def test_scatter_layer_with_a_fill_compiles_under_dynamic_shapes():
    # dynamo turns the layer's float attribute into a SymFloat under dynamic=True; rearr refuses it
    # (RA500 "fill= must be a number, not SymFloat"), and the call fails even without fullgraph.
    torch._dynamo.reset()
    layer = rearr.layers.Scatter("v[src: e] c -> v[dst: e] c", "sum", fill=1.5)
    x, src, dst = torch.randn(5, 2), torch.tensor([0, 1, 2]), torch.tensor([0, 4, 4])
    compiled = torch.compile(lambda x, s, d: layer(x, src=s, dst=d), backend="eager", dynamic=True)
    assert torch.equal(compiled(x, src, dst), layer(x, src=src, dst=dst))


def test_scatter_fill_passed_as_an_argument_compiles_under_dynamic_shapes():
    # an int argument of the compiled function is a SymInt under dynamic=True: refused the same way
    torch._dynamo.reset()

    def f(x, d, fill):
        return rearr.scatter(x, "b k -> b n[d: b k]", "max", d=d, n=6, fill=fill)

    compiled = torch.compile(f, backend="eager", dynamic=True)
    x, d = torch.randn(2, 3), torch.tensor([[0, 1, 1], [2, 2, 3]])
    for fill in (0, 3):
        assert torch.equal(compiled(x, d, fill), f(x, d, fill))


@pytest.mark.parametrize("dynamic", [True, None])
def test_pack_then_unpack_compiles_once_the_packed_shapes_are_symbolic(dynamic):
    # pack returns SymInt shapes for dynamic axes; unpack refuses them: RA305 "packed shape 0 is (s27,):
    # s27 is not a length". With dynamic=None it fails on the second shape (automatic dynamic).
    torch._dynamo.reset()

    def f(x, y):
        packed, shapes = rearr.pack([x, y], "b *")
        return rearr.unpack(packed * 2, shapes, "b *")

    compiled = torch.compile(f, backend="eager", dynamic=dynamic)
    for b, c, d, e in [(2, 3, 4, 5), (3, 4, 2, 2)]:
        x, y = torch.randn(b, c), torch.randn(b, d, e)
        for got, want in zip(compiled(x, y), f(x, y)):
            assert torch.equal(got, want)


@pytest.mark.parametrize("case", ["scatter_sum_over_1024", "message_passing_over_rows_threshold"])
def test_a_dynamic_axis_crossing_a_lowering_threshold_does_not_recompile(case):
    # docs: "No recompile for a dynamic axis ... so does the edge axis of a message-passing scatter".
    # The planner evaluates `prod(shape) <= _SMALL_ZEROS` (a branch fake tensors never take) and
    # `>= ROWS_MIN_ELEMENTS` on SymInts, which installs guards: a second frame past each threshold.
    torch._dynamo.reset()
    counter = CompileCounter()
    if case == "scatter_sum_over_1024":
        def f(x, d):
            return rearr.scatter(x, "b k -> b n[d: b k]", "sum", d=d, n=x.shape[1])
        calls = [(torch.randn(b, 8), torch.randint(0, 8, (b, 8))) for b in (2, 3, 200)]
    else:
        def f(x, s, d):
            return rearr.scatter(x, "v[s: e] c -> v[d: e] c", "sum", s=s, d=d)
        calls = [(torch.randn(50, 64), torch.randint(0, 50, (e,)), torch.randint(0, 50, (e,))) for e in (2, 3, 600)]
    compiled = torch.compile(f, backend=counter, fullgraph=True)
    for args in calls:
        for t in args[1:] if case != "scatter_sum_over_1024" else args:
            torch._dynamo.mark_dynamic(t, 0)
        assert torch.allclose(compiled(*args), f(*args))
    assert counter.frame_count == 1


@pytest.mark.parametrize("reduction", ["mean", "max", "min", "prod"])
def test_vmap_over_the_index_alone_of_a_scatter(reduction):
    # docs: vmap works over scatters. With only the index batched, rearr's fresh output (x.new_full, unbatched)
    # is written in place with batched values: "vmap: scatter_reduce_(self, *extra_args) is not possible".
    x = torch.randn(2, 3)
    d = torch.stack([torch.randint(0, 6, (2, 3)) for _ in range(4)])

    def f(d):
        return rearr.scatter(x, "b k -> b n[d: b k]", reduction, d=d, n=6)

    assert torch.allclose(torch.func.vmap(f)(d), torch.stack([f(i) for i in d]))


def test_a_symbolic_float_length_is_refused_as_a_float_is():
    """A SymFloat is a number for fill= (above), never a length: h=x.shape[1] / 2 is RA305, as h=2.0 is."""
    def f(x):
        return rearr.rearrange(x, "b (h w) -> b h w", h=x.shape[1] / 2)

    with pytest.raises(RearrError, match="RA305"):
        f(torch.zeros(2, 4))
    with pytest.raises(Exception, match="RA305"):  # dynamo wraps rearr's error in its own
        torch.compile(f, backend="eager", dynamic=True, fullgraph=True)(torch.zeros(2, 4))


@pytest.mark.slow
def test_a_first_scatter_inside_torch_compile_loads_its_pieces_and_compiles_one_frame():
    """The scatters' decision tree and the checks are imported on the first indexed call: here that call
    is being compiled (fullgraph), in a fresh interpreter."""
    code = """import torch, rearr
from torch._dynamo.testing import CompileCounter
counter = CompileCounter()
f = lambda x, i: rearr.scatter(x, "k c -> n[idx: k] c", "sum", idx=i, n=4)
g = torch.compile(f, backend=counter, fullgraph=True)
x, i = torch.randn(3, 2), torch.tensor([0, 3, 3])
assert torch.equal(g(x, i), f(x, i))
try:
    g(x, torch.tensor([0, 4, 1]))
except rearr.RearrError as e:
    assert e.code == "RA501", e
else:
    raise AssertionError("no RA501")
print(counter.frame_count)
"""
    assert _fresh_python(code) == "1"
