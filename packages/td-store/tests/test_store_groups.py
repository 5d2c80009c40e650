"""Record groups (leaves written together, interleaved per batch element) and the
transaction reads and writes built on them, against a real redis-server: every read and
write is compared with the same operation on an in-memory TensorDict."""

from __future__ import annotations

import pickle
import re

import pytest
import torch

from tensordict import NonTensorStack, TensorDict
from tensordict.store import StoreDataError, TensorDictStore
from tensordict.store._conn import path_field

N = 37


def _local(n: int = N) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        obs=torch.randn(n, 5, generator=g),
        action=torch.randint(-9, 9, (n, 2), generator=g),
        done=torch.rand(n, 1, generator=g) > 0.5,
        half=torch.randn(n, 3, generator=g).to(torch.bfloat16),
        nested=TensorDict(x=torch.randn(n, 4, 2, generator=g), y=torch.arange(n * 4).view(n, 4), batch_size=[n, 4]),
        batch_size=[n],
    )


def _groups(st) -> set:
    return {e["g"] for e in st._root.entries(refresh=True).values() if e["t"] == "tensor" and "g" in e}


def _server_keys(st, client) -> set:
    return {k.decode() for k in client.keys(st._root.base + "*")}


@pytest.fixture
def grouped(kw):
    local = _local()
    st = TensorDictStore.from_tensordict(local, **kw)
    yield st, local
    st.clear_redis()
    st.close()


def test_from_tensordict_groups_the_leaves(grouped, client):
    st, local = grouped
    gids = _groups(st)
    assert len(gids) == 1
    keys = _server_keys(st, client)
    assert any(k.endswith(":g:" + next(iter(gids))) for k in keys)
    assert not any(":d:" in k for k in keys)  # no column strings: every leaf is in the group
    assert (st.to_tensordict() == local).all()
    for key in local.keys(True, True):
        assert torch.equal(st[key], local[key]), key
        assert st[key].is_contiguous()


@pytest.mark.parametrize(
    "index",
    [
        3,
        -1,
        slice(None),
        slice(2, 30),
        slice(1, None, 3),
        slice(5, 6),
        [0, 0, 36, 5, 4, 3],
        "tensor",
        "mask",
        "blocks",
    ],
)
def test_indexed_reads_match_local(grouped, index):
    st, local = grouped
    if index == "tensor":
        index = torch.randint(N, (50,), generator=torch.Generator().manual_seed(3))
    elif index == "mask":
        index = torch.rand(N, generator=torch.Generator().manual_seed(4)) > 0.4
    elif index == "blocks":  # runs of several lengths: whole rows per run
        index = torch.cat([torch.arange(0, 8), torch.arange(10, 13), torch.arange(20, 28), torch.tensor([35])])
    elif isinstance(index, list):
        index = torch.tensor(index)
    got = st[index]
    want = local[index]
    assert got.batch_size == want.batch_size
    for key in want.keys(True, True):
        assert torch.equal(got[key], want[key]), key
        assert got[key].dtype == want[key].dtype


def test_nested_node_reads_and_writes(grouped):
    st, local = grouped
    nested = st["nested"]
    assert nested.batch_size == torch.Size([N, 4])
    idx = torch.tensor([[0, 1], [36, 3]])
    assert torch.equal(nested[idx[:, 0], idx[:, 1]]["x"], local["nested"][idx[:, 0], idx[:, 1]]["x"])
    assert (nested[2:5] == local["nested"][2:5]).all()
    new = TensorDict(x=torch.ones(3, 4, 2), y=torch.full((3, 4), -1), batch_size=[3, 4])
    nested[2:5] = new
    local["nested"][2:5] = new
    assert (st.to_tensordict() == local).all()
    nested[0, 1] = TensorDict(x=torch.full((2,), 7.0), y=torch.tensor(9), batch_size=[])
    local["nested"][0, 1] = TensorDict(x=torch.full((2,), 7.0), y=torch.tensor(9), batch_size=[])
    assert (st.to_tensordict() == local).all()


@pytest.mark.parametrize("index", [slice(3, 9), torch.tensor([30, 2, 17, 2]), slice(0, None, 2)])
def test_indexed_writes_match_local(grouped, index):
    st, local = grouped
    g = torch.Generator().manual_seed(5)
    m = local[index].batch_size[0]
    value = _local(m)
    value["obs"] = torch.randn(m, 5, generator=g)
    st[index] = value
    local[index] = value
    assert (st.to_tensordict() == local).all()
    assert (st[torch.arange(N)] == local).all()


def test_partial_writes_leave_other_members(grouped):
    st, local = grouped
    idx = torch.tensor([4, 9, 10, 11])
    st[idx] = TensorDict(action=torch.full((4, 2), 5), batch_size=[4])  # one member of the row
    local["action"][idx] = 5
    st.set_at_("done", torch.ones(3, 1, dtype=torch.bool), slice(0, 3))
    local["done"][0:3] = True
    st[idx] = TensorDict(obs=torch.zeros(4, 5), half=torch.ones(4, 3, dtype=torch.bfloat16), batch_size=[4])  # not adjacent
    local["obs"][idx] = 0
    local["half"][idx] = 1
    assert (st.to_tensordict() == local).all()


def test_whole_write_moves_a_member_out_and_drops_empty_groups(grouped, client):
    st, local = grouped
    (gid,) = _groups(st)
    st["obs"] = torch.zeros(N, 5)
    assert "g" not in st._root.entries(refresh=True)[("obs",)]
    assert torch.equal(st["obs"], torch.zeros(N, 5))
    assert torch.equal(st["action"], local["action"])  # the other members are untouched
    assert _groups(st) == {gid}
    for key in list(local.keys(True, True)):
        if key != "obs":
            del st[key]
    assert not any(k.endswith(":g:" + gid) for k in _server_keys(st, client)), "an empty group string was left"
    assert torch.equal(st["obs"], torch.zeros(N, 5))


def test_rename_clone_pickle_reconnect(grouped, kw):
    st, local = grouped
    st.rename_key_("obs", "observation")
    assert torch.equal(st["observation"], local["obs"])
    assert torch.equal(st[3:7]["observation"], local["obs"][3:7])
    copy = st.clone()
    try:
        st[0:2] = TensorDict(observation=torch.zeros(2, 5), batch_size=[2])
        assert torch.equal(copy["observation"], local["obs"])  # the copy has its own group string
        again = pickle.loads(pickle.dumps(st))
        assert torch.equal(again[0:2]["observation"], torch.zeros(2, 5))
        other = TensorDictStore.from_store(td_id=st._td_id, **kw)
        assert torch.equal(other[torch.tensor([1, 0])]["action"], local["action"][[1, 0]])
    finally:
        copy.clear_redis()


def test_from_schema_and_indexed_creation_form_groups(kw):
    st = TensorDictStore.from_schema({"a": ([3], torch.float32), ("n", "b"): ([], torch.int64)}, batch_size=[6], **kw)
    try:
        assert len(_groups(st)) == 1
        assert st["a"].sum() == 0
        st[1:3] = {"a": torch.ones(2, 3), ("n", "b"): torch.tensor([4, 5])}
        assert st["n", "b"].tolist() == [0, 4, 5, 0, 0, 0]
        st[torch.tensor([5])] = TensorDict(c=torch.ones(1, 2), d=torch.ones(1, dtype=torch.float64), batch_size=[1])
        assert len(_groups(st)) == 2  # the two keys created by the write form a group
        assert st["c"].tolist() == [[0, 0]] * 5 + [[1, 1]]
        assert st[[5, 0]]["d"].tolist() == [1.0, 0.0]
    finally:
        st.clear_redis()


def test_groups_with_non_tensor_leaves_read_in_one_transaction(kw):
    local = TensorDict(a=torch.arange(6), b=torch.ones(6, 2), batch_size=[6])
    st = TensorDictStore.from_tensordict(local, **kw)
    try:
        st[0:6] = TensorDict(label=NonTensorStack(*"uvwxyz"), batch_size=[6])
        st["shared"] = "same"
        got = st[torch.tensor([4, 1])]
        assert got["label"] == ["y", "v"] and got["shared"] == "same"
        assert torch.equal(got["a"], torch.tensor([4, 1]))
    finally:
        st.clear_redis()


def test_planted_group_values_are_refused(grouped, client):
    st, _ = grouped
    (gid,) = _groups(st)
    gkey = st._root.base + "g:" + gid
    server = f"127.0.0.1:{st._root.conn.port}"
    client.set(gkey, client.getrange(gkey, 0, 99))  # truncated
    with pytest.raises(StoreDataError, match=rf"obs.*{server}.*expected"):
        st[torch.tensor([0, 30])]
    with pytest.raises(StoreDataError, match=rf"obs.*{server}"):
        st["obs"]
    with pytest.raises(StoreDataError, match="expected"):
        st.to_tensordict()
    assert client.ping()  # the connection was left clean
    client.delete(gkey)
    client.rpush(gkey, b"x")  # the wrong type
    with pytest.raises((StoreDataError, Exception), match="WRONGTYPE|expected"):
        st[torch.tensor([1])]
    field = path_field(("obs",))
    raw = client.hget(st._root.schema_key, field).decode()
    client.hset(st._root.schema_key, field, re.sub(r'"off":\d+', '"off":100000', raw))
    st._root.cache.clear()
    with pytest.raises(StoreDataError, match="invalid group placement"):
        st.keys()
        list(st.keys())


def test_unsafe_key_names_and_many_rows(kw):
    """Key names with spaces and non-ASCII characters, and reads of more rows than the
    command cache keeps."""
    st = TensorDictStore(batch_size=[5000], prefix="my store é", **kw)
    try:
        st["a b"] = torch.arange(5000)
        st["ü"] = torch.arange(5000).float()
        idx = torch.randint(5000, (4500,), generator=torch.Generator().manual_seed(0))
        got = st[idx]
        assert torch.equal(got["a b"], idx) and torch.equal(got["ü"], idx.float())
        st._root.commands.max_rows = 6000  # the cache starts over instead of growing
        assert torch.equal(st[idx[:20]]["a b"], idx[:20])
        st._root.commands.limit_rows = 10  # too many rows to cache: encoded per call
        st._root.commands.tables.clear()
        assert torch.equal(st[idx[:30]]["ü"], idx[:30].float())
        assert not st._root.commands.tables
    finally:
        st.clear_redis()


def test_two_batch_dims_and_edge_indices(kw):
    g = torch.Generator().manual_seed(7)
    local = TensorDict(a=torch.randn(4, 5, 3, generator=g), b=torch.randint(9, (4, 5), generator=g),
                       c=torch.randn(4, 5, 2, generator=g).to(torch.complex64), batch_size=[4, 5])
    st = TensorDictStore.from_tensordict(local, **kw)
    try:
        assert len(_groups(st)) == 1
        for index in [(1, slice(2, 4)), (slice(None), 0), (torch.tensor([3, 0, 3]),), (slice(None), slice(None, None, 2)),
                      (torch.tensor([], dtype=torch.long),), (local["b"] > 4,)]:
            index = index if len(index) > 1 else index[0]
            assert (st[index] == local[index]).all(), index
        st[1:3, 4] = TensorDict(a=torch.zeros(2, 3), b=torch.tensor([-1, -2]), c=torch.ones(2, 2, dtype=torch.complex64), batch_size=[2])
        local[1:3, 4] = TensorDict(a=torch.zeros(2, 3), b=torch.tensor([-1, -2]), c=torch.ones(2, 2, dtype=torch.complex64), batch_size=[2])
        st[torch.tensor([0, 2]), torch.tensor([1, 1])] = 0  # a number broadcast to every leaf
        local[torch.tensor([0, 2]), torch.tensor([1, 1])] = 0
        assert (st.to_tensordict() == local).all()
        assert torch.equal(st["c"], local["c"]) and st["c"].dtype == torch.complex64
        moved = TensorDictStore.from_store(td_id=st._td_id, device="cpu", **kw)
        assert moved[0, 0]["a"].device == torch.device("cpu")
    finally:
        st.clear_redis()


def test_threads_share_a_store(grouped):
    """Threads read and write at once: the store's own connection goes to one of them at a
    time, the others use the client's pool."""
    import threading

    st, local = grouped
    errors: list = []

    def work(seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        try:
            for _ in range(30):
                idx = torch.randint(N, (16,), generator=g)
                got = st[idx]
                if not torch.equal(got["action"], local["action"][idx]):
                    errors.append("torn read")
                st[idx[:1]] = local[idx[:1]]
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(repr(err))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
