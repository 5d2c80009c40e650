"""The public names of the documented ``tensordict`` API listing all resolve.

The list is the autosummary of the reference API page (``from_h5`` is listed in its
rendered twin). Every name must resolve with all distributions installed, and every
name must be in ``tensordict.__all__`` (so ``from tensordict import *`` and the docs
agree with the listing).
"""

import importlib

import pytest

import tensordict

DOCUMENTED = """
TensorDictBase TensorDict LazyStackedTensorDict PersistentTensorDict TensorDictParams
get_defaults_to_none cat from_consolidated from_dict from_h5 from_module from_modules
from_namedtuple from_pytree from_struct_array fromkeys is_batchedtensor lazy_stack load
load_memmap maybe_dense_stack memmap save stack MemoryMappedTensor utils.expand_as_right
utils.expand_right utils.isin utils.remove_duplicates is_memmap is_tensor_collection
make_tensordict merge_tensordicts pad pad_sequence dense_stack_tds set_lazy_legacy
lazy_legacy parse_tensor_dict_string tensorclass TensorClass NonTensorData NonTensorStack
""".split()


@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_name_resolves(name):
    obj = tensordict
    for part in name.split("."):
        obj = getattr(obj, part)
    assert obj is not None
    if "." not in name:
        assert name in tensordict.__all__


def test_all_names_resolve():
    missing = [n for n in tensordict.__all__ if not hasattr(tensordict, n)]
    assert not missing


@pytest.mark.parametrize("sub", ["nn", "memmap", "persistent", "distributed", "tensorclass", "prototype", "store"])
def test_subpackage_all(sub):
    mod = importlib.import_module(f"tensordict.{sub}")
    for name in getattr(mod, "__all__", []):
        assert hasattr(mod, name), f"tensordict.{sub}.{name}"
