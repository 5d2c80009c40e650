"""TorchRL 0.14.1 as a client of this stack, exercised the way its users use it.

Run by ``nox -s downstream`` (which installs TorchRL with ``--no-deps`` on top of all
six distributions). Elsewhere TorchRL is usually absent and the module is skipped.
"""

from __future__ import annotations

import pytest

torchrl = pytest.importorskip("torchrl")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tensordict import TensorDict, TensorDictBase  # noqa: E402
from tensordict.nn import NormalParamExtractor, TensorDictModule  # noqa: E402


# ----------------------------------------------------------------------------- helpers
def _transitions(n: int, traj_len: int = 5) -> TensorDict:
    """``n`` transitions made of trajectories of ``traj_len`` steps (episode ids, done flags)."""
    episode = torch.arange(n) // traj_len
    step = torch.arange(n) % traj_len
    done = (step == traj_len - 1).unsqueeze(-1)
    return TensorDict(
        {
            "obs": torch.randn(n, 3),
            "action": torch.randn(n, 2),
            "episode": episode,
            "step": step,
            ("next", "obs"): torch.randn(n, 3),
            ("next", "reward"): torch.randn(n, 1),
            ("next", "done"): done,
            ("next", "terminated"): done.clone(),
            ("next", "truncated"): torch.zeros_like(done),
        },
        batch_size=[n],
    )


# ----------------------------------------------------------------------------- replay buffers
@pytest.fixture(params=["LazyTensorStorage", "LazyMemmapStorage"])
def storage(request, tmp_path):
    from torchrl.data import LazyMemmapStorage, LazyTensorStorage

    if request.param == "LazyMemmapStorage":
        return LazyMemmapStorage(100, scratch_dir=tmp_path / "scratch")
    return LazyTensorStorage(100)


def test_tensordict_replay_buffer_extend_sample(storage):
    from torchrl.data import TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(storage=storage, batch_size=8)
    data = _transitions(40)
    indices = rb.extend(data)
    assert len(rb) == 40
    assert torch.equal(torch.as_tensor(indices).sort().values, torch.arange(40))
    sample = rb.sample()
    assert isinstance(sample, TensorDictBase)
    assert sample.batch_size == torch.Size([8])
    assert sample["next", "obs"].shape == (8, 3)
    # the sampled rows are rows of the data
    idx = sample["index"]
    assert torch.equal(sample["obs"], data["obs"][idx])
    # priorities-free update of a stored row through the buffer
    rb[0] = data[0].apply(torch.zeros_like)
    assert (rb[0]["obs"] == 0).all()


def test_replay_buffer_of_tensordicts(storage):
    from torchrl.data import ReplayBuffer

    rb = ReplayBuffer(storage=storage, batch_size=4)
    rb.extend(_transitions(20))
    sample = rb.sample()
    assert sample.batch_size == torch.Size([4])
    assert set(sample.keys()) >= {"obs", "action", "next"}


def test_slice_sampler(storage):
    from torchrl.data import SliceSampler, TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(
        storage=storage,
        sampler=SliceSampler(slice_len=5, traj_key="episode", strict_length=True),
        batch_size=20,
    )
    rb.extend(_transitions(50, traj_len=10))
    sample = rb.sample()
    assert sample.batch_size == torch.Size([20])
    # four slices of 5 consecutive steps of one episode each
    episodes = sample["episode"].view(4, 5)
    steps = sample["step"].view(4, 5)
    assert (episodes == episodes[:, :1]).all()
    assert (steps.diff(dim=1) == 1).all()


def test_replay_buffer_dumps_loads(storage, tmp_path):
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(storage=storage, batch_size=4)
    data = _transitions(30)
    rb.extend(data)
    rb.dumps(tmp_path / "rb")
    restored = TensorDictReplayBuffer(storage=type(storage)(100) if isinstance(storage, LazyTensorStorage) else
                                      type(storage)(100, scratch_dir=tmp_path / "scratch2"), batch_size=4)
    restored.loads(tmp_path / "rb")
    assert len(restored) == 30
    stored = restored[:30]
    assert torch.equal(stored["obs"], data["obs"])
    assert torch.equal(stored["next", "reward"], data["next", "reward"])
    assert restored.sample().batch_size == torch.Size([4])


# ----------------------------------------------------------------------------- actor
def _actor(obs_dim: int = 3, act_dim: int = 2):
    from torchrl.modules import ProbabilisticActor, TanhNormal

    net = nn.Sequential(nn.Linear(obs_dim, 16), nn.Tanh(), nn.Linear(16, 2 * act_dim), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(
        module,
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -1.0, "high": 1.0},
        return_log_prob=True,
    )


def test_probabilistic_actor_keys():
    from tensordict.nn import InteractionType, set_interaction_type

    actor = _actor()
    td = TensorDict(observation=torch.randn(7, 3), batch_size=[7])
    out = actor(td)
    assert out is td
    assert out["action"].shape == (7, 2)
    assert (out["action"].abs() <= 1).all()
    assert out["loc"].shape == (7, 2) and (out["scale"] > 0).all()
    # the log-prob key as tensordict 0.14.3 / 0.15 name it: "<sample key>_log_prob"
    assert "action_log_prob" in out.keys(), sorted(out.keys())
    log_prob = out["action_log_prob"]
    assert log_prob.shape[0] == 7 and torch.isfinite(log_prob).all()
    dist = actor.get_dist(td)
    torch.testing.assert_close(dist.log_prob(out["action"]).reshape(log_prob.shape), log_prob, rtol=1e-4, atol=1e-4)
    with set_interaction_type(InteractionType.DETERMINISTIC):
        a1 = actor(td.select("observation"))["action"]
        a2 = actor(td.select("observation"))["action"]
    assert torch.equal(a1, a2)


# ----------------------------------------------------------------------------- environment
def _make_env_class():
    from torchrl.data import Bounded, Composite, Unbounded
    from torchrl.envs import EnvBase

    class PointEnv(EnvBase):
        """A point on a plane pushed by the action; reward is minus the distance to 0."""

        def __init__(self, max_steps: int = 8):
            super().__init__(batch_size=torch.Size([]))
            self.max_steps = max_steps
            self.observation_spec = Composite(observation=Unbounded(shape=(3,)), shape=())
            self.action_spec = Bounded(low=-1.0, high=1.0, shape=(2,))
            self.reward_spec = Unbounded(shape=(1,))

        def _reset(self, tensordict):
            obs = torch.zeros(3)
            obs[:2] = torch.randn(2, generator=self._gen)
            return TensorDict(observation=obs, batch_size=self.batch_size)

        def _step(self, tensordict):
            obs = tensordict["observation"].clone()
            obs[:2] = obs[:2] + 0.1 * tensordict["action"]
            obs[2] = obs[2] + 1
            reward = -obs[:2].norm().reshape(1)
            done = (obs[2] >= self.max_steps).reshape(1)
            return TensorDict(
                observation=obs, reward=reward, done=done, terminated=done.clone(), batch_size=self.batch_size
            )

        def _set_seed(self, seed):
            self._gen = torch.Generator().manual_seed(seed if seed is not None else 0)

    return PointEnv


@pytest.fixture
def env():
    from torchrl.data import Unbounded
    from torchrl.envs import Compose, StepCounter, TensorDictPrimer, TransformedEnv

    base = _make_env_class()()
    base.set_seed(0)
    return TransformedEnv(base, Compose(StepCounter(), TensorDictPrimer(hidden=Unbounded(shape=(4,)))))


def test_env_specs_check(env):
    from torchrl.envs.utils import check_env_specs

    check_env_specs(env)


def test_rollout_random_policy(env):
    rollout = env.rollout(20)
    assert rollout.batch_size == torch.Size([8])  # stops at done
    assert rollout["next", "step_count"][-1].item() == 8
    assert torch.equal(rollout["step_count"].squeeze(-1), torch.arange(8))
    assert rollout["hidden"].shape == (8, 4)
    assert rollout["next", "done"][-1].all() and not rollout["next", "done"][:-1].any()
    assert (rollout["action"].abs() <= 1).all()
    # step_mdp: the next observation is the following step's observation
    assert torch.equal(rollout["next", "observation"][:-1], rollout["observation"][1:])


def test_rollout_actor_policy_and_gae(env):
    from torchrl.objectives.value import GAE

    actor = _actor()
    with torch.no_grad():
        rollout = env.rollout(20, policy=actor, break_when_any_done=True)
    assert rollout.batch_size == torch.Size([8])
    assert "action_log_prob" in rollout.keys()
    value_net = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["state_value"])
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=value_net)
    with torch.no_grad():
        out = gae(rollout.unsqueeze(0))
    adv = out["advantage"]
    assert adv.shape == (1, 8, 1)
    # recompute GAE by hand from the values GAE wrote
    v = out["state_value"][0, :, 0]
    nv = out["next", "state_value"][0, :, 0]
    r = out["next", "reward"][0, :, 0]
    term = out["next", "terminated"][0, :, 0].float()
    delta = r + 0.99 * nv * (1 - term) - v
    expected = torch.zeros(8)
    running = 0.0
    for t in reversed(range(8)):
        running = delta[t] + 0.99 * 0.95 * (1 - term[t]) * running
        expected[t] = running
    torch.testing.assert_close(adv[0, :, 0], expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["value_target"][0, :, 0], expected + v, rtol=1e-4, atol=1e-5)


def test_sync_data_collector(env):
    import torchrl.collectors as collectors

    # 0.14 exports the single-process collector as ``Collector`` (``SyncDataCollector`` before)
    sync_collector = getattr(collectors, "SyncDataCollector", None) or collectors.Collector
    actor = _actor()
    collector = sync_collector(env, actor, frames_per_batch=10, total_frames=30)
    batches = []
    for batch in collector:
        batches.append(batch)
    collector.shutdown()
    assert len(batches) == 3
    for batch in batches:
        assert batch.numel() == 10
        assert {"observation", "action", "next", "collector"} <= set(batch.keys())
        assert (batch["action"].abs() <= 1).all()
    # trajectories restart after done: step counts go back to 0
    steps = torch.cat([b["step_count"].reshape(-1) for b in batches])
    assert steps.max().item() <= 7 and (steps == 0).sum() >= 3


def test_ppo_loss_backward(env):
    from torchrl.modules import ValueOperator
    from torchrl.objectives import ClipPPOLoss

    actor = _actor()
    critic = ValueOperator(nn.Linear(3, 1), in_keys=["observation"])
    with torch.no_grad():
        rollout = env.rollout(8, policy=actor)
    loss = ClipPPOLoss(actor, critic)
    loss.make_value_estimator(gamma=0.99, lmbda=0.95)
    with torch.no_grad():
        loss.value_estimator(rollout)
    assert rollout["advantage"].shape == (8, 1)
    out = loss(rollout)
    total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
    assert total.ndim == 0 and torch.isfinite(total)
    total.backward()
    assert all(p.grad is not None for p in actor.parameters())
    assert all(p.grad is not None for p in critic.parameters())


def test_sac_loss_backward(env):
    # SAC runs its Q-value ensemble through functional parameters (TensorDict params + vmap)
    from torchrl.modules import ValueOperator
    from torchrl.objectives import SACLoss

    class QNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(5, 1)

        def forward(self, observation, action):
            return self.linear(torch.cat([observation, action], -1))

    actor = _actor()
    qvalue = ValueOperator(QNet(), in_keys=["observation", "action"])
    with torch.no_grad():
        rollout = env.rollout(8, policy=actor)
    loss = SACLoss(actor, qvalue, num_qvalue_nets=2, action_spec=env.action_spec)
    out = loss(rollout)
    assert {"loss_actor", "loss_qvalue", "loss_alpha"} <= set(out.keys())
    total = out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]
    assert torch.isfinite(total)
    total.backward()
    assert all(p.grad is not None for p in actor.parameters())
