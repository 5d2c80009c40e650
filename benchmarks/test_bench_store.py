"""td-store benchmarks: the issue-29 workload on a private local redis-server.

A dataset of 10,000 rows (``obs`` float32[64], ``action`` float32[8], ``reward``,
``done``), see ``store_workload.py``:

* ``fill``: 100 writes of 100 rows (``store[i:i+100] = batch``);
* ``sample``: 256 random rows by index tensor, next to the same sample on an in-memory
  TensorDict (``local_sample``) and a bare redis-py pipeline fetching the same bytes
  (``raw_pipeline_sample``, the client-side floor);
* ``read_key``: the whole ``obs`` key; ``to_local``: everything; ``ping``: one round trip.

The comparison with tensordict 0.15.3 (the issue's goals: sample >= 10x, fill / one key /
``to_local()`` >= 3x faster) runs the same workload in both interpreters against one
server: ``python benchmarks/store_compare.py --ref <venv-0.15.3>/bin/python``. With
``TD_REF_PYTHON`` set, ``test_reference_figures`` here runs 0.15.3's side too and attaches
its figures to the benchmark JSON (``extra_info``).

Run: ``python -m pytest benchmarks/test_bench_store.py --benchmark-only -q``
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("redis")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import store_workload as wl  # noqa: E402

from tensordict.store import TensorDictStore  # noqa: E402

ROUNDS = 30


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    proc = subprocess.Popen(
        ["redis-server", "--port", str(free), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path_factory.mktemp("redis-bench"))],
        stdout=subprocess.DEVNULL,
    )
    import redis

    for _ in range(200):
        try:
            redis.Redis(port=free).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    yield free
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def data(port):
    local = wl.make_local()
    store = TensorDictStore.from_schema(wl.SCHEMA, batch_size=[wl.ROWS], host="127.0.0.1", port=port)
    store[0 : wl.ROWS] = local
    idx = torch.randint(wl.ROWS, (wl.SAMPLE,), generator=torch.Generator().manual_seed(1))
    yield store, local, idx
    store.clear_redis()
    store.close()


def test_fill(benchmark, data):
    store, local, _ = data
    batches = [local[i : i + wl.BATCH] for i in range(0, wl.ROWS, wl.BATCH)]

    def fill():
        for i, b in enumerate(batches):
            store[i * wl.BATCH : (i + 1) * wl.BATCH] = b

    benchmark.pedantic(fill, rounds=5, warmup_rounds=1)
    assert (store.to_tensordict() == local).all()


def test_sample(benchmark, data):
    store, local, idx = data
    out = benchmark.pedantic(lambda: store[idx], rounds=ROUNDS, warmup_rounds=2)
    assert (out == local[idx]).all()


def test_sample_fresh(benchmark, data):
    """A new random index each round (the command cache of rows warms as a replay buffer's would)."""
    store, local, _ = data
    g = torch.Generator().manual_seed(2)
    idxs = [torch.randint(wl.ROWS, (wl.SAMPLE,), generator=g) for _ in range(ROUNDS + 2)]
    it = iter(idxs)
    benchmark.pedantic(lambda: store[next(it)], rounds=ROUNDS, warmup_rounds=2)
    assert (store[idxs[0]] == local[idxs[0]]).all()


def test_local_sample(benchmark, data):
    _, local, idx = data
    benchmark.pedantic(lambda: local[idx], rounds=ROUNDS, warmup_rounds=2)


def test_read_key(benchmark, data):
    store, local, _ = data
    out = benchmark.pedantic(lambda: store["obs"], rounds=ROUNDS, warmup_rounds=2)
    assert torch.equal(out, local["obs"])


def test_to_local(benchmark, data):
    store, local, _ = data
    out = benchmark.pedantic(store.to_tensordict, rounds=ROUNDS, warmup_rounds=2)
    assert (out == local).all()


def test_ping(benchmark, data):
    store, _, _ = data
    benchmark.pedantic(store._client.ping, rounds=ROUNDS * 3, warmup_rounds=2)


@pytest.mark.skipif(not os.environ.get("TD_REF_PYTHON"), reason="TD_REF_PYTHON (a venv with tensordict==0.15.3) not set")
def test_reference_figures(benchmark, port):
    """Both implementations' medians on this server, attached to the benchmark JSON."""
    here = Path(__file__).resolve().parent / "store_workload.py"
    figures = {}
    for side, python in (("ours", sys.executable), ("0.15.3", os.environ["TD_REF_PYTHON"])):
        res = subprocess.run([python, str(here), "--port", str(port), "--rounds", "20"],
                             capture_output=True, text=True, timeout=600, check=True)
        figures[side] = json.loads(res.stdout.strip().splitlines()[-1])
    benchmark.extra_info.update(figures)
    benchmark.pedantic(lambda: None, rounds=1)
    print(json.dumps(figures))
