"""``tensordict inspect`` applies the loaders' rules to hostile stores (issue 19,
items 8, 9 and 13): no links followed, regular files only, size caps, shared or
cyclic sub-folders visited once, deep JSON refused without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tensordict.__main__ import main
from tensordict._inspect import inspect_store, render


def _meta(entries, **extra):
    return {"format": "td-memmap", "version": 1, "type": "TensorDict", "batch_size": [], "device": None,
            "names": None, "entries": entries, **extra}


def _store(tmp_path, meta=None):
    root = tmp_path / "store"
    root.mkdir()
    if meta is not None:
        (root / "meta.json").write_text(json.dumps(meta))
    return root


def test_meta_json_symlink_outside_is_not_followed(tmp_path, capsys):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(_meta([{"key": "TOPSECRET", "kind": "non_tensor", "batch_size": [],
                                         "encoding": "json", "value": "password"}])))
    root = _store(tmp_path)
    os.symlink(secret, root / "meta.json")
    report = inspect_store(root)
    assert not report.complete
    assert any("symbolic link" in p for p in report.all_problems)
    assert main(["inspect", str(root)]) == 1
    out = capsys.readouterr().out
    assert "TOPSECRET" not in out and "password" not in out and "status: complete" not in out


def test_meta_json_symlink_to_dev_zero_is_refused(tmp_path):
    root = _store(tmp_path)
    os.symlink("/dev/zero", root / "meta.json")
    start = time.monotonic()
    report = inspect_store(root)
    assert time.monotonic() - start < 5 and not report.complete


def test_meta_json_fifo_does_not_hang(tmp_path):
    root = _store(tmp_path)
    os.mkfifo(root / "meta.json")
    code = "import sys; from tensordict.__main__ import main; sys.exit(main(['inspect', sys.argv[1]]))"
    res = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    assert "not a regular file" in res.stdout
    assert "Traceback" not in res.stderr


def test_data_file_symlink_is_reported_not_followed(tmp_path):
    (tmp_path / "outside.bin").write_bytes(b"\0" * 8)
    root = _store(tmp_path, _meta([{"key": "x", "kind": "tensor", "file": "x.memmap", "dtype": "float32",
                                    "shape": [2], "nbytes": 8}]))
    os.symlink(tmp_path / "outside.bin", root / "x.memmap")
    report = inspect_store(root)
    assert not report.complete
    assert all(e.nbytes is None for e in report.root.walk() if e.key == "x")


def test_member_name_with_trailing_newline_is_refused(tmp_path):
    root = _store(tmp_path, _meta([{"key": "x", "kind": "tensor", "file": "x.memmap\n", "dtype": "float32",
                                    "shape": [2], "nbytes": 8}]))
    (root / "x.memmap\n").write_bytes(b"\0" * 8)
    assert any("invalid data file" in p for p in inspect_store(root).all_problems)


def test_shared_sub_folders_are_visited_once(tmp_path):
    """5 levels with fan-out 30 all naming one sub-folder: 30**5 visits without the check."""
    root = _store(tmp_path)
    folder = root
    for _level in range(5):
        entries = [{"key": f"k{i}", "kind": "tensordict", "dir": "d"} for i in range(30)]
        (folder / "meta.json").write_text(json.dumps(_meta(entries)))
        folder = folder / "d"
        folder.mkdir()
    (folder / "meta.json").write_text(json.dumps(_meta([])))
    start = time.monotonic()
    report = inspect_store(root)
    assert time.monotonic() - start < 10
    assert any("referenced more than once" in p for p in report.all_problems)


def test_cyclic_sub_folder(tmp_path):
    root = _store(tmp_path, _meta([{"key": "a", "kind": "tensordict", "dir": "a"}]))
    (root / "a").mkdir()
    (root / "a" / "meta.json").write_text(json.dumps(_meta([{"key": "again", "kind": "tensordict", "dir": "b"}])))
    os.symlink("..", root / "a" / "b")  # a link back up: never followed
    report = inspect_store(root)
    assert not report.complete


def test_deeply_nested_json_is_a_clean_problem(tmp_path, capsys):
    root = _store(tmp_path)
    (root / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["inspect", str(root)]) == 1
    out = capsys.readouterr()
    assert "nests more than" in out.out and "Traceback" not in out.err


def test_huge_meta_json_is_not_read(tmp_path):
    root = _store(tmp_path)
    with open(root / "meta.json", "wb") as f:
        f.truncate((64 << 20) + 1)
    report = inspect_store(root)
    assert any("limit" in p for p in report.all_problems)


def test_consolidated_metadata_size_is_capped(tmp_path):
    import struct

    path = tmp_path / "c.bin"
    with open(path, "wb") as f:
        f.write(struct.pack("<8sIQ", b"TDCONSOL", 1, (64 << 20) + 10))
        f.truncate((64 << 20) + 100)
    report = inspect_store(path)
    assert any("limit" in p for p in report.all_problems)


def test_h5_temp_file_of_an_interrupted_save_is_reported(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f["a"] = [1, 2, 3]
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True, timeout=60).stdout)
    (tmp_path / f".d.h5.{dead}-0badc0de.tmp").write_bytes(b"partial")
    report = inspect_store(path)
    assert report.complete
    assert any("interrupted save" in n for n in report.notes)
    assert "interrupted save" in render(report)
