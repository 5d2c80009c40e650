"""Declaring tensorclasses: decorator and base class, options, fields, defaults,
inheritance, user methods and hooks."""

import dataclasses
import inspect
from typing import Any

import pytest
import torch

from tensordict import NonTensorStack, TensorClass, TensorDict, tensorclass


@tensorclass
class Decorated:
    a: torch.Tensor
    b: torch.Tensor


class Based(TensorClass):
    a: torch.Tensor
    b: torch.Tensor


@pytest.mark.parametrize("cls", [Decorated, Based])
def test_constructor_positional_keyword_and_batch(cls):
    obj = cls(torch.zeros(3, 2), b=torch.ones(3), batch_size=[3])
    assert obj.batch_size == torch.Size([3])
    assert obj.shape == torch.Size([3])
    assert obj.a.shape == (3, 2) and (obj.b == 1).all()
    assert obj.device is None
    assert obj.names == [None]
    assert type(obj) is cls and isinstance(obj, cls)
    assert obj.batch_dims == obj.ndim == obj.dim() == obj.ndimension() == 1
    assert obj.numel() == 3 and len(obj) == 3 and obj.size(0) == 3 and obj.size() == torch.Size([3])


@pytest.mark.parametrize("cls", [Decorated, Based])
def test_batch_size_defaults_to_empty(cls):
    obj = cls(a=torch.zeros(3), b=torch.zeros(2))
    assert obj.batch_size == torch.Size([])
    obj2 = cls(a=torch.zeros(3), b=torch.zeros(3), batch_size=3)
    assert obj2.batch_size == torch.Size([3])


def test_device_names_and_lock(device):
    obj = Based(a=torch.zeros(2, 3), b=torch.zeros(2, 3), batch_size=[2, 3], device=device, names=["n", "t"])
    assert obj.device == device and obj.a.device.type == device.type
    assert obj.names == ["n", "t"]
    locked = Based(a=torch.zeros(2), b=torch.zeros(2), batch_size=[2], lock=True)
    assert locked.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        locked.a = torch.ones(2)
    locked.a.copy_(torch.ones(2))  # in-place writes stay allowed
    assert (locked.a == 1).all()


def test_decorator_with_options_and_without():
    @tensorclass()
    class Empty1:
        x: torch.Tensor

    @tensorclass(frozen=True)
    class Frozen1:
        x: torch.Tensor

    assert Empty1(x=torch.zeros(1)).x.shape == (1,)
    f = Frozen1(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(dataclasses.FrozenInstanceError, match="Frozen1"):
        f.x = torch.ones(2)
    with pytest.raises(dataclasses.FrozenInstanceError, match="'x'"):
        del f.x
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.set("x", torch.ones(2))


def test_base_class_options_by_keyword_and_subscription():
    class Cast(TensorClass["autocast"]):
        integer: int
        t: torch.Tensor

    assert Cast(integer=torch.ones(()), t=1).integer == 1
    assert isinstance(Cast(integer=torch.ones(()), t=1).integer, int)
    assert isinstance(Cast(integer=2, t=1).t, torch.Tensor)

    class Cast2(TensorClass, autocast=True):
        integer: int

    assert Cast2(integer=torch.ones(())).integer == 1

    class NoCast(TensorClass["nocast", "frozen"]):
        integer: int

    obj = NoCast(integer=1)
    assert obj.integer == 1 and isinstance(obj.integer, int)
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.integer = 2
    with pytest.raises(TypeError, match="accepts"):
        TensorClass["bogus"]
    with pytest.raises(ValueError, match="autocast and nocast"):

        class Both(TensorClass, autocast=True, nocast=True):
            x: torch.Tensor


def test_default_cast_of_numbers_and_nocast():
    class Default(TensorClass):
        n: Any

    obj = Default(n=3, batch_size=[2])
    assert isinstance(obj.n, torch.Tensor) and obj.n.tolist() == [3, 3]

    @tensorclass(nocast=True)
    class Kept:
        n: Any

    assert Kept(n=3, batch_size=[2]).n == 3


def test_field_kinds_tensor_nested_td_none_object():
    class Inner(TensorClass):
        x: torch.Tensor

    class Outer(TensorClass):
        t: torch.Tensor
        inner: Inner
        td: TensorDict
        maybe: torch.Tensor | None
        text: str
        obj: Any

    marker = object()
    o = Outer(
        t=torch.zeros(4, 2),
        inner=Inner(x=torch.ones(4, 3, 5), batch_size=[4, 3]),
        td={"y": torch.zeros(4)},
        maybe=None,
        text="hello",
        obj=marker,
        batch_size=[4],
    )
    assert isinstance(o.inner, Inner) and o.inner.batch_size == (4, 3)
    assert isinstance(o.td, TensorDict) and o.td.batch_size == (4,)
    assert o.maybe is None and o.text == "hello" and o.obj is marker
    sub = o[1:3]
    assert sub.inner.batch_size == (2, 3) and sub.td["y"].shape == (2,)
    assert sub.text == "hello" and sub.obj is marker and sub.maybe is None
    o.maybe = torch.ones(4)
    assert (o[0].maybe == 1).all()
    o.maybe = None
    assert o.maybe is None and "maybe" not in o._tensordict.keys()


def test_dict_value_becomes_annotated_tensorclass():
    class Inner(TensorClass):
        x: torch.Tensor

    class Outer(TensorClass):
        inner: Inner

    o = Outer(inner={"x": torch.zeros(3)}, batch_size=[3])
    assert type(o.inner) is Inner and o.inner.x.shape == (3,)
    o.inner = TensorDict({"x": torch.ones(3)}, [3])
    assert type(o.inner) is Inner


def test_defaults_factories_kw_only_and_order():
    class WithDefaults(TensorClass):
        a: torch.Tensor
        b: torch.Tensor | None = None
        c: str = "c"
        d: list = dataclasses.field(default_factory=list)
        e: Any = dataclasses.field(default=5, kw_only=True)

    x = WithDefaults(torch.zeros(2), batch_size=[2])
    assert x.b is None and x.c == "c" and x.d == [] and isinstance(x.e, torch.Tensor)
    y = WithDefaults(torch.zeros(2), batch_size=[2])
    assert x.d is not y.d
    with pytest.raises(TypeError):
        WithDefaults(torch.zeros(2), None, "c", [], 5)  # e is keyword-only
    with pytest.raises(TypeError, match="'late'.*'early'|follows"):

        class BadOrder(TensorClass):
            early: int = 1
            late: torch.Tensor


def test_class_attribute_defaults_are_not_shadowing_instance_values():
    class D(TensorClass):
        tag: str = "default"

    d = D(tag="mine")
    assert d.tag == "mine"
    assert D.__dataclass_fields__["tag"].default == "default"


def test_user_methods_properties_classvars_and_results_keep_class():
    from typing import ClassVar

    class Data(TensorClass):
        x: torch.Tensor
        label: torch.Tensor
        scale: ClassVar[float] = 2.0

        @property
        def doubled(self):
            return self.x * self.scale

        def select_label(self, label):
            return self[self.label == label]

        @classmethod
        def make(cls, n):
            return cls(x=torch.arange(n).float(), label=torch.arange(n) % 2, batch_size=[n])

    data = Data.make(6)
    assert [f.name for f in dataclasses.fields(Data)] == ["x", "label"]
    assert (data.doubled == torch.arange(6) * 2.0).all()
    sub = data.select_label(1)
    assert type(sub) is Data and sub.batch_size == (3,)


def test_post_init_and_private_attributes():
    class Normalised(TensorClass):
        x: torch.Tensor

        def __post_init__(self):
            self.x = self.x / self.x.sum()
            self._note = "normalised"

    n = Normalised(x=torch.ones(4), batch_size=[4])
    assert torch.allclose(n.x, torch.full((4,), 0.25))
    assert n._note == "normalised"


def test_user_defined_init_is_kept():
    @tensorclass
    class Custom:
        x: torch.Tensor
        y: torch.Tensor

        def __init__(self, value):
            self.x = torch.full((3,), float(value))
            self.y = torch.zeros(3)

    c = Custom(2, batch_size=[3])
    assert (c.x == 2).all() and c.batch_size == (3,)


def test_inheritance_adds_fields():
    class Base(TensorClass):
        a: torch.Tensor

    class Child(Base):
        b: torch.Tensor

    @tensorclass
    class DecoratedChild(Decorated):
        c: torch.Tensor

    child = Child(torch.zeros(2), torch.ones(2), batch_size=[2])
    assert child._tc_fields == ("a", "b")
    assert type(child[0]) is Child
    dc = DecoratedChild(torch.zeros(2), torch.zeros(2), torch.zeros(2), batch_size=[2])
    assert dc._tc_fields == ("a", "b", "c") and isinstance(dc, Decorated)


def test_dataclass_compatibility():
    obj = Based(a=torch.zeros(2), b=torch.zeros(2), batch_size=[2])
    assert dataclasses.is_dataclass(obj) and dataclasses.is_dataclass(Based)
    assert [f.name for f in Based.fields()] == ["a", "b"]
    assert [f.name for f in obj.fields()] == ["a", "b"]
    assert set(dataclasses.asdict(obj)) == {"a", "b"}
    assert Based.__match_args__ == ("a", "b")
    assert "batch_size=None" in Based.__doc__


def test_decorated_class_keeps_name_module_and_docs():
    @tensorclass
    class Documented:
        """My docs."""

        x: torch.Tensor

    assert Documented.__name__ == "Documented"
    assert Documented.__doc__ == "My docs."
    assert Documented.__module__ == __name__
    assert "Documented.__init__" in Documented.__init__.__qualname__


def test_shadow_allows_reserved_names():
    with pytest.raises(AttributeError, match="shadow"):

        @tensorclass
        class Clash:
            sum: torch.Tensor

    @tensorclass(shadow=True)
    class Shadowing:
        sum: torch.Tensor
        values: str

    s = Shadowing(sum=torch.ones(2), values="v", batch_size=[2])
    assert (s.sum == 1).all() and s.values == "v"
    assert s[0].values == "v"
    with pytest.raises(AttributeError, match="shape"):

        @tensorclass(shadow=True)
        class AlwaysReserved:
            shape: torch.Tensor


def test_shadow_fields_named_like_constructor_keywords():
    # shadow=True lets a field be named batch_size/device/names: the field replaces the keyword
    @tensorclass(shadow=True)
    class Meta:
        batch_size: Any
        device: Any
        names: Any

    m = Meta(batch_size=0, names=1, device=2)
    assert m.batch_size == 0 and m.names == 1 and m.device == 2
    assert m._tensordict.batch_size == torch.Size([])
    m.batch_size = 5
    assert m.batch_size == 5
    assert list(inspect.signature(Meta).parameters) == ["batch_size", "device", "names"]
    with pytest.raises(AttributeError, match="a field cannot be named .device."):

        @tensorclass
        class NoShadow:
            x: torch.Tensor
            device: Any


def test_stacked_non_tensor_values_read_as_lists():
    class Tagged(TensorClass):
        x: torch.Tensor
        tag: str

    s = torch.stack([Tagged(x=torch.zeros(()), tag="a"), Tagged(x=torch.zeros(()), tag="b")])
    assert s.tag == ["a", "b"]
    assert isinstance(s._tensordict._get_raw("tag"), NonTensorStack)
    assert s[1].tag == "b"
    same = torch.stack([Tagged(x=torch.zeros(()), tag="a")] * 3)
    assert same.tag == "a"


def test_base_class_itself_is_not_instantiable():
    with pytest.raises(TypeError, match="base class"):
        TensorClass()
