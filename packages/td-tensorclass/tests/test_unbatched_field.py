"""A tensorclass field holding an UnbatchedTensor skips the batch-size check and
comes back as the same UnbatchedTensor."""

from __future__ import annotations

import pytest
import torch

from tensordict import UnbatchedTensor, tensorclass


@tensorclass
class _WithConfig:
    config: torch.Tensor
    value: torch.Tensor


def test_unbatched_field_keeps_its_shape_and_storage() -> None:
    data = torch.tensor([1.0, 2.0])
    tc = _WithConfig(config=UnbatchedTensor(data), value=torch.randn(3), batch_size=[3])
    assert isinstance(tc.config, UnbatchedTensor)
    assert tc.config.data_ptr() == data.data_ptr()
    got = tc.get("config")
    assert isinstance(got, UnbatchedTensor)
    assert got.data_ptr() == data.data_ptr()
    # indexing the batch keeps the unbatched field whole
    assert torch.equal(tc[1].config, data)
    assert tc[1:].value.shape == torch.Size([2])


def test_plain_tensor_field_is_still_checked() -> None:
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        _WithConfig(config=torch.zeros(2), value=torch.randn(3), batch_size=[3])


def test_pad_sequence_of_tensorclasses_with_a_str_field() -> None:
    from tensordict import pad_sequence

    @tensorclass
    class Sample:
        a: torch.Tensor
        b: str

    out = pad_sequence([Sample(a=torch.tensor([1, 1]), b="x", batch_size=[]), Sample(a=torch.tensor([2]), b="y", batch_size=[])])
    assert isinstance(out, Sample)
    assert out.a.tolist() == [[1, 1], [2, 0]]
    assert out.b == ["x", "y"]


def test_non_tensor_data_base_is_exported() -> None:
    from tensordict import MetaData, NonTensorData, NonTensorStack
    from tensordict.tensorclass import NonTensorDataBase

    assert isinstance(NonTensorData(1), NonTensorDataBase)
    assert isinstance(MetaData("m"), NonTensorDataBase)
    assert not isinstance(NonTensorStack("a", "b"), NonTensorDataBase)
