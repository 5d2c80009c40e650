"""A 4-field tensorclass (batch [1000]) next to a hand-written ``@dataclass`` that
checks the batch dims in ``__post_init__`` and indexes every field in
``__getitem__`` (what one writes without tensorclass).

Each case has a ``_td`` (tensorclass) and a ``_dict`` (dataclass) function in the
same benchmark group; ``benchmarks/report.py`` turns the JSON into ratios.

- construct: ``Cls(a, b, c, d, batch_size=[1000])``;
- attribute read: 20 field reads per call (unrolled, so that the call overhead of
  the benchmark loop does not hide the cost of a read);
- index 100 rows: ``obj[idx]`` with a tensor of 100 row indices, and with a slice.

Goals (issue 7): read and construction within 2x of the dataclass, indexing within
1.3x.
"""

from dataclasses import dataclass, field

import pytest
import torch

from tensordict import TensorClass

N = 1000


class Sample(TensorClass):
    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    done: torch.Tensor


@dataclass
class HandWritten:
    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    done: torch.Tensor
    batch_size: torch.Size = field(default_factory=torch.Size)

    def __post_init__(self) -> None:
        bs = torch.Size(self.batch_size)
        self.batch_size = bs
        n = len(bs)
        for name in ("obs", "action", "reward", "done"):
            if getattr(self, name).shape[:n] != bs:
                msg = f"{name}: leading dims do not match batch_size {tuple(bs)}"
                raise RuntimeError(msg)

    def __getitem__(self, index):
        obs = self.obs[index]
        n = obs.ndim - (self.obs.ndim - len(self.batch_size))
        return HandWritten(
            obs, self.action[index], self.reward[index], self.done[index], batch_size=obs.shape[:n]
        )


def fields():
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(N, 8, generator=g),
        torch.randint(4, (N,), generator=g),
        torch.randn(N, generator=g),
        torch.zeros(N, dtype=torch.bool),
    )


BS = torch.Size([N])
ROWS = torch.randperm(N, generator=torch.Generator().manual_seed(1))[:100]


def bench(group):
    return pytest.mark.benchmark(group=group)


@bench("tensorclass: construct, 4 fields, batch [1000]")
def test_construct_td(benchmark):
    a, b, c, d = fields()
    out = benchmark(lambda: Sample(a, b, c, d, batch_size=BS))
    assert out.batch_size == BS


@bench("tensorclass: construct, 4 fields, batch [1000]")
def test_construct_dict(benchmark):
    a, b, c, d = fields()
    out = benchmark(lambda: HandWritten(a, b, c, d, batch_size=BS))
    assert out.batch_size == BS


def _reads(o):
    def read():
        o.obs; o.action; o.reward; o.done; o.obs  # noqa: E702, B018
        o.action; o.reward; o.done; o.obs; o.action  # noqa: E702, B018
        o.reward; o.done; o.obs; o.action; o.reward  # noqa: E702, B018
        o.done; o.obs; o.action; o.reward; o.done  # noqa: E702, B018

    return read


@bench("tensorclass: 20 attribute reads")
def test_attribute_read_td(benchmark):
    benchmark(_reads(Sample(*fields(), batch_size=BS)))


@bench("tensorclass: 20 attribute reads")
def test_attribute_read_dict(benchmark):
    benchmark(_reads(HandWritten(*fields(), batch_size=BS)))


@bench("tensorclass: index 100 rows (tensor index)")
def test_index_rows_td(benchmark):
    obj = Sample(*fields(), batch_size=BS)
    out = benchmark(obj.__getitem__, ROWS)
    assert out.batch_size == (100,)


@bench("tensorclass: index 100 rows (tensor index)")
def test_index_rows_dict(benchmark):
    obj = HandWritten(*fields(), batch_size=BS)
    out = benchmark(obj.__getitem__, ROWS)
    assert out.batch_size == (100,)


@bench("tensorclass: index 100 rows (slice)")
def test_index_slice_td(benchmark):
    obj = Sample(*fields(), batch_size=BS)
    out = benchmark(obj.__getitem__, slice(200, 300))
    assert out.batch_size == (100,)


@bench("tensorclass: index 100 rows (slice)")
def test_index_slice_dict(benchmark):
    obj = HandWritten(*fields(), batch_size=BS)
    out = benchmark(obj.__getitem__, slice(200, 300))
    assert out.batch_size == (100,)
