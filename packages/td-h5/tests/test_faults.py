"""Faults and untrusted input for td-h5 (``to_h5`` / ``from_h5`` / ``PersistentTensorDict``).

Fault injection: a long-lived child process (``tensordict.testing.crash.ForkServer``,
torch and h5py imported once) forks one writer per trial; each writer writes generation ``g`` of a TensorDict with ``to_h5``
over the file that holds ``g - 1`` (or replaces one entry in place in mode ``"r+"``)
and is killed with SIGKILL at a chosen call (a ``sys.setprofile`` counter, uniform
over a whole write) or after a random delay. The file must then open with every leaf
holding the old or the new generation, or fail with a clear error; never other data.
Disk full (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored) must fail clearly and keep the
earlier file. Outcome counts are printed (``pytest -s``).

Untrusted input: truncated files, flipped bytes (loaded in a child process, so an
HDF5 library crash is reported instead of killing the test run), hostile metadata
attributes, links and external storage pointing outside the file, and pickled
payloads: each opens as a well-formed TensorDict or raises a documented error.

Property: ``to_h5`` then ``from_h5(...).to_tensordict()`` is the identity on random
nested TensorDicts.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

h5py = pytest.importorskip("h5py")
pytest.importorskip("tensordict.persistent")

import numpy as np  # noqa: E402

from tensordict import NonTensorData, TensorDict, TensorDictBase  # noqa: E402
from tensordict.persistent import PersistentTensorDict  # noqa: E402
from tensordict.testing.crash import ForkServer  # noqa: E402
from tensordict.testing.strategies import (  # noqa: E402
    CI_MAX_EXAMPLES,
    assert_td_equal,
    register_profiles,
    tensordicts,
)

PROFILE = register_profiles()

SEED = 424242
SAVE_TRIALS = 16
INPLACE_TRIALS = 8
FIRST_SAVE_TRIALS = 6
#: what opening a file documents (``FileNotFoundError`` is an ``OSError``)
OPEN_ERRORS = (OSError, ValueError, RuntimeError, KeyError, TypeError)

# run once in the fork server (``tensordict.testing.crash``): what each writer does
_SETUP = r'''
import torch
torch.set_num_threads(1)
import h5py
from tensordict import NonTensorData, TensorDict
from tensordict.persistent import PersistentTensorDict

def make(gen):
    return TensorDict(
        {"a": torch.full((16, 256), float(gen)), "b": torch.full((16,), gen, dtype=torch.int64),
         "nested": {"c": torch.full((16, 8), float(gen), dtype=torch.float64),
                    "d": torch.full((16, 3), gen % 2 == 1)},
         "gen": NonTensorData(gen)},
        [16],
    )

def prepare(cmd):
    return make(cmd["gen"])

def write(cmd, td):
    if cmd["op"] == "save":
        td.to_h5(cmd["path"]).close()
    else:  # replace one entry in place, as a training loop updating a file would
        with PersistentTensorDict.from_h5(cmd["path"], mode="r+") as f:
            f["a"] = td["a"]
'''


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    with ForkServer(_SETUP, tmp_path_factory.mktemp("zygote") / "stderr.log") as server:
        yield server


def _expected(gen: int) -> dict:
    return {
        ("a",): torch.full((16, 256), float(gen)),
        ("b",): torch.full((16,), gen, dtype=torch.int64),
        ("nested", "c"): torch.full((16, 8), float(gen), dtype=torch.float64),
        ("nested", "d"): torch.full((16, 3), gen % 2 == 1),
    }


def _read(path) -> TensorDict:
    with PersistentTensorDict.from_h5(path) as f:
        return f.to_tensordict()


def _leaf_or_non_tensor(cls) -> bool:
    return not issubclass(cls, TensorDictBase) or issubclass(cls, NonTensorData)


def _generation(td) -> int:
    """The one generation all leaves hold (fails on a mix, a missing key or other values)."""
    gen = td["gen"]
    assert isinstance(gen, int), f"gen is {gen!r}"
    keys = sorted(tuple(k) if isinstance(k, tuple) else (k,) for k in td.keys(True, True, is_leaf=_leaf_or_non_tensor))
    assert keys == sorted([*_expected(gen), ("gen",)]), f"keys {keys}"
    for key, value in _expected(gen).items():
        assert torch.equal(td.get(key), value), f"{key}: wrong data for generation {gen}"
    return gen


def _outcome(path, old: int | None, new: int, inplace: bool = False) -> str:
    try:
        td = _read(path)
    except FileNotFoundError:
        assert old is None, "the earlier complete file vanished"
        return "absent"
    except OPEN_ERRORS as err:
        assert str(err), "an error without a message"
        return "error: " + type(err).__name__
    if inplace:  # only "a" is rewritten: it holds the old or the new generation, the rest is old
        a = td["a"]
        rest = _generation(td.exclude("a").set("a", _expected(old)[("a",)]))
        assert rest == old
        if torch.equal(a, _expected(new)[("a",)]):
            return "new"
        assert torch.equal(a, _expected(old)[("a",)]), "'a' holds neither the old nor the new values"
        return "old"
    gen = _generation(td)
    assert gen in (old, new), f"the file holds generation {gen}, expected {old} or {new}"
    return "old" if gen == old else "new"


def _calibrate(zygote, tmp_path, op: str) -> int:
    path = str(tmp_path / f"calib_{op}.h5")
    assert zygote.run({"op": "save", "path": path, "gen": 0})["report"]["ok"]
    res = zygote.run({"op": op, "path": path, "gen": 1})
    assert res["signal"] == 0 and res["report"]["ok"], res
    return res["report"]["events"]


@pytest.mark.timeout(240)
def test_sigkill_during_to_h5_over_an_earlier_file(zygote, tmp_path):
    rng = random.Random(SEED)
    total = _calibrate(zygote, tmp_path, "save")
    path = tmp_path / "data.h5"
    assert zygote.run({"op": "save", "path": str(path), "gen": 1})["report"]["ok"]
    old = 1
    counts: Counter = Counter()
    for trial in range(SAVE_TRIALS):
        new = old + 1
        if trial % 4 == 3:
            res = zygote.run({"op": "save", "path": str(path), "gen": new}, kill_after=rng.uniform(0.0, 0.05))
        else:
            res = zygote.run({"op": "save", "path": str(path), "gen": new, "kill_at": rng.randint(1, total + 50)})
        killed = res["signal"] == 9
        outcome = _outcome(path, old, new)
        assert outcome in ("old", "new"), f"a killed to_h5 must leave the earlier complete file: {outcome}"
        counts[("killed " if killed else "finished ") + outcome] += 1
        if outcome == "new":
            old = new
    leftovers = sorted(e for e in os.listdir(tmp_path) if e.endswith(".tmp"))
    print(f"\n[faults/h5 to_h5 re-save] {SAVE_TRIALS} trials ({total} profile events per write): "
          f"{dict(sorted(counts.items()))}; temporary files left by killed writers: {len(leftovers)}")


@pytest.mark.timeout(240)
def test_sigkill_during_in_place_replacement(zygote, tmp_path):
    rng = random.Random(SEED + 1)
    total = _calibrate(zygote, tmp_path, "inplace")
    counts: Counter = Counter()
    for trial in range(INPLACE_TRIALS):
        path = tmp_path / f"inplace{trial}.h5"
        assert zygote.run({"op": "save", "path": str(path), "gen": 1})["report"]["ok"]
        res = zygote.run({"op": "inplace", "path": str(path), "gen": 2, "kill_at": rng.randint(1, total + 50)})
        outcome = _outcome(path, 1, 2, inplace=True)
        counts[("killed " if res["signal"] == 9 else "finished ") + outcome] += 1
    print(f"\n[faults/h5 in-place set] {INPLACE_TRIALS} trials ({total} profile events per write): "
          f"{dict(sorted(counts.items()))}")


@pytest.mark.timeout(120)
def test_sigkill_during_a_first_to_h5(zygote, tmp_path):
    rng = random.Random(SEED + 2)
    total = _calibrate(zygote, tmp_path, "save")
    counts: Counter = Counter()
    messages: set = set()
    unclear: list = []
    for trial in range(FIRST_SAVE_TRIALS):
        path = tmp_path / f"fresh{trial}.h5"
        res = zygote.run({"op": "save", "path": str(path), "gen": 5, "kill_at": rng.randint(1, total + 50)})
        outcome = _outcome(path, None, 5)
        if outcome.startswith("error"):
            try:
                _read(path)
            except OPEN_ERRORS as err:
                messages.add(str(err)[-120:])
                # a half-written first file must be reported as such (or not be there at all)
                if not any(w in str(err) for w in ("incomplete", "interrupted", "truncated", "damaged")):
                    unclear.append(str(err))
        counts[("killed " if res["signal"] == 9 else "finished ") + outcome] += 1
    print(f"\n[faults/h5 first to_h5] {FIRST_SAVE_TRIALS} trials: {dict(sorted(counts.items()))}; errors: {messages}")
    assert not unclear, f"a killed first to_h5 left a file whose error does not say it is incomplete: {unclear[0]}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("limit", [1, 3000, 12_000])
def test_disk_full_gives_a_clear_error_and_keeps_the_file(zygote, tmp_path, limit):
    path = tmp_path / "data.h5"
    assert zygote.run({"op": "save", "path": str(path), "gen": 1})["report"]["ok"]
    res = zygote.run({"op": "save", "path": str(path), "gen": 2, "fsize": limit})
    report = res["report"] or {}
    print(f"\n[faults/h5 disk full, RLIMIT_FSIZE={limit}] signal {res['signal']}, "
          f"{report.get('type')}: {report.get('msg', '')[:200]}")
    assert _generation(_read(path)) == 1, "the earlier file was damaged"
    assert res["signal"] == 0, f"the writer crashed (signal {res['signal']}) instead of raising"
    assert not report["ok"], "a write larger than the file-size limit succeeded"
    assert report["type"] in ("OSError", "RuntimeError", "ValueError"), report
    assert report["msg"], report
    assert sorted(os.listdir(tmp_path)) == ["data.h5"], "the failed write left files behind"


# ---------------------------------------------------------------------- property: round trip
_H5_STRINGS = st.binary(min_size=1, max_size=6)  # byte strings round-trip exactly (a str comes back as bytes)


@pytest.mark.timeout(120)
@given(td=tensordicts(non_tensor=_H5_STRINGS, nested_extra_dims=False))
def test_property_to_h5_from_h5_round_trip(td, tmp_path_factory):
    path = tmp_path_factory.mktemp("rt") / "x.h5"
    td.to_h5(path).close()
    assert_td_equal(_read(path), td)


# ---------------------------------------------------------------------- untrusted files
@pytest.fixture(scope="module")
def valid_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("valid") / "v.h5"
    TensorDict(
        {"a": torch.arange(24.0).view(4, 6), "b": {"c": torch.arange(4), "s": "text"},
         "h": torch.ones(4, 2, dtype=torch.bfloat16)},
        [4],
    ).to_h5(path).close()
    return path


_CORRUPT_READER = textwrap.dedent(
    r'''
    import json, sys
    from tensordict.persistent import PersistentTensorDict
    for path in sys.argv[1:]:
        print(json.dumps({"start": path}), flush=True)
        try:
            with PersistentTensorDict.from_h5(path) as f:
                td = f.to_tensordict()
                repr(td)
            out = {"loaded": True}
        except (OSError, ValueError, RuntimeError, KeyError, TypeError) as err:
            out = {"loaded": False, "type": type(err).__name__, "msg": str(err)[:300]}
        except BaseException as err:
            out = {"loaded": False, "undocumented": type(err).__name__, "msg": str(err)[:300]}
        print(json.dumps(out), flush=True)
    '''
)


@pytest.mark.timeout(300)
def test_fuzz_corrupted_h5_bytes_in_a_child(valid_file, tmp_path):
    """Truncated files and flipped bytes: a documented error or a load, never a crash or a hang."""
    rng = random.Random(SEED + 3)
    raw = valid_file.read_bytes()
    n = 2 * CI_MAX_EXAMPLES if PROFILE == "ci" else 400
    paths = []
    for i in range(n):
        data = bytearray(raw)
        if i % 3 == 0:
            data = data[: rng.randint(0, len(data) - 1)]
        else:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        path = tmp_path / f"c{i}.h5"
        path.write_bytes(bytes(data))
        paths.append(str(path))
    res = subprocess.run([sys.executable, "-c", _CORRUPT_READER, *paths], capture_output=True, text=True, timeout=280)
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    started = [x["start"] for x in lines if "start" in x]
    results = [x for x in lines if "start" not in x]
    assert res.returncode == 0, (
        f"the HDF5 reader crashed (exit {res.returncode}) on {started[-1] if started else '?'}: {res.stderr[-600:]}"
    )
    assert len(results) == n
    counts = Counter("loaded" if r["loaded"] else r.get("type") or "undocumented " + r["undocumented"]
                     for r in results)
    print(f"\n[fuzz/h5 corrupted bytes] {n} files: {dict(sorted(counts.items()))}")
    undocumented = [(p, r) for p, r in zip(paths, results) if "undocumented" in r]
    assert not undocumented, undocumented[:3]


def _open_or_error(path):
    try:
        with PersistentTensorDict.from_h5(path) as f:
            td = f.to_tensordict()
    except OPEN_ERRORS as err:
        assert str(err)
        return None
    repr(td)
    return td


_hostile_attr_values = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.lists(st.integers(-5, 2**40), max_size=4).map(lambda v: np.array(v, dtype=np.int64)),
    st.sampled_from(["float32", "object", "bfloat16", "os.system", "", "../x", "non_tensor_stack", "pickle"]),
    st.binary(min_size=1, max_size=16).map(np.void),
    st.floats(allow_nan=True).map(np.float64),
)


@pytest.mark.timeout(120)
@given(data=st.data())
def test_fuzz_hostile_attributes(data, valid_file, tmp_path_factory):
    path = tmp_path_factory.mktemp("attr") / "h.h5"
    path.write_bytes(valid_file.read_bytes())
    with h5py.File(path, "r+") as f:
        objects = ["/", "/a", "/b", "/b/c", "/h"]
        for _ in range(data.draw(st.integers(1, 3))):
            where = data.draw(st.sampled_from(objects))
            name = data.draw(st.sampled_from(["_td_batch_size", "_td_names", "_td_dtype", "_td_type", "s", "x"]))
            f[where].attrs[name] = data.draw(_hostile_attr_values)
    _open_or_error(path)


def _external_link(f, secret, other):
    f["e"] = h5py.ExternalLink(str(other), "/x")


def _external_storage(f, secret, other):
    f.create_dataset("e", shape=(4,), dtype=np.float32, external=[(str(secret), 0, h5py.h5f.UNLIMITED)])


def _virtual_dataset(f, secret, other):
    f.create_virtual_dataset("e", _virtual_layout(other))


@pytest.mark.parametrize("build", [_external_link, _external_storage, _virtual_dataset],
                         ids=["external_link", "external_storage", "virtual_dataset"])
def test_links_and_external_storage_out_of_the_file_are_not_followed(tmp_path, build):
    """External links, external raw storage and virtual datasets reach outside the file: refused."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.full((4,), 7.0, dtype=np.float32).tobytes())
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.full((4,), 7.0, dtype=np.float32)
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.zeros((4,), dtype=np.float32)
        build(f, secret, other)
    td = _open_or_error(path)
    if td is not None:
        assert "e" not in td.keys(), "data outside the file was read into the TensorDict"


def _virtual_layout(other):
    layout = h5py.VirtualLayout(shape=(4,), dtype=np.float32)
    layout[:] = h5py.VirtualSource(str(other), "x", shape=(4,))
    return layout


class _Marker:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_payloads_in_a_file_are_never_run(tmp_path):
    marker = tmp_path / "executed"
    payload = pickle.dumps(_Marker(marker))
    path = tmp_path / "p.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.zeros((2,), dtype=np.float32)
        f.attrs["_td_batch_size"] = np.array([2])
        f.attrs["obj"] = np.void(payload)
        f["opaque"] = np.frombuffer(payload, dtype=np.uint8)[None].repeat(2, 0)
        f["opaque"].attrs["_td_type"] = "pickle"
        f["void"] = np.array([np.void(payload)] * 2)
        f.create_group("g").attrs["_td_type"] = "pickle"
        f["g"].attrs["value"] = np.void(payload)
    td = _open_or_error(path)
    if td is not None:
        repr(td)
        td.to_dict()
    assert not marker.exists(), "a pickled payload in an HDF5 file was executed"
