"""Pytree round trips (``torch.utils._pytree.tree_flatten`` then ``tree_unflatten``)
of a TensorDict next to the same data as a dict of tensors.

Each case has a ``_td`` and a ``_dict`` function in the same benchmark group;
``benchmarks/report.py`` turns the JSON into ratios.

- flat: 100 leaves of shape [16, 4] under batch size [16];
- nested: 100 leaves in 10 sub-TensorDicts of 10 (dicts of dicts for the baseline);
- tree_map: ``tree_map(lambda x: x + 1, ...)`` over the flat case (round trip plus
  the adds, which dominate).
"""

import pytest
import torch
import torch.utils._pytree as pytree

from tensordict import TensorDict

N = 100
BATCH = (16,)


def flat_source():
    return {f"k{i}": torch.randn(*BATCH, 4) for i in range(N)}


def nested_source():
    return {f"g{g}": {f"k{i}": torch.randn(*BATCH, 4) for i in range(N // 10)} for g in range(10)}


def round_trip(tree):
    leaves, spec = pytree.tree_flatten(tree)
    return pytree.tree_unflatten(leaves, spec)


def bench(group):
    return pytest.mark.benchmark(group=group)


@bench("pytree: flatten/unflatten, 100 flat leaves")
def test_pytree_flat_td(benchmark):
    td = TensorDict(flat_source(), batch_size=BATCH)
    out = benchmark(round_trip, td)
    assert out.batch_size == torch.Size(BATCH) and len(out.keys()) == N


@bench("pytree: flatten/unflatten, 100 flat leaves")
def test_pytree_flat_dict(benchmark):
    d = flat_source()
    out = benchmark(round_trip, d)
    assert len(out) == N


@bench("pytree: flatten/unflatten, 100 leaves in 10 groups")
def test_pytree_nested_td(benchmark):
    td = TensorDict(nested_source(), batch_size=BATCH)
    out = benchmark(round_trip, td)
    assert len(list(out.keys(True, True))) == N


@bench("pytree: flatten/unflatten, 100 leaves in 10 groups")
def test_pytree_nested_dict(benchmark):
    d = nested_source()
    out = benchmark(round_trip, d)
    assert sum(len(v) for v in out.values()) == N


@bench("pytree: tree_map(x + 1), 100 flat leaves")
def test_tree_map_td(benchmark):
    td = TensorDict(flat_source(), batch_size=BATCH)
    out = benchmark(pytree.tree_map, lambda x: x + 1, td)
    assert out.batch_size == torch.Size(BATCH)


@bench("pytree: tree_map(x + 1), 100 flat leaves")
def test_tree_map_dict(benchmark):
    d = flat_source()
    out = benchmark(pytree.tree_map, lambda x: x + 1, d)
    assert len(out) == N
