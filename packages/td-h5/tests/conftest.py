"""Shared fixtures for td-h5 tests: real HDF5 files in pytest's tmp_path."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict
from tensordict.testing import available_devices

_DEVICES = available_devices()


@pytest.fixture(params=_DEVICES or [pytest.param("cuda", marks=pytest.mark.skip(reason="no GPU"))])
def device(request):
    """cpu, and cuda when a GPU is present (``TD_TEST_DEVICE`` picks one, as in the nox sessions)."""
    return torch.device(request.param)


def make_td(n: int = 10) -> TensorDict:
    """A TensorDict with several dtypes, a nested TensorDict and non-tensor data."""
    return TensorDict(
        {
            "obs": torch.arange(n * 3, dtype=torch.float32).view(n, 3),
            "reward": torch.linspace(0, 1, n, dtype=torch.float64),
            "done": torch.arange(n) % 3 == 0,
            "nested": {
                "idx": torch.arange(n),
                "half": torch.arange(n * 2, dtype=torch.float16).view(n, 2),
            },
            "label": b"experiment-1",  # bytes: a str would come back as bytes (as tensordict)
        },
        batch_size=[n],
    )


@pytest.fixture
def td() -> TensorDict:
    return make_td()


@pytest.fixture
def h5file(tmp_path, td):
    """Path of a file written by ``to_h5`` from ``make_td()``."""
    path = tmp_path / "data.h5"
    td.to_h5(path).close()
    return path


@pytest.fixture
def ptd(h5file):
    """The ``make_td()`` file opened read/write."""
    out = PersistentTensorDict.from_h5(h5file, mode="r+")
    yield out
    out.close()


@pytest.fixture
def grid_file(tmp_path):
    """A plain h5py file with a 2-D batch: x (4, 5, 2), y (4, 5), g/z (4, 5, 3)."""
    path = tmp_path / "grid.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(40, dtype=np.float32).reshape(4, 5, 2)
        f["y"] = np.arange(20, dtype=np.int64).reshape(4, 5)
        f.create_group("g")["z"] = np.arange(60, dtype=np.int32).reshape(4, 5, 3)
    return path


@pytest.fixture
def grid_ref() -> TensorDict:
    """In-memory copy of ``grid_file``."""
    return TensorDict(
        {
            "x": torch.arange(40, dtype=torch.float32).view(4, 5, 2),
            "y": torch.arange(20).view(4, 5),
            "g": TensorDict({"z": torch.arange(60, dtype=torch.int32).view(4, 5, 3)}, [4, 5]),
        },
        batch_size=[4, 5],
    )
