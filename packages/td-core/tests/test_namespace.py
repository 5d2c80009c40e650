"""The shared namespace and the lazy sibling seams."""

import subprocess
import sys

import pytest

import tensordict


def test_import_is_light():
    # torch itself may import numpy; tensordict must add no numpy, h5py, table or file-format package or sibling module
    code = (
        "import sys, torch; before = set(sys.modules); import tensordict; "
        "new = set(sys.modules) - before; "
        "bad = sorted(m for m in new if m.split('.')[0] in ('numpy', 'h5py', 'pyarrow', 'pandas', 'polars', 'safetensors', 'streaming') "
        "or m.startswith(('tensordict.nn', 'tensordict.memmap', 'tensordict.persistent', "
        "'tensordict.distributed', 'tensordict.tensorclass', 'tensordict.prototype'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_path_is_extended():
    assert isinstance(tensordict.__path__, list)


def test_missing_attribute_is_attribute_error():
    with pytest.raises(AttributeError):
        tensordict.definitely_not_a_name  # noqa: B018


def test_sibling_seam_names_distribution_when_missing():
    code = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tensordict.persistent' or name.startswith('tensordict.persistent.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import tensordict\n"
        "try:\n"
        "    tensordict.PersistentTensorDict\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "    sys.exit(0 if 'td-h5' in str(e) else 1)\n"
        "sys.exit(2)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    code2 = code.replace("tensordict.PersistentTensorDict\n", "tensordict.TensorDict({}, []).to_h5('x.h5')\n")
    res = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_no_numpy_warning_when_tensordict_loads_torch():
    # numpy is optional: without it, torch warns "Failed to initialize NumPy" on import;
    # `import tensordict` (when it is what loads torch) keeps that warning out of the user's way
    code = (
        "import sys; sys.modules['numpy'] = None; "  # numpy unimportable, as on a td-core-only install
        "import tensordict; print(tensordict.TensorDict({'a': [1]}, []).batch_size)"
    )
    res = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "NumPy" not in res.stderr
