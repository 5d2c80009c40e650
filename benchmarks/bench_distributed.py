"""td-distributed figures: send/recv over gloo on loopback, and ``map`` with 2 workers.

A script, not a pytest file (it needs two processes): ``python benchmarks/bench_distributed.py``.

Send/recv: two ranks (``torch.multiprocessing.start_processes``, gloo on 127.0.0.1)
move a TensorDict of (a) 100 leaves x 1 KB and (b) 10 leaves x 10 MB, three ways:

- ``td.send`` / ``td.recv`` (this package) on plain TensorDicts (one tensor per leaf);
- the same on consolidated TensorDicts (``td.consolidate()`` on both sides: the
  payload is the storage itself);
- a hand-written loop of ``dist.send`` / ``dist.recv``, one per leaf (one tag each);
- one ``dist.send`` of a single pre-flattened buffer of the same total size (the limit).

The methods alternate within each round (so load changes hit them alike); each
round starts with a barrier and is timed on the receiver. The table gives medians
and the ratios td/buffer and per-leaf/td.

map: a CPU-bound function (a Python loop of small tensor ops, so it runs on one
core whatever torch's thread count) over a TensorDict of 1M rows, in this process
versus ``td.map(fn, num_workers=2)``. Linux's scheduler autogroups share the CPU
between *sessions*, not processes: on a machine shared with other sessions, the
workers of a pool (which stay in the caller's session) together get no more CPU
than the caller alone. The last row therefore also runs the workers in sessions
of their own (a ``pool=`` whose initializer calls ``os.setsid()``), which is what a
dedicated machine gives every process anyway.

Each rank runs in a session of its own (``os.setsid()``; ``--shared-session`` keeps
them in the caller's): Linux's scheduler autogroups share the CPU between
sessions, so on a machine shared with other sessions two ranks in one session
compete for one share, which penalizes whichever method needs CPU time (packing,
parsing) far more than it would on two cores of their own. All methods run in the
same two processes, so the comparison stays fair either way.

Goals (issue 8): td within 1.5x of the single buffer for both sizes; td at least
10x faster than the per-leaf loop for 100 x 1 KB; map with 2 workers at least
1.6x faster than one process. The figures depend on the machine's load: on a
shared machine, run it when it is quiet, or read the ratios only.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tensordict import TensorDict
from tensordict.testing import free_port

CASES = {
    "100 x 1 KB": (100, 256),  # float32: 256 elements = 1 KB
    "10 x 10 MB": (10, 10 * (1 << 20) // 4),
}


def _make(n_leaves: int, numel: int, value: float) -> TensorDict:
    return TensorDict({f"leaf{i}": torch.full((numel,), value) for i in range(n_leaves)}, batch_size=[])


def _rank(rank: int, port: int, rounds: int, out_path: str, own_session: bool) -> None:
    if own_session:
        os.setsid()  # see the module docstring: a scheduler autogroup per rank, as on separate machines
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    lines = []
    for name, (n_leaves, numel) in CASES.items():
        td = _make(n_leaves, numel, 1.0 if rank == 0 else 0.0)
        ctd = _make(n_leaves, numel, 1.0 if rank == 0 else 0.0).consolidate()
        leaves = [td[f"leaf{i}"] for i in range(n_leaves)]
        flat = torch.zeros(n_leaves * numel)
        timings: dict = {"td.send/recv": [], "consolidated": [], "per-leaf dist.send": [], "single buffer": []}
        r = max(3, rounds // (10 if numel > 1 << 20 else 1))
        for it in range(r + 1):  # first round: warm-up
            for method in timings:
                dist.barrier()
                t0 = time.perf_counter()
                if method == "td.send/recv":
                    if rank == 0:
                        td.send(1)
                    else:
                        td.recv(0)
                elif method == "consolidated":
                    if rank == 0:
                        ctd.send(1)
                    else:
                        ctd.recv(0)
                elif method == "per-leaf dist.send":
                    for i, leaf in enumerate(leaves):
                        if rank == 0:
                            dist.send(leaf, 1, tag=i)
                        else:
                            dist.recv(leaf, 0, tag=i)
                else:
                    if rank == 0:
                        dist.send(flat, 1)
                    else:
                        dist.recv(flat, 0)
                dt = time.perf_counter() - t0
                if it:
                    timings[method].append(dt)
        if rank == 1:
            assert bool((td["leaf0"] == 1).all()), "td.recv did not receive the data"
            assert bool((ctd["leaf0"] == 1).all()), "td.recv did not receive the data"
            med = {k: statistics.median(v) for k, v in timings.items()}
            lines.append((name, med))
    if rank == 1:
        with open(out_path, "w") as f:
            for name, med in lines:
                f.write(f"{name}|{med['td.send/recv']}|{med['consolidated']}|{med['per-leaf dist.send']}|{med['single buffer']}\n")
    dist.barrier()
    dist.destroy_process_group()


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us" if seconds < 1e-2 else f"{seconds * 1e3:,.1f} ms"


def bench_send(rounds: int, own_session: bool) -> list[str]:
    out = tempfile.mktemp(suffix=".txt")
    mp.start_processes(_rank, args=(free_port(), rounds, out, own_session), nprocs=2, start_method="spawn")
    rows = []
    with open(out) as f:
        for line in f:
            name, td_t, c_t, leaf_t, buf_t = line.strip().split("|")
            td_t, c_t, leaf_t, buf_t = float(td_t), float(c_t), float(leaf_t), float(buf_t)
            rows.append(
                f"| {name:<10} | {_fmt(td_t):>10} | {_fmt(c_t):>12} | {_fmt(leaf_t):>13} | {_fmt(buf_t):>10} "
                f"| {td_t / buf_t:>9.2f}x | {c_t / buf_t:>18.2f}x | {leaf_t / td_t:>11.1f}x |"
            )
    os.unlink(out)
    head = [
        "| case       |    td.send | consolidated | per-leaf loop | one buffer | td/buffer | consolidated/buffer | per-leaf/td |",
        "|------------|-----------:|-------------:|--------------:|-----------:|----------:|-------------------:|------------:|",
    ]
    return head + rows


# ---------------------------------------------------------------------- map
def cpu_bound(chunk: TensorDict) -> TensorDict:
    """A Python-level loop of small tensor ops (one core, whatever the thread count)."""
    x = chunk["x"]
    out = torch.empty_like(x)
    block = 500
    for start in range(0, x.shape[0], block):
        v = x[start : start + block]
        acc = v
        for _ in range(12):
            acc = torch.tanh(acc * 1.01 + v.sin())
        out[start : start + block] = acc
    return TensorDict(y=out, batch_size=chunk.batch_size)


def _new_session() -> None:
    """Pool initializer: the worker leaves the caller's session (and its scheduler autogroup)."""
    os.setsid()


def bench_map(rows: int, repeats: int) -> list[str]:
    td = TensorDict(x=torch.randn(rows, 4), batch_size=[rows])
    cpu_bound(td[:1000])  # warm-up
    one, two, two_own = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ref = cpu_bound(td)
        one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = td.map(cpu_bound, num_workers=2)
        two.append(time.perf_counter() - t0)
        assert torch.allclose(res["y"], ref["y"]), "map gave a different result"
        t0 = time.perf_counter()
        with mp.get_context("fork").Pool(2, initializer=_new_session) as pool:
            res = td.map(cpu_bound, pool=pool, num_chunks=2)
        two_own.append(time.perf_counter() - t0)
        assert torch.allclose(res["y"], ref["y"]), "map gave a different result"
    a, b, c = statistics.median(one), statistics.median(two), statistics.median(two_own)
    return [
        "| map over 1M rows                              | time       | speed-up |",
        "|-----------------------------------------------|-----------:|---------:|",
        f"| one process                                   | {_fmt(a):>10} |    1.00x |",
        f"| td.map(num_workers=2)                         | {_fmt(b):>10} | {a / b:>7.2f}x |",
        f"| td.map(pool=2 workers in their own sessions)  | {_fmt(c):>10} | {a / c:>7.2f}x |",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="timed rounds for the small case")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows for the map benchmark")
    parser.add_argument("--map-repeats", type=int, default=3)
    parser.add_argument("--skip-map", action="store_true")
    parser.add_argument("--skip-send", action="store_true")
    parser.add_argument("--shared-session", action="store_true",
                        help="keep the two ranks in this session (one scheduler autogroup for both)")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if not args.skip_send:
        where = "both ranks in this session" if args.shared_session else "each rank in its own session"
        print(f"\nsend/recv over gloo, loopback (median of rounds, timed on the receiver; {where})")
        print("\n".join(bench_send(args.rounds, not args.shared_session)))
    if not args.skip_map:
        print(f"\nmap with 2 workers ({args.rows:,} rows, median of {args.map_repeats})")
        print("\n".join(bench_map(args.rows, args.map_repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
