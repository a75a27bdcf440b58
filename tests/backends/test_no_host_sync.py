"""The device-side index checks read nothing back to the host (check_bounds="async"; the default on CUDA).

Every indexed step kind (TakeRows, GatherAlong, AdvancedIndex; ScatterRows and ScatterAlong under every
reduction, 'set' included; message passing), with negative values, converted indices, ``into=`` and
``fill=``, runs under `HostReads`, a dispatch mode that records each read of values by the host, and
none may happen; the results equal the exact check's. A bad index still fails loudly: too large, too
negative, a duplicate under 'set'. Under torch.compile the path compiles without a graph break, as plain
ops of the graph (no custom op, no data-dependent op), which is what CUDA graph capture needs.

REARR_TEST_DEVICE=cuda (benchmarks/bench_gpu.py) runs the same tests on a GPU, where the default
check_bounds=True takes the device-side path too; a failed device assertion poisons the CUDA context,
so there the failures are checked in a subprocess.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import strategies  # noqa: E402
from _planner import rows_lowering_always  # noqa: E402
from conftest import TEST_DEVICE  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

import rearr  # noqa: E402
from rearr import RearrError  # noqa: E402
from rearr.planning import planner  # noqa: E402
from rearr.rules import recipe  # noqa: E402

pytestmark = pytest.mark.usefixtures("on_test_device")

ON_CPU = TEST_DEVICE == "cpu"
# The modes that must not read: "async" on any device, and the default on CUDA.
NO_SYNC_MODES = ["async"] if ON_CPU else ["async", True]

# Ops that read values on the host, or whose output's shape depends on the values (torch tags those):
# each stalls a GPU stream and breaks CUDA graph capture.
_HOST_READS = {"_local_scalar_dense", "item", "is_nonzero", "equal", "allclose", "nonzero", "argwhere",
               "masked_select", "bincount", "unique_consecutive", "_unique", "_unique2", "unique_dim",
               "repeat_interleave"}
_DATA_DEPENDENT = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)
# Tensor methods that read values without an op that dispatches (on the CPU): patched while recording.
_PYTHON_READS = ("tolist", "numpy", "__array__")


def _reads_values(func, args) -> bool:
    """Whether the op reads values on the host or makes a shape of them. x[i, j] (aten.index) is tagged
    so for its mask indices, which it turns into positions by nonzero; integer indices need no read."""
    if func.overloadpacket.__name__ == "index":
        return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in args[1])
    return func.overloadpacket.__name__ in _HOST_READS or any(t in func.tags for t in _DATA_DEPENDENT)


class HostReads(TorchDispatchMode):
    """Records every op that reads values on the host or copies a tensor off a device to the CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _reads_values(func, args):
            self.reads.append(str(func))
        out = func(*args, **(kwargs or {}))
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if any(not t.is_cpu for t in inputs) and any(
                isinstance(t, torch.Tensor) and t.is_cpu for t in tree_leaves(out)):
            self.reads.append(f"{func} to the host")
        return out


@contextlib.contextmanager
def recording():
    """The list of host reads made inside the block (dispatched ops, and tolist / numpy / __array__)."""
    mode = HostReads()
    originals = {name: getattr(torch.Tensor, name) for name in _PYTHON_READS}

    def reader(name):
        def read(self, *args, **kwargs):
            mode.reads.append(f"Tensor.{name}")
            return originals[name](self, *args, **kwargs)
        return read

    for name in _PYTHON_READS:
        setattr(torch.Tensor, name, reader(name))
    try:
        with mode:
            yield mode.reads
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)


def t(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def step_kinds(op, text, x, reduction=None, /, **keywords):
    """The plan's step classes, so that each case names the step kind it covers."""
    r = recipe.analyze(text, op, reduction, tuple(sorted(keywords)))
    shapes = tuple((k, tuple(v.shape)) for k, v in keywords.items() if isinstance(v, torch.Tensor))
    lengths = tuple((k, v) for k, v in keywords.items() if isinstance(v, int))
    return {type(s).__name__ for s in planner.plan(r, tuple(x.shape), lengths, shapes).steps}


# --- the cases: name -> (kind, pattern, x, keywords); made inside the test, on the test's device ---------

def _gathers():
    return {
        "TakeRows": ("TakeRows", "v[ids: b t] d -> b t d", torch.randn(10, 3),
                     {"ids": t([[0, 9, -1, 3], [-10, 2, 2, 5]])}),
        "GatherAlong": ("GatherAlong", "b n[idx: b k] c -> b k c", torch.randn(2, 5, 3),
                        {"idx": t([[0, 4, -1, 2], [-5, 1, 1, 3]])}),
        "GatherAlong int32": ("GatherAlong", "b n[idx: b k] c -> b k c", torch.randn(2, 5, 3),
                              {"idx": t([[0, 4, -1, 2], [-5, 1, 1, 3]], torch.int32)}),
        "GatherAlong uint64": ("GatherAlong", "b n[idx: b k] c -> b k c", torch.randn(2, 5, 3),
                               {"idx": t([[0, 4, 1, 2], [0, 1, 1, 3]], torch.uint64)}),
        "GatherAlong list": ("GatherAlong", "b n[idx] -> b", torch.randn(3, 4), {"idx": [3, -1, 0]}),
        "AdvancedIndex": ("AdvancedIndex", "b h[y: p] w[xx: p] c -> b p c", torch.randn(2, 4, 5, 3),
                          {"y": t([0, 3, -1, 2, -4, 1]), "xx": t([4, 0, -5, 2, 1, -1])}),
        "AdvancedIndex 0-d": ("AdvancedIndex", "b h[y:] w[xx:] c -> b c", torch.randn(2, 4, 5, 3),
                              {"y": t(-1), "xx": t(3)}),
    }


REDUCTIONS = ("sum", "mean", "max", "min", "prod", "set")


def _scatters(reduction):
    """Each scatter kind; under 'set' the written positions are distinct once negatives are counted."""
    unique = reduction == "set"
    rows_y = t([[0, 0, 1, -1, 2, 3], [3, -4, 0, 1, 1, 2]])
    rows_x = t([[0, 1, -5, 4, 2, 2], [0, 1, -1, 3, 4, 4]]) if unique else t([[0, 0, -5, 4, 2, 2], [0, 0, -1, 3, 4, 4]])
    along = t([[0, 9, -2, 3], [-10, 1, 5, 7]]) if unique else t([[0, 9, -1, 9], [-10, 0, 5, 5]])
    dst = t([1, 0, -1, 2, 3]) if unique else t([1, 1, -6, 2, 3])
    return {
        "ScatterRows": ("ScatterRows", "b p c -> b h[y: b p] w[x: b p] c", torch.randn(2, 6, 3),
                        {"y": rows_y, "x": rows_x, "h": 4, "w": 5}, (2, 4, 5, 3)),
        "ScatterAlong": ("ScatterAlong", "b k -> b n[idx]", torch.randn(2, 4), {"idx": along, "n": 10}, (2, 10)),
        "message passing": ("ScatterAlong", "v[src: e] c -> v[dst: e] c", torch.randn(6, 3),
                            {"src": t([0, 1, -1, 3, 5]), "dst": dst}, (6, 3)),
    }


def _same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype and got.device == want.device
    torch.testing.assert_close(got, want, equal_nan=True)


def _no_reads(f):
    """f() twice (planned, then from the plan tables) with no host read; its last result."""
    for _ in range(2):
        with recording() as reads:
            out = f()
        assert reads == [], reads
    return out


@pytest.mark.parametrize("mode", NO_SYNC_MODES)
@pytest.mark.parametrize("name", sorted(_gathers()))
def test_gathers_read_nothing_on_the_host(name, mode):
    kind, pattern, x, kw = _gathers()[name]
    assert kind in step_kinds("rearrange", pattern, x, **{k: t(v) if isinstance(v, list) else v for k, v in kw.items()})
    got = _no_reads(lambda: rearr.rearrange(x, pattern, check_bounds=mode, **kw))
    _same(got, rearr.rearrange(x, pattern, check_bounds="sync", **kw))


@pytest.mark.parametrize("mode", NO_SYNC_MODES)
@pytest.mark.parametrize("variant", ["plain", "fill", "into"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["ScatterRows", "ScatterAlong", "message passing"])
def test_scatters_read_nothing_on_the_host(name, reduction, variant, mode):
    kind, pattern, x, kw, out_shape = _scatters(reduction)[name]
    assert kind in step_kinds("scatter", pattern, x, reduction, **kw)
    extra = {"fill": {"fill": -1.5}, "into": {"into": torch.randn(out_shape)}, "plain": {}}[variant]
    got = _no_reads(lambda: rearr.scatter(x, pattern, reduction, check_bounds=mode, **extra, **kw))
    _same(got, rearr.scatter(x, pattern, reduction, check_bounds="sync", **extra, **kw))


def test_the_recorder_sees_the_exact_checks_reads():
    """The exact check ("sync") reads the values: the recorder must see that, or the tests above prove nothing."""
    kind, pattern, x, kw = _gathers()["TakeRows"]
    with recording() as reads:
        rearr.rearrange(x, pattern, check_bounds="sync", **kw)
    assert reads  # its min and max: two .item() on the CPU, one tolist off it
    with recording() as reads:
        x.tolist()
        bool(x[0, 0] > 0)
        x.nonzero()
    assert reads[0] == "Tensor.tolist" and "aten.nonzero.default" in reads and len(reads) >= 3


def test_check_bounds_false_reads_nothing_either():
    kind, pattern, x, kw = _gathers()["GatherAlong"]
    kw = {"idx": kw["idx"].remainder(5)}  # False promises 0 <= i < n
    _no_reads(lambda: rearr.rearrange(x, pattern, check_bounds=False, **kw))


# --- a bad index still fails loudly ----------------------------------------------------------------------

cpu_only = pytest.mark.skipif(not ON_CPU, reason="a failed device assertion poisons the CUDA context: "
                              "test_a_bad_index_fails_on_the_device checks it in a subprocess")

BAD_GATHERS = [  # (case, index name, a bad value at [0, 1] / [1]: too large, too negative)
    ("TakeRows", "ids", 10), ("TakeRows", "ids", -11),
    ("GatherAlong", "idx", 5), ("GatherAlong", "idx", -6),
    ("AdvancedIndex", "xx", 5), ("AdvancedIndex", "y", -5),
]


def _with_bad_value(index, value):
    bad = index.clone()
    bad.view(-1)[1] = value
    return bad


@cpu_only
@pytest.mark.parametrize(("name", "index", "value"), BAD_GATHERS)
def test_an_out_of_range_gather_index_fails_under_async(name, index, value):
    _, pattern, x, kw = _gathers()[name]
    kw[index] = _with_bad_value(kw[index], value)
    with pytest.raises(RuntimeError, match=f"RA501: index '{index}' holds a value outside axis") as caught:
        rearr.rearrange(x, pattern, check_bounds="async", **kw)
    assert "check_bounds='sync' names the value" in str(caught.value)
    with pytest.raises(RearrError, match=f"holds {value} at position") as exact:  # the default, and "sync"
        rearr.rearrange(x, pattern, **kw)
    assert exact.value.col is not None  # the caret under the bracket
    with pytest.raises(RearrError, match=f"holds {value} at position"):
        rearr.rearrange(x, pattern, check_bounds="sync", **kw)


@cpu_only
@pytest.mark.parametrize("reduction", ["sum", "mean", "set"])
@pytest.mark.parametrize(("name", "index", "value"), [("ScatterRows", "y", 4), ("ScatterRows", "x", -6),
                                                      ("ScatterAlong", "idx", 10), ("ScatterAlong", "idx", -11),
                                                      ("message passing", "src", 6),
                                                      ("message passing", "dst", -7)])
def test_an_out_of_range_scatter_index_fails_under_async(name, index, value, reduction):
    _, pattern, x, kw, _ = _scatters(reduction)[name]
    kw[index] = _with_bad_value(kw[index], value)
    with pytest.raises(RuntimeError, match=f"RA501: index '{index}' holds a value outside axis"):
        rearr.scatter(x, pattern, reduction, check_bounds="async", **kw)
    with pytest.raises(RearrError, match=f"holds {value} at position"):
        rearr.scatter(x, pattern, reduction, **kw)


@cpu_only
@pytest.mark.parametrize("name", ["ScatterRows", "ScatterAlong", "message passing"])
def test_a_duplicate_under_set_fails_under_async(name):
    _, pattern, x, kw, _ = _scatters("sum")[name]  # the 'sum' cases write some position twice
    with pytest.raises(RuntimeError, match="RA501: index .* writes the same position more than once"):
        rearr.scatter(x, pattern, "set", check_bounds="async", **kw)
    with pytest.raises(RearrError, match="more than once"):
        rearr.scatter(x, pattern, "set", **kw)


@cpu_only
def test_a_duplicate_only_once_negatives_count_from_the_end_fails_under_async():
    with pytest.raises(RuntimeError, match="more than once"):
        rearr.scatter(torch.ones(2), "k -> n[idx]", "set", idx=t([9, -1]), n=10, check_bounds="async")


@cpu_only
def test_a_list_input_keeps_the_device_side_failure():
    """scatter's handler of a torch failure asked the backend of the list itself, which has none: RA500
    'rearr does not accept list objects' hid the failed assertion."""
    with pytest.raises(RuntimeError, match="RA501: index 'pos' holds a value outside axis 'h'"):
        rearr.scatter([torch.tensor(1.0)], "a -> h[pos: a]", "sum", h=1, pos=t([1]), check_bounds="async")


@cpu_only
def test_a_uint64_value_beyond_int64_fails_under_async():
    idx = torch.tensor([0, 2**63, 1], dtype=torch.uint64)
    with pytest.raises(RuntimeError, match=r"holds a value of 2\*\*63 or more"):
        rearr.rearrange(torch.randn(3, 4), "b n[idx] -> b", idx=idx, check_bounds="async")
    with pytest.raises(RearrError, match=str(2**63)):
        rearr.rearrange(torch.randn(3, 4), "b n[idx] -> b", idx=idx)


@cpu_only
def test_vmap_keeps_the_device_side_checks():
    x, i = torch.randn(4, 5, 2), torch.randint(-5, 5, (4, 3))
    gather = torch.func.vmap(lambda a, b: rearr.rearrange(a, "n[idx: k] c -> k c", idx=b, check_bounds="async"))
    torch.testing.assert_close(gather(x, i), torch.func.vmap(lambda a, b: rearr.rearrange(
        a, "n[idx: k] c -> k c", idx=b))(x, i))
    i[2, 1] = 7
    with pytest.raises(RuntimeError, match="RA501: index 'idx' holds a value outside"):
        gather(x, i)
    put = torch.func.vmap(lambda a, b: rearr.scatter(a, "k c -> n[idx: k] c", "set", idx=b, n=5,
                                                     check_bounds="async"))
    s, j = torch.randn(4, 3, 2), torch.stack([torch.randperm(5)[:3] for _ in range(4)])
    put(s, j)
    j[1] = t([0, 4, 0])
    with pytest.raises(RuntimeError, match="more than once"):
        put(s, j)


_ON_DEVICE = """
import sys, torch, rearr
x = torch.randn(3, 5, device="{device}")
idx = torch.tensor([0, {value}, 1], device="{device}")
try:
    y = rearr.{call}
    torch.cuda.synchronize() if x.is_cuda else None
    print("NO ERROR", y)
except RuntimeError as e:
    print("RAISED", str(e)[:400])
"""


@pytest.mark.skipif(ON_CPU, reason="an accelerator's device-side assertion (REARR_TEST_DEVICE)")
@pytest.mark.parametrize(("value", "call"), [
    (5, "rearrange(x, 'b n[idx] -> b', idx=idx)"), (-6, "rearrange(x, 'b n[idx] -> b', idx=idx)"),
    (1, "scatter(x, 'b n -> b m[idx: n]', 'set', idx=idx.repeat(2)[:5], m=5)"),
])
def test_a_bad_index_fails_on_the_device(value, call):
    code = _ON_DEVICE.format(device=TEST_DEVICE, value=value, call=call)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert "RAISED" in run.stdout, run.stdout + run.stderr[-2000:]


def test_async_is_refused_where_torch_has_no_device_assertion():
    from types import SimpleNamespace

    from rearr.backends import _torch_ops

    for kind in ("cpu", "cuda", "meta"):
        _torch_ops.can_assert(SimpleNamespace(device=torch.device(kind)))
    with pytest.raises(RearrError, match="RA500: check_bounds='async' needs torch._assert_async") as caught:
        _torch_ops.can_assert(SimpleNamespace(device=torch.device("mps")))
    assert "check_bounds='sync'" in caught.value.hint
    assert not _torch_ops.on_device(SimpleNamespace(is_cuda=False), True)  # mps, xpu: the exact check by default


def _call(case, mode):
    """The case through rearr on torch with check_bounds=mode: its result, or the error it raised."""
    x, kw = case.inputs("torch")
    try:
        if case.op == "scatter":
            return rearr.scatter(x, case.pattern, case.reduction, check_bounds=mode, **kw)
        return rearr.rearrange(x, case.pattern, check_bounds=mode, **kw)
    except RuntimeError as e:  # RearrError is one too
        return e


def _reads_nothing_and_agrees(case):
    """check_bounds="async" on the case: no host read, and the exact check's result, or a failure where
    the exact check fails."""
    exact = _call(case, "sync")
    if isinstance(exact, RearrError):
        got = _call(case, "async")
        assert isinstance(got, RuntimeError), case.describe()
        assert "RA501" in str(got) if exact.code == "RA501" else isinstance(got, RearrError) and \
            got.code == exact.code, (case.describe(), exact, got)
        return
    with recording() as reads:
        got = _call(case, "async")
    assert reads == [], (case.describe(), reads)
    assert not isinstance(got, Exception), (case.describe(), got)
    _same(got, exact)


@cpu_only
@given(st.one_of(strategies.gather_cases(), strategies.scatter_cases()))
def test_random_gathers_and_scatters_read_nothing_and_agree(case):
    """The strategies' random bracket patterns (default and declared axes, both sides at once, into=,
    fill=, negative values, duplicates, now and then a value out of range)."""
    _reads_nothing_and_agrees(case)


@cpu_only
@given(st.one_of(strategies.gather_cases(), strategies.scatter_cases()))
def test_random_gathers_and_scatters_read_nothing_with_the_row_lowering(case):
    """The same, with the row lowering (index_select / index_add over flat rows) at every size."""
    with rows_lowering_always():
        _reads_nothing_and_agrees(case)


# --- check_bounds= takes four values --------------------------------------------------------------------

@pytest.mark.parametrize("value", ["bogus", "SYNC", 1, 0, None, np.True_])
def test_check_bounds_refuses_anything_but_its_modes(value):
    x, i = torch.randn(3, 4), t([0, 1, 2])
    for call in (lambda v: rearr.rearrange(x, "b n[idx] -> b", idx=i, check_bounds=v),
                 lambda v: rearr.rearrange(x, "b n -> n b", check_bounds=v),  # no index: still refused
                 lambda v: rearr.scatter(x, "b n -> m[idx: b] n", "sum", idx=i, m=3, check_bounds=v)):
        call(True)  # the plan is in the tables: the fast paths must refuse the value too
        with pytest.raises(RearrError, match="RA500") as caught:
            call(value)
        assert "is not a checking mode" in caught.value.message and "check_bounds=True" in caught.value.hint


def test_the_layers_take_check_bounds():
    from rearr.layers import Gather, Scatter

    x = torch.randn(3, 4)
    gather = Gather("b n[idx] -> b", check_bounds="async")
    torch.testing.assert_close(gather(x, idx=t([0, -1, 2])), x[[0, 1, 2], [0, 3, 2]])
    scatter = Scatter("b n -> m[idx: b] n", "sum", m=3, check_bounds="sync")
    torch.testing.assert_close(scatter(x, idx=t([2, 0, 0])), rearr.scatter(x, "b n -> m[idx: b] n", "sum",
                                                                            idx=t([2, 0, 0]), m=3))
    assert "check_bounds='async'" in repr(gather)
    import pickle

    assert pickle.loads(pickle.dumps(gather)).check_bounds == "async"
    old = pickle.loads(pickle.dumps(Gather("b n[idx] -> b")))
    del old.__dict__["check_bounds"]  # a layer pickled before the option existed: the class's default
    torch.testing.assert_close(old(x, idx=t([0, -1, 2])), gather(x, idx=t([0, -1, 2])))
    with pytest.raises(RearrError, match="RA500.*not a checking mode"):
        Gather("b n[idx] -> b", check_bounds="maybe")


def test_rearr_check_refuses_a_literal_that_is_not_a_mode():
    from rearr.tools import lint

    source = ("import rearr\nfrom rearr.layers import Gather, Scatter\n"
              "rearr.rearrange(x, 'b n[idx] -> b', idx=i, check_bounds='yes')\n"
              "rearr.scatter(x, 'k -> n[idx]', 'set', idx=i, n=4, check_bounds='async')\n"
              "Gather('b n[idx] -> b', check_bounds=1)\n"
              "Scatter('k -> n[idx]', 'sum', n=4, check_bounds=False)\n")
    found = [(p.line, p.col, p.code) for p in lint.check_source(source, "t.py")]
    assert found == [(3, 57, "RA500"), (5, 38, "RA500")]  # the caret under the value


# --- torch.compile: no graph break, and only plain ops in the graph ---------------------------------------

def _gather(x, i):
    return rearr.rearrange(x, "b n[idx: b k] c -> b k c", idx=i, check_bounds=COMPILE_MODE)


def _scatter_set(x, i):
    return rearr.scatter(x, "k c -> n[idx: k] c", "set", idx=i, n=5, check_bounds=COMPILE_MODE)


def _message_passing(x, s, d):
    return rearr.scatter(x, "v[src: e] c -> v[dst: e] c", "mean", src=s, dst=d, check_bounds=COMPILE_MODE)


COMPILE_MODE = "async" if ON_CPU else True
COMPILED = {
    "gather": (_gather, lambda: (torch.randn(3, 5, 2), t([[0, 4], [1, -1], [2, 2]]))),
    "scatter set": (_scatter_set, lambda: (torch.randn(3, 2), t([4, 0, -2]))),
    "message passing": (_message_passing, lambda: (torch.randn(4, 3), t([0, 1, 2, 3, -1]), t([1, 1, 0, 2, -1]))),
}


@pytest.fixture
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _graph_ops(f, args) -> list[str]:
    """The ops of the forward graph that AOT autograd records for f (what inductor would compile)."""
    from torch._dynamo.backends.common import aot_autograd

    ops: list[str] = []

    def compiler(gm, example_inputs):
        ops.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")  # aten.x.overload
        return gm

    torch.compile(f, backend=aot_autograd(fw_compiler=compiler), fullgraph=True)(*args)
    return ops


@pytest.mark.slow
@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.parametrize("name", sorted(COMPILED))
def test_the_device_side_checks_compile_to_plain_ops_without_a_graph_break(name):
    f, make = COMPILED[name]
    args = make()
    explained = torch._dynamo.explain(f)(*args)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        _same(torch.compile(f, backend=backend, fullgraph=True)(*args), f(*args))
    torch._dynamo.reset()
    ops = _graph_ops(f, args)
    assert any("assert_async" in op for op in ops), ops
    assert not any("rearr." in op for op in ops), ops  # not the exact checks' custom ops
    assert not [op for op in ops if op.startswith("aten.") and op.split(".")[1] in _HOST_READS], ops


@cpu_only
@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_a_bad_index_fails_in_the_compiled_device_side_checks(backend):
    gather = torch.compile(_gather, backend=backend, fullgraph=True)
    x = torch.randn(3, 5, 2)
    _same(gather(x, t([[0, 4], [1, -1], [2, 2]])), _gather(x, t([[0, 4], [1, -1], [2, 2]])))
    for bad in (t([[0, 4], [1, 5], [2, 2]]), t([[0, -6], [1, 1], [2, 2]])):
        with pytest.raises(RuntimeError, match="RA501: index 'idx' holds a value outside"):
            gather(x, bad)
    put = torch.compile(_scatter_set, backend=backend, fullgraph=True)
    put(torch.randn(3, 2), t([4, 0, -2]))
    with pytest.raises(RuntimeError, match="more than once"):
        put(torch.randn(3, 2), t([4, 0, -1]))


@pytest.mark.usefixtures("_fresh_dynamo")
def test_a_dynamic_batch_under_the_device_side_checks_compiles_one_frame():
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    g = torch.compile(_message_passing, backend=counter, fullgraph=True)
    for e in (2, 3, 5, 8):
        args = (torch.randn(6, 3), torch.randint(0, 6, (e,)), torch.randint(-6, 6, (e,)))
        torch._dynamo.mark_dynamic(args[1], 0)
        torch._dynamo.mark_dynamic(args[2], 0)
        _same(g(*args), _message_passing(*args))
    assert counter.frame_count == 1


@pytest.mark.usefixtures("_fresh_dynamo")
@pytest.mark.parametrize("reduction", ["sum", "mean", "max", "set"])
def test_gradients_under_the_device_side_checks_equal_the_exact_checks(reduction):
    def f(x, s, d, mode):
        return rearr.scatter(x, "v[src: e] c -> v[dst: e] c", reduction, src=s, dst=d, check_bounds=mode)

    _, _, x, kw, _ = _scatters(reduction)["message passing"]
    weights = torch.arange(18.0).reshape(6, 3)
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    grads = []
    for g, mode in ((f, "sync"), (f, COMPILE_MODE), (compiled, COMPILE_MODE)):
        x_ = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad((g(x_, kw["src"], kw["dst"], mode) * weights).sum(), x_)
        grads.append(grad)
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(grads[2], grads[0])


@cpu_only
@pytest.mark.usefixtures("_fresh_dynamo")
def test_a_dynamic_axis_length_is_named_not_printed_as_a_symbol():
    g = torch.compile(lambda x, i: rearr.rearrange(x, "b n[idx] -> b", idx=i, check_bounds="async"),
                      backend="aot_eager", fullgraph=True)
    for n in (4, 5):
        x = torch.randn(3, n)
        torch._dynamo.mark_dynamic(x, 1)
        g(x, t([0, 1, n - 1]))
    with pytest.raises(RuntimeError, match=r"outside axis 'n' of length n \(values lie in -n <= i < n\)"):
        g(torch.randn(3, 7), t([0, 9, 1]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the script runs instead of skipping")
@pytest.mark.slow
def test_the_gpu_benchmark_skips_cleanly_without_cuda():
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_gpu.py")], capture_output=True,
                         text=True, timeout=300, cwd=root)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("no CUDA device: skipped")
