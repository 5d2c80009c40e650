"""Backend-neutral type checks for the nodes a ``PersistentTensorDict`` walks.

HDF5 nodes are ``h5py.Group``/``h5py.Dataset``; Zarr nodes are wrapped by
:mod:`tensordict.persistent._zarrio` in classes deriving from :class:`GroupNode` and
:class:`ArrayNode`, which present the part of h5py's interface the shared code uses.
This module imports neither zarr nor h5py's optional parts, so the checks cost nothing
when the Zarr backend is unused.
"""

from __future__ import annotations

from typing import Any

import h5py

__all__ = ["GroupNode", "ArrayNode", "ValueNode", "is_group", "is_dataset"]


class GroupNode:
    """Base of non-HDF5 group adapters (a group of a Zarr store)."""

    __slots__ = ()


class ArrayNode:
    """Base of non-HDF5 array adapters (an array of a Zarr store)."""

    __slots__ = ()


class ValueNode:
    """Base of a non-tensor value read from a non-HDF5 store, decoded on request."""

    __slots__ = ()

    def decode(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


_GROUPS = (h5py.Group, GroupNode)
_DATASETS = (h5py.Dataset, ArrayNode)


def is_group(obj: Any) -> bool:
    """``obj`` is a group (HDF5 group or file, or a Zarr group adapter)."""
    return isinstance(obj, _GROUPS)


def is_dataset(obj: Any) -> bool:
    """``obj`` is an array (HDF5 dataset or a Zarr array adapter)."""
    return isinstance(obj, _DATASETS)
