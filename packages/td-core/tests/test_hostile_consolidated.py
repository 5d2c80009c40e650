"""Hostile consolidated files and self-containing TensorDicts (issue 19, items 13 and 14)."""

from __future__ import annotations

import json
import os
import struct

import pytest
import torch

from tensordict import TensorDict, from_consolidated

_HEAD = struct.Struct("<8sIQ")


def _rewrite(path, edit):
    raw = path.read_bytes()
    magic, version, meta_len = _HEAD.unpack(raw[: _HEAD.size])
    meta = json.loads(raw[_HEAD.size : _HEAD.size + meta_len])
    data_start = -(-(_HEAD.size + meta_len) // 64) * 64
    data = bytearray(raw[data_start:])
    edit(meta, data)
    new = json.dumps(meta).encode()
    start = -(-(_HEAD.size + len(new)) // 64) * 64
    path.write_bytes(_HEAD.pack(magic, version, len(new)) + new + b"\0" * (start - _HEAD.size - len(new)) + data)


def test_overlapping_leaves_are_refused(tmp_path):
    path = tmp_path / "c.bin"
    TensorDict({"a": torch.ones(4), "b": torch.zeros(4)}, [4]).consolidate(filename=path)

    def overlap(meta, data):
        meta["leaves"][1]["offset"] = meta["leaves"][0]["offset"] + 4

    _rewrite(path, overlap)
    with pytest.raises(ValueError, match="overlap"):
        from_consolidated(path)


def test_bool_leaf_with_other_bytes_is_refused(tmp_path):
    path = tmp_path / "c.bin"
    TensorDict({"m": torch.ones(8, dtype=torch.bool)}, [8]).consolidate(filename=path)

    def poison(meta, data):
        data[meta["leaves"][0]["offset"]] = 7

    _rewrite(path, poison)
    with pytest.raises(ValueError, match="bool leaf"):
        from_consolidated(path)


def test_folder_and_fifo_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="is a folder"):
        from_consolidated(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="not a regular file"):
        from_consolidated(tmp_path / "fifo")


def test_shape_beyond_int64_is_refused(tmp_path):
    path = tmp_path / "c.bin"
    TensorDict({"a": torch.ones(4)}, [4]).consolidate(filename=path)
    _rewrite(path, lambda meta, data: meta["leaves"][0].__setitem__("shape", [2**70]))
    with pytest.raises(ValueError, match="beyond int64"):
        from_consolidated(path)


def test_a_tensordict_cannot_contain_itself():
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(ValueError, match="contains, the TensorDict it is set into"):
        td["me"] = td
    child = TensorDict({}, [2])
    td["child"] = child
    with pytest.raises(ValueError, match="contains"):
        child["parent"] = td
    assert "parent" not in child.keys() and "me" not in td.keys()
    td["copy"] = td.clone()  # a copy is fine
    assert repr(td)
