"""Leaks: a long training loop keeps the number of live TensorDicts and the process
memory flat; TensorDict operations create no reference cycles; non-blocking copies
read right after give the values of blocking ones.

Run with ``pytest -s`` to see the before/after figures.
"""

from __future__ import annotations

import gc
import pickle
import sys

import pytest
import torch

from tensordict import TensorDict, lazy_stack
from tensordict._base import TensorDictBase

ITERATIONS = 10_000


def _live_tensordicts() -> int:
    return sum(1 for o in gc.get_objects() if issubclass(type(o), TensorDictBase))


def _rss_kib() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class _Step:
    """One step of a small training loop: build a batch, index it, stack, update a buffer."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.weight = torch.randn(3, 2, device=device)
        self.buffer = TensorDict({"obs": torch.zeros(8, 3), "reward": torch.zeros(8, 1)}, [8], device=device)
        self.recent: list = []

    def __call__(self, i: int) -> float:
        d = self.device
        batch = TensorDict(
            {"obs": torch.randn(4, 3, device=d), "next": {"reward": torch.ones(4, 1, device=d)}, "tag": "step"},
            [4],
            device=d,
        )
        batch["action"] = batch["obs"] @ self.weight
        half = batch[1:3]
        pair = torch.stack([half, half.clone()], 0)
        lazy = lazy_stack([batch, batch.clone()])
        self.buffer[i % 2 * 4 : i % 2 * 4 + 4] = TensorDict(
            {"obs": batch["obs"], "reward": batch["next", "reward"]}, [4], device=d
        )
        self.buffer.update({"reward": self.buffer["reward"] * 0.5})
        self.recent.append(lazy[0])  # a bounded history: objects die when it rolls over
        if len(self.recent) > 8:
            self.recent.pop(0)
        return float(pair["action"].sum())


def _run_loop(device: torch.device) -> dict:
    step = _Step(device)
    for i in range(200):  # warm up: caches, allocator pools, lazily imported modules
        step(i)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
    before = {"tds": _live_tensordicts(), "rss_kib": _rss_kib(), "cuda": _cuda_alloc(device)}
    for i in range(ITERATIONS):
        step(i)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
    after = {"tds": _live_tensordicts(), "rss_kib": _rss_kib(), "cuda": _cuda_alloc(device)}
    return {"before": before, "after": after}


def _cuda_alloc(device: torch.device) -> int | None:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


@pytest.mark.timeout(300)
def test_training_loop_memory_is_flat():
    res = _run_loop(torch.device("cpu"))
    before, after = res["before"], res["after"]
    print(
        f"\n[leaks] {ITERATIONS} iterations (cpu): live TensorDicts {before['tds']} -> {after['tds']}, "
        f"VmRSS {before['rss_kib']} KiB -> {after['rss_kib']} KiB",
        file=sys.stderr,
    )
    assert after["tds"] <= before["tds"], f"live TensorDicts grew: {before['tds']} -> {after['tds']}"
    if before["rss_kib"] is not None:
        # each step allocates a few KiB; a leak of even one small TensorDict per step
        # would add several MiB over 10,000 steps
        growth = after["rss_kib"] - before["rss_kib"]
        assert growth < 8 * 1024, f"VmRSS grew by {growth} KiB over {ITERATIONS} iterations"


@pytest.mark.timeout(300)
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_loop_cuda_memory_is_flat():
    res = _run_loop(torch.device("cuda"))
    before, after = res["before"], res["after"]
    print(
        f"\n[leaks] {ITERATIONS} iterations (cuda): live TensorDicts {before['tds']} -> {after['tds']}, "
        f"cuda.memory_allocated {before['cuda']} -> {after['cuda']} bytes",
        file=sys.stderr,
    )
    assert after["tds"] <= before["tds"]
    assert after["cuda"] <= before["cuda"], f"CUDA memory grew: {before['cuda']} -> {after['cuda']} bytes"


# ---------------------------------------------------------------------- reference cycles
def _td():
    return TensorDict(
        {"a": torch.randn(4, 3), "b": {"c": torch.zeros(4, dtype=torch.int64), "d": {"e": torch.ones(4, 2)}},
         "s": "text"},
        [4],
    )


def _ops():
    def set_nested(td):
        td.set(("b", "new"), torch.zeros(4))
        return td

    def update(td):
        td.update({"a": torch.zeros(4, 3), "x": {"y": torch.ones(4)}})
        return td

    def setitem_index(td):
        td[1:3] = td[1:3].clone()
        return td

    def lock_unlock(td):
        td.lock_()
        td.unlock_()
        return td

    def locked_nested_get(td):
        td.lock_()
        return td.get("b").get("d")

    def lazy_ops(td):
        s = lazy_stack([td, td.clone()], 0)
        s[0] = td.clone()
        return s[:, 1:3].to_tensordict()

    return {
        "construction": lambda td: TensorDict({"a": torch.zeros(3), "n": {"b": torch.ones(3)}}, [3]),
        "index": lambda td: td[1:3],
        "mask": lambda td: td[torch.tensor([True, False, True, False])],
        "get_nested": lambda td: td["b", "d", "e"],
        "set_nested": set_nested,
        "stack": lambda td: torch.stack([td, td.clone()], 0),
        "cat": lambda td: torch.cat([td, td], 0),
        "unbind": lambda td: td.unbind(0),
        "reshape": lambda td: td.reshape(2, 2),
        "permute": lambda td: td.unsqueeze(0).permute(1, 0),
        "to": lambda td: td.to("cpu"),
        "to_dtype": lambda td: td.to(torch.float64),
        "clone": lambda td: td.clone(),
        "apply": lambda td: td.apply(lambda x: x + 1),
        "update": update,
        "setitem_index": setitem_index,
        "select_exclude": lambda td: td.select("a", ("b", "c")).exclude("a"),
        "flatten_keys": lambda td: td.flatten_keys().unflatten_keys(),
        "lazy_stack": lazy_ops,
        "consolidate": lambda td: td.consolidate(),
        "consolidate_to": lambda td: td.consolidate().to("cpu"),
        "lock_unlock": lock_unlock,
        "locked_nested_get": locked_nested_get,
        "to_dict_from_dict": lambda td: TensorDict.from_dict(td.to_dict(), batch_size=[4]),
        "pickle": lambda td: pickle.loads(pickle.dumps(td)),
        "repr": lambda td: repr(td),
        "iter": lambda td: list(td),
        "items": lambda td: list(td.items(True, True)),
        "empty_like": lambda td: td.empty(),
    }


OPS = _ops()

#: ops whose torch part makes cycles of its own: pickling a tensor storage runs
#: ``torch.save``, which defines local Pickler/Unpickler classes (a class is always a
#: cycle). For those, no TensorDict, tensor or tensordict-defined object may be in one.
_TORCH_MAKES_CYCLES = {"pickle"}


def _ours(obj) -> bool:
    from tensordict._nontensor import NonTensorData, NonTensorStack

    if isinstance(obj, (TensorDictBase, NonTensorData, NonTensorStack, torch.Tensor)):
        return True
    module = getattr(obj, "__module__", None) if isinstance(obj, (type, type(_ours))) else None
    return isinstance(module, str) and module.startswith("tensordict")


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_creates_no_reference_cycle(name):
    op = OPS[name]
    op(_td())  # first call: imports, caches
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        td = _td()
        out = op(td)
        del out, td
        garbage = gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    ours = [type(o).__name__ for o in found if _ours(o)]
    assert not ours, f"{name}: TensorDict objects in reference cycles: {ours[:10]}"
    if name not in _TORCH_MAKES_CYCLES:
        kinds = sorted({type(o).__name__ for o in found})
        assert garbage == 0, f"{name}: {garbage} objects only reclaimable by the cycle collector ({kinds})"


# ---------------------------------------------------------------------- non-blocking copies
def _devices_pairs(device: torch.device) -> list:
    if device.type == "cpu":
        return [("cpu", "cpu")]
    return [("cpu", device), (device, "cpu"), (device, device)]


@pytest.mark.parametrize("consolidated", [False, True], ids=["leaves", "consolidated"])
def test_non_blocking_copy_equals_blocking(device, consolidated):
    gen = torch.Generator().manual_seed(0)
    src = TensorDict(
        {"a": torch.randn(64, 256, generator=gen), "b": {"c": torch.randint(0, 100, (64, 7), generator=gen)},
         "m": torch.rand(64, 1, generator=gen) > 0.5},
        [64],
    )
    for origin, dest in _devices_pairs(device):
        td = src.to(origin)
        if consolidated:
            td = td.consolidate()
        for _ in range(3):
            blocking = td.to(dest)
            fast = td.to(dest, non_blocking=True)
            # read right after the call: the values must already be there
            for key in src.keys(True, True):
                assert torch.equal(fast.get(key).cpu(), blocking.get(key).cpu()), (origin, dest, key)
                assert torch.equal(fast.get(key).cpu(), src.get(key)), (origin, dest, key)
            assert fast.device == torch.device(dest)
