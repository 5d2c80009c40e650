"""Runs a job on N ranks of a real gloo process group (127.0.0.1, free port) and never hangs.

``run_ranks(job, world_size, *args)`` starts one process per rank with
``torch.multiprocessing.start_processes`` (``fork`` by default: fast, and the job
may be defined in a test module), initializes ``torch.distributed`` with gloo and
the given process-group timeout, runs ``job(rank, world_size, *args)`` and joins
every process within ``timeout`` seconds, killing the stragglers otherwise. A
failing rank re-raises in the test with its traceback. Each rank writes what
``job`` returns to ``<out_dir>/rank<r>.json`` so that tests can check values.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tensordict.testing import free_port

START_METHOD = os.environ.get("TD_DIST_START_METHOD", "fork")


def _entry(rank: int, job: Any, world_size: int, port: int, pg_timeout: float, out_dir: str, args: tuple,
           backend: str = "gloo") -> None:
    # a forked child must not enter an OpenMP region the parent already used (libgomp
    # hangs); one intra-op thread keeps torch out of OpenMP altogether
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=pg_timeout),
    )
    result = job(rank, world_size, *args)
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    try:
        dist.barrier()
        dist.destroy_process_group()
    finally:
        # skip interpreter teardown (atexit hooks of the backend): the result is on disk
        os._exit(0)


def run_ranks(job: Any, world_size: int, *args: Any, out_dir: str, timeout: float = 60.0,
              pg_timeout: float = 20.0, backend: str = "gloo", start_method: str | None = None) -> list:
    """Runs ``job`` on ``world_size`` ranks; returns each rank's (JSON) result.

    ``backend="nccl"`` gives rank ``r`` the GPU ``r`` and uses the ``spawn`` start
    method (a forked child cannot use CUDA).
    """
    port = free_port()
    ctx = mp.start_processes(
        _entry,
        args=(job, world_size, port, pg_timeout, out_dir, args, backend),
        nprocs=world_size,
        join=False,
        start_method=start_method or ("spawn" if backend == "nccl" else START_METHOD),
    )
    deadline = time.monotonic() + timeout
    try:
        while not ctx.join(timeout=0.2):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {world_size}-rank job did not finish within {timeout}s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join(5)
    results = []
    for r in range(world_size):
        with open(os.path.join(out_dir, f"rank{r}.json")) as f:
            results.append(json.load(f))
    return results


def start_ranks(job: Any, world_size: int, *args: Any, out_dir: str, pg_timeout: float = 10.0) -> Any:
    """Starts the ranks without joining (for fault tests); returns the process context."""
    port = free_port()
    return mp.start_processes(
        _entry,
        args=(job, world_size, port, pg_timeout, out_dir, args),
        nprocs=world_size,
        join=False,
        start_method=START_METHOD,
    )
