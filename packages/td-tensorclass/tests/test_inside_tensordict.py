"""A tensorclass stored as a value of a TensorDict: ``to_dict``, ``numpy``, comparison
with a dict, and ``state_dict``/``load_state_dict`` through it."""

import pytest
import torch

from tensordict import TensorDict, assert_allclose_td, tensorclass


@tensorclass
class Node:
    X: torch.Tensor
    child: "Node" = None
    tag: str = None


def make():
    bs = [4, 3]
    node = Node(X=torch.randn(*bs, 2), child=Node(X=torch.randn(*bs), batch_size=bs), tag="t", batch_size=bs)
    return TensorDict({"a": torch.randn(*bs, 5), "node": node}, batch_size=bs)


def test_to_dict_opens_the_tensorclass():
    td = make()
    d = td.to_dict()
    assert type(d["node"]) is dict and type(d["node"]["child"]) is dict
    assert d["node"]["tag"] == "t"
    assert d["node"]["X"] is td["node"].X
    assert (TensorDict.from_dict(d, auto_batch_size=False) == td).all()


def test_numpy_opens_the_tensorclass_tensor_fields():
    np = pytest.importorskip("numpy")
    out = make().numpy()
    assert isinstance(out["node"]["X"], np.ndarray)
    assert isinstance(out["node"]["child"]["X"], np.ndarray)
    assert "tag" not in out["node"]  # non-tensor fields are not part of the arrays


def test_compare_with_its_dict():
    td = make()
    assert (td == td.to_dict()).all()
    zeros = td.to_tensordict(retain_none=True).zero_().to_dict()
    assert (td != zeros).any()


def test_state_dict_round_trip_in_place():
    td = make()
    target = td.clone().detach().zero_()
    node_before, x_before = target["node"], target["node"].X
    target.load_state_dict(td.state_dict())
    assert_allclose_td(td, target)
    assert target["node"] is node_before and target["node"].X is x_before  # copied in place
    assert target["node"].tag == "t"


def test_state_dict_strict_and_assign():
    td = make()
    sd = td.state_dict()
    del sd["a"]
    target = td.clone().detach().zero_()
    target.load_state_dict(sd, strict=False)
    with pytest.raises(RuntimeError, match="missing keys"):
        target.load_state_dict(sd, strict=True)
    target = td.clone().detach().zero_()
    target.load_state_dict(td.state_dict(), assign=True)
    node = target["node"]
    assert isinstance(node, Node)
    assert node.X is node._tensordict.get("X")  # the instance sees the assigned tensors
    assert (node.X == td["node"].X).all()
