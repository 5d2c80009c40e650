"""``consolidate`` next to ``torch.cat`` of the flattened leaves of a plain dict.

The TensorDict case builds the storage *and* the TensorDict of views into it; the
baseline only concatenates the leaves' bytes. Each case has a ``_td`` and a ``_dict``
function in the same group; ``benchmarks/report.py`` turns the JSON into ratios.
"""

import pytest
import torch

from tensordict import TensorDict

N_FLAT = 100
DEPTH = 20


def flat_source():
    return {f"k{i}": torch.randn(10, 16) for i in range(N_FLAT)}


def nested_source():
    d = {"leaf": torch.randn(10, 16)}
    for i in reversed(range(DEPTH)):
        d = {f"l{i}": d, f"x{i}": torch.randn(10, 16)}
    return d


def _leaves(d, out):
    for v in d.values():
        if isinstance(v, dict):
            _leaves(v, out)
        else:
            out.append(v)
    return out


def cat_flat(d):
    return torch.cat([v.reshape(-1).view(torch.uint8) for v in d.values()])


def cat_nested(d):
    return torch.cat([v.reshape(-1).view(torch.uint8) for v in _leaves(d, [])])


def bench(group):
    return pytest.mark.benchmark(group=group)


@bench("consolidate 100 flat leaves")
def test_consolidate_flat_td(benchmark):
    td = TensorDict(flat_source(), [10])
    out = benchmark(td.consolidate)
    assert out.is_consolidated()


@bench("consolidate 100 flat leaves")
def test_consolidate_flat_dict(benchmark):
    d = flat_source()
    benchmark(cat_flat, d)


@bench("consolidate 20-deep tree")
def test_consolidate_nested_td(benchmark):
    td = TensorDict(nested_source(), [10])
    out = benchmark(td.consolidate)
    assert out.is_consolidated()


@bench("consolidate 20-deep tree")
def test_consolidate_nested_dict(benchmark):
    d = nested_source()
    benchmark(cat_nested, d)


@bench("consolidate mixed dtypes (100 leaves)")
def test_consolidate_mixed_td(benchmark):
    src = {f"k{i}": torch.randn(10, 16).to([torch.float32, torch.int64, torch.float16, torch.bool][i % 4]) for i in range(N_FLAT)}
    td = TensorDict(src, [10])
    out = benchmark(td.consolidate)
    assert out.is_consolidated()


@bench("consolidate mixed dtypes (100 leaves)")
def test_consolidate_mixed_dict(benchmark):
    d = {f"k{i}": torch.randn(10, 16).to([torch.float32, torch.int64, torch.float16, torch.bool][i % 4]) for i in range(N_FLAT)}
    benchmark(cat_flat, d)
