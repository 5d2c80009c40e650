"""Behaviours matching tensordict 0.15's stores: empty leaves without files, the ``shape``
field of ``meta.json``, the error wording for an already-mapped leaf, in-place refusals."""

import json

import pytest
import torch

from tensordict import NonTensorData, TensorDict, lazy_stack
from tensordict.memmap import MemoryMappedTensor


def _empty_leaves():
    return TensorDict(
        {
            "empty": torch.empty(0, dtype=torch.int64),
            "full": torch.arange(3),
            "nested": {"matrix": torch.empty(0, 3, dtype=torch.float64), "odd/key": torch.empty(2, 0, dtype=torch.int16)},
        },
        batch_size=[],
    )


@pytest.mark.parametrize("archive", [False, True])
def test_empty_leaves_have_no_file_and_round_trip(tmp_path, archive):
    prefix = tmp_path / ("s.tdz" if archive else "s")
    mm = _empty_leaves().memmap(prefix)
    assert isinstance(mm["empty"], MemoryMappedTensor) and mm["nested", "odd/key"].shape == (2, 0)
    files = sorted(p.name for p in tmp_path.rglob("*.memmap"))
    assert files == ([] if archive else ["full.memmap"])
    loaded = TensorDict.load_memmap(prefix)
    assert loaded.is_memmap()
    for key, shape, dtype in [("empty", (0,), torch.int64), (("nested", "matrix"), (0, 3), torch.float64),
                              (("nested", "odd/key"), (2, 0), torch.int16)]:
        assert loaded[key].shape == shape and loaded[key].dtype is dtype
    assert loaded["full"].tolist() == [0, 1, 2]
    like = _empty_leaves().memmap_like(tmp_path / "like")
    assert like["nested", "matrix"].shape == (0, 3)
    assert TensorDict.load_memmap(tmp_path / "like")["empty"].shape == (0,)


def test_empty_leaf_metadata_is_checked(tmp_path):
    _empty_leaves().memmap(tmp_path / "s")
    meta_path = tmp_path / "s" / "meta.json"
    meta = json.loads(meta_path.read_text())
    entry = next(e for e in meta["entries"] if e["key"] == "empty")
    assert entry["file"] is None and entry["nbytes"] == 0
    entry["shape"] = [4]  # a non-empty tensor cannot come without a file
    entry["nbytes"] = 0
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RuntimeError, match="has no data file"):
        TensorDict.load_memmap(tmp_path / "s")


def test_meta_json_names_the_batch_size_shape(tmp_path):
    td = TensorDict({"a": torch.zeros(3, 2), "n": {"b": torch.zeros(3, 2, 4)}}, [3, 2])
    td.memmap(tmp_path / "s")
    assert json.loads((tmp_path / "s" / "meta.json").read_text())["shape"] == [3, 2]
    lazy_stack([td[0], td[1]], 0).memmap(tmp_path / "l")
    assert json.loads((tmp_path / "l" / "0" / "meta.json").read_text())["shape"] == [2]


def test_already_mapped_leaf_wording(tmp_path):
    td = TensorDict({"a": torch.zeros(3)}, [3]).memmap_(tmp_path / "one")
    with pytest.raises(RuntimeError, match="A filename was provided but the tensor already has a file associated"):
        td.memmap_(tmp_path / "two")
    again = td.memmap_(tmp_path / "three", copy_existing=True)
    assert (again == 0).all()


def test_memmap_in_place_refused_on_modules():
    nn = pytest.importorskip("tensordict.nn")
    params = nn.TensorDictParams(TensorDict({"w": torch.zeros(3)}, [3]))
    with pytest.raises(RuntimeError, match="Cannot build a memmap TensorDict in-place from a TensorDictParams"):
        params.memmap_()
    assert isinstance(params["w"], torch.nn.Parameter)
    assert isinstance(params.memmap()["w"], MemoryMappedTensor)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("where", ["folder", "archive", "compressed", "anonymous"])
def test_nested_tensor_leaves_round_trip(tmp_path, where):
    nt = torch.nested.nested_tensor([torch.arange(6.0).view(2, 3), torch.arange(12.0).view(4, 3)])
    td = TensorDict({"nt": nt, "x": torch.ones(())}, batch_size=[])
    if where == "anonymous":
        loaded = td.memmap()
    else:
        prefix = tmp_path / ("s" if where == "folder" else "s.tdz")
        td.memmap(prefix, compression="deflate" if where == "compressed" else None)
        loaded = TensorDict.load_memmap(prefix)
    assert isinstance(loaded["nt"], MemoryMappedTensor) and loaded["nt"].is_nested
    assert torch.equal(loaded["nt"][0], nt[0]) and torch.equal(loaded["nt"][1], nt[1])
    if where == "archive":
        with pytest.raises(RuntimeError, match="nested tensor"):
            TensorDict.load_memmap(prefix, mode="r+")
    like = td.memmap_like(tmp_path / "like")
    assert like["nt"][1].shape == (4, 3) and (like["nt"][1] == 0).all()


def test_nested_tensordict_is_not_saved_through_a_symlink(tmp_path):
    prefix, outside = tmp_path / "saved", tmp_path / "outside"
    prefix.mkdir()
    outside.mkdir()
    (prefix / "nested").symlink_to(outside, target_is_directory=True)
    td = TensorDict({"nested": {"x": torch.randn(3)}}, batch_size=[])
    with pytest.raises(RuntimeError, match="nested TensorDict through symlink"):
        td.memmap(prefix)
    assert not list(outside.iterdir())
    assert (prefix / "nested").is_symlink()  # the earlier content is left as it was


def test_robust_key_false_refuses_keys_that_are_not_file_names(tmp_path):
    td = TensorDict({"a/b/c": torch.randn(3, 4), "n": {"..": torch.zeros(3)}}, [3])
    with pytest.raises(RuntimeError, match="No such file or directory"):
        td.memmap(tmp_path / "s", robust_key=False)
    assert not (tmp_path / "s").exists()
    td.memmap(tmp_path / "s", robust_key=True)
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert torch.equal(loaded["a/b/c"], td["a/b/c"])
    plain = TensorDict({"a": torch.zeros(2)}, [2]).memmap(tmp_path / "p", robust_key=False)
    assert plain.is_memmap()


@pytest.mark.parametrize("flag", [0, 1, "yes"])
def test_allow_pickle_must_be_a_bool(tmp_path, flag):
    td = TensorDict({"value": NonTensorData(1 + 2j)}, batch_size=[])
    td.memmap(tmp_path / "s")
    with pytest.raises(TypeError, match="allow_pickle must be a bool or None"):
        TensorDict.load_memmap(tmp_path / "s", allow_pickle=flag)
    with pytest.raises(RuntimeError, match="allow_pickle=True"):
        TensorDict.load_memmap(tmp_path / "s", allow_pickle=None)
    assert TensorDict.load_memmap(tmp_path / "s", allow_pickle=True)["value"] == 1 + 2j
