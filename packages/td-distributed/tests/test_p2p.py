"""Point-to-point transfers on a real 2-rank gloo process group."""

from __future__ import annotations

import _jobs
import pytest
import torch
from _dist_harness import run_ranks

from tensordict import TensorDict


@pytest.mark.timeout(120)
def test_point_to_point_calls(tmp_path):
    """send/recv, isend/irecv, init_remote/from_remote_init, tags, mismatches, groups: one 2-rank job."""
    sender, receiver = run_ranks(_jobs.p2p_job, 2, out_dir=str(tmp_path), timeout=110)
    # a rich TensorDict has no big leaf: header + metadata + payload in one message,
    # so the next free tag is init_tag + 2 (first message, rest of the stream)
    assert receiver["recv_tag"] == 2
    assert sender["isend_tag"] == receiver["irecv_tag"] == 402
    # mismatch errors name the differing keys and shapes
    assert "nothing was written" in receiver["mismatch_keys"]
    assert "from_remote_init" in receiver["mismatch_keys"]
    assert "'a'" in receiver["mismatch_dtype"]


@pytest.mark.timeout(30)
def test_calls_need_an_initialized_process_group():
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    for call in (lambda: td.send(1), lambda: td.recv(0), lambda: td.isend(1), lambda: td.irecv(0),
                 lambda: td.init_remote(1), lambda: TensorDict.from_remote_init(0), lambda: td.broadcast(0),
                 lambda: td.all_reduce(), lambda: td.all_gather(), lambda: td.scatter(0)):
        with pytest.raises(RuntimeError, match="not initialized"):
            call()
