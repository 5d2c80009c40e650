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
than the caller alone. A further row therefore also runs the workers in sessions
of their own (a ``pool=`` whose initializer calls ``os.setsid()``), which is what a
dedicated machine gives every process anyway. The last row is the machine's
ceiling: the same function on the two halves in two forked processes that return
nothing (no tensordict code). On a virtual machine whose two vCPUs share a physical
core, the same work costs up to 1.6x more CPU time while both run, and the ceiling
moves between about 1.15x and 1.75x from one run to the next: read map against it.

Besides the wall time, the table gives the CPU time both ranks spend per transfer
(``time.process_time``, backend threads included): on a busy machine the wall time
of a sub-millisecond transfer mostly measures the scheduler, the CPU time does not.
``--own-sessions`` runs each rank in a session of its own (``os.setsid()``): Linux's
scheduler autogroups share the CPU between sessions, so two ranks in one session
compete for one share of a machine shared with other sessions.

Goals (issue 8): td within 1.5x of the single buffer for both sizes; td at least
10x faster than the per-leaf loop for 100 x 1 KB; map with 2 workers at least
1.6x faster than one process. The figures depend on the machine's load: on a
shared machine, run it when it is quiet, or read the ratios only.
"""

from __future__ import annotations

import argparse
import datetime
import json
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


METHODS = ("td.send/recv", "consolidated", "per-leaf dist.send", "single buffer")


def _transfer(method: str, rank: int, td: TensorDict, ctd: TensorDict, leaves: list, flat: torch.Tensor) -> None:
    if method == "td.send/recv":
        td.send(1) if rank == 0 else td.recv(0)
    elif method == "consolidated":
        ctd.send(1) if rank == 0 else ctd.recv(0)
    elif method == "per-leaf dist.send":
        for i, leaf in enumerate(leaves):
            dist.send(leaf, 1, tag=i) if rank == 0 else dist.recv(leaf, 0, tag=i)
    else:
        dist.send(flat, 1) if rank == 0 else dist.recv(flat, 0)


def _rank(rank: int, port: int, rounds: int, out_dir: str, own_session: bool) -> None:
    if own_session:
        os.setsid()  # see the module docstring: a scheduler autogroup per rank, as on separate machines
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    result: dict = {}
    for name, (n_leaves, numel) in CASES.items():
        td = _make(n_leaves, numel, 1.0 if rank == 0 else 0.0)
        ctd = _make(n_leaves, numel, 1.0 if rank == 0 else 0.0).consolidate()
        leaves = [td[f"leaf{i}"] for i in range(n_leaves)]
        flat = torch.zeros(n_leaves * numel)
        wall: dict = {m: [] for m in METHODS}
        cpu: dict = {m: [] for m in METHODS}
        r = max(3, rounds // (10 if numel > 1 << 20 else 1))
        for it in range(r + 1):  # first round: warm-up
            for method in METHODS:  # alternate: load changes hit every method alike
                dist.barrier()
                c0, t0 = time.process_time(), time.perf_counter()
                _transfer(method, rank, td, ctd, leaves, flat)
                if it:
                    wall[method].append(time.perf_counter() - t0)
                    cpu[method].append(time.process_time() - c0)
        if rank == 1:
            assert bool((td["leaf0"] == 1).all()) and bool((ctd["leaf0"] == 1).all()), "recv got wrong data"
        result[name] = {m: (statistics.median(wall[m]), statistics.mean(cpu[m])) for m in METHODS}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us" if seconds < 1e-2 else f"{seconds * 1e3:,.1f} ms"


def bench_send(rounds: int, own_session: bool) -> list[str]:
    out = tempfile.mkdtemp()
    mp.start_processes(_rank, args=(free_port(), rounds, out, own_session), nprocs=2, start_method="spawn")
    ranks = []
    for r in (0, 1):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            ranks.append(json.load(f))
    lines = [
        "| case       | method             | wall (receiver) | vs one buffer | CPU, both ranks | vs one buffer |",
        "|------------|--------------------|----------------:|--------------:|----------------:|--------------:|",
    ]
    for name in CASES:
        base_wall = ranks[1][name]["single buffer"][0]
        base_cpu = ranks[0][name]["single buffer"][1] + ranks[1][name]["single buffer"][1]
        for m in METHODS:
            w = ranks[1][name][m][0]
            c = ranks[0][name][m][1] + ranks[1][name][m][1]
            lines.append(f"| {name:<10} | {m:<18} | {_fmt(w):>15} | {w / base_wall:>12.2f}x | {_fmt(c):>15} "
                         f"| {c / base_cpu:>12.2f}x |")
        per_leaf = ranks[1][name]["per-leaf dist.send"][0]
        lines.append(f"| {name:<10} | per-leaf / td.send | {per_leaf / ranks[1][name]['td.send/recv'][0]:>14.1f}x | "
                     f"{'':>13} | {'':>15} | {'':>13} |")
    return lines


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


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _bare_halves(td: TensorDict) -> float:
    """The machine's ceiling: ``cpu_bound`` on the two halves in two forked processes that
    return nothing (no tensordict machinery, no result transfer). Wall seconds."""
    half = td.batch_size[0] // 2
    t0 = time.perf_counter()
    pids = []
    for part in (td[:half], td[half:]):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                cpu_bound(part)
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return time.perf_counter() - t0


def bench_map(rows: int, repeats: int) -> list[str]:
    td = TensorDict(x=torch.randn(rows, 4), batch_size=[rows])
    cpu_bound(td[:1000])  # warm-up
    one, two, two_own, bare = [], [], [], []
    one_cpu, parent_cpu, workers_cpu = [], [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        ref = cpu_bound(td)
        one.append(time.perf_counter() - t0)
        one_cpu.append(time.process_time() - c0)
        time.sleep(0.5)
        bare.append(_bare_halves(td))
        time.sleep(0.5)  # let the previous pools' background joins reap their workers
        k0 = _children_cpu()
        t0, c0 = time.perf_counter(), time.process_time()
        res = td.map(cpu_bound, num_workers=2)
        two.append(time.perf_counter() - t0)
        parent_cpu.append(time.process_time() - c0)
        time.sleep(0.5)
        workers_cpu.append(_children_cpu() - k0)
        assert torch.allclose(res["y"], ref["y"]), "map gave a different result"
        t0 = time.perf_counter()
        with mp.get_context("fork").Pool(2, initializer=_new_session) as pool:
            res = td.map(cpu_bound, pool=pool, num_chunks=2)
        two_own.append(time.perf_counter() - t0)
        assert torch.allclose(res["y"], ref["y"]), "map gave a different result"
    a, b, c = statistics.median(one), statistics.median(two), statistics.median(two_own)
    d = statistics.median(bare)
    # CPU-time model of 2 idle cores: the caller's own CPU time is serial, the workers'
    # CPU time (fn, writing the results) splits over two cores; waiting costs nothing
    a_cpu, p_cpu, w_cpu = statistics.median(one_cpu), statistics.median(parent_cpu), statistics.median(workers_cpu)
    model = p_cpu + w_cpu / 2
    return [
        "| map over 1M rows                              | time       | speed-up |",
        "|-----------------------------------------------|-----------:|---------:|",
        f"| one process                                   | {_fmt(a):>10} |    1.00x |",
        f"| td.map(num_workers=2)                         | {_fmt(b):>10} | {a / b:>7.2f}x |",
        f"| td.map(pool=2 workers in their own sessions)  | {_fmt(c):>10} | {a / c:>7.2f}x |",
        f"| ceiling: fn on 2 halves, 2 bare forks         | {_fmt(d):>10} | {a / d:>7.2f}x |",
        "",
        f"map's time is {b / d:.2f}x the ceiling's: two busy vCPUs of a virtual machine may share",
        "one physical core, and then the ceiling itself is low (see the module docstring).",
        "",
        "CPU time (independent of the load):",
        f"one process {_fmt(a_cpu)}; map: caller {_fmt(p_cpu)} + workers {_fmt(w_cpu)} in all;",
        f"on 2 idle cores that is caller + workers / 2 = {_fmt(model)}: {a_cpu / model:.2f}x",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="timed rounds for the small case")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows for the map benchmark")
    parser.add_argument("--map-repeats", type=int, default=3)
    parser.add_argument("--skip-map", action="store_true")
    parser.add_argument("--skip-send", action="store_true")
    parser.add_argument("--own-sessions", action="store_true",
                        help="run each rank in a session of its own (a scheduler autogroup each)")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if not args.skip_send:
        where = "each rank in its own session" if args.own_sessions else "both ranks in this session"
        print(f"\nsend/recv over gloo, loopback: median wall time on the receiver, mean CPU time of both ranks ({where})")
        print("\n".join(bench_send(args.rounds, args.own_sessions)))
    if not args.skip_map:
        print(f"\nmap with 2 workers ({args.rows:,} rows, median of {args.map_repeats})")
        print("\n".join(bench_map(args.rows, args.map_repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
