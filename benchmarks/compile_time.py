"""First-call compile time (torch.compile, default Inductor backend, fullgraph) of the
three cases in ``compile_cases.py``, over a TensorDict; prints one JSON line.

Runs unchanged under this project and under tensordict 0.15.3, for the comparison:

    python benchmarks/compile_time.py            # this project
    /path/to/venv-0.15.3/bin/python benchmarks/compile_time.py

Each case is compiled from a fresh Dynamo state (``torch._dynamo.reset()``) after one
warm-up compile of an unrelated function (so that Inductor's one-off start-up is not
charged to the first case), with Inductor's caches off; the figure is the CPU time of this process and of the C++
compiler runs it waits for during the first call (Inductor compiles in-process,
``compile_threads=1``, so other processes sharing the machine stay out of it), the median of ``--repeat`` runs. One intra-op thread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from compile_cases import CASES  # noqa: E402


def first_call(fn, arg) -> float:
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)
    start = _cpu()
    compiled(arg)
    return _cpu() - start


def _cpu() -> float:
    """CPU time of this process and of the children it waited for (the C++ compiler)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch._inductor.config.force_disable_caches = True  # compile every time, on both sides
    torch._inductor.config.compile_threads = 1  # in this process: its CPU time is the figure
    first_call(lambda x: x.sin() + 1, torch.randn(4))  # Inductor start-up
    out = {}
    for name, make in CASES.items():
        td_fn, td_in, _, _ = make()
        out[name] = round(statistics.median(first_call(td_fn, td_in) for _ in range(args.repeat)), 3)
    import tensordict

    print(json.dumps({"tensordict": getattr(tensordict, "__version__", "?"), "seconds": out}))


if __name__ == "__main__":
    main()
