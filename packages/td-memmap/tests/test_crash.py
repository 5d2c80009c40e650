"""Crash safety: a process killed (SIGKILL) at a random moment of a save never
leaves a store that loads wrong: the earlier save stays loadable, a first save
is either complete or reported as incomplete."""

import os
import random
import signal
import time

import pytest
import torch
import torch.multiprocessing as mp

from tensordict import NonTensorData, TensorDict
from tensordict.memmap import load_memmap
from tensordict.memmap._store import wait_cleanup

_WRITER = """
import torch
from tensordict import NonTensorData, TensorDict
td = TensorDict(
    {**{f"k{i}": torch.zeros(256, 512) for i in range(6)},
     "nested": {"x": torch.zeros(256, 64), "deeper": {"y": torch.zeros(256)}}},
    [256],
)
leaves = [v for v in td.values(True, True) if isinstance(v, torch.Tensor)]
gen = start
ready.value = 1
while True:
    gen += 1
    for leaf in leaves:
        leaf.fill_(float(gen))
    td["tag"] = NonTensorData((gen, "t"))
    td.memmap(prefix, num_threads=2)
    done.value = gen
"""


def _make(gen):
    return TensorDict(
        {**{f"k{i}": torch.full((256, 512), float(gen)) for i in range(6)},
         "nested": {"x": torch.full((256, 64), float(gen)), "deeper": {"y": torch.full((256,), float(gen))}},
         "tag": NonTensorData((gen, "t"))},
        [256],
    )


def _generation(td):
    """The single generation every leaf of ``td`` holds (fails on a mix)."""
    values = {float(v.unique().item()) for v in td.values(True, True) if isinstance(v, torch.Tensor)}
    assert len(values) == 1, f"inconsistent store: {values}"
    gen = int(values.pop())
    assert td["tag"] == (gen, "t")
    return gen


def _kill_writer(ctx, prefix, start, delay):
    """Starts a writer saving generation after generation into ``prefix``; kills it
    ``delay`` seconds after it starts writing. Returns the last generation it finished."""
    done = ctx.Value("i", -1)
    ready = ctx.Value("i", 0)
    env = {"prefix": str(prefix), "start": start, "done": done, "ready": ready}
    proc = ctx.Process(target=exec, args=(_WRITER, env))
    proc.start()
    deadline = time.monotonic() + 60
    while not ready.value and time.monotonic() < deadline and proc.is_alive():
        time.sleep(0.002)
    assert ready.value, "the writer did not start"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL
    return done.value


@pytest.fixture(scope="module")
def ctx():
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["torch", "tensordict", "tensordict.memmap"])
    return context


@pytest.mark.timeout(120)
def test_sigkill_during_resave_keeps_a_complete_save(tmp_path, ctx):
    rng = random.Random(1234)
    prefix = tmp_path / "store"
    _make(0).memmap(prefix)
    for trial in range(10):
        start = (trial + 1) * 1000
        before = _generation(load_memmap(prefix, allow_pickle=True))
        last_done = _kill_writer(ctx, prefix, start, rng.uniform(0.0, 0.6))
        gen = _generation(load_memmap(prefix, allow_pickle=True))
        # either the earlier save, the last save the writer finished, or the one it had just committed
        assert gen in {before, last_done, last_done + 1, start + 1}, (gen, before, last_done)
    # the next save cleans the folders the killed writers left next to the store
    _make(7).memmap(prefix)
    assert _generation(load_memmap(prefix, allow_pickle=True)) == 7
    wait_cleanup()
    assert sorted(os.listdir(tmp_path)) == ["store"]


@pytest.mark.timeout(120)
def test_sigkill_during_first_save_is_complete_or_incomplete(tmp_path, ctx):
    rng = random.Random(99)
    outcomes = set()
    for trial in range(4):
        prefix = tmp_path / f"fresh{trial}"
        _kill_writer(ctx, prefix, 0, rng.uniform(0.0, 0.3))
        try:
            td = load_memmap(prefix, allow_pickle=True)
        except RuntimeError as err:
            assert "incomplete" in str(err)
            outcomes.add("incomplete")
        except FileNotFoundError:
            outcomes.add("nothing")
        else:
            assert _generation(td) >= 1
            outcomes.add("complete")
    assert outcomes <= {"incomplete", "nothing", "complete"}


def test_interrupted_first_save_reports_incomplete(tmp_path):
    # deterministic version of the above: a staging folder with no published store
    prefix = tmp_path / "store"
    staging = tmp_path / f".store.td-tmp-{os.getpid()}-dead"
    staging.mkdir()
    (staging / "a.memmap").write_bytes(b"\x00" * 8)
    with pytest.raises(RuntimeError, match="incomplete"):
        load_memmap(prefix)


def test_failed_save_leaves_earlier_save_intact(tmp_path):
    prefix = tmp_path / "store"
    _make(1).memmap(prefix)
    bad = _make(2)
    bad["zz_unpicklable"] = NonTensorData(lambda: None)
    with pytest.raises(TypeError, match="zz_unpicklable"):
        bad.memmap(prefix)
    assert _generation(load_memmap(prefix, allow_pickle=True)) == 1
    assert sorted(os.listdir(tmp_path)) == ["store"]


def test_resave_without_atomic_exchange(tmp_path, monkeypatch):
    # file systems without renameat2(RENAME_EXCHANGE): two renames, old copy kept until done
    from tensordict.memmap import _store

    monkeypatch.setattr(_store, "_exchange", lambda a, b: False)
    prefix = tmp_path / "store"
    _make(1).memmap(prefix)
    _make(2).memmap(prefix)
    assert _generation(load_memmap(prefix, allow_pickle=True)) == 2
    wait_cleanup()
    assert sorted(os.listdir(tmp_path)) == ["store"]


def test_recovers_from_kill_between_the_two_renames(tmp_path):
    # the state a kill leaves between "store -> .store.td-old-*" and "staging -> store"
    prefix = tmp_path / "store"
    _make(1).memmap(prefix)
    os.rename(prefix, tmp_path / ".store.td-old-999999-dead")
    staging = tmp_path / ".store.td-tmp-999999-dead"
    _make(2).memmap(staging)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        td = load_memmap(prefix, allow_pickle=True)
    assert _generation(td) == 1
    _make(3).memmap(prefix)  # the next save repairs the store and removes the leftovers
    assert _generation(load_memmap(prefix, allow_pickle=True)) == 3
    wait_cleanup()
    assert sorted(os.listdir(tmp_path)) == ["store"]
