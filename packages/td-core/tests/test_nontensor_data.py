"""Non-tensor leaves: NonTensorData, NonTensorStack, MetaData and the TensorDict API for them."""

import pickle

import pytest
import torch

from tensordict import (
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    capture_non_tensor_stack,
    is_non_tensor,
    lazy_stack,
    set_capture_non_tensor_stack,
)
from tensordict.utils import LinkedList


def test_get_returns_leaf_getitem_returns_object():
    td = TensorDict(a="text", b=torch.zeros(2), batch_size=[2])
    assert isinstance(td.get("a"), NonTensorData)
    assert td.get("a").batch_size == (2,)
    assert td["a"] == "text"
    assert td.get_non_tensor("a") == "text"
    assert td.get_non_tensor("missing", "dflt") == "dflt"
    assert isinstance(dict(td.items())["a"], NonTensorData)


def test_set_non_tensor_unwraps_and_nests():
    td = TensorDict(batch_size=[3])
    td.set_non_tensor(("x", "y"), NonTensorData("inner"))
    assert td.get(("x", "y")).data == "inner"
    assert td.get(("x", "y")).batch_size == (3,)
    td.set_non_tensor("l", [1, 2])
    assert td.get_non_tensor("l") == [1, 2]


def test_filter_non_tensor_data():
    td = TensorDict(a=torch.zeros(2), s="x", n={"t": torch.ones(2), "u": "y"}, batch_size=[2])
    out = td.filter_non_tensor_data()
    assert set(out.keys(include_nested=True)) == {"a", "n", ("n", "t")}


def test_stack_rule_follows_capture_option():
    tds = [TensorDict(s="same") for _ in range(2)]
    assert capture_non_tensor_stack(allow_none=True) is None
    stacked = torch.stack(tds)
    assert isinstance(stacked.get("s"), NonTensorStack)
    assert stacked["s"] == ["same", "same"]
    with set_capture_non_tensor_stack(True):
        assert torch.stack(tds)["s"] == "same"
    different = torch.stack([TensorDict(s="a"), TensorDict(s="b")])
    assert isinstance(different["s"], LinkedList)
    assert repr(different["s"]) == "LinkedList(['a', 'b'])"


def test_lazy_stack_get_is_a_stack():
    ls = lazy_stack([TensorDict(q=NonTensorData(f"q{i}")) for i in range(3)])
    assert isinstance(ls.get("q"), NonTensorStack)
    assert ls["q"] == ["q0", "q1", "q2"]


def test_metadata_stays_whole():
    td0 = TensorDict(m=MetaData("cfg"))
    td1 = TensorDict(m=MetaData("cfg"))
    out = torch.stack([td0, td1])
    assert isinstance(out.get("m"), MetaData) and out.get("m").batch_size == (2,)
    assert out["m"] == "cfg"
    mixed = torch.stack([td0, TensorDict(m=MetaData("other"))])
    assert isinstance(mixed.get("m"), NonTensorStack)
    expanded = MetaData(0, batch_size=(3,)).expand(2, 3)
    assert isinstance(expanded, MetaData) and expanded.shape == (2, 3)
    tdu = TensorDict(m=MetaData(3)).unsqueeze(0)
    assert isinstance(tdu.get("m"), MetaData) and tdu["m"] == 3


def test_typed_metadata():
    cls = MetaData[int]
    assert cls is MetaData[int] and issubclass(cls, MetaData)
    assert isinstance(cls(1), MetaData[int])
    with pytest.raises(TypeError, match="Expected data of type int, got str"):
        MetaData[int]("x")
    restored = pickle.loads(pickle.dumps(cls(4, batch_size=[2])))
    assert type(restored) is cls and restored.data == 4 and restored.batch_size == (2,)
    td = TensorDict(a=torch.zeros(4, 3), batch_size=[4])
    td.set(("n", "meta"), MetaData[str]("m"))
    assert td.get(("n", "meta")).batch_size == (4,)
    assert td[1:]["n", "meta"] == "m"


def test_non_tensor_data_shape_ops():
    d = NonTensorData(0, batch_size=(3,))
    e = d.expand(2, 3)
    assert isinstance(e, NonTensorStack) and e.tolist() == [[0] * 3] * 2
    assert NonTensorData(0).flatten().tolist() == [0]
    assert isinstance(d.view(3, 1), NonTensorData) and d.view(3, 1).shape == (3, 1)
    td = TensorDict(foo=NonTensorData(3))
    tdu = td.unsqueeze(0)
    assert isinstance(tdu.get("foo"), NonTensorStack) and tdu["foo"] == [3]
    assert isinstance(tdu.squeeze(0).get("foo"), NonTensorData)
    assert tdu.squeeze()["foo"] == 3


def test_non_tensor_stack_shape_ops():
    s = NonTensorStack(*[str(i) for i in range(6)])
    v = s.view(2, 3)
    assert isinstance(v[0], NonTensorStack) and v.shape == (2, 3)
    assert v.flatten().tolist() == [str(i) for i in range(6)]
    assert v.transpose(0, 1)[0].tolist() == ["0", "3"]
    st = NonTensorStack(NonTensorData("a", batch_size=(3,)), NonTensorData("b", batch_size=(3,)), stack_dim=1)
    assert st.shape == (3, 2)
    assert st.repeat(1, 2)[0].tolist() == ["a", "b", "a", "b"]
    assert st.repeat_interleave(2, dim=1)[0].tolist() == ["a", "a", "b", "b"]
    assert [p.tolist() for p in st.unbind(1)] == [["a"] * 3, ["b"] * 3]
    assert [p.shape for p in st.split([1, 2], 0)] == [(1, 2), (2, 2)]


def test_from_list_and_where():
    nd = NonTensorStack.from_list([[True, "b", 1], ["c", 0, NonTensorData("final")]])
    assert nd.shape == (2, 3)
    assert nd[1, 2].data == "final"
    with pytest.raises(ValueError, match="ragged"):
        NonTensorStack.from_list([["a"], ["b", "c"]])
    a = NonTensorStack("a", "a")
    b = NonTensorStack("b", "b")
    assert a.where(torch.tensor([True, False]), b).tolist() == ["a", "b"]


def test_torch_stack_of_non_tensor_data_with_tensors():
    t1, t2 = torch.zeros(2), torch.zeros(3)
    out = torch.stack([NonTensorData(t1), NonTensorData(t2)])
    assert isinstance(out, NonTensorStack)
    assert [t.shape for t in out.tolist()] == [(2,), (3,)]


def test_boolean_mask_and_setitem():
    td = TensorDict(x=torch.arange(3), s=NonTensorStack("a", "b", "c"), batch_size=[3])
    masked = td[torch.tensor([True, False, True])]
    assert masked["s"] == ["a", "c"]
    td[1] = TensorDict(x=torch.tensor(9), s="z")
    assert td["s"] == ["a", "z", "c"]


def test_assign_into_empty_keeps_single_value():
    data = TensorDict({}, [1, 4])
    data[0, 0] = TensorDict({"a": 0, "b": "first"}, [])
    assert data["b"] == "first"
    data[0, 1] = TensorDict({"a": 0, "b": "second"}, [])
    assert data.get("b").tolist() == [["first", "second", "first", "first"]]


def test_comparison_against_tensor_and_stack():
    td = TensorDict(a=NonTensorData(3), s=NonTensorStack("x", "y").unsqueeze(0)[0], batch_size=[])
    eq = td == td.clone()
    assert eq.all()
    lazy = lazy_stack([TensorDict(s="v"), TensorDict(s="v")])
    assert (lazy == torch.stack([TensorDict(s="v"), TensorDict(s="v")])).all()


def test_call_and_is_non_tensor():
    td = TensorDict(f=lambda x: x + 1)
    assert td.get("f")(1) == 2
    assert is_non_tensor(td.get("f")) and is_non_tensor(MetaData(1))
    assert not is_non_tensor(torch.zeros(1))


def test_update_rules():
    d = NonTensorData(1, batch_size=[2])
    d.update(NonTensorData(5))
    assert d.data == 5
    with pytest.raises(ValueError, match="maybe_to_stack"):
        d.update(NonTensorStack(1, 2))
    s = d.maybe_to_stack().update(NonTensorStack(1, 2))
    assert s.tolist() == [1, 2]


def test_pickle_roundtrip():
    td = TensorDict(s=NonTensorStack("a", "b"), m=MetaData("x", batch_size=[2]), batch_size=[2])
    back = pickle.loads(pickle.dumps(td))
    assert back["s"] == ["a", "b"] and back["m"] == "x"
    assert isinstance(back.get("m"), MetaData)


def test_non_tensor_is_not_a_default_leaf():
    from tensordict import is_leaf_nontensor

    td = TensorDict(a=torch.zeros(2), s="x", n={"m": "y"}, batch_size=[2])
    assert set(td.keys(True, True)) == {"a"}
    assert set(td.keys(True, True, is_leaf=is_leaf_nontensor)) == {"a", "s", ("n", "m")}
    assert set(td.keys(True)) == {"a", "s", "n", ("n", "m")}
    seen = []
    td.named_apply(lambda k, x: seen.append(k), nested_keys=True, filter_empty=True)
    assert seen == ["a"]


def test_comparison_with_numbers_ignores_non_tensor():
    td = TensorDict(a=torch.zeros(3), s="text", batch_size=[3])
    assert (td == 0).all()
    assert (td != 1).all()
    assert "s" not in (td == 0).keys()
    other = TensorDict(a=torch.zeros(3), s="text", batch_size=[3])
    assert (td == other)["s"].all()
    assert not (td != other)["s"].any()
    as_tensor = TensorDict(a=torch.zeros(3), s=torch.zeros(3), batch_size=[3])
    assert not (as_tensor == td)["s"].any()  # a tensor against a str: never equal


def test_names_follow_the_tensordict():
    td = TensorDict(a=torch.zeros(2, 3), s="x", batch_size=[2, 3])
    td.names = ["x", "y"]
    assert td.get("s").names == ["x", "y"]
    td.names = ["p", "q"]
    assert td.get("s").names == ["p", "q"]
    assert NonTensorData(1, batch_size=[4]).names == [None]


def test_filter_drops_nodes_left_empty_and_auto_batch_size():
    td = TensorDict(a=torch.zeros(4, 3), batch_size=[4, 3])
    td.set(("data", "s"), NonTensorData("x"))
    td.set(("data", "m"), MetaData[str]("m"))
    assert list(td.filter_non_tensor_data().keys()) == ["a"]
    td.batch_size = []
    td.auto_batch_size_()
    assert td.batch_size == (4, 3)
    assert td.get(("data", "m")).batch_size == (4, 3)


def test_batch_ops_keep_one_object_or_make_a_stack_as_tensordict_015():
    td = TensorDict({"a": torch.zeros(3, 4), "s": "txt"}, batch_size=[3, 4])
    # one object with a new batch size
    for out in (td.repeat(2, 1), td.repeat_interleave(2, dim=0), td.unflatten(1, (2, 2)), td.reshape(12),
                td.reshape(3, 4, 1)):
        assert type(out.get("s")) is NonTensorData and out["s"] == "txt"
    # a stack: unsqueeze and expand
    for out in (td.unsqueeze(0), td.expand(2, 3, 4)):
        assert type(out.get("s")) is NonTensorStack
    # squeezing or indexing the new dim gives the one object back
    assert td.unsqueeze(1).squeeze(1)["s"] == "txt"
    assert td.unsqueeze(0)[0]["s"] == "txt"
    stacked = torch.stack([td, td.clone()])
    assert type(stacked[1].get("s")) is NonTensorData and stacked[1]["s"] == "txt"
    # a reshape of the stack stays a stack, and different objects stay a stack
    assert type(td.unsqueeze(0).view(3, 4).get("s")) is NonTensorStack
    mixed = torch.stack([TensorDict(s="a", batch_size=[2]), TensorDict(s="b", batch_size=[2])])
    assert mixed[0]["s"] == "a" and mixed[:, 0]["s"] == ["a", "b"]
    assert type(mixed.unsqueeze(0).squeeze(0).get("s")) is NonTensorStack
