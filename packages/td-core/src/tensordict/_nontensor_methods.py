"""Non-tensor data methods of every TensorDict (``NonTensorMixin``):
``set_non_tensor``, ``get_non_tensor``, ``is_non_tensor`` and ``filter_non_tensor_data``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensordict import _classes
from tensordict._deep import levels
from tensordict._host import TensorDictHost
from tensordict._keys import NO_DEFAULT, NestedKey, unravel_key
from tensordict._nontensor import NonTensorData, NonTensorStack

if TYPE_CHECKING:
    from typing_extensions import Self

    from tensordict._base import TensorDictBase

__all__ = ["NonTensorMixin"]


class NonTensorMixin(TensorDictHost):
    """Reading and writing non-tensor leaves by key."""

    def set_non_tensor(self, key: NestedKey, data: Any) -> Self:
        """Stores ``data`` (any object) as non-tensor data under ``key``.

        The object is wrapped in a :class:`~tensordict.NonTensorData` whose
        ``batch_size`` and ``device`` are those of the TensorDict that receives it;
        a ``NonTensorData`` passed in is unwrapped first (its object is stored).
        Missing nested levels are created.

        Args:
            key (NestedKey): where to write.
            data (Any): the object, e.g. a str, a list or a ``NonTensorData``.

        Returns:
            ``self``.

        Raises:
            RuntimeError: the TensorDict is locked and ``key`` is new.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(batch_size=[3])
            >>> _ = td.set_non_tensor(("meta", "name"), [1, 2])
            >>> td.get_non_tensor(("meta", "name"))
            [1, 2]
        """
        key = unravel_key(key)
        if isinstance(data, NonTensorData):
            data = data.data
        parent: Any = self
        if key.__class__ is tuple:
            for sub in key[:-1]:
                parent = parent._create_nested(sub)
            last = key[-1]
        else:
            last = key
        value = NonTensorData(data, parent.batch_size, parent.device)
        parent._set_str(last, value, False, validated=True)
        return self

    def get_non_tensor(self, key: NestedKey, default: Any = NO_DEFAULT) -> Any:
        """The object stored under ``key``: the data of a ``NonTensorData``, the
        nested list of a ``NonTensorStack``; tensors and TensorDicts come back as they are.

        Args:
            key (NestedKey): the key to read.
            default (Any, optional): returned when ``key`` is missing.

        Raises:
            KeyError: ``key`` is missing and no default is given.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a="a string")
            >>> td.get_non_tensor("a")
            'a string'
            >>> td.get_non_tensor("b", None) is None
            True
        """
        value = self._get_any_raw(key, default)
        if isinstance(value, (NonTensorData, NonTensorStack)):
            return value.data if isinstance(value, NonTensorData) else value.tolist()
        return value

    def is_non_tensor(self, key: NestedKey) -> bool:
        """Whether the entry under ``key`` is non-tensor data (a ``NonTensorData`` or
        ``NonTensorStack`` leaf) rather than a tensor or a nested TensorDict.

        Args:
            key (NestedKey): the key to look at (nested keys go through sub-TensorDicts).

        Returns:
            ``True`` for a non-tensor leaf, ``False`` otherwise.

        Raises:
            KeyError: ``key`` is missing.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(()), b="text")
            >>> td.is_non_tensor("b"), td.is_non_tensor("a")
            (True, False)
        """
        return isinstance(self._get_any_raw(key), (NonTensorData, NonTensorStack))

    def non_tensor_items(self, include_nested: bool = False) -> tuple:
        """The ``(key, value)`` pairs of the non-tensor leaves, as a tuple.

        The values are :class:`~tensordict.NonTensorData` / ``NonTensorStack``.

        Args:
            include_nested (bool, optional): also the nested TensorDicts' non-tensor
                leaves, under nested (tuple) keys. Defaults to ``False``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(2), s="text", nested=TensorDict(t="more"))
            >>> [key for key, _ in td.non_tensor_items(include_nested=True)]
            ['s', ('nested', 't')]
            >>> td.non_tensor_items()[0][1].data
            'text'
        """
        return tuple(
            (key, value)
            for key, value in self.items(include_nested=include_nested)
            if isinstance(value, (NonTensorData, NonTensorStack))
        )

    def filter_non_tensor_data(self) -> TensorDictBase:
        """A TensorDict without its non-tensor leaves (nested TensorDicts included).

        Nested TensorDicts left without any tensor are dropped too.

        Returns:
            a new TensorDict with the same batch size, holding only tensors and
            nested TensorDicts that hold tensors.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(()), b="text")
            >>> list(td.filter_non_tensor_data().keys())
            ['a']
        """
        return levels(self, _filter_level, _filter_children)


def _filter_level(td: Any, sub: Any) -> Any:
    """One level of :meth:`~NonTensorMixin.filter_non_tensor_data` (run by
    :func:`~tensordict._deep.levels`: any depth); ``sub`` filters a nested level."""
    if isinstance(td, _classes.LazyStackedTensorDict):  # stays lazy: the leaves stay the stacked ones
        return td._new_lazy([sub(part, sub) for part in td.tensordicts])
    source = {}
    for key, value in td._items_raw():
        if isinstance(value, (NonTensorData, NonTensorStack)):
            continue
        if isinstance(value, _classes.TensorDictBase):
            value = sub(value, sub)
            if value.is_empty():  # nothing but non-tensor data below: dropped
                continue
        source[key] = value
    return td._new_like(source)


def _filter_children(td: Any) -> list:
    if isinstance(td, _classes.LazyStackedTensorDict):
        return list(td.tensordicts)
    return [
        v for _, v in td._items_raw()
        if isinstance(v, _classes.TensorDictBase) and not isinstance(v, (NonTensorData, NonTensorStack))
    ]
