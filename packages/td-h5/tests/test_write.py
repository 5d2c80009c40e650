"""Writes reach the file: set, set_, update, indexed assignment, deletion, renames."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tensordict import NonTensorStack, TensorDict
from tensordict.persistent import PersistentTensorDict


def reopen(p: PersistentTensorDict) -> PersistentTensorDict:
    name = p.filename
    p.close()
    return PersistentTensorDict.from_h5(name, mode="r+")


def test_set_new_and_replace(ptd):
    ptd["new"] = torch.ones(10, 2)
    ptd.set(("nested", "deep", "x"), torch.arange(10))
    ptd["obs"] = torch.zeros(10, 7, dtype=torch.int16)  # new shape and dtype: replaced
    p = reopen(ptd)
    try:
        assert torch.equal(p["new"], torch.ones(10, 2))
        assert torch.equal(p["nested", "deep", "x"], torch.arange(10))
        assert p["nested", "deep"].batch_size == torch.Size([10])
        assert p["obs"].dtype == torch.int16 and p["obs"].shape == torch.Size([10, 7])
        assert not any(k.endswith("__td_tmp__") for k in p.file.keys())
    finally:
        p.close()


def test_set_same_shape_writes_in_place(ptd):
    offset = ptd.file["obs"].id.get_offset()
    ptd["obs"] = torch.full((10, 3), 5.0)
    assert ptd.file["obs"].id.get_offset() == offset
    assert torch.equal(ptd["obs"], torch.full((10, 3), 5.0))


def test_set_nested_tensordict_and_dict(ptd):
    ptd["sub"] = TensorDict(a=torch.ones(10, 4), b={"c": torch.zeros(10, 4)}, batch_size=[10, 4])
    ptd["d"] = {"e": torch.arange(10)}
    assert ptd["sub"].batch_size == torch.Size([10, 4])
    assert torch.equal(ptd["sub", "b", "c"], torch.zeros(10, 4))
    assert torch.equal(ptd["d", "e"], torch.arange(10))
    with h5py.File(ptd.filename, "r") as f:
        assert list(f["sub"].attrs["_td_batch_size"]) == [10, 4]


def test_set_inplace_and_set_(ptd):
    ptd.set("reward", torch.ones(10, dtype=torch.float64), inplace=True)
    assert torch.equal(ptd["reward"], torch.ones(10, dtype=torch.float64))
    ptd.set_("obs", torch.tensor([1.0, 2.0, 3.0]))  # broadcasts like copy_
    assert torch.equal(ptd["obs"], torch.tensor([1.0, 2.0, 3.0]).expand(10, 3))
    ptd.set_(("nested", "idx"), torch.zeros(10, dtype=torch.int64))
    assert ptd["nested", "idx"].sum() == 0
    with pytest.raises(KeyError, match="missing"):
        ptd.set_("missing", torch.zeros(10))


def test_indexed_assignment(ptd, td):
    other = TensorDict(
        obs=torch.full((2, 3), -1.0), nested={"idx": torch.tensor([100, 200])}, batch_size=[2]
    )
    ptd[1:3] = other
    ptd[torch.tensor([9, 7])] = TensorDict(reward=torch.tensor([5.0, 6.0], dtype=torch.float64), batch_size=[2])
    ptd[0] = 0
    expected = td.clone()
    expected["obs"][1:3] = -1.0
    expected["nested", "idx"][1:3] = torch.tensor([100, 200])
    expected["reward"][9], expected["reward"][7] = 5.0, 6.0
    for key in ("obs", "reward", "done", ("nested", "idx"), ("nested", "half")):
        expected[key][0] = 0
    p = reopen(ptd)
    try:
        for key in ("obs", "reward", "done", ("nested", "idx"), ("nested", "half")):
            assert torch.equal(p[key], expected[key]), key
    finally:
        p.close()


def test_view_set_writes_rows_and_preallocates(ptd):
    view = ptd[torch.tensor([4, 2])]
    view["obs"] = torch.full((2, 3), 9.0)
    view["fresh"] = torch.tensor([1.5, 2.5])
    view.set(("nested", "idx"), torch.tensor([-4, -2]))
    assert torch.equal(ptd["obs"][[4, 2]], torch.full((2, 3), 9.0))
    assert ptd["obs"][0].tolist() == [0.0, 1.0, 2.0]
    fresh = ptd["fresh"]
    assert fresh.shape == torch.Size([10])
    assert fresh[4] == 1.5 and fresh[2] == 2.5 and fresh[0] == 0
    assert ptd["nested", "idx"][[4, 2]].tolist() == [-4, -2]


def test_multi_dim_view_writes(grid_file, grid_ref):
    with PersistentTensorDict.from_h5(grid_file, mode="r+") as p:
        ref = grid_ref.clone()
        p[1:3, torch.tensor([4, 0])] = TensorDict(y=torch.full((2, 2), -1), batch_size=[2, 2])
        ref["y"][1:3, [4, 0]] = -1
        view = p[torch.tensor([3, 0])][:, torch.tensor([1, 2])]
        view.set_("x", torch.full((2, 2, 2), 7.0))
        ref["x"][np.ix_([3, 0], [1, 2])] = 7.0
        p[torch.tensor([[True, False, False, False, True]] * 4)] = TensorDict(g={"z": torch.zeros(8, 3, dtype=torch.int32)}, batch_size=[8])
        mask = torch.tensor([[True, False, False, False, True]] * 4)
        ref["g", "z"][mask] = 0
        assert torch.equal(p["y"], ref["y"])
        assert torch.equal(p["x"], ref["x"])
        assert torch.equal(p["g", "z"], ref["g", "z"])


def test_repeated_rows_last_write_wins(ptd):
    ptd[torch.tensor([3, 3])] = TensorDict(reward=torch.tensor([1.0, 2.0], dtype=torch.float64), batch_size=[2])
    assert ptd["reward"][3] == 2.0


def test_update_and_update_(ptd):
    ptd.update({"reward": torch.zeros(10, dtype=torch.float64), "extra": torch.ones(10)})
    assert ptd["reward"].sum() == 0 and ptd["extra"].sum() == 10
    ptd.update_(TensorDict(obs=torch.ones(10, 3), nested={"idx": torch.ones(10, dtype=torch.int64)}, batch_size=[10]))
    assert ptd["obs"].sum() == 30 and ptd["nested", "idx"].sum() == 10
    with pytest.raises(KeyError, match="nope"):
        ptd.update_({"nope": torch.zeros(10)})
    ptd[2:4].update_({"obs": torch.full((2, 3), 3.0)})
    assert ptd["obs"][2:4].unique().tolist() == [3.0]


def test_non_tensor_writes(ptd):
    ptd["label"] = "changed"
    ptd["note"] = "new note"
    stack = NonTensorStack(*[f"row{i}" for i in range(10)])
    ptd["rows"] = stack
    p = reopen(ptd)
    try:
        assert p["label"] == b"changed" and p["note"] == b"new note"
        assert p["rows"][3] == "row3"
        p[torch.tensor([1, 0])]["rows"] = NonTensorStack("one", "zero")
        assert p["rows"][:3] == ["zero", "one", "row2"]
    finally:
        p.close()


def test_delete_rename_pop(ptd):
    del ptd["done"]
    ptd.del_(("nested", "half"))
    assert "done" not in ptd.keys() and ("nested", "half") not in ptd
    ptd.rename_key_("obs", "observation")
    assert "observation" in ptd.keys() and "obs" not in ptd.keys()
    ptd.rename_key_("label", ("nested", "label"))
    assert ptd["nested", "label"] == b"experiment-1"
    value = ptd.pop("reward")
    assert value.shape == torch.Size([10]) and "reward" not in ptd.keys()
    with pytest.raises(KeyError):
        del ptd["reward"]
    with pytest.raises(KeyError, match="already present"):
        ptd.rename_key_("observation", "nested", safe=True)


def test_in_place_ops_write_back(ptd):
    ptd.zero_()
    assert all(ptd[k].sum() == 0 for k in ("obs", "reward", ("nested", "idx")))
    ptd.fill_("obs", 2.0)
    assert ptd["obs"].unique().tolist() == [2.0]
    ptd.fill_("nested", 1)
    assert ptd["nested", "idx"].unique().tolist() == [1]
    ptd[5:].apply_leaves_(lambda t: t.add_(1) if t.dtype is not torch.bool else t)
    assert ptd["obs"][5:].unique().tolist() == [3.0] and ptd["obs"][0, 0] == 2.0
    ptd.set_at_("reward", torch.tensor(4.0, dtype=torch.float64), 3)
    assert ptd["reward"][3] == 4.0


def test_in_place_math_and_apply_write_back(ptd, td):
    del ptd["done"]  # bool + 1 fails in torch as well
    ptd.add_(1)
    ptd[2:4].mul_(0)
    expected = td["obs"] + 1
    expected[2:4] = 0
    assert torch.equal(ptd["obs"], expected)
    assert torch.equal(ptd["nested", "idx"][:2], torch.tensor([1, 2]))
    ptd.apply_(lambda t: t.clamp(max=5))
    assert ptd["obs"].max() == 5
    assert ptd["label"] == b"experiment-1"


def test_in_place_math_read_only(h5file):
    with PersistentTensorDict.from_h5(h5file) as p:
        with pytest.raises(RuntimeError, match="read-only"):
            p.mul_(2)


def test_locked_persistent_tensordict(ptd):
    ptd.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        ptd["brand_new"] = torch.zeros(10)
    with pytest.raises(RuntimeError, match="locked"):
        del ptd["obs"]
    ptd.set_("obs", torch.zeros(10, 3))  # in-place writes stay allowed
    ptd[0] = TensorDict(obs=torch.ones(3), batch_size=[])
    assert ptd["obs"][0].sum() == 3
    assert ptd["nested"].is_locked
    ptd.unlock_()
    ptd["brand_new"] = torch.zeros(10)


@pytest.fixture(scope="module")
def prop_write_file(tmp_path_factory):
    return tmp_path_factory.mktemp("pw") / "w.h5"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(st.integers(-6, 5), min_size=1, max_size=4, unique=True),
    cols=st.one_of(st.none(), st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True)),
    rows_first=st.booleans(),
)
def test_property_view_writes_match_memory(prop_write_file, rows, cols, rows_first):
    rows_t = torch.tensor(rows)
    assume(len(set((rows_t % 6).tolist())) == len(rows))
    ref = TensorDict(a=torch.arange(60.0).view(6, 5, 2), batch_size=[6, 5])
    with ref.to_h5(prop_write_file) as p:
        if cols is None:
            view = p[rows_t]
        elif rows_first:
            view = p[rows_t][:, torch.tensor(cols)]
        else:
            view = p[:, torch.tensor(cols)][rows_t]
        value = torch.randn(view.batch_size + (2,))
        view.set_("a", value)
        expected = ref["a"].clone()
        if cols is None:
            expected[rows_t] = value
        else:
            expected[np.ix_((rows_t % 6).tolist(), cols)] = value
        assert torch.equal(p["a"], expected)


def test_set_refuses_a_tensor_that_requires_grad(ptd, td):
    with pytest.raises(RuntimeError, match="Cannot set a tensor that has requires_grad=True"):
        ptd.set("obs", torch.zeros(10, 3, requires_grad=True))
    assert torch.equal(ptd["obs"], td["obs"])
    ptd.set("obs", torch.zeros(10, 3, requires_grad=True).detach())
    assert (ptd["obs"] == 0).all()


def test_setitem_with_a_tensordict_of_another_batch_size(ptd, td):
    rows = ptd[2:4].to_tensordict().zero_()
    ptd[2:4] = rows
    assert (ptd["obs"][2:4] == 0).all()
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        ptd[2:4] = torch.cat([rows, rows], 0)
    assert torch.equal(ptd["obs"][4:], td["obs"][4:])  # nothing else written


def test_rename_key_safe_names_the_existing_key(ptd):
    with pytest.raises(KeyError, match="already present in TensorDict"):
        ptd.rename_key_("obs", "reward", safe=True)


def test_nested_entries_follow_the_parent_dim_names(ptd):
    ptd.names = ["time"]
    assert ptd["nested"].names == ["time"]
    assert [v.names for v in ptd.values() if isinstance(v, PersistentTensorDict)] == [["time"]]
    ptd.names = ["t"]
    assert ptd.get("nested").names == ["t"]
