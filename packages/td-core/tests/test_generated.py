"""The generated methods (``_ops_generated.py``, ``_seams_generated.py``) are up to date
with their tables, and they are real methods that IDEs and type checkers see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from tensordict import TensorDict
from tensordict._ops_gen_binary import BinaryOpsMixin
from tensordict._ops_gen_loop import LoopOpsMixin
from tensordict._ops_gen_unary import UnaryOpsMixin
from tensordict._ops_generated import GeneratedOpsMixin
from tensordict._seams_generated import GeneratedSiblingMixin

ROOT = Path(__file__).resolve().parents[3]


def test_generated_files_are_not_stale():
    gen = ROOT / "tools" / "gen_ops.py"
    res = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr + res.stdout


def test_no_method_is_attached_with_setattr():
    """Every leaf-wise op and seam is defined in a class body (visible to static tools)."""
    src = ROOT / "packages" / "td-core" / "src" / "tensordict"
    for name in ("_ops.py", "_seams.py"):
        assert "setattr(" not in (src / name).read_text(encoding="utf-8"), name


def test_generated_ops_run():
    td = TensorDict({"a": torch.tensor([1.0, -2.0]), "b": {"c": torch.tensor([4.0, 9.0])}}, [2])
    assert torch.equal(td.maximum(0.0)["a"], torch.tensor([1.0, 0.0]))
    assert torch.equal(td.sqrt()["b", "c"], torch.tensor([2.0, 3.0]))
    assert torch.equal(td.negative()["a"], torch.tensor([-1.0, 2.0]))
    assert "maximum" in vars(BinaryOpsMixin) and "memmap" in vars(GeneratedSiblingMixin)
    assert "sqrt" in vars(UnaryOpsMixin) and "isnan" in vars(LoopOpsMixin)
    assert GeneratedOpsMixin.__bases__ == (BinaryOpsMixin, UnaryOpsMixin, LoopOpsMixin)
    assert TensorDict.true_divide_ is GeneratedOpsMixin.div_


def test_generated_files_stay_short():
    """The op families are split so that no generated module outgrows the file-size guideline."""
    src = ROOT / "packages" / "td-core" / "src" / "tensordict"
    for path in sorted(src.glob("_ops_gen*.py")):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 1500, path.name


def test_generated_return_types():
    """Out-of-place ops are typed as returning a TensorDictBase, in-place ones ``Self``."""
    assert BinaryOpsMixin.maximum.__annotations__["return"] == "TensorDictBase"
    assert BinaryOpsMixin.mul_.__annotations__["return"] == "Self"
    assert LoopOpsMixin.isnan.__annotations__["return"] == "TensorDictBase"
