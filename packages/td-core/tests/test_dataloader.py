"""TensorDicts as datasets (``__getitems__``) and copy_at_."""

import torch
from torch.utils.data import DataLoader

from tensordict import TensorDict


def make():
    return TensorDict({"a": torch.arange(10), "b": {"c": torch.ones(10, 2)}}, [10])


def test_dataloader_reads_whole_batches():
    td = make()
    batches = list(DataLoader(td, batch_size=4, collate_fn=lambda x: x))
    assert [b.batch_size for b in batches] == [(4,), (4,), (2,)]
    assert all(isinstance(b, TensorDict) for b in batches)
    assert batches[1]["a"].tolist() == [4, 5, 6, 7]
    assert batches[0]["b", "c"].shape == (4, 2)


def test_dataloader_default_collate():
    td = make()
    assert [b["a"].tolist() for b in DataLoader(td, batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert next(iter(DataLoader(td))).batch_size == (1,)
    shuffled = torch.cat([b["a"] for b in DataLoader(td, batch_size=4, shuffle=True)])
    assert sorted(shuffled.tolist()) == list(range(10))


def test_getitems_and_copy_at_():
    td = make()
    assert td.__getitems__([1, 3])["a"].tolist() == [1, 3]
    out = td.copy_at_(TensorDict({"a": torch.zeros(2, dtype=torch.long), "b": {"c": torch.zeros(2, 2)}}, [2]), slice(1, 3))
    assert out is td and td["a"][:4].tolist() == [0, 0, 0, 3]
    assert (td["b", "c"][1:3] == 0).all() and (td["b", "c"][3] == 1).all()
