"""Collectives on a real 4-rank gloo process group (and a 2-rank sub-group)."""

from __future__ import annotations

import _jobs
import pytest
from _dist_harness import run_ranks


@pytest.mark.timeout(150)
def test_collectives(tmp_path):
    """broadcast, all_reduce, reduce, all_gather, gather_and_stack, scatter, new_group, mismatches."""
    results = run_ranks(_jobs.collectives_job, 4, out_dir=str(tmp_path), timeout=140)
    for rank, res in enumerate(results):
        # every rank names the differing keys of the rank that differs (group rank 2)
        assert "rank 2" in res["mismatch"], (rank, res["mismatch"])
        assert "nothing was reduced" in res["mismatch"]
