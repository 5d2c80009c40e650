"""TorchRL 0.14.1's exploration modules, specs, storages, MCTS trees, tensorclass actions and
batched envs on this stack (issue 32), as its users build them.

Each expectation was checked by running the same test under tensordict 0.15.3 (except the
keyword-call test at the end, our recorded departure).
"""

from __future__ import annotations

import pytest

torchrl = pytest.importorskip("torchrl")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torchrl.envs import EnvBase  # noqa: E402

from tensordict import TensorDict, lazy_stack  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402


# ----------------------------------------------------------------------------- exploration
def _gsde_actor():
    from torchrl.data import Bounded
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal
    from torchrl.modules.models.exploration import gSDEModule

    net = TensorDictModule(MLP(in_features=3, out_features=2, num_cells=[8]), ["observation"], ["mu"])
    gsde = TensorDictModule(gSDEModule(action_dim=2, state_dim=3), ["mu", "observation", "_eps_gSDE"], ["loc", "scale", "action", "_eps_gSDE"])
    return ProbabilisticActor(
        TensorDictSequential(net, gsde),
        in_keys=["loc", "scale"],
        spec=Bounded(-1, 1, (2,)),
        distribution_class=TanhNormal,
        default_interaction_type="random",
    )


def test_gsde_sees_the_actors_default_interaction_type():
    # gSDEModule reads exploration_type(): the probabilistic sequence makes its
    # default_interaction_type ambient during forward (None would raise "not defined")
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    torch.manual_seed(0)
    actor = _gsde_actor()
    td = TensorDict(observation=torch.randn(4, 3), batch_size=[4])
    out = actor(td.clone())
    assert out["action"].shape == (4, 2) and out["_eps_gSDE"].shape == (4, 2, 3)
    assert (out["_eps_gSDE"] != 0).any()  # random: fresh noise
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        det = actor(td.clone())
    assert (det["_eps_gSDE"] == 0).all()


def test_ornstein_uhlenbeck_noise_keeps_actions_in_spec_and_steps():
    from torchrl.data import Bounded
    from torchrl.modules import Actor, OrnsteinUhlenbeckProcessModule

    torch.manual_seed(0)
    spec = Bounded(-1, 1, (2,))
    actor = Actor(nn.Linear(3, 2), in_keys=["observation"], spec=spec)
    ou = OrnsteinUhlenbeckProcessModule(spec=spec)
    policy = TensorDictSequential(actor, ou)
    td = TensorDict(observation=torch.randn(5, 3), is_init=torch.ones(5, 1, dtype=torch.bool), batch_size=[5])
    first = policy(td.clone())
    assert spec.is_in(first["action"])
    noise_key = [k for k in first.keys() if "ou_prev_noise" in str(k)]
    assert noise_key, sorted(first.keys())
    follow = first.exclude("action")
    follow["is_init"] = torch.zeros(5, 1, dtype=torch.bool)
    second = policy(follow)
    assert spec.is_in(second["action"]) and not torch.equal(second["action"], first["action"])
    ou.step(3)


# ----------------------------------------------------------------------------- specs
def test_composite_spec_index_versus_key():
    # Composite.__getitem__ tells an index from a key with unravel_key(idx) == ()
    from torchrl.data import Categorical, Composite, Unbounded

    spec = Composite(obs=Unbounded((4, 3)), nested=Composite(act=Categorical(5, (4, 1)), shape=(4,)), shape=(4,))
    assert spec["obs"].shape == (4, 3)
    assert spec["nested", "act"].shape == (4, 1)
    assert spec[0].shape == () and spec[0]["obs"].shape == (3,)
    assert spec[(0,)]["nested", "act"].shape == (1,)
    assert spec[1:3].shape == (2,) and spec[1:3]["obs"].shape == (2, 3)
    assert spec[(slice(0, 2),)].shape == (2,)
    sample = spec.rand()
    assert spec.is_in(sample) and spec[2].is_in(sample[2])


def test_stacked_composite_specs_of_different_shapes():
    from torchrl.data import Composite, Unbounded

    stacked = torch.stack([Composite(obs=Unbounded(i + 1)) for i in range(3)], 0)
    sample = stacked.rand()
    assert [tuple(x.shape) for x in sample.get("obs", as_list=True)] == [(1,), (2,), (3,)]
    assert stacked.is_in(sample)
    assert stacked[1]["obs"].shape == (2,)
    assert stacked["obs"].shape == (3, -1)


def test_non_tensor_spec_values():
    from torchrl.data import Composite, NonTensor, Unbounded

    spec = Composite(obs=Unbounded(3), text=NonTensor(shape=(), example_data="txt"))
    sample = spec.rand()
    assert sample["text"] == "txt"
    assert spec.is_in(sample)  # compares the non-tensor leaf's dtype (None)
    encoded = spec.encode({"obs": torch.zeros(3), "text": "hey"})
    assert encoded["text"] == "hey" and spec.is_in(encoded)
    # NonTensor.rand(shape) lazily stacks copies of one NonTensorData: a NonTensorStack
    from tensordict import NonTensorStack

    leaf = NonTensor(shape=(1,), example_data="a")
    batched = leaf.rand((3,))
    assert isinstance(batched, NonTensorStack) and batched.shape == (3, 1)
    assert leaf.expand(3, 1).is_in(batched)
    wide = Composite(text=NonTensor(shape=(2,), example_data="a"), shape=(2,)).expand(4, 2)
    assert wide.rand().get("text").shape == (4, 2) and wide.is_in(wide.rand())


# ----------------------------------------------------------------------------- storages
def _ragged(n: int, offset: int = 0):
    return lazy_stack([TensorDict(obs=torch.full((i + 1 + offset, 2), float(i)), reward=torch.ones(1)) for i in range(n)])


def test_lazy_stack_storage_extended_with_ragged_stacks():
    from torchrl.data import LazyStackStorage, ReplayBuffer

    rb = ReplayBuffer(storage=LazyStackStorage(10), batch_size=2)
    rb.extend(_ragged(3))
    rb.extend(_ragged(3, offset=2))
    content = rb[:]
    assert content.batch_size == (6,)
    assert [tuple(x["obs"].shape) for x in content.unbind(0)] == [(1, 2), (2, 2), (3, 2), (3, 2), (4, 2), (5, 2)]
    assert content.get("obs", as_padded_tensor=True).shape == (6, 5, 2)
    torch.manual_seed(0)
    sample = rb.sample()
    assert sample.batch_size == (2,)
    rb.storage.set(1, TensorDict(obs=torch.zeros(7, 2), reward=torch.ones(1)))
    assert rb[1]["obs"].shape == (7, 2)


def test_dense_storage_refuses_a_ragged_stack_with_the_read_hint():
    from torchrl.data import LazyTensorStorage, ReplayBuffer

    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    with pytest.raises(RuntimeError, match="as_list"):
        rb.extend(_ragged(3))


# ----------------------------------------------------------------------------- MCTS
class _CountingEnv(EnvBase):
    def __init__(self):
        from torchrl.data import Categorical, Composite, Unbounded

        super().__init__()
        self.observation_spec = Composite(observation=Unbounded((1,)))
        self.action_spec = Categorical(2, shape=(1,))
        self.reward_spec = Unbounded((1,))

    def _reset(self, td=None):
        done = torch.zeros(1, dtype=torch.bool)
        return TensorDict(observation=torch.zeros(1), done=done, terminated=done.clone())

    def _step(self, td):
        obs = td["observation"] * 2 + td["action"].float() + 1
        done = torch.zeros(1, dtype=torch.bool)
        return TensorDict(observation=obs, reward=torch.ones(1), done=done, terminated=done.clone())

    def _set_seed(self, seed):
        pass


def _forest():
    from torchrl.data.map.tree import MCTSForest
    from torchrl.envs.utils import step_mdp

    env = _CountingEnv()
    forest = MCTSForest()
    root = env.reset()
    for actions in ([0, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 1]):
        td, steps = root.clone(), []
        for a in actions:
            td["action"] = torch.tensor([a])
            td = env.step(td)
            steps.append(td.clone())
            td = step_mdp(td)
        forest.extend(torch.stack(steps))
    return forest, root


def test_mcts_forest_tree_vertices_and_paths():
    forest, root = _forest()
    tree = forest.get_tree(root)
    assert tree.num_vertices() == 7 and tree.num_vertices(count_repeat=True) == 7
    assert sorted(tree.valid_paths()) == [(0, 0, 0), (0, 0, 1), (0, 1), (1,)]
    assert tree.max_length() == 3
    assert sorted(tree.vertices(key_type="id")) == list(range(7))
    assert len(forest) == 12


def test_mcts_tree_nodes_parents_and_membership():
    from torchrl.data.map.tree import Tree

    def node(i):
        return Tree(count=torch.zeros(()), wins=torch.zeros(()), node_id=i, hash=i * 10, node_data=TensorDict(obs=torch.full((2,), float(i))))

    root, a, b = node(0), node(1), node(2)
    a.subtree = TensorDict.lazy_stack([node(3), node(4)])
    b.subtree = TensorDict.lazy_stack([node(5)])
    root.subtree = TensorDict.lazy_stack([a, b])
    del a, b
    assert sorted(root.edges()) == [(0, 1), (0, 2), (1, 3), (1, 4), (2, 5)]
    assert sorted(root.vertices(key_type="path")) == [(), (0,), (0, 0), (0, 1), (1,), (1, 0)]
    assert node(4) in root and node(9) not in root  # TorchRL's TestTree::test_in (hung here before)
    assert root.subtree[0].subtree[1].parent.node_id == 1
    assert [n.node_id for n in root.subtree.unbind(0)] == [1, 2]  # reading the parent left the tree intact
    assert root.get_vertex_by_id(5).node_data["obs"].tolist() == [5.0, 5.0]


# ----------------------------------------------------------------------------- tensorclass actions
def test_tensorclass_action_built_on_torchrls_paths():
    from torchrl.data.vla import VLAAction

    action = VLAAction(chunk=torch.zeros(2, 4, 7), batch_size=[2])
    assert action.chunk.shape == (2, 4, 7) and action.tokens is None
    assert isinstance(action._tensordict, TensorDict)
    td = TensorDict(action=action, batch_size=[2])
    assert td["action", "chunk"].shape == (2, 4, 7)
    assert td[0]["action"].chunk.shape == (4, 7)
    assert torch.stack([action, action]).chunk.shape == (2, 2, 4, 7)
    action.chunk = torch.ones(2, 4, 7)
    assert action.chunk.sum() == 56


# ----------------------------------------------------------------------------- batched envs
class _HeteroEnv(EnvBase):
    """Three agents whose observations differ in size: a lazily stacked env."""

    def __init__(self):
        from torchrl.data import Categorical, Composite, Unbounded

        super().__init__(batch_size=(3,))
        self.observation_spec = torch.stack([Composite(obs=Unbounded(i + 1), shape=()) for i in range(3)], 0)
        self.action_spec = torch.stack([Composite(action=Categorical(2, shape=(1,)), shape=()) for _ in range(3)], 0)
        self.reward_spec = Unbounded((3, 1))
        self.count = 0

    def _obs(self):
        out = lazy_stack([TensorDict(obs=torch.full((i + 1,), float(self.count))) for i in range(3)])
        out.set("done", torch.zeros(3, 1, dtype=torch.bool))
        out.set("terminated", torch.zeros(3, 1, dtype=torch.bool))
        return out

    def _reset(self, td=None, **kwargs):
        self.count = 0
        return self._obs()

    def _step(self, td):
        self.count += 1
        out = self._obs()
        out.set("reward", torch.ones(3, 1))
        return out

    def _set_seed(self, seed):
        pass


def test_heterogeneous_env_rollout_and_step_mdp():
    from torchrl.envs.utils import step_mdp

    env = _HeteroEnv()
    rollout = env.rollout(4, return_contiguous=False)
    assert rollout.batch_size == (3, 4)
    assert rollout[1, 2]["next", "obs"].tolist() == [3.0, 3.0]
    nxt = step_mdp(env.rand_step(env.reset()))
    assert [tuple(x["obs"].shape) for x in nxt.unbind(0)] == [(1,), (2,), (3,)]


def test_serial_env_of_dense_envs_and_stackable_check():
    from torchrl.envs import SerialEnv
    from torchrl.envs.batched_envs import _stackable

    env = SerialEnv(2, _CountingEnv)
    rollout = env.rollout(3)
    assert rollout.batch_size == (2, 3)
    env.close()
    same = TensorDict(a=torch.zeros(2), n={"x": torch.zeros(1)})
    assert _stackable(same, same.clone())  # uses LazyStackedTensorDict._has_exclusive_keys
    assert not _stackable(same, TensorDict(a=torch.zeros(2), n={"y": torch.zeros(1)}))


def test_rollout_stack_of_exclusive_keys_raises_runtime_error():
    # EnvBase.rollout catches RuntimeError from torch.stack and matches its opening words
    with pytest.raises(RuntimeError, match="^The sets of keys in the tensordicts to stack are exclusive"):
        torch.stack([TensorDict(a=torch.ones(1)), TensorDict(b=torch.ones(1))])


# ----------------------------------------------------------------------------- keyword calls (departure)
def test_keyword_call_departure_points_to_the_switch():
    """Our recorded departure: ``actor(observation=x)`` returns the TensorDict; unpacking it
    says how to get 0.15's tensors back, and the switch does."""
    from torchrl.modules import Actor

    from tensordict.nn import set_keyword_calls_return_tensors

    actor = Actor(nn.Linear(3, 2), in_keys=["observation"])
    obs = torch.zeros(3)
    with pytest.raises(TypeError, match="set_keyword_calls_return_tensors"):
        (action,) = actor(observation=obs)
    with set_keyword_calls_return_tensors(True):
        assert actor(observation=obs).shape == (2,)
