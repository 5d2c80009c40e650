"""Regression tests for the hostile-input pass (issue 19): data loss, concurrent
re-saves, files the user put in a store, shapes that poison shared state, and
metadata that names one sub-folder several times."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from tensordict import TensorDict
from tensordict.memmap import MemoryMappedTensor, load_memmap
from tensordict.memmap._store import MARKER, wait_cleanup


# --------------------------------------------------------------------------- item 1
def test_from_tensor_onto_its_own_file_keeps_the_data(tmp_path):
    path = tmp_path / "x.memmap"
    t = MemoryMappedTensor.from_tensor(torch.arange(10.0), filename=path)
    same = MemoryMappedTensor.from_tensor(t, filename=t.filename, existsok=True, copy_existing=True)
    assert same is t
    assert t.tolist() == list(map(float, range(10)))


def test_from_tensor_of_a_view_onto_its_own_file(tmp_path):
    path = tmp_path / "x.memmap"
    t = MemoryMappedTensor.from_tensor(torch.arange(1000.0), filename=path)
    view = t[10:13]
    out = MemoryMappedTensor.from_tensor(view, filename=t.filename, existsok=True, copy_existing=True)
    assert out.tolist() == [10.0, 11.0, 12.0]
    # the tensors mapping the old file keep their values (the file was replaced, not truncated)
    assert t[:5].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert view.tolist() == [10.0, 11.0, 12.0]
    assert os.path.getsize(path) == 3 * 4
    assert sorted(os.listdir(tmp_path)) == ["x.memmap"]  # no temporary file left


def test_from_tensor_through_another_name_of_the_same_file(tmp_path):
    path = tmp_path / "x.memmap"
    t = MemoryMappedTensor.from_tensor(torch.arange(6.0), filename=path)
    os.link(path, tmp_path / "alias.memmap")
    out = MemoryMappedTensor.from_tensor(t[::2], filename=tmp_path / "alias.memmap", existsok=True,
                                         copy_existing=True)
    assert out.tolist() == [0.0, 2.0, 4.0]
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_from_tensor_onto_another_memmap_file_needs_copy_existing(tmp_path):
    t = MemoryMappedTensor.from_tensor(torch.ones(3), filename=tmp_path / "a.memmap")
    with pytest.raises(RuntimeError, match="copy_existing"):
        MemoryMappedTensor.from_tensor(t, filename=tmp_path / "b.memmap")
    assert MemoryMappedTensor.from_tensor(t, filename=tmp_path / "b.memmap", copy_existing=True).tolist() == [1.0] * 3


# --------------------------------------------------------------------------- item 12
@pytest.mark.parametrize("bad", [(2.5,), (2, "3"), (2, None), [1.0]])
def test_bad_shape_is_refused_before_touching_the_pool(bad):
    with pytest.raises(TypeError, match="shape"):
        MemoryMappedTensor.empty(bad)
    # the shared pool still serves small tensors
    small = [MemoryMappedTensor.zeros(3) for _ in range(4)]
    assert all(s.tolist() == [0.0, 0.0, 0.0] for s in small)


def test_shape_is_required():
    with pytest.raises(TypeError, match="shape is required"):
        MemoryMappedTensor.zeros(dtype=torch.float32)


def test_huge_shape_is_refused():
    with pytest.raises(ValueError, match="elements"):
        MemoryMappedTensor.empty((2**40, 2**40))


# --------------------------------------------------------------------------- item 7
def _killed_after_swap(tmp_path):
    """A store whose re-save was killed just after the swap: the hidden folder holds
    the old tree (a user's file included) and was written by a process that is gone."""
    prefix = tmp_path / "store"
    TensorDict({"a": torch.zeros(3)}, [3]).memmap(prefix)
    (prefix / "README.txt").write_text("mine")
    (prefix / "a").mkdir()  # a user folder that happens to look like a sub-folder name
    (prefix / "a" / "notes.txt").write_text("also mine")
    new = TensorDict({"a": torch.ones(3)}, [3]).memmap(tmp_path / "next")
    del new
    wait_cleanup()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)
    pid = int(dead.stdout)
    hidden = tmp_path / f".store.td-tmp-{pid}-deadbeef"
    os.rename(prefix, hidden)  # the old tree, swapped out
    os.rename(tmp_path / "next", prefix)  # the new tree, published
    return prefix, hidden


def test_next_save_keeps_files_left_in_the_swapped_out_tree(tmp_path):
    prefix, hidden = _killed_after_swap(tmp_path)
    TensorDict({"a": torch.full((3,), 2.0)}, [3]).memmap(prefix)
    wait_cleanup()
    assert (prefix / "README.txt").read_text() == "mine"
    assert (prefix / "a" / "notes.txt").read_text() == "also mine"
    assert not hidden.exists()
    assert load_memmap(prefix)["a"].tolist() == [2.0] * 3


def test_resave_keeps_user_files_at_any_depth(tmp_path):
    prefix = tmp_path / "store"
    TensorDict({"n": {"x": torch.zeros(2)}}, []).memmap(prefix)
    (prefix / "README.txt").write_text("top")
    (prefix / "n" / "mine.txt").write_text("nested")
    TensorDict({"n": {"x": torch.ones(2)}}, []).memmap(prefix)
    wait_cleanup()
    assert (prefix / "README.txt").read_text() == "top"
    assert (prefix / "n" / "mine.txt").read_text() == "nested"
    assert [e for e in os.listdir(tmp_path) if e.startswith(".")] == []


def test_staging_marker_is_not_published(tmp_path):
    prefix = tmp_path / "store"
    TensorDict({"a": torch.zeros(1)}, []).memmap(prefix)
    TensorDict({"a": torch.zeros(1)}, []).memmap(prefix)
    assert not (prefix / MARKER).exists()


def test_interrupted_staging_folder_is_removed_whole(tmp_path):
    prefix = tmp_path / "store"
    TensorDict({"a": torch.zeros(1)}, []).memmap(prefix)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True, timeout=60).stdout)
    staging = tmp_path / f".store.td-tmp-{dead}-00000000"
    staging.mkdir()
    (staging / MARKER).write_bytes(b"")
    (staging / "a.memmap").write_bytes(b"\0" * 4)
    TensorDict({"a": torch.ones(1)}, []).memmap(prefix)
    assert not staging.exists()


# --------------------------------------------------------------------------- item 6
_WRITER = textwrap.dedent(
    """
    import sys, time, torch
    from tensordict import TensorDict
    prefix, seconds = sys.argv[1], float(sys.argv[2])
    td = TensorDict({"a": torch.zeros(64, 32), "n": {"b": torch.zeros(64, 8), "c": {"d": torch.zeros(64)}},
                     "e": torch.zeros(64, dtype=torch.int64)}, [64])
    leaves = list(td.values(True, True))
    gen, end = 0, time.monotonic() + seconds
    print("ready", flush=True)
    while time.monotonic() < end:
        gen += 1
        for leaf in leaves:
            leaf.fill_(gen)
        td.memmap(prefix)
    print(gen, flush=True)
    """
)


def _generations(td):
    return {int(v.unique().item()) for v in td.values(True, True)}


def concurrent_loads(prefix, seconds: float) -> tuple[int, int, int, int]:
    """Loads ``prefix`` in a loop while another process re-saves it for ``seconds``.

    Returns ``(loads, loads mixing two saves, loads that raised, saves)``.
    """
    TensorDict({"a": torch.zeros(64, 32), "n": {"b": torch.zeros(64, 8), "c": {"d": torch.zeros(64)}},
                "e": torch.zeros(64, dtype=torch.int64)}, [64]).memmap(prefix)
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(prefix), str(seconds)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        loads = mixed = errors = 0
        while proc.poll() is None:
            try:
                td = load_memmap(prefix)
            except RuntimeError:
                errors += 1
                continue
            loads += 1
            if len(_generations(td)) != 1:
                mixed += 1
        saves = int(proc.stdout.read().strip() or 0)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    return loads, mixed, errors, saves


def test_load_during_resaves_never_mixes_two_saves(tmp_path):
    loads, mixed, errors, saves = concurrent_loads(tmp_path / "store", 4.0)
    assert saves > 10 and loads > 10, (loads, saves)
    assert mixed == 0, f"{mixed} of {loads} loads mixed two saves"
    assert errors == 0


def test_metadata_of_another_generation_is_detected(tmp_path):
    prefix = tmp_path / "store"
    TensorDict({"n": {"x": torch.zeros(2)}}, []).memmap(prefix)
    TensorDict({"n": {"x": torch.ones(2)}}, []).memmap(tmp_path / "other")
    shutil.rmtree(prefix / "n")
    shutil.copytree(tmp_path / "other" / "n", prefix / "n")  # a sub-folder from another save
    with pytest.raises(RuntimeError, match="belongs to another save"):
        load_memmap(prefix)


# --------------------------------------------------------------------------- item 9
def test_shared_sub_folder_is_refused(tmp_path):
    prefix = tmp_path / "store"
    TensorDict({"x": {"a": torch.zeros(2)}}, []).memmap(prefix)
    meta = json.loads((prefix / "meta.json").read_text())
    meta["entries"] += [{"key": f"y{i}", "kind": "tensordict", "dir": "x"} for i in range(30)]
    (prefix / "meta.json").write_text(json.dumps(meta))
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="more than once"):
        load_memmap(prefix)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("names", [["x", "x"], [1, None], ["x"]])
def test_bad_dim_names_in_metadata_are_refused(tmp_path, names):
    prefix = tmp_path / "store"
    TensorDict({"a": torch.zeros(2, 3)}, [2, 3]).memmap(prefix)
    meta = json.loads((prefix / "meta.json").read_text())
    meta["names"] = names
    (prefix / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(RuntimeError, match="names"):
        load_memmap(prefix)
