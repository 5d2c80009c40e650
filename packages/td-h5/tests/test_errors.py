"""Bad input gives clear errors, and a failed write never corrupts the file."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict


def test_missing_file(tmp_path):
    path = tmp_path / "nope.h5"
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        PersistentTensorDict.from_h5(path)
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        PersistentTensorDict(filename=path, mode="r+")
    with pytest.raises(FileNotFoundError, match="folder"):
        PersistentTensorDict(filename=tmp_path / "missing_dir" / "x.h5", mode="w")


def test_not_an_hdf5_file(tmp_path):
    path = tmp_path / "text.h5"
    path.write_text("this is not HDF5\n" * 10)
    with pytest.raises(ValueError, match="not an HDF5 file"):
        PersistentTensorDict.from_h5(path)


def test_missing_group(h5file):
    with pytest.raises(KeyError, match="does/not/exist"):
        PersistentTensorDict(filename=h5file, group="does/not/exist")
    with pytest.raises(KeyError, match="dataset, not a group"):
        PersistentTensorDict(filename=h5file, group="obs")


def test_bad_arguments(h5file):
    with pytest.raises(ValueError, match="mode"):
        PersistentTensorDict(filename=h5file, mode="rw")
    with pytest.raises(NotImplementedError, match="backend"):
        PersistentTensorDict(filename=h5file, backend="nope")
    with pytest.raises(ValueError, match="filename"):
        PersistentTensorDict()
    with pytest.raises(ValueError, match="exclusive"):
        PersistentTensorDict(filename=h5file, batch_size=[10], auto_batch_size=True)


def test_batch_size_mismatch(h5file):
    with pytest.raises(RuntimeError, match=r"key '\w+'.*batch_size=\(7,\), got shape \(10"):
        PersistentTensorDict.from_h5(h5file, batch_size=[7])
    path = h5file.parent / "nested_mismatch.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.zeros((10, 3))
        f.create_group("g")["b"] = np.zeros((10, 4))
    with pytest.raises(RuntimeError, match=r"\('g', 'b'\).*batch_size=\(10, 3\), got shape \(10, 4\)"):
        PersistentTensorDict.from_h5(path, batch_size=[10, 3])


def test_read_only_writes_name_the_key(h5file):
    with PersistentTensorDict.from_h5(h5file) as p:
        for action in (
            lambda: p.set("obs", torch.zeros(10, 3)),
            lambda: p.__setitem__("fresh", torch.zeros(10)),
            lambda: p.set_("reward", torch.zeros(10, dtype=torch.float64)),
            lambda: p.__delitem__("obs"),
            lambda: p.__setitem__(("nested", "idx"), torch.zeros(10)),
        ):
            with pytest.raises(RuntimeError, match=r"read-only.*mode='r'"):
                action()
        with pytest.raises(RuntimeError, match="'obs'"):
            p["obs"] = torch.zeros(10, 3)
        with pytest.raises(RuntimeError, match="read-only"):
            p[1:3] = TensorDict(obs=torch.zeros(2, 3), batch_size=[2])
        with pytest.raises(RuntimeError, match="read-only"):
            p.zero_()
        with pytest.raises(RuntimeError, match="read-only"):
            p.update({"a": torch.zeros(10)})
    with PersistentTensorDict.from_h5(h5file) as p:
        assert p["obs"].sum() > 0


def test_closed_file_with_live_view(h5file):
    p = PersistentTensorDict.from_h5(h5file)
    view = p[2:4]
    nested = p["nested"]
    p.close()
    p.close()  # idempotent
    assert p.is_closed
    for fn in (lambda: view["obs"], lambda: nested["idx"], lambda: list(view.keys()), lambda: view[0], lambda: repr(nested)):
        with pytest.raises(RuntimeError, match="closed"):
            fn()
    with PersistentTensorDict.from_h5(h5file) as p2:
        v2 = p2[1:]
    with pytest.raises(RuntimeError, match="closed"):
        v2.to_tensordict()


def _snapshot(path):
    with PersistentTensorDict.from_h5(path) as p:
        return p.to_tensordict()


def _assert_intact(path, before):
    with h5py.File(path, "r") as f:  # still a valid HDF5 file
        assert "obs" in f
    after = _snapshot(path)
    assert set(after.keys(True, True)) == set(before.keys(True, True))
    assert (after.exclude("label") == before.exclude("label")).all()
    assert after["label"] == before["label"]


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_failed_writes_leave_file_intact(h5file):
    before = _snapshot(h5file)
    with PersistentTensorDict.from_h5(h5file, mode="r+") as p:
        with pytest.raises(RuntimeError, match="batch dimension mismatch"):
            p["obs"] = torch.zeros(9, 3)
        with pytest.raises(TypeError, match="'label'"):
            p["label"] = object()
        with pytest.raises(TypeError, match="'bad'"):
            p["nested"] = TensorDict(idx=torch.zeros(10), bad=object(), batch_size=[10])
        with pytest.raises(RuntimeError, match="does not broadcast"):
            p[0:2] = TensorDict(obs=torch.zeros(2, 5), reward=torch.zeros(2, dtype=torch.float64), batch_size=[2])
        with pytest.raises(RuntimeError, match="does not broadcast"):
            p.set_("obs", torch.zeros(10, 4))
        with pytest.raises(KeyError, match="missing"):
            p.update_({"reward": torch.zeros(10, dtype=torch.float64), "missing": torch.zeros(10)})
        with pytest.raises(ValueError, match="'a/b'"):
            p["a/b"] = torch.zeros(10)
        with pytest.raises(RuntimeError, match="holds a group"):
            p.set_("nested", torch.zeros(10))
        with pytest.raises(TypeError, match="dtype"):
            p.set("q", torch.zeros(10).to(torch.complex32))
        with pytest.raises(ValueError, match="'x/y'"):
            p.update({"ok": torch.zeros(10), "x/y": torch.zeros(10)})
        with pytest.raises(TypeError, match="'obj'"):
            p.update(TensorDict(ok=torch.zeros(10), obj=object(), batch_size=[10]))
        assert "ok" not in p.keys()
    _assert_intact(h5file, before)


def test_failed_to_h5_keeps_existing_file(h5file, tmp_path):
    before = _snapshot(h5file)
    bad = TensorDict(a=torch.zeros(3), b=object(), batch_size=[3])
    with pytest.raises(TypeError, match="'b'"):
        bad.to_h5(h5file)
    good = TensorDict(a=torch.zeros(3, 2), batch_size=[3])
    with pytest.raises((TypeError, ValueError)):
        good.to_h5(h5file, chunks=(1, 2, 3, 4))  # h5py rejects mid-write
    with pytest.raises(TypeError):
        good.to_h5(h5file, not_an_h5py_option=1)
    _assert_intact(h5file, before)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    fresh = tmp_path / "fresh.h5"
    with pytest.raises((TypeError, ValueError)):
        good.to_h5(fresh, chunks=(1, 2, 3, 4))
    assert not fresh.exists()  # no half-written file left behind


def test_dataset_changed_behind_our_back(ptd):
    ptd.file.create_dataset("odd", data=np.zeros(4))
    with pytest.raises(RuntimeError, match=r"'odd'.*batch_size=\(10,\).*\(4,\)"):
        ptd["odd"]
    with pytest.raises(RuntimeError, match="'odd'"):
        ptd.to_tensordict()
