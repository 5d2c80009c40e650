"""Import paths, the module/decorator name clash, and the class registry."""

import importlib.util
import subprocess
import sys

import pytest
import torch

import tensordict


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(120)
def test_import_subpackage_then_top_level_name_is_the_decorator():
    # the pinned sequences, in a fresh interpreter: importing the subpackage first must
    # not shadow the decorator, whichever way it is imported
    code = (
        "import types, tensordict.tensorclass\n"
        "from tensordict import tensorclass\n"
        "assert callable(tensorclass) and not isinstance(tensorclass, types.ModuleType), tensorclass\n"
        "import tensordict\n"
        "assert tensordict.tensorclass is tensorclass\n"
        "from tensordict.tensorclass import TensorClass\n"
        "import tensordict.prototype\n"
        "assert not isinstance(tensordict.tensorclass, types.ModuleType)\n"
        "assert tensordict.prototype.tensorclass is tensorclass\n"
        "print('ok')\n"
    )
    res = _run(code)
    assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr


def test_in_process_name_clash():
    import tensordict.tensorclass as module_or_fn  # noqa: F401
    from tensordict import tensorclass

    assert callable(tensorclass)
    assert tensorclass is sys.modules["tensordict.tensorclass"].tensorclass
    assert tensordict.tensorclass is tensorclass


def test_all_import_paths_give_the_same_objects():
    from tensordict import TensorClass, from_dataclass, tensorclass
    from tensordict.prototype import tensorclass as proto_tensorclass
    from tensordict.tensorclass import TensorClass as TC2
    from tensordict.tensorclass import from_dataclass as fd2
    from tensordict.tensorclass import tensorclass as tc2

    assert tensorclass is proto_tensorclass is tc2
    assert TensorClass is TC2
    assert from_dataclass is fd2


def test_public_names_exist():
    mod = sys.modules["tensordict.tensorclass"]
    for name in mod.__all__:
        assert hasattr(mod, name), name
    proto = sys.modules.get("tensordict.prototype") or __import__("tensordict.prototype").prototype
    for name in proto.__all__:
        try:
            getattr(proto, name)
        except ImportError:  # symbolic_trace is td-nn's tracer: an ImportError naming td-nn without it
            assert importlib.util.find_spec("tensordict.nn") is None, name


def test_tensorclass_is_a_tensor_collection():
    from tensordict import TensorClass, is_tensor_collection

    class Point(TensorClass):
        x: torch.Tensor

    assert is_tensor_collection(Point)
    assert is_tensor_collection(Point(x=torch.zeros(2), batch_size=[2]))


def test_registry_resolves_only_registered_names():
    from tensordict.tensorclass import (
        TensorClass,
        get_tensorclass,
        is_tensorclass,
        register_tensorclass,
        registered_tensorclasses,
        tensorclass_name,
    )

    class Registered(TensorClass):
        x: torch.Tensor

    name = tensorclass_name(Registered)
    assert name.endswith("Registered") and name.startswith(__name__.split(".")[0]) or "." in name
    assert get_tensorclass(name) is Registered
    assert registered_tensorclasses()[name] is Registered
    assert is_tensorclass(Registered) and not is_tensorclass(tensordict.TensorDict)
    with pytest.raises(KeyError, match="os.system"):
        get_tensorclass("os.system")
    with pytest.raises(TypeError, match="tensorclass type"):
        register_tensorclass(dict)
    assert register_tensorclass(Registered, "alias.Name") is Registered
    assert get_tensorclass("alias.Name") is Registered


def test_version():
    from tensordict.tensorclass import __version__

    assert __version__.count(".") == 2
