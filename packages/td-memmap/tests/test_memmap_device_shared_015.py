"""A memory-mapped TensorDict says device=cpu and is_shared() False, as tensordict 0.15.3
(the tensordict_memory tutorial prints both after ``memmap_()``). Checked on 0.15.3;
public names only, so the file runs against either implementation."""

import torch

from tensordict import MemoryMappedTensor, TensorDict, lazy_stack


def _td():
    return TensorDict(a=torch.zeros(3, 2), n={"b": torch.ones(3)}, batch_size=[3])


def test_memmap_in_place_is_on_cpu_and_not_shared(tmp_path):
    td = _td()
    assert td.device is None
    assert td.memmap_(tmp_path) is td
    assert td.device == torch.device("cpu") and td["n"].device == torch.device("cpu")
    assert not td.is_shared() and not td["n"].is_shared() and td.is_memmap()
    assert isinstance(td["a"], MemoryMappedTensor) and td["a"].is_shared()  # the leaf itself is


def test_memmap_copies_and_loads_are_on_cpu(tmp_path):
    for out in (_td().memmap(), _td().memmap_like(), _td().memmap(tmp_path / "x")):
        assert out.device == torch.device("cpu") and out["n"].device == torch.device("cpu")
        assert not out.is_shared()
    loaded = TensorDict.load_memmap(tmp_path / "x")
    assert loaded.device == torch.device("cpu") and not loaded.is_shared()
    assert not loaded[0:2].is_shared()
    stack = lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3))]).memmap(tmp_path / "s")
    assert stack.device == torch.device("cpu") and stack.tensordicts[0].device == torch.device("cpu")


def test_shared_memory_is_still_shared():
    td = _td().share_memory_()
    assert td.is_shared() and td.device is None


def test_strided_nested_leaf_round_trip_with_two_batch_dims(tmp_path):
    # a strided nested tensor whose elements share their first dim spans two batch dims
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "prototype stage" warning for the strided layout
        nt = torch.nested.nested_tensor(
            [torch.arange(12, dtype=torch.float64).view(3, 4), torch.arange(15, dtype=torch.float64).view(3, 5)]
        )
    td = TensorDict({"a": nt}, batch_size=[2, 3])
    saved = td.clone()
    td.memmap(tmp_path)
    loaded = TensorDict.load(tmp_path)
    for i in range(2):
        for j in range(3):
            assert (loaded[i, j] == saved[i, j]).all()
