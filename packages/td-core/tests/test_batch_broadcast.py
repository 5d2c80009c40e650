"""Math between a TensorDict and a tensor (or TensorDict) whose shape broadcasts against
the batch size (``_ops_foreach._rebatch``)."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4), (2, 1, 4)])
def test_math_with_a_tensor_broadcasts_against_the_batch_dims(shape):
    td = TensorDict(a=torch.randn(3, 4), b=torch.zeros(3, 4, 5), n={"c": torch.ones(3, 4, 5, 6)}, batch_size=(3, 4))
    expected = torch.broadcast_shapes(shape, td.batch_size)
    other = torch.full(shape, 2.0)
    for out in (
        td * other,
        td + other,
        td.maximum(other),
        td.clamp(-other, other),
        td.lerp(-other, other),
        td.addcmul(other, other),
        td * td.new_ones(shape),
    ):
        assert out.batch_size == expected
        assert out["b"].shape == (*expected, 5)
        assert out["n", "c"].shape == (*expected, 5, 6)
    # the tensor lines up with the batch dims, then spreads over the feature dims
    row = torch.arange(4.0)
    assert torch.equal((td * 0 + row)["b"][1, :, 2], row)
