"""More of TorchRL 0.14.1 on this stack: off-policy losses with target networks (the
TensorDictParams + ``apply_``/``lerp_`` road), discrete actions, batched and
multiprocess environments and collectors, recurrent modules, value estimators and
memory-mapped replay buffers saved and loaded.

Run by ``nox -s downstream``; skipped where TorchRL is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torchrl = pytest.importorskip("torchrl")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))  # pytest imports test files by path (importlib mode)
from test_torchrl import _make_env_class, _transitions  # noqa: E402
from torch import nn  # noqa: E402

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402


def make_env():
    from torchrl.data import Unbounded
    from torchrl.envs import (
        Compose,
        InitTracker,
        RewardSum,
        StepCounter,
        TensorDictPrimer,
        TransformedEnv,
    )

    base = _make_env_class()()
    base.set_seed(0)
    transforms = Compose(StepCounter(), InitTracker(), RewardSum(), TensorDictPrimer(hidden=Unbounded(shape=(4,))))
    return TransformedEnv(base, transforms)


class _Q(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(5, 1)

    def forward(self, observation, action):
        return self.linear(torch.cat([observation, action], -1))


def _deterministic_actor():
    from torchrl.modules import TanhModule

    return TensorDictSequential(
        TensorDictModule(nn.Linear(3, 2), ["observation"], ["param"]),
        TanhModule(in_keys=["param"], out_keys=["action"]),
    )


def _critic():
    from torchrl.modules import ValueOperator

    return ValueOperator(_Q(), in_keys=["observation", "action"], out_keys=["state_action_value"])


def test_ddpg_loss_and_target_updates():
    from torchrl.objectives import DDPGLoss, HardUpdate, SoftUpdate

    env, actor = make_env(), _deterministic_actor()
    loss = DDPGLoss(actor, _critic(), delay_actor=True, delay_value=True)
    updater = SoftUpdate(loss, eps=0.9)
    with torch.no_grad():
        rollout = env.rollout(8, policy=actor)
    out = loss(rollout)
    (out["loss_actor"] + out["loss_value"]).backward()
    target = loss.target_value_network_params
    before = target.clone()
    with torch.no_grad():
        for p in loss.value_network_params.values(True, True):
            p.add_(1.0)
    updater.step()  # target <- 0.9 target + 0.1 online, in place
    for key, old in before.items(True, True):
        online = loss.value_network_params.get(key)
        torch.testing.assert_close(target.get(key), 0.9 * old + 0.1 * online)
    HardUpdate(loss, value_network_update_interval=1).step()
    for key, value in loss.value_network_params.items(True, True):
        torch.testing.assert_close(target.get(key), value.data)


def test_td3_loss_backward():
    from torchrl.objectives import TD3Loss

    env, actor = make_env(), _deterministic_actor()
    loss = TD3Loss(actor, _critic(), action_spec=env.action_spec)
    with torch.no_grad():
        rollout = env.rollout(8, policy=actor)
    out = loss(rollout)
    (out["loss_actor"] + out["loss_qvalue"]).backward()
    assert all(p.grad is not None for p in actor.parameters())


def test_dqn_with_egreedy_exploration():
    from torchrl.data import Composite, OneHot, Unbounded
    from torchrl.envs import EnvBase
    from torchrl.modules import EGreedyModule, QValueActor
    from torchrl.objectives import DQNLoss

    class Discrete(EnvBase):
        def __init__(self):
            super().__init__(batch_size=torch.Size([]))
            self.observation_spec = Composite(observation=Unbounded(shape=(3,)), shape=())
            self.action_spec = OneHot(4)
            self.reward_spec = Unbounded(shape=(1,))

        def _reset(self, tensordict):
            return TensorDict(observation=torch.zeros(3), batch_size=[])

        def _step(self, tensordict):
            obs = tensordict["observation"] + tensordict["action"].float()[:3]
            done = (obs.sum() > 4).reshape(1)
            return TensorDict(observation=obs, reward=torch.ones(1), done=done, terminated=done.clone(), batch_size=[])

        def _set_seed(self, seed):
            pass

    env = Discrete()
    actor = QValueActor(nn.Linear(3, 4), in_keys=["observation"], spec=env.action_spec)
    policy = TensorDictSequential(actor, EGreedyModule(env.action_spec, eps_init=0.5))
    with torch.no_grad():
        rollout = env.rollout(10, policy=policy)
    assert (rollout["action"].sum(-1) == 1).all()
    loss = DQNLoss(actor, action_space=env.action_spec, delay_value=True)
    loss(rollout)["loss"].backward()


def test_serial_and_parallel_envs():
    from torchrl.envs import ParallelEnv, SerialEnv

    serial = SerialEnv(2, make_env)
    rollout = serial.rollout(5)
    serial.close()
    assert rollout.batch_size == (2, 5)
    parallel = ParallelEnv(2, make_env, mp_start_method="fork")
    try:
        rollout = parallel.rollout(5)
    finally:
        parallel.close()
    assert rollout.batch_size == (2, 5)
    assert torch.equal(rollout["step_count"][0].squeeze(-1), torch.arange(5))


def test_multiprocess_collector():
    import torchrl.collectors as collectors

    cls = getattr(collectors, "MultiSyncDataCollector", None) or collectors.MultiSyncCollector
    # the workers are spawned: they cannot import this test module by its pytest name
    # (``tests.downstream...``), so the env factory travels by value
    cloudpickle = pytest.importorskip("cloudpickle")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    frames = 0
    try:
        collector = cls([make_env, make_env], None, frames_per_batch=20, total_frames=40)
        try:
            for batch in collector:
                frames += batch.numel()
                assert "action" in batch.keys() and ("next", "reward") in batch.keys(True)
        finally:
            collector.shutdown()
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert frames == 40


def test_memmap_replay_buffer_dumps_and_loads_nested(tmp_path):
    from torchrl.data import LazyMemmapStorage, TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=tmp_path / "scratch"), batch_size=8)
    data = _transitions(30)
    data["nested"] = TensorDict(x=torch.arange(60.0).view(30, 2), batch_size=[30])
    rb.extend(data)
    assert rb.sample()["nested", "x"].shape == (8, 2)
    rb.dumps(tmp_path / "dump")
    again = TensorDictReplayBuffer(storage=LazyMemmapStorage(100), batch_size=8)
    again.loads(tmp_path / "dump")
    assert len(again) == 30
    stored = again[:]
    assert torch.equal(stored["nested", "x"], data["nested", "x"])


def test_lstm_module_in_an_env_and_in_recurrent_mode():
    from torchrl.envs import InitTracker, TransformedEnv
    from torchrl.modules import LSTMModule, set_recurrent_mode

    lstm = LSTMModule(input_size=3, hidden_size=8, in_key="observation", out_key="features")
    env = TransformedEnv(_make_env_class()(), InitTracker())
    env.append_transform(lstm.make_tensordict_primer())
    env.set_seed(0)
    policy = TensorDictSequential(lstm, TensorDictModule(nn.Linear(8, 2), ["features"], ["action"]))
    with torch.no_grad():
        rollout = env.rollout(6, policy)
    assert rollout["next", "recurrent_state_h"].shape[-1] == 8
    with set_recurrent_mode(True):
        out = policy(rollout.unsqueeze(0))
    assert out["features"].shape == (1, 6, 8)


@pytest.mark.parametrize("name", ["TD0Estimator", "TD1Estimator", "TDLambdaEstimator"])
def test_value_estimators(name):
    import torchrl.objectives.value as value
    from torchrl.modules import ValueOperator

    env = make_env()
    with torch.no_grad():
        rollout = env.rollout(8)
    critic = ValueOperator(nn.Linear(3, 1), in_keys=["observation"])
    kwargs = {"lmbda": 0.9} if name == "TDLambdaEstimator" else {}
    with torch.no_grad():
        out = getattr(value, name)(gamma=0.9, value_network=critic, **kwargs)(rollout.clone())
    assert out["advantage"].shape == (8, 1) and torch.isfinite(out["value_target"]).all()


def test_split_trajectories_and_step_mdp():
    from torchrl.collectors.utils import split_trajectories
    from torchrl.envs.utils import step_mdp

    rollout = make_env().rollout(20, break_when_any_done=False)
    split = split_trajectories(rollout)
    assert split.ndim == 2 and split.shape[0] >= 2
    nxt = step_mdp(rollout[0])
    assert torch.equal(nxt["observation"], rollout[0]["next", "observation"])
