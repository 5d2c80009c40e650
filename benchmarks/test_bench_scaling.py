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
import os

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


def deep_dict(depth: int) -> dict:
    """The plain-dict source of :func:`deep`'s chain."""
    node: dict = {"leaf": torch.zeros(4, 2)}
    for i in reversed(range(depth)):
        node = {f"l{i}": node}
    return node


@scale("depth: construct")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_construct(benchmark, n):
    src = deep_dict(n)
    benchmark(TensorDict, src, batch_size=[4])


@scale("depth: apply(x + 1)")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_apply(benchmark, n):
    td, _ = deep(n)
    benchmark(td.apply, lambda x: x + 1)


@scale("depth: index [1:3]")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_index(benchmark, n):
    td, _ = deep(n)
    benchmark(td.__getitem__, slice(1, 3))


@scale("depth: stack of 2")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_stack(benchmark, n):
    tds = [deep(n)[0], deep(n)[0]]
    benchmark(torch.stack, tds, 0)


def _remove_tree(root) -> None:
    """Deletes a folder tree without recursion: pytest removes old ``tmp_path`` folders with
    ``shutil.rmtree``, which recurses once per level (Python 3.11) and fails on a 1,000-deep
    store, ending a later pytest session with a RecursionError."""
    todo = [(os.fspath(root), False)]
    while todo:
        path, emptied = todo.pop()
        if emptied:
            os.rmdir(path)
            continue
        todo.append((path, True))
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    todo.append((entry.path, False))
                else:
                    os.unlink(entry.path)


@pytest.fixture
def deep_tmp(tmp_path):
    """``tmp_path``, emptied without recursion afterwards (see :func:`_remove_tree`)."""
    yield tmp_path
    for entry in os.listdir(tmp_path):
        _remove_tree(tmp_path / entry)


def deep_short(depth: int) -> TensorDict:
    """:func:`deep` with one-letter level names: a store's folders nest like the keys, and
    the deepest path must stay under PATH_MAX (4,096 bytes) at depth 1,000."""
    td = TensorDict(batch_size=[4])
    td.set(("a",) * depth + ("leaf",), torch.zeros(4, 2))
    return td


@pytest.mark.skipif(not HAS_MEMMAP, reason="td-memmap is not installed")
@scale("depth: memmap save")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_memmap_save(benchmark, n, deep_tmp):
    td = deep_short(n)
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: td.memmap(deep_tmp / f"s{next(counter)}"), rounds=3, iterations=1)


@pytest.mark.skipif(not HAS_MEMMAP, reason="td-memmap is not installed")
@scale("depth: memmap load")
@pytest.mark.parametrize("n", DEPTHS)
def test_scale_depth_memmap_load(benchmark, n, deep_tmp):
    deep_short(n).memmap(deep_tmp / "store")
    benchmark.pedantic(TensorDict.load_memmap, args=(deep_tmp / "store",), rounds=3, iterations=1)
