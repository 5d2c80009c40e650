"""Leaf-wise copies and item views: this project or tensordict 0.15.3, next to the same work
written by hand on a dict of tensors (issue 31's "slower than 0.15.3" cases).

Run it with either interpreter (the API names are the same) and compare the two outputs,
or let it run both (``--both``; the second interpreter defaults to ``/work/ref015/bin/python``):

    .nox/tests_all-cpu/bin/python benchmarks/compare_015_core.py --both

Each line: the case, the best CPU time of ``repeat`` runs (microseconds), the hand-written
baseline measured in the same process right after it, and the ratio. The cases are
alternated ``rounds`` times and the best of each is kept: on a shared machine, the other
processes only ever make a run slower.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import timeit

import torch

import tensordict
from tensordict import TensorDict

REF_PYTHON = "/work/ref015/bin/python"


def _flat(n: int = 100, shape: tuple = (10, 3)) -> dict:
    return {f"k{i}": torch.randn(*shape) for i in range(n)}


def cases() -> dict:
    flat = _flat()
    td = TensorDict(flat, batch_size=[10])
    wide = {f"k{i}": torch.randn(1000, 4) for i in range(10)}
    td_wide = TensorDict(wide, batch_size=[1000])
    f64 = torch.float64
    return {
        "to(float64), 100 leaves [10, 3]": (lambda: td.to(f64), lambda: {k: v.to(f64) for k, v in flat.items()}),
        "to(float64), 10 leaves [1000, 4]": (lambda: td_wide.to(f64), lambda: {k: v.to(f64) for k, v in wide.items()}),
        "clone(), 100 leaves [10, 3]": (td.clone, lambda: {k: v.clone() for k, v in flat.items()}),
        "clone(), 10 leaves [1000, 4]": (td_wide.clone, lambda: {k: v.clone() for k, v in wide.items()}),
        "list(items()), 100 leaves": (lambda: list(td.items()), lambda: list(flat.items())),
        "list(keys()), 100 leaves": (lambda: list(td.keys()), lambda: list(flat.keys())),
    }


def best(fn, number: int, repeat: int = 5) -> float:
    return min(timeit.Timer(fn, timer=time.process_time).repeat(number=number, repeat=repeat)) / number


def measure(rounds: int = 5) -> None:
    torch.set_num_threads(1)
    print(f"tensordict {tensordict.__version__}, torch {torch.__version__}, python {sys.version.split()[0]}")
    table = cases()
    results = {name: [float("inf"), float("inf")] for name in table}
    for _ in range(rounds):
        for name, (ours, hand) in table.items():
            number = 2000 if "items" in name or "keys" in name else 100
            results[name][0] = min(results[name][0], best(ours, number))
            results[name][1] = min(results[name][1], best(hand, number))
    for name, (ours, hand) in results.items():
        print(f"{name:36s} {ours * 1e6:9.1f} us   hand {hand * 1e6:9.1f} us   ratio {ours / hand:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--both", action="store_true", help="also run the script with --ref-python")
    parser.add_argument("--ref-python", default=REF_PYTHON)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    measure(args.rounds)
    if args.both:
        sys.stdout.flush()
        subprocess.run([args.ref_python, __file__, "--rounds", str(args.rounds)], check=True)


if __name__ == "__main__":
    main()
