"""Property and fuzz tests for td-memmap stores (hypothesis).

- Property: ``memmap`` then ``load_memmap`` is the identity on random nested
  TensorDicts (random keys, depths, batch sizes, dtypes, non-tensor leaves) and on
  hostile key names, and writes nothing outside the prefix.
- Untrusted input: a store whose ``meta.json`` files hold hostile JSON values,
  flipped or cut bytes, data files of the wrong size, symbolic links pointing
  outside the prefix, or pickled payloads either loads into a well-formed
  TensorDict or raises the documented error (``RuntimeError``/``FileNotFoundError``):
  never crashes, hangs, reads outside the prefix, or runs code unless
  ``allow_pickle=True``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("tensordict.memmap")

from tensordict import NonTensorData, NonTensorStack, TensorDict  # noqa: E402
from tensordict._base import TensorDictBase  # noqa: E402
from tensordict.memmap import load_memmap  # noqa: E402
from tensordict.testing.strategies import assert_td_equal, register_profiles, tensordicts  # noqa: E402

register_profiles()

#: what ``load_memmap`` documents
LOAD_ERRORS = (RuntimeError, FileNotFoundError)

_HOSTILE_KEYS = [
    "", ".", "..", "../outside", "/etc/passwd", "a/b", "a\\b", "meta.json", "meta", "x.memmap", "x.pkl",
    "\x00", "CON", "nul", "A", "a", "é", "🔑", "a" * 300, " ", "~1", "%2E",
]
_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.sampled_from(["float32", "int64", "object", "tensor", "tensordict", "non_tensor", "non_tensor_stack",
                     "json", "pickle", "TensorDict", "LazyStackedTensorDict", "../outside", "/etc/passwd",
                     "a.memmap", "meta.json", "", "os.system", "td-memmap", "cuda:99", "meta"]),
    st.sampled_from([-1, 0, 1, 2**31, 2**63, 2**64]),
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=10,
)


def _sample() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(12.0).view(3, 4), "b": torch.tensor([True, False, True]),
         "n": {"c": torch.arange(3, dtype=torch.int16), "s": NonTensorData("text"),
               "deep": {"d": torch.ones(3, 2, dtype=torch.float64)}},
         "st": NonTensorStack("x", "y", "z"), "j": NonTensorData({"k": [1, 2]})},
        [3],
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A complete store to copy and damage, plus the files outside it a loader must never read."""
    root = tmp_path_factory.mktemp("pristine")
    _sample().memmap(root / "store")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.memmap").write_bytes(b"\x7f" * 48)  # the size of "a" (3 x 4 float32)
    shutil.copytree(root / "store", outside / "other_store")
    return root


def _copy(pristine, tmp_path_factory, tag: str):
    work = tmp_path_factory.mktemp(tag)
    shutil.copytree(pristine / "store", work / "store", symlinks=True)
    return work / "store"


def _files(store) -> list:
    out = []
    for dirpath, dirnames, filenames in os.walk(store):
        for name in dirnames + filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), store))
    return sorted(out)


def _snapshot(folder) -> dict:
    """Every file under ``folder`` with its bytes (to prove nothing was written)."""
    out = {}
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                with open(path, "rb") as f:
                    out[os.path.relpath(path, folder)] = f.read()
    return out


def _check_well_formed(td) -> None:
    assert isinstance(td, TensorDictBase)
    for key, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            assert value.batch_size[: td.ndim] == td.batch_size, key
            _check_well_formed(value)
        elif isinstance(value, torch.Tensor):
            assert value.shape[: td.ndim] == td.batch_size, key
            raw = value.clone().contiguous().view(-1).view(torch.uint8)  # touches every byte of the mapping
            assert not (raw.numel() and bool((raw == 0x7F).all())), f"{key}: the bytes of a file outside were read"
        else:
            assert value.batch_size[: td.ndim] == td.batch_size, key
    repr(td)


def _load_or_error(store, **kwargs):
    before = _snapshot(os.path.dirname(store))
    try:
        td = load_memmap(store, **kwargs)
    except LOAD_ERRORS as err:
        assert str(err)
        td = None
    else:
        _check_well_formed(td)
    assert _snapshot(os.path.dirname(store)) == before, "loading wrote to disk"
    return td


def _meta_files(store) -> list:
    return sorted(os.path.relpath(os.path.join(d, "meta.json"), store) for d, _, f in os.walk(store) if "meta.json" in f)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace(obj, path, value):
    if not path:
        return value
    out = dict(obj) if isinstance(obj, dict) else list(obj)
    out[path[0]] = _replace(obj[path[0]], path[1:], value)
    return out


# ---------------------------------------------------------------------- property: round trips
_SUB = "sub-tree"  # the nested TensorDict of the hostile-keys test (never drawn as a key)
@pytest.mark.timeout(120)
@given(td=tensordicts(non_tensor=st.one_of(st.text(max_size=5), st.integers(-5, 5), st.none())))
def test_fuzz_property_memmap_load_round_trip(td, tmp_path_factory):
    work = tmp_path_factory.mktemp("rt")
    mm = td.memmap(work / "store")
    # memory maps live on the cpu: the copy and the load say device=cpu, as tensordict 0.15
    assert_td_equal(mm, td, check_type=False, check_device=td.device is not None)
    assert_td_equal(load_memmap(work / "store"), td, check_type=False, check_device=td.device is not None)
    assert mm.device == torch.device("cpu")
    assert os.listdir(work) == ["store"]


@pytest.mark.timeout(120)
@given(keys=st.lists(st.one_of(st.sampled_from(_HOSTILE_KEYS), st.text(min_size=0, max_size=12)),
                     min_size=1, max_size=6, unique=True).filter(lambda ks: _SUB not in ks))
def test_fuzz_hostile_keys_round_trip_inside_the_prefix(keys, tmp_path_factory):
    work = tmp_path_factory.mktemp("keys")
    td = TensorDict({k: torch.full((2,), float(i)) for i, k in enumerate(keys)}, [2])
    td[_SUB] = TensorDict({k: torch.full((2,), -float(i)) for i, k in enumerate(keys)}, [2])
    td.memmap(work / "store")
    assert os.listdir(work) == ["store"]
    for rel in _files(work / "store"):
        real = os.path.realpath(work / "store" / rel)
        assert real.startswith(str(work / "store") + os.sep), rel
    back = load_memmap(work / "store")
    assert sorted(back.keys()) == sorted(td.keys())
    for i, k in enumerate(keys):
        assert back[k].tolist() == [float(i)] * 2
        assert back[_SUB, k].tolist() == [-float(i)] * 2


# ---------------------------------------------------------------------- untrusted stores
@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_hostile_metadata_values(data, pristine, tmp_path_factory):
    store = _copy(pristine, tmp_path_factory, "meta")
    rel = data.draw(st.sampled_from(_meta_files(store)))
    meta = json.loads((store / rel).read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from(list(_paths(meta))))
        meta = _replace(meta, target, data.draw(_json_values))
    (store / rel).write_text(json.dumps(meta))
    _load_or_error(store)


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_metadata_bytes_flipped_or_cut(data, pristine, tmp_path_factory):
    store = _copy(pristine, tmp_path_factory, "bytes")
    rel = data.draw(st.sampled_from(_meta_files(store)))
    raw = bytearray((store / rel).read_bytes())
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    (store / rel).write_bytes(bytes(raw))
    _load_or_error(store)


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_data_files_of_the_wrong_size(data, pristine, tmp_path_factory):
    store = _copy(pristine, tmp_path_factory, "size")
    files = [f for f in _files(store) if f.endswith(".memmap")]
    rel = data.draw(st.sampled_from(files))
    size = os.path.getsize(store / rel)
    new_size = data.draw(st.integers(0, size * 2 + 8).filter(lambda n: n != size))
    with open(store / rel, "r+b") as f:
        f.truncate(new_size)
    td = _load_or_error(store)
    assert td is None, f"{rel} resized from {size} to {new_size} bytes and the store still loaded"


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_symlinks_out_of_the_prefix(data, pristine, tmp_path_factory):
    """Any member (data file, sub-folder, a ``meta.json``) turned into a link out of the store is refused.

    Refused means an error that says the link leads outside, raised before the
    target is read: an error about the target's content would mean it was read.
    """
    store = _copy(pristine, tmp_path_factory, "link")
    outside = pristine / "outside"
    rel = data.draw(st.sampled_from(_files(store)))
    target = data.draw(st.sampled_from([
        outside / "secret.memmap", outside / "other_store", outside / "other_store" / "meta.json",
        outside / "other_store" / rel, "/etc/passwd", "/etc",
    ]))
    path = store / rel
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    os.symlink(target, path)
    before = _snapshot(pristine / "outside")
    try:
        td = load_memmap(store)
    except LOAD_ERRORS as err:
        assert "outside" in str(err), f"{rel} -> {target}: not refused as a link out of the store: {err}"
    else:
        _check_well_formed(td)
        pytest.fail(f"{rel} -> {target}: a store with a link out of the prefix loaded")
    assert _snapshot(pristine / "outside") == before


_DEVICE_LINKS = [(rel, target) for rel in ("meta.json", "n/meta.json", "a.memmap")
                 for target in ("/dev/zero", "/dev/urandom", "/proc/self/mem")]

_DEVICE_LINK_CHILD = """
import json, os, resource, sys, torch
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from tensordict import TensorDict
from tensordict.memmap import load_memmap
root = sys.argv[1]
for i, (rel, target) in enumerate(json.loads(sys.argv[2])):
    store = os.path.join(root, str(i))
    TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3]).memmap(store)
    os.unlink(os.path.join(store, rel))
    os.symlink(target, os.path.join(store, rel))
    print(json.dumps({"start": [rel, target]}), flush=True)
    try:
        load_memmap(store)
    except (RuntimeError, FileNotFoundError) as err:
        out = "error: " + type(err).__name__
    except BaseException as err:
        out = "undocumented: " + type(err).__name__ + ": " + str(err)[:200]
    else:
        out = "loaded"
    print(json.dumps({"result": [rel, target, out]}), flush=True)
"""


@pytest.fixture(scope="module")
def device_link_outcomes(tmp_path_factory):
    """Loads a store with each member linked to an endless device, in one child process
    (memory capped at 3 GiB, so reading such a file cannot take the machine down)."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("devices")
    res = subprocess.run([sys.executable, "-c", _DEVICE_LINK_CHILD, str(root), json.dumps(_DEVICE_LINKS)],
                         capture_output=True, text=True, timeout=200)
    out = {}
    last = None
    for line in res.stdout.splitlines():
        msg = json.loads(line)
        if "start" in msg:
            last = tuple(msg["start"])
        else:
            out[tuple(msg["result"][:2])] = msg["result"][2]
            last = None
    if last is not None:
        out[last] = f"crashed (exit {res.returncode}): {res.stderr[-300:]}"
    return out


@pytest.mark.timeout(240)
@pytest.mark.parametrize("rel,target", _DEVICE_LINKS)
def test_link_to_a_device_is_refused_without_reading_it(device_link_outcomes, rel, target):
    """A link to an endless device gives a documented error at once, not a read until memory runs out."""
    outcome = device_link_outcomes.get((rel, target), "not run (an earlier case crashed the child)")
    assert outcome.startswith("error"), f"{rel} -> {target}: {outcome}"


def test_store_reached_through_a_symlinked_prefix_loads(pristine, tmp_path):
    # the prefix itself may be a link: only what the store's folder holds is checked
    os.symlink(pristine / "store", tmp_path / "alias")
    assert_td_equal(load_memmap(tmp_path / "alias", allow_pickle=True), load_memmap(pristine / "store"))


class _Marker:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_pickled_payload_runs_only_with_allow_pickle(data, tmp_path_factory):
    work = tmp_path_factory.mktemp("pkl")
    marker = work / "executed"
    where = data.draw(st.sampled_from(["root", "nested"]))
    kind = data.draw(st.sampled_from(["data", "stack"]))
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
    value = _Marker(marker)
    leaf = NonTensorData(value, [2]) if kind == "data" else NonTensorStack(value, _Marker(marker))
    td.set("p" if where == "root" else ("n", "p"), leaf)
    marker.touch()  # saving pickles the payload; only loading must not run it
    td.memmap(work / "store")
    marker.unlink()
    with pytest.raises(RuntimeError, match="allow_pickle"):
        load_memmap(work / "store")
    assert not marker.exists(), "a pickled payload ran without allow_pickle=True"
    # the same store with explicit opt-in does unpickle (so the check above can fail)
    load_memmap(work / "store", allow_pickle=True)
    assert marker.exists()


@pytest.mark.parametrize("hostile", [
    {"encoding": "pickle", "file": "../../evil.pkl"},
    {"encoding": "pickle", "file": "/tmp/evil.pkl"},
    {"encoding": "py", "value": "__import__('os').system('touch EXECUTED')"},
    {"encoding": "json", "value": {"__reduce__": ["os.system", ["touch EXECUTED"]]}},
])
def test_metadata_cannot_smuggle_code_or_outside_pickles(tmp_path, hostile):
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(_Marker(tmp_path / "EXECUTED")))
    td = TensorDict({"a": torch.zeros(2), "s": NonTensorData("x")}, [2])
    td.memmap(tmp_path / "sub" / "store")
    store = tmp_path / "sub" / "store"
    meta = json.loads((store / "meta.json").read_text())
    for entry in meta["entries"]:
        if entry["key"] == "s":
            entry.pop("value", None)
            entry.update(hostile)
    (store / "meta.json").write_text(json.dumps(meta))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for allow in (False, True):
            try:
                out = load_memmap(store, allow_pickle=allow)
            except LOAD_ERRORS:
                out = None
            if out is not None:
                repr(out)
                out.to_dict()
            assert not (tmp_path / "EXECUTED").exists(), f"code ran (allow_pickle={allow})"
    finally:
        os.chdir(cwd)
