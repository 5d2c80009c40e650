"""Sending tensorclasses between processes with td-distributed (real gloo process
group on 127.0.0.1; skipped when td-distributed is not installed)."""

import datetime
import json
import os
import signal

import pytest
import torch

pytest.importorskip("tensordict.distributed")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from tensordict import TensorClass  # noqa: E402
from tensordict.testing import free_port  # noqa: E402


class Inner(TensorClass):
    x: torch.Tensor


class Message(TensorClass):
    payload: torch.Tensor
    inner: Inner
    sender: str = "?"


def _rank(rank: int, port: int, out: str) -> None:
    code = 1
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
            timeout=datetime.timedelta(seconds=30),
        )
        if rank == 0:
            msg = Message(
                payload=torch.arange(6.0).view(3, 2), inner=Inner(x=torch.ones(3), batch_size=[3]),
                sender="rank0", batch_size=[3],
            )
            msg.init_remote(dst=1)
            msg.payload.mul_(10)
            msg.send(dst=1)
            result = {}
        else:
            got = Message.from_remote_init(src=0)
            first = {
                "type": type(got).__name__, "inner": type(got.inner).__name__,
                "payload": got.payload.tolist(), "x": got.inner.x.tolist(), "sender": got.sender,
                "batch_size": list(got.batch_size),
            }
            got.recv(src=0)
            result = {"first": first, "second": got.payload.tolist()}
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
        dist.barrier()
        dist.destroy_process_group()
        code = 0
    finally:
        os._exit(code)


@pytest.mark.timeout(120)
def test_init_remote_then_send_and_recv(tmp_path):
    port = free_port()
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_rank, args=(r, port, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(90)
    finally:
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join(5)
    assert [p.exitcode for p in procs] == [0, 0]
    result = json.loads((tmp_path / "rank1.json").read_text())
    first = result["first"]
    assert first["type"] == "Message" and first["inner"] == "Inner"
    assert first["payload"] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert first["x"] == [1.0, 1.0, 1.0] and first["sender"] == "rank0" and first["batch_size"] == [3]
    assert result["second"] == [[0.0, 10.0], [20.0, 30.0], [40.0, 50.0]]
