"""Memory-mapped TensorDicts without a prefix (one shared-memory segment for all the
leaves) sent to spawned children: every leaf arrives, writes reach the parent."""

import torch
import torch.multiprocessing as mp

from tensordict import TensorDict


def _child(td, q):
    try:
        td["a"] += 1
        q.put(("ok", float(td["b"].sum())))
    except Exception as err:  # noqa: BLE001 - reported to the parent at once
        q.put(("error", repr(err)))


def test_spawned_children_share_one_segment():
    td = TensorDict(a=torch.zeros(2, 2), b=torch.ones(2, 1), batch_size=[2]).memmap_()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(td[i], q)) for i in range(2)]
    for p in procs:
        p.start()
    try:
        results = [q.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
    assert results == [("ok", 1.0), ("ok", 1.0)]
    assert (td["a"] == 1).all()
