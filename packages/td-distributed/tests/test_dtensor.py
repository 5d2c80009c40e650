"""DTensor leaves: a TensorDict of a sharded module saves (memmap) its full tensors."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from _dist_harness import run_ranks
from torch import nn

from tensordict import TensorDict


def _sharded_td(rank: int) -> TensorDict:
    from torch.distributed.tensor import DeviceMesh, Shard, distribute_module, distribute_tensor

    torch.manual_seed(0)  # the same full weights on both ranks
    module = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False))
    mesh = DeviceMesh("cpu", torch.arange(2))

    def shard(name, mod, mesh):
        if isinstance(mod, nn.Linear):
            for pname, param in list(mod.named_parameters()):
                mod.register_parameter(pname, nn.Parameter(distribute_tensor(param, mesh, [Shard(0)])))

    return TensorDict.from_module(distribute_module(module, mesh, partition_fn=shard))


def dtensor_memmap_job(rank: int, world: int, prefix: str) -> dict:
    td = _sharded_td(rank)
    if rank == 0:
        saved = td.memmap(prefix)  # gathers each DTensor leaf: a collective
        return {"shape": list(saved["0", "weight"].shape), "sum": float(saved["0", "weight"].sum())}
    full = td.apply(lambda t: t.full_tensor())  # the matching collectives on rank 1
    return {"shape": list(full["0", "weight"].shape), "sum": float(full["0", "weight"].sum())}


@pytest.mark.skipif(importlib.util.find_spec("tensordict.memmap") is None, reason="td-memmap is not installed")
@pytest.mark.timeout(120)
def test_memmap_of_dtensor_leaves_saves_full_tensors(tmp_path):
    r0, r1 = run_ranks(dtensor_memmap_job, 2, str(tmp_path / "store"), out_dir=str(tmp_path), timeout=100)
    assert r0["shape"] == r1["shape"] == [4, 4]
    assert r0["sum"] == pytest.approx(r1["sum"])
