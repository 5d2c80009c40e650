"""tensor_only classes, the state-dict layout, autograd helpers, replace, the context
manager protocol and the upstream method set."""

import collections
import dataclasses
import inspect
from collections import UserDict
from typing import Any

import pytest
import torch

from tensordict import NonTensorData, TensorClass, TensorDict, tensorclass
from tensordict.tensorclass import from_dataclass


class Only(TensorClass["tensor_only"]):
    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor | None = None


def test_tensor_only_casts_numbers_to_tensors():
    x = Only(1, 2.5)
    assert isinstance(x.a, torch.Tensor) and x.a.dtype == torch.int64
    assert isinstance(x.b, torch.Tensor) and x.b.item() == 2.5
    assert x.c is None
    x.c = 3
    assert isinstance(x.c, torch.Tensor) and x.c.item() == 3


@pytest.mark.parametrize("mapping", [dict, UserDict])
def test_tensor_only_mapping_becomes_tensordict(mapping):
    @tensorclass(tensor_only=True)
    class Holder:
        data: TensorDict

    h = Holder(data=mapping({"t": torch.ones(()), "sub": mapping({"u": torch.zeros(())})}))
    assert isinstance(h.data, TensorDict) and isinstance(h.data["sub"], TensorDict)
    assert h.data["sub", "u"] == 0
    h.data = mapping({"t": torch.zeros(())})
    assert isinstance(h.data, TensorDict) and h.data["t"] == 0
    h.set("data", mapping({"t": torch.full((), 2.0)}))
    assert h.data["t"] == 2


def test_tensor_only_keeps_tensordict_identity():
    class Holder(TensorClass["tensor_only"]):
        data: TensorDict[str, torch.Tensor]

    locked = TensorDict({"t": torch.ones(())}).lock_()
    assert Holder(data=locked).data is locked
    nested = Holder(data=UserDict({"inner": locked}))
    assert nested.data["inner"] is locked and nested.data["inner"].is_locked


def test_tensor_only_non_tensor_annotation_wraps():
    class Holder(TensorClass["tensor_only"]):
        meta: NonTensorData

    value = UserDict({"k": "v"})
    h = Holder(meta=value)
    assert isinstance(h.meta, NonTensorData) and h.meta.data is value


def test_tensor_only_from_dataclass():
    @dataclasses.dataclass
    class Data:
        data: TensorDict

    tc = from_dataclass(Data(data=UserDict({"t": torch.ones(())})), tensor_only=True)
    assert isinstance(tc.data, TensorDict)
    cls = from_dataclass(Data, tensor_only=True)
    assert isinstance(cls(data={"t": torch.ones(())}).data, TensorDict)


def test_tensor_only_rejects_bad_annotations_and_options():
    with pytest.raises(TypeError, match="tensor_only requires types to be Tensor"):

        class BadAny(TensorClass["tensor_only"]):
            a: Any

    with pytest.raises(TypeError, match="tensor_only requires types to be Tensor"):

        class BadStr(TensorClass["tensor_only"]):
            a: torch.Tensor | str

    for option in ("autocast", "nocast"):
        with pytest.raises(TypeError, match="tensor_only"):

            @tensorclass(tensor_only=True, **{option: True})
            class Both:
                a: torch.Tensor


@tensorclass
class Node:
    x: torch.Tensor
    z: str
    y: "Node" = None


def _node():
    return Node(x=torch.randn(3), z="tag", y=Node(x=torch.randn(3), z="inner", batch_size=[]), batch_size=[])


def test_state_dict_flat_layout_and_roundtrip():
    tc = _node()
    sd = tc.state_dict()
    assert list(sd) == ["x", "y.x"]
    assert "Node" in sd._metadata[""]["_type"]
    assert sd._metadata[""]["_non_tensor"] == {"z": "tag"}
    assert sd._metadata["y"]["_non_tensor"] == {"z": "inner", "y": None}
    other = tc.clone()
    other.x = torch.zeros(3)
    other.y.x = torch.zeros(3)
    other.z = "changed"
    assert other.load_state_dict(sd) is other
    assert torch.equal(other.x, tc.x) and torch.equal(other.y.x, tc.y.x)
    assert other.z == "tag" and other.y.z == "inner"


def test_state_dict_nested_and_legacy_layouts():
    tc = _node()
    nested = tc.state_dict(flatten=False)
    assert set(nested) == {"x", "y"} and isinstance(nested["y"], dict)
    assert nested._metadata["y"]["_non_tensor"]["z"] == "inner"
    other = tc.clone().zero_()
    other.y.z = "changed"
    other.load_state_dict(nested)
    assert torch.equal(other.y.x, tc.y.x) and other.y.z == "inner"

    @tensorclass
    class Pair:
        x: torch.Tensor
        y: torch.Tensor

    p = Pair(x=torch.zeros(2), y=torch.zeros(2), batch_size=[])
    legacy = collections.OrderedDict(
        _tensordict={"x": torch.ones(2), "y": torch.full((2,), 2.0), "__batch_size": torch.Size([]), "__device": None},
        _non_tensordict={},
    )
    p.load_state_dict(legacy)
    assert (p.x == 1).all() and (p.y == 2).all()


def test_state_dict_unexpected_keys():
    tc = _node()
    sd = tc.state_dict()
    sd["a"] = None
    with pytest.raises(KeyError, match="Key 'a' wasn't expected in the state-dict"):
        tc.load_state_dict(sd)
    del sd["a"]
    sd._metadata[""]["_non_tensor"]["a"] = None
    with pytest.raises(KeyError, match="Key 'a' wasn't expected"):
        tc.load_state_dict(sd)


def test_backward_and_requires_grad():
    @tensorclass
    class Losses:
        actor: torch.Tensor
        critic: torch.Tensor

    w = torch.randn(3, requires_grad=True)
    losses = Losses(actor=w.sum(), critic=w.pow(2).sum(), batch_size=[])
    assert losses.requires_grad
    losses.backward()
    assert torch.allclose(w.grad, 1 + 2 * w.detach())
    assert not Losses(actor=torch.zeros(()), critic=torch.zeros(()), batch_size=[]).requires_grad
    with pytest.raises(RuntimeError, match="no tensor field requires grad"):
        Losses(actor=torch.zeros(()), critic=torch.zeros(()), batch_size=[]).backward()


def test_replace_leaves_original_untouched():
    tc = _node()
    other = tc.clone().zero_()
    other.z = "new"
    other.y.z = "new inner"
    out = tc.replace(other)
    assert type(out) is Node and out.z == "new" and out.y.z == "new inner"
    assert tc.z == "tag" and tc.y.z == "inner" and not (tc.x == 0).all()
    assert tc.replace(z="kw").z == "kw" and tc.z == "tag"
    with pytest.raises(KeyError, match="not a field"):
        tc.replace(w=1)


def test_select_drops_unselected_non_tensor_fields():
    tc = _node()
    sub = tc.select("x")
    assert type(sub) is Node and sub.z is None and torch.equal(sub.x, tc.x)
    td = tc.select("x", "z", as_tensordict=True)
    assert type(td) is TensorDict and set(td.keys()) == {"x", "z"}


def test_leafwise_methods_reach_nested_instances():
    tc = _node()
    assert not tc.clone().zero_().y.x.any()
    assert tc.apply(lambda t: t.fill_(1.0)).all()
    tc.y.x.fill_(0.0)
    assert not tc.all() and tc.any()


def test_update_keeps_nested_instances():
    tc = _node()
    src = _node()
    tc.update(src.to_dict(retain_none=False))
    assert type(tc.y) is Node and torch.equal(tc.y.x, src.y.x) and tc.y.z == "inner"


def test_expected_keys_and_user_mappings():
    assert Node.__expected_keys__ == {"x", "z", "y"}

    class Holder(TensorClass):
        data: Any

    value = UserDict({"k": "v"})
    assert Holder(data=value).data is value


def test_is_non_tensor():
    tc = _node()
    assert tc.is_non_tensor("z")
    assert not tc.is_non_tensor("x")


def test_lock_context_manager():
    tc = _node()
    with tc.lock_():
        assert tc.is_locked
        with tc.unlock_():
            assert not tc.is_locked
        assert tc.is_locked
    assert not tc.is_locked


def test_update_with_keyword_fields():
    @tensorclass
    class Two:
        a: torch.Tensor
        b: torch.Tensor

    t = Two(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])
    assert t.update(a=torch.ones(3)) is t and (t.a == 1).all()
    t.update_(b=torch.full((3,), 2.0))
    assert (t.b == 2).all()
    src = Two(a=torch.full((3,), 5.0), b=torch.full((3,), 7.0), batch_size=[3])
    t.update(src, b=torch.full((3,), 9.0))
    assert (t.a == 5).all() and (t.b == 9).all()
    assert t.update() is t and t.update_() is t


def test_signature_hides_internal_keywords():
    assert list(inspect.signature(Node).parameters) == ["x", "z", "y", "batch_size", "device", "names"]
    Node(x=torch.zeros(2), z="a", batch_size=[2], lock=True)  # still accepted


def test_dtype_casts_and_axis_aliases():
    tc = Node(x=torch.zeros(2, 3), z="a", batch_size=[2, 3])
    assert tc.float64().x.dtype == torch.float64
    assert tc.int32().x.dtype == torch.int32
    assert tc.swapaxes(0, 1).batch_size == torch.Size([3, 2])


def test_upstream_method_names_exist():
    for name in ("backward", "float32", "swapdims", "new_zeros", "to_json", "separates", "from_list"):
        assert callable(getattr(Node, name)), name
    for name in ("dtype", "requires_grad", "is_cpu"):
        assert isinstance(inspect.getattr_static(Node, name), property), name


def test_my_dist_data_is_importable_from_testing():
    from tensordict.testing import MyDistData

    m = MyDistData(a=torch.ones(3), b=torch.zeros(3, 2), batch_size=[3])
    assert type(m).__name__ == "MyDistData" and m.b.shape == (3, 2)
