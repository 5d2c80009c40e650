"""``td[i] = value`` accepts extra leading unit dims on a leaf, as ``tensor[i] = value`` does."""

import pytest
import torch

from tensordict import TensorDict


def test_write_at_index_drops_leading_unit_dims_of_an_unbatched_value():
    td = TensorDict(images=torch.zeros(3, 2, 2), batch_size=[3])
    td[0] = TensorDict(images=torch.ones(1, 1, 2, 2), batch_size=[])
    assert (td["images"][0] == 1).all() and (td["images"][1:] == 0).all()


def test_write_at_index_still_refuses_a_non_unit_extra_dim():
    td = TensorDict(images=torch.zeros(3, 2, 2), batch_size=[3])
    with pytest.raises(RuntimeError, match="expected feature shape"):
        td[0] = TensorDict(images=torch.ones(2, 2, 2), batch_size=[])
