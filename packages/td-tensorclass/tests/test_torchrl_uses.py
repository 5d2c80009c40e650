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


class Node(TensorClass["nocast"]):
    # as TorchRL's MCTS Tree: int ids, a lazily stacked subtree of nodes, a weakref parent
    count: torch.Tensor | None = None
    node_id: int | None = None
    subtree: Node = None
    _parent: object = None

    def __setattr__(self, name, value):
        if name == "subtree" and value is not None:
            import weakref

            value._parent = weakref.ref(self._tensordict)
        super().__setattr__(name, value)


def _node(i):
    return Node(count=torch.zeros(()), node_id=i)


def _ids(tree):
    out, queue = [], [tree]
    while queue:
        node = queue.pop(0)
        out.append(node.node_id)
        if node.subtree is not None:
            queue.extend(node.subtree[i] for i in range(len(node.subtree)))
    return out


def test_lazy_stack_of_instances_keeps_their_tensordicts_and_ids():
    a, b = _node(1), _node(2)
    stack = TensorDict.lazy_stack([a, b])
    assert stack._tensordict.tensordicts[0] is a._tensordict
    assert [n.node_id for n in stack.unbind(0)] == [1, 2]
    assert stack[1].node_id == 2 and stack[0].node_id == 1  # reading does not empty the members
    assert [n.node_id for n in stack.unbind(0)] == [1, 2]


def test_subtree_set_after_stacking_shows_through_the_stack():
    # TorchRL's MCTSForest stacks the children first, then gives each child its own subtree
    root, a, b = _node(0), _node(1), _node(2)
    root.subtree = TensorDict.lazy_stack([a, b])
    a.subtree = TensorDict.lazy_stack([_node(3), _node(4)])
    b.subtree = TensorDict.lazy_stack([_node(5)])
    assert _ids(root) == [0, 1, 2, 3, 4, 5]
    assert len(root.subtree[0].subtree) == 2


def test_weakref_parent_of_a_stacked_node():
    root, a, b = _node(0), _node(1), _node(2)
    a.subtree = TensorDict.lazy_stack([_node(3), _node(4)])
    root.subtree = TensorDict.lazy_stack([a, b])
    del a, b
    child = root.subtree[0].subtree[1]
    parent = Node._from_tensordict(child._parent())  # as Tree.parent reads it
    assert parent.node_id == 1
    assert _ids(root) == [0, 1, 2, 3, 4]  # reading the parent left the tree intact
