"""Links and storage that point outside the file, damaged link tables, and atomic writes."""

from __future__ import annotations

import os
import resource
import signal

import pytest
import torch

h5py = pytest.importorskip("h5py")
import numpy as np  # noqa: E402

from tensordict import TensorDict  # noqa: E402
from tensordict.persistent import PersistentTensorDict  # noqa: E402


@pytest.fixture
def linked(tmp_path):
    """A file with data, an external link, external storage, a virtual dataset and soft links."""
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.full((4,), 7.0, dtype=np.float32)
        f.create_group("g")["y"] = np.arange(4)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.full((4,), 9.0, dtype=np.float32).tobytes())
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(4, dtype=np.float32)
        f.create_group("g")["b"] = np.arange(4)
        f["ext"] = h5py.ExternalLink(str(other), "/x")
        f["extg"] = h5py.ExternalLink(str(other), "/g")
        f.create_dataset(
            "raw", shape=(4,), dtype=np.float32, external=[(str(secret), 0, h5py.h5f.UNLIMITED)]
        )
        layout = h5py.VirtualLayout(shape=(4,), dtype=np.float32)
        layout[:] = h5py.VirtualSource(str(other), "x", shape=(4,))
        f.create_virtual_dataset("vds", layout)
        f["soft"] = h5py.SoftLink("/a")  # inside the file: followed
        f["soft_out"] = h5py.SoftLink("/ext")  # to an external link: refused
        f["dangling"] = h5py.SoftLink("/nowhere")
        f["dtype"] = np.dtype("f4")  # a named datatype: not data
    return path


OUTSIDE = ("ext", "extg", "raw", "vds", "soft_out")


def test_entries_outside_the_file_are_not_listed_nor_read(linked):
    with PersistentTensorDict.from_h5(linked) as td:
        assert sorted(td.keys()) == ["a", "g", "soft"]
        assert torch.equal(td["soft"], td["a"])
        dense = td.to_tensordict()
        assert sorted(dense.keys()) == ["a", "g", "soft"]
        for key in OUTSIDE:
            assert key not in td
            with pytest.raises(KeyError, match=rf"key '{key}' of HDF5 file .*outside the file"):
                td[key]
        with pytest.raises(KeyError, match="external link"):
            td["extg", "y"]
        assert "dangling" not in td and "dtype" not in td


def test_reason_is_named(linked):
    with PersistentTensorDict.from_h5(linked) as td:
        with pytest.raises(KeyError, match="external file"):
            td["raw"]
        with pytest.raises(KeyError, match="virtual dataset"):
            td["vds"]
        with pytest.raises(KeyError, match="soft link to '/ext'"):
            td["soft_out"]


def test_group_path_through_an_external_link_is_refused(linked):
    with pytest.raises(KeyError, match="external link"):
        PersistentTensorDict(filename=linked, group="extg")


def test_writes_never_go_through_a_link_out_of_the_file(linked, tmp_path):
    other = tmp_path / "other.h5"
    before = other.read_bytes()
    with PersistentTensorDict.from_h5(linked, mode="r+") as td:
        with pytest.raises(KeyError, match="external link"):
            td["extg", "new"] = torch.zeros(4)
        td["ext"] = torch.ones(4)  # replaces the link itself
        assert torch.equal(td["ext"], torch.ones(4))
        del td["vds"]  # removes the link only
        assert "vds" not in td.file
        td.set_("ext", torch.full((4,), 2.0))
    assert other.read_bytes() == before


def test_raw_h5py_changes_are_seen(linked):
    with PersistentTensorDict.from_h5(linked, mode="r+") as td:
        assert "late" not in td.keys()
        td.file["late"] = h5py.ExternalLink("nowhere.h5", "/x")
        td.file["late_ok"] = np.zeros(4)
        assert sorted(td.keys()) == ["a", "g", "late_ok", "soft"]


def test_damaged_file_error_says_so(tmp_path):
    path = tmp_path / "d.h5"
    TensorDict(a=torch.zeros(100, 10), batch_size=[100]).to_h5(path).close()
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(OSError, match="damaged or incomplete"):
        PersistentTensorDict.from_h5(path)


def test_to_h5_writes_atomically_and_cleans_up(tmp_path):
    path = tmp_path / "x.h5"
    td = TensorDict(a=torch.arange(10), batch_size=[10])
    td.to_h5(path).close()
    td.to_h5(path).close()  # over an earlier file
    assert sorted(os.listdir(tmp_path)) == ["x.h5"]
    with PersistentTensorDict.from_h5(path) as f:
        assert torch.equal(f["a"], td["a"])


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_file_size_limit_mid_write_raises_oserror(tmp_path):
    """A limit above the raw data size but below the file size: a write fails mid-way."""
    path = tmp_path / "x.h5"
    TensorDict(a=torch.zeros(10), batch_size=[10]).to_h5(path).close()
    td = TensorDict(a=torch.ones(4500), b={"c": torch.ones(10)}, s="text", batch_size=[])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        out = "?"
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
            td.to_h5(path).close()
            out = "written"
        except OSError as err:
            out = f"raised {err.errno} {err}"
        except BaseException as err:
            out = f"other {type(err).__name__}: {err}"
        finally:
            os.write(w, out.encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the writer crashed (status {status})"
    assert out.startswith("raised 27 ") and "x.h5" in out, out
    assert sorted(os.listdir(tmp_path)) == ["x.h5"]
    with PersistentTensorDict.from_h5(path) as f:
        assert torch.equal(f["a"], torch.zeros(10))
