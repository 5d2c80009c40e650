"""Bad input: each error names the class and the field, and says what was expected."""

import dataclasses

import pytest
import torch

from tensordict import TensorClass, tensorclass


class Pair(TensorClass):
    image: torch.Tensor
    label: torch.Tensor


@tensorclass
class DecoratedPair:
    image: torch.Tensor
    label: torch.Tensor


@pytest.mark.parametrize("cls", [Pair, DecoratedPair])
def test_missing_required_field(cls):
    with pytest.raises(TypeError, match=rf"{cls.__name__}.__init__\(\) missing 1 required .*'label'"):
        cls(image=torch.zeros(3), batch_size=[3])


@pytest.mark.parametrize("cls", [Pair, DecoratedPair])
def test_unknown_keyword(cls):
    with pytest.raises(TypeError, match=rf"{cls.__name__}.__init__\(\) got an unexpected keyword argument 'colour'"):
        cls(image=torch.zeros(3), label=torch.zeros(3), colour=1, batch_size=[3])


def test_leading_dims_break_batch_size():
    with pytest.raises(RuntimeError, match=r"Pair.label: .*batch_size=\(3,\), got shape \(4,\)"):
        Pair(image=torch.zeros(3), label=torch.zeros(4), batch_size=[3])
    with pytest.raises(RuntimeError, match=r"Pair.image: .*got shape \(\)"):
        Pair(image=torch.zeros(()), label=torch.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=r"Pair.label: .*batch_size=\(3, 2\), got shape \(3, 3\)"):
        Pair(image=torch.zeros(3, 2), label=torch.zeros(3, 3), batch_size=[3, 2])
    p = Pair(image=torch.zeros(3), label=torch.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=r"Pair.image: .*got shape \(2, 5\)"):
        p.image = torch.zeros(2, 5)
    with pytest.raises(RuntimeError, match=r"Pair.label"):
        p.set("label", torch.zeros(7))
    with pytest.raises(RuntimeError, match="Pair.image"):
        Pair(image={"nested": torch.zeros(2)}, label=torch.zeros(3), batch_size=[3])
    assert p.image.shape == (3,)  # nothing was written


def test_setting_a_non_field_attribute():
    p = Pair(image=torch.zeros(3), label=torch.zeros(3), batch_size=[3])
    with pytest.raises(AttributeError, match=r"Pair has no field 'colour'; its fields are \['image', 'label'\]"):
        p.colour = torch.zeros(3)
    p._cache = "private state is allowed"
    assert p._cache == "private state is allowed"

    class WithProperty(TensorClass):
        x: torch.Tensor

        @property
        def scaled(self):
            return self.x * self._scale

        @scaled.setter
        def scaled(self, value):
            self._scale = value

    w = WithProperty(x=torch.ones(2), batch_size=[2])
    w.scaled = 3.0  # a property with a setter is allowed by the class
    assert (w.scaled == 3).all()


def test_frozen_assignment():
    @tensorclass(frozen=True)
    class Frozen:
        x: torch.Tensor

    f = Frozen(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(dataclasses.FrozenInstanceError, match="field 'x': Frozen is frozen"):
        f.x = torch.ones(2)
    assert isinstance(dataclasses.FrozenInstanceError("x"), AttributeError)


def test_reserved_and_shadowing_field_names():
    with pytest.raises(AttributeError, match="Bad: a field cannot be named 'batch_size'"):

        class Bad(TensorClass):
            batch_size: torch.Tensor

    with pytest.raises(AttributeError, match=r"Attribute name reshape can't be used with @tensorclass \(Shadow\)"):

        class Shadow(TensorClass):
            reshape: torch.Tensor


def test_bad_batch_size_and_device_arguments():
    with pytest.raises(TypeError, match="batch_size must be"):
        Pair(image=torch.zeros(3), label=torch.zeros(3), batch_size="three")
    with pytest.raises(RuntimeError):
        Pair(image=torch.zeros(3), label=torch.zeros(3), batch_size=[3], device="not-a-device")
    with pytest.raises(ValueError, match="names"):
        Pair(image=torch.zeros(3), label=torch.zeros(3), batch_size=[3], names=["a", "b"])


def test_indexing_errors():
    p = Pair(image=torch.zeros(3), label=torch.zeros(3), batch_size=[3])
    with pytest.raises(IndexError):
        p[5]
    with pytest.raises(IndexError):
        p[0, 0]
    with pytest.raises(KeyError, match="no field 'nope'"):
        p["nope"]


def test_decorator_misuse():
    with pytest.raises(TypeError, match="expects a class"):
        tensorclass(lambda: None)
    with pytest.raises(TypeError, match="unknown tensorclass option"):

        class Unknown(TensorClass, colour=True):  # keywords other than options go to type
            x: torch.Tensor
