"""tensordict.utils helpers and is_tensor_collection."""

import pytest
import torch

from tensordict import NonTensorData, TensorDict, is_batchedtensor, is_tensor_collection
from tensordict.utils import expand_as_right, expand_right, isin, remove_duplicates


def test_expand_helpers():
    assert expand_as_right(torch.zeros(3), torch.zeros(3, 4, 5)).shape == (3, 4, 5)
    assert expand_right(torch.zeros(3), (3, 2)).shape == (3, 2)
    with pytest.raises(RuntimeError):
        expand_as_right(torch.zeros(3, 4), torch.zeros(3))


def test_is_tensor_collection():
    assert is_tensor_collection(TensorDict({}, []))
    assert is_tensor_collection(TensorDict)
    assert is_tensor_collection(NonTensorData("x"))
    assert not is_tensor_collection(torch.zeros(1))


def test_is_batchedtensor():
    assert not is_batchedtensor(torch.zeros(2))
    seen = []
    torch.vmap(lambda x: seen.append(is_batchedtensor(x)) or x)(torch.zeros(2, 3))
    assert seen == [True]


def test_isin_remove_duplicates():
    a = TensorDict({"x": torch.tensor([[1, 2], [3, 4], [1, 2]])}, [3])
    b = TensorDict({"x": torch.tensor([[1, 2]])}, [1])
    assert isin(a, b, "x").tolist() == [True, False, True]
    out, idx = remove_duplicates(a, "x", return_indices=True)
    # tensordict 0.15 returns torch.unique's inverse indices (one per input element)
    assert idx.tolist() == [0, 1, 0] and out.batch_size == (2,)
