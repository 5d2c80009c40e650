"""Fault injection for td-memmap: SIGKILL at random points of a save, and disk full.

A long-lived child process (``tensordict.testing.crash.ForkServer``, torch imported
once) forks one writer per trial. The writer saves generation ``g`` of a TensorDict over the store
that holds generation ``g - 1`` and is killed with SIGKILL either

- at a chosen *event*: a ``sys.setprofile`` hook counts Python and C calls and kills
  the process at call number ``k``, with ``k`` drawn uniformly over a whole save
  (deterministic, spread over every phase: planning, writing, metadata, publish), or
- after a random *delay* from outside (anywhere, including inside a system call).

After each trial the store must load with every leaf holding the old or the new
generation (never a mix, never other values), or raise an error saying the store is
incomplete. Disk full (``RLIMIT_FSIZE`` in the writer, ``SIGXFSZ`` ignored so writes
fail with ``OSError``) must raise a clear error and leave the earlier store intact.
Outcome counts are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import random
import time
import warnings
from collections import Counter

import pytest
import torch

pytest.importorskip("tensordict.memmap")

from tensordict import NonTensorData, TensorDict, TensorDictBase  # noqa: E402
from tensordict.memmap import load_memmap  # noqa: E402
from tensordict.testing.crash import ForkServer  # noqa: E402

SEED = 20240607
EVENT_TRIALS = 24
DELAY_TRIALS = 10
FIRST_SAVE_TRIALS = 6

# run once in the fork server (``tensordict.testing.crash``): what each writer does
_SETUP = r'''
import torch
torch.set_num_threads(1)
from tensordict import NonTensorData, TensorDict
import tensordict.memmap

def make(gen):
    g = float(gen)
    return TensorDict(
        {"a": torch.full((16, 512), g), "b": torch.full((16,), gen, dtype=torch.int64),
         "nested": {"c": torch.full((16, 8), g, dtype=torch.float64),
                    "deeper": {"d": torch.full((16, 3), gen % 2 == 1)}},
         "gen": NonTensorData(gen), "label": NonTensorData(f"gen-{gen}")},
        [16],
    )

try:  # test instrumentation: where in the event stream the publish step runs
    from tensordict.memmap import _store
    _commit = _store.Staging.commit
    def _marked_commit(self, *args, **kwargs):
        MARKS["commit_start"] = STATE[0]
        _commit(self, *args, **kwargs)
        MARKS["commit_end"] = STATE[0]
    _store.Staging.commit = _marked_commit
except (ImportError, AttributeError):
    pass

def prepare(cmd):
    return make(cmd["gen"])

def write(cmd, td):
    td.memmap(cmd["prefix"])

def after(cmd):
    try:  # what a normal exit does (atexit): wait for the replaced tree to be deleted
        from tensordict.memmap._store import wait_cleanup
        wait_cleanup()
    except ImportError:
        pass
'''


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    with ForkServer(_SETUP, tmp_path_factory.mktemp("zygote") / "stderr.log") as server:
        yield server


def _generation(td) -> int:
    """The one generation every leaf of a loaded store holds (fails on a mix or on other values)."""
    gen = td["gen"]
    gen = gen.data if hasattr(gen, "data") else gen
    assert isinstance(gen, int), f"gen is {gen!r}"
    assert td["label"] == f"gen-{gen}" or getattr(td["label"], "data", None) == f"gen-{gen}"
    expected = {
        "a": torch.full((16, 512), float(gen)),
        "b": torch.full((16,), gen, dtype=torch.int64),
        ("nested", "c"): torch.full((16, 8), float(gen), dtype=torch.float64),
        ("nested", "deeper", "d"): torch.full((16, 3), gen % 2 == 1),
    }
    leaf = lambda cls: not issubclass(cls, TensorDictBase) or issubclass(cls, NonTensorData)  # noqa: E731
    assert sorted(map(str, td.keys(True, True, is_leaf=leaf))) == sorted(
        map(str, [*expected, "gen", "label"])
    ), "keys changed"
    for key, value in expected.items():
        got = td.get(key)
        assert got.dtype == value.dtype and got.shape == value.shape, key
        assert torch.equal(got.clone(), value), f"{key}: wrong data for generation {gen}"
    return gen


def _outcome(prefix, old: int | None, new: int) -> str:
    """``"old"``, ``"new"``, ``"incomplete"`` or ``"absent"``; fails on anything else."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            td = load_memmap(prefix)
        except RuntimeError as err:
            assert "incomplete" in str(err), f"unclear error: {err}"
            return "incomplete"
        except FileNotFoundError:
            assert old is None, "the earlier complete store vanished"
            return "absent"
    gen = _generation(td)
    assert gen in (old, new), f"store holds generation {gen}, expected {old} or {new}"
    recovered = any("interrupted" in str(w.message) for w in caught)
    return ("old" if gen == old else "new") + ("(recovered)" if recovered else "")


def _calibrate(zygote, tmp_path) -> tuple[int, int]:
    """``(events in a re-save, event at which publishing starts)`` measured on a real re-save."""
    res = zygote.run({"prefix": str(tmp_path / "calib"), "gen": 0})
    res2 = zygote.run({"prefix": str(tmp_path / "calib"), "gen": 1})  # a re-save: the path we kill
    assert res["signal"] == 0 and res["report"]["ok"] and res2["report"]["ok"], (res, res2)
    total = res2["report"]["events"]
    return total, res2["report"].get("commit_start", 1)


def _kill_point(rng, total: int, publish: int, trial: int) -> int:
    """Every other trial anywhere in the save; the others in the publish step and after it."""
    if trial % 2:
        return rng.randint(max(1, publish - 50), total + 100)
    return rng.randint(1, total)


@pytest.mark.timeout(240)
def test_sigkill_at_random_points_of_a_resave(zygote, tmp_path):
    rng = random.Random(SEED)
    total, publish = _calibrate(zygote, tmp_path)
    prefix = tmp_path / "store"
    start = zygote.run({"prefix": str(prefix), "gen": 1})
    assert start["report"]["ok"]
    old = 1
    counts: Counter = Counter()
    t0 = time.monotonic()
    for trial in range(EVENT_TRIALS + DELAY_TRIALS):
        new = old + 1
        if trial < EVENT_TRIALS:
            res = zygote.run({"prefix": str(prefix), "gen": new, "kill_at": _kill_point(rng, total, publish, trial)})
        else:
            res = zygote.run({"prefix": str(prefix), "gen": new}, kill_after=rng.uniform(0.0, 0.05))
        killed = res["signal"] == 9
        if not killed:
            assert res["report"]["ok"], res
        outcome = _outcome(prefix, old, new)
        assert outcome != "incomplete", "a killed re-save must leave the earlier complete store"
        counts[("killed " if killed else "finished ") + outcome] += 1
        if outcome.startswith("new"):
            old = new
    elapsed = time.monotonic() - t0
    print(f"\n[faults/memmap re-save] {sum(counts.values())} trials ({total} profile events per save, publish "
          f"from event {publish}, "
          f"{elapsed:.1f}s): {dict(sorted(counts.items()))}")
    assert sum(counts.values()) == EVENT_TRIALS + DELAY_TRIALS
    # the next save after all those kills is complete and cleans up what the killed writers left
    res = zygote.run({"prefix": str(prefix), "gen": 999})
    assert res["report"]["ok"]
    assert _generation(load_memmap(prefix)) == 999
    from tensordict.memmap._store import wait_cleanup

    wait_cleanup()
    assert sorted(os.listdir(tmp_path)) == ["calib", "store"], os.listdir(tmp_path)


@pytest.mark.timeout(120)
def test_sigkill_during_a_first_save(zygote, tmp_path):
    rng = random.Random(SEED + 1)
    total, publish = _calibrate(zygote, tmp_path)
    counts: Counter = Counter()
    for trial in range(FIRST_SAVE_TRIALS):
        prefix = tmp_path / f"fresh{trial}"
        res = zygote.run({"prefix": str(prefix), "gen": 5, "kill_at": _kill_point(rng, total, publish, trial)})
        outcome = _outcome(prefix, None, 5)
        counts[("killed " if res["signal"] == 9 else "finished ") + outcome] += 1
    print(f"\n[faults/memmap first save] {FIRST_SAVE_TRIALS} trials: {dict(sorted(counts.items()))}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("limit", [0, 4096, 20_000])
def test_disk_full_gives_a_clear_error_and_keeps_the_store(zygote, tmp_path, limit):
    prefix = tmp_path / "store"
    assert zygote.run({"prefix": str(prefix), "gen": 1})["report"]["ok"]
    res = zygote.run({"prefix": str(prefix), "gen": 2, "fsize": limit or 1})
    assert res["signal"] == 0, f"the writer died of signal {res['signal']}"
    report = res["report"]
    print(f"\n[faults/memmap disk full, RLIMIT_FSIZE={limit or 1}] {report.get('type')}: {report.get('msg')}")
    assert not report["ok"], "a save larger than the file-size limit succeeded"
    assert report["type"] in ("OSError", "RuntimeError"), report
    # a clear error says which file or store could not be written, not only "[Errno 27] File too large"
    assert str(prefix) in report["msg"] or "store" in report["msg"], f"the error does not name the store: {report}"
    assert _generation(load_memmap(prefix)) == 1
    assert sorted(os.listdir(tmp_path)) == ["store"], "the failed save left files behind"


def test_incomplete_error_names_the_store(tmp_path):
    # a data file cut short after the save: the loader says so instead of mapping it
    prefix = tmp_path / "store"
    td = TensorDict({"a": torch.ones(4, 4), "gen": NonTensorData(1)}, [4])
    td.memmap(prefix)
    path = prefix / "a.memmap"
    with open(path, "r+b") as f:
        f.truncate(10)
    with pytest.raises(RuntimeError, match="truncated"):
        load_memmap(prefix)
