"""Stacking and concatenating tensorclasses: torch.stack/torch.cat and the class
methods, non-tensor fields, lazy stacks, tensorclasses inside TensorDicts."""


import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorClass, TensorDict, set_lazy_legacy


class Inner(TensorClass):
    x: torch.Tensor


class Item(TensorClass):
    a: torch.Tensor
    inner: Inner | None = None
    name: str = "item"


def item(n=3, name="item", fill=0.0):
    return Item(
        a=torch.full((n, 2), fill), inner=Inner(x=torch.full((n,), fill), batch_size=[n]), name=name, batch_size=[n]
    )


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_torch_stack(dim):
    items = [item(fill=i) for i in range(4)]
    out = torch.stack(items, dim)
    expected = torch.stack([i.a for i in items], dim if dim >= 0 else dim - 1)
    assert type(out) is Item and type(out.inner) is Inner
    assert torch.equal(out.a, expected)
    assert out.batch_size == torch.stack([i.inner.x for i in items], dim).shape
    assert out.name == "item"


def test_stack_classmethod_and_out():
    items = [item(fill=i) for i in range(2)]
    out = Item.stack(items, 0)
    assert out.batch_size == (2, 3) and torch.equal(out.a[1], items[1].a)
    dest = item(n=3).unsqueeze(0).expand(2, 3).clone()
    res = Item.stack(items, 0, out=dest)
    assert res is dest and torch.equal(dest.inner.x[1], items[1].inner.x)
    res2 = torch.stack(items, 0, out=dest)
    assert res2 is dest


def test_cat():
    items = [item(n=2, fill=0), item(n=3, fill=1)]
    out = torch.cat(items, 0)
    assert type(out) is Item and out.batch_size == (5,)
    assert torch.equal(out.a, torch.cat([i.a for i in items]))
    assert torch.equal(Item.cat(items).inner.x, torch.cat([i.inner.x for i in items]))
    assert torch.concatenate(items).batch_size == (5,)


def test_stack_non_tensor_fields():
    mixed = torch.stack([item(name="a"), item(name="b")])
    assert mixed.name == [["a"] * 3, ["b"] * 3]
    assert mixed[0].name == "a" and mixed[1, 2].name == "b"
    joined = torch.cat([item(n=1, name="a"), item(n=2, name="b")])
    assert joined.name == ["a", "b", "b"]
    nones = torch.stack([Item(a=torch.zeros(2), batch_size=[2])] * 2)
    assert nones.inner is None and nones.name == "item"


def test_stack_errors_name_the_problem():
    with pytest.raises(TypeError, match="one tensorclass"):
        Item.stack([item(), Inner(x=torch.zeros(3), batch_size=[3])])
    # through torch, as upstream: no __torch_function__ takes instances of two classes
    with pytest.raises(TypeError, match="Multiple dispatch failed|no implementation found"):
        torch.stack([item(), Inner(x=torch.zeros(3), batch_size=[3])])
    with pytest.raises(TypeError, match="Multiple dispatch failed|no implementation found"):
        torch.cat([item(), Inner(x=torch.zeros(3), batch_size=[3])])
    with pytest.raises(RuntimeError, match="batch_size"):
        torch.stack([item(n=2), item(n=3)])
    with pytest.raises(RuntimeError, match="non-empty"):
        Item.stack([])


def test_lazy_stack_and_maybe_dense_stack():
    items = [item(fill=i) for i in range(3)]
    lazy = Item.lazy_stack(items, 0)
    assert type(lazy) is Item and isinstance(lazy._tensordict, LazyStackedTensorDict)
    assert lazy.batch_size == (3, 3)
    assert torch.equal(lazy.a, torch.stack([i.a for i in items]))
    assert type(lazy[1]) is Item and torch.equal(lazy[1].a, items[1].a)
    dense = Item.maybe_dense_stack(items, 0)
    assert type(dense) is Item and dense.batch_size == (3, 3)
    with set_lazy_legacy(True):
        legacy = torch.stack(items)
    assert isinstance(legacy._tensordict, LazyStackedTensorDict)


def test_unbind_then_stack_round_trip():
    data = torch.stack([item(fill=i, name=str(i)) for i in range(3)])
    parts = data.unbind(0)
    assert [p.name for p in parts] == ["0", "1", "2"]
    again = torch.stack(parts)
    assert torch.equal(again.a, data.a) and again.name == data.name


def test_tensorclass_inside_tensordict():
    td = TensorDict({"item": item(n=4), "t": torch.zeros(4)}, [4])
    assert type(td["item"]) is Item
    assert type(td[1:3]["item"]) is Item and td[1:3]["item"].batch_size == (2,)
    assert td.reshape(2, 2)["item"].a.shape == (2, 2, 2)
    stacked = torch.stack([td, td.clone()], 0)
    assert type(stacked["item"]) is Item and stacked["item"].batch_size == (2, 4)
    parts = td.unbind(0)
    assert type(parts[0]["item"]) is Item and parts[0]["item"].batch_size == ()
    moved = td.to(torch.float64)
    assert moved["item"].a.dtype == torch.float64 and moved["item"].inner.x.dtype == torch.float64
    td[0] = td[1]
    td[:2] = 0.0
    assert (td["item"].a[:2] == 0).all() and (td["item"].inner.x[:2] == 0).all()
    cloned = td.clone()
    assert cloned["item"].a.data_ptr() != td["item"].a.data_ptr()
    with pytest.raises(RuntimeError, match="batch"):
        td["bad"] = item(n=3)


def test_module_level_functions_keep_the_class():
    import tensordict

    items = [item(fill=i, name="same") for i in range(2)]
    for fn in (tensordict.stack, tensordict.maybe_dense_stack, tensordict.lazy_stack):
        out = fn(items, 0)
        assert type(out) is Item and out.batch_size == (2, 3)
        assert out.name == "same"
    assert isinstance(tensordict.lazy_stack(items, 0)._tensordict, LazyStackedTensorDict)
    joined = tensordict.cat(items, 0)
    assert type(joined) is Item and joined.batch_size == (6,)
