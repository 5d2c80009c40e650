"""Saving tensorclasses with td-memmap (skipped when td-memmap is not installed)."""


import pytest
import torch

pytest.importorskip("tensordict.memmap")

from tensordict import TensorClass, TensorDict  # noqa: E402
from tensordict.memmap import MemoryMappedTensor  # noqa: E402


class Inner(TensorClass):
    x: torch.Tensor


class Frame(TensorClass):
    pixels: torch.Tensor
    inner: Inner | None = None
    source: str = "cam0"


def frame(n=4):
    return Frame(
        pixels=torch.arange(n * 6, dtype=torch.uint8).view(n, 6),
        inner=Inner(x=torch.randn(n, 2), batch_size=[n]),
        source="cam1",
        batch_size=[n],
    )


def check(a, b):
    assert type(a) is type(b) and type(a.inner) is type(b.inner)
    assert torch.equal(a.pixels, b.pixels) and torch.equal(a.inner.x, b.inner.x)
    assert a.source == b.source and a.batch_size == b.batch_size


def test_memmap_and_load_back_the_same_class(tmp_path):
    f = frame()
    mm = f.memmap(tmp_path / "store")
    check(mm, f)
    assert isinstance(mm.pixels, MemoryMappedTensor) and isinstance(mm.inner.x, MemoryMappedTensor)
    assert mm.is_locked and mm.is_memmap()
    loaded = Frame.load_memmap(tmp_path / "store")
    check(loaded, f)
    assert isinstance(loaded.pixels, MemoryMappedTensor)
    generic = TensorDict.load_memmap(tmp_path / "store")
    assert type(generic) is Frame and generic.source == "cam1"
    assert type(Frame.load(tmp_path / "store")) is Frame


def test_memmap_in_place_and_refresh(tmp_path):
    f = frame()
    assert f.memmap_(tmp_path / "inplace") is f
    assert isinstance(f.pixels, MemoryMappedTensor) and isinstance(f.inner.x, MemoryMappedTensor)
    assert str(f.saved_path) == str((tmp_path / "inplace").resolve())
    other = frame()
    other.pixels.fill_(9)
    other.memmap(tmp_path / "inplace")  # another writer saves to the same folder
    f.memmap_refresh_()
    assert (f.pixels == 9).all()


def test_memmap_like_and_in_place_load(tmp_path):
    f = frame().expand(3, 4).clone()
    buf = f.memmap_like(tmp_path / "buf")
    assert type(buf) is Frame and (buf.pixels == 0).all() and buf.batch_size == (3, 4)
    buf[1] = f[1]
    assert torch.equal(buf.pixels[1], f.pixels[1])
    f.save(tmp_path / "saved")
    target = frame().expand(3, 4).clone()
    target.pixels.zero_()
    assert target.load_memmap_(tmp_path / "saved") is target
    assert torch.equal(target.pixels, f.pixels)
    target2 = frame().expand(3, 4).clone()
    target2.load_(tmp_path / "saved")
    assert torch.equal(target2.inner.x, f.inner.x)


def test_tensorclass_inside_a_tensordict_saves_and_loads(tmp_path):
    td = TensorDict({"frame": frame(), "reward": torch.zeros(4)}, [4])
    td.memmap(tmp_path / "td")
    loaded = TensorDict.load_memmap(tmp_path / "td")
    assert type(loaded["frame"]) is Frame
    check(loaded["frame"], td["frame"])
    td.memmap_(tmp_path / "td2")
    assert isinstance(td["frame"].pixels, MemoryMappedTensor)
    assert isinstance(td["frame"].inner.x, MemoryMappedTensor)


def test_loading_another_class_is_refused(tmp_path):
    frame().memmap(tmp_path / "f")

    class Other(TensorClass):
        y: torch.Tensor

    with pytest.raises((TypeError, KeyError)):
        Other.load_memmap(tmp_path / "f")


def test_unregistered_class_name_in_store_is_not_resolved(tmp_path):
    import json

    frame().memmap(tmp_path / "f")
    meta_path = tmp_path / "f" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["registered"]["extra"]["class"] = "os.system"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RuntimeError, match="os.system"):
        TensorDict.load_memmap(tmp_path / "f")
