"""memmap(share_non_tensor=True): non-tensor values shared between processes."""

import os
import pickle
import sys

import pytest
import torch
import torch.multiprocessing as mp

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.memmap import SharedNonTensorData

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # spawned children inherit it
from _spawn_jobs import write_shared_value  # noqa: E402


def _td():
    return TensorDict(
        {"a": torch.zeros(2), "name": "run-1", "cfg": NonTensorData({"lr": 0.1, "layers": [1, 2]}, [2]),
         "nested": {"tag": NonTensorData("x", [2, 3]), "b": torch.zeros(2, 3)},
         "stack": NonTensorStack.from_list(["p", "q"])},
        batch_size=[2],
    )


@pytest.mark.parametrize("how", ["memmap", "memmap_", "memmap_like", "archive"])
def test_leaves_are_shared_and_the_store_is_unchanged(tmp_path, how):
    td = _td()
    if how == "memmap":
        out = td.memmap(tmp_path / "s", share_non_tensor=True)
    elif how == "memmap_":
        out = td.memmap_(tmp_path / "s", share_non_tensor=True)
        assert out is td
    elif how == "memmap_like":
        out = td.memmap_like(tmp_path / "s", share_non_tensor=True)
    else:
        out = td.memmap(tmp_path / "s.tdz", share_non_tensor=True)
    for key in ("name", "cfg", ("nested", "tag")):
        assert isinstance(out.get(key), SharedNonTensorData), key
    assert isinstance(out.get("stack"), NonTensorStack) and out.get("stack").is_shared()
    assert out["cfg"] == {"lr": 0.1, "layers": [1, 2]}
    assert out.get(("nested", "tag")).batch_size == out["nested"].batch_size
    loaded = TensorDict.load_memmap(tmp_path / ("s.tdz" if how == "archive" else "s"))
    assert type(loaded.get("name")) is NonTensorData and loaded["name"] == "run-1"
    plain = _td().memmap(tmp_path / "p")
    assert type(plain.get("name")) is NonTensorData


def test_in_place_writes_reach_every_view():
    out = _td().memmap(share_non_tensor=True)
    row, first = out[1], out.get("cfg")[0]
    out.set_("name", "run-2")
    assert row["name"] == "run-2"
    out.get("cfg").update_(NonTensorData({"lr": 0.5}))
    assert first.data == {"lr": 0.5} and row["cfg"] == {"lr": 0.5}
    out.set_("name", 1 + 2j)  # not JSON: pickled into the slot
    assert row["name"] == 1 + 2j
    clone = out.clone()
    assert type(clone.get("name")) is NonTensorData
    out.set_("name", "again")
    assert clone["name"] == 1 + 2j
    with pytest.raises(RuntimeError, match="shared slot holds"):
        out.set_("name", "x" * 10_000)
    assert out["name"] == "again"
    copy = pickle.loads(pickle.dumps(out))  # plain pickling copies (as for tensors)
    assert copy["name"] == "again"


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_child_process_sees_and_writes_the_shared_value(method):
    if method not in mp.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    out = _td().memmap(share_non_tensor=True)
    out.set_("name", "from-parent")
    ctx = mp.get_context(method)
    q = ctx.Queue()
    proc = ctx.Process(target=write_shared_value, args=(out, "name", "from-child", q))
    proc.start()
    try:
        result = q.get(timeout=120)
    finally:
        proc.join(timeout=60)
    assert result == ("ok", "from-parent")
    assert out["name"] == "from-child"


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_child_process_writes_a_shared_stack(method):
    if method not in mp.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    out = _td().memmap(share_non_tensor=True)
    ctx = mp.get_context(method)
    q = ctx.Queue()
    proc = ctx.Process(target=write_shared_value, args=(out, "stack", NonTensorStack.from_list(["r", "s"]), q))
    proc.start()
    try:
        result = q.get(timeout=120)
    finally:
        proc.join(timeout=60)
    assert result == ("ok", ["p", "q"])
    assert out["stack"] == ["r", "s"]
