"""The end-to-end demo (``examples/demo.py``) runs on a subset and passes all its checks.

Runs as a subprocess, as ``nox -s demo`` does: every distribution installed, real files,
real worker processes and a real 2-rank gloo group. Needs scikit-learn and matplotlib
(the all-packages session installs them); skipped otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo.py"
NEEDED = ("sklearn", "matplotlib", "tqdm", "h5py", "tensordict.nn", "tensordict.memmap", "tensordict.persistent",
          "tensordict.distributed", "tensordict.tensorclass")
MISSING = [m for m in NEEDED if importlib.util.find_spec(m) is None]

pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"the demo needs {MISSING}")


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DEMO), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.mark.timeout(600)
def test_demo_runs_on_a_subset(tmp_path):
    out = tmp_path / "demo_out"
    res = _run("--subset", "500", "--epochs", "3", "--members", "3", "--min-accuracy", "0.6", "--out", str(out))
    assert res.returncode == 0, f"demo failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    assert "ALL CHECKS PASSED" in res.stdout
    png = out / "demo.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] and report["samples"] == 500 and report["epochs"] == 3
    assert len(report["member_accuracy"]) == 3
    assert report["reload"]["reloaded"] == report["accuracy"]
    assert report["send_recv"]["intact"] is True
    assert all(report["sizes"][k] > 0 for k in ("dataset", "checkpoint", "predictions.h5"))
    assert {c["name"] for c in report["checks"]} >= {
        "preprocessed in place on disk", "checkpoint reload: same predictions", "HDF5 read back with plain h5py",
        "HDF5 read back with PersistentTensorDict", "send/recv between 2 ranks: arrived intact",
    }
    # a passing check carries no failure text in the report
    assert all(c["ok"] and "failure" not in c for c in report["checks"])
    # the closing hint is a command that works from another folder, outside any nox environment
    hint = next(line for line in res.stdout.splitlines() if line.startswith("inspect a store"))
    shown = subprocess.run(shlex.split(hint.split(":  ", 1)[1]), capture_output=True, text=True,
                           cwd=tmp_path, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "complete" in shown.stdout
    # the stores the demo wrote are complete according to `tensordict inspect`
    from tensordict._inspect import inspect_store

    for name in ("dataset", "checkpoint", "predictions.h5"):
        assert inspect_store(out / name).complete, name


@pytest.mark.timeout(600)
def test_demo_rejects_bad_data(tmp_path):
    """An HDF5 file without the ``labels`` dataset: a clear message and exit status 2."""
    import h5py
    import numpy as np

    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as f:
        f["images"] = np.zeros((30, 8, 8), dtype=np.float32)
    res = _run("--data", str(bad), "--out", str(tmp_path / "out"), timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "labels" in res.stderr and str(bad) in res.stderr


@pytest.mark.timeout(300)
def test_demo_help():
    res = _run("--help", timeout=300)
    assert res.returncode == 0
    for option in ("--data", "--epochs", "--subset", "--out"):
        assert option in res.stdout
