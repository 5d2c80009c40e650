"""close(), context managers (and their interplay with lock_/unlock_), file modes."""

from __future__ import annotations

import h5py
import pytest
import torch

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict


def test_context_manager_closes(h5file):
    with PersistentTensorDict(filename=h5file) as p:
        assert isinstance(p.file, h5py.File)
        assert p.filename == str(h5file)
        assert not p.is_closed
    assert p.is_closed


def test_lock_context_inside_file_context(h5file):
    with PersistentTensorDict(filename=h5file, mode="r+") as p:
        with p.lock_():
            assert p.is_locked
            with pytest.raises(RuntimeError, match="locked"):
                p["x"] = torch.zeros(10)
        assert not p.is_locked
        assert not p.is_closed
        with p.unlock_():
            p["x"] = torch.zeros(10)
        assert not p.is_closed
    assert p.is_closed


def test_modes(tmp_path):
    path = tmp_path / "m.h5"
    with PersistentTensorDict(filename=path, mode="w", batch_size=[3]) as p:
        p["a"] = torch.arange(3)
    with PersistentTensorDict(filename=path, mode="a", group="new/grp") as p:
        assert p.batch_size == torch.Size([])
        p["b"] = torch.ones(2)
    with pytest.raises(FileExistsError, match="m.h5"):
        PersistentTensorDict(filename=path, mode="w-")
    with PersistentTensorDict.from_h5(path) as p:
        assert p["a"].tolist() == [0, 1, 2]
        assert p["new", "grp", "b"].tolist() == [1.0, 1.0]
    with PersistentTensorDict(filename=path, mode="w") as p:  # truncates
        assert list(p.keys()) == []


def test_wrapping_h5py_group_in_rplus(tmp_path):
    path = tmp_path / "w.h5"
    with h5py.File(path, "w") as f:
        f["a"] = torch.arange(4).numpy()
        p = PersistentTensorDict(group=f)
        assert p.mode == "r+"
        p[1:3] = TensorDict(a=torch.tensor([9, 9]), batch_size=[2])
        assert f["a"][()].tolist() == [0, 9, 9, 3]
