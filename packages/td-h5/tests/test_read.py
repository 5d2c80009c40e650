"""Opening files and reading entries: batch sizes, dtypes, nesting, non-tensor data."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.persistent import PersistentTensorDict


def test_roundtrip_values(h5file, td):
    with PersistentTensorDict.from_h5(h5file) as p:
        assert p.batch_size == td.batch_size
        assert set(p.keys()) == set(td.keys())
        for key in td.keys(True, True):
            if key == "label":
                assert p[key] == b"experiment-1"
                continue
            got = p.get(key)
            assert isinstance(got, torch.Tensor)
            assert got.dtype == td[key].dtype
            assert torch.equal(got, td[key]), key
        assert isinstance(p["nested"], PersistentTensorDict)
        assert p["nested"].batch_size == torch.Size([10])


def test_get_returns_fresh_tensor_each_time(ptd):
    a = ptd["obs"]
    a.zero_()
    assert ptd["obs"].sum() > 0


@pytest.mark.parametrize(
    "dtype",
    [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
     torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.uint16],
)
def test_dtypes_roundtrip(tmp_path, dtype):
    if dtype.is_complex:
        value = torch.randn(4, 2, dtype=dtype)
    elif dtype is torch.bool:
        value = torch.tensor([[True, False]] * 4)
    elif dtype.is_floating_point:
        value = torch.randn(4, 2).to(dtype)
    else:
        value = torch.arange(8).view(4, 2).to(dtype)
    with TensorDict(v=value, batch_size=[4]).to_h5(tmp_path / "d.h5") as p:
        assert p["v"].dtype == dtype
        assert torch.equal(p["v"], value)
        assert p[1:3]["v"].dtype == dtype


def test_batch_size_inference_and_batch_dims(grid_file):
    with PersistentTensorDict.from_h5(grid_file) as p:
        assert p.batch_size == torch.Size([4, 5])
        assert p["g"].batch_size == torch.Size([4, 5, 3])
    with PersistentTensorDict.from_h5(grid_file, auto_batch_size=True, batch_dims=1) as p:
        assert p.batch_size == torch.Size([4])
        assert p["g"].batch_size == torch.Size([4])
    with PersistentTensorDict.from_h5(grid_file, batch_dims=1) as p:
        assert p.batch_size == torch.Size([4])
    with PersistentTensorDict.from_h5(grid_file, batch_size=[4]) as p:
        assert p.batch_size == torch.Size([4])
        assert p["y"].shape == torch.Size([4, 5])


def test_stored_batch_size_wins_over_inference(tmp_path):
    td = TensorDict(a=torch.zeros(3, 4), b={"c": torch.zeros(3, 4, 5)}, batch_size=[3])
    path = tmp_path / "s.h5"
    td.to_h5(path).close()
    with PersistentTensorDict.from_h5(path) as p:
        assert p.batch_size == torch.Size([3])
        assert p["b"].batch_size == torch.Size([3])
    with PersistentTensorDict.from_h5(path, auto_batch_size=True) as p:
        assert p.batch_size == torch.Size([3, 4])
        assert p["b"].batch_size == torch.Size([3, 4, 5])


def test_explicit_batch_size_on_constructor(grid_file):
    with PersistentTensorDict(filename=grid_file, batch_size=[4, 5]) as p:
        assert p.batch_size == torch.Size([4, 5])
        assert p["g", "z"].shape == torch.Size([4, 5, 3])


def test_open_a_group_and_wrap_h5py_group(grid_file):
    with PersistentTensorDict(filename=grid_file, group="g") as p:
        assert list(p.keys()) == ["z"]
        assert p.batch_size == torch.Size([4, 5, 3])
    f = h5py.File(grid_file, "r")
    p = PersistentTensorDict(group=f["g"], batch_size=[4])
    assert p["z"].shape == torch.Size([4, 5, 3])
    assert p.file is f["g"] or p.file.name == "/g"
    p.close()
    assert not f.id.valid


def test_names_roundtrip(tmp_path):
    td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3], names=["env", "time"])
    with td.to_h5(tmp_path / "n.h5") as p:
        assert p.names == ["env", "time"]
        assert p.to_tensordict().names == ["env", "time"]
        assert p[0].names == [None]


def test_non_tensor_data(tmp_path):
    path = tmp_path / "nt.h5"
    td = TensorDict(a=torch.zeros(3), text="hello", nothing=None, batch_size=[3])
    td.set("items", NonTensorData([1, 2, 3], batch_size=[3]))
    td.set("number", NonTensorData(3, batch_size=[3]))
    td.set("flag", NonTensorData(True, batch_size=[3]))
    with td.to_h5(path) as p:
        assert p["text"] == b"hello"  # str in, bytes out (as tensordict)
        assert p["number"] == 3
        assert p["flag"] is True
        assert p["nothing"] is None
        assert p["items"] == [1, 2, 3]
        raw = p._get_raw("text")
        assert isinstance(raw, NonTensorData) and raw.batch_size == torch.Size([3])
        assert p[1:]._get_raw("text").batch_size == torch.Size([2])
    with h5py.File(path, "r") as f:
        assert f.attrs["text"] == b"hello"
        assert "text" not in f


def test_non_tensor_stack_roundtrip(tmp_path):
    td = TensorDict(a=torch.arange(3), batch_size=[3])
    td.set("names", NonTensorStack("x", "y", "z"))
    with td.to_h5(tmp_path / "st.h5") as p:
        raw = p._get_raw("names")
        assert isinstance(raw, NonTensorStack)
        assert p["names"] == ["x", "y", "z"]
        assert p[torch.tensor([2, 0])]["names"] == ["z", "x"]
        assert p[1]["names"] == "y"


def test_string_dataset_as_stack_option(tmp_path):
    path = tmp_path / "strings.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
        f["names"] = np.array(["a", "bb", "ccc"], dtype=h5py.string_dtype())
    with PersistentTensorDict.from_h5(path) as p:
        assert p["names"] == ["a", "bb", "ccc"]
        assert isinstance(p._get_raw("names"), NonTensorData)
    with PersistentTensorDict.from_h5(path, non_tensor_as_stack=True) as p:
        assert isinstance(p._get_raw("names"), NonTensorStack)
        assert p[2]["names"] == "ccc"


def test_keys_views_and_contains(ptd):
    assert set(ptd.keys()) == {"obs", "reward", "done", "nested", "label"}
    leaves = set(ptd.keys(include_nested=True, leaves_only=True))  # non-tensor data is not a leaf (as td-core)
    assert leaves == {"obs", "reward", "done", ("nested", "idx"), ("nested", "half")}
    assert "label" in set(ptd.keys(True, True, is_leaf=lambda cls: not issubclass(cls, PersistentTensorDict)))
    assert ("nested", "idx") in ptd.keys(True)
    assert ("nested", "idx") in ptd
    assert ("nested", "missing") not in ptd
    assert "nested" not in ptd.keys(leaves_only=True)
    assert len(ptd.keys(True)) == 7
    assert ptd.keys(sort=True)[0] == "done"
    assert ("obs", "x") not in ptd


def test_keys_do_not_read_data(ptd):
    # A dataset whose shape breaks the batch size only fails when it is read.
    ptd.file.create_dataset("bad", data=np.zeros(7))
    assert "bad" in ptd.keys()
    assert "bad" in set(ptd.keys(True, True))
    with pytest.raises(RuntimeError, match="bad"):
        ptd["bad"]


def test_get_item_shape_and_repr(ptd):
    assert ptd.get_item_shape("obs") == torch.Size([10, 3])
    assert ptd[2:5].get_item_shape(("nested", "half")) == torch.Size([3, 2])
    assert ptd.get_item_shape("nested") == torch.Size([10])
    text = repr(ptd[1:3])
    assert text.startswith("PersistentTensorDict(")
    assert "obs: Tensor(shape=torch.Size([2, 3]), device=cpu, dtype=torch.float32" in text
    assert "batch_size=torch.Size([2])" in text


def test_device_reads_land_on_device(h5file, device):
    with PersistentTensorDict(filename=h5file, device=device) as p:
        assert p.device == device
        assert p["obs"].device.type == device.type
        assert p[1:3]["nested", "idx"].device.type == device.type
        out = p.to_tensordict()
        assert out["obs"].device.type == device.type


def test_scalar_dataset_batchless(tmp_path):
    path = tmp_path / "scalar.h5"
    with h5py.File(path, "w") as f:
        f["s"] = np.float32(2.5)
        f["v"] = np.arange(3)
    with PersistentTensorDict.from_h5(path) as p:
        assert p.batch_size == torch.Size([])
        assert p["s"].shape == torch.Size([])
        assert p["s"].item() == 2.5
        assert p[None]["s"].shape == torch.Size([1])
