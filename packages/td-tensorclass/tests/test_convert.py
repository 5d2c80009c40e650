"""Conversions: to/from TensorDict, the from_* constructors, from_dataclass, state dicts."""

import dataclasses
from collections import namedtuple

import pytest
import torch

from tensordict import NonTensorData, TensorClass, TensorDict, from_dataclass


class Inner(TensorClass):
    x: torch.Tensor


class Record(TensorClass):
    a: torch.Tensor
    inner: Inner | None = None
    label: str = "lbl"


def record(n=3):
    return Record(a=torch.arange(n * 2.0).view(n, 2), inner=Inner(x=torch.ones(n), batch_size=[n]), batch_size=[n])


def test_to_tensordict_is_a_deep_copy():
    rec = record()
    td = rec.to_tensordict()
    assert type(td) is TensorDict and td.batch_size == (3,)
    assert type(td["inner"]) is TensorDict
    assert td["label"] == "lbl" and isinstance(td._get_raw("label"), NonTensorData)
    assert td["a"].data_ptr() != rec.a.data_ptr()
    td["a"].zero_()
    assert rec.a.sum() > 0
    without_none = Record(a=torch.zeros(2), batch_size=[2]).to_tensordict(retain_none=False)
    assert "inner" not in without_none.keys()


def test_from_tensordict_wraps_and_converts_nested():
    td = TensorDict({"a": torch.zeros(4, 2), "inner": {"x": torch.zeros(4)}}, [4])
    rec = Record.from_tensordict(td, {"label": "given"})
    assert type(rec) is Record and type(rec.inner) is Inner
    assert rec.a is td["a"] and rec.label == "given"
    assert Record.from_tensordict(record().to_tensordict()).label == "lbl"
    partial = Record.from_tensordict(TensorDict({"a": torch.zeros(2)}, [2]))
    assert partial.inner is None and partial.label is None
    with pytest.raises(TypeError, match="expects a TensorDictBase"):
        Record.from_tensordict({"a": torch.zeros(2)})
    assert Record.from_tensordict({"a": torch.zeros(2)}, safe=False).a.shape == (2,)
    with pytest.raises(KeyError, match="not fields of Record"):
        Record.from_tensordict(TensorDict({"zz": torch.zeros(2)}, [2]))


def test_to_dict():
    rec = record(2)
    d = rec.to_dict()
    assert set(d) == {"a", "inner", "label"} and d["inner"] == {"x": rec.inner.x}
    assert rec.to_dict(convert_tensors=True)["a"] == [[0.0, 1.0], [2.0, 3.0]]


def test_from_dict_and_fromkeys():
    rec = Record.from_dict({"a": torch.zeros(3, 2), "inner": {"x": torch.ones(3)}, "label": "d"}, batch_size=[3])
    assert type(rec) is Record and type(rec.inner) is Inner and rec.label == "d" and rec.batch_size == (3,)
    auto = Record.from_dict({"a": torch.zeros(3, 2), "inner": {"x": torch.ones(3)}}, auto_batch_size=True)
    assert auto.batch_size == (3,)
    keys = Record.fromkeys(["a"], 0)
    assert type(keys) is Record and keys.a == 0
    with pytest.raises(KeyError, match="not fields"):
        Record.from_dict({"unknown": torch.zeros(3)})


def test_from_tuple_namedtuple_any_pytree():
    class Pair(TensorClass, shadow=True):
        x: torch.Tensor
        y: torch.Tensor

    Point = namedtuple("Point", ["x", "y"])
    p = Pair.from_namedtuple(Point(torch.zeros(3), torch.ones(3)), auto_batch_size=True)
    assert type(p) is Pair and p.batch_size == (3,) and (p.y == 1).all()
    q = Pair.from_any({"x": torch.zeros(2), "y": torch.zeros(2)}, auto_batch_size=True)
    assert type(q) is Pair and q.batch_size == (2,)
    r = Pair.from_pytree({"x": torch.zeros(2), "y": torch.ones(2)})
    assert type(r) is Pair and (r.y == 1).all()

    class Numbered(TensorClass):
        a: torch.Tensor

    assert type(Numbered.from_tuple(())) is Numbered


def test_from_struct_array_is_zero_copy():
    np = pytest.importorskip("numpy")

    class Animal(TensorClass):
        age: torch.Tensor
        weight: torch.Tensor

    arr = np.array([(9, 81.0), (3, 27.0)], dtype=[("age", "i4"), ("weight", "f4")])
    animals = Animal.from_struct_array(arr)
    assert type(animals) is Animal and animals.age.tolist() == [9, 3]
    arr["age"] += 1
    assert animals.age.tolist() == [10, 4]


def test_from_modules():
    class Linear(TensorClass):
        weight: torch.Tensor
        bias: torch.Tensor

    mods = [torch.nn.Linear(3, 4) for _ in range(2)]
    params = Linear.from_modules(*mods)
    assert type(params) is Linear and params.weight.shape == (2, 4, 3) and params.batch_size == (2,)


def test_from_dataclass_type_and_instance():
    @dataclasses.dataclass
    class Obs:
        x: torch.Tensor
        y: torch.Tensor
        name: str = "o"

        def total(self):
            return self.x.sum() + self.y.sum()

    Cls = from_dataclass(Obs)
    assert Cls is from_dataclass(Obs)
    inst = Cls(x=torch.ones(2, 3), y=torch.ones(2), batch_size=[2])
    assert type(inst) is Cls and inst.total() == 8 and inst[0].name == "o"

    obs = from_dataclass(Obs(torch.zeros(4, 5), torch.zeros(4)), auto_batch_size=True)
    assert type(obs) is Cls and obs.batch_size == (4,) and obs.name == "o"
    capped = from_dataclass(Obs(torch.zeros(4, 5), torch.zeros(4, 5)), auto_batch_size=True, batch_dims=1)
    assert capped.batch_size == (4,)
    fixed = from_dataclass(Obs(torch.zeros(4, 5), torch.zeros(4)), batch_size=[4], device="cpu")
    assert fixed.device == torch.device("cpu")

    class Dest(TensorClass):
        x: torch.Tensor
        y: torch.Tensor
        name: str

    dest = from_dataclass(Obs(torch.zeros(2), torch.zeros(2)), dest_cls=Dest, batch_size=[2])
    assert type(dest) is Dest
    assert from_dataclass(dest) is dest
    with pytest.raises(TypeError, match="dataclass"):
        from_dataclass(object())
    with pytest.raises(ValueError, match="not both"):
        from_dataclass(Obs(torch.zeros(2), torch.zeros(2)), batch_size=[2], auto_batch_size=True)


def test_from_dataclass_nested_and_through_tensordict():
    @dataclasses.dataclass
    class Leaf:
        v: torch.Tensor

    @dataclasses.dataclass
    class Tree:
        leaf: Leaf
        w: torch.Tensor

    tree = from_dataclass(Tree(Leaf(torch.zeros(3, 2)), torch.zeros(3)), auto_batch_size=True)
    assert type(tree.leaf).__name__ == "Leaf_tc" and tree.leaf.batch_size == (3, 2)  # 0.15.3 names it <dataclass>_tc
    assert tree.batch_size == (3,)
    via_td = TensorDict.from_dataclass(Tree(Leaf(torch.zeros(3)), torch.zeros(3)), as_tensorclass=True)
    assert type(via_td).__name__ == "Tree_tc"


def test_state_dict_round_trip():
    rec = record()
    sd = rec.state_dict()
    other = Record(a=torch.zeros(3, 2), inner=Inner(x=torch.zeros(3), batch_size=[3]), label="x", batch_size=[3])
    assert other.load_state_dict(sd) is other
    assert torch.equal(other.a, rec.a) and torch.equal(other.inner.x, rec.inner.x)
    assert other.label == "lbl"
    saved = {"model": torch.nn.Linear(2, 2).state_dict(), "data": rec.state_dict()}
    import io

    buf = io.BytesIO()
    torch.save(saved, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    again = Record(a=torch.zeros(3, 2), inner=Inner(x=torch.zeros(3), batch_size=[3]), batch_size=[3])
    again.load_state_dict(loaded["data"])
    assert torch.equal(again.a, rec.a)


def test_to_tensordict_leaves_none_fields_out_by_default():
    # tensordict 0.15.3: retain_none=None drops None fields, retain_none=True keeps them
    from typing import Any

    from tensordict import TensorClass

    class Foo(TensorClass):
        x: torch.Tensor
        y: Any = None
        z: Any = "s"

    foo = Foo(x=torch.zeros(3))
    assert sorted(foo.to_tensordict().keys()) == ["x", "z"]
    assert sorted(foo.to_tensordict(retain_none=True).keys()) == ["x", "y", "z"]
    assert sorted(foo.to_tensordict(retain_none=False).keys()) == ["x", "z"]


def test_from_dataclass_class_is_named_tc():
    # tensordict 0.15.3 names the generated tensorclass <dataclass name>_tc
    import dataclasses

    from tensordict import from_dataclass

    @dataclasses.dataclass
    class Point:
        a: int
        b: torch.Tensor

    assert from_dataclass(Point).__name__ == "Point_tc"
    assert type(from_dataclass(Point(0, torch.zeros(())))).__name__ == "Point_tc"
