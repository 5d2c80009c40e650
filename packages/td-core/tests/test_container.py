"""Construction, batch size, device, names, emptiness."""

import pytest
import torch

from tensordict import NonTensorData, TensorDict


def test_construct_nested_dict_becomes_tensordict():
    td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.ones(3)}}, batch_size=[3])
    assert isinstance(td.get("b"), TensorDict)
    assert td["b"].batch_size == torch.Size([3])
    assert td["b", "c"].shape == torch.Size([3])


@pytest.mark.parametrize("bs", [3, [3], (3,), torch.Size([3])])
def test_batch_size_forms(bs):
    td = TensorDict({"a": torch.zeros(3, 2)}, batch_size=bs)
    assert td.batch_size == torch.Size([3])
    assert isinstance(td.batch_size, torch.Size)


def test_default_batch_size_is_empty():
    td = TensorDict({"a": torch.zeros(3, 2)})
    assert td.batch_size == torch.Size([])
    assert td.batch_dims == td.ndim == 0


def test_kwargs_construction():
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    assert list(td.keys()) == ["a"]


def test_tuple_keys_in_source():
    td = TensorDict({("a", "b"): torch.zeros(2)}, [2])
    assert td["a", "b"].shape == (2,)


def test_auto_batch_size():
    td = TensorDict({"a": torch.zeros(3, 4, 5), "b": {"c": torch.zeros(3, 4)}}, auto_batch_size=True)
    assert td.batch_size == torch.Size([3, 4])
    assert td["b"].batch_size == torch.Size([3, 4])
    td2 = TensorDict({"a": torch.zeros(3, 4, 5)})
    td2.auto_batch_size_(batch_dims=1)
    assert td2.batch_size == torch.Size([3])


def test_batch_size_setter_rechecks():
    td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 2)}}, [3])
    td.batch_size = [3, 4]
    assert td["b"].batch_size[:2] == torch.Size([3, 4])
    with pytest.raises(RuntimeError, match="'a'"):
        td.batch_size = [3, 5]
    assert td.batch_size == torch.Size([3, 4])


def test_device_moves_values(device):
    td = TensorDict({"a": torch.zeros(2)}, [2], device=device)
    td["b"] = torch.ones(2)
    assert td["b"].device.type == device.type
    assert td.device.type == device.type


def test_non_tensor_values():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    td["s"] = "a string!"
    assert td["s"] == "a string!"
    assert isinstance(td._get_raw("s"), NonTensorData)
    assert td[0]["s"] == "a string!"
    assert td.clone()["s"] == "a string!"
    assert td.to(torch.float64)["s"] == "a string!"


def test_empty_and_is_empty():
    td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.zeros(3)}}, [3], names=["n"])
    e = td.empty()
    assert e.batch_size == td.batch_size and len(list(e.keys())) == 0
    assert e.is_empty()
    er = td.empty(recurse=True)
    assert "b" in er.keys() and er.is_empty()
    assert not td.is_empty()


def test_numel_len_iter():
    td = TensorDict({"a": torch.arange(6).view(3, 2)}, [3, 2])
    assert td.numel() == 6 and len(td) == 3
    rows = list(td)
    assert len(rows) == 3 and rows[1]["a"].tolist() == [2, 3]
    assert td.size() == torch.Size([3, 2]) and td.size(1) == 2 and td.dim() == 2


def test_names():
    td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4], names=["x", "y"])
    assert td.names == ["x", "y"]
    assert td.permute(1, 0).names == ["y", "x"]
    td2 = TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    assert td2.names == [None, None]
    td2.refine_names("x", ...)
    assert td2.names == ["x", None]
    assert td2.rename("p", "q").names == ["p", "q"]
    assert td2.names == ["x", None]
    td2.rename_(x="z")
    assert td2.names == ["z", None]
    with pytest.raises(ValueError):
        td2.names = ["only-one"]


def test_fromkeys_and_inplace_add():
    td = TensorDict.fromkeys(["a", "b", "c"], 0)
    assert set(td.keys()) == {"a", "b", "c"}
    assert td["a"].item() == 0
