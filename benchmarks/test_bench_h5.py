"""td-h5 benchmarks: PersistentTensorDict next to the same operation in plain h5py.

Each group pairs a ``PersistentTensorDict`` case with its hand-written h5py baseline;
the ratio (PersistentTensorDict / h5py) is the figure to watch (goal: <= 1.2).

* ``read_rows``: 1000 random rows of a 256 MiB float32 dataset (1 Mi rows x 64), the
  same sorted index on both sides (plus an unsorted-index case for PersistentTensorDict,
  which sorts, reads and re-orders).
* ``open_read_key``: open the file and read one 8 MiB key.
* ``write_256MiB``: write 256 MiB to a new file through ``to_h5`` vs ``h5py.create_dataset``.
* ``overwrite_256MiB`` (informative): the same over an existing file; ``to_h5`` writes a
  temporary file and renames it over the old one so a failure keeps the old file.

The data file is created once per session in the system temp folder and removed at
the end.

Run: ``python -m pytest benchmarks/test_bench_h5.py --benchmark-only --benchmark-min-rounds=5 -q``
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict

ROWS = 1 << 20  # 1 Mi rows x 64 float32 = 256 MiB
COLS = 64
N_READ = 1000
ROUNDS = 60  # same number of rounds on both sides: the machine may be shared and noisy


@pytest.fixture(scope="module")
def workdir():
    path = Path(tempfile.mkdtemp(prefix="td_h5_bench_"))
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((ROWS, COLS), dtype=np.float32),
        "labels": np.arange(ROWS, dtype=np.int64),
    }


@pytest.fixture(scope="module")
def bench_file(workdir, data):
    path = workdir / "data.h5"
    with h5py.File(path, "w") as f:
        for key, value in data.items():
            f.create_dataset(key, data=value)
    return path


@pytest.fixture(scope="module")
def sorted_rows():
    rng = np.random.default_rng(1)
    return np.sort(rng.choice(ROWS, N_READ, replace=False))


# ---------------------------------------------------------------------- read_rows
@pytest.mark.benchmark(group="read_rows")
def test_read_rows_persistent(benchmark, bench_file, sorted_rows):
    index = torch.from_numpy(sorted_rows)
    with PersistentTensorDict.from_h5(bench_file) as td:
        out = benchmark.pedantic(lambda: td[index]["x"], rounds=ROUNDS, warmup_rounds=2)
    assert out.shape == (N_READ, COLS)


@pytest.mark.benchmark(group="read_rows")
def test_read_rows_persistent_unsorted(benchmark, bench_file, sorted_rows):
    index = torch.from_numpy(np.random.default_rng(2).permutation(sorted_rows))
    with PersistentTensorDict.from_h5(bench_file) as td:
        out = benchmark.pedantic(lambda: td[index]["x"], rounds=ROUNDS, warmup_rounds=2)
    assert out.shape == (N_READ, COLS)


@pytest.mark.benchmark(group="read_rows")
def test_read_rows_h5py(benchmark, bench_file, sorted_rows):
    with h5py.File(bench_file, "r") as f:
        dset = f["x"]
        out = benchmark.pedantic(lambda: dset[sorted_rows], rounds=ROUNDS, warmup_rounds=2)
    assert out.shape == (N_READ, COLS)


# ---------------------------------------------------------------------- open_read_key
@pytest.mark.benchmark(group="open_read_key")
def test_open_read_key_persistent(benchmark, bench_file):
    def run():
        with PersistentTensorDict.from_h5(bench_file) as td:
            return td["labels"]

    assert benchmark.pedantic(run, rounds=ROUNDS, warmup_rounds=2).shape == (ROWS,)


@pytest.mark.benchmark(group="open_read_key")
def test_open_read_key_h5py(benchmark, bench_file):
    def run():
        with h5py.File(bench_file, "r") as f:
            return f["labels"][()]

    assert benchmark.pedantic(run, rounds=ROUNDS, warmup_rounds=2).shape == (ROWS,)


# ---------------------------------------------------------------------- write_256MiB
def _fresh(path: Path):
    def setup():
        if path.exists():
            path.unlink()

    return setup


@pytest.mark.benchmark(group="write_256MiB")
def test_write_to_h5(benchmark, workdir, data):
    td = TensorDict(x=torch.from_numpy(data["x"]), batch_size=[ROWS])
    target = workdir / "written_td.h5"
    benchmark.pedantic(lambda: td.to_h5(target).close(), setup=_fresh(target), rounds=5, warmup_rounds=1)
    assert os.path.getsize(target) >= ROWS * COLS * 4


@pytest.mark.benchmark(group="write_256MiB")
def test_write_h5py(benchmark, workdir, data):
    arr = data["x"]
    target = workdir / "written_h5py.h5"

    def run():
        with h5py.File(target, "w") as f:
            f.create_dataset("x", data=arr)

    benchmark.pedantic(run, setup=_fresh(target), rounds=5, warmup_rounds=1)
    assert os.path.getsize(target) >= ROWS * COLS * 4


@pytest.mark.benchmark(group="overwrite_256MiB")
def test_overwrite_to_h5(benchmark, workdir, data):
    """Overwriting keeps the old file intact until the new one is complete (temp + rename)."""
    td = TensorDict(x=torch.from_numpy(data["x"]), batch_size=[ROWS])
    target = workdir / "overwritten_td.h5"
    benchmark.pedantic(lambda: td.to_h5(target).close(), rounds=5, warmup_rounds=1)


@pytest.mark.benchmark(group="overwrite_256MiB")
def test_overwrite_h5py(benchmark, workdir, data):
    """Plain h5py truncates the old file first (not crash safe)."""
    arr = data["x"]
    target = workdir / "overwritten_h5py.h5"

    def run():
        with h5py.File(target, "w") as f:
            f.create_dataset("x", data=arr)

    benchmark.pedantic(run, rounds=5, warmup_rounds=1)
