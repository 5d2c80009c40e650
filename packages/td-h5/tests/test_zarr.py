"""The Zarr backend of PersistentTensorDict, on real zarr (v3) stores on disk."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tensordict
from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.persistent import PersistentTensorDict

zarr = pytest.importorskip("zarr")
if int(zarr.__version__.split(".")[0]) < 3:  # pragma: no cover
    pytest.skip("zarr>=3 needed", allow_module_level=True)


@pytest.fixture
def data() -> TensorDict:
    return TensorDict(
        {
            "obs": torch.arange(24, dtype=torch.float32).view(6, 4),
            "nested": {"idx": torch.arange(6), "deep": {"m": torch.ones(6, 2, 3, dtype=torch.bool)}},
            "note": "hello",
        },
        batch_size=[6],
        names=["t"],
    )


def _meta(path, *parts):
    with open(os.path.join(path, *parts, "zarr.json")) as f:
        return json.load(f)


# ---------------------------------------------------------------------- round trips and layout
def test_round_trip_and_layout(tmp_path, data):
    path = str(tmp_path / "s.zarr")
    with data.to_zarr(path) as ztd:
        assert isinstance(ztd, PersistentTensorDict)
        assert ztd.batch_size == torch.Size([6]) and ztd.names == ["t"]
        assert ztd["nested"].batch_size == torch.Size([6])
        assert ztd["note"] == "hello"
        assert (ztd.to_tensordict() == data).all()
    # the layout tensordict 0.15.3 writes
    root = _meta(path)
    assert root["attributes"]["__tensordict__"] == {"batch_size": [6], "version": 1, "names": ["t"]}
    assert "consolidated_metadata" in root
    note = _meta(path, "note")
    assert note["data_type"] == "uint8"
    assert note["attributes"]["__tensordict_non_tensor__"] == {"encoding": "json"}
    obs = _meta(path, "obs")
    assert obs["chunk_grid"]["configuration"]["chunk_shape"] == [6, 4]
    assert [c["name"] for c in obs["codecs"]] == ["bytes"]  # no compression by default
    back = tensordict.from_zarr(path)
    assert (back["nested", "deep", "m"] == data["nested", "deep", "m"]).all()
    back.close()


def test_reads_a_store_in_tensordict_015_layout(tmp_path):
    """A store laid out as tensordict 0.15.3 writes it (built here with plain zarr) loads."""
    path = str(tmp_path / "old.zarr")
    root = zarr.open_group(path, mode="w")
    root.attrs["__tensordict__"] = {"batch_size": [3, 4], "version": 1, "names": ["x", "y"]}
    a = root.create_array("a", shape=(3, 4), dtype="float32")
    a[...] = np.arange(12, dtype=np.float32).reshape(3, 4)
    sub = root.create_group("b")
    sub.attrs["__tensordict__"] = {"batch_size": [3, 4, 5], "version": 1, "names": ["x", "y", None]}
    c = sub.create_array("c", shape=(3, 4, 5), dtype="int64")
    c[...] = np.arange(60).reshape(3, 4, 5)
    payload = json.dumps({"k": [1, 2]}).encode()
    s = root.create_array("s", shape=(len(payload),), dtype="uint8", attributes={"__tensordict_non_tensor__": {"encoding": "json"}})
    s[...] = np.frombuffer(payload, dtype=np.uint8)
    st = root.create_array("st", shape=(3, 4), dtype=str, attributes={"__tensordict_stack__": [3, 4]})
    st[...] = np.array([f"s{i}" for i in range(12)], dtype=object).reshape(3, 4)
    with TensorDict.from_zarr(path) as td:
        assert td.batch_size == torch.Size([3, 4]) and td.names == ["x", "y"]
        assert td["b"].batch_size == torch.Size([3, 4, 5])
        assert td["s"] == {"k": [1, 2]}
        assert isinstance(td.get("st"), NonTensorStack) and td["st"][1] == ["s4", "s5", "s6", "s7"]
        assert td[2, 1]["st"] == "s9"
        assert td[1:, 2]["b", "c"].tolist() == c[1:, 2].tolist()


def test_foreign_store_batch_size_is_inferred(tmp_path):
    root = zarr.open_group(str(tmp_path / "f.zarr"), mode="w")
    root.create_array("x", shape=(5, 2), dtype="int32")[...] = np.ones((5, 2), np.int32)
    root.create_group("g").create_array("y", shape=(5, 7), dtype="float64")
    td = TensorDict.from_zarr(tmp_path / "f.zarr")
    assert td.batch_size == torch.Size([5])  # the leading shape every array shares
    assert td["g"].batch_size == torch.Size([5, 7])
    assert TensorDict.from_zarr(tmp_path / "f.zarr", auto_batch_size=True, batch_dims=0).batch_size == torch.Size([])


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int16, torch.int64, torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.float64, torch.complex64])
def test_dtypes(tmp_path, dtype):
    value = torch.arange(4).to(dtype)
    TensorDict(x=value, batch_size=[4]).to_zarr(tmp_path / "d.zarr").close()
    back = TensorDict.from_zarr(tmp_path / "d.zarr")["x"]
    assert back.dtype == dtype and (back == value).all()


def test_chunks_and_compressors_reach_every_leaf(tmp_path):
    from zarr.codecs import ZstdCodec

    td = TensorDict({"img": torch.zeros(32, 3, 2), "lbl": torch.zeros(32), "n": {"z": torch.zeros(32, 5)}}, [32])
    td.to_zarr(tmp_path / "c.zarr", chunks=(8,), compressors=ZstdCodec(level=1)).close()
    root = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")
    assert root["img"].chunks == (8, 3, 2) and root["lbl"].chunks == (8,) and root["n/z"].chunks == (8, 5)
    assert root["img"].compressors


# ---------------------------------------------------------------------- lazy reads and writes
def test_indexing_reads_rows(tmp_path, data):
    with data.to_zarr(tmp_path / "i.zarr") as ztd:
        for index in (2, slice(1, 5, 2), torch.tensor([4, 0, 4]), torch.tensor([True, False] * 3), [5, 1]):
            assert (ztd.get_at("obs", index) == data["obs"][index]).all()
            assert (ztd[index]["nested", "idx"] == data["nested", "idx"][index]).all()


def test_writes_go_to_the_store(tmp_path, data):
    path = tmp_path / "w.zarr"
    with data.to_zarr(path) as ztd:
        ztd[1:3] = TensorDict({"obs": torch.full((2, 4), -1.0)}, [2])
        ztd.set_at_(("nested", "idx"), torch.tensor(9), 0)
        ztd["new"] = torch.ones(6, 2)
        ztd.set("label", NonTensorData("cat", batch_size=[6]))
        ztd.rename_key_("new", "renamed")
        ztd.del_("note")
        with pytest.warns(UserWarning, match="Replacing an array"):
            ztd.set("obs", torch.zeros(6, 4, dtype=torch.float64))
    # a fresh reader (through the refreshed consolidated metadata) sees every change
    with TensorDict.from_zarr(path) as back:
        assert set(back.keys()) == {"obs", "nested", "renamed", "label"}
        assert back["obs"].dtype == torch.float64
        assert back["nested", "idx"][0] == 9
        assert back["label"] == "cat"
    plain = zarr.open_group(str(path), mode="r")
    assert "note" not in plain.metadata.consolidated_metadata.metadata


def test_read_only_store_refuses_writes(tmp_path, data):
    data.to_zarr(tmp_path / "r.zarr").close()
    with TensorDict.from_zarr(tmp_path / "r.zarr") as ztd, pytest.raises(RuntimeError, match="read-only"):
        ztd["obs"] = torch.zeros(6, 4)


def test_pickle_and_processes_reopen_the_store(tmp_path, data):
    with data.to_zarr(tmp_path / "p.zarr") as ztd:
        view = ztd[torch.tensor([3, 1])]
        again = pickle.loads(pickle.dumps(view))
        assert (again["obs"] == data["obs"][torch.tensor([3, 1])]).all()
        again.close()


def test_zip_store(tmp_path, data):
    from zarr.storage import ZipStore

    ztd = data.to_zarr(ZipStore(str(tmp_path / "s.zip"), mode="w"))
    ztd.close()
    with TensorDict.from_zarr(ZipStore(str(tmp_path / "s.zip"), mode="r")) as back:
        assert (back.to_tensordict() == data).all()


def test_from_schema(tmp_path):
    td = TensorDict.from_schema({"o": ([2], torch.float32)}, batch_size=[4], storage="zarr", filename=str(tmp_path / "f.zarr"))
    td[1] = TensorDict({"o": torch.ones(2)}, [])
    assert td["o"].sum() == 2
    td.close()


# ---------------------------------------------------------------------- pickles and bad input
class _Boom:
    """Unpickling it would create the file named by ``target``: the tests check that it is not created."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_pickled_entry_needs_allow_pickle(tmp_path):
    target = str(tmp_path / "executed")
    data = TensorDict({"a": torch.zeros(2), "obj": NonTensorData(_Boom(target), batch_size=[2])}, [2])
    path = tmp_path / "p.zarr"
    data.to_zarr(path).close()
    assert _meta(str(path), "obj")["attributes"]["__tensordict_non_tensor__"] == {"encoding": "pickle"}
    with TensorDict.from_zarr(path) as td:
        assert (td["a"] == 0).all()  # the rest of the store reads
        with pytest.raises(RuntimeError, match=r"Refusing to load pickled.*'/obj'.*p\.zarr"):
            td["obj"]
        with pytest.raises(RuntimeError, match="allow_pickle=True"):
            td.to_tensordict()
    assert not os.path.exists(target)  # nothing executed
    with TensorDict.from_zarr(path, allow_pickle=True) as td:
        td["obj"]
    assert os.path.exists(target)  # with allow_pickle=True the payload is unpickled (trusted data)


def test_allow_pickle_false_refuses_to_write_objects(tmp_path):
    td = TensorDict({"a": torch.zeros(2), "obj": NonTensorData(object(), batch_size=[2])}, [2])
    with pytest.raises(TypeError, match="'obj'.*allow_pickle"):
        td.to_zarr(tmp_path / "n.zarr", allow_pickle=False)
    assert not (tmp_path / "n.zarr").exists()
    with pytest.raises(TypeError, match="allow_pickle must be a bool"):
        TensorDict.from_zarr(tmp_path / "n.zarr", allow_pickle="yes")


def test_bfloat16_is_refused_before_writing(tmp_path, data):
    path = tmp_path / "b.zarr"
    data.to_zarr(path).close()
    bad = data.clone()
    bad["h"] = torch.zeros(6, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="'h'.*bfloat16"):
        bad.to_zarr(path)
    with TensorDict.from_zarr(path) as back:  # the earlier store is intact
        assert (back.to_tensordict() == data).all()


class _PicklesOnce:
    """Pickles the first time (the pre-write check), fails the second (mid-write)."""

    calls = 0

    def __reduce__(self):
        type(self).calls += 1
        if type(self).calls > 1:
            raise OSError("disk gone")
        return (_PicklesOnce, ())


def test_failed_write_leaves_earlier_store_intact(tmp_path, data):
    path = tmp_path / "a.zarr"
    data.to_zarr(path).close()
    _PicklesOnce.calls = 0
    bad = data.clone()
    bad["zz"] = NonTensorData(_PicklesOnce(), batch_size=[6])
    with pytest.raises(TypeError, match="'zz'"):
        bad.to_zarr(path)
    assert _PicklesOnce.calls == 2  # it failed while the new store was being written
    assert sorted(os.listdir(tmp_path)) == ["a.zarr"]  # no half-written store left behind
    with TensorDict.from_zarr(path) as back:
        assert (back.to_tensordict() == data).all()


def test_metadata_naming_a_path_outside_the_store(tmp_path, data):
    path = str(tmp_path / "evil.zarr")
    data.to_zarr(path).close()
    meta = _meta(path)
    entries = meta["consolidated_metadata"]["metadata"]
    entries["../outside"] = entries["obs"]
    with open(os.path.join(path, "zarr.json"), "w") as f:
        json.dump(meta, f)
    with pytest.raises(ValueError, match=r"evil\.zarr.*'\.\./outside'.*outside the store"):
        TensorDict.from_zarr(path)
    from zarr.storage import LocalStore

    with pytest.raises(ValueError, match="outside the store"):
        TensorDict.from_zarr(LocalStore(path, read_only=True))
    with pytest.raises(ValueError, match="outside the store"):
        TensorDict.from_zarr(path, mode="r+")


def test_shape_disagreeing_with_chunks(tmp_path, data):
    path = str(tmp_path / "bad.zarr")
    data.to_zarr(path).close()
    meta = _meta(path, "obs")
    meta["chunk_grid"]["configuration"]["chunk_shape"] = [6]  # rank 1 chunks for a rank 2 array
    with open(os.path.join(path, "obs", "zarr.json"), "w") as f:
        json.dump(meta, f)
    root = _meta(path)
    del root["consolidated_metadata"]
    with open(os.path.join(path, "zarr.json"), "w") as f:
        json.dump(root, f)
    with pytest.raises(ValueError, match=r"bad\.zarr.*'/obs'.*invalid"):
        list(TensorDict.from_zarr(path).keys())


def test_truncated_chunk_names_the_array(tmp_path, data):
    path = str(tmp_path / "t.zarr")
    data.to_zarr(path).close()
    chunk = os.path.join(path, "obs", "c", "0", "0")
    with open(chunk, "r+b") as f:
        f.truncate(10)
    with TensorDict.from_zarr(path) as td, pytest.raises(ValueError, match=r"t\.zarr.*'/obs'"):
        td["obs"]


def test_oversized_non_tensor_payload_is_refused(tmp_path):
    path = str(tmp_path / "big.zarr")
    root = zarr.open_group(path, mode="w")
    root.attrs["__tensordict__"] = {"batch_size": [], "version": 1}
    root.create_array("s", shape=(1 << 40,), dtype="uint8", chunks=(1 << 20,), attributes={"__tensordict_non_tensor__": {"encoding": "json"}})
    with TensorDict.from_zarr(path) as td, pytest.raises(ValueError, match="'/s'.*refusing"):
        td["s"]


def test_not_a_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TensorDict.from_zarr(tmp_path / "missing.zarr")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="not a Zarr store"):
        TensorDict.from_zarr(tmp_path / "plain")


# ---------------------------------------------------------------------- optional dependency
def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_tensordict_does_not_import_zarr():
    out = _run("import sys, tensordict, tensordict.persistent; print('zarr' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_missing_zarr_names_the_install_line(tmp_path):
    code = (
        "import sys; sys.modules['zarr'] = None\n"
        "import torch, tensordict\n"
        "td = tensordict.TensorDict(a=torch.zeros(2), batch_size=[2])\n"
        f"try:\n    td.to_zarr({str(tmp_path / 'x.zarr')!r})\n"
        "except ImportError as e:\n    print('IMPORTERROR', e)\n"
        f"try:\n    tensordict.from_zarr({str(tmp_path / 'x.zarr')!r})\n"
        "except ImportError as e:\n    print('IMPORTERROR', e)\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("IMPORTERROR")]
    assert len(lines) == 2
    assert all('pip install "td-h5[zarr]"' in line for line in lines)
    assert not (tmp_path / "x.zarr").exists()


def test_no_warnings_on_a_plain_round_trip(tmp_path, data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data.to_zarr(tmp_path / "q.zarr").close()
        TensorDict.from_zarr(tmp_path / "q.zarr").to_tensordict()


def test_save_kwargs_apply_to_arrays_added_later(tmp_path):
    from zarr.codecs import ZstdCodec

    td = TensorDict({"a": torch.zeros(64, 3)}, [64])
    with td.to_zarr(tmp_path / "k.zarr", chunks=(16,), compressors=ZstdCodec()) as ztd:
        ztd["b"] = torch.ones(64, 2)
        ztd.set("c", torch.ones(64))
    root = zarr.open_group(str(tmp_path / "k.zarr"), mode="r")
    assert root["b"].chunks == (16, 2) and root["c"].chunks == (16,)
    assert root["b"].compressors and root["c"].compressors


def test_new_store_opened_with_mode_w(tmp_path):
    path = tmp_path / "new.zarr"
    ztd = PersistentTensorDict(filename=path, batch_size=[3], mode="w", backend="zarr")
    ztd["a", "b"] = torch.zeros(3, 4)
    ztd["a", "b"] += 1
    ztd["s"] = "text"
    ztd.close()
    assert _meta(str(path))["attributes"]["__tensordict__"]["batch_size"] == [3]
    with PersistentTensorDict(filename=path, group="a", backend="zarr") as sub:
        assert sub.batch_size == torch.Size([3]) and (sub["b"] == 1).all()
    with pytest.raises(FileExistsError):
        PersistentTensorDict(filename=path, batch_size=[3], mode="w-", backend="zarr")


def test_declared_shape_beyond_memory_is_refused(tmp_path):
    path = str(tmp_path / "huge.zarr")
    root = zarr.open_group(path, mode="w")
    root.attrs["__tensordict__"] = {"batch_size": [1 << 40], "version": 1}
    root.create_array("x", shape=(1 << 40, 1 << 10), dtype="float32", chunks=(1 << 10, 1 << 10))
    with TensorDict.from_zarr(path) as td:
        with pytest.raises(MemoryError, match=r"huge\.zarr.*'/x'.*get_at"):
            td["x"]
        assert td.get_at("x", 5).shape == (1 << 10,)  # a row still reads (missing chunks: zeros)


def test_store_objects(tmp_path, data):
    from zarr.storage import LocalStore

    data.to_zarr(LocalStore(str(tmp_path / "l.zarr"))).close()
    with TensorDict.from_zarr(LocalStore(str(tmp_path / "l.zarr"))) as td:  # mode="r" by default
        assert (td["obs"] == data["obs"]).all()
        with pytest.raises(RuntimeError, match="read-only"):
            td["obs"] = torch.zeros(6, 4)
    with TensorDict.from_zarr(LocalStore(str(tmp_path / "l.zarr")), mode="r+") as td:
        td["obs"] = torch.zeros(6, 4)
    assert (TensorDict.from_zarr(tmp_path / "l.zarr")["obs"] == 0).all()
