"""Tensorclasses under torch.compile(fullgraph=True): construction (tensor, non-tensor
and defaulted fields), indexing, arithmetic and stacking trace into one graph, and a
second instance of the same structure reuses it."""

import dataclasses

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from tensordict import tensorclass
from tensordict.tensorclass import TensorClass


class _Pair(TensorClass):
    x: torch.Tensor
    label: str


@tensorclass
class _Defaults:
    cache: torch.Tensor = torch.zeros(3)  # noqa: RUF009 - a shared tensor default, on purpose
    made: torch.Tensor = dataclasses.field(default_factory=lambda: torch.ones(3))
    y: torch.Tensor = None


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_build_index_math_one_graph_no_recompile():
    def fn(x):
        pair = _Pair(x=x, label="hello", batch_size=[3])
        both = torch.stack([pair[:2] + 1, pair[1:] * 2], 0)
        return both.x, pair.label

    cnt = CompileCounter()
    compiled = torch.compile(fn, fullgraph=True, backend=cnt)
    for seed in range(2):
        x = torch.randn(3, 2, generator=torch.Generator().manual_seed(seed))
        out, label = compiled(x)
        torch.testing.assert_close(out, torch.stack([x[:2] + 1, x[1:] * 2]))
        assert label == "hello"
    assert cnt.frame_count == 1


def test_defaults_under_compile():
    out = torch.compile(lambda: _Defaults(), fullgraph=True, backend="eager")()
    torch.testing.assert_close(out.cache, torch.zeros(3))
    torch.testing.assert_close(out.made, torch.ones(3))
    assert out.y is None


def test_instance_argument_no_recompile():
    def fn(pair):
        return pair.clone().x.sum()

    cnt = CompileCounter()
    compiled = torch.compile(fn, fullgraph=True, backend=cnt)
    for value in (1.0, 2.0):
        assert compiled(_Pair(x=torch.full((3,), value), label="a", batch_size=[3])) == 3 * value
    assert cnt.frame_count == 1
