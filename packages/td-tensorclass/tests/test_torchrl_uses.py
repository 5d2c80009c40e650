"""Tensorclasses built the way TorchRL 0.14 builds them (issue 32).

Every test here also passes on tensordict 0.15.3 (run the file with its interpreter).
"""

from __future__ import annotations

import torch

from tensordict import TensorClass, TensorDict


class Action(TensorClass["nocast", "shadow"]):
    chunk: torch.Tensor | None = None
    tokens: torch.Tensor | None = None
    padded: bool | None = None


def _get_chunk(action):
    return action._tensordict.get("chunk", None)


def _set_chunk(action, value):
    action._tensordict.set("chunk", value)


# as TorchRL's VLAAction: `chunk` is also a TensorDict method, so a property is put over the field
Action.chunk = property(_get_chunk, _set_chunk)


def test_property_over_a_field_reads_the_tensordict():
    action = Action(chunk=torch.zeros(2, 4, 7), batch_size=[2])
    assert isinstance(action._tensordict, TensorDict)
    assert action.chunk.shape == (2, 4, 7)
    assert action.tokens is None and action.padded is None
    assert Action(batch_size=[2]).chunk is None


def test_property_over_a_field_survives_indexing_stacking_and_nesting():
    action = Action(chunk=torch.arange(6.0).reshape(2, 3), batch_size=[2])
    assert action[1].chunk.tolist() == [3.0, 4.0, 5.0]
    assert torch.stack([action, action]).chunk.shape == (2, 2, 3)
    assert action.clone().chunk.shape == (2, 3)
    assert action.apply(lambda t: t + 1).chunk[0, 0] == 1.0
    td = TensorDict(action=action, batch_size=[2])
    assert td[0]["action"].chunk.tolist() == [0.0, 1.0, 2.0]
    assert td["action", "chunk"].shape == (2, 3)


def test_property_setter_writes_the_field():
    action = Action(chunk=torch.zeros(2, 3), batch_size=[2])
    action.chunk = torch.ones(2, 3)
    assert action.chunk.sum() == 6
    assert action._tensordict["chunk"].sum() == 6
