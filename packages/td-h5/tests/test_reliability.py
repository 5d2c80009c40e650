"""Regression tests for the hostile-input pass (issue 19) on td-h5: a file another
process writes is never replaced, temporary files of killed writers are removed,
and other tools' members whose names look like our temporary names stay visible."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest
import torch

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict
from tensordict.persistent._save import stale_temp_files, temp_files

_HOLDER = textwrap.dedent(
    """
    import sys, time, h5py
    f = h5py.File(sys.argv[1], sys.argv[2])
    if sys.argv[2] != "r":
        f["theirs"] = [1, 2, 3]
        f.flush()
    print("open", flush=True)
    sys.stdin.readline()
    f.close()
    """
)


def _hold(path, mode):
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    return proc


def _release(proc):
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait(timeout=60)


def test_to_h5_refuses_a_file_another_process_writes(tmp_path):
    path = tmp_path / "data.h5"
    h5py.File(path, "w").close()
    proc = _hold(path, "a")
    try:
        with pytest.raises(BlockingIOError, match="unable to lock file"):
            TensorDict({"a": torch.zeros(3)}, [3]).to_h5(path)
    finally:
        _release(proc)
    with h5py.File(path, "r") as f:  # the other writer's data is there
        assert f["theirs"][()].tolist() == [1, 2, 3]
    assert temp_files(path) == []


def test_to_h5_replaces_a_file_that_is_only_read(tmp_path):
    path = tmp_path / "data.h5"
    TensorDict({"a": torch.zeros(3)}, [3]).to_h5(path).close()
    proc = _hold(path, "r")
    try:
        TensorDict({"a": torch.ones(3)}, [3]).to_h5(path).close()
    finally:
        _release(proc)
    with PersistentTensorDict(filename=path, mode="r") as td:
        assert td["a"].tolist() == [1.0, 1.0, 1.0]


def test_to_h5_refuses_a_file_open_for_writing_in_this_process(tmp_path):
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
        with pytest.raises(BlockingIOError):
            TensorDict({"a": torch.zeros(3)}, [3]).to_h5(path)


_KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys, torch
    import h5py
    from tensordict import TensorDict
    real = h5py.File.close
    def close(self):  # die once the temporary file is written, before it is moved in place
        os.kill(os.getpid(), signal.SIGKILL)
    h5py.File.close = close
    TensorDict({"a": torch.ones(1000)}, [1000]).to_h5(sys.argv[1])
    """
)


def test_temp_file_of_a_killed_writer_is_removed_by_the_next_save(tmp_path):
    path = tmp_path / "data.h5"
    TensorDict({"a": torch.zeros(1000)}, [1000]).to_h5(path).close()
    res = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], timeout=120)
    assert res.returncode == -signal.SIGKILL
    left = stale_temp_files(path)
    assert len(left) == 1 and left[0].endswith(".tmp")
    with PersistentTensorDict(filename=path, mode="r") as td:  # the earlier file is intact
        assert td["a"].sum().item() == 0
    TensorDict({"a": torch.ones(1000)}, [1000]).to_h5(path).close()
    assert temp_files(path) == []
    assert sorted(os.listdir(tmp_path)) == ["data.h5"]


def test_temp_files_of_live_writers_are_kept(tmp_path):
    path = tmp_path / "data.h5"
    mine = tmp_path / f".data.h5.{os.getppid()}-0123abcd.tmp"  # a live process (our parent)
    mine.write_bytes(b"")
    TensorDict({"a": torch.zeros(2)}, [2]).to_h5(path).close()
    assert mine.exists()


def test_other_tools_members_with_our_temp_suffix_are_visible(tmp_path):
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f["x__td_tmp__"] = np.arange(4)
        f["y"] = np.zeros(4)
    with PersistentTensorDict(filename=path, mode="r+") as td:
        assert set(td.keys()) == {"x__td_tmp__", "y"}
        td["x"] = torch.ones(4)  # a replace through a temporary name must not touch theirs
        assert td["x__td_tmp__"].tolist() == [0, 1, 2, 3]
        assert td["x"].tolist() == [1.0] * 4
        assert set(td.keys()) == {"x__td_tmp__", "x", "y"}


def test_listing_keys_reads_metadata_only(tmp_path):
    import tracemalloc

    path = tmp_path / "huge.h5"
    with h5py.File(path, "w") as f:  # declares 512 GiB; nothing is written, the file stays tiny
        f.create_dataset("g/x", shape=(1 << 20, 1 << 17), dtype="f4", chunks=(1, 1 << 17), compression="gzip")
        f.create_dataset("y", shape=(1 << 20,), dtype="f4", chunks=True)
    assert path.stat().st_size < 64 << 10
    with PersistentTensorDict(filename=path, mode="r") as td:
        tracemalloc.start()
        try:
            keys = list(td.keys(include_nested=True))
            leaves = list(td.keys(include_nested=True, leaves_only=True))
            n_items = len(td.items(include_nested=True))
            n_values = len(td.values(include_nested=True, leaves_only=True))
            first = next(iter(td.items(include_nested=True)))  # the group "g": no data either
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert set(keys) == {"g", ("g", "x"), "y"} and set(leaves) == {("g", "x"), "y"}
    assert n_items == 3 and n_values == 2 and first[0] == "g"
    assert peak < 16 << 20, peak


def test_to_h5_refuses_a_lazy_stack_with_keys_not_shared_by_all(tmp_path):
    # writing only the shared keys would lose "b" and "c" silently: refuse, write nothing
    from tensordict import lazy_stack

    stack = lazy_stack([TensorDict(a=torch.zeros(2), b=torch.ones(2)), TensorDict(a=torch.ones(2), c=torch.zeros(2))])
    path = tmp_path / "x.h5"
    with pytest.raises(ValueError, match=r"not all of its TensorDicts have: \['b', 'c'\]"):
        stack.to_h5(path)
    assert not path.exists()
    nested = TensorDict(inner=stack, batch_size=[2])
    with pytest.raises(ValueError, match="at \\('inner',\\)"):
        nested.to_h5(path)
    # a homogeneous lazy stack is written as before
    same = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2))])
    with same.to_h5(path) as out:
        assert torch.equal(out["a"], torch.stack([torch.zeros(2), torch.ones(2)]))
