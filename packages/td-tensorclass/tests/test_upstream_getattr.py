"""``SomeTensorClass.__getattr__`` exists (downstream code chains onto it) without slowing
instance attribute reads: it is served by the metaclass, not defined in the class."""

import pytest
import torch

from tensordict import TensorClass, tensorclass


class Sample(TensorClass):
    x: torch.Tensor


@tensorclass
class Decorated:
    x: torch.Tensor


@pytest.mark.parametrize("cls", [Sample, Decorated])
def test_class_level_getattr_fallback(cls):
    obj = cls(x=torch.zeros(2), batch_size=[2])
    fallback = cls.__getattr__
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fallback(obj, "nope")
    assert "__getattr__" not in cls.__dict__
    assert all("__getattr__" not in vars(base) for base in cls.__mro__)
    with pytest.raises(AttributeError, match="has no attribute 'other'"):
        cls.other  # noqa: B018


def test_chaining_a_getattr_like_torchrl():
    class Traj(TensorClass["nocast"]):
        data: torch.Tensor

    original = Traj.__getattr__

    def fallback(self, name):
        try:
            return original(self, name)
        except AttributeError:
            if name.startswith("_"):
                raise
            return f"looked up {name}"

    Traj.__getattr__ = fallback
    t = Traj(data=torch.zeros(3), batch_size=[3])
    assert t.reward == "looked up reward"
    assert (t.data == 0).all()
    with pytest.raises(AttributeError):
        t._private  # noqa: B018
