"""Rank jobs for the td-distributed tests (importable by name in spawned ranks).

Each job runs on every rank of a real gloo process group and checks its results
with plain asserts: a failing assert fails the test with the rank's traceback.
Jobs return a small JSON-able dict for checks the test makes itself.
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

from tensordict import TensorDict, lazy_stack
from tensordict._nontensor import NonTensorStack


def rich_td(seed: float) -> TensorDict:
    """Nested, several dtypes, dim names, non-tensor data."""
    td = TensorDict(
        {
            "obs": torch.arange(12, dtype=torch.float32).view(4, 3) + seed,
            "nested": {
                "ids": torch.arange(4, dtype=torch.int64) * int(seed + 1),
                "mask": torch.tensor([True, False, True, bool(int(seed) % 2)]),
                "half": torch.full((4, 2), seed, dtype=torch.float16),
                "bf": torch.full((4,), seed, dtype=torch.bfloat16),
                "z": torch.full((4,), complex(seed, 1.0), dtype=torch.complex64),
            },
            "scalar_per_row": torch.full((4,), seed, dtype=torch.float64),
            "label": f"batch-{seed}",
        },
        batch_size=[4],
    )
    td.refine_names("time")
    return td


def big_td(seed: float, rows: int = 3) -> TensorDict:
    """Small leaves plus two leaves over the 1 MiB big-leaf threshold."""
    return TensorDict(
        {
            "small": torch.full((rows, 5), seed),
            "big": torch.full((rows, 200_000), seed),  # 2.4 MB
            "big_i": torch.full((rows, 100_000), int(seed), dtype=torch.int64),  # 2.4 MB
            "tail": torch.full((rows,), int(seed), dtype=torch.int32),
        },
        batch_size=[rows],
    )


def assert_td_equal(a: TensorDict, b: TensorDict) -> None:
    assert set(a.keys(True, True)) == set(b.keys(True, True)), (sorted(a.keys(True, True)), sorted(b.keys(True, True)))
    for key in a.keys(True, True):
        x, y = a.get(key), b.get(key)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and x.shape == y.shape, (key, x.dtype, y.dtype, x.shape, y.shape)
            assert torch.equal(x, y), key
        else:
            assert getattr(x, "data", x) == getattr(y, "data", y), (key, x, y)


def _expect(exc_type: type, fn, *needles: str) -> str:
    try:
        fn()
    except exc_type as err:
        text = str(err)
        for needle in needles:
            assert needle in text, (needle, text)
        return text
    raise AssertionError(f"{fn} did not raise {exc_type.__name__}")


# ---------------------------------------------------------------------- point to point
def p2p_job(rank: int, world: int) -> dict:
    out: dict = {}
    peer = 1 - rank
    if rank == 0:
        # 1. plain -> plain, rich content; send returns None
        assert rich_td(7.0).send(1) is None
        # 2. big leaves (segments) -> template with a non-contiguous big leaf
        big_td(3.0).send(1, init_tag=100)
        # 3. consolidated sender -> plain template; plain sender -> consolidated template
        big_td(4.0).consolidate().send(1, init_tag=200)
        rich_td(5.0).send(1, init_tag=300)
        # 4. isend, default: returns the next free tag
        out["isend_tag"] = rich_td(6.0).isend(1, init_tag=400)
        works = big_td(8.0).isend(1, init_tag=500, return_early=True)
        assert isinstance(works, list) and works
        for w in works:
            w.wait()
        # 5. init_remote, then further batches into the received TensorDict
        rich_td(9.0).init_remote(1, init_tag=600)
        rich_td(10.0).send(1, init_tag=700)
        big_td(11.0).init_remote(1, init_tag=800)
        # 6. two transfers in flight, different tags, received in the reverse order
        ws = rich_td(12.0).isend(1, init_tag=900, return_early=True)
        ws += rich_td(13.0).isend(1, init_tag=1000, pseudo_rand=True, return_early=True)
        for w in ws:
            w.wait()
        # 7. structure mismatches: each must fail on the receiver only, naming the keys
        TensorDict(a=torch.zeros(3, 5), b=torch.zeros(3), batch_size=[3]).send(1, init_tag=1100)
        TensorDict(a=torch.zeros(3, 4, dtype=torch.float64), batch_size=[3]).send(1, init_tag=1200)
        big_td(1.0, rows=4).send(1, init_tag=1300)
        # ... and the channel still works afterwards
        rich_td(14.0).send(1, init_tag=1400)
        # 8. a receiver with keys in another order, and a lazy stack as template
        TensorDict(x=torch.ones(2), y=torch.full((2,), 2.0), batch_size=[2]).send(1, init_tag=1500)
        TensorDict(a=torch.arange(6.0).view(2, 3), batch_size=[2]).send(1, init_tag=1600)
        # 9. a non-JSON value is refused before anything is sent
        bad = TensorDict(a=torch.zeros(2), batch_size=[2])
        bad["obj"] = object()
        _expect(TypeError, lambda: bad.send(1, init_tag=1700), "JSON")
        # 10. argument errors
        _expect(ValueError, lambda: rich_td(0).send(0), "own rank")
        _expect(ValueError, lambda: rich_td(0).send(5), "not a rank")
        _expect(ValueError, lambda: rich_td(0).send(1, group_dst=1), "group")
        _expect(ValueError, lambda: rich_td(0).send(), "Exactly one")
        # 11. non-tensor stacks and an empty TensorDict travel too
        stacked = TensorDict(v=torch.zeros(3), batch_size=[3])
        stacked["names"] = NonTensorStack("a", "b", "c")
        stacked.send(1, init_tag=1800)
        TensorDict(batch_size=[2]).init_remote(1, init_tag=1900)
    else:
        # 1.
        tmpl = rich_td(0.0)
        tag = tmpl.recv(0)
        assert_td_equal(tmpl, rich_td(7.0))
        assert tmpl.names == ["time"]
        out["recv_tag"] = tag
        # 2.
        tmpl = big_td(0.0)
        tmpl["big"] = torch.zeros(200_000, 3).t()  # non-contiguous: received through a staging buffer
        leaf_before = tmpl["big_i"]
        tmpl.recv(0, init_tag=100)
        assert_td_equal(tmpl, big_td(3.0))
        assert tmpl["big_i"] is leaf_before  # filled in place
        # 3.
        tmpl = big_td(0.0)
        tmpl.recv(0, init_tag=200)
        assert_td_equal(tmpl, big_td(4.0))
        ctmpl = rich_td(0.0).consolidate()
        storage = ctmpl._consolidated.storage
        ctmpl.recv(0, init_tag=300)
        assert_td_equal(ctmpl, rich_td(5.0))
        assert ctmpl.is_consolidated() and ctmpl._consolidated.storage is storage
        # 4.
        tmpl = rich_td(0.0)
        out["irecv_tag"] = tmpl.irecv(0, init_tag=400)
        assert_td_equal(tmpl, rich_td(6.0))
        tmpl = big_td(0.0)
        futures = tmpl.irecv(0, init_tag=500, return_premature=True)
        assert isinstance(futures, list) and futures
        for f in futures:
            f.wait()
        assert_td_equal(tmpl, big_td(8.0))
        # 5.
        got = TensorDict.from_remote_init(0, init_tag=600)
        assert_td_equal(got, rich_td(9.0))
        assert got.batch_size == torch.Size([4]) and got.names == ["time"]
        assert got.is_consolidated() and not got.is_locked
        got.recv(0, init_tag=700)
        assert_td_equal(got, rich_td(10.0))
        got = TensorDict.from_remote_init(0, init_tag=800)
        assert_td_equal(got, big_td(11.0))
        assert got.is_consolidated()
        # 6.
        later, sooner = rich_td(0.0), rich_td(0.0)
        fut = sooner.irecv(0, init_tag=1000, pseudo_rand=True, return_premature=True)
        later.recv(0, init_tag=900)
        fut[0].wait()
        assert_td_equal(later, rich_td(12.0))
        assert_td_equal(sooner, rich_td(13.0))
        # 7.
        tmpl = TensorDict(a=torch.full((3, 4), -1.0), c=torch.zeros(3), batch_size=[3])
        out["mismatch_keys"] = _expect(RuntimeError, lambda: tmpl.recv(0, init_tag=1100), "'a'", "'b'", "'c'", "[3, 5]")
        assert bool((tmpl["a"] == -1).all())  # untouched
        out["mismatch_dtype"] = _expect(
            RuntimeError, lambda: TensorDict(a=torch.zeros(3, 4), batch_size=[3]).recv(0, init_tag=1200), "float64", "float32"
        )
        out["mismatch_big"] = _expect(RuntimeError, lambda: big_td(0.0).recv(0, init_tag=1300), "'big'", "[4, 200000]")
        tmpl = rich_td(0.0)
        tmpl.recv(0, init_tag=1400)
        assert_td_equal(tmpl, rich_td(14.0))
        # 8.
        reordered = TensorDict(y=torch.zeros(2), x=torch.zeros(2), batch_size=[2])
        reordered.recv(0, init_tag=1500)
        assert reordered["x"].tolist() == [1.0, 1.0] and reordered["y"].tolist() == [2.0, 2.0]
        lazy = lazy_stack([TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(3))])
        lazy.recv(0, init_tag=1600)
        assert lazy.tensordicts[1]["a"].tolist() == [3.0, 4.0, 5.0]
        # 11.
        stacked = TensorDict(v=torch.ones(3), batch_size=[3])
        stacked["names"] = NonTensorStack("x", "y", "z")
        stacked.recv(0, init_tag=1800)
        assert list(stacked["names"]) == ["a", "b", "c"] and stacked["v"].tolist() == [0.0, 0.0, 0.0]
        empty = TensorDict.from_remote_init(0, init_tag=1900)
        assert empty.batch_size == torch.Size([2]) and empty.is_empty()
    # group-relative peers on a sub-group (the default group's ranks are the group's ranks here)
    g = dist.new_group([0, 1])
    if rank == 0:
        rich_td(15.0).send(group=g, group_dst=1)
    else:
        tmpl = rich_td(0.0)
        tmpl.recv(group=g, group_src=0)
        assert_td_equal(tmpl, rich_td(15.0))
    out["peer"] = peer
    return out


# ---------------------------------------------------------------------- collectives
def _coll_td(rank: int) -> TensorDict:
    return TensorDict(
        {
            "x": torch.arange(6.0).view(3, 2) + rank,
            "n": {"i": torch.full((3,), rank + 1, dtype=torch.int64)},
            "flag": torch.tensor([rank == 1, False, True]),
            "tag": f"rank{rank}",
        },
        batch_size=[3],
    )


def collectives_job(rank: int, world: int) -> dict:
    out: dict = {}
    ranks = list(range(world))
    # broadcast: into a matching template (in place), into an empty TensorDict (new), with big leaves
    td = _coll_td(rank)
    res = td.broadcast(1)
    assert res is td
    assert_td_equal(td, _coll_td(1))
    res = (_coll_td(2) if rank == 2 else TensorDict()).broadcast(2)
    assert_td_equal(res, _coll_td(2))
    tmpl = big_td(rank)
    res = tmpl.broadcast(0)
    assert res is tmpl
    assert_td_equal(tmpl, big_td(0))
    res = (big_td(5.0) if rank == 3 else TensorDict()).broadcast(3)
    assert_td_equal(res, big_td(5.0))
    # all_reduce: sum, max, avg, bool, consolidated storage, async
    td = _coll_td(rank)
    assert td.all_reduce() is None
    assert td["x"].tolist() == (sum(torch.arange(6.0).view(3, 2) + r for r in ranks)).tolist()
    assert td["n", "i"].tolist() == [sum(r + 1 for r in ranks)] * 3
    assert td["flag"].tolist() == [True, False, True]
    assert td["tag"] == f"rank{rank}"  # non-tensor data is left alone
    td = _coll_td(rank).consolidate()
    storage = td._consolidated.storage
    td.all_reduce(dist.ReduceOp.MAX)
    assert td["x"][0].tolist() == [world - 1.0, world.__float__()]
    assert td._consolidated.storage is storage and td.is_consolidated()
    td = _coll_td(rank)
    td.all_reduce(dist.ReduceOp.AVG)
    assert torch.allclose(td["x"][0], torch.tensor([(world - 1) / 2, (world - 1) / 2 + 1]))
    td = _coll_td(rank)
    futures = td.all_reduce(async_op=True)
    for f in futures:
        f.wait()
    assert td["x"][0, 0].item() == sum(ranks)
    # reduce to group rank 2
    td = _coll_td(rank)
    td.reduce(2)
    if rank == 2:
        assert td["x"][0, 0].item() == sum(ranks)
    td = _coll_td(rank)
    futures = td.reduce(1, dist.ReduceOp.MIN, async_op=True, return_premature=True)
    for f in futures:
        f.wait()
    if rank == 1:
        assert td["n", "i"].tolist() == [1, 1, 1]
    # all_gather: structures may differ per rank
    mine = _coll_td(rank) if rank % 2 == 0 else TensorDict(only=torch.full((rank,), float(rank)), batch_size=[rank])
    tds = mine.all_gather()
    assert len(tds) == world
    for r, t in enumerate(tds):
        if r % 2 == 0:
            assert_td_equal(t, _coll_td(r))
        else:
            assert t["only"].tolist() == [float(r)] * r
    # gather_and_stack: stack mode, then the in-place mode (one row per other rank)
    st = _coll_td(rank).gather_and_stack(0)
    if rank == 0:
        assert st.batch_size == torch.Size([world, 3])
        assert st["x"][:, 0, 0].tolist() == [float(r) for r in ranks]
    else:
        assert st is None
    if rank == 3:
        dest = torch.stack([_coll_td(9)] * (world - 1))
        res = dest.gather_and_stack(3)
        assert res is dest
        assert dest["x"][:, 0, 0].tolist() == [0.0, 1.0, 2.0]
    else:
        assert _coll_td(rank).gather_and_stack(3) is None
    # scatter: from a stacked TensorDict, then from a list
    if rank == 1:
        piece = torch.stack([_coll_td(10 + r) for r in ranks]).scatter(1)
    else:
        piece = _coll_td(0).scatter(1)
    assert piece["x"][0, 0].item() == 10 + rank
    if rank == 0:
        piece = TensorDict().scatter(0, [TensorDict(v=torch.full((2,), float(r)), batch_size=[2]) for r in ranks])
    else:
        piece = TensorDict().scatter(0)
    assert piece["v"].tolist() == [float(rank)] * 2
    _expect(ValueError, lambda: _coll_td(0).broadcast(world), "not a rank")
    # a sub-group: ranks are the group's own (group rank 1 is global rank 3)
    g = dist.new_group([1, 3])
    if rank in (1, 3):
        td = _coll_td(rank)
        td.broadcast(1, group=g)
        assert_td_equal(td, _coll_td(3))
        td = _coll_td(rank)
        td.all_reduce(group=g)
        assert td["x"][0, 0].item() == 4.0
        td = _coll_td(rank)
        td.reduce(0, group=g)
        if rank == 1:
            assert td["x"][0, 0].item() == 4.0
        tds = _coll_td(rank).all_gather(group=g)
        assert [t["tag"] for t in tds] == ["rank1", "rank3"]
        st = _coll_td(rank).gather_and_stack(1, group=g)
        if rank == 3:
            assert st["x"][:, 0, 0].tolist() == [1.0, 3.0]
        piece = (torch.stack([_coll_td(20), _coll_td(21)]) if rank == 3 else TensorDict()).scatter(1, group=g)
        assert piece["x"][0, 0].item() == (20.0 if rank == 1 else 21.0)
    else:
        _expect(ValueError, lambda: _coll_td(rank).all_reduce(group=g), "not a member")
    # mismatched structures: every rank gets an error naming the keys; the group still works after
    bad = _coll_td(rank) if rank != 2 else TensorDict(x=torch.zeros(3, 2), batch_size=[3])
    out["mismatch"] = _expect(RuntimeError, lambda: bad.all_reduce(), "'n.i'", "'flag'")
    td = _coll_td(rank)
    td.all_reduce()
    assert td["x"][0, 0].item() == sum(ranks)
    return out


# ---------------------------------------------------------------------- faults
def killed_sender_job(rank: int, world: int, marker: str) -> dict:
    """Rank 1 sends 8 MB TensorDicts forever; rank 0 receives until the sender is killed."""
    payload = TensorDict(a=torch.ones(4, 1_000_000), b=torch.ones(4, 1_000_000, dtype=torch.int32), batch_size=[4])
    if rank == 1:
        while True:
            payload.send(0)
    started = None
    n = 0
    try:
        while True:
            payload.recv(1)
            n += 1
            if n == 2:
                with open(marker, "w") as f:
                    f.write("receiving")
                started = time.monotonic()
    except RuntimeError as err:
        return {"error": str(err), "type": type(err).__name__, "after": time.monotonic() - (started or time.monotonic()), "n": n}
    return {"error": None}


def killed_in_collective_job(rank: int, world: int, marker: str) -> dict:
    """Three ranks all-reduce in a loop; the test kills rank 2."""
    td = TensorDict(a=torch.ones(2_000_000), batch_size=[])
    n = 0
    t0 = None
    try:
        while True:
            td.all_reduce()
            td.zero_().add_(1)
            n += 1
            if n == 2 and rank == 0:
                with open(marker, "w") as f:
                    f.write("reducing")
            if n == 2:
                t0 = time.monotonic()
    except RuntimeError as err:
        return {"error": str(err), "after": time.monotonic() - (t0 or time.monotonic()), "n": n}
    return {"error": None}


def silent_peer_job(rank: int, world: int) -> dict:
    """Rank 1 never sends: rank 0's recv must fail once the process group's timeout expires."""
    if rank == 1:
        time.sleep(0.5)
        return {"slept": True}
    t0 = time.monotonic()
    try:
        TensorDict(a=torch.zeros(3), batch_size=[3]).recv(1)
    except RuntimeError as err:
        return {"error": str(err), "after": time.monotonic() - t0}
    return {"error": None}


# ---------------------------------------------------------------------- map helpers (top level: picklable)
def add_one_inplace(chunk: TensorDict) -> None:
    chunk["x"].add_(1)


def add_key_inplace(chunk: TensorDict) -> None:
    chunk["x"].add_(1)
    chunk["new"] = torch.zeros(chunk.batch_size)


def square(chunk: TensorDict) -> TensorDict:
    return TensorDict(y=chunk["x"] ** 2, batch_size=chunk.batch_size)


def row_sum(chunk: TensorDict) -> torch.Tensor:
    return chunk["x"].sum(-1)


def fail_on_big_values(chunk: TensorDict) -> TensorDict:
    if bool((chunk["x"] > 50).any()):
        raise ValueError(f"value too large in chunk starting at {chunk['x'].min().item()}")
    return chunk.clone()


def random_noise(chunk: TensorDict) -> TensorDict:
    return TensorDict(r=torch.rand(chunk.batch_size), batch_size=chunk.batch_size)


def thread_count(chunk: TensorDict) -> TensorDict:
    return TensorDict(t=torch.full(chunk.batch_size, torch.get_num_threads()), batch_size=chunk.batch_size)


def report_sharing(chunk: TensorDict) -> TensorDict:
    """Tells whether the chunk's leaves live in shared memory or in a memory-mapped file."""
    x = chunk["x"]
    filename = getattr(x, "filename", None)
    flags = [float(x.is_shared()), float(filename is not None), float(os.getpid()), float(x.data_ptr())]
    info = torch.tensor(flags, dtype=torch.float64).expand(chunk.batch_size[0], 4).clone()
    return TensorDict(info=info, batch_size=chunk.batch_size)


def die(chunk: TensorDict) -> None:
    os._exit(3)


# ---------------------------------------------------------------------- devices / backends
def device_job(rank: int, world: int, device: str) -> dict:
    """Transfers and collectives of TensorDicts living on ``device`` (the backend stages as needed)."""
    dev = torch.device(device)
    td = big_td(float(rank)).to(dev)
    small = rich_td(float(rank)).to(dev)
    if rank == 0:
        td.send(1)
        small.send(1, init_tag=10)
        small.consolidate().init_remote(1, init_tag=20)
    else:
        td.recv(0)
        assert td["big"].device.type == dev.type
        assert_td_equal(td.cpu(), big_td(0.0))
        small.recv(0, init_tag=10)
        assert_td_equal(small.cpu(), rich_td(0.0))
        got = TensorDict.from_remote_init(0, init_tag=20, device=dev)
        assert got["obs"].device.type == dev.type
        assert_td_equal(got.cpu(), rich_td(0.0))
    td = rich_td(float(rank)).to(dev)
    td.all_reduce()
    assert td["obs"].device.type == dev.type
    assert td["obs"][0, 0].item() == float(sum(range(world)))
    res = (rich_td(5.0).to(dev) if rank == 1 else TensorDict()).broadcast(1, device=dev)
    assert_td_equal(res.cpu(), rich_td(5.0))
    tds = rich_td(float(rank)).to(dev).all_gather()
    assert [t["label"] for t in tds] == [f"batch-{float(r)}" for r in range(world)]
    return {}


# worker functions of test_map_join.py: spawned workers import them from this module
# (a function defined in a test module cannot be imported by a spawned child under
# pytest's importlib import mode)
def add_two(td: TensorDict) -> TensorDict:
    return td.set("2", torch.tensor(2))


def draw_numpy_and_random(td: TensorDict) -> TensorDict:
    import random

    import numpy as np

    td["n"] = td["n"] + np.random.randint(0, 1000, ()).item()
    td["p"] = td["p"] + random.randint(0, 1000)
    return td
