"""A store on disk is untrusted input: pickle is opt-in, nothing is imported,
keys cannot escape the prefix, damaged stores give clear errors naming the file."""

import json
import os
import pickle
import sys

import pytest
import torch

from tensordict import NonTensorData, TensorDict
from tensordict.memmap import load_memmap

sys.path.insert(0, os.path.dirname(__file__))
from _memmap_helpers import tree_files  # noqa: E402

_MARKER = "td_memmap_pwned"


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {_MARKER}",))


def _meta(path):
    with open(path / "meta.json") as f:
        return json.load(f)


def _write_meta(path, meta):
    with open(path / "meta.json", "w") as f:
        json.dump(meta, f)


def test_json_values_stored_as_json(tmp_path):
    td = TensorDict({"s": "txt", "n": NonTensorData(3), "l": NonTensorData([1, "a", None, 2.5])}, [])
    td.memmap(tmp_path / "s")
    assert not [f for f in os.listdir(tmp_path / "s") if f.endswith(".pkl")]
    entries = {e["key"]: e for e in _meta(tmp_path / "s")["entries"]}
    assert entries["s"]["value"] == "txt" and entries["l"]["value"] == [1, "a", None, 2.5]
    loaded = load_memmap(tmp_path / "s")
    assert loaded["s"] == "txt" and loaded["l"] == [1, "a", None, 2.5]


def test_pickle_only_with_opt_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prefix = tmp_path / "s"
    TensorDict({"a": torch.zeros(2), "t": NonTensorData((1, 2))}, [2]).memmap(prefix)
    assert (prefix / "t.pkl").exists()
    with pytest.raises(RuntimeError, match="allow_pickle=True"):
        load_memmap(prefix)
    assert load_memmap(prefix, allow_pickle=True)["t"] == (1, 2)
    # a malicious pickle planted in the store is never executed without the opt-in
    (prefix / "t.pkl").write_bytes(pickle.dumps(_Evil()))
    for loader in (load_memmap, TensorDict.load_memmap, TensorDict.load):
        with pytest.raises(RuntimeError, match="allow_pickle"):
            loader(prefix)
    with pytest.raises(RuntimeError, match="allow_pickle"):
        TensorDict({}, []).load_memmap_(prefix)
    assert not (tmp_path / _MARKER).exists()


def test_no_module_is_imported_from_metadata(tmp_path):
    prefix = tmp_path / "s"
    TensorDict({"a": torch.zeros(2)}, [2]).memmap(prefix)
    meta = _meta(prefix)
    for bad_type in ("os.system", "builtins.eval", "tensordict.nn.TensorDictParams"):
        _write_meta(prefix, {**meta, "type": bad_type})
        with pytest.raises(RuntimeError, match="unknown container type"):
            load_memmap(prefix)
    _write_meta(prefix, {**meta, "registered": {"name": "json_evil_module.Thing", "extra": {}}})
    with pytest.raises(RuntimeError, match="not registered"):
        load_memmap(prefix)
    assert "json_evil_module" not in sys.modules
    _write_meta(prefix, {**meta, "entries": [{**meta["entries"][0], "dtype": "__class__"}]})
    with pytest.raises(RuntimeError, match="unknown dtype"):
        load_memmap(prefix)


_NASTY = ["..", ".", "../escape", "/etc/passwd", "a/b", "nul\x00byte", "a", "a.memmap", "A", "meta",
          "meta.json", "", "x" * 400, "\\back", "ünï", ".hidden", "%41"]


def test_hostile_keys_stay_under_prefix_and_roundtrip(tmp_path):
    prefix = tmp_path / "store"
    source = {key: torch.full((2,), float(i)) for i, key in enumerate(_NASTY)}
    source["sub"] = {key: torch.full((2,), -float(i)) for i, key in enumerate(_NASTY)}
    source["a.memmap_dir"] = {"..": torch.zeros(2)}
    td = TensorDict(source, [2])
    # "a" and "a.memmap" and the folder "a.memmap_dir" must not clash; nothing may land outside
    td.memmap(prefix)
    assert sorted(os.listdir(tmp_path)) == ["store"]
    for rel in tree_files(prefix):
        full = os.path.realpath(prefix / rel)
        assert full.startswith(str(prefix) + os.sep), rel
        assert "\x00" not in rel and not os.path.basename(rel).startswith(".")
    loaded = load_memmap(prefix)
    assert set(loaded.keys()) == set(td.keys())
    for i, key in enumerate(_NASTY):
        assert loaded[key].tolist() == [float(i)] * 2, key
        assert loaded["sub", key].tolist() == [-float(i)] * 2, key
    assert loaded["a.memmap_dir", ".."].tolist() == [0.0, 0.0]


def test_metadata_cannot_point_outside(tmp_path):
    outside = tmp_path / "secret.memmap"
    outside.write_bytes(b"\x00" * 8)
    prefix = tmp_path / "s"
    TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2]).memmap(prefix)
    meta = _meta(prefix)
    for bad in ("../secret.memmap", "/etc/passwd", "a.memmap/../../secret.memmap", "", None, 3):
        entries = [dict(meta["entries"][0], file=bad), meta["entries"][1]]
        _write_meta(prefix, {**meta, "entries": entries})
        with pytest.raises(RuntimeError, match="invalid data file name"):
            load_memmap(prefix)
    entries = [meta["entries"][0], dict(meta["entries"][1], dir="..")]
    _write_meta(prefix, {**meta, "entries": entries})
    with pytest.raises(RuntimeError, match="invalid sub-folder name"):
        load_memmap(prefix)
    # a symbolic link planted in the store that points outside is refused
    _write_meta(prefix, meta)
    os.remove(prefix / "a.memmap")
    os.symlink(outside, prefix / "a.memmap")
    with pytest.raises(RuntimeError, match="outside the store"):
        load_memmap(prefix)


def test_damaged_files_name_the_file(tmp_path):
    prefix = tmp_path / "s"
    TensorDict({"a": torch.zeros(4, 4), "n": {"b": torch.zeros(4)}}, [4]).memmap(prefix)
    data = prefix / "a.memmap"
    with open(data, "r+b") as f:
        f.truncate(10)
    with pytest.raises(RuntimeError, match=r"a\.memmap.*truncated"):
        load_memmap(prefix)
    with open(data, "r+b") as f:
        f.truncate(100)
    with pytest.raises(RuntimeError, match=r"a\.memmap.*resized"):
        load_memmap(prefix)
    os.remove(data)
    with pytest.raises(FileNotFoundError, match=r"a\.memmap.*missing"):
        load_memmap(prefix)


def test_inconsistent_metadata(tmp_path):
    prefix = tmp_path / "s"
    TensorDict({"a": torch.zeros(4, 4)}, [4]).memmap(prefix)
    meta = _meta(prefix)
    entry = meta["entries"][0]
    cases = [
        (dict(entry, dtype="float64"), r"a\.memmap.*metadata mismatch"),
        (dict(entry, shape=[4, 5]), r"a\.memmap.*metadata mismatch"),
        (dict(entry, shape=[2, 8]), r"a\.memmap.*batch size"),
        (dict(entry, shape=[-4, -4]), "non-negative"),
        (dict(entry, nbytes="64"), "metadata mismatch"),
        (dict(entry, kind="exec"), "unknown kind"),
    ]
    for bad, pattern in cases:
        _write_meta(prefix, {**meta, "entries": [bad]})
        with pytest.raises(RuntimeError, match=pattern):
            load_memmap(prefix)
    (prefix / "meta.json").write_text('{"format": "td-memmap", "vers')
    with pytest.raises(RuntimeError, match=r"meta\.json.*not valid JSON"):
        load_memmap(prefix)
    _write_meta(prefix, {**meta, "version": 99})
    with pytest.raises(RuntimeError, match="version"):
        load_memmap(prefix)


def test_missing_metadata_is_incomplete(tmp_path):
    prefix = tmp_path / "s"
    TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2]).memmap(prefix)
    os.remove(prefix / "n" / "meta.json")
    with pytest.raises(RuntimeError, match="incomplete"):
        load_memmap(prefix)
    os.remove(prefix / "meta.json")
    with pytest.raises(RuntimeError, match="incomplete"):
        load_memmap(prefix)
    with pytest.raises(FileNotFoundError):
        load_memmap(tmp_path / "never_saved")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no td-memmap store"):
        load_memmap(tmp_path / "empty")
