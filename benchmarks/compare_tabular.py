"""Tables and safetensors: this project or tensordict 0.15.3, next to the hand-written baseline.

Run it with either interpreter (the API names are the same) and compare the two outputs:

    .nox/tests_all-cpu/bin/python benchmarks/compare_tabular.py
    /path/to/venv-with-tensordict-0.15.3/bin/python benchmarks/compare_tabular.py

Each line: the operation, the best CPU time of ``repeat`` runs (microseconds or milliseconds),
the hand-written baseline measured in the same process, and the ratio. Data as in
``test_bench_tabular.py``: 1,000,000 rows x 10 numeric columns; 20 leaves of 4 MB.
"""

from __future__ import annotations

import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import safetensors.torch as st
import torch

import tensordict
from tensordict import TensorDict

ROWS = 1_000_000
DTYPES = [np.float64, np.float32, np.int64, np.int32] * 2 + [np.float64, np.float32]


def best(fn, number: int, repeat: int = 7) -> float:
    """Best CPU time of ``repeat`` runs of ``number`` calls (process time: on a shared
    machine, wall time mostly measures the other processes)."""
    return min(timeit.Timer(fn, timer=time.process_time).repeat(number=number, repeat=repeat)) / number


def line(name: str, ours: float, hand: float, unit: str = "us") -> None:
    scale = 1e6 if unit == "us" else 1e3
    print(f"{name:38s} {ours * scale:10.1f} {unit}   hand {hand * scale:10.1f} {unit}   ratio {ours / hand:5.2f}")


def main() -> None:
    print(f"tensordict {tensordict.__version__}, torch {torch.__version__}, pyarrow {pa.__version__}, python {sys.version.split()[0]}")
    rng = np.random.default_rng(0)
    table = pa.table({f"c{i}": (rng.random(ROWS) * 100).astype(dt) for i, dt in enumerate(DTYPES)})
    td = tensordict.from_arrow(table, copy=True)
    d = td.to_dict()

    line("from_arrow (1M x 10)", best(lambda: tensordict.from_arrow(table), 500),
         best(lambda: {n: torch.from_numpy(c.to_numpy()) for n, c in zip(table.column_names, table.columns)}, 500))
    line("to_arrow (1M x 10)", best(lambda: tensordict.to_arrow(td), 200),
         best(lambda: pa.table({k: pa.array(v.numpy()) for k, v in d.items()}), 200))
    line("to_pandas (1M x 10)", best(td.to_pandas, 3), best(lambda: pd.DataFrame({k: v.numpy() for k, v in d.items()}), 3), "ms")

    weights = TensorDict({f"layer{i}": {f"w{j}": torch.randn(1024, 1024) for j in range(2)} for i in range(10)}, [])
    flat = {".".join(k): v for k, v in weights.items(True, True)}
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "td.safetensors", Path(tmp) / "d.safetensors"
        line("to_safetensors (20 x 4 MB)", best(lambda: tensordict.to_safetensors(weights, a), 3),
             best(lambda: st.save_file(flat, str(b)), 3), "ms")
        line("from_safetensors (20 x 4 MB)", best(lambda: tensordict.from_safetensors(a), 5),
             best(lambda: st.load_file(str(b)), 5), "ms")


if __name__ == "__main__":
    main()
