"""Lazy stacks: empty stacks, append/insert/extend, mixed batch sizes, consolidation
of stacks whose TensorDicts hold different keys."""

import os
import pickle

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, from_consolidated, lazy_stack


def test_empty_stack_then_grow():
    s = LazyStackedTensorDict(stack_dim=0)
    assert s.batch_size == (0,) and s.device is None
    s = LazyStackedTensorDict(stack_dim=1, batch_size=[2], device="cpu")
    assert s.batch_size == (2, 0) and s.device == torch.device("cpu")
    s.append(TensorDict(a=torch.zeros(2), batch_size=[2], device="cpu"))
    s.extend([TensorDict(a=torch.ones(2), batch_size=[2], device="cpu")])
    s.insert(0, TensorDict(a=torch.full((2,), 5.0), batch_size=[2], device="cpu"))
    assert s.batch_size == (2, 3)
    assert s["a"][0].tolist() == [5.0, 0.0, 1.0]


def test_insert_checks():
    tds = [TensorDict(a=torch.zeros(4), batch_size=[4])]
    user_list = list(tds)
    s = lazy_stack(user_list)
    with pytest.raises(TypeError, match="Expected new value to be TensorDictBase instance"):
        s.append(torch.zeros(4))
    with pytest.raises(ValueError, match="Batch sizes in tensordicts differs"):
        s.append(TensorDict(a=torch.zeros(5), batch_size=[5]))
    s.append(TensorDict(a=torch.ones(4), b=torch.ones(4), batch_size=[4]))
    assert len(user_list) == 1  # the caller's list is not grown
    assert set(s.keys()) == {"a"} and s.batch_size == (2, 4)


def test_mixed_batch_sizes():
    s = lazy_stack([TensorDict(batch_size=(3, 5)), TensorDict(batch_size=(4, 5))], -1)
    assert s.batch_size == (-1, 5, 2)
    with pytest.raises(RuntimeError, match="stacking tensordicts requires"):
        lazy_stack([TensorDict(batch_size=(3,)), TensorDict(batch_size=(3, 4))])


def _hetero_keys():
    return lazy_stack(
        [
            TensorDict(a=torch.zeros(3), only0=torch.arange(3), batch_size=[3]),
            TensorDict(a=torch.ones(3), only1={"x": torch.ones(3, 2)}, batch_size=[3]),
        ],
        1,
    )


@pytest.mark.parametrize("use_file", [False, True])
def test_consolidate_keeps_exclusive_keys(use_file, tmp_path):
    s = _hetero_keys()
    filename = os.fspath(tmp_path / "stack.bin") if use_file else None
    c = s.consolidate(filename=filename)
    assert isinstance(c, LazyStackedTensorDict) and c.stack_dim == 1 and c.is_consolidated()
    assert (c.tensordicts[0]["only0"] == torch.arange(3)).all()
    assert (c.tensordicts[1]["only1", "x"] == 1).all()
    storage = c._consolidated["storage"]
    assert c.tensordicts[0]["only0"].untyped_storage().data_ptr() == storage.untyped_storage().data_ptr()
    if use_file:
        back = from_consolidated(filename)
        assert isinstance(back, LazyStackedTensorDict) and back.stack_dim == 1
        assert (back.tensordicts[1]["only1", "x"] == 1).all()
        assert (back.tensordicts[0]["only0"] == torch.arange(3)).all()
    again = pickle.loads(pickle.dumps(c))
    assert isinstance(again, LazyStackedTensorDict) and again.is_consolidated()
    assert (again.tensordicts[0]["only0"] == torch.arange(3)).all()


def test_consolidate_inplace_lazy():
    s = _hetero_keys()
    leaf = s.tensordicts[0]["only0"]
    assert s.consolidate(inplace=True) is s
    assert s.is_consolidated() and s.tensordicts[0]["only0"] is not leaf
