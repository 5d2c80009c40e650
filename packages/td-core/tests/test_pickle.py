"""Pickle, torch.save/torch.load and torch.multiprocessing round trips of every kind of
TensorDict (nested, non-tensor data, locked, named, lazy stacks)."""

from __future__ import annotations

import importlib
import pickle
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from tensordict import NonTensorData, NonTensorStack, TensorDict


def _plain():
    return TensorDict({"a": torch.arange(6.0).view(3, 2)}, [3])


def _nested():
    return TensorDict(
        {"a": torch.zeros(3), "n": {"b": torch.ones(3, 2), "m": {"c": torch.arange(3)}}}, [3]
    )


def _non_tensor():
    td = TensorDict({"a": torch.zeros(2), "s": "text", "obj": {"k": [1, 2]}}, [2])
    td["st"] = NonTensorStack("x", "y")
    td["nd"] = NonTensorData(3.5, [2])
    return td


def _locked_named():
    td = TensorDict(
        {"a": torch.zeros(2, 4), "n": {"b": torch.ones(2, 4, 1)}}, [2, 4], names=["t", "env"]
    )
    return td.lock_()


def _empty():
    return TensorDict({}, [5])


def _lazy():
    lazy = pytest.importorskip("tensordict._lazy")
    a = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3, 2), "s": "p"}, [3])
    b = TensorDict({"a": torch.ones(3), "b": torch.zeros(3, 5), "s": "q"}, [3])
    return lazy.LazyStackedTensorDict(a, b, stack_dim=1)


KINDS = {
    "plain": _plain,
    "nested": _nested,
    "non_tensor": _non_tensor,
    "locked_named": _locked_named,
    "empty": _empty,
    "lazy": _lazy,
}


def _check_same(a, b):
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size
    assert a.device == b.device
    assert a.is_locked == b.is_locked
    assert a.names == b.names
    if hasattr(a, "tensordicts"):
        assert a.stack_dim == b.stack_dim
        for x, y in zip(a.tensordicts, b.tensordicts):
            _check_same(x, y)
        return
    assert list(a.keys(True, True)) == list(b.keys(True, True))
    for key in a.keys(True, True):
        va, vb = a._get_any_raw(key), b._get_any_raw(key)
        assert type(va) is type(vb)
        if isinstance(va, torch.Tensor):
            assert torch.equal(va, vb) and va.dtype == vb.dtype
        else:
            assert va.batch_size == vb.batch_size
            assert va.tolist() == vb.tolist()


@pytest.mark.parametrize("kind", list(KINDS))
def test_pickle_round_trip(kind):
    td = KINDS[kind]()
    out = pickle.loads(pickle.dumps(td))
    _check_same(td, out)
    if kind == "plain":
        out["a"].zero_()
        assert td["a"].sum() > 0  # a copy, not a view


@pytest.mark.parametrize("kind", list(KINDS))
def test_torch_save_load(kind, tmp_path):
    td = KINDS[kind]()
    path = tmp_path / "td.pt"
    torch.save({"data": td, "step": 3}, path)
    out = torch.load(path, weights_only=False)
    assert out["step"] == 3
    _check_same(td, out["data"])


def test_device_round_trip(device, tmp_path):
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2], device=device)
    path = tmp_path / "td.pt"
    torch.save(td, path)
    out = torch.load(path, weights_only=False)
    assert out.device == td.device and out["n", "b"].device == td["n", "b"].device
    assert torch.equal(out["n", "b"].cpu(), torch.ones(2))


def test_pickle_after_pytree_unflatten():
    import torch.utils._pytree as pytree

    td = pytree.tree_map(lambda x: x.ndim, _nested())
    out = pickle.loads(pickle.dumps(td))
    assert pytree.tree_leaves(out) == pytree.tree_leaves(td)


# ---------------------------------------------------------------------- shared memory
def _child_writes(queue, done):
    """Runs in the spawned process: writes in place into the received TensorDict."""
    td = queue.get(timeout=60)
    td["a"].add_(1.0)
    td["n", "b"].fill_(7.0)
    done.put((td.is_shared(), td["s"]))


def _importable_self(monkeypatch):
    """This module under its plain name, so that a spawned child can import it
    (pytest's importlib mode imports it by path); sys.path and sys.modules are restored
    after the test."""
    name = Path(__file__).stem
    monkeypatch.setattr(sys, "path", [str(Path(__file__).resolve().parent), *sys.path])
    monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve() == Path(__file__).resolve()
    return module


@pytest.mark.timeout(120)
def test_share_memory_through_a_spawned_queue(monkeypatch):
    module = _importable_self(monkeypatch)
    td = TensorDict({"a": torch.zeros(4), "n": {"b": torch.zeros(4, 2)}, "s": "meta"}, [4])
    td.share_memory_()
    assert td.is_shared()
    ctx = mp.get_context("spawn")
    queue, done = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=module._child_writes, args=(queue, done))
    proc.start()
    try:
        queue.put(td)
        child_shared, child_meta = done.get(timeout=100)
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.terminate()
    assert proc.exitcode == 0
    assert child_shared and child_meta == "meta"
    assert torch.equal(td["a"], torch.ones(4))
    assert torch.equal(td["n", "b"], torch.full((4, 2), 7.0))
