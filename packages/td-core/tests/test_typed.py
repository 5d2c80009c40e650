"""TypedTensorDict: declared, checked fields on a TensorDict subclass."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from tensordict import TensorDict, TypedTensorDict, lazy_stack
from tensordict.typedtensordict import TypedTensorDict as TypedFromModule

try:
    from typing import NotRequired
except ImportError:  # pragma: no cover - python < 3.11
    from typing_extensions import NotRequired


class Base(TypedTensorDict):
    x: Tensor
    y: Tensor


class Child(Base):
    z: Tensor
    w: NotRequired[Tensor]


class Shadowing(TypedTensorDict["shadow"]):
    data: Tensor


class Frozen(TypedTensorDict["frozen"]):
    x: Tensor


def make(n=4):
    return Base(x=torch.zeros(n, 2), y=torch.ones(n), batch_size=[n])


def test_module_path_and_fields():
    assert TypedFromModule is TypedTensorDict
    assert Child.__required_keys__ == frozenset({"x", "y", "z"})
    assert Child.__optional_keys__ == frozenset({"w"})
    assert Child.__expected_keys__ == frozenset({"x", "y", "z", "w"})


def test_construction_checks():
    with pytest.raises(TypeError, match="missing required field.*y"):
        Base(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(TypeError, match="unexpected field.*q"):
        Base(x=torch.zeros(2), y=torch.zeros(2), q=torch.zeros(2), batch_size=[2])
    c = Child(**make(2), z=torch.zeros(2), batch_size=[2])
    assert set(c.keys()) == {"x", "y", "z"}
    with pytest.raises(AttributeError, match="declared but not set"):
        _ = c.w


def test_attribute_access_and_write():
    s = make()
    assert s.x.shape == (4, 2)
    s.y = torch.full((4,), 3.0)
    assert (s["y"] == 3).all()
    with pytest.raises(AttributeError):
        _ = s.nothing


def test_ops_keep_the_class():
    s = make()
    for out in (s[0], s[1:], s.clone(), s.expand(2, 4), s.to("cpu"), torch.stack([s, s]), torch.cat([s, s])):
        assert isinstance(out, Base)
    assert s[0].batch_size == ()
    assert torch.stack([s, s]).batch_size == (2, 4)


def test_options():
    with pytest.raises(AttributeError, match="shadows a TensorDictBase attribute"):

        class Bad(TypedTensorDict):
            clone: Tensor

    sh = Shadowing(data=torch.zeros(3, 2), batch_size=[3])
    assert sh.data.shape == (3, 2)
    f = Frozen(x=torch.zeros(3), batch_size=[3])
    assert f.is_locked
    with pytest.raises(RuntimeError):
        f["x"] = torch.ones(3)
    with pytest.raises(ValueError, match="Unknown TypedTensorDict option"):
        TypedTensorDict["nope"]


def test_from_tensordict_shares_storage():
    td = TensorDict(x=torch.zeros(3, 2), y=torch.zeros(3), extra=torch.zeros(3), batch_size=[3])
    s = Base.from_tensordict(td)
    assert s._source is td and "extra" in s.keys()
    s.x = torch.ones(3, 2)
    assert (td["x"] == 1).all()
    with pytest.raises(TypeError, match="missing required field"):
        Base.from_tensordict(TensorDict(batch_size=[3]))
    partial = Base.from_tensordict(TensorDict(batch_size=[3]), check=False)
    assert len(list(partial.keys())) == 0
    stacked = Base.from_tensordict(lazy_stack([TensorDict(x=torch.zeros(2), y=torch.zeros(())) for _ in range(2)]))
    assert stacked.batch_size == (2,) and stacked.x.shape == (2, 2)


def test_nested_fields():
    class Nested(TypedTensorDict):
        a: Tensor
        inner: TensorDict

    n = Nested(a=torch.zeros(2), inner=TensorDict(b=torch.zeros(2, 3), batch_size=[2]), batch_size=[2])
    assert n.inner["b"].shape == (2, 3)
    assert isinstance(n[0], Nested) and n[0].inner["b"].shape == (3,)


def test_select_exclude_keep_the_class():
    s = make()
    assert type(s.exclude("x")) is Base
    assert type(s.select("x")) is Base
