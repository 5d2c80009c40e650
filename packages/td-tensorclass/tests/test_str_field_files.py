"""A tensorclass's non-tensor (``str``) field is written by consolidate(filename=...)
and to_h5 (issue 19, item 3)."""

import pytest
import torch

from tensordict import TensorClass, TensorDict


class Tagged(TensorClass):
    x: torch.Tensor
    tag: str


def _tagged():
    return Tagged(x=torch.arange(3.0), tag="hello", batch_size=[3])


def test_consolidate_to_file_keeps_str_field(tmp_path):
    path = tmp_path / "tagged.bin"
    out = _tagged().consolidate(filename=path)
    assert type(out) is Tagged and out.tag == "hello" and hasattr(out, "_consolidated")
    back = TensorDict.from_consolidated(path)
    assert set(back.keys()) == {"x", "tag"}
    assert back["tag"] == "hello"
    assert torch.equal(back["x"], torch.arange(3.0))


def test_consolidate_in_memory_keeps_str_field():
    out = _tagged().consolidate()
    assert type(out) is Tagged and out.tag == "hello"
    assert hasattr(out, "_consolidated")
    with pytest.raises(AttributeError):
        _ = _tagged()._consolidated


def test_to_h5_keeps_str_field(tmp_path):
    pytest.importorskip("h5py")
    pytest.importorskip("tensordict.persistent")
    from tensordict import PersistentTensorDict

    path = tmp_path / "tagged.h5"
    _tagged().to_h5(path)
    back = PersistentTensorDict.from_h5(path).to_tensordict()
    assert "tag" in back.keys()
    tag = back["tag"]
    assert (tag.decode() if isinstance(tag, bytes) else tag) == "hello"
