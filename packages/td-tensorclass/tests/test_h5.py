"""Tensorclasses over HDF5 files through td-h5 (skipped when td-h5 is not installed)."""

import pytest
import torch

pytest.importorskip("tensordict.persistent")

from tensordict import TensorClass, TensorDict  # noqa: E402


class Table(TensorClass):
    a: torch.Tensor
    b: torch.Tensor


def write(path):
    TensorDict({"a": torch.arange(6).view(3, 2), "b": torch.zeros(3)}, [3]).to_h5(path)


def test_from_h5_reads_fields(tmp_path):
    write(tmp_path / "t.h5")
    table = Table.from_h5(tmp_path / "t.h5")
    assert type(table) is Table and table.batch_size == (3,)
    assert table.a.tolist() == [[0, 1], [2, 3], [4, 5]]
    sub = table[1:]
    assert type(sub) is Table and sub.a.tolist() == [[2, 3], [4, 5]]
    copy = table.to_tensordict()
    assert type(copy) is TensorDict and torch.equal(copy["a"], table.a)


def test_writes_through_to_the_file(tmp_path):
    write(tmp_path / "t.h5")
    table = Table.from_h5(tmp_path / "t.h5", mode="r+")
    table.b = torch.ones(3)
    table[0] = table[2]
    assert table.a.tolist() == [[4, 5], [2, 3], [4, 5]]
    assert table._tensordict["b"].tolist() == [1.0, 1.0, 1.0]
