"""Memory-mapped TensorDicts without a prefix (one shared-memory segment for all the
leaves) sent to spawned children: every leaf arrives, writes reach the parent."""

import os
import sys

import torch
import torch.multiprocessing as mp

from tensordict import TensorDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # spawned children inherit it
from _spawn_jobs import add_one_and_report  # noqa: E402


def test_spawned_children_share_one_segment():
    td = TensorDict(a=torch.zeros(2, 2), b=torch.ones(2, 1), batch_size=[2]).memmap_()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=add_one_and_report, args=(td[i], q)) for i in range(2)]
    for p in procs:
        p.start()
    try:
        results = [q.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
    assert results == [("ok", 1.0), ("ok", 1.0)]
    assert (td["a"] == 1).all()


def test_forkserver_child_gets_several_tensors_of_one_segment():
    # every leaf of a memmap_() TensorDict (and small anonymous tensors) lives in one
    # segment: the descriptor is sent once, and a forkserver child finds it by position
    td = TensorDict(a=torch.zeros(2, 2), b=torch.ones(2, 1), batch_size=[2]).memmap_()
    ctx = mp.get_context("forkserver")
    q = ctx.Queue()
    p = ctx.Process(target=add_one_and_report, args=(td, q))
    p.start()
    p.join(timeout=120)  # a child that cannot rebuild the tensors exits at once, with an error
    assert p.exitcode == 0
    assert q.get(timeout=30) == ("ok", 2.0)
    assert (td["a"] == 1).all()
