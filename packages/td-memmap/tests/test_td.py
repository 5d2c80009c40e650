"""TensorDict on disk: memmap / memmap_ / memmap_like / load_memmap and friends."""

import os
import sys
from concurrent.futures import Future

import pytest
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.memmap import MemoryMappedTensor, register_memmap_type
from tensordict.memmap._store import wait_cleanup

sys.path.insert(0, os.path.dirname(__file__))
from _memmap_helpers import allocated_bytes, rss_kib, tree_files  # noqa: E402


def _td():
    return TensorDict(
        {
            "obs": torch.arange(12.0).view(3, 4),
            "done": torch.tensor([True, False, True]),
            "nested": {"x": torch.randn(3, 2, 5), "deeper": {"y": torch.arange(3)}},
            "text": "hello",
        },
        batch_size=[3],
    )


def _assert_same(a, b):
    assert a.batch_size == b.batch_size
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, torch.Tensor):
            assert torch.equal(va, vb), key
        else:
            assert va == vb, key


def test_memmap_roundtrip_layout_and_lock(tmp_path):
    td = _td()
    prefix = tmp_path / "store"
    mm = td.memmap(prefix)
    assert mm is not td and mm.is_locked and mm.is_memmap() and not td.is_memmap()
    assert mm.saved_path == str(prefix) and mm["nested"].saved_path == str(prefix / "nested")
    for key in mm.keys(True, True):
        if key != "text":
            assert isinstance(mm.get(key), MemoryMappedTensor), key
    _assert_same(td, mm)
    # the folder tree mirrors the key tree
    assert tree_files(prefix) == sorted([
        "done.memmap", "meta.json", "nested", "obs.memmap",
        os.path.join("nested", "deeper"), os.path.join("nested", "meta.json"), os.path.join("nested", "x.memmap"),
        os.path.join("nested", "deeper", "meta.json"), os.path.join("nested", "deeper", "y.memmap"),
    ])
    loaded = TensorDict.load_memmap(prefix)
    _assert_same(td, loaded)
    assert loaded.is_memmap() and loaded.is_locked
    assert isinstance(loaded["nested", "deeper", "y"], MemoryMappedTensor)
    # a sub-folder loads on its own
    sub = TensorDict.load_memmap(prefix / "nested")
    assert torch.equal(sub["x"], td["nested", "x"]) and sub.batch_size == (3,)


def test_locked_but_writable_in_place(tmp_path):
    mm = _td().memmap(tmp_path / "s")
    with pytest.raises(RuntimeError):
        mm["new"] = torch.zeros(3)
    mm[1] = TensorDict({"obs": torch.full((4,), -1.0), "done": torch.tensor(False)}, [])
    mm.set_("done", torch.tensor([False, False, False]))
    mm["nested", "x"][0] = 7.0
    again = TensorDict.load_memmap(tmp_path / "s")
    assert again["obs"][1].tolist() == [-1.0] * 4
    assert not again["done"].any()
    assert (again["nested", "x"][0] == 7.0).all()


def test_memmap_inplace_and_prefix_reuse(tmp_path):
    td = _td()
    out = td.memmap_(tmp_path / "s")
    assert out is td and td.is_locked and td.is_memmap()
    ptr = td["obs"].data_ptr()
    td.memmap_()  # re-saves to saved_path without copying the file
    assert td["obs"].data_ptr() == ptr
    td["obs"][0, 0] = 99.0
    assert TensorDict.load_memmap(tmp_path / "s")["obs"][0, 0] == 99.0


def test_anonymous_memmap_without_prefix():
    td = _td()
    mm = td.memmap()
    assert mm.saved_path is None and mm.is_memmap() and mm.is_locked
    assert mm["obs"].filename is None and mm["obs"].is_shared()
    _assert_same(td, mm)
    like = td.memmap_like()
    assert like["obs"].sum() == 0 and like["obs"].shape == (3, 4)


def test_memmap_like_writes_no_data(tmp_path):
    td = TensorDict(
        {"images": torch.zeros((64, 64, 3), dtype=torch.uint8), "labels": torch.zeros((), dtype=torch.int32)}, []
    ).expand(100_000)
    before = rss_kib()
    buf = td.memmap_like(tmp_path / "ds")
    assert buf.shape == (100_000,) and buf.is_locked and buf.is_memmap()
    images = tmp_path / "ds" / "images.memmap"
    assert os.path.getsize(images) == 100_000 * 64 * 64 * 3
    assert allocated_bytes(images) < (1 << 20)  # 1.2 GB sparse file: no block written
    assert rss_kib() - before < 32 * 1024
    buf[torch.tensor([1, 50_000])] = TensorDict(
        {"images": torch.ones(2, 64, 64, 3, dtype=torch.uint8), "labels": torch.tensor([3, 4], dtype=torch.int32)}, [2]
    )
    got = TensorDict.load_memmap(tmp_path / "ds")[torch.tensor([0, 1, 50_000])]
    assert got["labels"].tolist() == [0, 3, 4] and int(got["images"][1].sum()) == 64 * 64 * 3


def test_expanded_and_non_contiguous_leaves(tmp_path):
    td = TensorDict({"e": torch.arange(4.0).expand(5, 4), "t": torch.randn(4, 5).t()}, [5])
    mm = td.memmap(tmp_path / "s")
    _assert_same(td, mm)
    assert mm["e"].is_contiguous()


def test_names_device_and_non_tensor_roundtrip(tmp_path, device):
    td = TensorDict(
        {"a": torch.randn(2, 3), "s": "x", "cfg": NonTensorData({"lr": 0.1, "layers": [1, 2]}), "none": None},
        batch_size=[2, 3], names=["env", "time"], device=device,
    )
    td["stack"] = NonTensorStack(*[NonTensorStack("p", "q", "r") for _ in range(2)])
    mm = td.memmap(tmp_path / "s")
    assert mm.device == torch.device("cpu") and mm.names == ["env", "time"]
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert loaded.names == ["env", "time"]
    assert loaded["s"] == "x" and loaded["cfg"] == {"lr": 0.1, "layers": [1, 2]} and loaded["none"] is None
    assert loaded["stack"] == [["p", "q", "r"], ["p", "q", "r"]]
    on_device = TensorDict.load_memmap(tmp_path / "s", device=device)
    assert on_device["a"].device.type == device.type and torch.equal(on_device["a"].cpu(), td["a"].cpu())


def test_load_meta_device_reads_no_data(tmp_path):
    _td().memmap(tmp_path / "s")
    os.remove(tmp_path / "s" / "obs.memmap")  # not even opened
    meta = TensorDict.load_memmap(tmp_path / "s", device="meta")
    assert meta["obs"].device.type == "meta" and meta["obs"].shape == (3, 4)
    assert meta["nested", "x"].dtype == torch.float32


def test_load_under_fake_tensor_mode(tmp_path):
    from torch._subclasses import FakeTensor, FakeTensorMode

    _td().memmap(tmp_path / "s")
    with FakeTensorMode():
        fake = TensorDict.load_memmap(tmp_path / "s")
    assert isinstance(fake["obs"], FakeTensor) and fake["obs"].shape == (3, 4)
    assert isinstance(fake["nested", "deeper", "y"], FakeTensor)


def test_return_early_future_and_threads(tmp_path):
    td = TensorDict({f"k{i}": torch.randn(64, 1024) for i in range(6)}, [64])
    fut = td.memmap(tmp_path / "s", num_threads=3, return_early=True)
    assert isinstance(fut, Future)
    mm = fut.result(timeout=60)
    _assert_same(td, mm)
    mm2 = td.memmap(tmp_path / "t", num_threads=4)
    _assert_same(td, mm2)


def test_copy_existing(tmp_path):
    mm = _td().memmap(tmp_path / "a")
    with pytest.raises(RuntimeError, match="copy_existing=True"):
        mm.memmap(tmp_path / "b")
    copied = mm.memmap(tmp_path / "b", copy_existing=True)
    assert copied["obs"].filename == str(tmp_path / "b" / "obs.memmap")
    _assert_same(mm, copied)
    view = mm[:2].memmap(tmp_path / "c")  # slices of a memmap are new data: copied
    assert view.batch_size == (2,)


def test_existsok_false(tmp_path):
    _td().memmap(tmp_path / "s")
    with pytest.raises(RuntimeError, match="existsok"):
        _td().memmap(tmp_path / "s", existsok=False)
    _td().memmap(tmp_path / "empty_is_fine", existsok=False)


def test_resave_keeps_foreign_files_and_drops_old_keys(tmp_path):
    prefix = tmp_path / "s"
    _td().memmap(prefix)
    (prefix / "README.txt").write_text("mine")
    TensorDict({"only": torch.zeros(3)}, [3]).memmap(prefix)
    wait_cleanup()
    assert sorted(os.listdir(prefix)) == ["README.txt", "meta.json", "only.memmap"]
    assert list(TensorDict.load_memmap(prefix).keys()) == ["only"]
    assert not [e for e in os.listdir(tmp_path) if e.startswith(".")]  # no leftovers


def test_save_load_proxies_and_load_inplace(tmp_path):
    td = _td()
    saved = td.save(tmp_path / "s")
    assert saved.is_memmap()
    td.dumps(tmp_path / "d")
    loaded = TensorDict.load(tmp_path / "s")
    _assert_same(td, loaded)
    target = TensorDict({"nested": {"old": torch.zeros(3)}, "gone": torch.zeros(3)}, [3])
    nested = target["nested"]
    out = target.load_memmap_(tmp_path / "s")
    assert out is target and "gone" not in target.keys() and target["nested"] is nested
    _assert_same(td, target)
    assert target.load_(tmp_path / "d") is target
    out2 = TensorDict.load_memmap(tmp_path / "s", out=TensorDict({}, [3]))
    _assert_same(td, out2)


def test_memmap_refresh_sees_another_writer(tmp_path):
    mm = TensorDict({"a": torch.zeros(3)}, [3]).memmap(tmp_path / "s")
    TensorDict({"a": torch.ones(3), "b": torch.arange(3)}, [3]).memmap(tmp_path / "s")
    assert mm["a"].sum() == 0  # still maps the earlier save
    mm.memmap_refresh_()
    assert mm.is_locked and mm["a"].sum() == 3 and mm["b"].tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match="saved_path"):
        TensorDict({}, []).memmap_refresh_()


def test_indexing_loaded_and_is_memmap(tmp_path):
    mm = TensorDict({"a": torch.arange(10.0)}, [10]).memmap(tmp_path / "s")
    assert mm[2:5].is_memmap()  # views of the files
    assert not mm[torch.tensor([1, 3])].is_memmap()  # a gather copies
    assert not TensorDict({"a": torch.zeros(1)}, [1]).is_memmap()


def test_lazy_stack_roundtrip(tmp_path):
    lazy = pytest.importorskip("tensordict._lazy")
    if not hasattr(lazy, "LazyStackedTensorDict"):
        pytest.skip("tensordict._lazy has no LazyStackedTensorDict yet")
    tds = [
        TensorDict({"a": torch.zeros(2, 3), "only0": torch.ones(2)}, [2]),
        TensorDict({"a": torch.ones(2, 3), "x": {"y": torch.arange(2)}}, [2]),
    ]
    stacked = lazy.LazyStackedTensorDict(*tds, stack_dim=0)
    mm = stacked.memmap(tmp_path / "s")
    assert type(mm).__name__ == "LazyStackedTensorDict" and mm.is_memmap()
    assert sorted(os.listdir(tmp_path / "s")) == ["0", "1", "meta.json"]
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert type(loaded).__name__ == "LazyStackedTensorDict" and loaded.stack_dim == 0
    assert torch.equal(loaded["a"], torch.stack([tds[0]["a"], tds[1]["a"]]))
    assert torch.equal(TensorDict.load_memmap(tmp_path / "s" / "1")["x", "y"], torch.arange(2))


def _lazy_or_skip():
    lazy = pytest.importorskip("tensordict._lazy")
    if not hasattr(lazy, "LazyStackedTensorDict"):
        pytest.skip("tensordict._lazy has no LazyStackedTensorDict yet")
    return lazy.LazyStackedTensorDict


def test_lazy_stack_nested_inplace_like_and_stack_dim(tmp_path):
    Lazy = _lazy_or_skip()
    tds = [TensorDict({"a": torch.full((2, 3), float(i)), "s": f"t{i}"}, [2]) for i in range(3)]
    stacked = Lazy(*tds, stack_dim=1)
    outer = TensorDict({"stack": stacked, "b": torch.zeros(2)}, [2])
    mm = outer.memmap(tmp_path / "s")
    assert type(mm["stack"]).__name__ == "LazyStackedTensorDict" and mm["stack"].stack_dim == 1
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert loaded["stack"].batch_size == (2, 3) and torch.equal(loaded["stack", "a"], stacked["a"])
    assert isinstance(loaded["stack"].tensordicts[2]["a"], MemoryMappedTensor)
    assert loaded["stack"].tensordicts[1]["s"] == "t1"
    like = stacked.memmap_like(tmp_path / "like")
    assert like["a"].sum() == 0 and like.batch_size == stacked.batch_size
    same = stacked.memmap_(tmp_path / "inplace")
    assert same is stacked and stacked.is_locked and stacked.is_memmap()
    assert isinstance(tds[0]["a"], MemoryMappedTensor)  # the stacked TensorDicts were memory-mapped in place
    assert stacked.saved_path == str(tmp_path / "inplace")


class _Pair:
    """A tensor collection that is not a TensorDict, registered for memmap."""

    def __init__(self, td, label):
        self.td, self.label = td, label

    @property
    def batch_size(self):
        return self.td.batch_size


register_memmap_type(
    "tests.Pair",
    lambda p: (p.td, {"label": p.label}),
    lambda td, extra: _Pair(td, extra["label"]),
    cls=_Pair,
)


def test_registered_type_roundtrip(tmp_path):
    from tensordict.memmap import load_memmap, memmap

    pair = _Pair(TensorDict({"w": torch.randn(2, 2)}, [2]), "left")
    out = memmap(pair, tmp_path / "p")
    assert isinstance(out, _Pair) and out.label == "left" and isinstance(out.td["w"], MemoryMappedTensor)
    back = load_memmap(tmp_path / "p")
    assert isinstance(back, _Pair) and back.label == "left" and torch.equal(back.td["w"], pair.td["w"])


def test_readme_parameter_checkpoint_example(tmp_path):
    # the seed README: save a model's parameters, load them back whole or one submodule at a time
    from torch import nn

    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 3))
    params = TensorDict.from_module(model)
    params.memmap(tmp_path / "ckpt", num_threads=16)
    loaded = TensorDict.load_memmap(tmp_path / "ckpt", num_threads=16)
    assert torch.equal(loaded["0", "weight"], model[0].weight.detach())
    fresh = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 3))
    TensorDict.load_memmap(tmp_path / "ckpt" / "0", num_threads=16).to_module(fresh[0])
    assert torch.equal(fresh[0].weight, model[0].weight.detach())
