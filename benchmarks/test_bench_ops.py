"""Leaf-wise operations (``apply``, arithmetic, comparison) next to the same
operation written by hand on a plain dict of tensors.

Each case has a ``_td`` and a ``_dict`` function in the same benchmark group;
``benchmarks/report.py`` turns the JSON into ratios.

- flat: 100 leaves of shape ``[10, 4]`` (batch ``[10]``).
- nested: 21 leaves in a 20-deep chain (each level holds one leaf and the next level).
- ``apply`` baselines call the same ``fn`` in a dict comprehension; the arithmetic
  baselines (``td + 1``, ``td * td``, ``td += 1``) write the op inline. TensorDict
  arithmetic runs one ``torch._foreach_*`` kernel over all leaves.
"""

import pytest
import torch

from tensordict import TensorDict

N_FLAT = 100
DEPTH = 20
BATCH = (10,)


def flat_dict(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {f"k{i}": torch.randn(*BATCH, 4, generator=g) for i in range(N_FLAT)}


def chain_dict(seed=0):
    g = torch.Generator().manual_seed(seed)
    root = {"x": torch.randn(*BATCH, 4, generator=g)}
    node = root
    for _ in range(DEPTH):
        node["next"] = {"x": torch.randn(*BATCH, 4, generator=g)}
        node = node["next"]
    return root


def plus_one(x):
    return x + 1


def add(x, y):
    return x + y


def bench(group):
    return pytest.mark.benchmark(group=group)


# ---------------------------------------------------------------- apply, flat
@bench("ops: apply(x + 1), 100 flat leaves")
def test_apply_flat_td(benchmark):
    td = TensorDict(flat_dict(), batch_size=BATCH)
    out = benchmark(td.apply, plus_one)
    assert torch.equal(out["k0"], td["k0"] + 1)


@bench("ops: apply(x + 1), 100 flat leaves")
def test_apply_flat_dict(benchmark):
    d = flat_dict()
    out = benchmark(lambda: {k: plus_one(v) for k, v in d.items()})
    assert torch.equal(out["k0"], d["k0"] + 1)


# ---------------------------------------------------------------- apply, nested
def _apply_nested(d):
    return {k: _apply_nested(v) if isinstance(v, dict) else plus_one(v) for k, v in d.items()}


@bench("ops: apply(x + 1), 21 leaves 20 deep")
def test_apply_nested_td(benchmark):
    td = TensorDict(chain_dict(), batch_size=BATCH)
    out = benchmark(td.apply, plus_one)
    assert len(list(out.keys(True, True))) == DEPTH + 1


@bench("ops: apply(x + 1), 21 leaves 20 deep")
def test_apply_nested_dict(benchmark):
    d = chain_dict()
    out = benchmark(_apply_nested, d)
    assert "next" in out


# ---------------------------------------------------------------- binary apply
@bench("ops: apply(x + y, other), 100 leaves")
def test_apply_binary_td(benchmark):
    td = TensorDict(flat_dict(0), batch_size=BATCH)
    other = TensorDict(flat_dict(1), batch_size=BATCH)
    out = benchmark(td.apply, add, other)
    assert torch.equal(out["k3"], td["k3"] + other["k3"])


@bench("ops: apply(x + y, other), 100 leaves")
def test_apply_binary_dict(benchmark):
    d, o = flat_dict(0), flat_dict(1)
    out = benchmark(lambda: {k: add(v, o[k]) for k, v in d.items()})
    assert torch.equal(out["k3"], d["k3"] + o["k3"])


# ---------------------------------------------------------------- arithmetic (foreach)
@bench("ops: td + 1, 100 leaves")
def test_add_scalar_td(benchmark):
    td = TensorDict(flat_dict(), batch_size=BATCH)
    out = benchmark(lambda: td + 1)
    assert torch.equal(out["k0"], td["k0"] + 1)


@bench("ops: td + 1, 100 leaves")
def test_add_scalar_dict(benchmark):
    d = flat_dict()
    out = benchmark(lambda: {k: v + 1 for k, v in d.items()})
    assert torch.equal(out["k0"], d["k0"] + 1)


@bench("ops: td * td, 100 leaves")
def test_mul_td_td(benchmark):
    td = TensorDict(flat_dict(), batch_size=BATCH)
    out = benchmark(lambda: td * td)
    assert torch.equal(out["k0"], td["k0"] * td["k0"])


@bench("ops: td * td, 100 leaves")
def test_mul_td_dict(benchmark):
    d = flat_dict()
    out = benchmark(lambda: {k: v * d[k] for k, v in d.items()})
    assert torch.equal(out["k0"], d["k0"] * d["k0"])


@bench("ops: td += 1 (in place), 100 leaves")
def test_iadd_td(benchmark):
    td = TensorDict(flat_dict(), batch_size=BATCH)

    def run():
        nonlocal td
        td += 1

    benchmark(run)


@bench("ops: td += 1 (in place), 100 leaves")
def test_iadd_dict(benchmark):
    d = flat_dict()

    def run():
        for v in d.values():
            v.add_(1)

    benchmark(run)


# ---------------------------------------------------------------- comparison
@bench("ops: (td == other).all(), 100 leaves")
def test_eq_all_td(benchmark):
    td = TensorDict(flat_dict(), batch_size=BATCH)
    other = td.clone()
    assert benchmark(lambda: (td == other).all()) is True


@bench("ops: (td == other).all(), 100 leaves")
def test_eq_all_dict(benchmark):
    d = flat_dict()
    o = {k: v.clone() for k, v in d.items()}
    assert benchmark(lambda: all(bool((v == o[k]).all()) for k, v in d.items())) is True
