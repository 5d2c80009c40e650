"""Runs the td-store workload (``store_workload.py``) with this project and with tensordict
0.15.3 (another interpreter) against one private redis-server, alternating the two
``--repeat`` times, and prints the median figures and the ratios (0.15.3 / ours).

Usage: ``python benchmarks/store_compare.py --ref /path/to/venv-0.15.3/bin/python [--repeat 3]``
(``redis-server`` on the PATH; the server runs on 127.0.0.1 and a free port, persistence off).
Also prints ``redis-benchmark -t ping`` for context when it is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPS = ["fill", "sample", "sample_fresh", "read_key", "to_local", "ping", "local_sample", "raw_pipeline_sample", "raw_pipeline_rows"]
#: the issue's goals: how many times faster than tensordict 0.15.3 each figure must be
GOALS = {"fill": 3, "sample": 10, "sample_fresh": 10, "read_key": 3, "to_local": 3}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _workload(python: str, port: int, rounds: int, threads: int | None) -> dict:
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)  # the same intra-op threads on both sides
    out = subprocess.run(
        [python, str(HERE / "store_workload.py"), "--port", str(port), "--rounds", str(rounds)],
        capture_output=True, text=True, timeout=600, check=True, env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help="python of a venv with tensordict==0.15.3 and redis")
    parser.add_argument("--ours", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for both sides")
    args = parser.parse_args()
    port = _port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL,
        )
        try:
            time.sleep(0.5)
            if shutil.which("redis-benchmark"):
                bench = subprocess.run(
                    ["redis-benchmark", "-p", str(port), "-t", "ping", "-n", "20000", "-q"],
                    capture_output=True, text=True, timeout=120,
                )
                summary = [x.split("\r")[-1].strip() for x in bench.stdout.splitlines() if "requests per second" in x]
                print("redis-benchmark -t ping:", " | ".join(summary))
            runs: dict = {"ours": [], "0.15.3": []}
            for _ in range(args.repeat):
                runs["ours"].append(_workload(args.ours, port, args.rounds, args.threads))
                runs["0.15.3"].append(_workload(args.ref, port, args.rounds, args.threads))
        finally:
            server.terminate()
            server.wait(10)
    med = {
        side: {op: (statistics.median(v) if (v := [r[op] for r in rs if r.get(op) is not None]) else None) for op in OPS}
        for side, rs in runs.items()
    }
    print(f"{'op (median ms)':<22}{'ours':>10}{'0.15.3':>10}{'0.15.3/ours':>13}  goal")
    for op in OPS:
        a, b = med["ours"][op], med["0.15.3"][op]
        goal = f">= {GOALS[op]}x" if op in GOALS else ""
        ratio = f"{b / a:>12.2f}x" if a and b else f"{'-':>13}"
        print(f"{op:<22}{a if a is not None else float('nan'):>10.3f}{b if b is not None else float('nan'):>10.3f}{ratio}  {goal}")
    print(json.dumps(med))


if __name__ == "__main__":
    main()
