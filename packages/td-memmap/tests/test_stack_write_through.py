"""In-place writes into a memory-mapped TensorDict's NonTensorStack reach its store,
also from a worker process it was sent to."""

from __future__ import annotations

import os

import pytest
import torch.multiprocessing as mp

from tensordict import NonTensorData, NonTensorStack, TensorDict


def _td() -> TensorDict:
    td = TensorDict({"val": NonTensorData(data=0, batch_size=[6])}, [6])
    td[1::2] = TensorDict({"val": NonTensorData(data=1, batch_size=[3])}, [3])
    return td


def _write(td: TensorDict, value: object) -> None:
    td[1::2] = TensorDict({"val": NonTensorData(data=value, batch_size=[3])}, [3])


@pytest.mark.parametrize("share", [True, False])
def test_writes_reach_the_store(tmp_path, share: bool) -> None:
    td = _td().memmap_(tmp_path, share_non_tensor=share)
    _write(td, 2)
    assert td.get("val").tolist() == [0, 2] * 3
    assert TensorDict.load_memmap(tmp_path).get("val").tolist() == [0, 2] * 3


@pytest.mark.parametrize("share", [True, False])
def test_a_worker_write_reaches_the_store(tmp_path, share: bool) -> None:
    td = _td().memmap_(tmp_path, share_non_tensor=share)
    proc = mp.get_context("fork").Process(target=_write, args=(td, 3))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert TensorDict.load_memmap(tmp_path).get("val").tolist() == [0, 3] * 3
    # the parent sees the worker's write only when the objects are shared
    assert td.get("val").tolist() == ([0, 3] if share else [0, 1]) * 3


def test_switching_to_pickle_and_back_leaves_no_stale_file(tmp_path) -> None:
    td = TensorDict(s=NonTensorStack("a", "b"), batch_size=[2]).memmap_(tmp_path)
    td[0] = TensorDict(s={1, 2})  # a set is not JSON-faithful: pickled beside meta.json
    pkl = [f for f in os.listdir(tmp_path) if f.endswith(".pkl")]
    assert len(pkl) == 1
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True).get("s").tolist() == [{1, 2}, "b"]
    td[0] = TensorDict(s="c")
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".pkl")]
    assert TensorDict.load_memmap(tmp_path).get("s").tolist() == ["c", "b"]


def test_a_write_after_the_store_grew_is_refused_and_the_store_kept(tmp_path) -> None:
    from tensordict import append_memmap

    td = _td().memmap_(tmp_path)
    append_memmap(tmp_path, _td()[:2])
    with pytest.raises(RuntimeError, match="appended to since this TensorDict was mapped"):
        _write(td, 5)
    reloaded = TensorDict.load_memmap(tmp_path)
    assert reloaded.batch_size == (8,)
    assert reloaded.get("val").tolist() == [0, 1] * 4
