"""append_memmap: growing a folder store along its first batch dimension."""

import json
import os

import pytest
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict, append_memmap, lazy_stack
from tensordict.memmap import MemoryMappedTensor


def _rows(start, n):
    return TensorDict(
        {
            "obs": torch.arange(start, start + n, dtype=torch.float32).unsqueeze(-1).expand(n, 3).clone(),
            "nested": {"idx": torch.arange(start, start + n), "img": torch.zeros(n, 2, 2, dtype=torch.uint8) + start},
            "tag": NonTensorData("run-1", batch_size=[n]),
        },
        batch_size=[n],
    )


def test_append_grows_every_leaf_and_keeps_old_readers(tmp_path):
    first = _rows(0, 4).memmap(tmp_path / "s")
    append_memmap(tmp_path / "s", _rows(4, 3))
    td = TensorDict.load_memmap(tmp_path / "s")
    assert td.batch_size == torch.Size([7]) and td["nested"].batch_size == torch.Size([7])
    assert td["nested", "idx"].tolist() == list(range(7))
    assert torch.equal(td["obs"][:, 0], torch.arange(7.0))
    assert td["nested", "img"][5].unique().tolist() == [4]
    assert td["tag"] == "run-1" and isinstance(td["obs"], MemoryMappedTensor)
    # a TensorDict mapped before the append still sees its 4 rows, with their values
    assert first.batch_size == torch.Size([4]) and first["nested", "idx"].tolist() == [0, 1, 2, 3]
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    assert meta["batch_size"] == [7] == meta["shape"]
    assert not (tmp_path / "s" / ".td-append.json").exists()


def test_append_several_times_and_multi_dim_batches(tmp_path):
    TensorDict({"x": torch.zeros(2, 5, 3)}, batch_size=[2, 5]).memmap(tmp_path / "s")
    for i in range(1, 4):
        append_memmap(tmp_path / "s", TensorDict({"x": torch.full((i, 5, 3), float(i))}, batch_size=[i, 5]))
    td = TensorDict.load_memmap(tmp_path / "s")
    assert td.batch_size == torch.Size([8, 5])
    assert td["x"][:, 0, 0].tolist() == [0, 0, 1, 2, 2, 3, 3, 3]


def test_non_tensor_values_that_differ_become_a_stack(tmp_path):
    _rows(0, 2).memmap(tmp_path / "s")
    rows = _rows(2, 2)
    rows.set_non_tensor("tag", "run-2")
    append_memmap(tmp_path / "s", rows)
    td = TensorDict.load_memmap(tmp_path / "s")
    assert td["tag"] == ["run-1", "run-1", "run-2", "run-2"]
    stack = TensorDict({"s": NonTensorStack.from_list(["a", "b"])}, batch_size=[2])
    stack.memmap(tmp_path / "t")
    append_memmap(tmp_path / "t", TensorDict({"s": NonTensorStack.from_list(["c"])}, batch_size=[1]))
    assert TensorDict.load_memmap(tmp_path / "t")["s"] == ["a", "b", "c"]


def test_pickled_values_need_allow_pickle(tmp_path):
    TensorDict({"x": torch.zeros(1), "z": NonTensorData(1 + 2j, batch_size=[1])}, [1]).memmap(tmp_path / "s")
    rows = TensorDict({"x": torch.ones(1), "z": NonTensorData(3 + 4j, batch_size=[1])}, [1])
    with pytest.raises(RuntimeError, match="allow_pickle=True"):
        append_memmap(tmp_path / "s", rows)
    with pytest.raises(TypeError, match="allow_pickle must be a bool"):
        append_memmap(tmp_path / "s", rows, allow_pickle=1)
    append_memmap(tmp_path / "s", rows, allow_pickle=True)
    td = TensorDict.load_memmap(tmp_path / "s", allow_pickle=True)
    assert td["z"] == [1 + 2j, 3 + 4j] and td["x"].tolist() == [0.0, 1.0]
    assert len(list((tmp_path / "s").glob("*.pkl"))) == 1  # the replaced pickle file is gone


def test_empty_store_leaf_gets_a_file(tmp_path):
    TensorDict({"x": torch.zeros(0, 2)}, batch_size=[0]).memmap(tmp_path / "s")
    assert not list((tmp_path / "s").glob("*.memmap"))
    append_memmap(tmp_path / "s", TensorDict({"x": torch.ones(3, 2)}, batch_size=[3]))
    assert TensorDict.load_memmap(tmp_path / "s")["x"].sum() == 6


def test_mismatched_rows_change_nothing(tmp_path):
    _rows(0, 2).memmap(tmp_path / "s")
    before = sorted((p.name, p.stat().st_size) for p in (tmp_path / "s").rglob("*"))
    bad = _rows(2, 1)
    with pytest.raises(KeyError, match="missing"):
        append_memmap(tmp_path / "s", bad.exclude("obs"))
    with pytest.raises(RuntimeError, match="float32"):
        append_memmap(tmp_path / "s", bad.set("obs", torch.zeros(1, 3, dtype=torch.float64)))
    with pytest.raises(RuntimeError, match="shape"):
        append_memmap(tmp_path / "s", _rows(2, 1).set("obs", torch.zeros(1, 4)))
    with pytest.raises(RuntimeError, match="batch_size"):
        append_memmap(tmp_path / "s", TensorDict({}, batch_size=[]).update(_rows(2, 1).to_dict(), batch_size=[]))
    assert sorted((p.name, p.stat().st_size) for p in (tmp_path / "s").rglob("*")) == before


def test_unsupported_stores(tmp_path):
    _rows(0, 2).save(tmp_path / "a.tdz")
    with pytest.raises(RuntimeError, match="archive"):
        append_memmap(tmp_path / "a.tdz", _rows(2, 1))
    lazy_stack([_rows(0, 2), _rows(2, 2)], 0).memmap(tmp_path / "l")
    with pytest.raises(RuntimeError, match="LazyStackedTensorDict"):
        append_memmap(tmp_path / "l", lazy_stack([_rows(4, 2)], 0))
    TensorDict({"x": torch.zeros(3)}, []).memmap(tmp_path / "nb")
    with pytest.raises(RuntimeError, match="no batch dimension"):
        append_memmap(tmp_path / "nb", TensorDict({"x": torch.zeros(3)}, []))


def test_an_interrupted_append_is_refused_then_rolled_back(tmp_path):
    """A killed append leaves its journal; the loader refuses the store, the next append rolls back."""
    _rows(0, 2).memmap(tmp_path / "s")
    store = tmp_path / "s"
    # reproduce what a process killed after growing the files leaves: the journal, grown files
    sizes = {str(p.relative_to(store)): p.stat().st_size for p in store.rglob("*.memmap")}
    metas = [(str(p.parent.relative_to(store)), json.loads(p.read_text())) for p in store.rglob("meta.json")]
    (store / ".td-append.json").write_text(json.dumps({"files": sizes, "created": [], "metas": metas}))
    for rel in sizes:
        with open(store / rel, "ab") as f:
            f.write(b"\x01" * 64)
    with pytest.raises(RuntimeError, match="append"):
        TensorDict.load_memmap(store)
    append_memmap(store, None)  # repairs only
    assert {str(p.relative_to(store)): p.stat().st_size for p in store.rglob("*.memmap")} == sizes
    assert TensorDict.load_memmap(store)["nested", "idx"].tolist() == [0, 1]
    append_memmap(store, _rows(2, 1))
    assert TensorDict.load_memmap(store)["nested", "idx"].tolist() == [0, 1, 2]


def test_a_journal_naming_paths_outside_the_store_is_refused(tmp_path):
    _rows(0, 2).memmap(tmp_path / "s")
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"x" * 100)
    (tmp_path / "s" / ".td-append.json").write_text(json.dumps({"files": {"../victim.bin": 1}}))
    with pytest.raises(RuntimeError, match="outside the store"):
        append_memmap(tmp_path / "s", None)
    assert victim.stat().st_size == 100


def test_append_a_tensorclass(tmp_path):
    tc = pytest.importorskip("tensordict.tensorclass")

    @tc.tensorclass
    class Rows:
        x: torch.Tensor
        name: str

    Rows(x=torch.zeros(2, 3), name="a", batch_size=[2]).memmap(tmp_path / "s")
    append_memmap(tmp_path / "s", Rows(x=torch.ones(1, 3), name="a", batch_size=[1]))
    out = Rows.load_memmap(tmp_path / "s")
    assert out.batch_size == torch.Size([3]) and out.x.sum() == 3 and out.name == "a"
    assert os.path.isdir(tmp_path / "s")
