"""Fuzz with a time budget per input (issue 19): ``parse_tensor_dict_string`` on
repeated hostile fragments, ``tensordict inspect`` on hostile stores, and
``from_consolidated`` on hostile leaf layouts.

Each input must give a result or the documented error *within a budget that grows
linearly with its size*, so a super-linear case (the 35 s quadratic parse, the
exponential DAG walk) fails the run instead of passing slowly. ``nox -s fuzz`` runs
these with the long hypothesis profile.
"""

from __future__ import annotations

import json
import os
import struct
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensordict import TensorDict, from_consolidated, parse_tensor_dict_string
from tensordict._inspect import inspect_store, render
from tensordict.testing.strategies import register_profiles

register_profiles()

try:  # imported once here, so that its import time is not charged to the first input
    import h5py  # noqa: F401
except ImportError:  # pragma: no cover
    pass

_HEADER = struct.Struct("<8sIQ")


def _budget(nbytes: int) -> float:
    """Seconds one input may take: a fixed start-up part plus a linear part (2 s per MB)."""
    return 0.5 + 2.0 * nbytes / 1e6


def _within_budget(fn, nbytes: int, errors: tuple) -> None:
    start = time.perf_counter()
    try:
        fn()
    except errors:
        pass
    elapsed = time.perf_counter() - start
    assert elapsed < _budget(nbytes), f"{elapsed:.2f} s for {nbytes} bytes (budget {_budget(nbytes):.2f} s)"


# ---------------------------------------------------------------------- parse_tensor_dict_string
_FRAGMENTS = [
    "TensorDict(\n    fields={", "},\n    batch_size=torch.Size([2]),\n    device=None,\n    is_shared=False)",
    "a: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False), ",
    "b: NonTensorData(data=x", ", batch_size=torch.Size([", "1, ", "]), device=None)", "\n        ",
    "c: ", "TensorDict(", "fields={", "}", ",", ": ", "torch.Size([", "exclusive_fields={", "-1, ",
    "Tensor(shape=torch.Size([", "]), device=cpu, ", "dtype=torch.float32, is_shared=False)",
]


@pytest.mark.timeout(600)
@given(pieces=st.lists(st.tuples(st.sampled_from(_FRAGMENTS), st.integers(1, 3000)), min_size=1, max_size=6))
def test_fuzz_parse_repeated_fragments_linear_time(pieces):
    text = "".join(fragment * count for fragment, count in pieces)
    _within_budget(lambda: parse_tensor_dict_string(text), len(text), (ValueError, TypeError))


# ---------------------------------------------------------------------- inspector
_ENTRY = st.one_of(
    st.fixed_dictionaries({"key": st.sampled_from(["a", "b", "..", "x/y"]), "kind": st.just("tensordict"),
                           "dir": st.sampled_from(["d", "e", "..", "d\n", "/tmp", "link"])}),
    st.fixed_dictionaries({"key": st.sampled_from(["t", "u"]), "kind": st.just("tensor"),
                           "file": st.sampled_from(["t.memmap", "link.memmap", "fifo.memmap", "t.memmap\n"]),
                           "dtype": st.sampled_from(["float32", "bool", "object", 3]),
                           "shape": st.lists(st.integers(0, 2**64), max_size=3),
                           "nbytes": st.integers(-1, 2**64)}),
    st.fixed_dictionaries({"key": st.just("v"), "kind": st.sampled_from(["non_tensor", "non_tensor_stack"]),
                           "batch_size": st.lists(st.integers(0, 3), max_size=2),
                           "encoding": st.sampled_from(["json", "pickle", "exec"]),
                           "value": st.recursive(st.integers(), lambda i: st.lists(i, max_size=3), max_leaves=5)}),
)
_SPECIAL = st.sampled_from(["none", "symlink_out", "symlink_dev_zero", "fifo", "dir", "deep_json", "huge_int"])


@pytest.mark.timeout(600)
@given(entries=st.lists(_ENTRY, max_size=8), fanout=st.integers(0, 40), depth=st.integers(0, 6), special=_SPECIAL,
       sub_special=_SPECIAL)
def test_fuzz_inspect_hostile_memmap_store(tmp_path_factory, entries, fanout, depth, special, sub_special):
    root = tmp_path_factory.mktemp("store")
    (root.parent / "secret.json").write_text('{"format": "td-memmap", "type": "TensorDict", "entries": []}')

    def write_meta(folder, meta, how):
        path = folder / "meta.json"
        if how == "symlink_out":
            os.symlink(root.parent / "secret.json", path)
        elif how == "symlink_dev_zero":
            os.symlink("/dev/zero", path)
        elif how == "fifo":
            os.mkfifo(path)
        elif how == "dir":
            path.mkdir()
        elif how == "deep_json":
            path.write_text("[" * 5000 + "]" * 5000)
        elif how == "huge_int":
            path.write_text(json.dumps({**meta, "batch_size": [2**70]}))
        else:
            path.write_text(json.dumps(meta))

    meta = {"format": "td-memmap", "version": 1, "type": "TensorDict", "batch_size": [], "device": None,
            "names": None, "entries": list(entries)}
    folder = root
    for level in range(depth):  # a DAG: every level names the same sub-folder ``fanout`` times
        level_meta = dict(meta, entries=[{"key": f"k{i}", "kind": "tensordict", "dir": "d"} for i in range(fanout)]
                          + list(entries))
        write_meta(folder, level_meta, special if level == 0 else "none")
        folder = folder / "d"
        folder.mkdir()
    write_meta(folder, meta, sub_special if depth else special)
    (folder / "t.memmap").write_bytes(b"\0" * 8)
    os.symlink(root.parent / "secret.json", folder / "link.memmap")
    os.mkfifo(folder / "fifo.memmap")

    def run():
        report = inspect_store(root)
        text = render(report)
        assert "status:" in text
        assert "secret" not in text or not report.complete

    size = sum(len(json.dumps(e)) for e in entries) + 100 * depth * (fanout + 1)
    _within_budget(run, size, (ValueError, FileNotFoundError))


@pytest.mark.timeout(600)
@given(head=st.sampled_from([b"TDCONSOL", b"\x89HDF\r\n\x1a\n", b"", b"PK\x03\x04"]), body=st.binary(max_size=2000),
       meta_len=st.integers(0, 2**64 - 1))
def test_fuzz_inspect_random_files(tmp_path_factory, head, body, meta_len):
    path = tmp_path_factory.mktemp("file") / "f.bin"
    blob = head + (struct.pack("<IQ", 1, meta_len) if head == b"TDCONSOL" else b"") + body
    path.write_bytes(blob)
    _within_budget(lambda: render(inspect_store(path)), len(blob), (ValueError, FileNotFoundError, ImportError))


# ---------------------------------------------------------------------- consolidated buffers
@pytest.fixture(scope="module")
def consolidated_file(tmp_path_factory):
    import torch

    path = tmp_path_factory.mktemp("c") / "c.bin"
    TensorDict({"a": torch.ones(4), "b": torch.zeros(4, dtype=torch.bool), "n": {"c": torch.arange(4)}},
               [4]).consolidate(filename=path)
    return path.read_bytes()


@pytest.mark.timeout(600)
@given(edits=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["offset", "shape", "dtype"]),
                                st.one_of(st.integers(-8, 2**65), st.lists(st.integers(0, 2**64), max_size=3),
                                          st.sampled_from(["bool", "float64", "object", "uint8"]))), max_size=4),
       poison=st.integers(0, 255))
def test_fuzz_consolidated_hostile_leaf_layouts(tmp_path_factory, consolidated_file, edits, poison):
    raw = consolidated_file
    magic, version, meta_len = _HEADER.unpack(raw[: _HEADER.size])
    meta = json.loads(raw[_HEADER.size : _HEADER.size + meta_len])
    data_start = -(-(_HEADER.size + meta_len) // 64) * 64
    data = bytearray(raw[data_start:])
    if data:
        data[0] = poison  # e.g. a bool byte other than 0/1
    for index, field, value in edits:
        if index < len(meta["leaves"]):
            meta["leaves"][index][field] = value
    new = json.dumps(meta).encode()
    start = -(-(_HEADER.size + len(new)) // 64) * 64
    blob = _HEADER.pack(magic, version, len(new)) + new + b"\0" * (start - _HEADER.size - len(new)) + bytes(data)
    path = tmp_path_factory.mktemp("h") / "c.bin"
    path.write_bytes(blob)

    def run():
        td = from_consolidated(path)
        for value in td.values(True, True):
            value.sum()  # every view lies inside the storage

    _within_budget(run, len(blob), (ValueError, FileNotFoundError))
