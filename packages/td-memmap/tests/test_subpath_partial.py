"""load_memmap(prefix, subpath=...) reads only the selected container ("the saved data can be partially loaded")."""

import os

import pytest
import torch

from tensordict import TensorDict, lazy_stack


def _td():
    return TensorDict(
        {
            "obj": {1, 2},  # not JSON: saved with pickle
            "big": torch.zeros(4),
            "enc": {"layers": {"w": torch.ones(2)}},
            "s": lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))]),
        }
    )


@pytest.mark.parametrize("name", ["dir", "data.tdz"])
def test_subpath_load_skips_pickled_value_elsewhere(tmp_path, name):
    path = tmp_path / name
    _td().save(path)
    with pytest.raises(RuntimeError, match="allow_pickle"):
        TensorDict.load_memmap(path)  # the whole store needs the opt-in
    sub = TensorDict.load_memmap(path, subpath="enc/layers")
    assert sub["w"].tolist() == [1.0, 1.0]
    assert TensorDict.load_memmap(path, subpath=("s", "1"))["x"].tolist() == [1.0, 1.0]


def test_subpath_load_does_not_read_other_data_files(tmp_path):
    path = tmp_path / "dir"
    _td().save(path)
    os.remove(path / "big.memmap")  # damage a leaf outside the selected container
    sub = TensorDict.load_memmap(path, subpath=("enc", "layers"))
    assert sub["w"].tolist() == [1.0, 1.0]
    assert sub.is_memmap() and sub.is_locked


@pytest.mark.parametrize("subpath", ["nope", "obj", "enc/w"])
def test_subpath_naming_no_container_raises_value_error(tmp_path, subpath):
    _td().save(tmp_path / "dir")
    with pytest.raises(ValueError, match="No tensordict found under subpath"):
        TensorDict.load_memmap(tmp_path / "dir", subpath=subpath)
