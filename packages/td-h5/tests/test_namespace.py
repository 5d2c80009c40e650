"""td-h5 is a portion of the ``tensordict`` namespace reached through td-core's seams."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import tensordict
import tensordict.persistent
from tensordict import TensorDict
from tensordict.persistent import PersistentTensorDict, from_h5


def test_top_level_names_resolve_to_td_h5():
    assert tensordict.PersistentTensorDict is PersistentTensorDict
    assert tensordict.from_h5 is from_h5
    assert "PersistentTensorDict" in tensordict.persistent.__all__
    assert tensordict.persistent.__version__ == "0.1.0"


def test_portion_ships_no_tensordict_init():
    """td-h5 is a namespace portion: it never ships tensordict/__init__.py (editable or wheel)."""
    import importlib.metadata as md

    pkg_dir = os.path.dirname(tensordict.persistent.__file__)
    assert os.path.basename(pkg_dir) == "persistent"
    assert os.path.exists(os.path.join(pkg_dir, "py.typed"))
    files = md.files("td-h5") or []
    shipped = {str(f).replace(os.sep, "/") for f in files}
    assert "tensordict/__init__.py" not in shipped
    if "td-h5" in pkg_dir:  # editable install: the source tree has no __init__.py either
        assert not os.path.exists(os.path.join(os.path.dirname(pkg_dir), "__init__.py"))


@pytest.mark.timeout(120)
def test_import_tensordict_does_not_import_h5py():
    code = (
        "import sys, tensordict; "
        "assert 'h5py' not in sys.modules, 'h5py imported'; "
        "assert 'tensordict.persistent' not in sys.modules, 'td-h5 imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_seam_methods(tmp_path):
    path = tmp_path / "seam.h5"
    td = TensorDict(a=torch.arange(3), batch_size=[3])
    with td.to_h5(path) as out:
        assert isinstance(out, PersistentTensorDict)
    with TensorDict.from_h5(path) as back:
        assert isinstance(back, PersistentTensorDict)
        assert back["a"].tolist() == [0, 1, 2]
    with tensordict.from_h5(str(path), mode="r") as back:
        assert back.batch_size == torch.Size([3])
