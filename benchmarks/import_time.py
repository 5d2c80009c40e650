"""Import cost of ``tensordict`` on top of ``torch``: median over fresh processes.

Run it with the interpreter of an environment where td-core is installed as a wheel
(pip compiles the bytecode at install time), e.g. the ``tests(core, cpu)`` nox venv::

    .nox/tests-core-cpu/bin/python benchmarks/import_time.py

Uses ``python -X importtime`` and subtracts torch's cumulative time from tensordict's
in the same process.
"""

from __future__ import annotations

import statistics
import subprocess
import sys


def one_run() -> float:
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import tensordict"],
        capture_output=True, text=True, check=True,
    ).stderr
    cumulative = {}
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            cumulative[parts[2].strip()] = int(parts[1])
    return (cumulative["tensordict"] - cumulative.get("torch", 0)) / 1e6


def main(n: int = 10) -> None:
    runs = sorted(one_run() for _ in range(n))
    print(f"import tensordict over torch: median {statistics.median(runs) * 1000:.1f} ms "
          f"(min {runs[0] * 1000:.1f}, max {runs[-1] * 1000:.1f}) over {n} processes")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
