"""Batch-dim names through shape ops, nesting, lazy stacks, refine_names and rename."""

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack


def _td(names=("a", "b", "c", "d"), bs=(3, 4, 1, 6)):
    return TensorDict({"x": torch.zeros(*bs, 2)}, batch_size=list(bs), names=list(names) if names else None)


def test_shape_ops_map_names():
    td = _td()
    assert td.unsqueeze(0).names == [None, "a", "b", "c", "d"]
    assert td.unsqueeze(-1).names == ["a", "b", "c", "d", None]
    assert td.squeeze(2).names == ["a", "b", "d"]
    assert td.squeeze().names == ["a", "b", "d"]
    assert td.permute(3, 2, 1, 0).names == ["d", "c", "b", "a"]
    assert td.transpose(0, 1).names == ["b", "a", "c", "d"]
    assert td.expand(2, 3, 4, 1, 6).names == [None, "a", "b", "c", "d"]
    assert td.flatten(1, 2).names == ["a", None, "d"]
    assert td.flatten(1, 2).unflatten(1, (4, 1)).names == ["a", None, None, "d"]
    assert td.gather(-1, torch.zeros(3, 4, 1, 2, dtype=torch.long)).names == ["a", "b", "c", "d"]
    assert td.all(2).names == ["a", "b", "d"]
    assert td.any(0).names == ["b", "c", "d"]
    assert [t.names for t in td.unbind(1)][0] == ["a", "c", "d"]
    assert td.split([2, 4], -1)[1].names == ["a", "b", "c", "d"]
    assert td.clone().names == td.names
    assert td.to("cpu", inplace=True) is td and td.names == ["a", "b", "c", "d"]


def test_indexing_maps_names():
    td = _td(bs=(3, 4, 5, 6))
    assert td[0].names == ["b", "c", "d"]
    assert td[:, 0].names == ["a", "c", "d"]
    assert td[..., -1].names == ["a", "b", "c"]
    assert td[0, ..., [-1]].names == ["b", "c", "d"]
    assert td[0, ..., torch.tensor(-1)].names == ["b", "c"]
    assert td[None].names == [None, "a", "b", "c", "d"]
    assert td[torch.ones(3, 4, dtype=torch.bool)].names == [None, "c", "d"]


def test_unnamed_results_stay_unnamed():
    td = _td(names=None)
    assert not td.unsqueeze(0)._has_names()
    assert not td[0]._has_names()
    assert td.permute(3, 2, 1, 0).names == [None] * 4


def test_batch_size_setter_keeps_leading_names():
    td = TensorDict(batch_size=[3, 4, 1, 6], names=["a", "b", "c", "z"])
    td.batch_size = [3, 4, 1, 6, 1]
    assert td.names == ["a", "b", "c", "z", None]
    td.batch_size = [3, 4]
    assert td.names == ["a", "b"]


def test_names_errors():
    with pytest.raises(ValueError, match="the length of the dimension names must equate"):
        TensorDict(batch_size=[3, 4]).names = ["a"]
    with pytest.raises(ValueError):
        TensorDict(batch_size=[3, 4], names=["a", "a"])
    td = TensorDict(batch_size=[3, 4], names=["a", "b"])
    with pytest.raises(ValueError):
        td.rename_(a="b")
    with pytest.raises(ValueError):
        td.rename_(q="r")


def test_refine_and_rename():
    td = TensorDict(batch_size=[3, 4, 5, 6])
    assert td.refine_names(None, None, None, "d").names == [None, None, None, "d"]
    assert td.refine_names(..., "c", "d").names == [None, None, "c", "d"]
    assert td.refine_names("a", ...).names == ["a", None, "c", "d"]
    with pytest.raises(RuntimeError, match="refine_names: cannot coerce TensorDict"):
        td.refine_names(None, None, "d", "d")
    td2 = td.rename(c="z")
    assert td2.names == ["a", None, "z", "d"] and td.names == ["a", None, "c", "d"]
    td.rename_(*"mnop")
    assert td.names == ["m", "n", "o", "p"]


def test_nested_names_follow_parent():
    td = TensorDict({"sub": TensorDict({"y": torch.zeros(3, 4, 2)}, [3, 4, 2])}, [3, 4])
    td.names = ["t", "b"]
    assert td["sub"].names == ["t", "b", None]
    td.rename_(t="time")
    assert td["sub"].names == ["time", "b", None]
    assert td[0]["sub"].names == ["b", None]
    assert td[..., -1]["sub"].names == ["time", None]
    assert td.permute(1, 0)["sub"].names == ["b", "time", None]
    td["new"] = TensorDict(batch_size=[3, 4])
    assert td["new"].names == ["time", "b"]
    td["d"] = {"z": torch.zeros(3, 4)}
    assert td["d"].names == ["time", "b"]


def test_unnamed_parent_adopts_child_names():
    td = TensorDict({}, [3])
    td["a"] = TensorDict({}, [3, 4], names=["x", "y"])
    assert td.names == ["x"]


def test_shape_ops_keep_lock():
    td = TensorDict({"sub": {}}, batch_size=[3, 4], lock=True)
    for out in (td.permute(1, 0), td.transpose(0, 1), td.unsqueeze(0), td.view(-1)):
        assert out.is_locked and out["sub"].is_locked
    assert not TensorDict(batch_size=[3, 4]).permute(1, 0).is_locked


def test_lazy_stack_names():
    td = _td(bs=(3, 4, 5, 6))
    assert lazy_stack([td, td], 0).names == [None, "a", "b", "c", "d"]
    assert lazy_stack([td, td], -1).names == ["a", "b", "c", "d", None]
    s = LazyStackedTensorDict.lazy_stack([td, td.clone()], 2)
    s.names = list("mnopq")
    assert s.names == list("mnopq")
    assert s.tensordicts[1].names == ["m", "n", "p", "q"]
    assert s[:, 0].names == ["m", "o", "p", "q"]
    assert s.unsqueeze(0).names == [None, *"mnopq"]


def test_lazy_stack_dim_name_reaches_nested_stacks():
    td = TensorDict({"": TensorDict({}, [3, 4], names=["c", "d"])}, [3], names=["c"])
    s = lazy_stack([td, td], -1)
    assert s[""].names == ["c", None, "d"]
    with pytest.raises(ValueError):
        s.names = ["c", "d"]  # the nested stack would hold "d" twice
    s.names = ["c", "e"]
    assert s[""].names == ["c", "e", "d"]
    assert s[0].names == ["e"]
    assert s[0][""].names == s[""][0].names == ["e", "d"]


def test_first_class_dims_drop_names_and_refuse_the_stack_dim():
    ftdim = pytest.importorskip("functorch.dim")
    td = _td(bs=(3, 4, 5, 6))
    d0 = ftdim.dims(1)
    assert td[d0].names == ["b", "c", "d"]
    assert td[:, d0].names == ["a", "c", "d"]
    s = lazy_stack([_td(bs=(4, 5, 6), names=("b", "c", "d")) for _ in range(3)], 1)
    with pytest.raises(ValueError, match="Cannot index"):
        s[:, ftdim.dims(1)]
    assert s[ftdim.dims(1)].batch_size == (3, 5, 6)


def test_lazy_legacy_views_refuse_new_names():
    from tensordict import set_lazy_legacy

    td = TensorDict(batch_size=[3, 1])
    with set_lazy_legacy(True):
        unsq, sq = td.unsqueeze(-1), td.squeeze(1)
    for out in (unsq, sq):
        with pytest.raises(RuntimeError, match="Names of a lazy tensordict cannot be modified"):
            out.names = ["a"] * 0 + [f"n{i}" for i in range(out.batch_dims)]
    td.unsqueeze(-1).names = ["x", "y", "z"]  # without the legacy switch names can be set
