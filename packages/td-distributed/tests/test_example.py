"""The torchrun example runs on one machine (two processes), as its docs say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensordict.testing import free_port

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "multinode_torchrun.py"

try:
    import tensordict.memmap  # noqa: F401

    HAS_MEMMAP = True
except ImportError:
    HAS_MEMMAP = False


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="examples/ is not next to this checkout")
@pytest.mark.skipif(not HAS_MEMMAP, reason="the example shares a td-memmap dataset")
@pytest.mark.timeout(240)
def test_torchrun_example_on_one_machine(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}",
        str(EXAMPLE), "--data", str(tmp_path / "dataset"), "--workers", "1", "--timeout", "60",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=220)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    assert "[rank 0/2]" in out and "[rank 1/2]" in out
    assert "global rows 20000" in out
    assert "summaries: ranks [0, 1]" in out
    assert (tmp_path / "dataset" / "meta.json").is_file()
