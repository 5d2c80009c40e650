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


def _two_shapes():
    return lazy_stack(
        [TensorDict(a=torch.zeros(2, 3), batch_size=[2]), TensorDict(a=torch.ones(2, 4), batch_size=[2])], 0
    )


def test_cat_keeps_stacks_lazy():
    s = _two_shapes()
    out = torch.cat([s, s.clone()], 0)
    assert isinstance(out, LazyStackedTensorDict) and len(out.tensordicts) == 4
    out = torch.cat([s, s.clone()], 1)
    assert out.batch_size == (2, 4) and out.tensordicts[1]["a"].shape == (4, 4)
    dest = torch.cat([s, s], 1).clone()
    ptrs = _ptrs(dest)
    assert torch.cat([s, s], 1, out=dest) is dest and _ptrs(dest) == ptrs
    dense = TensorDict(a=torch.full((2, 2, 3), 7.0), batch_size=[2, 2])
    mixed = torch.cat([lazy_stack(list(dense.clone().unbind(0))), dense], 0)
    assert isinstance(mixed, LazyStackedTensorDict) and mixed.batch_size == (4, 2)
    with pytest.raises(RuntimeError, match="same number of stacked tensordicts"):
        torch.cat([s, TensorDict(a=torch.zeros(3, 2, 3), batch_size=[3, 2])], 1)


def test_mask_write_across_stack_dim():
    tds = [TensorDict(a=torch.full((3,), float(i)), batch_size=[3]) for i in range(2)]
    s = lazy_stack(tds, 0)
    mask = torch.tensor([[True, False, True], [False, True, False]])
    s[mask] = TensorDict(a=torch.full((3,), -1.0), batch_size=[3])
    assert tds[0]["a"].tolist() == [-1.0, 0.0, -1.0] and tds[1]["a"].tolist() == [1.0, -1.0, 1.0]
    s[torch.tensor([True, False])] = TensorDict(b=torch.tensor(0.0))  # broadcast, new key
    s[torch.tensor([False, True])] = TensorDict(b=torch.tensor(0.0))
    assert (s["b"] == 0).all()


def test_update_merges_lazy_into_dense_and_resizes():
    inner = _two_shapes()
    dest = TensorDict({("p", "a"): torch.zeros(2, 2, 3), ("p", "e"): torch.zeros(2, 2)}, [2])
    dest.update(TensorDict(p=inner, batch_size=[2]))
    assert isinstance(dest["p"], LazyStackedTensorDict)
    assert dest["p"].tensordicts[1]["a"].shape == (2, 4) and "e" in dest["p"].keys()
    s = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4]).to_lazystack(0)
    s.update(TensorDict(a=torch.ones(2, 4), batch_size=[2, 4]), update_batch_size=True)
    assert s.batch_size == (2, 4) and (s["a"] == 1).all()


def test_nested_special_get_membership_and_assert():
    from tensordict import assert_allclose_td

    s = _two_shapes()
    nested = lazy_stack([s, s.clone()])
    assert isinstance(nested.get("a", as_list=True)[0], list)
    assert nested.get("a", as_padded_tensor=True).shape == (2, 2, 2, 4)
    assert s.tensordicts[0] in s and s.tensordicts[0].clone() not in s and "a" in s
    assert assert_allclose_td(s, s.clone())


def test_dense_stack_keeps_heterogeneous_inner_stacks_lazy():
    from tensordict import dense_stack_tds

    def make(v):
        inner = lazy_stack([TensorDict(a=torch.zeros(2) + v), TensorDict(a=torch.zeros(3) + v)])
        return TensorDict(inner=inner, x=torch.zeros(2) + v, batch_size=[2])

    out = dense_stack_tds(lazy_stack([make(0), make(1)]))
    assert isinstance(out, TensorDict) and out.batch_size == (2, 2)
    assert isinstance(out["inner"], LazyStackedTensorDict)
    # a lazy stack along the inner stack dim (shifted by the new dim) of the dense
    # stacks of the inner TensorDicts: [make(0)'s i-th, make(1)'s i-th]
    assert out["inner"].stack_dim == 1
    assert out["inner"].tensordicts[1]["a"].shape == (2, 3)
    assert (out["inner"].tensordicts[1]["a"][1] == 1).all()
    assert (out["inner"][1, 1]["a"] == 1).all()
    assert (out["x"][1] == 1).all()
