"""to_zarr / from_zarr against zarr by hand, runnable under this project or tensordict 0.15.3.

Run it under both interpreters on the same machine and compare the printed medians:

    .nox/tests_all-cpu/bin/python benchmarks/zarr_compare.py [ROUNDS] [large|small]
    /path/to/venv-with-tensordict-0.15.3/bin/python benchmarks/zarr_compare.py [ROUNDS] [large|small]

The cases alternate round by round (TensorDict, then by hand), so a noisy shared
machine affects both sides alike. Data: the same as ``test_bench_zarr.py`` (48 MiB in
three leaves, one nested), single chunk, no compression.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import zarr

import tensordict
from tensordict import TensorDict

ROWS = 1 << 16
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 21
#: "large" (default): 3 leaves, 48 MiB; "small": 512 leaves of 128 KiB (64 MiB), per-leaf costs
LAYOUT = sys.argv[2] if len(sys.argv) > 2 else "large"


def hand_write(path: Path, td: TensorDict) -> None:
    root = zarr.open_group(str(path), mode="w")
    for key, value in td.items(include_nested=True, leaves_only=True):
        parts = (key,) if isinstance(key, str) else key
        group = root
        for part in parts[:-1]:
            group = group.require_group(part)
        arr = value.numpy()
        group.create_array(parts[-1], shape=arr.shape, dtype=arr.dtype, chunks=arr.shape, compressors=None)[...] = arr


def hand_read(path: Path) -> dict:
    def walk(group) -> dict:
        return {n: walk(v) if isinstance(v, zarr.Group) else torch.from_numpy(v[...]) for n, v in group.members()}

    return walk(zarr.open_group(str(path), mode="r"))


def td_write(path: Path, td: TensorDict) -> None:
    td.to_zarr(path).close()


def td_read(path: Path) -> TensorDict:
    ztd = TensorDict.from_zarr(path)
    out = ztd.to_tensordict()
    ztd.close()
    return out


def main() -> None:
    warnings.filterwarnings("ignore")
    g = torch.Generator().manual_seed(0)
    if LAYOUT == "small":
        td = TensorDict({f"key{i}": torch.randn(1 << 15, generator=g) for i in range(512)}, batch_size=[1 << 15])
    else:
        td = TensorDict(
            {"x": torch.randn(ROWS, 128, generator=g), "labels": torch.arange(ROWS), "nested": {"z": torch.randn(ROWS, 60, generator=g)}},
            batch_size=[ROWS],
        )
    work = Path(tempfile.mkdtemp(prefix="td_zarr_cmp_"))
    times: dict[str, list] = {k: [] for k in ("to_zarr", "write_by_hand", "from_zarr", "read_by_hand")}
    try:
        td_write(work / "r.zarr", td)
        for _ in range(ROUNDS):
            for name, fn in (
                ("to_zarr", lambda: td_write(work / "w1.zarr", td)),
                ("write_by_hand", lambda: hand_write(work / "w2.zarr", td)),
                ("from_zarr", lambda: td_read(work / "r.zarr")),
                ("read_by_hand", lambda: hand_read(work / "r.zarr")),
            ):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    version = getattr(tensordict, "__version__", "?")
    print(f"tensordict {version}, zarr {zarr.__version__}, layout {LAYOUT!r}, {ROUNDS} rounds")
    for name, values in times.items():
        print(f"{name:14s} median {statistics.median(values) * 1e3:8.1f} ms   min {min(values) * 1e3:8.1f} ms")
    for a, b in (("to_zarr", "write_by_hand"), ("from_zarr", "read_by_hand")):
        print(f"{a} / {b}: median {statistics.median(times[a]) / statistics.median(times[b]):.2f}x, "
              f"min {min(times[a]) / min(times[b]):.2f}x")


if __name__ == "__main__":
    main()
