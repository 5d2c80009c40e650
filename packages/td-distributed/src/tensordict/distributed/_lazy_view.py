"""Lazy stacks on the wire: a ``LazyStackedTensorDict`` (as the root or nested) travels
as a plain TensorDict of its stacked TensorDicts.

``plain_view(td)`` gives a TensorDict whose nested entry ``"<i>"`` stands for the
``i``-th stacked TensorDict of each lazy stack (recursively), holding the *same*
tensor objects: receiving into the view writes into the lazy stack's members, so
members of different shapes or keys need no stacking. Sender and receiver apply the
same mapping, so the structure digests compare the members one by one. A node on the
path to a lazy stack gets ``batch_size=[]`` (members may have other batch sizes than
the stack); everything else is kept as it is.
"""

from __future__ import annotations

from typing import Any

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

__all__ = ["plain_view"]


def _has_lazy(td: Any) -> bool:
    if isinstance(td, LazyStackedTensorDict):
        return True
    for _, value in td._items_raw():
        if isinstance(value, TensorDictBase) and _has_lazy(value):
            return True
    return False


def _view(td: Any) -> Any:
    if isinstance(td, LazyStackedTensorDict):
        return TensorDict({str(i): _view(member) for i, member in enumerate(td.tensordicts)}, batch_size=[])
    if not any(isinstance(v, TensorDictBase) and _has_lazy(v) for _, v in td._items_raw()):
        return td
    source = {}
    for key, value in td._items_raw():
        source[key] = _view(value) if isinstance(value, TensorDictBase) and _has_lazy(value) else value
    return TensorDict(source, batch_size=[])


def plain_view(td: Any) -> Any:
    """``td`` itself when it holds no lazy stack; otherwise its plain view (module docstring)."""
    if not isinstance(td, TensorDictBase) or td.__class__ is TensorDict and not _has_lazy(td):
        return td
    if not _has_lazy(td):
        return td
    return _view(td)
