"""TensorDictStore's API against a real redis-server: reads, writes, indexing, nested
keys, non-tensor data, constructors, reconnecting, pickling, tensorclasses."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict, lazy_stack
from tensordict.store import STORE_BACKENDS, LazyStackedTensorDictStore, TensorDictStore


@pytest.fixture
def store(kw):
    st = TensorDictStore(batch_size=[10], **kw)
    yield st
    st.clear_redis()
    st.close()


def test_set_get_dtypes(store):
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
                  torch.int32, torch.int64, torch.bool, torch.complex64):
        t = (torch.randn(10, 2) * 10).to(dtype)
        store[str(dtype)] = t
        out = store[str(dtype)]
        assert out.dtype == dtype and torch.equal(out, t)


def test_nested_and_keys(store):
    store["a", "b", "c"] = torch.arange(10)
    store["x"] = torch.zeros(10, 3)
    assert isinstance(store["a"], TensorDictStore)
    assert isinstance(store["a", "b"], TensorDictStore)
    assert set(store.keys(True, True)) == {("a", "b", "c"), "x"}
    assert torch.equal(store["a"]["b"]["c"], torch.arange(10))
    store["a", "b", "d"] = torch.ones(10)
    assert set(store["a", "b"].keys()) == {"c", "d"}
    del store["a", "b", "c"]
    assert set(store.keys(True, True)) == {("a", "b", "d"), "x"}
    store.rename_key_("x", "y")
    assert "y" in store.keys() and "x" not in store.keys()


def test_batch_mismatch_and_lock(store):
    with pytest.raises(RuntimeError):
        store["bad"] = torch.zeros(3)
    store["a"] = torch.zeros(10)
    store.lock_()
    with pytest.raises(RuntimeError):
        store["new"] = torch.zeros(10)
    store.unlock_()


@pytest.mark.parametrize(
    "index",
    [3, -1, slice(2, 7), slice(1, None, 3), torch.tensor([9, 0, 4, 4]), [1, 5], torch.arange(10) % 3 == 0, ...],
    ids=["int", "neg", "slice", "step", "tensor", "list", "mask", "ellipsis"],
)
def test_indexed_read_write(store, index):
    local = TensorDict(obs=torch.randn(10, 4), n={"r": torch.arange(10)}, batch_size=[10])
    store.update(local)
    got = store[index]
    assert isinstance(got, TensorDict)
    assert (got == local[index]).all()
    if isinstance(index, torch.Tensor) and index.dtype is torch.long:
        index = torch.tensor([9, 0, 4])  # duplicate positions: unspecified winner, as in torch
    new = local[index].apply(lambda t: -t - 1)  # distinct values per row: a misplaced row shows
    store[index] = new
    local[index] = new
    assert (store.to_tensordict() == local).all()


def test_multi_dim_batch(kw):
    local = TensorDict(a=torch.arange(24).view(4, 3, 2), b=torch.randn(4, 3), batch_size=[4, 3])
    st = TensorDictStore.from_tensordict(local, **kw)
    try:
        for idx in [(1, 2), (slice(None), 1), (torch.tensor([3, 0]),), (slice(1, 3), slice(0, 2))]:
            assert (st[idx] == local[idx]).all()
        st[1:3, 0] = TensorDict(a=torch.full((2, 2), -1), b=torch.zeros(2), batch_size=[2])
        local[1:3, 0] = TensorDict(a=torch.full((2, 2), -1), b=torch.zeros(2), batch_size=[2])
        assert (st.to_tensordict() == local).all()
    finally:
        st.clear_redis()


def test_set_at_fill_update_apply(store):
    store["obs"] = torch.zeros(10, 3)
    store.set_at_("obs", torch.ones(3), 4)
    assert store["obs"][4].sum() == 3 and store["obs"].sum() == 3
    store.fill_("obs", 2.0)
    assert (store["obs"] == 2).all()
    store.update({"act": torch.ones(10, 2)})
    store.update_(TensorDict(act=torch.full((10, 2), 5.0), batch_size=[10]))
    assert (store["act"] == 5).all()
    doubled = store.apply(lambda t: t * 2)
    assert isinstance(doubled, TensorDict) and (doubled["act"] == 10).all()


def test_write_failure_leaves_data_intact(store):
    store["obs"] = torch.arange(30.0).view(10, 3)
    bad = TensorDict(obs=torch.zeros(3, 5), batch_size=[3])  # wrong feature shape
    with pytest.raises(RuntimeError, match="obs"):
        store[0:3] = bad
    assert torch.equal(store["obs"], torch.arange(30.0).view(10, 3))


def test_non_tensor_json(store):
    store["label"] = "hello"
    store.set_non_tensor("meta", {"lr": 0.1, "layers": [1, 2]})
    assert store["label"] == "hello"
    assert store.get_non_tensor("meta") == {"lr": 0.1, "layers": [1, 2]}
    store[3] = TensorDict(label="three", batch_size=[])
    assert store[3]["label"] == "three" and store[2]["label"] == "hello"
    local = store.to_tensordict()
    assert [local[i]["label"] for i in (2, 3)] == ["hello", "three"]


def test_from_schema_zero_filled(kw, client):
    st = TensorDictStore.from_schema(
        {"obs": ([64], torch.float32), ("n", "done"): ([], torch.bool)}, batch_size=[100], **kw
    )
    try:
        assert st["obs"].shape == (100, 64) and not st["obs"].any()
        assert st["n", "done"].dtype is torch.bool
        st[torch.tensor([5, 50])] = TensorDict(obs=torch.ones(2, 64), n={"done": torch.ones(2, dtype=torch.bool)}, batch_size=[2])
        assert st["obs"].sum() == 128 and st["n", "done"].sum() == 2
        # every key of one TensorDict carries its id as a hash tag (one cluster slot)
        keys = [k.decode() for k in client.keys(f"*{st._td_id}*")]
        assert keys and all(f"{{{st._td_id}}}" in k for k in keys)
    finally:
        st.clear_redis()


def test_write_to_empty_store_at_index(store):
    store[2] = TensorDict(obs=torch.ones(4), tag="x", batch_size=[])
    assert store["obs"].shape == (10, 4) and store["obs"].sum() == 4
    assert store[2]["tag"] == "x" and store[0]["tag"] is None


def test_from_store_other_process(store, redis_server):
    store["obs"] = torch.arange(10.0)
    code = (
        "import torch, sys; from tensordict.store import TensorDictStore;"
        f"st = TensorDictStore.from_store(td_id='{store._td_id}', host='127.0.0.1', port={redis_server.port});"
        "st[0:2] = {'obs': torch.tensor([-1.0, -2.0])}; print(st['obs'].sum().item())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 45.0 - 1 - 3
    assert store["obs"][:2].tolist() == [-1.0, -2.0]
    with pytest.raises(KeyError, match="No TensorDictStore"):
        TensorDictStore.from_store(td_id="missing", host="127.0.0.1", port=redis_server.port)


def test_pickle_is_a_handle(store):
    store["obs"] = torch.zeros(10, 100_000)
    blob = pickle.dumps(store)
    assert len(blob) < 2000  # the data stays on the server
    other = pickle.loads(blob)
    other[0] = TensorDict(obs=torch.ones(100_000), batch_size=[])
    assert store["obs"][0].sum() == 100_000
    other.close()


def test_clone(store):
    store["obs"] = torch.arange(10)
    deep = store.clone()
    try:
        assert deep._td_id != store._td_id
        deep["obs"] = torch.zeros(10, dtype=torch.long)
        assert store["obs"].sum() == 45
        shallow = store.clone(False)
        assert shallow._td_id == store._td_id
    finally:
        deep.clear_redis()


def test_to_store_seam_and_lazy(kw):
    st = TensorDict(a=torch.ones(3), batch_size=[3]).to_store(**kw)
    assert isinstance(st, TensorDictStore) and st._backend == "redis"
    st.clear_redis()
    tds = [TensorDict(a=torch.full((2, i + 1), float(i)), t=str(i), batch_size=[2]) for i in range(3)]
    ls = lazy_stack(tds).to_store(**kw)
    try:
        assert isinstance(ls, LazyStackedTensorDictStore) and ls.batch_size == (3, 2)
        assert torch.equal(ls[2]["a"], tds[2]["a"]) and ls[1]["t"] == "1"
        sub = ls[torch.tensor([2, 0])]
        assert isinstance(sub, LazyStackedTensorDict) and torch.equal(sub[0]["a"], tds[2]["a"])
        view = ls[1]
        view["a"] = torch.full((2, 2), 9.0)
        assert (ls[1]["a"] == 9).all()
        with pytest.raises(RuntimeError, match="shape is fixed"):
            view["a"] = torch.zeros(2, 5)
        ls[0] = TensorDict(a=torch.full((2, 1), 4.0), t="four", batch_size=[2])
        assert (ls[0]["a"] == 4).all() and ls[0]["t"] == "four"
        again = pickle.loads(pickle.dumps(ls))
        assert again._count == 3 and (again[1]["a"] == 9).all()
    finally:
        ls.clear_redis()


try:  # td-tensorclass is not a dependency of td-store: `nox -s "tests(store, cpu)"` runs without it
    from tensordict.tensorclass import tensorclass
except ImportError:
    tensorclass = None

if tensorclass is not None:

    @tensorclass
    class _Sample:
        obs: torch.Tensor
        name: str


@pytest.mark.skipif(tensorclass is None, reason="td-tensorclass is not installed")
def test_tensorclass_roundtrip(kw):
    tc = _Sample(obs=torch.randn(4, 2), name="s", batch_size=[4])
    st = tc.to_store(**kw)
    try:
        assert isinstance(st, _Sample) and torch.equal(st.obs, tc.obs)
        back = TensorDictStore.from_store(td_id=st._tensordict._td_id, **kw)
        assert isinstance(back, _Sample) and back.name == "s"
    finally:
        st._tensordict.clear_redis()


def test_names_and_imports():
    assert set(STORE_BACKENDS.__args__) == {"redis", "dragonfly"}
    code = (
        "import sys, tensordict, torch; td = tensordict.TensorDict(a=torch.zeros(2), batch_size=[2]);"
        "assert 'redis' not in sys.modules and 'tensordict.store' not in sys.modules, 'eager import'"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_install_hint_without_td_store():
    code = (
        "import sys; sys.modules['tensordict.store'] = None; import torch, tensordict;"
        "td = tensordict.TensorDict(a=torch.zeros(2), batch_size=[2])\n"
        "try:\n    td.to_store()\nexcept ImportError as e:\n    print(e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "td-store" in out.stdout, out.stdout + out.stderr


def test_nontensor_data_type(store):
    store["x"] = torch.zeros(10)
    store.set_non_tensor("s", "v")
    assert store.entry_class("s") is NonTensorData
    assert store.entry_class("x") is torch.Tensor


def test_given_client(redis_server):
    import redis

    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    st = TensorDictStore(batch_size=[3], client=client)
    try:
        st["a"] = torch.arange(3)
        st.close()  # a client passed in stays open
        assert client.ping()
        assert torch.equal(st[1:]["a"], torch.tensor([1, 2]))
        again = pickle.loads(pickle.dumps(st))  # rebuilt from the client's host and port
        assert torch.equal(again["a"], torch.arange(3)) and again._root.conn.port == redis_server.port
    finally:
        st.clear_redis()
        client.close()


def test_inplace_math_writes_back(store, kw):
    store["a"] = torch.ones(10)
    store["n", "b"] = torch.ones(10, 2)
    store.mul_(3)
    assert (store["a"] == 3).all() and (store["n", "b"] == 3).all()
    store += 1
    assert (store["a"] == 4).all()
    store["n"].zero_()
    assert store["n", "b"].sum() == 0 and (store["a"] == 4).all()
    ls = lazy_stack([TensorDict(x=torch.ones(2, i + 1), batch_size=[2]) for i in range(3)]).to_store(**kw)
    try:
        ls.add_(1)
        assert (ls[2]["x"] == 2).all()
        ls[1].mul_(5)
        assert (ls[1]["x"] == 10).all() and (ls[0]["x"] == 2).all()
    finally:
        ls.clear_redis()
