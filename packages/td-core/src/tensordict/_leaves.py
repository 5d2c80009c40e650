"""What kind of leaf a value is: predicates for ``is_leaf=`` and ``MetaData``.

* :func:`is_leaf_nontensor` and :func:`default_is_leaf`: ``is_leaf`` predicates for
  ``keys``/``items``/``values``/``apply``;
* :func:`is_tensorclass`: a tensorclass type or instance (False while td-tensorclass
  is not loaded, since no tensorclass can exist then);
* :class:`MetaData`: non-tensor data that describes the whole TensorDict (a flag, a
  configuration) and is carried unchanged through indexing and shape ops.
"""

from __future__ import annotations

import sys
from typing import Any

from tensordict._base import TensorDictBase, is_tensor_collection
from tensordict._keys import _default_is_leaf
from tensordict._nontensor import NonTensorData, is_non_tensor

__all__ = ["MetaData", "default_is_leaf", "is_leaf_nontensor", "is_non_tensor", "is_tensorclass"]

#: ``is_leaf`` predicate used when none is given: everything but TensorDicts.
default_is_leaf = _default_is_leaf


def is_leaf_nontensor(cls: type) -> bool:
    """``is_leaf`` predicate: tensors and non-tensor data are leaves, TensorDicts are not.

    Pass it as ``is_leaf=`` to ``keys``, ``items`` or ``values`` to list non-tensor
    entries next to tensors.

    Args:
        cls (type): the type of a value stored in a TensorDict.

    Returns:
        ``True`` for tensors and non-tensor data, ``False`` for tensor collections.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, NonTensorData
        >>> is_leaf_nontensor(torch.Tensor), is_leaf_nontensor(NonTensorData)
        (True, True)
        >>> is_leaf_nontensor(TensorDict)
        False
    """
    if is_non_tensor(cls):
        return True
    if issubclass(cls, TensorDictBase):
        return False
    return not is_tensor_collection(cls)


def is_tensorclass(obj: Any) -> bool:
    """``True`` for a tensorclass type or instance (``@tensorclass`` or ``TensorClass``).

    ``NonTensorData`` (and its subclasses such as ``MetaData``) counts as one, as in
    tensordict 0.15, where it is a tensorclass.

    Args:
        obj (Any): a type or an object.

    Examples:
        >>> from tensordict import NonTensorData, TensorDict
        >>> is_tensorclass(TensorDict), is_tensorclass(3), is_tensorclass(NonTensorData)
        (False, False, True)
    """
    if issubclass(obj if isinstance(obj, type) else type(obj), NonTensorData):
        return True
    module = sys.modules.get("tensordict.tensorclass")
    if module is None:  # td-tensorclass not loaded: no tensorclass exists yet
        return False
    return bool(module.is_tensorclass(obj))


class MetaData(NonTensorData):
    """Non-tensor data describing the whole TensorDict, kept whole by batch ops.

    Indexing, reshaping or stacking a TensorDict keeps a ``MetaData`` leaf as it
    is (same object, new ``batch_size``), where a ``NonTensorData`` might turn into a
    stack of per-element values.

    Args:
        data (Any): the object.
        batch_size (torch.Size or sequence of int, optional): defaults to ``[]``.
        device (torch.device, optional): informative only; defaults to ``None``.

    Examples:
        >>> meta = MetaData({"padded": True}, batch_size=[4])
        >>> meta[:2].data
        {'padded': True}
        >>> type(meta[:2]).__name__
        'MetaData'
    """

    __slots__ = ()
    _keeps_whole = True
