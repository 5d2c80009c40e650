"""Pickling sends the file name, group, mode, batch size and view index, never the data."""

from __future__ import annotations

import operator
import pickle

import pytest
import torch

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict


def test_pickle_roundtrip_in_process(h5file, td):
    with PersistentTensorDict.from_h5(h5file) as p:
        view = p[torch.tensor([7, 2, 2])]["nested"]
        blob = pickle.dumps(view)
        assert len(blob) < 4096
        back = pickle.loads(blob)
        try:
            assert isinstance(back, PersistentTensorDict)
            assert back.batch_size == view.batch_size
            assert back.filename == p.filename and back.mode == "r"
            assert torch.equal(back["idx"], td["nested", "idx"][[7, 2, 2]])
        finally:
            back.close()
        assert not p.is_closed  # the copy has its own handle


def test_pickle_keeps_flat_views_device_and_names(tmp_path):
    td = TensorDict(a=torch.arange(12).view(3, 4), batch_size=[3, 4], names=["x", "y"])
    with td.to_h5(tmp_path / "n.h5") as p:
        back = pickle.loads(pickle.dumps(p))
        assert back.names == ["x", "y"]
        back.close()
        view = p[torch.tensor([0, 2]), torch.tensor([1, 3])]
        back = pickle.loads(pickle.dumps(view))
        assert back["a"].tolist() == [1, 11]
        back.close()


def test_big_file_pickle_is_small(tmp_path):
    td = TensorDict(a=torch.zeros(200_000), batch_size=[200_000])
    with td.to_h5(tmp_path / "big.h5") as p:
        assert len(pickle.dumps(p)) < 4096


@pytest.mark.timeout(120)
def test_spawned_process_reopens_file(h5file, td):
    ctx = torch.multiprocessing.get_context("spawn")
    with PersistentTensorDict.from_h5(h5file) as p:
        view = p[torch.tensor([9, 0, 4])]
        with ctx.Pool(1) as pool:
            rows = pool.apply(operator.getitem, (view, ("nested", "idx")))
            dense = pool.apply(PersistentTensorDict.to_tensordict, (p[2:4],))
    assert rows.tolist() == [9, 0, 4]
    assert type(dense) is TensorDict
    assert torch.equal(dense["obs"], td["obs"][2:4])
    assert dense["label"] == b"experiment-1"
