"""Fault handling: a peer killed with SIGKILL mid-transfer, a silent peer, a timeout.

The process groups use a 10 s timeout; every survivor must fail with a clear
RuntimeError well within it, never hang. The harness itself kills whatever is
left, so a regression shows up as a failed test, not a stuck run.
"""

from __future__ import annotations

import json
import os
import signal
import time

import _jobs
import pytest
from _dist_harness import run_ranks, start_ranks

PG_TIMEOUT = 10.0


def _wait_for(path: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def _kill_all(ctx) -> None:
    for p in ctx.processes:
        if p.is_alive():
            os.kill(p.pid, signal.SIGKILL)
        p.join(5)


def _run_and_kill(job, world: int, victim: int, tmp_path, survivors: list[int]) -> list[dict]:
    marker = str(tmp_path / "marker")
    ctx = start_ranks(job, world, marker, out_dir=str(tmp_path), pg_timeout=PG_TIMEOUT)
    try:
        assert _wait_for(marker, time.monotonic() + 60), "the job never started transferring"
        os.kill(ctx.processes[victim].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        results = []
        for r in survivors:
            path = str(tmp_path / f"rank{r}.json")
            assert _wait_for(path, killed_at + PG_TIMEOUT + 20), f"rank {r} neither failed nor finished: it hangs"
            with open(path) as f:
                results.append(json.load(f))
        return results
    finally:
        _kill_all(ctx)


@pytest.mark.timeout(120)
def test_sender_killed_mid_transfer(tmp_path):
    (res,) = _run_and_kill(_jobs.killed_sender_job, 2, 1, tmp_path, [0])
    assert res["error"] is not None, res
    assert res["type"] == "CommError"  # a RuntimeError subclass
    assert "recv" in res["error"] and "rank 1" in res["error"]
    assert "may have died" in res["error"]
    assert res["n"] >= 2
    assert res["after"] < PG_TIMEOUT + 10


@pytest.mark.timeout(120)
def test_rank_killed_during_all_reduce(tmp_path):
    results = _run_and_kill(_jobs.killed_in_collective_job, 3, 2, tmp_path, [0, 1])
    for res in results:
        assert res["error"] is not None, res
        assert "all_reduce" in res["error"]
        assert res["after"] < PG_TIMEOUT + 10


@pytest.mark.timeout(60)
def test_recv_from_a_silent_peer_times_out(tmp_path):
    receiver, _ = run_ranks(_jobs.silent_peer_job, 2, out_dir=str(tmp_path), timeout=50, pg_timeout=3.0)
    assert receiver["error"] is not None
    assert "timed out" in receiver["error"] and "3s" in receiver["error"]
    assert 2.5 < receiver["after"] < 3.0 + 5
