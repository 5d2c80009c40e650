"""Upstream call forms: peer-argument validation, ``consolidated=``, ``use_broadcast``,
lazy stacks and tensorclasses through the transfers (real 2-rank gloo groups)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from _dist_harness import run_ranks

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase


def test_peer_arguments_are_validated_before_anything_else():
    td = TensorDict(a=torch.zeros(1))
    for call in (td.send, td.isend, td.recv, td.irecv):
        name = "dst" if call.__name__ in ("send", "isend") else "src"
        with pytest.raises(ValueError, match="requires `group`"):
            call(**{f"group_{name}": 0})
        with pytest.raises(ValueError, match="mutually exclusive"):
            call(0, group=object(), **{f"group_{name}": 0})
        with pytest.raises(ValueError, match="Exactly one"):
            call()


def consolidated_job(rank: int, world: int) -> dict:
    if rank == 0:
        td = TensorDict({("a", "b"): torch.ones(2), "c": torch.ones(2, 3)}, [2])
        td.init_remote(dst=1)
        td["a", "b"] = torch.full((2,), 2.0)
        td["c"] = torch.full((2, 3), 2.0)
        td.send(dst=1, consolidated=True)
        return {}
    got = TensorDict.from_remote_init(src=0)
    first = bool((got == 1).all())
    got.recv(src=0, consolidated=True)
    return {"first": first, "second": bool((got == 2).all()), "consolidated": got.is_consolidated()}


@pytest.mark.timeout(120)
def test_send_recv_consolidated(tmp_path):
    _, receiver = run_ranks(consolidated_job, 2, out_dir=str(tmp_path), timeout=100)
    assert receiver == {"first": True, "second": True, "consolidated": True}


def broadcast_init_job(rank: int, world: int) -> dict:
    if rank == 0:
        TensorDict({("a", "b"): torch.ones(2), "c": torch.ones(2)}, [2]).init_remote(use_broadcast=True)
        return {}
    got = TensorDict.from_remote_init(src=0, use_broadcast=True)
    return {"keys": sorted(got.keys()), "ones": bool((got == 1).all()), "consolidated": got.is_consolidated()}


@pytest.mark.timeout(120)
def test_init_remote_use_broadcast(tmp_path):
    _, receiver = run_ranks(broadcast_init_job, 2, out_dir=str(tmp_path), timeout=100)
    assert receiver == {"keys": ["a", "c"], "ones": True, "consolidated": True}


def _lazy(fill: float) -> LazyStackedTensorDict:
    td1 = TensorDict({("a", "b"): torch.full((2,), fill), "c": torch.full((2, 3), fill)}, [2])
    td2 = td1.clone()
    td2["c"] = torch.full((2, 3, 4), fill)
    td2["g"] = torch.full((2, 5), fill)
    return LazyStackedTensorDict.maybe_dense_stack([td1, td2], 0)


def lazy_job(rank: int, world: int) -> dict:
    root = _lazy(float(rank == 1))
    nested = TensorDict({"ls": _lazy(float(rank == 1))}, [2, 2])
    if rank == 1:
        root.send(0)
        nested.isend(0)
        return {}
    root.recv(1)
    nested.recv(1)
    return {"root": bool((root == 1).all()), "nested": bool((nested == 1).all())}


@pytest.mark.timeout(120)
def test_lazy_stacks_as_root_and_nested(tmp_path):
    receiver, _ = run_ranks(lazy_job, 2, out_dir=str(tmp_path), timeout=100)
    assert receiver == {"root": True, "nested": True}


def _structure(td):
    """Keys, shapes and where the lazy stacks are (never stacks heterogeneous members)."""
    if isinstance(td, LazyStackedTensorDict):
        return ["lazy", td.stack_dim, [_structure(m) for m in td.tensordicts]]
    return [list(td.batch_size), {k: _structure(v) if isinstance(v, TensorDictBase) else list(v.shape)
                                  for k, v in td.items()}]


def lazy_init_job(rank: int, world: int) -> dict:
    """init_remote of a lazy stack (root, nested, stacked along dim 1, a lazy stack in a member)."""
    inner = LazyStackedTensorDict(TensorDict(z=torch.ones(2)), TensorDict(z=torch.ones(2), w=torch.ones(1)), stack_dim=0)
    cases = {
        "root": _lazy(1.0),
        "nested": TensorDict({"ls": _lazy(1.0), "x": torch.ones(2, 2)}, [2, 2]),
        "dim1": LazyStackedTensorDict(TensorDict(a=torch.ones(3, 2), batch_size=[3]),
                                      TensorDict(a=torch.ones(3, 2), batch_size=[3]), stack_dim=1),
        "deep": LazyStackedTensorDict(TensorDict(m=inner.clone()), TensorDict(m=inner.clone()), stack_dim=0),
    }
    if rank == 0:
        for i, td in enumerate(cases.values()):
            td.init_remote(1, init_tag=100 * i)
        cases["root"].apply_(lambda t: t.fill_(2.0))
        cases["root"].send(1, init_tag=900)
        return {}
    out = {}
    for i, (name, ref) in enumerate(cases.items()):
        got = TensorDict.from_remote_init(0, init_tag=100 * i)
        out[name] = {
            "type": type(got).__name__,
            "batch_size": list(got.batch_size) == list(ref.batch_size),
            "keys": _structure(got) == _structure(ref),
            "equal": bool((got == 1).all()),
        }
        if name == "root":
            out[name]["consolidated"] = got.is_consolidated()
            out[name]["member_keys"] = [sorted(t.keys()) for t in got.tensordicts]
            root = got
        if name == "nested":
            out[name]["inner"] = type(got["ls"]).__name__
        if name == "dim1":
            out[name]["stack_dim"] = got.stack_dim
        if name == "deep":
            out[name]["inner"] = type(got.tensordicts[0]["m"]).__name__
    root.recv(0, init_tag=900)
    out["root"]["recv"] = bool((root == 2).all())
    return out


@pytest.mark.timeout(120)
def test_from_remote_init_rebuilds_lazy_stacks(tmp_path):
    _, r = run_ranks(lazy_init_job, 2, out_dir=str(tmp_path), timeout=100)
    for name in ("root", "nested", "dim1", "deep"):
        assert r[name]["batch_size"] and r[name]["keys"] and r[name]["equal"], (name, r[name])
    assert r["root"]["type"] == "LazyStackedTensorDict" and r["root"]["consolidated"] is True
    assert r["root"]["member_keys"] == [["a", "c"], ["a", "c", "g"]]
    assert r["root"]["recv"] is True
    assert r["nested"]["type"] == "TensorDict" and r["nested"]["inner"] == "LazyStackedTensorDict"
    assert r["dim1"]["type"] == "LazyStackedTensorDict" and r["dim1"]["stack_dim"] == 1
    assert r["deep"]["type"] == "LazyStackedTensorDict" and r["deep"]["inner"] == "LazyStackedTensorDict"


def tensorclass_job(rank: int, world: int) -> dict:
    from tensordict.testing import MyDistData

    tc = MyDistData(a=torch.full((3,), float(rank)), b=torch.full((3, 2), float(rank + 10)), batch_size=[3])
    gathered = tc.all_gather()
    out = {"gather": [float(g["a"][0]) for g in gathered]}
    tc.all_reduce()
    out["reduced"] = float(tc.a[0])
    if rank == 0:
        src = MyDistData(a=torch.ones(3), b=torch.ones(3, 2), batch_size=[3])
        src.init_remote(dst=1)
        src.a = torch.full((3,), 42.0)
        src.send(dst=1, consolidated=True)
        bc = src.broadcast(src=0)
    else:
        got = TensorDict.from_remote_init(src=0)
        out["type"] = type(got).__name__
        got.recv(src=0, consolidated=True)
        out["a"] = float(got.a[0])
        bc = MyDistData(a=torch.zeros(1), b=torch.zeros(1), batch_size=[]).broadcast(src=0)
    out["bc_type"] = type(bc).__name__
    return out


@pytest.mark.skipif(importlib.util.find_spec("tensordict.tensorclass") is None, reason="td-tensorclass is not installed")
@pytest.mark.timeout(120)
def test_tensorclass_through_collectives_and_p2p(tmp_path):
    r0, r1 = run_ranks(tensorclass_job, 2, out_dir=str(tmp_path), timeout=100)
    assert r0["gather"] == r1["gather"] == [0.0, 1.0]
    assert r0["reduced"] == r1["reduced"] == 1.0
    assert r1["type"] == "MyDistData" and r1["a"] == 42.0
    assert r0["bc_type"] == r1["bc_type"] == "MyDistData"


def reduce_shapes_job(rank: int, world: int) -> dict:
    td = TensorDict({("a", "b"): torch.ones(2), "c": torch.ones(2, 2)}, [2])
    if rank == 0:
        td = td.expand(1, 2).contiguous()  # same element counts, another batch shape
    futures = td.reduce(0, async_op=True, return_premature=True)
    for f in futures or []:
        f.wait()
    return {"sum": float(td["c"].sum()), "shape": list(td["c"].shape)}


@pytest.mark.timeout(120)
def test_reduce_matches_leaves_by_element_count(tmp_path):
    r0, _ = run_ranks(reduce_shapes_job, 2, out_dir=str(tmp_path), timeout=100)
    assert r0 == {"sum": 8.0, "shape": [1, 2, 2]}


class Custom:
    """A non-JSON value (module level: picklable)."""

    def __init__(self, v):
        self.v = v


def pickle_job(rank: int, world: int) -> dict:
    from tensordict.distributed import WireError

    def td(value):
        out = TensorDict(x=torch.zeros(2), batch_size=[2])
        out["obj"] = value
        out["label"] = "json text"
        return out

    if rank == 0:
        try:
            td(Custom(1)).send(1)
            refused = "sent"
        except TypeError as err:
            refused = str(err)
        td(Custom(5)).send(1, allow_pickle=True, init_tag=10)
        td(Custom(6)).send(1, allow_pickle=True, init_tag=20)
        td(Custom(7)).init_remote(1, allow_pickle=True, init_tag=30)
        return {"refused": refused}
    got = td(Custom(0))
    try:
        got.recv(0, init_tag=10)
        receiver_refused = "accepted"
    except WireError as err:
        receiver_refused = str(err)
    got.recv(0, init_tag=20, allow_pickle=True)
    fresh = TensorDict.from_remote_init(0, init_tag=30, allow_pickle=True)
    return {"receiver_refused": receiver_refused, "v": got["obj"].v, "fresh": fresh["obj"].v, "label": fresh["label"]}


@pytest.mark.timeout(120)
def test_pickled_values_need_opt_in_on_both_ends(tmp_path):
    sender, receiver = run_ranks(pickle_job, 2, out_dir=str(tmp_path), timeout=100)
    assert "allow_pickle=True" in sender["refused"]
    assert "was not unpickled" in receiver["receiver_refused"]
    assert receiver["v"] == 6 and receiver["fresh"] == 7 and receiver["label"] == "json text"


def bucket_job(rank: int, world: int) -> dict:
    td = TensorDict({f"k{i}": torch.full((8,), float(rank + 1)) for i in range(5)}, batch_size=[8])
    td["big"] = torch.full((8, 64), float(rank + 1))
    td.all_reduce(bucket_bytes=100)  # 32-byte leaves, 3 per bucket; "big" alone
    cons = TensorDict(a=torch.full((40,), float(rank + 1)), batch_size=[]).consolidate()
    futures = cons.all_reduce(async_op=True, bucket_bytes=64)
    for f in futures:
        f.wait()
    return {"sum": float(td.sum(reduce=True)), "cons": cons["a"].tolist()[0], "n_futures": len(futures)}


@pytest.mark.timeout(120)
def test_all_reduce_in_buckets(tmp_path):
    r0, r1 = run_ranks(bucket_job, 2, out_dir=str(tmp_path), timeout=100)
    assert r0 == r1
    assert r0["sum"] == 3.0 * (5 * 8 + 8 * 64)
    assert r0["cons"] == 3.0 and r0["n_futures"] == 3  # 160 bytes in 64-byte pieces
    td = TensorDict(a=torch.zeros(2))
    with pytest.raises(ValueError, match="bucket_bytes"):
        td.all_reduce(bucket_bytes=0)
