"""TorchRL 0.14.1 components that read and write TensorDicts, each checked on its result:
frame stacking and normalization transforms, exploration noise modules, on-policy
losses (A2C, REINFORCE), a GRU policy in an environment, a multi-agent MLP, replay
buffer writers and storages of ragged TensorDicts, discrete SAC, and composite specs
(expand, stack, unsqueeze). Each also ran against tensordict 0.15.3 with the same result.

Run by ``nox -s downstream``; skipped where TorchRL is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torchrl = pytest.importorskip("torchrl")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))  # pytest imports test files by path (importlib mode)
from test_torchrl import _make_env_class  # noqa: E402
from torch import nn  # noqa: E402

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential  # noqa: E402


def point_env():
    env = _make_env_class()()
    env.set_seed(0)
    return env


def test_frame_stacking_and_normalization_transforms():
    from torchrl.envs import (
        CatFrames,
        Compose,
        ObservationNorm,
        RewardSum,
        StepCounter,
        TransformedEnv,
        VecNorm,
    )

    env = TransformedEnv(
        point_env(),
        Compose(
            RewardSum(),
            StepCounter(5),
            CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stacked"]),
            ObservationNorm(in_keys=["observation"], out_keys=["normed"], loc=1.0, scale=2.0),
        ),
    )
    rollout = env.rollout(7)
    assert rollout.batch_size == (5,)  # StepCounter(5) truncates
    assert rollout["stacked"].shape == (5, 9)
    # the last frame of the stack is the observation; ObservationNorm's default is x * scale + loc
    assert torch.equal(rollout["stacked"][:, -3:], rollout["observation"])
    assert torch.allclose(rollout["normed"], rollout["observation"] * 2.0 + 1.0)
    reward_sum = rollout["next", "episode_reward"]
    assert torch.allclose(reward_sum[-1], rollout["next", "reward"].sum(0))
    vec = TransformedEnv(point_env(), VecNorm(in_keys=["observation"]))
    assert vec.rollout(5)["observation"].shape == (5, 3)


@pytest.mark.parametrize("noise", ["AdditiveGaussianModule", "OrnsteinUhlenbeckProcessModule"])
def test_exploration_noise_module_keeps_actions_in_the_spec(noise):
    import torchrl.modules as modules
    from torchrl.envs import InitTracker, TransformedEnv

    env = TransformedEnv(point_env(), InitTracker())  # is_init resets the OU noise per episode
    policy = TensorDictModule(nn.Linear(3, 2), ["observation"], ["action"])
    explore = TensorDictSequential(policy, getattr(modules, noise)(spec=env.action_spec))
    with torch.no_grad():
        rollout = env.rollout(6, explore)
        clean = policy(rollout.select("observation").clone())["action"]
    assert (rollout["action"].abs() <= 1).all()
    assert not torch.allclose(rollout["action"], clean.clamp(-1, 1))  # noise was added


@pytest.mark.parametrize("loss_name", ["A2CLoss", "ReinforceLoss"])
def test_on_policy_losses_backward(loss_name):
    import torchrl.objectives as objectives
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator

    torch.manual_seed(0)
    env = point_env()
    net = nn.Sequential(MLP(in_features=3, out_features=4, num_cells=[16]), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
        spec=env.action_spec,
    )
    critic = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[16]), in_keys=["observation"])
    with torch.no_grad():
        data = env.rollout(8, actor)
    loss = getattr(objectives, loss_name)(actor, critic)
    loss.make_value_estimator(gamma=0.9)
    out = loss(data)
    total = sum(v for k, v in out.items() if k.startswith("loss"))
    total.backward()
    grads = [p.grad for p in actor.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_gru_policy_carries_its_hidden_state_through_a_rollout():
    from torchrl.envs import InitTracker, TransformedEnv
    from torchrl.modules import GRUModule

    env = TransformedEnv(point_env(), InitTracker())
    gru = GRUModule(input_size=3, hidden_size=8, in_keys=["observation", "rhs"], out_keys=["features", ("next", "rhs")])
    env = env.append_transform(gru.make_tensordict_primer())
    policy = TensorDictSequential(gru, TensorDictModule(nn.Linear(8, 2), ["features"], ["action"]))
    with torch.no_grad():
        rollout = env.rollout(6, policy)
    assert rollout["next", "rhs"].shape == (6, 1, 8)
    # the hidden state read at step t is the one written at step t - 1
    assert torch.equal(rollout["rhs"][1:], rollout["next", "rhs"][:-1])
    assert not rollout["rhs"][0].any()  # a fresh episode starts from zeros


def test_multi_agent_mlp_reads_and_writes_nested_agent_keys():
    from torchrl.modules import MultiAgentMLP

    mlp = MultiAgentMLP(
        n_agent_inputs=4, n_agent_outputs=2, n_agents=3, centralized=False, share_params=False, depth=2, num_cells=16
    )
    td = TensorDict({"agents": {"obs": torch.randn(5, 3, 4)}}, [5])
    TensorDictModule(mlp, [("agents", "obs")], [("agents", "action")])(td)
    assert td["agents", "action"].shape == (5, 3, 2)
    # no parameter sharing: each agent has its own weights, so equal inputs differ per agent
    same = TensorDict({"agents": {"obs": torch.ones(1, 3, 4)}}, [1])
    TensorDictModule(mlp, [("agents", "obs")], [("agents", "action")])(same)
    assert not torch.allclose(same["agents", "action"][0, 0], same["agents", "action"][0, 1])


def test_max_value_writer_and_a_storage_of_ragged_tensordicts():
    from torchrl.data import (
        LazyStackStorage,
        LazyTensorStorage,
        ReplayBuffer,
        TensorDictMaxValueWriter,
        TensorDictReplayBuffer,
    )

    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), writer=TensorDictMaxValueWriter(rank_key="r"), batch_size=4)
    rb.extend(TensorDict({"r": torch.arange(20.0), "x": torch.randn(20, 2)}, [20]))
    assert sorted(rb[:]["r"].tolist()) == list(range(10, 20))  # the ten largest are kept
    ragged = ReplayBuffer(storage=LazyStackStorage(10), batch_size=3)
    ragged.extend([TensorDict(a=torch.full((i + 1,), float(i))) for i in range(4)])
    sample = ragged.sample()
    for item in sample.unbind(0):
        assert item["a"].shape == (int(item["a"][0].item()) + 1,)


def test_discrete_sac_loss_backward():
    from torch.distributions import OneHotCategorical
    from torchrl.data import OneHot
    from torchrl.modules import MLP, ProbabilisticActor
    from torchrl.objectives import DiscreteSACLoss

    torch.manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(MLP(in_features=3, out_features=4, num_cells=[8]), ["observation"], ["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        spec=OneHot(4),
        return_log_prob=True,
    )
    qvalue = TensorDictModule(MLP(in_features=3, out_features=4, num_cells=[8]), ["observation"], ["action_value"])
    loss = DiscreteSACLoss(actor, qvalue, action_space="one-hot", num_actions=4)
    n = 6
    done = torch.zeros(n, 1, dtype=torch.bool)
    data = TensorDict(
        {
            "observation": torch.randn(n, 3),
            "action": nn.functional.one_hot(torch.randint(4, (n,)), 4),
            "next": {"observation": torch.randn(n, 3), "reward": torch.randn(n, 1), "done": done, "terminated": done},
        },
        [n],
    )
    out = loss(data)
    (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
    assert all(torch.isfinite(out[k]) for k in ("loss_actor", "loss_qvalue", "loss_alpha"))


def test_composite_spec_expand_stack_and_unsqueeze():
    from torchrl.data import Categorical, Composite, Unbounded

    spec = Composite(a=Unbounded(shape=(3, 2)), b=Composite(c=Categorical(4, shape=(3,)), shape=(3,)), shape=(3,))
    sample = spec.rand()
    assert spec.is_in(sample) and sample["b", "c"].max() < 4
    assert spec.expand(5, 3).rand().shape == (5, 3)
    stacked = torch.stack([spec, spec], 0)
    assert stacked.rand()["a"].shape == (2, 3, 2)
    assert spec.unsqueeze(0).zero().batch_size == (1, 3)
