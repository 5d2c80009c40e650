"""The td-store speed workload, runnable with any ``tensordict`` that has ``tensordict.store``
(this project's, or tensordict 0.15.3 in another venv) against one running redis-server.

A dataset of 10,000 rows (``obs`` float32[64], ``action`` float32[8], ``reward`` float32[1],
``done`` bool[1]):

* ``fill``: write all rows in batches of 100 (``store[i:i+100] = batch``), 100 calls;
* ``sample``: read 256 random rows by index tensor (``store[idx]``), the same ``idx`` each
  round;
* ``sample_fresh``: the same with a new random ``idx`` each round (no row read twice
  in a row: what a replay buffer does);
* ``read_key``: read the whole ``obs`` key (``store["obs"]``);
* ``to_local``: read everything into a TensorDict (``store.to_tensordict()``);
* ``ping``: one ``PING`` (the round-trip floor);
* ``local_sample``: the same 256-row sample on an in-memory TensorDict;
* ``raw_pipeline_sample``: a bare redis-py pipeline that fetches the same bytes
  (``GETRANGE`` per row and key), the floor a client-side gather allows;
* ``raw_pipeline_rows``: this project only, a bare redis-py transaction of the commands
  the store sends (one ``GETRANGE`` per row of the record group).

Prints one JSON object of median milliseconds. Usage:
``python benchmarks/store_workload.py --port 6379 [--rounds 30]``
(the benchmark ``benchmarks/test_bench_store.py`` runs it for both implementations).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time
import warnings

import redis
import torch

from tensordict import TensorDict
from tensordict.store import TensorDictStore

ROWS = 10_000
BATCH = 100
SAMPLE = 256
SCHEMA = {"obs": ([64], torch.float32), "action": ([8], torch.float32), "reward": ([1], torch.float32), "done": ([1], torch.bool)}


def make_local(rows: int = ROWS) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        obs=torch.randn(rows, 64, generator=g),
        action=torch.randn(rows, 8, generator=g),
        reward=torch.randn(rows, 1, generator=g),
        done=torch.rand(rows, 1, generator=g) > 0.9,
        batch_size=[rows],
    )


def median_ms(fn, rounds: int) -> float:
    fn()  # warm up (script loading, metadata caches)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def run(port: int, rounds: int, host: str = "127.0.0.1") -> dict:
    local = make_local()
    store = TensorDictStore.from_schema(SCHEMA, batch_size=[ROWS], host=host, port=port)
    batches = [local[i : i + BATCH] for i in range(0, ROWS, BATCH)]
    idx = torch.randint(ROWS, (SAMPLE,), generator=torch.Generator().manual_seed(1))
    client = redis.Redis(host=host, port=port)
    out: dict = {}

    def fill() -> None:
        for i, b in enumerate(batches):
            store[i * BATCH : (i + 1) * BATCH] = b

    out["fill"] = median_ms(fill, max(rounds // 5, 3))
    got = store[idx]
    assert (got == local[idx]).all(), "sample differs from the data written"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out["sample"] = median_ms(lambda: store[idx], rounds)
        fresh = iter([torch.randint(ROWS, (SAMPLE,), generator=g2) for g2 in [torch.Generator().manual_seed(2)] for _ in range(rounds + 1)])
        out["sample_fresh"] = median_ms(lambda: store[next(fresh)], rounds)
        out["read_key"] = median_ms(lambda: store["obs"], rounds)
        out["to_local"] = median_ms(store.to_tensordict, rounds)
    out["ping"] = median_ms(client.ping, rounds * 3)
    out["local_sample"] = median_ms(lambda: local[idx], rounds * 3)

    # the bare-client floor: the same bytes, one GETRANGE per row and key, one pipeline
    raw = redis.Redis(host=host, port=port)
    names = {k: f"bench:{{raw}}:{k}" for k in SCHEMA}
    sizes = {k: local[k][0].numel() * local[k].element_size() for k in SCHEMA}
    for k, name in names.items():
        t = local[k].contiguous()
        raw.set(name, ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))
    rows = idx.tolist()

    def raw_sample() -> dict:
        pipe = raw.pipeline(transaction=False)
        for k, name in names.items():
            n = sizes[k]
            for r in rows:
                pipe.getrange(name, r * n, r * n + n - 1)
        res = pipe.execute()
        outd = {}
        for j, k in enumerate(names):
            blob = b"".join(res[j * SAMPLE : (j + 1) * SAMPLE])
            outd[k] = torch.frombuffer(bytearray(blob), dtype=local[k].dtype).view(SAMPLE, -1)
        return outd

    assert torch.equal(raw_sample()["obs"], local["obs"][idx])
    out["raw_pipeline_sample"] = median_ms(raw_sample, rounds)
    out["raw_pipeline_rows"] = _raw_rows(store, raw, rows, rounds)
    raw.delete(*names.values())
    store.clear_redis()
    store.close()
    return out


def _raw_rows(store, raw, rows: list, rounds: int):
    """This project's layout only (``None`` elsewhere): a bare redis-py pipeline (a
    ``MULTI``/``EXEC``) of one ``GETRANGE`` per row of the record group that holds the
    four leaves: the same commands the store sends, packed and parsed by redis-py."""
    entries = getattr(getattr(store, "_root", None), "entries", None)
    if entries is None:
        return None
    e = entries()[("obs",)]
    if "g" not in e:
        return None
    key, rs = store._root.base + "g:" + e["g"], e["rs"]

    def fetch() -> list:
        pipe = raw.pipeline(transaction=True)
        for r in rows:
            pipe.getrange(key, r * rs, r * rs + rs - 1)
        return pipe.execute()

    return median_ms(fetch, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print(json.dumps({k: (None if v is None else round(v, 4)) for k, v in run(args.port, args.rounds, args.host).items()}))


if __name__ == "__main__":
    main()
