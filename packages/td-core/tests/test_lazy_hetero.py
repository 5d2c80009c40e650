"""Lazy stacks of heterogeneous TensorDicts nested inside dense ones: shape ops, apply,
indexed writes and ``lazy_stack(out=)`` never stack the heterogeneous leaves."""

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack


def _ptrs(td):
    if isinstance(td, LazyStackedTensorDict):
        return set().union(*(_ptrs(t) for t in td.tensordicts))
    out = set()
    for v in td._tensordict.values():
        out |= _ptrs(v) if isinstance(v, (TensorDict, LazyStackedTensorDict)) else {v.data_ptr()}
    return out


def _hetero_parent(batch_size=()):
    tds = [
        TensorDict({"shared": torch.zeros(2), "hetero": torch.zeros(3)}, []),
        TensorDict({"shared": torch.zeros(2), "hetero": torch.zeros(2)}, []),
    ]
    parent = TensorDict({"lazy": lazy_stack(tds), "dense": torch.zeros(2, 4)}, [])
    return parent.expand(batch_size).clone()


@pytest.mark.parametrize("batch_size", [(), (3,), (2, 3)])
def test_expand_clone_keep_inner_stack_lazy(batch_size):
    td = _hetero_parent(batch_size)
    inner = td["lazy"]
    assert isinstance(inner, LazyStackedTensorDict)
    assert inner.batch_size == (*batch_size, 2)
    assert inner.stack_dim == len(batch_size)
    assert [t["hetero"].shape[-1] for t in inner.tensordicts] == [3, 2]


def test_apply_walks_inner_stack():
    td = _hetero_parent((3,))
    out = td.apply(lambda x: x + 1)
    assert isinstance(out["lazy"], LazyStackedTensorDict)
    assert (out["lazy"].tensordicts[1]["hetero"] == 1).all()
    td.apply_(lambda x: x + 2)
    assert (td["lazy"].tensordicts[0]["hetero"] == 2).all()
    assert (td["dense"] == 2).all()


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_indexed_write_and_lazy_stack_out(stack_dim):
    a = _hetero_parent((3,))
    b = a.clone().apply_(lambda x: x + 1)
    shape = [3]
    shape.insert(stack_dim, 2)
    out = a.unsqueeze(stack_dim).expand(shape).clone()
    ptrs = _ptrs(out)
    res = lazy_stack([a, b], dim=stack_dim, out=out)
    assert res is out
    assert _ptrs(out) == ptrs
    second = out[(slice(None),) * stack_dim + (1,)]
    for t in second["lazy"].tensordicts:
        assert (t["hetero"] == 1).all()
    first = out[(slice(None),) * stack_dim + (0,)]
    assert (first["dense"] == 0).all()
