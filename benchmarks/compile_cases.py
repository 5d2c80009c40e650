"""The three functions that the compile benchmarks time, over a TensorDict and over a
plain dict of the same tensors (shared by ``test_bench_compile.py`` and
``compile_time.py``, which also runs under tensordict 0.15.3).

- ``mlp``: a 3-layer ``TensorDictSequential`` MLP on a batch of 256;
- ``apply``: ``td.apply(lambda x: x * 2 + 1)`` over 20 leaves;
- ``ppo``: a PPO-style loss that reads 6 keys and writes 3.
"""

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

BATCH, FEATURES, LEAVES = 256, 64, 20
PPO_IN = ("log_prob", "old_log_prob", "advantage", "value", "value_target", "entropy")


def _linears():
    torch.manual_seed(0)
    return [nn.Linear(FEATURES, FEATURES) for _ in range(3)]


def mlp_case():
    """(td_fn, td_input, dict_fn, dict_input) for the 3-layer MLP."""
    lins = _linears()
    keys = ["in", "h1", "h2", "out"]
    seq = TensorDictSequential(*[TensorDictModule(lin, [keys[i]], [keys[i + 1]]) for i, lin in enumerate(lins)])
    x = torch.randn(BATCH, FEATURES)

    def dict_fn(d):
        h = d["in"]
        for key, lin in zip(keys[1:], lins):
            h = lin(h)
            d[key] = h
        return d

    return seq, TensorDict({"in": x}, [BATCH]), dict_fn, {"in": x.clone()}


def apply_case():
    source = {f"k{i}": torch.randn(BATCH, 8) for i in range(LEAVES)}

    def td_fn(td):
        return td.apply(lambda x: x * 2 + 1)

    def dict_fn(d):
        return {k: v * 2 + 1 for k, v in d.items()}

    return td_fn, TensorDict(source, [BATCH]), dict_fn, dict(source)


def _ppo_terms(log_prob, old_log_prob, advantage, value, value_target, entropy):
    ratio = (log_prob - old_log_prob).exp()
    clipped = ratio.clamp(0.8, 1.2)
    objective = -torch.minimum(ratio * advantage, clipped * advantage).mean()
    critic = (value - value_target).pow(2).mean()
    return objective, critic, -0.01 * entropy.mean()


def ppo_case():
    torch.manual_seed(0)
    source = {key: torch.randn(BATCH) for key in PPO_IN}

    def td_fn(td):
        objective, critic, ent = _ppo_terms(*(td[key] for key in PPO_IN))
        return TensorDict(loss_objective=objective, loss_critic=critic, loss_entropy=ent)

    def dict_fn(d):
        objective, critic, ent = _ppo_terms(*(d[key] for key in PPO_IN))
        return {"loss_objective": objective, "loss_critic": critic, "loss_entropy": ent}

    return td_fn, TensorDict(source, [BATCH]), dict_fn, dict(source)


CASES = {"mlp": mlp_case, "apply": apply_case, "ppo": ppo_case}
