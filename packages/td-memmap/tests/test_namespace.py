"""td-memmap is a portion of the ``tensordict`` namespace; ``tensordict.memmap`` stays the function."""

import subprocess
import sys

import tensordict
import tensordict.memmap
from tensordict import TensorDict


def test_memmap_is_the_function_after_importing_the_subpackage():
    from tensordict import memmap

    assert callable(memmap) and memmap.__name__ == "memmap"
    assert memmap is tensordict.memmap.__globals__["memmap"]  # the function, not the module
    assert memmap is sys.modules["tensordict.memmap"].memmap


def test_fresh_interpreter_import_order_and_no_numpy():
    # one interpreter (importing torch is slow): the callable survives every import order,
    # and saving/loading imports no numpy
    code = (
        "import sys, types, tempfile, torch\n"
        "before = set(sys.modules)\n"
        "import tensordict, tensordict.memmap\n"
        "from tensordict import memmap\n"
        "assert isinstance(memmap, types.FunctionType), memmap\n"
        "from tensordict.memmap import MemoryMappedTensor, load_memmap, save, load, is_memmap\n"
        "import tensordict.memmap._td_methods\n"
        "import tensordict.memmap as tdm\n"
        "assert tdm.MemoryMappedTensor is MemoryMappedTensor and tdm.load_memmap is load_memmap\n"
        "import tensordict.memmap._store as store_mod\n"
        "assert store_mod.__name__ == 'tensordict.memmap._store'\n"
        "from tensordict import memmap as m2\n"
        "assert isinstance(m2, types.FunctionType)\n"
        "assert tensordict.MemoryMappedTensor is MemoryMappedTensor\n"
        "assert tensordict.load_memmap is load_memmap and tensordict.save is save\n"
        "assert tensordict.load is load and tensordict.is_memmap is is_memmap\n"
        "d = tempfile.mkdtemp()\n"
        "tensordict.TensorDict({'a': torch.zeros(2)}, [2]).memmap(d)\n"
        "tensordict.TensorDict.load_memmap(d)\n"
        "bad = sorted(m for m in set(sys.modules) - before if m.split('.')[0] == 'numpy')\n"
        "assert not bad, bad\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_top_level_names(tmp_path):
    td = TensorDict({"a": tensordict.MemoryMappedTensor.zeros(2)}, [2])
    assert tensordict.is_memmap(td["a"]) and tensordict.is_memmap(td)
    out = tensordict.memmap(td, tmp_path / "x")
    assert out.is_locked
    tensordict.save(td, tmp_path / "y")
    assert tensordict.load(tmp_path / "y")["a"].shape == (2,)
    assert tensordict.load_memmap(tmp_path / "x").saved_path == str(tmp_path / "x")


def test_td_methods_cover_the_seam():
    from tensordict._seams import _SIBLING_METHODS
    from tensordict.memmap import _td_methods

    for sub, name, _ in _SIBLING_METHODS:
        if sub == "memmap":
            assert callable(getattr(_td_methods, name)), name
