"""autocast: scalar annotations cast, numpy arrays, ``Any`` and unions left alone."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import TensorDict, tensorclass

np = pytest.importorskip("numpy")


@tensorclass(autocast=True)
class Casts:
    tensor: torch.Tensor
    integer: int
    string: str
    floating: float
    anything: Any


@tensorclass(autocast=True)
class Node:
    tensor: torch.Tensor
    td: TensorDict
    child: Node
    maybe: Node | None = None


def test_scalar_annotations_are_cast():
    obj = Casts(tensor=1, integer=1.0, string=1, floating=1, anything=1)
    assert isinstance(obj.tensor, torch.Tensor)
    assert type(obj.integer) is int and type(obj.floating) is float
    assert obj.string == "1"
    assert isinstance(obj.anything, torch.Tensor)
    obj.anything = "text"
    assert obj.anything == "text"
    with pytest.raises(TypeError):
        obj.tensor = "not a number"


def test_numpy_annotation():
    @tensorclass(autocast=True)
    class Arr:
        a: np.ndarray

    assert isinstance(Arr(a=[1, 2]).a, np.ndarray)


def test_unions_are_not_cast():
    inner = {"tensor": torch.zeros(()), "td": {"b": 0.0}, "child": None}
    obj = Node(tensor=torch.zeros(()), td={"a": 0.0}, child=inner, maybe=dict(inner))
    assert isinstance(obj.td, TensorDict)
    assert type(obj.child) is Node and isinstance(obj.child.td, TensorDict)
    assert type(obj.maybe) is dict  # X | None: stored as given


def test_dict_annotated_field_keeps_the_dict():
    import dataclasses

    from tensordict import TensorClass

    class WithDict(TensorClass):
        a: torch.Tensor
        c: dict = dataclasses.field(default_factory=dict)

    obj = WithDict(a=torch.arange(3), batch_size=[3])
    assert type(obj.c) is dict and obj[0].c is obj[1].c


def test_setitem_from_a_class_with_other_fields_is_refused():
    from tensordict import TensorClass

    class A(TensorClass):
        x: torch.Tensor
        y: torch.Tensor

    class B(TensorClass):
        x: torch.Tensor
        z: torch.Tensor

    class SameFields(TensorClass):
        x: torch.Tensor
        y: torch.Tensor

    a = A(x=torch.zeros(3), y=torch.zeros(3), batch_size=[3])
    a[:2] = SameFields(x=torch.ones(2), y=torch.ones(2), batch_size=[2])
    assert a.x.tolist() == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="same-class or compatible class"):
        a[:2] = B(x=torch.ones(2), z=torch.ones(2), batch_size=[2])


def test_user_setattr_sees_constructor_fields():
    from tensordict import TensorClass

    seen = []

    class Shifted(TensorClass, nocast=True):
        a: int
        b: int

        def __setattr__(self, key, value):
            seen.append(key)
            super().__setattr__(key, value + 1)

    s = Shifted(a=torch.zeros(2), b=torch.ones(2))
    assert seen == ["a", "b"]
    assert s.a.tolist() == [1.0, 1.0] and s.b.tolist() == [2.0, 2.0]
    s.a = torch.zeros(())
    assert seen[-1] == "a" and s.a.item() == 1.0


def test_heterogeneous_lazy_stack_fields_read_with_get_options():
    from tensordict import LazyStackedTensorDict, TensorClass

    class Ragged(TensorClass):
        x: torch.Tensor
        y: torch.Tensor

    stack = LazyStackedTensorDict(TensorDict(x=torch.ones(3), y=0), TensorDict(x=torch.ones(2) * 2, y=0))
    obj = Ragged.from_tensordict(stack)
    assert [t.tolist() for t in obj.get("x", as_list=True)] == [[1.0, 1.0, 1.0], [2.0, 2.0]]
    padded = obj.get("x", as_padded_tensor=True)
    assert padded.shape == (2, 3) and padded[1, -1] == 0
    assert obj.y.tolist() == [0, 0]
    with pytest.raises(AttributeError):
        _ = obj.x


def test_lists_stack_along_the_first_batch_dim():
    from tensordict import TensorClass, set_list_to_stack

    class Row(TensorClass):
        tag: str
        v: torch.Tensor
        note: list

    with set_list_to_stack(True):
        r = Row(tag=["a", "b"], v=[torch.ones(3), torch.zeros(3)], note=[], batch_size=[2])
        assert r[0].tag == "a" and r[1].tag == "b"
        assert r.v.shape == (2, 3) and (r[1].v == 0).all()
        assert r.note == []  # an empty list stays an object
        with pytest.raises(RuntimeError, match="batch dimension mismatch"):
            Row(tag=["a", "b", "c"], v=torch.zeros(2), note=[], batch_size=[2])
    with set_list_to_stack(False):
        r = Row(tag="a", v=torch.zeros(2), note=["x", "y", "z"], batch_size=[2])
        assert r.note == ["x", "y", "z"]
