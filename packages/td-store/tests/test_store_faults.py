"""A shared server is a trust boundary, and servers fail: planted values, pickles,
passwords, killed servers, reconnects, atomic writes, concurrent writers and readers."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import threading
import time

import pytest
import torch

from tensordict import TensorDict
from tensordict.store import (
    StoreAuthenticationError,
    StoreConnectionError,
    StoreDataError,
    TensorDictStore,
)


@pytest.fixture
def store(kw):
    st = TensorDictStore(batch_size=[4], **kw)
    st["obs"] = torch.arange(8.0).view(4, 2)
    yield st
    st.clear_redis()
    st.close()


def _keys(st, key):
    root = st._root
    from tensordict.store._conn import path_field

    return root.data_key(path_field((key,))), root.schema_key


# ---------------------------------------------------------------------- pickles
class _Boom:
    """Unpickling it would create a file: the tests check that it never happens."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_non_json_needs_allow_pickle(kw, tmp_path):
    st = TensorDictStore(batch_size=[], **kw)
    try:
        with pytest.raises(TypeError, match="allow_pickle"):
            st["obj"] = {1, 2}  # a set is not JSON
        writer = TensorDictStore(td_id=st._td_id, allow_pickle=True, **kw)
        writer["obj"] = {1, 2}
        assert writer["obj"] == {1, 2}
        with pytest.raises(StoreDataError, match="pickled object"):
            st.get("obj")
        with pytest.raises(StoreDataError, match="pickled object"):
            st.to_tensordict()
    finally:
        st.clear_redis()


def test_planted_pickle_is_not_executed(store, client, tmp_path):
    target = tmp_path / "pwned"
    store["label"] = "ok"
    dkey, _ = _keys(store, "label")
    client.set(dkey, pickle.dumps(_Boom(str(target))))
    with pytest.raises(StoreDataError, match=r"label.*127\.0\.0\.1"):
        store.get("label")
    with pytest.raises(StoreDataError):
        store.to_tensordict()
    assert not target.exists()


def test_planted_bad_values(store, client):
    dkey, skey = _keys(store, "obs")
    server = f"127.0.0.1:{store._root.conn.port}"
    client.set(dkey, b"\x00" * 5)  # wrong length
    with pytest.raises(StoreDataError, match=rf"'obs'.*{server}.*expected 32 bytes"):
        store.get("obs")
    with pytest.raises(StoreDataError, match="expected"):
        store[1:3]
    client.hset(skey, "obs", '{"t": "tensor", "shape": [4, 2], "dtype": "object"}')  # bad dtype tag
    store._root.cache.clear()
    with pytest.raises(StoreDataError, match="dtype tag 'object'"):
        store.get("obs")
    client.hset(skey, "obs", '{"t": "tensor", "shape": [4, 1099511627775], "dtype": "float64"}')  # huge
    store._root.cache.clear()
    with pytest.raises(StoreDataError, match="larger than"):
        store.get("obs")
    client.hset(skey, "obs", b"\x80\x04not json")
    store._root.cache.clear()
    with pytest.raises(StoreDataError, match="not valid JSON"):
        store.keys()
        list(store.keys())


# ---------------------------------------------------------------------- passwords
def test_requirepass(server_factory):
    server = server_factory("--requirepass", "s3cret")
    with pytest.raises(PermissionError, match=rf"127\.0\.0\.1:{server.port}.*password"):
        TensorDictStore(batch_size=[2], host="127.0.0.1", port=server.port)
    with pytest.raises(StoreAuthenticationError, match=rf"127\.0\.0\.1:{server.port}"):
        TensorDictStore(batch_size=[2], host="127.0.0.1", port=server.port, password="wrong")
    st = TensorDictStore(batch_size=[2], host="127.0.0.1", port=server.port, password="s3cret")
    st["a"] = torch.ones(2)
    again = pickle.loads(pickle.dumps(st))  # the handle keeps the credentials
    assert again["a"].sum() == 2


# ---------------------------------------------------------------------- dead servers
def test_killed_server_and_reconnect(server_factory):
    server = server_factory()
    st = TensorDictStore(batch_size=[3], host="127.0.0.1", port=server.port, socket_timeout=5)
    st["a"] = torch.arange(3)
    server.kill()
    with pytest.raises(ConnectionError, match=rf"127\.0\.0\.1:{server.port}") as info:
        st["a"]
    assert isinstance(info.value, StoreConnectionError)
    server.start()  # same port, empty (persistence off)
    st2 = TensorDictStore(batch_size=[3], host="127.0.0.1", port=server.port, td_id=st._td_id)
    st2["a"] = torch.ones(3, dtype=torch.long)
    assert st["a"].sum() == 3  # the old handle reconnects on its next call


def test_restart_between_calls_is_not_an_error(server_factory):
    """A server restarted while the store is idle: the next indexed read, indexed write and
    whole read on the same handle succeed at once (the store's own connection is found
    closed and replaced before anything is sent)."""
    server = server_factory("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    local = TensorDict(obs=torch.randn(20, 3), step=torch.arange(20), batch_size=[20])
    st = TensorDictStore.from_tensordict(local, host="127.0.0.1", port=server.port)
    assert (st[torch.tensor([3, 1])] == local[[3, 1]]).all()
    for op in ("read", "write", "whole"):
        server.kill()
        server.start()  # the AOF brings the data back
        if op == "read":
            assert (st[torch.tensor([5, 0])] == local[[5, 0]]).all()
        elif op == "write":
            st[0:2] = local[2:4]
            local[0:2] = local[2:4].clone()
        else:
            assert (st.to_tensordict() == local).all()
            assert torch.equal(st["obs"], local["obs"])


def test_kill_during_writes_keeps_completed_ones(server_factory):
    """Each write fills every row with one value; after a SIGKILL mid-stream and a restart
    with the append-only file, the rows all hold the same completed value."""
    server = server_factory("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    st = TensorDictStore(batch_size=[2000], host="127.0.0.1", port=server.port)
    st["x"] = torch.zeros(2000, 64)
    errors: list = []
    done = [0]

    def writer() -> None:
        try:
            for v in range(1, 10_000):
                st[0:2000] = TensorDict(x=torch.full((2000, 64), float(v)), batch_size=[2000])
                done[0] = v
        except ConnectionError as err:
            errors.append(err)

    t = threading.Thread(target=writer)
    t.start()
    while done[0] < 3:
        time.sleep(0.01)
    server.kill()
    t.join(30)
    assert errors and f"127.0.0.1:{server.port}" in str(errors[0])
    server.start()
    x = TensorDictStore(td_id=st._td_id, host="127.0.0.1", port=server.port)["x"]
    assert x.min() == x.max() and x[0, 0] >= done[0]


# ---------------------------------------------------------------------- concurrency
ROWS = 10_000
WRITERS = 4


def _writer(port: int, td_id: str, w: int, passes: int) -> None:
    torch.set_num_threads(1)  # a forked child must not enter the parent's OpenMP pool
    st = TensorDictStore(td_id=td_id, host="127.0.0.1", port=port)
    rows = torch.arange(w, ROWS, WRITERS)  # disjoint, scattered rows
    for p in range(1, passes + 1):
        for chunk in rows.split(500):
            v = float(w * 1000 + p)
            st[chunk] = TensorDict(obs=torch.full((len(chunk), 16), v), tag=torch.full((len(chunk),), v), batch_size=[len(chunk)])
    st.close()


def _reader(port: int, td_id: str, seconds: float, q: mp.Queue) -> None:
    torch.set_num_threads(1)
    st = TensorDictStore(td_id=td_id, host="127.0.0.1", port=port)
    torn = 0
    reads = 0
    end = time.monotonic() + seconds
    g = torch.Generator().manual_seed(os.getpid())
    while time.monotonic() < end:
        batch = st[torch.randint(ROWS, (512,), generator=g)]
        obs, tag = batch["obs"], batch["tag"]
        torn += int(((obs != tag[:, None]).any(1)).sum())
        reads += 1
    q.put((torn, reads))
    st.close()


def test_four_writers_four_readers(kw, redis_server):
    st = TensorDictStore.from_schema({"obs": ([16], torch.float32), "tag": ([], torch.float32)}, batch_size=[ROWS], **kw)
    try:
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        passes = 3
        writers = [ctx.Process(target=_writer, args=(redis_server.port, st._td_id, w, passes)) for w in range(WRITERS)]
        readers = [ctx.Process(target=_reader, args=(redis_server.port, st._td_id, 3.0, q)) for _ in range(4)]
        for p in writers + readers:
            p.start()
        for p in writers + readers:
            p.join(120)
        codes = [p.exitcode for p in writers + readers]
        assert codes == [0] * len(codes), f"writer/reader exit codes {codes}"
        results = [q.get(timeout=10) for _ in readers]
        assert sum(r[1] for r in results) > 0
        assert sum(r[0] for r in results) == 0, "a reader saw a torn row"
        final = st.to_tensordict()
        expected = (torch.arange(ROWS) % WRITERS).float() * 1000 + passes
        assert torch.equal(final["tag"], expected), "a write was lost"
        assert torch.equal(final["obs"], expected[:, None].expand(ROWS, 16))
    finally:
        st.clear_redis()


def test_oversized_planted_value_is_refused_before_reading(store, client):
    """A leaf whose server value is far larger than its schema says is refused by its
    declared size (nothing of that size is allocated), naming the key and the server."""
    dkey, _ = _keys(store, "obs")
    client.set(dkey, b"\0" * (4 << 20))  # 4 MiB where 32 bytes are expected
    with pytest.raises(StoreDataError, match=r"obs.*127\.0\.0\.1.*4194304 bytes"):
        store.get("obs")
    with pytest.raises(StoreDataError, match="4194304"):
        store.to_tensordict()
    client.set(dkey, b"\0" * 32)
    assert store.get("obs").sum() == 0  # the dropped connection was replaced


def test_unix_socket_and_server_options(server_factory, tmp_path):
    sock = tmp_path / "redis.sock"
    server_factory("--unixsocket", str(sock), "--unixsocketperm", "700")
    st = TensorDictStore(batch_size=[2], unix_socket_path=str(sock), socket_timeout=5)
    try:
        st["a"] = torch.arange(2)
        assert st._root.conn.server.startswith("unix:")
        again = pickle.loads(pickle.dumps(st))
        assert torch.equal(again["a"], torch.arange(2))
    finally:
        st.clear_redis()
