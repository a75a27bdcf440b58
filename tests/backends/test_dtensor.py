"""torch's DTensor: every op and reduction on sharded tensors, the checks decided alike on every rank.

The fast tests run DTensors on a mesh of this process alone (tests/_gloo.py's solo_mesh: every lowering,
no collective). The slow ones spawn 2 gloo processes on 127.0.0.1 (tests/_gloo.py's run_ranks, which
ends them whatever they do) and run the bodies of tests/_dtensor_ranks.py, many cases per spawn: the
results against the unsharded calls, the placements and the collectives (CommDebugMode) against the
unchecked call and the torch code that explain prints, bad input on every rank, and training under
FSDP2 and tensor parallel, eager and compiled.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.tensor")
if not torch.distributed.is_available():
    pytest.skip("torch was built without torch.distributed", allow_module_level=True)

import _dtensor_ranks as ranks  # noqa: E402
from _docs_blocks import ALL  # noqa: E402
from _gloo import run_ranks, solo_mesh, values  # noqa: E402
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor  # noqa: E402

import rearr  # noqa: E402
from rearr import backends  # noqa: E402
from rearr.run import cache  # noqa: E402

# --- one rank, in this process ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mesh():
    return solo_mesh()


def test_a_dtensor_has_its_own_backend_and_a_plain_tensor_keeps_torchs(mesh):
    from rearr.backends._torch_dtensor import DTensorBackend
    from rearr.backends.torch import TorchBackend

    x = distribute_tensor(torch.ones(4, 2), mesh, [Shard(0)])
    assert type(backends.backend_for(x)) is DTensorBackend
    assert type(backends.backend_for(torch.ones(2))) is TorchBackend
    assert "_torch_dtensor" not in backends.explainable()  # explain prints the torch code, by its own name


@pytest.mark.parametrize("placement", ["S0", "S1", "R"])
def test_every_op_on_one_rank_equals_the_plain_call(mesh, placement):
    place = [Replicate()] if placement == "R" else [Shard(int(placement[1]))]
    g = torch.Generator().manual_seed(0)
    X = torch.randn(8, 6, dtype=torch.float64, generator=g)
    idx, dst = torch.randint(0, 6, (8, 3), generator=g), torch.randint(-5, 5, (8,), generator=g)
    x, i, d = (distribute_tensor(t, mesh, place if t.ndim > int(placement[1:] or 0) else [Replicate()])
               for t in (X, idx, dst))
    calls = [(lambda a, **k: rearr.rearrange(a, "b n[idx] -> b k", **k), {"idx": (i, idx)}),
             (lambda a, **k: rearr.rearrange(a, "n[dst: k] c -> k c", **k), {"dst": (d, dst)}),
             (lambda a, **k: rearr.rearrange(a, "a (b c) -> (a b) c", c=2), {}),
             (lambda a, **k: rearr.reduce(a, "a b -> b", "max"), {})]
    for r in ("sum", "mean", "max", "min", "prod"):
        calls.append((lambda a, r=r, **k: rearr.scatter(a, "e c -> v[dst: e] c", r, v=5, **k), {"dst": (d, dst)}))
        calls.append((lambda a, r=r, **k: rearr.scatter(a, "e c -> v[dst: e] c", r, v=7, fill=-1, **k),
                      {"dst": (d, dst)}))
    for call, kwargs in calls:
        out = call(x, **{k: v[0] for k, v in kwargs.items()})
        assert isinstance(out, DTensor)
        torch.testing.assert_close(out.full_tensor(), call(X, **{k: v[1] for k, v in kwargs.items()}))


def test_bad_input_on_one_rank_is_a_rearr_error_naming_the_index_and_the_fix(mesh):
    from torch.distributed.device_mesh import init_device_mesh

    x = distribute_tensor(torch.arange(48.0).reshape(8, 6), mesh, [Shard(0)])
    idx = torch.zeros(8, 3, dtype=torch.long)
    with pytest.raises(rearr.RearrError) as info:
        rearr.rearrange(x, "b n[idx] -> b k", idx=idx)
    assert info.value.code == "RA501" and "index 'idx' is a Tensor and the input a DTensor" in info.value.message
    assert "DTensor.from_local(torch.as_tensor(idx" in info.value.hint
    with pytest.raises(rearr.RearrError, match="index 'idx' is a DTensor and the input a plain tensor") as info:
        rearr.rearrange(torch.zeros(8, 6), "b n[idx] -> b k", idx=distribute_tensor(idx, mesh, [Shard(0)]))
    assert "idx.full_tensor()" in info.value.hint
    other = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    with pytest.raises(rearr.RearrError, match="index 'idx' lives on DeviceMesh") as info:
        rearr.rearrange(distribute_tensor(torch.zeros(8, 6), other, [Replicate(), Shard(0)]), "b n[idx] -> b k",
                        idx=distribute_tensor(idx, mesh, [Shard(0)]))
    assert "distribute_tensor(idx.full_tensor(), x.device_mesh" in info.value.hint
    bad = idx.clone()
    bad[5, 2] = 6
    with pytest.raises(rearr.RearrError, match=r"holds 6 at position \(5, 2\), outside axis 'n'"):
        rearr.rearrange(x, "b n[idx] -> b k", idx=distribute_tensor(bad, mesh, [Shard(0)]))
    with pytest.raises(RuntimeError, match="rearr RA501: index 'idx' holds a value outside axis 'n'"):
        rearr.rearrange(x, "b n[idx] -> b k", idx=distribute_tensor(bad, mesh, [Shard(0)]), check_bounds="async")
    with pytest.raises(rearr.RearrError, match="uint64 DTensor"):
        rearr.rearrange(x, "b n[idx] -> b k", idx=DTensor.from_local(idx.to(torch.uint64), mesh, [Shard(0)]))


def test_einmix_on_a_dtensor_asks_for_dtensor_weights_and_runs_with_them(mesh):
    """A layer's plain weights with DTensor activations (tensor parallel): refused with the fix, which
    distribute_module applies (its weights become Replicate DTensors)."""
    from torch.distributed.tensor import distribute_module

    from rearr.layers import EinMix

    torch.manual_seed(0)
    mix = EinMix("a b c -> a b d", weight_shape="c d", bias_shape="d", c=4, d=3)
    X = torch.randn(8, 6, 4)
    x = distribute_tensor(X, mesh, [Shard(0)])
    with pytest.raises(rearr.RearrError, match="operand 1 is a Parameter, operand 0 a DTensor") as info:
        mix(x)
    assert info.value.hint == "make operand 1 a DTensor as operand 0 is (or every operand a Parameter)"
    want = mix(X)
    distribute_module(mix, mesh)
    out = mix(x)
    assert out.placements == (Shard(0),)
    torch.testing.assert_close(out.full_tensor(), want)


def test_the_applied_fix_for_a_plain_index_runs(mesh):
    x = distribute_tensor(torch.arange(48.0).reshape(8, 6), mesh, [Shard(0)])
    idx = torch.tensor([[0, 5, 1]] * 8)
    fixed = DTensor.from_local(torch.as_tensor(idx, device=x.device), x.device_mesh, [Replicate()] * x.device_mesh.ndim)
    torch.testing.assert_close(rearr.rearrange(x, "b n[idx] -> b k", idx=fixed).full_tensor(),
                               torch.gather(x.full_tensor(), 1, idx))


def test_a_plain_index_after_a_dtensor_call_of_the_same_shapes_is_still_refused(mesh):
    """The cached paths key on x's class, and a DTensor call never fills the direct table: a plain index
    cannot skip the check that refuses it."""
    X, idx = torch.arange(48.0).reshape(8, 6), torch.zeros(8, 3, dtype=torch.long)
    x, i = distribute_tensor(X, mesh, [Shard(0)]), distribute_tensor(idx, mesh, [Shard(0)])
    for _ in range(2):
        rearr.rearrange(x, "b n[idx] -> b k", idx=i)
        rearr.rearrange(X, "b n[idx] -> b k", idx=idx)  # plain: the direct table's
        with pytest.raises(rearr.RearrError, match="is a Tensor and the input a DTensor"):
            rearr.rearrange(x, "b n[idx] -> b k", idx=idx)
        with pytest.raises(rearr.RearrError, match="is a DTensor and the input a plain tensor"):
            rearr.rearrange(X, "b n[idx] -> b k", idx=i)
    assert not any(key[4] is DTensor for key in cache.DIRECT)


# --- two gloo ranks --------------------------------------------------------------------------------------

# Spawning 2 ranks costs 10-35 s on a loaded 2-core machine: each spawn runs many cases.


def _pages() -> list:
    """The docs' blocks marked `<!-- ranks: N -->`, which tests/docs/test_docs_run.py leaves to this file,
    each with the output block after it."""
    return [b for b in ALL if b.kind == "ranks"]


@pytest.fixture(scope="module")
def two_ranks():
    """The case matrix with and without gradients, the bad inputs and the docs' examples, in one spawn of
    2 ranks."""
    pages = [(b.where, "\n" * (b.line - 1) + b.body) for b in _pages() if b.marker.partition(":")[2].strip() == "2"]
    return values(run_ranks(ranks.everything, pages, timeout=900))


def _plus_one_all_reduce(counts: dict) -> dict:
    return {**counts, "all_reduce": counts.get("all_reduce", 0) + 1}


def _set_index_left_sharded(row: dict) -> bool:
    """A 'set' along an axis whose index stays sharded on another dim: its duplicate check pays one
    all-reduce of a flag, with or without the bounds check (docs/scaling.md)."""
    return " set " in row["case"] and "2-d index" in row["case"] and "index=S0" in row["case"]


@pytest.mark.slow
def test_every_op_and_reduction_on_two_ranks_equals_the_unsharded_call(two_ranks):
    for rank_rows in (v["cases"] for v in two_ranks):
        assert len(rank_rows) > 350
        for row in rank_rows:
            assert "error" not in row, row
            assert row["equal"], row
            assert row.get("inputs kept", True), row
    assert two_ranks[0]["cases"] == two_ranks[1]["cases"]  # the same on both ranks, the counts included


@pytest.mark.slow
def test_the_gradients_on_two_ranks_equal_the_unsharded_ones(two_ranks):
    for row in two_ranks[0]["grad"] + two_ranks[1]["grad"]:
        assert "error" not in row, row
        assert row["equal"] and row["grad equal"], row


@pytest.mark.slow
def test_placements_and_collectives_are_the_hand_written_calls_plus_one_small_all_reduce(two_ranks):
    """The output is placed as the torch code explain prints places it, and makes its collectives; the
    checks add one all-reduce (of two int64 per index) where some index is sharded, none otherwise."""
    rows = two_ranks[0]["cases"]
    with_hand = [row for row in rows if "hand" in row]
    assert len(with_hand) > 150
    for row in with_hand:
        assert row["placement"] == row["hand placement"], row
        hand = _plus_one_all_reduce(row["hand"]) if _set_index_left_sharded(row) else row["hand"]
        assert row["unchecked"] == hand, row
    for row in rows:
        if "checked" in row:
            assert row["checked"] == (_plus_one_all_reduce(row["unchecked"]) if row["sharded index"]
                                      else row["unchecked"]), row


# each scenario of _dtensor_ranks.bad_inputs: what both ranks raise (type, code, the start of the message),
# and the collectives spent: a bad value costs the check's all-reduce and one all-gather of two int64;
# input refused before any collective costs none
_RAISED = {
    "bad value on rank 1's shard": ("RearrError", "RA501", "index 'idx' holds 9 at position (6, 2)", 1),
    "bad values on both shards": ("RearrError", "RA501", "index 'idx' holds 6 at position (0, 1)", 1),
    "bad value, Replicate index": ("RearrError", "RA501", "index 'idx' holds 6 at position (3, 1)", 0),
    "async, bad value on rank 1": ("RuntimeError", None, "rearr RA501: index 'idx' holds a value outside", 1),
    "sync, scatter mean rows, bad on rank 1": ("RearrError", "RA501", "index 'dst' holds 5 at position (200,)", 1),
    "value -2**63": ("RearrError", "RA501", "index 'idx' holds -9223372036854775808 at position (7, 2)", 1),
    "uneven, an empty shard, bad": ("RearrError", "RA501", "index 'idx' holds 6 at position (0,)", 1),
    "message passing, bad src": ("RearrError", "RA501", "index 'src' holds 8 at position (7,)", 1),
    "duplicates across ranks under 'set'": ("RearrError", "RA501", "index 'dst' writes the same position", None),
    "duplicates across ranks under 'set', check_bounds=False": ("RearrError", "RA501", "index 'dst' writes the same",
                                                                 None),
    "plain index, DTensor input": ("RearrError", "RA501", "index 'idx' is a Tensor and the input a DTensor", 0),
    "list index, DTensor input": ("RearrError", "RA501", "index 'idx' is a list and the input a DTensor", 0),
    "DTensor index, plain input": ("RearrError", "RA501", "index 'idx' is a DTensor and the input a plain", 0),
    "meshes differ": ("RearrError", "RA501", "index 'idx' lives on DeviceMesh((2,)", 0),
    "into= on another mesh": ("RearrError", "RA500", "into= lives on DeviceMesh((dp=1, tp=2)", 0),
    "into= plain, source DTensor": ("RearrError", "RA500", "into= must be the same kind of tensor as the source", 0),
}


@pytest.mark.slow
def test_bad_input_raises_the_same_error_on_every_rank_and_leaves_no_rank_waiting(two_ranks):
    outcomes = [{label: rest for label, *rest in v["bad"]} for v in two_ranks]
    assert set(_RAISED) < set(outcomes[0])
    for label, (kind, code, message, gathers) in _RAISED.items():
        for outcome, comms, usable in (o[label] for o in outcomes):
            assert outcome[:3] == ("raised", kind, code) and message in outcome[3], (label, outcome)
            assert usable, label  # an all-reduce right after the error completed on every rank
            if gathers == 0:
                assert comms == {}, (label, comms)  # refused before any collective
            elif gathers == 1 and "async" not in label:
                assert comms == {"all_reduce": 1, "_allgather_base_": 1}, (label, comms)
        assert outcomes[0][label][0] == outcomes[1][label][0], label
    assert outcomes[0]["async, bad value on rank 1"][1] == {"all_reduce": 1}
    for o in outcomes:
        assert o["uneven, good"][0] == ("returned", [5.0, 5.0, 2.0])
        assert o["a Partial index"][0][0] == "returned" and o["a Partial index"][0][1][2] == [17.0, 12.0, 12.0]
        assert o["plain index under implicit_replication"][0][0] == "returned"
    # check_bounds=False checks nothing: the native call refuses the bad value on the rank that holds it
    # only (docs/scaling.md); here no collective follows, so the other rank returns
    unchecked = [o["check_bounds=False, bad value on rank 1"][0] for o in outcomes]
    assert unchecked[0][0] == "returned"
    assert unchecked[1][:3] == ("raised", "RearrError", "RA501") and "torch refused an index" in unchecked[1][3]


@pytest.mark.slow
def test_training_under_fsdp2_and_tensor_parallel_equals_the_unsharded_model():
    """A model of rearr's layers, a gather and a scatter mean, float64, 4 SGD steps: the same losses and
    weights as the unsharded model; compiled (aot_eager) with fullgraph=True, one frame, and a bad index
    the compiled graph refuses on every rank."""
    results = values(run_ranks(ranks.trainings, timeout=900))
    for result in results:
        assert set(result) == {"fsdp", "fsdp compiled", "tp", "tp compiled", "tp sharded compiled"}
        for setup, run in result.items():
            assert all(torch.isclose(torch.tensor(a), torch.tensor(b), rtol=1e-12) for a, b in run["losses"]), setup
            assert all(run["weights equal"].values()), (setup, run["weights equal"])
            if "compiled" in setup:
                assert run["frames"] == run["frames after"] == 1, setup
                assert run["bad index"][:2] == ("RearrError", "RA501"), (setup, run["bad index"])
                assert "index 'dst' holds 11 at position (10,)" in run["bad index"][2], setup


@pytest.mark.slow
def test_the_docs_examples_for_two_ranks_print_what_the_page_shows(two_ranks):
    blocks = _pages()
    assert any(b.where.startswith("docs/scaling.md") for b in blocks)
    assert all(b.marker.partition(":")[2].strip() == "2" for b in blocks)  # none left unrun
    for rank in two_ranks:
        for block, printed in zip(blocks, rank["pages"]):
            assert block.output is not None and printed == block.output.body, (block.where, printed)
