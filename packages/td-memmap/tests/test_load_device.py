"""load_memmap(..., device=...) and load_memmap_ give the TensorDicts the requested device (docs examples)."""

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict, lazy_stack


def _saved(tmp_path):
    td = TensorDict(
        {
            "a": torch.zeros(()),
            "b": {"c": torch.zeros(())},
            "s": lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))]),
        }
    )
    td.save(tmp_path / "td")
    return tmp_path / "td"


def _devices(td):
    return {td.device, td["b"].device, td["s"].device}


def test_load_memmap_meta_device_sets_every_tensordict_device(tmp_path):
    # the load_memmap docstring example prints device=meta at every level
    loaded = TensorDict.load_memmap(_saved(tmp_path), device="meta")
    assert _devices(loaded) == {torch.device("meta")}
    assert loaded["a"].device.type == "meta"
    assert loaded["s", "x"].device.type == "meta"


def test_load_memmap_cpu_device_sets_device_and_keeps_memory_maps(tmp_path):
    loaded = TensorDict.load_memmap(_saved(tmp_path), device="cpu")
    assert _devices(loaded) == {torch.device("cpu")}
    assert isinstance(loaded["a"], MemoryMappedTensor)
    assert loaded.is_memmap()


def test_load_memmap_without_device_is_on_cpu(tmp_path):
    # the leaves are memory maps on the cpu; tensordict 0.15 (and seed 003's FakeTensorMode
    # example) give every loaded TensorDict device=cpu, whatever device it was saved with
    loaded = TensorDict.load_memmap(_saved(tmp_path))
    assert _devices(loaded) == {torch.device("cpu")}
    assert not loaded.is_shared() and loaded.is_memmap()


def test_load_memmap_into_out_keeps_out_device(tmp_path):
    path = _saved(tmp_path)
    target = TensorDict({"a": torch.ones(()), "b": {"c": torch.ones(())}}, device="cpu")
    target.load_memmap_(path)
    assert target.device == torch.device("cpu")
    assert target["b"].device == torch.device("cpu")
    assert target["a"] == 0


def test_load_memmap_into_out_on_other_device_raises(tmp_path):
    with pytest.raises(ValueError, match="device"):
        TensorDict.load_memmap(_saved(tmp_path), device="meta", out=TensorDict(device="cpu"))
