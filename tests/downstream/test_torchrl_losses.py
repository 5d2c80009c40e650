"""TorchRL 0.14.1's PPO, SAC, DDPG, IQL, DQN and CQL losses on this stack, with their value
estimators, against the loss values the same code gives on tensordict 0.15.3.

Each case builds the loss from ``torchrl.objectives`` on small synthetic data with fixed
seeds, runs it and backpropagates. ``EXPECTED`` holds what TorchRL 0.14.1 + tensordict
0.15.3 computes for the same case (same torch build, CPU): recorded by running this file's
``_run`` under that interpreter (``python tests/downstream/test_torchrl_losses.py``
prints the table).
"""

from __future__ import annotations

import pytest

torchrl = pytest.importorskip("torchrl")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import NormalParamExtractor, TensorDictModule  # noqa: E402

OBS, ACT, BATCH = 4, 2, 8


def _data(discrete: bool = False, time: int | None = None) -> TensorDict:
    gen = torch.Generator().manual_seed(1)
    shape = (BATCH,) if time is None else (BATCH, time)
    if discrete:
        action = torch.nn.functional.one_hot(torch.randint(0, ACT, shape, generator=gen), ACT)
    else:
        action = torch.rand(*shape, ACT, generator=gen) * 2 - 1
    obs = torch.randn(*shape, OBS, generator=gen)
    return TensorDict(
        {
            "observation": obs,
            "action": action,
            "action_log_prob": torch.randn(*shape, generator=gen) - 1,
            "next": {
                "observation": torch.randn(*shape, OBS, generator=gen),
                "reward": torch.randn(*shape, 1, generator=gen),
                "done": torch.zeros(*shape, 1, dtype=torch.bool),
                "terminated": torch.zeros(*shape, 1, dtype=torch.bool),
            },
        },
        batch_size=shape,
    )


def _mlp(out: int, inp: int = OBS) -> nn.Module:
    from torchrl.modules import MLP

    return MLP(in_features=inp, out_features=out, num_cells=[16])


def _actor():
    from torchrl.data import Bounded
    from torchrl.modules import ProbabilisticActor, TanhNormal

    net = TensorDictModule(nn.Sequential(_mlp(2 * ACT), NormalParamExtractor()), ["observation"], ["loc", "scale"])
    return ProbabilisticActor(
        net, ["loc", "scale"], spec=Bounded(-1, 1, (ACT,)), distribution_class=TanhNormal, return_log_prob=True
    )


def _value():
    from torchrl.modules import ValueOperator

    return ValueOperator(_mlp(1), in_keys=["observation"])


class _QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = _mlp(1, OBS + ACT)

    def forward(self, observation, action):
        return self.net(torch.cat([observation, action], -1))


def _qvalue():
    from torchrl.modules import ValueOperator

    return ValueOperator(_QNet(), in_keys=["observation", "action"])


def _det_actor():
    from torchrl.data import Bounded
    from torchrl.modules import Actor

    return Actor(_mlp(ACT), in_keys=["observation"], spec=Bounded(-1, 1, (ACT,)))


def _qactor():
    from torchrl.data import OneHot
    from torchrl.modules import QValueActor

    return QValueActor(_mlp(ACT), in_keys=["observation"], spec=OneHot(ACT))


def _cases() -> dict:
    from torchrl import objectives as O  # noqa: N812

    return {
        "ppo-gae": (lambda: O.PPOLoss(_actor(), _value()), {"time": 5}, "gae"),
        "clip_ppo": (lambda: O.ClipPPOLoss(_actor(), _value()), {"time": 5}, None),
        "clip_ppo-td1": (lambda: O.ClipPPOLoss(_actor(), _value()), {"time": 5}, "td1"),
        "sac_v1": (lambda: O.SACLoss(_actor(), _qvalue(), _value()), {}, None),
        "sac_v2": (lambda: O.SACLoss(_actor(), _qvalue()), {}, None),
        "sac_v2-tdlambda": (lambda: O.SACLoss(_actor(), _qvalue()), {}, "tdlambda"),
        "ddpg": (lambda: O.DDPGLoss(_det_actor(), _qvalue()), {}, None),
        "ddpg-td1": (lambda: O.DDPGLoss(_det_actor(), _qvalue()), {}, "td1"),
        "iql": (lambda: O.IQLLoss(_actor(), _qvalue(), _value()), {}, None),
        "dqn": (lambda: O.DQNLoss(_qactor(), action_space="one-hot"), {"discrete": True}, None),
        "double_dqn": (
            lambda: O.DQNLoss(_qactor(), action_space="one-hot", delay_value=True, double_dqn=True),
            {"discrete": True},
            None,
        ),
        "dqn-tdlambda": (lambda: O.DQNLoss(_qactor(), action_space="one-hot"), {"discrete": True}, "tdlambda"),
        "cql": (lambda: O.CQLLoss(_actor(), _qvalue()), {}, None),
        "discrete_cql": (lambda: O.DiscreteCQLLoss(_qactor(), action_space="one-hot"), {"discrete": True}, None),
    }


def _run(name: str) -> dict:
    """The case's loss entries (mean values, rounded), after a backward pass through them."""
    build, data_kwargs, estimator = _cases()[name]
    torch.manual_seed(0)
    loss = build()
    if estimator is not None:
        loss.make_value_estimator(estimator, gamma=0.9)
    data = _data(**data_kwargs)
    torch.manual_seed(2)
    out = loss(data)
    total = sum(v for k, v in out.items() if k.startswith("loss_") or k == "loss")
    total.backward()
    grads = [p.grad for p in loss.parameters() if p.requires_grad]
    assert any(g is not None and g.abs().sum() > 0 for g in grads), "no gradient reached the parameters"
    return {
        k: round(float(v.detach().float().mean()), 4)
        for k, v in out.items()
        if k.startswith("loss") or k in ("alpha", "entropy")
    }


#: TorchRL 0.14.1 on tensordict 0.15.3 (torch 2.13.0 CPU), printed by this file's __main__.
EXPECTED = {
    "clip_ppo": {"loss_objective": 0.5219, "entropy": 1.0241, "loss_entropy": -0.0102, "loss_critic": 0.8565},
    "clip_ppo-td1": {"loss_objective": 0.6082, "entropy": 1.0241, "loss_entropy": -0.0102, "loss_critic": 0.7696},
    "cql": {"loss_actor": -1.791, "loss_actor_bc": 0.0028, "loss_qvalue": 0.8699, "loss_cql": 4.8597, "loss_alpha": 0.0, "alpha": 1.0, "entropy": 1.5325},
    "ddpg": {"loss_actor": 0.2225, "loss_value": 0.5473},
    "ddpg-td1": {"loss_actor": 0.2225, "loss_value": 1.4773},
    "discrete_cql": {"loss_qvalue": 0.4268, "loss_cql": 0.7298},
    "double_dqn": {"loss": 0.8536},
    "dqn": {"loss": 0.8536},
    "dqn-tdlambda": {"loss": 0.8839},
    "iql": {"loss_actor": 2.333, "loss_qvalue": 1.1734, "loss_value": 0.0716, "entropy": 1.6035},
    "ppo-gae": {"loss_objective": 0.1438, "entropy": 1.0241, "loss_entropy": -0.0102, "loss_critic": 0.7345},
    "sac_v1": {"loss_actor": -1.3309, "loss_qvalue": 0.5725, "loss_alpha": 0.0, "loss_value": 0.8689, "alpha": 1.0, "entropy": 1.1893},
    "sac_v2": {"loss_actor": -1.4514, "loss_qvalue": 0.6691, "loss_alpha": 0.0, "alpha": 1.0, "entropy": 1.1893},
    "sac_v2-tdlambda": {"loss_actor": -1.4514, "loss_qvalue": 1.0138, "loss_alpha": 0.0, "alpha": 1.0, "entropy": 1.1893},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loss_values_match_tensordict_015(name):
    assert _run(name) == pytest.approx(EXPECTED[name], abs=2e-4)


def test_every_case_has_a_recorded_value():
    assert sorted(EXPECTED) == sorted(_cases())


def test_sac_target_params_built_with_new_unsafe_reach_the_value_network():
    # SACLoss (with a value network) builds its target parameters as
    # TensorDict._new_unsafe({"module": {"0": actor_params, "1": value_params}}) and swaps them
    # in with to_module: the nested plain dict must be read as a nested level.
    from torchrl.objectives import SACLoss

    torch.manual_seed(0)
    loss = SACLoss(_actor(), _qvalue(), _value())
    out = loss(_data())
    assert torch.isfinite(out["loss_qvalue"]).all() and torch.isfinite(out["loss_value"]).all()


def _mappo() -> dict:
    """Multi-agent PPO: MultiAgentMLP policy and centralised critic (their parameters live in
    TensorDictParams swapped into meta copies of the nets), GAE over vmapped value nets."""
    from torchrl.modules import MultiAgentMLP, ProbabilisticActor, TanhNormal
    from torchrl.objectives import ClipPPOLoss

    torch.manual_seed(0)
    agents, batch, time = 3, 2, 4
    net = nn.Sequential(MultiAgentMLP(4, 4, agents, centralized=False, share_params=True, depth=1, num_cells=8), NormalParamExtractor())
    policy = TensorDictModule(net, [("agents", "observation")], [("agents", "loc"), ("agents", "scale")])
    actor = ProbabilisticActor(
        policy,
        in_keys=[("agents", "loc"), ("agents", "scale")],
        out_keys=[("agents", "action")],
        distribution_class=TanhNormal,
        return_log_prob=True,
        log_prob_key=("agents", "action_log_prob"),
    )
    critic = TensorDictModule(
        MultiAgentMLP(4, 1, agents, centralized=True, share_params=True, depth=1, num_cells=8),
        [("agents", "observation")],
        [("agents", "state_value")],
    )
    loss = ClipPPOLoss(actor, critic)
    loss.set_keys(
        reward=("agents", "reward"),
        action=("agents", "action"),
        value=("agents", "state_value"),
        done=("agents", "done"),
        terminated=("agents", "terminated"),
        sample_log_prob=("agents", "action_log_prob"),
    )
    loss.make_value_estimator(gamma=0.9)
    gen = torch.Generator().manual_seed(1)
    shape = (batch, time, agents)

    def agent_td(**entries):
        return TensorDict(entries, batch_size=shape)

    done = torch.zeros(*shape, 1, dtype=torch.bool)
    data = TensorDict(
        {
            "agents": agent_td(
                observation=torch.randn(*shape, 4, generator=gen),
                action=torch.rand(*shape, 2, generator=gen) * 1.8 - 0.9,
                action_log_prob=torch.randn(*shape, generator=gen),
            ),
            "next": {
                "agents": agent_td(
                    observation=torch.randn(*shape, 4, generator=gen),
                    reward=torch.randn(*shape, 1, generator=gen),
                    done=done,
                    terminated=done.clone(),
                )
            },
        },
        batch_size=shape[:2],
    )
    loss.value_estimator(data, params=loss.critic_network_params, target_params=loss.target_critic_network_params)
    out = loss(data)
    sum(v for k, v in out.items() if k.startswith("loss_")).backward()
    return {k: round(float(v.detach().mean()), 4) for k, v in out.items() if k.startswith("loss_")}


#: TorchRL 0.14.1 on tensordict 0.15.3, as EXPECTED.
EXPECTED_MAPPO = {"loss_objective": 0.4177, "loss_entropy": -0.0107, "loss_critic": 0.8535}


def test_mappo_loss_matches_tensordict_015():
    assert _mappo() == pytest.approx(EXPECTED_MAPPO, abs=2e-4)


if __name__ == "__main__":
    print("EXPECTED_MAPPO =", _mappo())
    print("EXPECTED = {")
    for case in sorted(_cases()):
        print(f"    {case!r}: {_run(case)!r},")
    print("}")
