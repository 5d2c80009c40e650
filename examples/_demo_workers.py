"""Functions the demo runs in other processes (importable, so ``spawn`` can pickle them).

- :func:`normalise_chunk`: step 2's preprocessing, run by ``TensorDict.map`` workers on
  chunks of the memory-mapped dataset, in place;
- :func:`send_recv_rank`: step 7, one TensorDict sent from rank 0 to rank 1 with
  td-distributed over gloo on 127.0.0.1.
"""

from __future__ import annotations

import datetime
import json
import time

import torch
import torch.distributed as dist

__all__ = ["normalise_chunk", "send_recv_rank"]


def normalise_chunk(chunk, mean: float, std: float) -> None:
    """Standardises ``chunk["pixels"]`` in place: ``(pixels - mean) / std``.

    ``chunk`` is a view of the memory-mapped store (rows ``[i:j]``), so the write lands
    in the files every process maps; returning ``None`` tells ``map`` the work was
    done in place.
    """
    chunk.get("pixels").sub_(mean).div_(std)


def send_recv_rank(rank: int, port: int, batch, result_path: str) -> None:
    """Rank 0 sends ``batch``; rank 1 receives it into a zeroed copy and compares every leaf.

    Rank 1 writes ``{"intact": bool, "bad_keys": [...], "seconds": float}`` to
    ``result_path``. Any exception propagates to the parent through
    ``torch.multiprocessing``.
    """
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        dist.barrier()
        if rank == 0:
            batch.send(dst=1)
        else:
            template = batch.clone().zero_()
            start = time.perf_counter()
            template.recv(src=0)
            seconds = time.perf_counter() - start
            bad = [
                "/".join(k) if isinstance(k, tuple) else k
                for k in batch.keys(include_nested=True, leaves_only=True)
                if not torch.equal(template.get(k), batch.get(k))
            ]
            with open(result_path, "w") as f:
                json.dump({"intact": not bad, "bad_keys": bad, "seconds": seconds}, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()
