"""td-memmap benchmarks: saving, loading + indexing, allocation, preallocation.

Each TensorDict case sits next to hand-written baselines on a plain dict of
tensors, in the same pytest-benchmark group, so the ratios read directly (test
names end in ``_td`` / ``_dict`` where ``benchmarks/report.py`` pairs them; other
baselines, such as ``numpy.save``, are printed by pytest-benchmark only):

- ``save-256MiB``: ``td.memmap(prefix, num_threads=4)`` vs ``torch.save(dict)`` (the
  ``_dict`` pair) vs ``numpy.save`` per key (8 keys of 32 MiB). ``extra_info["GB/s"]``
  is the rate.
- ``load-index``: ``load_memmap`` then index 1000 random rows, vs
  ``torch.load(mmap=True)`` then index (the ``_dict`` pair: both map the files), vs
  ``torch.load`` then index.
- ``empty-1000x16`` / ``zeros-1000x16``: ``MemoryMappedTensor.empty((1000, 16))``
  (anonymous shared memory) vs ``torch.empty``; the same for ``zeros``.
- ``from_tensor-1000x16`` / ``full-1000x16``: values written into new anonymous
  shared memory vs ``x.clone().share_memory_()`` / ``torch.full(...).share_memory_()``.
- ``index-row`` / ``unbind-1000``: views of a memory-mapped file (results stay
  ``MemoryMappedTensor``) vs the same op on a plain tensor mapping the same file.
- ``memmap_like-10GB``: ``memmap_like`` of a 10 GB expanded TensorDict vs creating
  the sparse files and mapping them by hand; ``extra_info`` holds the resident
  memory growth (``VmRSS`` from ``/proc/self/status``).

Run: ``pytest benchmarks/test_bench_memmap.py --benchmark-only --benchmark-min-rounds=5``.
Files go under pytest's ``tmp_path`` (``/tmp``).
"""

from __future__ import annotations

import os

import pytest
import torch

from tensordict import TensorDict
from tensordict.memmap import MemoryMappedTensor

np = pytest.importorskip("numpy")

MiB = 1 << 20
KEYS = 8
ROWS, COLS = 65536, 128  # float32: 32 MiB per key, 256 MiB in all
TOTAL = KEYS * ROWS * COLS * 4


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.fixture(scope="module")
def data() -> dict:
    gen = torch.Generator().manual_seed(0)
    return {f"key{i}": torch.randn(ROWS, COLS, generator=gen) for i in range(KEYS)}


def _gbps(benchmark, nbytes: int) -> None:
    stats = benchmark.stats.stats if hasattr(benchmark.stats, "stats") else benchmark.stats
    benchmark.extra_info["GB/s"] = round(nbytes / stats.mean / 1e9, 3)


# ----------------------------------------------------------------------------- save
@pytest.mark.benchmark(group="save-256MiB")
def test_save_memmap_td(benchmark, data, tmp_path):
    td = TensorDict(data, batch_size=[ROWS])
    prefix = tmp_path / "td"
    benchmark.pedantic(lambda: td.memmap(prefix, num_threads=4), rounds=5, iterations=1, warmup_rounds=1)
    _gbps(benchmark, TOTAL)


@pytest.mark.benchmark(group="save-256MiB")
def test_save_torch_save_dict(benchmark, data, tmp_path):
    path = tmp_path / "data.pt"
    benchmark.pedantic(lambda: torch.save(data, path), rounds=5, iterations=1, warmup_rounds=1)
    _gbps(benchmark, TOTAL)


@pytest.mark.benchmark(group="save-256MiB")
def test_save_dict_numpy_save(benchmark, data, tmp_path):
    arrays = {k: v.numpy() for k, v in data.items()}

    def run() -> None:
        for key, arr in arrays.items():
            np.save(tmp_path / f"{key}.npy", arr)

    benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    _gbps(benchmark, TOTAL)


# ----------------------------------------------------------------------------- load + index
@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    TensorDict(data, batch_size=[ROWS]).memmap(root / "td", num_threads=4)
    torch.save(data, root / "data.pt")
    idx = torch.randint(ROWS, (1000,), generator=torch.Generator().manual_seed(1))
    return root, idx


@pytest.mark.benchmark(group="load-index")
def test_load_memmap_index_td(benchmark, saved):
    root, idx = saved
    out = benchmark(lambda: TensorDict.load_memmap(root / "td")[idx])
    assert out.batch_size == (1000,)


@pytest.mark.benchmark(group="load-index")
def test_load_dict_torch_load_index(benchmark, saved):
    root, idx = saved
    out = benchmark.pedantic(
        lambda: {k: v[idx] for k, v in torch.load(root / "data.pt").items()}, rounds=5, iterations=1
    )
    assert out["key0"].shape == (1000, COLS)


@pytest.mark.benchmark(group="load-index")
def test_load_torch_load_mmap_index_dict(benchmark, saved):
    root, idx = saved
    out = benchmark(lambda: {k: v[idx] for k, v in torch.load(root / "data.pt", mmap=True).items()})
    assert out["key0"].shape == (1000, COLS)


# ----------------------------------------------------------------------------- allocation
@pytest.mark.benchmark(group="empty-1000x16")
def test_empty_memmap_td(benchmark):
    out = benchmark(MemoryMappedTensor.empty, (1000, 16))
    assert out.shape == (1000, 16)


@pytest.mark.benchmark(group="empty-1000x16")
def test_empty_torch_dict(benchmark):
    out = benchmark(torch.empty, (1000, 16))
    assert out.shape == (1000, 16)


@pytest.mark.benchmark(group="zeros-1000x16")
def test_zeros_memmap_td(benchmark):
    out = benchmark(MemoryMappedTensor.zeros, (1000, 16))
    assert out.shape == (1000, 16)


@pytest.mark.benchmark(group="zeros-1000x16")
def test_zeros_torch_dict(benchmark):
    out = benchmark(torch.zeros, (1000, 16))
    assert out.shape == (1000, 16)


# Writing values into new shared memory: the hand-written way is ``share_memory_()``.
# Both pay the first touch of fresh pages (page faults), which dominates at 64 KB.
@pytest.mark.benchmark(group="from_tensor-1000x16")
def test_from_tensor_memmap_td(benchmark):
    x = torch.randn(1000, 16)
    out = benchmark(MemoryMappedTensor.from_tensor, x)
    assert out.is_shared() and torch.equal(out, x)


@pytest.mark.benchmark(group="from_tensor-1000x16")
def test_from_tensor_share_memory_dict(benchmark):
    x = torch.randn(1000, 16)
    out = benchmark(lambda: x.clone().share_memory_())
    assert out.is_shared() and torch.equal(out, x)


@pytest.mark.benchmark(group="full-1000x16")
def test_full_memmap_td(benchmark):
    out = benchmark(lambda: MemoryMappedTensor.full((1000, 16), fill_value=2.0))
    assert out.is_shared() and out[0, 0] == 2.0


@pytest.mark.benchmark(group="full-1000x16")
def test_full_share_memory_dict(benchmark):
    out = benchmark(lambda: torch.full((1000, 16), 2.0).share_memory_())
    assert out.is_shared() and out[0, 0] == 2.0


# ----------------------------------------------------------------------------- views
# A view of a memory-mapped file is again a MemoryMappedTensor of that file; the
# baseline is the same op on a plain tensor (``torch.from_file``'s result).
@pytest.fixture(scope="module")
def mapped(tmp_path_factory):
    path = tmp_path_factory.mktemp("views") / "x.memmap"
    mm = MemoryMappedTensor.from_tensor(torch.randn(1000, 16), filename=path)
    plain = torch.from_file(str(path), shared=True, size=1000 * 16, dtype=torch.float32).view(1000, 16)
    return mm, plain


@pytest.mark.benchmark(group="index-row")
def test_index_row_memmap_td(benchmark, mapped):
    mm, _ = mapped
    out = benchmark(mm.__getitem__, 3)
    assert type(out) is MemoryMappedTensor


@pytest.mark.benchmark(group="index-row")
def test_index_row_tensor_dict(benchmark, mapped):
    _, plain = mapped
    out = benchmark(plain.__getitem__, 3)
    assert out.shape == (16,)


@pytest.mark.benchmark(group="unbind-1000")
def test_unbind_memmap_td(benchmark, mapped):
    mm, _ = mapped
    out = benchmark(mm.unbind, 0)
    assert type(out[0]) is MemoryMappedTensor


@pytest.mark.benchmark(group="unbind-1000")
def test_unbind_tensor_dict(benchmark, mapped):
    _, plain = mapped
    out = benchmark(plain.unbind, 0)
    assert len(out) == 1000


# ----------------------------------------------------------------------------- preallocation
def _expanded_10gb() -> TensorDict:
    # (3, 224, 224) uint8 images + a (256,) float32 vector: 151,552 B per row
    row = TensorDict({"image": torch.zeros(3, 224, 224, dtype=torch.uint8), "feat": torch.zeros(256)}, [])
    n = (10 * 10**9) // (3 * 224 * 224 + 256 * 4)
    return row.expand(n)


@pytest.mark.benchmark(group="memmap_like-10GB")
def test_memmap_like_td(benchmark, tmp_path):
    td = _expanded_10gb()
    before = _rss_kib()
    out = benchmark.pedantic(lambda: td.memmap_like(tmp_path / "ds"), rounds=5, iterations=1)
    benchmark.extra_info["rss_growth_MiB"] = round((_rss_kib() - before) / 1024, 1)
    benchmark.extra_info["GB_allocated"] = round(sum(v.numel() * v.element_size() for v in out.values(True, True)) / 1e9, 2)
    assert out.batch_size == td.batch_size


@pytest.mark.benchmark(group="memmap_like-10GB")
def test_memmap_like_by_hand_dict(benchmark, tmp_path):
    td = _expanded_10gb()
    shapes = {k: (tuple(v.shape), v.dtype) for k, v in td.items()}
    before = _rss_kib()

    def run() -> dict:
        out = {}
        for key, (shape, dtype) in shapes.items():
            path = str(tmp_path / f"{key}.bin")
            numel = 1
            for s in shape:
                numel *= s
            with open(path, "wb") as f:
                f.truncate(numel * dtype.itemsize)
            out[key] = torch.from_file(path, shared=True, size=numel, dtype=dtype).view(shape)
        return out

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["rss_growth_MiB"] = round((_rss_kib() - before) / 1024, 1)
    for key in shapes:
        os.remove(tmp_path / f"{key}.bin")
