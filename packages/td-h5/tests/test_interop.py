"""Files written by plain h5py read correctly, and files written by ``to_h5`` read with plain h5py."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict


@pytest.fixture
def foreign_file(tmp_path):
    """Written with h5py only: groups, scalars, strings, dtypes, chunks, compression, attributes."""
    path = tmp_path / "foreign.h5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "simulation run"
        f.attrs["version"] = 3
        f.attrs["coeffs"] = np.array([0.5, 1.5])
        f.attrs["fixed"] = np.bytes_(b"ascii-bytes")
        f.create_dataset("pos", data=rng.standard_normal((100, 3)).astype(np.float32), chunks=(10, 3), compression="gzip", compression_opts=4)
        f.create_dataset("vel", data=rng.standard_normal((100, 3)), compression="lzf", shuffle=True)
        f.create_dataset("id", data=np.arange(100, dtype=">i4"))  # big-endian
        f.create_dataset("flags", data=rng.integers(0, 2, 100).astype(bool))
        f.create_dataset("u8", data=np.arange(100, dtype=np.uint8), fletcher32=True)
        f.create_dataset("f16", data=np.linspace(0, 1, 100, dtype=np.float16))
        f.create_dataset("c", data=(np.arange(100) + 1j).astype(np.complex128))
        f.create_dataset("count", data=np.int64(42))
        f.create_dataset("name", data="a vlen string")
        f.create_dataset("fixed_names", data=np.array([b"ab", b"cd", b"ef"]))
        f.create_dataset("tags", data=np.array(["x"] * 100, dtype=h5py.string_dtype()))
        g = f.create_group("particles/species")
        g.attrs["kind"] = "electron"
        g.create_dataset("mass", data=np.full((100, 2), 9.1), chunks=True)
        f.create_group("empty")
        compound = np.zeros(4, dtype=[("a", "i4"), ("b", "f8")])
        f.create_dataset("records", data=compound)
    return path


def test_plain_h5py_file_reads(foreign_file):
    with h5py.File(foreign_file, "r") as f:
        expect = {k: f[k][()] for k in ("pos", "vel", "id", "flags", "u8", "f16", "c")}
        mass = f["particles/species/mass"][()]
    with PersistentTensorDict.from_h5(foreign_file) as p:
        # scalar datasets share no leading dim with the rows: batch size is []
        assert p.batch_size == torch.Size([])
        for key, value in expect.items():
            got = p[key]
            assert isinstance(got, torch.Tensor)
            np.testing.assert_array_equal(got.numpy(), value.astype(value.dtype.newbyteorder("=")))
        assert p["id"].dtype == torch.int32 and p["flags"].dtype == torch.bool
        assert p["c"].dtype == torch.complex128
        assert p["count"].item() == 42
        assert p["name"] == "a vlen string"
        assert p["fixed_names"] == ["ab", "cd", "ef"]
        assert p["title"] == "simulation run"
        assert p["version"] == 3
        assert p["coeffs"] == [0.5, 1.5]
        assert p["fixed"] == b"ascii-bytes"  # a byte string stays bytes (vlen str attrs are str)
        assert p["particles", "species", "kind"] == "electron"
        np.testing.assert_array_equal(p["particles", "species", "mass"].numpy(), mass)
        assert p["empty"].is_empty()
        assert p["records"]["a"].tolist() == [0, 0, 0, 0]  # compound: numpy structured data


def test_plain_h5py_file_with_batch_size(foreign_file):
    with h5py.File(foreign_file, "a") as f:
        del f["count"], f["name"], f["fixed_names"], f["records"]
    with PersistentTensorDict.from_h5(foreign_file) as p:
        assert p.batch_size == torch.Size([100])
        assert p["particles"].batch_size == torch.Size([100, 2])  # its only entry is a [100, 2] group
        assert p["particles", "species"].batch_size == torch.Size([100, 2])
        rows = torch.tensor([99, 5, 5, 0])
        view = p[rows]
        with h5py.File(foreign_file, "r") as f:
            np.testing.assert_array_equal(view["pos"].numpy(), f["pos"][()][rows.numpy()])
            np.testing.assert_array_equal(view["id"].numpy(), f["id"][()][rows.numpy()])
        assert view["tags"] == ["x"] * 100  # a string column stays NonTensorData by default


def test_to_h5_reads_with_plain_h5py(tmp_path):
    td = TensorDict(
        a=torch.arange(20.0).view(10, 2),
        b={"c": torch.arange(10, dtype=torch.int16), "d": torch.ones(10, 3, dtype=torch.bool)},
        e=torch.randn(10).to(torch.bfloat16),
        note="hello",
        batch_size=[10],
    )
    path = tmp_path / "mine.h5"
    td.to_h5(path, compression="gzip", compression_opts=5, chunks=True, shuffle=True).close()
    with h5py.File(path, "r") as f:
        assert set(f.keys()) == {"a", "b", "e"}
        np.testing.assert_array_equal(f["a"][()], td["a"].numpy())
        np.testing.assert_array_equal(f["b/c"][()], td["b", "c"].numpy())
        assert f["b/d"].dtype == np.bool_
        assert f["a"].compression == "gzip" and f["a"].compression_opts == 5
        assert f["a"].chunks is not None and f["a"].shuffle
        assert f.attrs["note"] == b"hello"
        assert list(f.attrs["_td_batch_size"]) == [10]
        assert f["e"].attrs["_td_dtype"] == "bfloat16" and f["e"].dtype == np.int16
        np.testing.assert_array_equal(f["e"][()], td["e"].view(torch.int16).numpy())


def test_chunk_shape_passes_to_h5py(tmp_path):
    td = TensorDict(a=torch.zeros(100, 4), s=torch.tensor(1.0), batch_size=[])
    with td.to_h5(tmp_path / "chunk.h5", chunks=(10, 4), compression="lzf") as p:
        assert p.file["a"].chunks == (10, 4)
        assert p.file["a"].compression == "lzf"
        assert p.file["s"].chunks is None  # scalars cannot be chunked: options dropped
        assert p["s"].item() == 1.0


def test_to_h5_roundtrip_through_from_h5(tmp_path):
    td = TensorDict(a=torch.randn(5, 2), b={"c": torch.arange(5)}, batch_size=[5], names=["n"])
    path = tmp_path / "rt.h5"
    td.to_h5(path).close()
    with PersistentTensorDict.from_h5(path) as p:
        back = p.to_tensordict()
    assert back.names == ["n"]
    assert (back == td).all()


def test_from_dict(tmp_path):
    with PersistentTensorDict.from_dict({"a": torch.zeros(4, 2), "b": {"c": torch.ones(4)}}, tmp_path / "fd.h5") as p:
        assert p.batch_size == torch.Size([4])
        assert p.mode == "r+"
        assert p["b", "c"].sum() == 4
    with PersistentTensorDict.from_dict({"a": torch.zeros(4, 2)}, tmp_path / "fd2.h5", batch_size=[4, 2]) as p:
        assert p.batch_size == torch.Size([4, 2])


def test_an_open_file_inside_a_pytree_is_read_through_td_h5(tmp_path):
    path = tmp_path / "inner.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(4, dtype=np.float32)
        f.create_group("g")["x"] = np.ones((4, 2), dtype=np.int64)
    with h5py.File(path, "r") as f:
        td = TensorDict.from_any(({"file": f}, torch.zeros(2)))
        inner = td["0", "file"]
        assert isinstance(inner, PersistentTensorDict)
        assert set(td.keys(True, True)) == {("0", "file", "a"), ("0", "file", "g", "x"), "1"}
        assert torch.equal(td["0", "file", "g", "x"], torch.ones(4, 2, dtype=torch.int64))
        # a group alone is read, not the whole file
        assert set(TensorDict.from_any({"g": f["g"]}).keys(True, True)) == {("g", "x")}
