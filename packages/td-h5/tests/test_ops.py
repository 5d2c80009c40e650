"""TensorDictBase operations on a PersistentTensorDict read what they need and return
in-memory TensorDicts (``to``, ``clone``, shape ops that move data, math, stacking)."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, TensorDictBase
from tensordict.persistent import PersistentTensorDict


def test_to_tensordict_and_clone(ptd, td):
    for out in (ptd.to_tensordict(), ptd.clone()):
        assert type(out) is TensorDict
        assert out["label"] == b"experiment-1"
        assert torch.equal(out["nested", "idx"], td["nested", "idx"])
    out = ptd[2:5].to_tensordict()
    assert out.batch_size == torch.Size([3]) and torch.equal(out["obs"], td["obs"][2:5])


def test_to_device_dtype(ptd, td, device):
    moved = ptd.to(device)
    assert type(moved) is TensorDict and moved.device == device
    assert torch.equal(moved["obs"].cpu(), td["obs"])
    doubled = ptd.to(torch.float64)
    assert type(doubled) is TensorDict and doubled["obs"].dtype == torch.float64
    assert ptd.cpu()["reward"].dtype == torch.float64


def test_dense_shape_ops(grid_file, grid_ref):
    with PersistentTensorDict.from_h5(grid_file) as p:
        cases = [
            (lambda t: t.reshape(-1), "reshape"),
            (lambda t: t.view(torch.uint8), "view(dtype)"),
            (lambda t: t.permute(1, 0), "permute"),
            (lambda t: t.transpose(0, 1), "transpose"),
            (lambda t: t.flatten(0, 1), "flatten"),
            (lambda t: t.unflatten(1, (5, 1)), "unflatten"),
            (lambda t: t.expand(3, 4, 5), "expand"),
            (lambda t: t.flip(0), "flip"),
            (lambda t: t.roll(1, 1), "roll"),
            (lambda t: t.repeat(1, 2), "repeat"),
            (lambda t: t.contiguous(), "contiguous"),
        ]
        for fn, name in cases:
            got, exp = fn(p), fn(grid_ref)
            assert type(got) is TensorDict, name
            assert got.batch_size == exp.batch_size, name
            assert torch.equal(got["g", "z"], exp["g", "z"]), name
            assert torch.equal(got["x"], exp["x"]), name


def test_stack_cat_and_compare(ptd, td):
    stacked = torch.stack([ptd, ptd], 0)
    assert type(stacked) is TensorDict and stacked.batch_size == torch.Size([2, 10])
    joined = torch.cat([ptd[:3], ptd[7:]], 0)
    assert torch.equal(joined["obs"], torch.cat([td["obs"][:3], td["obs"][7:]]))
    eq = ptd == td
    assert type(eq) is TensorDict and eq.all()
    assert (ptd[1:4] == td[1:4]).all()
    assert not (ptd != td).any()


def test_select_exclude_dict(ptd, td):
    sel = ptd.to_tensordict().select("obs", ("nested", "idx"))
    assert set(sel.keys(True, True)) == {"obs", ("nested", "idx")}
    ex = ptd.exclude("nested", "label")
    assert set(ex.keys()) == {"obs", "reward", "done"}
    d = ptd.to_dict()
    assert torch.equal(d["nested"]["idx"], td["nested", "idx"]) and d["label"] == b"experiment-1"
    assert ptd.flatten_keys()["nested.idx"].tolist() == list(range(10))


def test_batch_size_setter_and_auto(grid_file):
    with PersistentTensorDict.from_h5(grid_file, batch_size=[4]) as p:
        p.batch_size = [4, 5]
        assert p["g"].batch_size == torch.Size([4, 5, 3])
        with pytest.raises(RuntimeError, match="batch dimension mismatch"):
            p.batch_size = [4, 5, 2]
        p.batch_size = []
        p.auto_batch_size_()
        assert p.batch_size == torch.Size([4, 5])
        with pytest.raises(RuntimeError, match="indexed view"):
            p[0].batch_size = []


def test_emptiness_and_len(ptd):
    assert not ptd.is_empty()
    assert len(ptd) == 10
    assert ptd.numel() == 10
    empty = ptd.empty(recurse=True)
    assert type(empty) is TensorDict and list(empty.keys()) == ["nested"]


def test_apply_and_math_give_memory_results(ptd, td):
    if not hasattr(TensorDictBase, "apply"):
        pytest.skip("td-core does not provide apply yet")
    out = ptd.exclude("nested", "label", "done").apply(lambda t: t * 2)
    assert type(out) is TensorDict
    assert torch.equal(out["obs"], td["obs"] * 2)
    if hasattr(TensorDictBase, "__add__"):
        summed = ptd.exclude("nested", "label", "done", "reward") + 1
        assert type(summed) is TensorDict and torch.equal(summed["obs"], td["obs"] + 1)


def test_clone_shallow_is_a_handle_on_the_same_file(ptd, td):
    handle = ptd.clone(recurse=False)
    assert type(handle) is PersistentTensorDict and handle is not ptd
    assert handle.filename == ptd.filename and handle.batch_size == ptd.batch_size
    handle.set_at_("obs", torch.full((3,), -1.0), 0)  # writes through to the file
    assert torch.equal(ptd["obs"][0], torch.full((3,), -1.0))
    view = ptd[2:5].clone(False)
    assert view.batch_size == torch.Size([3]) and torch.equal(view["nested", "idx"], td["nested", "idx"][2:5])


def test_clone_to_newfile(ptd, td, tmp_path):
    with ptd[1:4].clone(newfile=tmp_path / "copy.h5") as copy:
        assert type(copy) is PersistentTensorDict and copy.filename == str(tmp_path / "copy.h5")
        assert copy.batch_size == torch.Size([3])
        assert torch.equal(copy["obs"], td["obs"][1:4]) and copy["label"] == b"experiment-1"
        copy.set_("obs", torch.zeros(3, 3))
    assert torch.equal(ptd["obs"], td["obs"])  # the source file is untouched


def test_memmap_in_place_is_refused(ptd, tmp_path):
    with pytest.raises(RuntimeError, match="Cannot build a memmap TensorDict in-place from a PersistentTensorDict"):
        ptd.memmap_(tmp_path / "mm")
    pytest.importorskip("tensordict.memmap")  # the out-of-place copy needs td-memmap
    mm = ptd.memmap(tmp_path / "mm")
    assert torch.equal(mm["obs"], ptd["obs"]) and mm.is_memmap()


def test_from_dict_auto_batch_size(tmp_path, td):
    data = {"x": torch.zeros(4, 3, 2), "y": {"z": torch.zeros(4, 3)}}
    with PersistentTensorDict.from_dict(data, tmp_path / "a.h5", auto_batch_size=True) as p:
        assert p.batch_size == torch.Size([4, 3])
    flat = TensorDict(x=torch.zeros(4, 3, 2), batch_size=[])
    with PersistentTensorDict.from_dict(flat, tmp_path / "b.h5", auto_batch_size=True) as p:
        assert p.batch_size == torch.Size([4, 3, 2])
    with pytest.raises(ValueError, match="exclusive"):
        PersistentTensorDict.from_dict(data, tmp_path / "c.h5", batch_size=[4], auto_batch_size=True)


def test_operations_refused_as_upstream(ptd, td, tmp_path):
    """select, shape views, in-place to/flatten_keys/unflatten_keys and memmap_ are refused
    (tensordict 0.15 refuses them); the in-memory route the messages name works."""
    with pytest.raises(NotImplementedError, match="Cannot call select"):
        ptd.select("obs")
    with pytest.raises(NotImplementedError, match="Cannot call select"):
        ptd.select("obs", inplace=True)
    with pytest.raises(RuntimeError, match="Cannot call `view`"):
        ptd.view(-1)
    assert ptd.view(torch.uint8)["obs"].dtype == torch.uint8
    with pytest.raises(TypeError, match="Cannot use inplace=True with"):
        ptd.to(torch.float64, inplace=True)
    assert ptd.to(torch.float64)["obs"].dtype == torch.float64
    with pytest.raises(ValueError, match="Cannot call flatten_keys in_place"):
        ptd.flatten_keys(inplace=True)
    with pytest.raises(ValueError, match="Cannot call flatten_keys in_place"):
        ptd.unflatten_keys(inplace=True)
    assert ("nested", "idx") in ptd.keys(True)  # nothing was renamed in the file
    assert "nested.idx" in ptd.flatten_keys().keys()
    assert ptd._cache is None


def test_apply_inplace_writes_nested_entries_in_place(ptd, td):
    ptd.apply(lambda t: t + 1, inplace=True)
    assert sorted(ptd.keys(True, True), key=str) == sorted(td.keys(True, True), key=str)
    assert torch.equal(ptd["nested", "idx"], td["nested", "idx"] + 1)
    assert torch.equal(ptd["obs"], td["obs"] + 1)


def test_split_keys(ptd, td):
    part, rest = ptd.split_keys(["obs", ("nested", "idx"), "label"])
    assert type(part) is TensorDict and set(part.keys(True, True)) == {"obs", ("nested", "idx")}
    assert part["label"] == b"experiment-1" and "label" not in rest.keys()
    assert "obs" in ptd.keys() and "obs" not in rest.keys()
    part, rest = ptd.split_keys(["reward"], inplace=True)
    assert rest is ptd and "reward" not in ptd.keys() and torch.equal(part["reward"], td["reward"])


def test_a_nested_entry_of_a_locked_file_cannot_be_unlocked_alone(tmp_path):
    import gc

    p = TensorDict(a=torch.zeros(2), b={"c": torch.zeros(2)}, batch_size=[2]).to_h5(tmp_path / "l.h5")
    p.lock_()
    nested = p.get("b")
    assert nested.is_locked
    with pytest.raises(RuntimeError, match="locked graph"):
        nested.unlock_()
    p.unlock_()
    nested.unlock_()  # the parent is unlocked: allowed
    p.lock_()
    again = p.get("b")
    del p
    gc.collect()
    again.unlock_()  # the parent is gone
    again.file.file.close()
