"""td-h5 Zarr benchmarks: ``to_zarr`` / ``from_zarr`` next to the same work written with zarr by hand.

Each group pairs the TensorDict call with its hand-written zarr baseline; the ratio
(TensorDict / zarr) is the figure to watch (goal: <= 1.2).

* ``zarr_write``: a 48 MiB TensorDict (3 leaves, one nested) written as a new store
  (single chunk, no compression, the default layout of both sides). ``to_zarr`` also
  writes the batch metadata and consolidated metadata, and writes beside the target
  and renames it in place (so a failed save keeps the earlier store).
* ``zarr_read``: open the store and read every leaf into memory
  (``from_zarr(...).to_tensordict()`` vs ``zarr.open_group`` + ``arr[...]``).
* ``zarr_read_rows``: 1000 sorted random rows of one leaf of a store chunked by 4096
  rows (``get_at`` vs ``arr.oindex``).

For the figure against tensordict 0.15.3 on the same data, run
``benchmarks/zarr_compare.py`` under both interpreters (it prints medians).

Run: ``python -m pytest benchmarks/test_bench_zarr.py --benchmark-only -q``
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from tensordict import TensorDict

zarr = pytest.importorskip("zarr")

ROWS = 1 << 16
ROUNDS = 15


@pytest.fixture(scope="module")
def workdir():
    path = Path(tempfile.mkdtemp(prefix="td_zarr_bench_"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def td():
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        {
            "x": torch.randn(ROWS, 128, generator=g),  # 32 MiB
            "labels": torch.arange(ROWS),  # 0.5 MiB
            "nested": {"z": torch.randn(ROWS, 60, generator=g)},  # 15 MiB
        },
        batch_size=[ROWS],
    )


def _hand_write(path: Path, td: TensorDict) -> None:
    root = zarr.open_group(str(path), mode="w")
    for key, value in td.items(include_nested=True, leaves_only=True):
        parts = (key,) if isinstance(key, str) else key
        group = root
        for part in parts[:-1]:
            group = group.require_group(part)
        arr = value.numpy()
        group.create_array(parts[-1], shape=arr.shape, dtype=arr.dtype, chunks=arr.shape, compressors=None)[...] = arr


def _hand_read(path: Path) -> dict:
    def walk(group) -> dict:
        out = {}
        for name, node in group.members():
            out[name] = walk(node) if isinstance(node, zarr.Group) else torch.from_numpy(node[...])
        return out

    return walk(zarr.open_group(str(path), mode="r"))


# ---------------------------------------------------------------------- write
@pytest.mark.benchmark(group="zarr_write")
def test_write_to_zarr(benchmark, workdir, td):
    path = workdir / "w_td.zarr"
    benchmark.pedantic(lambda: td.to_zarr(path).close(), rounds=ROUNDS, warmup_rounds=1)
    assert (TensorDict.from_zarr(path)["x"] == td["x"]).all()


@pytest.mark.benchmark(group="zarr_write")
def test_write_zarr_by_hand(benchmark, workdir, td):
    path = workdir / "w_hand.zarr"
    benchmark.pedantic(lambda: _hand_write(path, td), rounds=ROUNDS, warmup_rounds=1)


# ---------------------------------------------------------------------- read
@pytest.fixture(scope="module")
def store(workdir, td):
    path = workdir / "r.zarr"
    td.to_zarr(path).close()
    return path


@pytest.mark.benchmark(group="zarr_read")
def test_read_from_zarr(benchmark, store, td):
    out = benchmark.pedantic(lambda: TensorDict.from_zarr(store).to_tensordict(), rounds=ROUNDS, warmup_rounds=1)
    assert (out == td).all()


@pytest.mark.benchmark(group="zarr_read")
def test_read_zarr_by_hand(benchmark, store):
    out = benchmark.pedantic(lambda: _hand_read(store), rounds=ROUNDS, warmup_rounds=1)
    assert out["x"].shape == (ROWS, 128)


# ---------------------------------------------------------------------- read rows
@pytest.fixture(scope="module")
def chunked(workdir, td):
    path = workdir / "c.zarr"
    td.to_zarr(path, chunks=(4096,)).close()
    return path


@pytest.fixture(scope="module")
def rows():
    return np.sort(np.random.default_rng(1).choice(ROWS, 1000, replace=False))


@pytest.mark.benchmark(group="zarr_read_rows")
def test_read_rows_get_at(benchmark, chunked, rows):
    index = torch.from_numpy(rows)
    with TensorDict.from_zarr(chunked) as ztd:
        out = benchmark.pedantic(lambda: ztd.get_at("x", index), rounds=ROUNDS, warmup_rounds=1)
    assert out.shape == (1000, 128)


@pytest.mark.benchmark(group="zarr_read_rows")
def test_read_rows_by_hand(benchmark, chunked, rows):
    arr = zarr.open_group(str(chunked), mode="r")["x"]
    out = benchmark.pedantic(lambda: torch.from_numpy(arr.oindex[rows]), rounds=ROUNDS, warmup_rounds=1)
    assert out.shape == (1000, 128)
