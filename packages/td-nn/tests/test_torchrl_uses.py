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


def _normal_policy(seen, default):
    from tensordict.nn import (
        NormalParamExtractor,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
        interaction_type,
    )

    class Spy(nn.Module):  # reads the ambient interaction type, as TorchRL's gSDE noise does
        def forward(self, x):
            seen.append(interaction_type())
            return x

    net = TensorDictModule(nn.Sequential(Spy(), nn.Linear(3, 4), NormalParamExtractor()), ["obs"], ["loc", "scale"])
    prob = ProbabilisticTensorDictModule(
        ["loc", "scale"], ["action"], distribution_class=torch.distributions.Normal, default_interaction_type=default
    )
    return ProbabilisticTensorDictSequential(net, prob)


def test_probabilistic_sequence_makes_its_default_interaction_type_ambient():
    from tensordict.nn import InteractionType, interaction_type, set_interaction_type

    seen = []
    for default, expected in (("random", InteractionType.RANDOM), ("mode", InteractionType.MODE)):
        _normal_policy(seen, default)(TensorDict(obs=torch.randn(2, 3), batch_size=[2]))
        assert seen[-1] == expected
    assert interaction_type() is None  # restored after the call
    with set_interaction_type("deterministic"):
        _normal_policy(seen, "random")(TensorDict(obs=torch.randn(2, 3), batch_size=[2]))
    assert seen[-1] == InteractionType.DETERMINISTIC  # an explicit setting wins


def test_dist_sample_draws_by_interaction_type():
    from tensordict.nn import InteractionType, ProbabilisticTensorDictModule

    prob = ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=torch.distributions.Normal)
    dist = torch.distributions.Normal(torch.full((2,), 3.0), torch.ones(2))
    assert prob._dist_sample(dist, interaction_type=InteractionType.MODE).tolist() == [3.0, 3.0]
    assert prob._dist_sample(dist).tolist() == [3.0, 3.0]  # the default: deterministic
    gen = torch.Generator().manual_seed(0)
    first = prob._dist_sample(dist, InteractionType.RANDOM, generator=gen)
    again = prob._dist_sample(dist, InteractionType.RANDOM, generator=torch.Generator().manual_seed(0))
    assert first.shape == (2,) and torch.equal(first, again)


class _SharedNet(nn.Module):
    """As TorchRL's MultiAgentMLP: parameters in a TensorDictParams, an empty (meta) copy
    of the network that receives them on each call."""

    def __init__(self):
        super().__init__()
        net = nn.Linear(3, 2)
        self.params = TensorDictParams(TensorDict.from_module(net))
        self._empty_net = net.to("meta")

    def forward(self, x):
        with self.params.to_module(self._empty_net, preserve_module_state=False):
            return self._empty_net(x)


def test_swapping_params_into_a_module_that_holds_a_tensordictparams():
    # TorchRL's value estimators vmap over stacked (params, target params) swapped in with
    # to_module(preserve_module_state=False); the inner TensorDictParams must see them
    module = _SharedNet()
    x = torch.ones(4, 3)
    ref = module(x)
    zeros = TensorDict.from_module(module).detach().apply(torch.zeros_like)
    with zeros.to_module(module, preserve_module_state=False):
        assert (module(x) == 0).all()
    assert torch.equal(module(x), ref)  # restored
    stacked = torch.stack([TensorDict.from_module(module).detach(), zeros], 0)

    def call(params, inp):
        with params.to_module(module, preserve_module_state=False):
            return module(inp)

    out = torch.vmap(call, (0, None))(stacked, x)
    assert torch.equal(out[0], ref) and (out[1] == 0).all()
