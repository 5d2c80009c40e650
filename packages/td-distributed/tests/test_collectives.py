"""Collectives on a real 4-rank gloo process group (and a 2-rank sub-group)."""

from __future__ import annotations

import _jobs
import pytest
import torch
from _dist_harness import run_ranks


@pytest.mark.timeout(150)
def test_collectives(tmp_path):
    """broadcast, all_reduce, reduce, all_gather, gather_and_stack, scatter, new_group, mismatches."""
    results = run_ranks(_jobs.collectives_job, 4, out_dir=str(tmp_path), timeout=140)
    for rank, res in enumerate(results):
        # every rank names the differing keys of the rank that differs (group rank 2)
        assert "rank 2" in res["mismatch"], (rank, res["mismatch"])
        assert "nothing was reduced" in res["mismatch"]


@pytest.mark.timeout(150)
def test_tensordicts_on_each_device_over_gloo(tmp_path, device):
    """CPU and (when present) CUDA TensorDicts: gloo moves CPU buffers, staging happens inside."""
    # a forked child cannot use CUDA once the parent did: spawn the ranks for cuda
    method = "spawn" if device.type == "cuda" else None
    run_ranks(_jobs.device_job, 2, str(device), out_dir=str(tmp_path), timeout=140, start_method=method)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="nccl needs two GPUs (one per rank)")
@pytest.mark.timeout(240)
def test_nccl_backend(tmp_path):
    run_ranks(_jobs.device_job, 2, "cuda", out_dir=str(tmp_path), timeout=230, backend="nccl")
