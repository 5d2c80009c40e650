"""What TorchRL 0.14 calls in td-nn, each as TorchRL uses it (issue 32).

Every test here also passes on tensordict 0.15.3 (run the file with its interpreter).
"""

from __future__ import annotations

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictParams


def test_param_td_shares_the_module_leaves():
    # TorchRL's loss tests read `loss._modules[name + "_params"]._param_td`, add 1000 in place,
    # reset the parameters and compare.
    params = TensorDictParams(TensorDict(lin=TensorDict.from_module(nn.Linear(2, 3))))
    plain = params._param_td
    assert type(plain) is TensorDict
    assert isinstance(plain["lin", "weight"], nn.Parameter)
    assert plain["lin", "weight"] is params["lin", "weight"]
    with torch.no_grad():
        plain += 1000
    assert (params["lin", "bias"] > 900).all()
    before = plain.clone()
    with torch.no_grad():
        params["lin", "weight"].zero_()
    assert (params._param_td["lin", "weight"] != before["lin", "weight"]).all()


def test_buffer_is_torch_buffer_in_nn_utils():
    from tensordict.nn.utils import Buffer
    from tensordict.utils import Buffer as UtilsBuffer

    assert Buffer is UtilsBuffer is torch.nn.Buffer
    module = nn.Module()
    module.stat = Buffer(torch.zeros(2))
    assert "stat" in dict(module.named_buffers())


def test_add_suffix_names_composite_entries():
    from tensordict.nn.distributions.composite import _add_suffix

    assert _add_suffix("action", "_log_prob") == "action_log_prob"
    assert _add_suffix(("agents", ("action",)), "_entropy") == ("agents", "action_entropy")
