"""``is_tensorclass`` on non-tensor data, the repr under ``set_printoptions``, and
``from_dict_instance`` rebuilding tensorclasses from their dicts."""

import pytest
import torch

from tensordict import (
    MetaData,
    NonTensorData,
    TensorClass,
    TensorDict,
    is_non_tensor,
    is_tensor_collection,
    is_tensorclass,
    set_printoptions,
    tensorclass,
)


class TestIsTensorclass:
    def test_non_tensor_data_and_subclasses(self):
        class Tagged(NonTensorData): ...

        for cls in (NonTensorData, MetaData, Tagged):
            assert is_tensorclass(cls)
            assert is_tensor_collection(cls)
        assert is_tensorclass(Tagged(data=1, batch_size=[]))
        assert is_non_tensor(Tagged(data=1, batch_size=[]))

    def test_other_values(self):
        assert not is_tensorclass(TensorDict())
        assert not is_tensorclass(torch.zeros(()))
        assert not is_tensorclass(int)

    def test_registry_still_refuses_non_tensor_data(self):
        from tensordict.tensorclass import register_tensorclass

        with pytest.raises(TypeError, match="expects a tensorclass type"):
            register_tensorclass(NonTensorData)


@tensorclass
class Shown:
    x: torch.Tensor
    tag: str = "t"


class TestRepr:
    def test_options_hide_device_and_is_shared(self):
        obj = Shown(x=torch.randn(3, 4), batch_size=[3])
        with set_printoptions(
            show_device=False, show_is_shared=False, show_field_device=False, show_field_is_shared=False
        ):
            text = repr(obj)
        assert text.startswith("Shown(")
        assert "device=" not in text and "is_shared=" not in text
        assert "batch_size=torch.Size([3])" in text

    def test_default_shows_everything(self):
        text = repr(Shown(x=torch.randn(3), batch_size=[3]))
        assert "device=None" in text and "is_shared=False" in text
        assert "tag=NonTensorData(data=t, batch_size=torch.Size([3]), device=None)" in text

    def test_hide_batch_size(self):
        with set_printoptions(show_batch_size=False):
            text = repr(Shown(x=torch.randn(3), batch_size=[3]))
        assert "\n    batch_size=" not in text


class TestFromDictInstance:
    def test_nested_tensorclass_in_a_tensordict(self):
        @tensorclass(autocast=True)
        class Cast:
            x: torch.Tensor = None
            y: int = None
            z: "Cast" = None

        td = TensorDict({"a": torch.randn(()), "b": Cast(x=torch.zeros(()), y=1, z=Cast(y=2))})
        as_dict = td.to_dict()
        assert isinstance(as_dict["b"], dict) and isinstance(as_dict["b"]["z"], dict)
        back = td.from_dict_instance(as_dict, auto_batch_size=True)
        assert type(back) is TensorDict
        assert isinstance(back["b"], Cast) and isinstance(back["b"].z, Cast)
        assert isinstance(back["b"].y, int) and isinstance(back["b"].z.y, int)
        assert isinstance(back["b"].x, torch.Tensor)

    def test_tensorclass_method_with_batch_size(self):
        class P(TensorClass):
            x: torch.Tensor
            tag: str = "a"

        p = P(x=torch.zeros(3, 2), batch_size=[3])
        q = p.from_dict_instance(p.to_dict(), auto_batch_size=True)
        assert type(q) is P and q.batch_size == (3, 2) and q.tag == "a"
        r = p.from_dict_instance({"x": torch.ones(3, 2)}, batch_size=[3])
        assert r.batch_size == (3,) and r.tag == "a"
        with pytest.raises(KeyError, match="not a field"):
            p.from_dict_instance({"nope": 1})

    def test_plain_tensordict_layout(self):
        td = TensorDict(a=torch.zeros(3), b={"c": torch.ones(3)}, batch_size=[3])
        out = td.from_dict_instance(td.to_dict(), batch_size=[3])
        assert out.batch_size == (3,) and out["b"].batch_size == (3,)
        with pytest.raises(TypeError, match="expects a mapping"):
            td.from_dict_instance([1, 2])


class TestUpstreamFlagNames:
    def test_option_flags_under_upstream_names(self):
        @tensorclass(autocast=True)
        class Cast:
            x: torch.Tensor

        class NoCast(TensorClass["nocast", "frozen"]):
            x: torch.Tensor

        class Child(NoCast):
            y: torch.Tensor

        assert Cast._autocast and not Cast._nocast and not Cast._frozen
        assert NoCast._nocast and NoCast._frozen and not NoCast._autocast
        assert Child._nocast and Child._frozen  # options are inherited


class TestFieldBatchSize:
    def test_tensordict_with_fewer_batch_dims_takes_the_instance_batch_size(self):
        from tensordict import TensorDictBase

        @tensorclass
        class Holder:
            z: TensorDictBase

        h = Holder(z=TensorDict({}, [3, 4]), batch_size=[3, 4])
        given = TensorDict({"smth": torch.zeros(3, 4, 1)}, [])
        h.z = given
        assert h.z.batch_size == (3, 4)
        assert given.batch_size == ()  # the value passed in is left as it was
        with pytest.raises(RuntimeError, match=r"the Tensor smth has shape torch\.Size\(\[1\]\) which"):
            h.z = TensorDict({"smth": torch.zeros(1)}, [])
        with pytest.raises(RuntimeError, match="batch dimension mismatch"):
            h.z = TensorDict({"smth": torch.zeros(2, 4)}, [2])

    def test_unknown_attribute_wording(self):
        obj = Shown(x=torch.zeros(2), batch_size=[2])
        with pytest.raises(AttributeError, match="Cannot set the attribute 'nope': Shown has no field 'nope'"):
            obj.nope = 1


def test_flags_on_the_base_class_stay_false():
    class Sub(TensorClass["autocast"]):
        a: int

    assert Sub._autocast
    assert not TensorClass._autocast and not TensorClass._nocast and not TensorClass._frozen
