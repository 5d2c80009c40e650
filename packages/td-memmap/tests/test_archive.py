"""One-file archives, load modes, sub-paths, locked loads, fsync, and adding leaves
to a published store (make_memmap*)."""

from __future__ import annotations

import os
import warnings
import zipfile

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorData,
    TensorDict,
    is_memmap_archive,
    lazy_stack,
    pack_memmap,
    unpack_memmap,
)
from tensordict.memmap import refresh_archive_checksums
from tensordict.memmap._archive import ALIGN


def _td():
    return TensorDict({"a": torch.arange(12.0).view(3, 4), "b": {"c": torch.arange(3, dtype=torch.int16),
                                                                   "d": torch.ones(3, 2, dtype=torch.float64)}}, [3])


def test_save_to_tdz_writes_one_aligned_file(tmp_path):
    td = _td()
    loaded = td.save(tmp_path / "x.tdz")
    assert sorted(os.listdir(tmp_path)) == ["x.tdz"]
    assert is_memmap_archive(tmp_path / "x.tdz")
    assert (loaded == td).all() and loaded.is_locked
    # every leaf is a view of one map of the archive: no copy
    assert len({v.untyped_storage().data_ptr() for v in loaded.values(True, True)}) == 1
    with zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        for info in zf.infolist():
            with open(tmp_path / "x.tdz", "rb") as f:
                f.seek(info.header_offset + 26)
                n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
            assert (info.header_offset + 30 + n + m) % ALIGN == 0, info.filename


def test_archive_loads_copy_on_write_by_default(tmp_path):
    _td().save(tmp_path / "x.tdz")
    before = (tmp_path / "x.tdz").read_bytes()
    loaded = TensorDict.load_memmap(tmp_path / "x.tdz")
    loaded["a"] += 1
    assert loaded["a"][0, 0] == 1
    assert (tmp_path / "x.tdz").read_bytes() == before


def test_archive_mode_r_plus_writes_through(tmp_path):
    td = _td()
    td.save(tmp_path / "x.tdz")
    TensorDict.load_memmap(tmp_path / "x.tdz", mode="r+")["a"].add_(1)
    assert (TensorDict.load_memmap(tmp_path / "x.tdz")["a"] == td["a"] + 1).all()
    with pytest.raises(zipfile.BadZipFile), zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        zf.read("a.memmap")
    refresh_archive_checksums(tmp_path / "x.tdz")
    with zipfile.ZipFile(tmp_path / "x.tdz") as zf:
        assert zf.testzip() is None


@pytest.mark.parametrize("compression", ["deflate", "lzma", "bzip2"])
def test_compressed_archive(tmp_path, compression):
    td = TensorDict({"a": torch.zeros(1000, dtype=torch.uint8)}, [])
    td.save(tmp_path / "s.tdz")
    td.save(tmp_path / "c.tdz", compression=compression)
    assert (tmp_path / "c.tdz").stat().st_size < (tmp_path / "s.tdz").stat().st_size
    assert (TensorDict.load_memmap(tmp_path / "c.tdz") == td).all()
    with pytest.raises(RuntimeError, match="is compressed"):
        TensorDict.load_memmap(tmp_path / "c.tdz", mode="r+")


def test_compression_needs_an_archive(tmp_path):
    with pytest.raises(ValueError, match="compression is only supported"):
        _td().save(tmp_path / "plain", compression="deflate")


def test_archive_flag_for_any_name_and_existsok(tmp_path):
    td = _td()
    td.save(tmp_path / "weights.bin", archive=True)
    assert is_memmap_archive(tmp_path / "weights.bin")
    with pytest.raises(RuntimeError, match="already exists"):
        td.memmap(tmp_path / "weights.bin", archive=True, existsok=False)


def test_pack_unpack_and_foreign_zip(tmp_path):
    td = _td()
    td.memmap(tmp_path / "plain")
    archive = pack_memmap(tmp_path / "plain", tmp_path / "p.tdz")
    assert (TensorDict.load_memmap(archive) == td).all()
    unpack_memmap(archive, tmp_path / "out")
    assert (TensorDict.load_memmap(tmp_path / "out") == td).all()
    with zipfile.ZipFile(tmp_path / "f.zip", "w") as zf:  # another tool's zip: unaligned members are copied
        for path in sorted((tmp_path / "plain").rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(tmp_path / "plain").as_posix())
    assert (TensorDict.load_memmap(tmp_path / "f.zip") == td).all()


def test_bad_archives(tmp_path):
    (tmp_path / "bad.tdz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not a memory-mapped tensordict"):
        TensorDict.load_memmap(tmp_path / "bad.tdz")
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as zf:
        zf.writestr("meta.json", "{}")
        zf.writestr("../escape.txt", "x")
    with pytest.raises(RuntimeError, match="relative path"):
        unpack_memmap(tmp_path / "evil.zip", tmp_path / "dest")
    assert not (tmp_path / "escape.txt").exists()


def test_archive_pickled_values_need_allow_pickle(tmp_path):
    td = TensorDict({"v": NonTensorData((1, "x"))}, [])
    td.save(tmp_path / "v.tdz")
    with pytest.raises(RuntimeError, match="allow_pickle=True"):
        TensorDict.load_memmap(tmp_path / "v.tdz")
    assert TensorDict.load_memmap(tmp_path / "v.tdz", allow_pickle=True)["v"] == (1, "x")


@pytest.mark.parametrize("archive", [False, True])
def test_subpath(tmp_path, archive):
    td = lazy_stack([TensorDict({"x": torch.full((2,), float(i)), "sub": {"y": torch.ones(2) * i}}, [2])
                     for i in range(3)])
    prefix = tmp_path / ("s.tdz" if archive else "s")
    td.save(prefix)
    assert isinstance(TensorDict.load_memmap(prefix), LazyStackedTensorDict)
    assert TensorDict.load_memmap(prefix, subpath="1/sub")["y"].tolist() == [1.0, 1.0]
    assert TensorDict.load_memmap(prefix, subpath=("2", ("sub",)))["y"].tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="No tensordict found under subpath"):
        TensorDict.load_memmap(prefix, subpath="does/not/exist")


def test_folder_modes(tmp_path):
    _td().memmap(tmp_path / "s")
    cow = TensorDict.load_memmap(tmp_path / "s", mode="c")
    cow["a"].add_(100)
    assert TensorDict.load_memmap(tmp_path / "s")["a"][0, 0] == 0
    shared = TensorDict.load_memmap(tmp_path / "s")
    shared["a"].add_(1)
    assert TensorDict.load_memmap(tmp_path / "s", mode="r")["a"][0, 0] == 1
    with pytest.raises(ValueError, match="mode"):
        TensorDict.load_memmap(tmp_path / "s", mode="w")


def test_loads_are_locked_but_writable_in_place(tmp_path):
    _td().memmap(tmp_path / "s")
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert loaded.is_locked and loaded["b"].is_locked
    loaded["a"] += 1  # the same tensor, changed in place
    loaded["a"][0] = 5
    with pytest.raises(RuntimeError, match="locked"):
        loaded["new"] = torch.zeros(3)
    loaded.unlock_()["new"] = torch.zeros(3)


def test_fsync_save(tmp_path):
    td = _td()
    out = td.memmap(tmp_path / "s", fsync=True)
    assert (out == td).all()
    td.save(tmp_path / "s.tdz", fsync=True)
    assert (TensorDict.load_memmap(tmp_path / "s.tdz") == td).all()


def test_robust_key_is_accepted(tmp_path):
    td = TensorDict({"robust/key": torch.zeros(2), "..": torch.ones(2)}, [2])
    td.memmap(tmp_path / "s", robust_key=True)
    loaded = TensorDict.load_memmap(tmp_path / "s", robust_key=True)
    assert set(loaded.keys()) == {"robust/key", ".."}


# --------------------------------------------------------------------------- make_memmap*
def test_make_memmap_grows_the_store(tmp_path):
    td = TensorDict({}, [3]).memmap_(tmp_path)
    td.make_memmap("a", shape=[3, 4], dtype=torch.float32).fill_(1)
    td.make_memmap(("b", "c"), shape=[3, 2], dtype=torch.int64).fill_(2)
    assert td.is_locked and td["b"].is_locked and td.is_memmap()
    loaded = TensorDict.load_memmap(tmp_path)
    assert (loaded["a"] == 1).all() and (loaded["b", "c"] == 2).all()
    with pytest.raises(RuntimeError, match="already exists within the target tensordict"):
        td.make_memmap(("b", "c"), shape=[3, 2])
    with pytest.raises(RuntimeError, match="batch size"):
        td.make_memmap("bad", shape=[4])


def test_make_memmap_needs_a_folder():
    with pytest.raises(RuntimeError, match="memmap_"):
        TensorDict({}, []).make_memmap("a", shape=[2])


def test_make_memmap_from_storage_and_tensor(tmp_path):
    base = TensorDict({"a": torch.arange(6.0).view(2, 3)}, []).memmap_(tmp_path / "base")
    td = TensorDict({}, []).memmap_(tmp_path / "base")  # the same folder: the storage's own file name
    td.make_memmap_from_storage("a", base["a"].untyped_storage(), shape=[2, 3], dtype=torch.float32)
    assert td["a"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    other = MemoryMappedTensor.ones(2, filename=tmp_path / "other.memmap")
    with pytest.raises(RuntimeError, match="Providing a storage with an associated filename"):
        td.make_memmap_from_storage("b", other.untyped_storage(), shape=[2], dtype=torch.float32)
    copy = td.make_memmap_from_tensor("c", other)
    assert copy.untyped_storage().data_ptr() != other.untyped_storage().data_ptr()
    assert (TensorDict.load_memmap(tmp_path / "base")["c"] == 1).all()


def test_make_memmap_nested_tensor(tmp_path):
    td = TensorDict({}, []).memmap_(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td.make_memmap_from_tensor(("e", "f"), torch.nested.nested_tensor([torch.zeros(1, 2), torch.ones(1, 3)]))
        loaded = TensorDict.load_memmap(tmp_path)
    assert loaded["e", "f"].is_nested
    assert loaded["e", "f"][1].tolist() == [[1.0, 1.0, 1.0]]


def test_memmap_like_to_an_archive_writes_through(tmp_path):
    import zipfile

    from tensordict.memmap import is_memmap_archive, refresh_archive_checksums

    td = TensorDict({"a": torch.randn(3, 4), "b": {"c": torch.randn(3, 2)}}, batch_size=[3])
    path = tmp_path / "buf.tdz"
    buf = td.memmap_like(path)
    assert is_memmap_archive(path) and (buf["a"] == 0).all() and buf.batch_size == td.batch_size
    buf["a"].copy_(td["a"])
    buf["b", "c"].copy_(td["b", "c"])
    assert (TensorDict.load_memmap(path) == td).all()
    refresh_archive_checksums(path)
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
    with pytest.raises(RuntimeError, match="already exists"):
        td.memmap_like(path, existsok=False)
    with pytest.raises(NotImplementedError, match="return_early"):
        td.memmap_like(path, num_threads=2, return_early=True)
    import tensordict

    assert tensordict.refresh_archive_checksums is refresh_archive_checksums
