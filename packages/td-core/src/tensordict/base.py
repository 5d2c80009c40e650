"""``tensordict.base``: upstream's module path of :class:`TensorDictBase` and its helpers.

A thin module: the code lives in td-core's own modules (``_base.py``, ``_convert.py``,
...). Importing it is as cheap as ``import tensordict``. The underscore names at the
end are upstream private helpers that downstream libraries import from this path
(see ``tensordict._compat_upstream``).
"""

from __future__ import annotations

from typing import Any

from tensordict._base import (
    TensorDictBase,
    get_defaults_to_none,
    is_tensor_collection,
    set_get_defaults_to_none,
)
from tensordict._compat_upstream import (  # noqa: F401 - upstream private names, see the module
    _ACCEPTED_CLASSES,
    _NESTED_TENSORS_AS_LISTS,
    _default_is_leaf,
    _is_leaf_nontensor,
)
from tensordict._convert import (
    from_any,
    from_dict,
    from_namedtuple,
    from_pytree,
    from_struct_array,
    from_tuple,
)
from tensordict._keys import NO_DEFAULT, NestedKey
from tensordict._leaves import is_leaf_nontensor
from tensordict._seams import import_sibling as _import_sibling

__all__ = [
    "NO_DEFAULT",
    "NestedKey",
    "TensorDictBase",
    "from_any",
    "from_dict",
    "from_h5",
    "from_zarr",
    "from_namedtuple",
    "from_pytree",
    "from_struct_array",
    "from_tuple",
    "get_defaults_to_none",
    "is_leaf_nontensor",
    "is_tensor_collection",
    "set_get_defaults_to_none",
]


def from_h5(filename: Any, **kwargs: Any) -> Any:
    """Opens an HDF5 file as a ``PersistentTensorDict`` (provided by td-h5).

    Raises:
        ImportError: td-h5 is not installed.
    """
    return _import_sibling("persistent").from_h5(filename, **kwargs)


def from_zarr(zarr_file: Any, **kwargs: Any) -> Any:
    """Opens a Zarr (v3) store as a ``PersistentTensorDict`` (provided by td-h5 with its ``zarr`` extra).

    See :func:`tensordict.persistent.from_zarr` for the keywords (``mode``,
    ``auto_batch_size``, ``batch_dims``, ``batch_size``, ``non_tensor_as_stack``,
    ``allow_pickle``).

    Raises:
        ImportError: td-h5 or zarr>=3 is not installed (the message names the ``pip install`` line).
    """
    return _import_sibling("persistent").from_zarr(zarr_file, **kwargs)
