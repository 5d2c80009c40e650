"""Stores laid out as the ``tensordict`` package writes them load here, with our
safety rules: no unpickling without ``allow_pickle=True``, no import of classes
named in the metadata, nothing read outside the store."""

from __future__ import annotations

import json
import os
import pickle
import sys

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict
from tensordict.memmap import load_memmap

_TD = "<class 'tensordict._td.TensorDict'>"


def _tensor_entry(t):
    return {"device": "cpu", "shape": list(t.shape), "dtype": str(t.dtype), "is_nested": False}


def _write(folder, meta, tensors=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text(json.dumps(meta))
    for name, t in (tensors or {}).items():
        (folder / f"{name}.memmap").write_bytes(t.contiguous().view(torch.uint8).numpy().tobytes()
                                                if t.dtype != torch.bfloat16 else
                                                t.view(torch.int16).numpy().tobytes())


def _upstream_store(root):
    ints = torch.tensor([[1], [2]])
    halves = torch.ones(2, 1, dtype=torch.bfloat16)
    _write(root, {"nested": {"type": "TensorDict"}, "shape": [2, 1], "device": "cpu", "_type": _TD})
    _write(root / "nested", {"int64": _tensor_entry(ints), "string": {"type": "NonTensorData"},
                             "bfloat16": _tensor_entry(halves), "shape": [2, 1], "device": "cpu", "_type": _TD},
           {"int64": ints, "bfloat16": halves})
    _write(root / "nested" / "string",
           {"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": ["a string!"], "_metadata": None})
    return ints, halves


def test_upstream_layout_loads(tmp_path):
    ints, halves = _upstream_store(tmp_path / "store")
    td = TensorDict.load(tmp_path / "store")
    assert td.batch_size == (2, 1)
    assert torch.equal(td["nested", "int64"], ints)
    assert td["nested", "bfloat16"].dtype == torch.bfloat16
    assert torch.equal(td["nested", "bfloat16"], halves)
    assert td["nested", "string"] == ["a string!"]
    assert (load_memmap(tmp_path / "store" / "nested") == td["nested"]).all()


class _Payload:
    """Unpickling this creates the file ``path``: the proof that code ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _pickled_store(root, canary):
    _write(root, {"obj": {"type": "NonTensorData"}, "x": _tensor_entry(torch.zeros(3)), "shape": [3],
                  "device": "cpu", "_type": _TD}, {"x": torch.zeros(3)})
    _write(root / "obj", {"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_metadata": None,
                          "shape": [3]})
    (root / "obj" / "pickle.pkl").write_bytes(pickle.dumps(_Payload(str(canary))))


def test_pickled_payload_does_not_run_without_allow_pickle(tmp_path):
    canary = tmp_path / "pwned"
    _pickled_store(tmp_path / "store", canary)
    with pytest.raises(RuntimeError, match="allow_pickle=True"):
        load_memmap(tmp_path / "store")
    assert not canary.exists()


def test_pickled_payload_loads_only_when_allowed(tmp_path):
    canary = tmp_path / "pwned"
    _pickled_store(tmp_path / "store", canary)
    load_memmap(tmp_path / "store", allow_pickle=True)
    assert canary.exists()  # the explicit opt-in is what runs it


def test_unknown_class_is_not_imported(tmp_path):
    root = tmp_path / "store"
    _write(root, {"a": _tensor_entry(torch.zeros(2)), "shape": [2], "device": "cpu",
                  "_type": "<class 'evil_module_never_imported.Thing'>"}, {"a": torch.zeros(2)})
    with pytest.warns(UserWarning, match="plain TensorDict"):
        td = load_memmap(root)
    assert type(td) is TensorDict and td["a"].tolist() == [0.0, 0.0]
    assert "evil_module_never_imported" not in sys.modules


@pytest.mark.parametrize("key,entry", [("../outside", _tensor_entry(torch.zeros(2))),
                                       ("a/b", _tensor_entry(torch.zeros(2))),
                                       ("..", {"type": "TensorDict"}), (".", {"type": "TensorDict"})])
def test_keys_cannot_escape_the_store(tmp_path, key, entry):
    (tmp_path / "outside.memmap").write_bytes(b"\0" * 8)
    (tmp_path / "meta.json").write_text(json.dumps({"shape": [2], "_type": _TD}))
    root = tmp_path / "store"
    _write(root, {key: entry, "shape": [2], "device": "cpu", "_type": _TD})
    with pytest.raises(RuntimeError, match="refusing"):
        load_memmap(root)


def test_symlinked_data_file_is_refused(tmp_path):
    (tmp_path / "secret").write_bytes(b"\1" * 8)
    root = tmp_path / "store"
    _write(root, {"a": _tensor_entry(torch.zeros(2)), "shape": [2], "device": "cpu", "_type": _TD})
    os.symlink(tmp_path / "secret", root / "a.memmap")
    with pytest.raises(RuntimeError, match="symbolic link"):
        load_memmap(root)


def test_upstream_lazy_stack(tmp_path):
    root = tmp_path / "store"
    _write(root, {"shape": [2, 3], "device": "cpu", "stack_dim": 0,
                  "_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>"})
    for i in range(2):
        _write(root / str(i), {"x": _tensor_entry(torch.zeros(3)), "shape": [3], "device": "cpu", "_type": _TD},
               {"x": torch.full((3,), float(i))})
    td = load_memmap(root)
    assert isinstance(td, LazyStackedTensorDict)
    assert td["x"].tolist() == [[0.0] * 3, [1.0] * 3]


def test_upstream_json_non_tensor_at_the_root(tmp_path):
    root = tmp_path / "store"
    _write(root, {"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": {"k": 1}, "_metadata": None})
    value = load_memmap(root)
    assert isinstance(value, NonTensorData) and value.data == {"k": 1}


def test_resaving_over_an_upstream_store_keeps_only_user_files(tmp_path):
    root = tmp_path / "store"
    _upstream_store(root)
    (root / "NOTES.md").write_text("mine")
    TensorDict({"a": torch.ones(2)}, [2]).memmap(root)
    from tensordict.memmap._store import wait_cleanup

    wait_cleanup()
    assert (root / "NOTES.md").read_text() == "mine"
    assert sorted(os.listdir(root)) == ["NOTES.md", "a.memmap", "meta.json"]
    assert [e for e in os.listdir(tmp_path) if e.startswith(".")] == []
