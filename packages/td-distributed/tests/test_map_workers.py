"""map's own forked workers (no user pool): chunk hand-out through a shared counter, result
order, and back-to-back calls (a worker of one call still exiting must not take a chunk of
the next one)."""

from __future__ import annotations

import _jobs
import pytest
import torch

from tensordict import TensorDict


@pytest.mark.timeout(120)
def test_back_to_back_maps_with_more_chunks_than_workers():
    n = 12
    td = TensorDict(x=torch.arange(float(n)).view(n, 1).expand(n, 2).clone(), batch_size=[n])
    expected = td["x"] ** 2
    for _ in range(40):
        out = td.map(_jobs.square, num_workers=2, chunksize=3, mp_start_method="fork")
        assert torch.equal(out["y"], expected)


@pytest.mark.timeout(60)
def test_every_worker_gets_a_chunk_and_results_come_in_order():
    td = TensorDict(x=torch.zeros(9, 2), batch_size=[9])
    info = td.map(_jobs.report_sharing, num_workers=3, mp_start_method="fork")["info"]
    assert len(set(info[:, 2].tolist())) == 3  # three processes, one chunk each
    # more chunks than workers: every row once, in order, seeds per chunk
    out = td.map(_jobs.random_noise, num_workers=2, chunksize=2, generator=torch.Generator().manual_seed(3))
    again = td.map(_jobs.random_noise, num_workers=2, chunksize=2, generator=torch.Generator().manual_seed(3))
    assert out.batch_size == torch.Size([9]) and torch.equal(out["r"], again["r"])
