"""COMPATIBILITY: private names of upstream tensordict that downstream code imports.

Upstream tensordict's private helpers are not part of this project's API, but real
downstream libraries import some of them at module load, so a missing one breaks
``import`` of the whole library. They are defined here, once, and re-exported from
the upstream module paths (``tensordict.utils``, ``tensordict.base``). Nothing in this
project uses them; keep each one small and documented with who imports it.

========================  ==============================  ==========================================
name                      upstream path                   imported by
========================  ==============================  ==========================================
``_zip_strict``           ``tensordict.utils``            TorchRL (28 modules: envs, data, objectives)
``_getitem_batch_size``   ``tensordict.utils``            TorchRL ``data.tensor_specs``, ``envs.common``
``_maybe_correct_neg_dim`` ``tensordict.utils``           TorchRL ``data.llm.history``
``_unravel_key_to_tuple`` ``tensordict.utils``            TorchRL ``envs.transforms._reward``
``_is_non_tensor``        ``tensordict.utils``            TorchRL ``data.datasets.openx``
``_is_tensorclass``       ``tensordict.utils``            TorchRL ``data.tensor_specs``
``_shape``                ``tensordict.utils``            TorchRL ``data.tensor_specs``
``_is_leaf_nontensor``    ``tensordict.base``             TorchRL ``envs.common``, ``collectors.utils``
``_default_is_leaf``      ``tensordict.base``             TorchRL ``envs.utils``
``_NESTED_TENSORS_AS_LISTS`` ``tensordict.base``          TorchRL replay-buffer storages, specs, collectors
``TensorCollection``      ``tensordict._tensorcollection`` TorchRL ``trainers.trainers``
``_ACCEPTED_CLASSES``     ``tensordict.base``             TorchRL ``data.replay_buffers.storages.list``
========================  ==============================  ==========================================
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from tensordict._base import TensorDictBase, is_tensor_collection
from tensordict._keys import _as_tuple, _default_is_leaf
from tensordict._leaves import is_leaf_nontensor, is_non_tensor, is_tensorclass
from tensordict._nontensor import NonTensorData, NonTensorStack

__all__ = [
    "TensorCollection",
    "_ACCEPTED_CLASSES",
    "_NESTED_TENSORS_AS_LISTS",
    "_default_is_leaf",
    "_getitem_batch_size",
    "_is_leaf_nontensor",
    "_is_non_tensor",
    "_is_tensorclass",
    "_maybe_correct_neg_dim",
    "_shape",
    "_unravel_key_to_tuple",
    "_zip_strict",
]

_is_leaf_nontensor = is_leaf_nontensor

#: the value types a TensorDict stores as they are (anything else is converted)
_ACCEPTED_CLASSES = (torch.Tensor, TensorDictBase, NonTensorData, NonTensorStack)


def _is_non_tensor(cls: type) -> bool:
    """``is_non_tensor`` on a type (upstream's private spelling)."""
    return is_non_tensor(cls)


def _is_tensorclass(cls: type) -> bool:
    """``is_tensorclass`` on a type (upstream's private spelling)."""
    return is_tensorclass(cls)


def _zip_strict(*iterables: Iterable) -> zip:
    """``zip(..., strict=True)``: raises ``ValueError`` when the lengths differ."""
    return zip(*iterables, strict=True)


def _to_meta_index(item: Any) -> Any:
    if isinstance(item, torch.Tensor):
        if item.dtype is torch.bool:  # a mask is its nonzero() indices (meta has no nonzero)
            return tuple(i.to("meta") for i in item.nonzero(as_tuple=True))
        return item.to("meta")
    if isinstance(item, (list, range)) and item and all(isinstance(i, bool) for i in item):
        return _to_meta_index(torch.tensor(list(item)))
    return item


def _getitem_batch_size(batch_size: Sequence[int], index: Any) -> torch.Size:
    """The shape that indexing a tensor of shape ``batch_size`` with ``index`` gives.

    Computed on a meta tensor (boolean masks through their ``nonzero()`` indices), so
    every torch index form is supported and nothing of ``batch_size`` is allocated.
    """
    items = index if isinstance(index, tuple) else (index,)
    meta: list = []
    for item in items:
        converted = _to_meta_index(item)
        if isinstance(converted, tuple):
            meta.extend(converted)
        else:
            meta.append(converted)
    probe = torch.empty(torch.Size(batch_size), device="meta")
    return probe[tuple(meta)].shape


def _maybe_correct_neg_dim(dim: int, shape: Sequence[int] | None, ndim: int | None = None) -> int:
    """``dim`` made non-negative for ``ndim`` (or ``len(shape)``) dims.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    if ndim is None:
        ndim = len(shape) if shape is not None else 0
    new = dim + ndim if dim < 0 else dim
    if not 0 <= new < max(ndim, 1):
        msg = f"dim {dim} is out of range for a batch of {ndim} dims."
        raise IndexError(msg)
    return new


def _shape(value: Any, nested_shape: bool = False) -> torch.Size:
    """The shape of a tensor, or the ``batch_size`` of a tensor collection.

    A nested (jagged) tensor gives ``-1`` for its ragged dims (its nested shape with
    ``nested_shape=True``).
    """
    if is_tensor_collection(value) and not isinstance(value, torch.Tensor):
        return value.batch_size
    if isinstance(value, torch.Tensor) and value.is_nested:
        if nested_shape:
            return value._nested_tensor_size()  # type: ignore[return-value]
        sizes = value._nested_tensor_size()
        dims = [value.size(0)]
        for column in sizes.unbind(1):
            dims.append(int(column[0]) if bool((column == column[0]).all()) else -1)
        return torch.Size(dims)
    return value.shape


def _unravel_key_to_tuple(key: Any) -> tuple:
    """A nested key as a flat tuple of str; ``()`` when ``key`` is not a nested key."""
    try:
        return _as_tuple(key)
    except (TypeError, ValueError):
        return ()


class _NestedTensorsAsLists:
    """``is_leaf`` predicate upstream uses to read lazy stacks leaf by leaf.

    Here lazy stacks stack a leaf when it is read, so it is the default predicate.
    The object is a singleton so ``is_leaf is _NESTED_TENSORS_AS_LISTS`` checks work.
    """

    _instance: _NestedTensorsAsLists | None = None

    def __new__(cls) -> _NestedTensorsAsLists:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __call__(self, cls: type) -> bool:
        return _default_is_leaf(cls)

    def __repr__(self) -> str:
        return "_NESTED_TENSORS_AS_LISTS"


_NESTED_TENSORS_AS_LISTS = _NestedTensorsAsLists()


class _TensorCollectionMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return is_tensor_collection(obj)

    def __subclasscheck__(cls, sub: type) -> bool:
        return isinstance(sub, type) and is_tensor_collection(sub)


class TensorCollection(metaclass=_TensorCollectionMeta):
    """Upstream's common base of TensorDicts and tensorclasses, for ``isinstance`` and annotations.

    ``isinstance(x, TensorCollection)`` is ``is_tensor_collection(x)``.
    """
