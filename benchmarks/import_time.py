"""Import cost of ``tensordict`` on top of ``torch``: median over fresh processes.

Run it with the interpreter of an environment where td-core is installed as a wheel
(pip compiles the bytecode at install time), e.g. the ``tests(core, cpu)`` nox venv::

    .nox/tests-core-cpu/bin/python benchmarks/import_time.py [N] [MODULE]

``MODULE`` defaults to ``tensordict`` (e.g. ``tensordict.nn`` with all six installed).

Uses ``python -X importtime`` on ``import torch; import MODULE`` and sums the self time of
every module imported after torch (what MODULE adds; torch itself is loaded first, as a
user's program would).
"""

from __future__ import annotations

import statistics
import subprocess
import sys


def one_run(module: str = "tensordict") -> float:
    """Seconds that importing ``module`` adds over ``import torch`` in one fresh process:
    the summed self time of every module imported after torch finished loading."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import torch; import {module}"],
        capture_output=True, text=True, check=True,
    ).stderr
    total, after_torch = 0, False
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        if after_torch:
            total += int(parts[0].split(":")[1])
        elif parts[2].strip() == "torch":
            after_torch = True
    return total / 1e6


def main(n: int = 10, module: str = "tensordict") -> None:
    runs = sorted(one_run(module) for _ in range(n))
    print(f"import {module} over torch: median {statistics.median(runs) * 1000:.1f} ms "
          f"(min {runs[0] * 1000:.1f}, max {runs[-1] * 1000:.1f}) over {n} processes")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10, sys.argv[2] if len(sys.argv) > 2 else "tensordict")
