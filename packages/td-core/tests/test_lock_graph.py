"""Nested TensorDicts of a locked TensorDict cannot be unlocked alone; isreal; the
batch-mismatch wording of indexed writes."""

import gc
import pickle

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict({"a": torch.zeros(4, 3), "n": {"m": {"x": torch.ones(4, 3)}}}, [4, 3])


def test_nested_unlock_refused_while_root_locked():
    td = make().lock_()
    inner = td["n", "m"]
    with pytest.raises(RuntimeError, match="part of a locked graph"):
        inner.unlock_()
    assert inner.is_locked
    td.unlock_()
    inner.unlock_()
    assert not inner.is_locked


def test_nested_unlock_after_root_is_gone():
    td = make().lock_()
    inner = td["n"]
    del td
    gc.collect()
    inner.unlock_()
    assert not inner.is_locked


def test_lock_context_restores_and_forgets_root():
    td = make()
    with td.lock_():
        with pytest.raises(RuntimeError):
            td["n"].unlock_()
    td["n"].unlock_()


def test_locked_round_trips_through_pickle():
    td = make().lock_()
    out = pickle.loads(pickle.dumps(td))
    assert out.is_locked and out["n"].is_locked


def test_isreal():
    td = TensorDict({"a": torch.zeros(3), "c": torch.tensor([1 + 0j, 1j, 2 + 0j])}, [3])
    assert td.isreal()["a"].all()
    assert td.isreal()["c"].tolist() == [True, False, True]


def test_indexed_write_batch_mismatch_wording():
    td = make()
    value = torch.cat([td[:2].clone(), td[:2].clone()], 0)
    with pytest.raises(RuntimeError, match="batch dimension mismatch.*differs from the source batch size"):
        td[torch.tensor([0, 1])] = value
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        td[:1] = td[:2].clone()
