"""TensorDictParams refuses ``map`` (worker processes cannot write into parameters)."""

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictParams


def test_map_is_refused():
    params = TensorDictParams(TensorDict(w=nn.Parameter(torch.zeros(4, 2)), batch_size=[4]))
    with pytest.raises(RuntimeError, match="Cannot call map on a TensorDictParams object"):
        params.map(lambda td: td, num_workers=1)
