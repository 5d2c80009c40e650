"""``tensordict inspect PATH``: real stores of each kind, complete and not."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

from tensordict import NonTensorStack, TensorDict
from tensordict.__main__ import main
from tensordict._inspect import human_bytes, inspect_store, render

HAS_MEMMAP = importlib.util.find_spec("tensordict.memmap") is not None
HAS_H5PY = importlib.util.find_spec("h5py") is not None
HAS_TD_H5 = HAS_H5PY and importlib.util.find_spec("tensordict.persistent") is not None
needs_memmap = pytest.mark.skipif(not HAS_MEMMAP, reason="td-memmap not installed")
needs_h5py = pytest.mark.skipif(not HAS_H5PY, reason="h5py not installed")
needs_td_h5 = pytest.mark.skipif(not HAS_TD_H5, reason="td-h5 not installed")


def _sample() -> TensorDict:
    return TensorDict(
        {
            "obs": torch.randn(4, 3),
            "nested": {"reward": torch.arange(4, dtype=torch.int64), "done": torch.zeros(4, dtype=torch.bool)},
            "name": "a run with a rather long description that the report must shorten " * 3,
        },
        batch_size=[4],
    )


def _by_key(report) -> dict:
    out = {}

    def visit(entry, prefix):
        for child in entry.children:
            key = prefix + (child.key,)
            out[key] = child
            visit(child, key)

    visit(report.root, ())
    return out


def _write_hand_store(root) -> str:
    """A td-memmap store written by hand from the documented layout (needs td-core only)."""
    path = root / "hand"
    (path / "sub").mkdir(parents=True)
    torch.arange(6, dtype=torch.float32).numpy().tofile(path / "x.memmap")
    torch.ones(2, dtype=torch.int64).numpy().tofile(path / "sub" / "y.memmap")
    meta = {
        "format": "td-memmap", "version": 1, "type": "TensorDict", "batch_size": [2], "device": None,
        "names": None,
        "entries": [
            {"key": "x", "kind": "tensor", "file": "x.memmap", "dtype": "float32", "shape": [2, 3], "nbytes": 24},
            {"key": "sub", "kind": "tensordict", "dir": "sub"},
            {"key": "label", "kind": "non_tensor", "batch_size": [2], "encoding": "json", "value": {"k": [1, 2]}},
        ],
    }
    sub_meta = {
        "format": "td-memmap", "version": 1, "type": "TensorDict", "batch_size": [2], "device": None,
        "names": None,
        "entries": [{"key": "y", "kind": "tensor", "file": "y.memmap", "dtype": "int64", "shape": [2], "nbytes": 16}],
    }
    (path / "meta.json").write_text(json.dumps(meta))
    (path / "sub" / "meta.json").write_text(json.dumps(sub_meta))
    return str(path)


# --------------------------------------------------------------------- td-memmap folders
def test_hand_written_memmap_store_needs_only_td_core(tmp_path):
    report = inspect_store(_write_hand_store(tmp_path))
    assert report.format == "td-memmap" and report.complete
    entries = _by_key(report)
    assert entries[("x",)].shape == [2, 3] and entries[("x",)].dtype == "float32" and entries[("x",)].nbytes == 24
    assert entries[("sub", "y")].dtype == "int64" and entries[("sub",)].batch_size == [2]
    assert entries[("label",)].value == "{'k': [1, 2]}"
    assert report.tensor_bytes == 40 and report.files == 4


@needs_memmap
def test_memmap_store_tree_sizes_and_values(tmp_path):
    td = _sample()
    td.memmap(tmp_path / "store")
    report = inspect_store(tmp_path / "store")
    assert report.complete and report.format == "td-memmap"
    assert report.root.kind == "TensorDict" and report.root.batch_size == [4]
    entries = _by_key(report)
    assert set(entries) == {("obs",), ("nested",), ("nested", "reward"), ("nested", "done"), ("name",)}
    assert (entries[("obs",)].shape, entries[("obs",)].dtype, entries[("obs",)].nbytes) == ([4, 3], "float32", 48)
    assert entries[("nested", "done")].dtype == "bool"
    value = entries[("name",)].value
    assert value.startswith("'a run with") and value.endswith("...") and len(value) <= 48
    assert report.tensor_bytes == 48 + 32 + 4
    on_disk = sum(f.stat().st_size for f in (tmp_path / "store").rglob("*") if f.is_file())
    assert report.bytes_on_disk == on_disk
    text = render(report)
    assert "obs: Tensor(shape=[4, 3], dtype=float32)  48 B" in text
    assert text.rstrip().endswith("status: complete")


@needs_memmap
def test_memmap_lazy_stack_and_sparse_allocation(tmp_path):
    from tensordict import LazyStackedTensorDict

    stack = LazyStackedTensorDict(TensorDict({"a": torch.zeros(3)}, []), TensorDict({"a": torch.ones(3), "b": torch.ones(1)}, []), stack_dim=0)
    stack.memmap(tmp_path / "lazy")
    report = inspect_store(tmp_path / "lazy")
    assert report.complete and report.root.kind == "LazyStackedTensorDict"
    assert [c.key for c in report.root.children] == ["[0]", "[1]"]
    assert [c.key for c in report.root.children[1].children] == ["a", "b"]
    # memmap_like allocates files without writing them: 64 MiB announced, almost nothing allocated
    big = TensorDict({"frames": torch.zeros((), dtype=torch.uint8)}, []).expand(64, 1024, 1024)
    big.memmap_like(tmp_path / "big")
    report = inspect_store(tmp_path / "big")
    assert report.complete and report.tensor_bytes == 64 * 2**20
    assert report.allocated is not None and report.allocated < 2**20
    assert "sparse" in render(report)


@needs_memmap
def test_incomplete_memmap_stores(tmp_path):
    td = _sample()
    for name in ("missing", "truncated", "nometa", "nosub"):
        td.memmap(tmp_path / name)
    os.remove(tmp_path / "missing" / "obs.memmap")
    with open(tmp_path / "truncated" / "nested" / "reward.memmap", "r+b") as f:
        f.truncate(8)
    os.remove(tmp_path / "nometa" / "meta.json")
    shutil.rmtree(tmp_path / "nosub" / "nested")

    report = inspect_store(tmp_path / "missing")
    assert not report.complete
    assert _by_key(report)[("obs",)].problems and "missing" in report.all_problems[0]
    assert "MISSING" in render(report)

    report = inspect_store(tmp_path / "truncated")
    (problem,) = report.all_problems
    assert "reward.memmap" in problem and "8 bytes" in problem and "32" in problem

    report = inspect_store(tmp_path / "nometa")
    assert not report.complete and "meta.json is missing" in report.all_problems[0]
    assert "obs.memmap" in {c.key for c in report.root.children}

    report = inspect_store(tmp_path / "nosub")
    assert not report.complete and "folder of key 'nested' is missing" in report.all_problems[0]
    assert main(["inspect", str(tmp_path / "nosub")]) == 1


def test_interrupted_first_save_is_reported(tmp_path):
    """A staging folder next to a destination that was never published (the crash-safety protocol)."""
    staging = tmp_path / ".store.td-tmp-999999999-abcd"
    staging.mkdir()
    (staging / "obs.memmap").write_bytes(b"\0" * 16)
    report = inspect_store(tmp_path / "store")
    assert report.format == "td-memmap" and not report.complete
    assert "interrupted" in report.all_problems[0]
    assert main(["inspect", str(tmp_path / "store")]) == 1


def test_untrusted_metadata_is_not_followed(tmp_path):
    path = _write_hand_store(tmp_path)
    meta = json.loads((tmp_path / "hand" / "meta.json").read_text())
    meta["entries"][0]["file"] = "../../../etc/passwd"
    meta["entries"].append({"key": "evil", "kind": "non_tensor", "batch_size": [2], "encoding": "pickle", "file": "evil.pkl"})
    (tmp_path / "hand" / "meta.json").write_text(json.dumps(meta))
    marker = tmp_path / "pwned"
    # a pickle that creates a folder when unpickled: inspecting must never unpickle it
    (tmp_path / "hand" / "evil.pkl").write_bytes(pickle.dumps(_MakeDir(str(marker))))
    report = inspect_store(path)
    assert not marker.exists()
    entries = _by_key(report)
    assert entries[("x",)].problems and "invalid data file" in entries[("x",)].problems[0]
    assert entries[("evil",)].note.startswith("pickled, not read") and entries[("evil",)].nbytes > 0
    assert not report.complete


class _MakeDir:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.makedirs, (self.path,))


# --------------------------------------------------------------------- consolidated files
def test_consolidated_file(tmp_path):
    td = _sample()
    td["words"] = NonTensorStack("a", "b", "c", "d")
    td.consolidate(filename=str(tmp_path / "c.td"))
    report = inspect_store(tmp_path / "c.td")
    assert report.format == "consolidated" and report.complete
    entries = _by_key(report)
    assert entries[("obs",)].shape == [4, 3] and entries[("nested", "reward")].dtype == "int64"
    assert entries[("words",)].kind == "NonTensorStack" and "'a'" in entries[("words",)].value
    assert report.bytes_on_disk == os.path.getsize(tmp_path / "c.td")
    assert report.tensor_bytes == 48 + 32 + 4


def test_truncated_consolidated_file(tmp_path):
    td = TensorDict({"a": torch.randn(100, 10)}, [100])
    td.consolidate(filename=str(tmp_path / "c.td"))
    size = os.path.getsize(tmp_path / "c.td")
    with open(tmp_path / "c.td", "r+b") as f:
        f.truncate(size - 100)
    report = inspect_store(tmp_path / "c.td")
    assert not report.complete and "truncated" in report.all_problems[0]
    # the tree is still listed from the (intact) metadata
    assert _by_key(report)[("a",)].shape == [100, 10]
    with open(tmp_path / "c.td", "r+b") as f:
        f.truncate(30)
    report = inspect_store(tmp_path / "c.td")
    assert not report.complete and "truncated" in report.all_problems[0]


# --------------------------------------------------------------------- HDF5
@needs_td_h5
def test_hdf5_written_by_to_h5(tmp_path):
    td = _sample()
    td["half"] = torch.zeros(4, 2, dtype=torch.bfloat16)
    td.to_h5(str(tmp_path / "d.h5")).close()
    report = inspect_store(tmp_path / "d.h5")
    assert report.format == "hdf5" and report.complete
    entries = _by_key(report)
    assert report.root.batch_size == [4] and entries[("nested",)].batch_size == [4]
    assert entries[("obs",)].shape == [4, 3] and entries[("obs",)].dtype == "float32"
    assert entries[("half",)].dtype == "bfloat16"
    assert entries[("name",)].kind == "NonTensorData" and entries[("name",)].value.endswith("...")


@needs_h5py
def test_hdf5_written_by_plain_h5py(tmp_path):
    import h5py
    import numpy as np

    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f.create_dataset("images", data=np.zeros((10, 8, 8), dtype=np.uint8), compression="gzip", chunks=(5, 8, 8))
        f.create_dataset("labels", data=np.arange(10))
        f["group/x"] = np.ones((10, 2), dtype=np.float64)
        f["alias"] = h5py.SoftLink("/labels")
        f.attrs["source"] = "scanner 7"
    report = inspect_store(tmp_path / "plain.h5")
    assert report.complete
    entries = _by_key(report)
    assert report.root.batch_size == [10] and "inferred" in report.root.note
    assert entries[("images",)].dtype == "uint8" and "gzip" in entries[("images",)].note
    # on disk: the compressed size; the total of tensor data: shape x item size
    assert entries[("images",)].nbytes < 640
    assert report.tensor_bytes == 640 + 80 + 160
    assert entries[("alias",)].kind == "link" and "not followed" in entries[("alias",)].note
    assert entries[("source",)].value == "'scanner 7'"
    assert entries[("group",)].batch_size == [10, 2]


@needs_h5py
def test_truncated_hdf5(tmp_path):
    import h5py
    import numpy as np

    with h5py.File(tmp_path / "t.h5", "w") as f:
        f.create_dataset("big", data=np.ones((1000, 100), dtype=np.float32))
    size = os.path.getsize(tmp_path / "t.h5")
    with open(tmp_path / "t.h5", "r+b") as f:
        f.truncate(size // 2)
    report = inspect_store(tmp_path / "t.h5")
    assert not report.complete
    assert main(["inspect", str(tmp_path / "t.h5")]) == 1


# --------------------------------------------------------------------- not a store; the CLI
def test_not_a_store(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "notes.txt", tmp_path / "empty", tmp_path / "absent"):
        assert main(["inspect", str(path)]) == 2
        err = capsys.readouterr().err
        assert str(path) in err and "error" in err
    with pytest.raises(ValueError, match="neither an HDF5 file nor a consolidated"):
        inspect_store(tmp_path / "notes.txt")
    with pytest.raises(FileNotFoundError):
        inspect_store(tmp_path / "absent")
    with pytest.raises(ValueError, match="not a td-memmap store"):
        inspect_store(tmp_path / "empty")


def test_cli_json_and_depth(tmp_path, capsys):
    path = _write_hand_store(tmp_path)
    assert main(["inspect", path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["complete"] is True and data["format"] == "td-memmap"
    assert [c["key"] for c in data["root"]["children"]] == ["x", "sub", "label"]
    assert main(["inspect", path, "--depth", "1", "--ascii"]) == 0
    out = capsys.readouterr().out
    assert "`-- ... (1 entries)" in out and "y:" not in out and "├" not in out


def test_python_dash_m(tmp_path, capsys, monkeypatch):
    """``python -m tensordict`` runs ``tensordict.__main__`` (in-process: a subprocess pays torch's import)."""
    import runpy

    path = _write_hand_store(tmp_path)
    monkeypatch.setattr(sys, "argv", ["tensordict", "inspect", path])
    monkeypatch.delitem(sys.modules, "tensordict.__main__", raising=False)
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("tensordict", run_name="__main__", alter_sys=False)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "x: Tensor(shape=[2, 3], dtype=float32)" in out and "status: complete" in out


@pytest.mark.timeout(120)
def test_console_script(tmp_path):
    script = shutil.which("tensordict", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("the console script is not installed in this environment")
    res = subprocess.run([script, "inspect", str(tmp_path / "nothing")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no such file or folder" in res.stderr


def test_human_bytes():
    assert human_bytes(0) == "0 B" and human_bytes(2048) == "2.0 KiB" and human_bytes(None) == "?"
