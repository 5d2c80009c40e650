"""Re-saving over a store: a small replaced tree is deleted by the save itself (no cleanup
thread to start and wait for); a large one still goes to the background thread. Either way
the user's own files in the store survive and only the new save's files are left."""

from __future__ import annotations

import os

import torch

from tensordict import TensorDict
from tensordict.memmap import _store
from tensordict.memmap._store import wait_cleanup


def _hidden(folder) -> list[str]:
    return sorted(e for e in os.listdir(folder) if e.startswith("."))


def test_small_resave_leaves_nothing_behind_without_waiting(tmp_path):
    prefix = tmp_path / "store"
    td = TensorDict({"a": torch.arange(4.0), "b": torch.zeros(4, 2)}, [4])
    td.memmap(prefix)
    (prefix / "README").write_text("mine")
    before = list(_store._pending)
    td.memmap_like(prefix, existsok=True)
    assert _store._pending == before  # no cleanup thread was started
    assert _hidden(tmp_path) == []  # the replaced tree is gone already
    assert (prefix / "README").read_text() == "mine"
    out = TensorDict.load_memmap(prefix)
    assert out["b"].shape == (4, 2) and (out["a"] == 0).all()


def test_large_or_nested_resave_still_cleans_up(tmp_path):
    prefix = tmp_path / "store"
    td = TensorDict({f"k{i}": torch.ones(3) for i in range(20)}, [3])  # more entries than the sync limit
    td["nested"] = TensorDict({"x": torch.ones(3)}, [3])
    td.memmap(prefix)
    td.memmap(prefix, existsok=True)
    assert _store._pending and _store._pending[-1].name == "td-memmap-cleanup"
    wait_cleanup()
    assert _hidden(tmp_path) == []
    out = TensorDict.load_memmap(prefix)
    assert set(out.keys()) == set(td.keys()) and (out["nested", "x"] == 1).all()
