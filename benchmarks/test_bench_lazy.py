"""Lazy stacks of 100 TensorDicts (10 keys, batch [10] each) next to a list of
100 dicts of tensors.

Each case has a ``_td`` and a ``_dict`` function in the same benchmark group;
``benchmarks/report.py`` turns the JSON into ratios.

- build: ``lazy_stack(tds)`` checks every TensorDict's batch size; the baseline
  builds the list of dicts with one leading-dim check per sample (``list(dicts)``
  alone, with no check, takes well under a microsecond).
- get: ``stacked[key]`` vs ``torch.stack`` of that key across the dicts.
- index: 10 positions along the stack dim vs picking 10 dicts.
"""

import pytest
import torch

from tensordict import TensorDict, lazy_stack

N = 100
KEYS = [f"k{i}" for i in range(10)]
BATCH = (10,)


def sources():
    return [{k: torch.randn(*BATCH, 3) for k in KEYS} for _ in range(N)]


def tensordicts():
    return [TensorDict(src, batch_size=BATCH) for src in sources()]


def positions():
    return torch.randperm(N, generator=torch.Generator().manual_seed(0))[:10]


def bench(group):
    return pytest.mark.benchmark(group=group)


@bench("lazy stack: build 100 TensorDicts")
def test_lazy_build_td(benchmark):
    tds = tensordicts()
    out = benchmark(lazy_stack, tds)
    assert out.batch_size == torch.Size([N, *BATCH])


@bench("lazy stack: build 100 TensorDicts")
def test_lazy_build_dict(benchmark):
    dicts = sources()

    def build():
        out = []
        for d in dicts:
            if d["k0"].shape[0] != 10:
                raise RuntimeError("batch size mismatch")
            out.append(d)
        return out

    assert len(benchmark(build)) == N


@bench("lazy stack: get one key")
def test_lazy_get_td(benchmark):
    stacked = lazy_stack(tensordicts())
    out = benchmark(stacked.__getitem__, "k3")
    assert out.shape == torch.Size([N, *BATCH, 3])


@bench("lazy stack: get one key")
def test_lazy_get_dict(benchmark):
    dicts = sources()
    out = benchmark(lambda: torch.stack([d["k3"] for d in dicts]))
    assert out.shape == torch.Size([N, *BATCH, 3])


@bench("lazy stack: index 10 along the stack dim")
def test_lazy_index_td(benchmark):
    stacked = lazy_stack(tensordicts())
    idx = positions()
    out = benchmark(stacked.__getitem__, idx)
    assert out.batch_size == torch.Size([10, *BATCH])


@bench("lazy stack: index 10 along the stack dim")
def test_lazy_index_dict(benchmark):
    dicts = sources()
    idx = positions()
    out = benchmark(lambda: [dicts[i] for i in idx.tolist()])
    assert len(out) == 10
