"""TensorDict: a dictionary of tensors that behaves like a tensor.

td-core owns this ``__init__``. Sibling distributions (td-memmap, td-h5, td-nn,
td-distributed, td-tensorclass) add subpackages to the ``tensordict`` namespace;
their top-level names (``MemoryMappedTensor``, ``PersistentTensorDict``,
``TensorDictParams``, ``tensorclass``, ...) are resolved lazily on first access, and
a missing sibling raises ``ImportError`` naming the distribution to install.
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

import importlib as _importlib
import sys as _sys
import types as _types
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if "torch" not in _sys.modules:
    # numpy is optional for td-core; without it torch warns "Failed to initialize NumPy"
    # while it is imported. Silence only that warning, and only when this import is the
    # one that loads torch (a user who imported torch first has seen it already).
    import warnings as _warnings

    with _warnings.catch_warnings():
        _warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch as _torch  # noqa: F401

from tensordict import _legacy_views as _legacy_views  # binds set_lazy_legacy(True)'s shape views
from tensordict._assert import assert_allclose_td, assert_close
from tensordict._attrs import TensorAttrs
from tensordict._base import (
    TensorDictBase,
    get_defaults_to_none,
    is_tensor_collection,
    set_get_defaults_to_none,
)
from tensordict._compat_upstream import _unravel_key_to_tuple as unravel_key_to_tuple
from tensordict._keys import NestedKey
from tensordict._keys import public_unravel_key as unravel_key  # () for a tuple that is no key
from tensordict._keys import public_unravel_key_list as unravel_key_list  # TypeError for a str
from tensordict._leaves import (
    MetaData,
    default_is_leaf,
    is_leaf_nontensor,
    is_non_tensor,
    is_tensorclass,
)
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._options import (
    capture_non_tensor_stack,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_list_to_stack,
)
from tensordict._repr import parse_tensor_dict_string
from tensordict._seams import import_sibling as _import_sibling
from tensordict._stack import cat, lazy_legacy, set_lazy_legacy, stack
from tensordict._td import TensorDict
from tensordict._unbatched import UnbatchedTensor
from tensordict._version import __version__
from tensordict.utils import is_batchedtensor

if _TYPE_CHECKING:  # pragma: no cover
    from tensordict.memmap import MemoryMappedTensor
    from tensordict.nn import TensorDictParams
    from tensordict.persistent import PersistentTensorDict
    from tensordict.store import LazyStackedTensorDictStore, TensorDictStore
    from tensordict.tensorclass import TensorClass, from_dataclass, tensorclass

__all__ = [
    # containers
    "TensorDictBase",
    "TensorDict",
    "LazyStackedTensorDict",
    "NonTensorData",
    "NonTensorStack",
    "UnbatchedTensor",
    "TypedTensorDict",
    "PersistentTensorDict",
    "TensorDictStore",
    "LazyStackedTensorDictStore",
    "TensorDictParams",
    "as_tensordict_module",
    "MemoryMappedTensor",
    # construction and combination
    "stack",
    "cat",
    "lazy_stack",
    "maybe_dense_stack",
    "dense_stack_tds",
    "from_dict",
    "from_any",
    "from_json",
    "from_namedtuple",
    "from_tuple",
    "from_struct_array",
    "from_pytree",
    "from_module",
    "from_modules",
    "from_consolidated",
    "from_h5",
    "from_zarr",
    "from_dataclass",
    "from_arrow",
    "to_arrow",
    "from_pandas",
    "from_csv",
    "from_parquet",
    "from_safetensors",
    "to_safetensors",
    "fromkeys",
    "make_tensordict",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
    # storage
    "memmap",
    "save",
    "load",
    "load_memmap",
    "is_memmap",
    "is_memmap_archive",
    "pack_memmap",
    "unpack_memmap",
    "refresh_archive_checksums",
    "append_memmap",
    # tensorclass
    "tensorclass",
    "TensorClass",
    # utilities
    "NestedKey",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
    "is_tensor_collection",
    "is_batchedtensor",
    "get_defaults_to_none",
    "set_get_defaults_to_none",
    "set_printoptions",
    "get_printoptions",
    "set_lazy_legacy",
    "lazy_legacy",
    "parse_tensor_dict_string",
    "is_non_tensor",
    "is_tensorclass",
    "assert_close",
    "assert_allclose_td",
    "default_is_leaf",
    "is_leaf_nontensor",
    "capture_non_tensor_stack",
    "set_capture_non_tensor_stack",
    "list_to_stack",
    "set_list_to_stack",
    "MetaData",
    "TensorAttrs",
    "TensorCollection",
    "NonTensorDataBase",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "PackLayout",
    "KEY_SEPARATOR",
    "collate",
    "group_by",
    "unpad_sequence",
    "is_bool",
    "is_floating",
    "is_integer",
    "is_inexact",
    "__version__",
]

#: top-level name -> (module, attribute). Modules under td-core are loaded on first
#: use to keep ``import tensordict`` light; the others belong to siblings.
_LAZY = {
    "LazyStackedTensorDict": ("tensordict._lazy", "LazyStackedTensorDict"),
    "lazy_stack": ("tensordict._lazy", "lazy_stack"),
    "maybe_dense_stack": ("tensordict._lazy", "maybe_dense_stack"),
    "dense_stack_tds": ("tensordict.functional", "dense_stack_tds"),
    "pad": ("tensordict.functional", "pad"),
    "pad_sequence": ("tensordict.functional", "pad_sequence"),
    "merge_tensordicts": ("tensordict.functional", "merge_tensordicts"),
    "make_tensordict": ("tensordict.functional", "make_tensordict"),
    "from_dict": ("tensordict._convert", "from_dict"),
    "from_any": ("tensordict._convert", "from_any"),
    "from_json": ("tensordict._json", "from_json"),
    "from_arrow": ("tensordict.tabular", "from_arrow"),
    "to_arrow": ("tensordict.tabular", "to_arrow"),
    "from_pandas": ("tensordict.tabular", "from_pandas"),
    "from_csv": ("tensordict.tabular", "from_csv"),
    "from_parquet": ("tensordict.tabular", "from_parquet"),
    "from_namedtuple": ("tensordict._convert", "from_namedtuple"),
    "from_tuple": ("tensordict._convert", "from_tuple"),
    "from_struct_array": ("tensordict._convert", "from_struct_array"),
    "from_pytree": ("tensordict._convert", "from_pytree"),
    "fromkeys": ("tensordict._convert", "fromkeys"),
    "from_module": ("tensordict._module_params", "from_module"),
    "from_modules": ("tensordict._module_params", "from_modules"),
    "from_consolidated": ("tensordict._consolidate", "from_consolidated"),
    "TypedTensorDict": ("tensordict._typed", "TypedTensorDict"),
    "set_printoptions": ("tensordict._repr", "set_printoptions"),
    "get_printoptions": ("tensordict._repr", "get_printoptions"),
    "TensorCollection": ("tensordict._compat_upstream", "TensorCollection"),
    "NonTensorDataBase": ("tensordict._nontensor", "NonTensorData"),  # tensordict.tensorclass.NonTensorDataBase
    "PackLayout": ("tensordict._pack", "PackLayout"),
    "collate": ("tensordict.functional", "collate"),
    "group_by": ("tensordict.functional", "group_by"),
    "unpad_sequence": ("tensordict.functional", "unpad_sequence"),
    "KEY_SEPARATOR": ("tensordict._utils_public", "KEY_SEPARATOR"),
    "is_bool": ("tensordict._utils_public", "is_bool"),
    "is_floating": ("tensordict._utils_public", "is_floating"),
    "is_integer": ("tensordict._utils_public", "is_integer"),
    "is_inexact": ("tensordict._utils_public", "is_inexact"),
    # siblings
    "MemoryMappedTensor": ("tensordict.memmap", "MemoryMappedTensor"),
    "memmap": ("tensordict.memmap", "memmap"),
    "save": ("tensordict.memmap", "save"),
    "load": ("tensordict.memmap", "load"),
    "load_memmap": ("tensordict.memmap", "load_memmap"),
    "is_memmap": ("tensordict.memmap", "is_memmap"),
    "is_memmap_archive": ("tensordict.memmap", "is_memmap_archive"),
    "pack_memmap": ("tensordict.memmap", "pack_memmap"),
    "unpack_memmap": ("tensordict.memmap", "unpack_memmap"),
    "refresh_archive_checksums": ("tensordict.memmap", "refresh_archive_checksums"),
    "append_memmap": ("tensordict.memmap", "append_memmap"),
    "from_safetensors": ("tensordict.memmap", "from_safetensors"),
    "to_safetensors": ("tensordict.memmap", "to_safetensors"),
    "PersistentTensorDict": ("tensordict.persistent", "PersistentTensorDict"),
    "from_h5": ("tensordict.persistent", "from_h5"),
    "from_zarr": ("tensordict.persistent", "from_zarr"),
    "TensorDictStore": ("tensordict.store", "TensorDictStore"),
    "LazyStackedTensorDictStore": ("tensordict.store", "LazyStackedTensorDictStore"),
    "TensorDictParams": ("tensordict.nn", "TensorDictParams"),
    "as_tensordict_module": ("tensordict.nn", "as_tensordict_module"),
    "TensorClassModuleBase": ("tensordict.nn", "TensorClassModuleBase"),
    "TensorClassModuleWrapper": ("tensordict.nn", "TensorClassModuleWrapper"),
    "tensorclass": ("tensordict.tensorclass", "tensorclass"),
    "TensorClass": ("tensordict.tensorclass", "TensorClass"),
    "from_dataclass": ("tensordict.tensorclass", "from_dataclass"),
}

#: names that are both a sibling subpackage and a top-level callable.
_CALLABLE_SUBPACKAGES = {"memmap": "memmap", "tensorclass": "tensorclass"}


def _resolve(name: str) -> _Any:
    module_name, attr = _LAZY[name]
    sub = module_name.split(".")[1]
    if sub.startswith("_") or sub in ("functional", "utils", "tabular"):
        module = _importlib.import_module(module_name)
    else:
        module = _import_sibling(sub)
    return getattr(module, attr)


def __getattr__(name: str) -> _Any:
    if name in ("PYTREE_REGISTERED_TDS", "PYTREE_REGISTERED_LAZY_TDS"):
        __import__("warnings").warn(
            f"tensordict.{name} is deprecated (as in tensordict 0.15); use "
            f"tensordict.nn.functional_modules.{name} instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return _pytree.registered_classes(lazy=name == "PYTREE_REGISTERED_LAZY_TDS")
    if name in _LAZY:
        value = _resolve(name)
        if name not in _CALLABLE_SUBPACKAGES:
            globals()[name] = value
        else:
            object.__setattr__(_sys.modules[__name__], name, value)
        return value
    msg = f"module 'tensordict' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))


class _TensorDictModule(_types.ModuleType):
    """Keeps ``tensordict.memmap`` / ``tensordict.tensorclass`` bound to the callables.

    When a submodule finishes importing, the import system binds it on its parent
    package, which would shadow the ``memmap()`` function and the ``@tensorclass``
    decorator. This ``__setattr__`` binds the callable instead; the submodule stays
    reachable through ``sys.modules`` and ``from tensordict.memmap import ...``.
    """

    def __setattr__(self, name: str, value: _Any) -> None:
        if name in _CALLABLE_SUBPACKAGES and isinstance(value, _types.ModuleType):
            value = getattr(value, _CALLABLE_SUBPACKAGES[name], value)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _TensorDictModule
from tensordict import _pytree as _pytree  # noqa: E402  (registers pytree nodes)
from tensordict import _vmap as _vmap  # noqa: E402

_vmap.install()  # torch.vmap batches tensor collections as leaves

# ``import tensordict.nn`` (or another sibling) without its distribution: an
# ImportError naming the distribution, from a finder consulted only after all others.
from tensordict._sibling_finder import install as _install_sibling_finder  # noqa: E402

_install_sibling_finder()
