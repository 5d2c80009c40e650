"""td-nn: the cost of going through TensorDict modules, next to the same model on a
plain dict of tensors (eager) or a compiled ``nn.Sequential`` (compiled).

Each case has a ``_td`` and a ``_dict`` function in the same benchmark group;
``benchmarks/report.py`` turns the JSON into ratios. Goals: eager within 1.3x of the
dict code, compiled within 1.1x of the compiled ``nn.Sequential``.

The cases run on one intra-op thread and are timed with ``time.thread_time`` (CPU
time of the benchmark thread), so that other processes sharing the machine do not
enter the figures.
"""

import time

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

B, F = 64, 32


def bench(group):
    return pytest.mark.benchmark(group=group, timer=time.thread_time)


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """One intra-op thread for every case of this module (``conftest.one_thread``)."""


def _linears(n):
    torch.manual_seed(0)
    return [nn.Linear(F, F) for _ in range(n)]


def _seq(lins):
    keys = ["in"] + [f"h{i}" for i in range(1, len(lins) + 1)]
    return TensorDictSequential(*[TensorDictModule(lin, [keys[i]], [keys[i + 1]]) for i, lin in enumerate(lins)])


# ---------------------------------------------------------------- one module
@bench("module: Linear(32, 32) on [64]")
def test_module_forward_td(benchmark):
    (lin,) = _linears(1)
    module = TensorDictModule(lin, in_keys=["in"], out_keys=["out"])
    td = TensorDict({"in": torch.randn(B, F)}, [B])
    benchmark(module, td)
    assert td["out"].shape == (B, F)


@bench("module: Linear(32, 32) on [64]")
def test_module_forward_dict(benchmark):
    (lin,) = _linears(1)
    d = {"in": torch.randn(B, F)}

    def run():
        d["out"] = lin(d["in"])

    benchmark(run)


# ---------------------------------------------------------------- three modules
@bench("sequential: 3 x Linear(32, 32) on [64]")
def test_sequential_forward_td(benchmark):
    seq = _seq(_linears(3))
    td = TensorDict({"in": torch.randn(B, F)}, [B])
    benchmark(seq, td)
    assert td["h3"].shape == (B, F)


@bench("sequential: 3 x Linear(32, 32) on [64]")
def test_sequential_forward_dict(benchmark):
    l1, l2, l3 = _linears(3)
    d = {"in": torch.randn(B, F)}

    def run():
        d["h1"] = l1(d["in"])
        d["h2"] = l2(d["h1"])
        d["h3"] = l3(d["h2"])

    benchmark(run)


# ---------------------------------------------------------------- compiled
@bench("compiled: 3 x Linear(32, 32) on [64]")
def test_compiled_sequential_td(benchmark):
    """torch.compile of a TensorDictSequential reading and writing 4 keys."""
    torch._dynamo.reset()
    compiled = torch.compile(_seq(_linears(3)))
    td = TensorDict({"in": torch.randn(B, F)}, [B])
    for _ in range(3):  # compile, then recompile once the keys exist
        compiled(td)
    benchmark(compiled, td)
    assert td["h3"].shape == (B, F)


@bench("compiled: 3 x Linear(32, 32) on [64]")
def test_compiled_sequential_dict(benchmark):
    """Baseline: torch.compile of the same nn.Sequential on a tensor."""
    torch._dynamo.reset()
    compiled = torch.compile(nn.Sequential(*_linears(3)))
    x = torch.randn(B, F)
    for _ in range(3):
        compiled(x)
    benchmark(compiled, x)
