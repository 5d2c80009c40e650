"""How cost grows: the same operation on 10, 100, 1,000 and 10,000 keys, and on nesting
depths of 10, 100 and 1,000.

Each case is one benchmark group ``scale: <operation>`` parametrised by the size; the cost
should grow linearly, i.e. the time per key (or per level) should stay flat as the size
grows. ``benchmarks/scaling.py`` prints that table from the pytest-benchmark JSON and draws
the docs' chart. Names end in neither ``_td`` nor ``_dict``, so ``report.py`` (which pairs a
TensorDict case with a dict baseline) leaves them out.
"""

from __future__ import annotations

import gc
import importlib.util

import pytest
import torch

from tensordict import TensorDict, lazy_stack

SIZES = [10, 100, 1_000, 10_000]


@pytest.fixture(autouse=True)
def _frozen_heap():
    """Moves the test session's objects out of the collector's reach while a case runs:
    otherwise a full collection of the whole pytest heap (hundreds of thousands of
    objects) lands in some rounds of the large cases, which allocate the most, and shows
    up as super-linear growth that belongs to the session, not to the operation (the
    hand-written ``dict:`` cases showed it too)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()

DEPTHS = [10, 100, 1_000]
HAS_MEMMAP = importlib.util.find_spec("tensordict.memmap") is not None


def flat(n: int) -> TensorDict:
    return TensorDict({f"k{i}": torch.zeros(4, 2) for i in range(n)}, batch_size=[4])


def deep(depth: int) -> tuple[TensorDict, tuple[str, ...]]:
    """A chain of ``depth`` nested TensorDicts, each holding one leaf, and the deepest key."""
    key = tuple(f"l{i}" for i in range(depth))
    td = TensorDict(batch_size=[4])
    td.set(key + ("leaf",), torch.zeros(4, 2))  # creates every level on the way
    return td, key


def scale(op: str):
    return pytest.mark.benchmark(group=f"scale: {op}")


@scale("construct")
@pytest.mark.parametrize("n", SIZES)
def test_scale_construct(benchmark, n):
    src = {f"k{i}": torch.zeros(4, 2) for i in range(n)}
    benchmark(TensorDict, src, batch_size=[4])


@scale("get every key")
@pytest.mark.parametrize("n", SIZES)
def test_scale_get(benchmark, n):
    td = flat(n)
    keys = list(td.keys())
    benchmark(lambda: [td.get(k) for k in keys])


@scale("set every key")
@pytest.mark.parametrize("n", SIZES)
def test_scale_set(benchmark, n):
    td = flat(n)
    items = list(td.items())
    benchmark(lambda: [td.set(k, v) for k, v in items])


@scale("apply(x + 1)")
@pytest.mark.parametrize("n", SIZES)
def test_scale_apply(benchmark, n):
    td = flat(n)
    benchmark(td.apply, lambda x: x + 1)


@scale("index [1:3]")
@pytest.mark.parametrize("n", SIZES)
def test_scale_index(benchmark, n):
    td = flat(n)
    benchmark(td.__getitem__, slice(1, 3))


@scale("stack of 2")
@pytest.mark.parametrize("n", SIZES)
def test_scale_stack(benchmark, n):
    tds = [flat(n), flat(n)]
    benchmark(torch.stack, tds, 0)


@scale("lazy_stack of 2")
@pytest.mark.parametrize("n", SIZES)
def test_scale_lazy_stack(benchmark, n):
    tds = [flat(n), flat(n)]
    benchmark(lazy_stack, tds, 0)


@scale("keys(include_nested=True), 10 groups")
@pytest.mark.parametrize("n", SIZES)
def test_scale_keys_nested(benchmark, n):
    groups = {f"g{j}": {f"k{i}": torch.zeros(4) for i in range(max(n // 10, 1))} for j in range(10)}
    td = TensorDict(groups, batch_size=[4])
    benchmark(lambda: list(td.keys(include_nested=True)))


@pytest.mark.skipif(not HAS_MEMMAP, reason="td-memmap is not installed")
@scale("memmap save")
@pytest.mark.parametrize("n", SIZES)
def test_scale_memmap_save(benchmark, n, tmp_path):
    td = flat(n)
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: td.memmap(tmp_path / f"s{next(counter)}"), rounds=3, iterations=1)


@pytest.mark.skipif(not HAS_MEMMAP, reason="td-memmap is not installed")
@scale("memmap load")
@pytest.mark.parametrize("n", SIZES)
def test_scale_memmap_load(benchmark, n, tmp_path):
    flat(n).memmap(tmp_path / "store")
    benchmark.pedantic(TensorDict.load_memmap, args=(tmp_path / "store",), rounds=3, iterations=1)


# ---------------------------------------------------------------- the same, by hand on dicts
# ``scale: dict: <operation>``: the hand-written counterpart of each keys case, so the table can
# tell the growth that comes from the container from the growth that the interpreter, the
# allocator and the caches give any Python code touching that many tensors.
def flat_dict(n: int) -> dict:
    return {f"k{i}": torch.zeros(4, 2) for i in range(n)}


def _check(v: torch.Tensor) -> None:
    if v.shape[:1] != (4,):
        raise RuntimeError


@scale("dict: construct")
@pytest.mark.parametrize("n", SIZES)
def test_scale_dict_construct(benchmark, n):
    src = flat_dict(n)

    def make():
        out = {}
        for k, v in src.items():
            _check(v)
            out[k] = v
        return out

    benchmark(make)


@scale("dict: get every key")
@pytest.mark.parametrize("n", SIZES)
def test_scale_dict_get(benchmark, n):
    d = flat_dict(n)
    keys = list(d)
    benchmark(lambda: [d.get(k) for k in keys])


@scale("dict: set every key")
@pytest.mark.parametrize("n", SIZES)
def test_scale_dict_set(benchmark, n):
    d = flat_dict(n)
    items = list(d.items())

    def run():
        for k, v in items:
            _check(v)
            d[k] = v

    benchmark(run)


@scale("dict: apply(x + 1)")
@pytest.mark.parametrize("n", SIZES)
def test_scale_dict_apply(benchmark, n):
    d = flat_dict(n)
    benchmark(lambda: {k: v + 1 for k, v in d.items()})


@scale("dict: index [1:3]")
@pytest.mark.parametrize("n", SIZES)
def test_scale_dict_index(benchmark, n):
    d = flat_dict(n)
    benchmark(lambda: {k: v[1:3] for k, v in d.items()})


@scale("dict: stack of 2")
@pytest.mark.parametrize("n", SIZES)
def test_scale_dict_stack(benchmark, n):
    a, b = flat_dict(n), flat_dict(n)
    benchmark(lambda: {k: torch.stack([v, b[k]], 0) for k, v in a.items()})


@scale("dict: keys(include_nested=True), 10 groups")
@pytest.mark.parametrize("n", SIZES)
def test_scale_dict_keys_nested(benchmark, n):
    groups = {f"g{j}": {f"k{i}": torch.zeros(4) for i in range(max(n // 10, 1))} for j in range(10)}

    def walk():
        out = []
        for g, sub in groups.items():
            out.append(g)
            out.extend((g, k) for k in sub)
        return out

    benchmark(walk)


@scale("depth: nested get")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_get(benchmark, n):
    td, key = deep(n)
    benchmark(td.get, key + ("leaf",))


@scale("depth: nested set")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_set(benchmark, n):
    td, key = deep(n)
    value = torch.ones(4, 2)
    benchmark(td.set, key + ("leaf",), value)


@scale("depth: keys(include_nested=True)")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_keys(benchmark, n):
    td, _ = deep(n)
    benchmark(lambda: list(td.keys(include_nested=True)))


@scale("depth: clone")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_clone(benchmark, n):
    td, _ = deep(n)
    benchmark(td.clone)
