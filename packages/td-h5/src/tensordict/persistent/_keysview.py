"""Keys of a ``PersistentTensorDict`` listed from the file's metadata.

td-core's keys view walks ``_items_raw``, which for a file would read every dataset
just to list its name. This view walks group members and attributes instead, so
``td.keys(include_nested=True, leaves_only=True)`` and ``key in td`` read no data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tensordict import NestedKey, NonTensorData, NonTensorStack
from tensordict.ext import KeysView as _KeysView
from tensordict.ext import as_key_tuple as _as_tuple

__all__ = ["H5ItemsView", "H5KeysView", "H5ValuesView"]

_NON_TENSOR = (NonTensorData, NonTensorStack)


class H5KeysView(_KeysView):
    """Live view over the keys of a ``PersistentTensorDict`` (metadata only)."""

    __slots__ = ()

    def _meta_walk(self, td: Any, prefix: tuple) -> Iterator[NestedKey]:
        is_leaf = self.is_leaf
        for key, cls, child in td._meta_items():
            full = key if not prefix else prefix + (key,)
            is_coll = child is not None
            # as td-core: tensors are leaves; TensorDicts and non-tensor data are not (unless is_leaf says so)
            leaf = (not is_coll and not issubclass(cls, _NON_TENSOR)) if is_leaf is None else is_leaf(cls)
            if not self.leaves_only or leaf:
                yield full
            if self.include_nested and is_coll:
                yield from self._meta_walk(child, full if prefix else (key,))

    def __iter__(self) -> Iterator[NestedKey]:
        if not self.include_nested and not self.leaves_only:
            return iter(self._td._keys_raw())
        return self._meta_walk(self._td, ())

    def __len__(self) -> int:
        return sum(1 for _ in H5KeysView.__iter__(self))  # metadata only (td-core's count reads every value)

    def _pairs(self) -> Iterator[tuple[NestedKey, Any]]:
        """``(key, value)`` with keys from the metadata, each value read only when reached."""
        td = self._td
        for key in H5KeysView.__iter__(self):
            yield key, (td._get_raw(key) if key.__class__ is str else td._get_tuple_raw(key))  # type: ignore[arg-type]


    def __contains__(self, key: object) -> bool:
        if key.__class__ is str:
            if not self.leaves_only:
                return key in self._td._keys_raw()
            path: tuple = (key,)
        elif key.__class__ is tuple:
            try:
                path = _as_tuple(key)
            except (TypeError, ValueError):
                return False
        else:
            return False
        if len(path) > 1 and not self.include_nested:
            return False
        try:
            found = self._td._locate(path)  # type: ignore[attr-defined]
        except KeyError:
            return False
        if found is None:
            return False
        if self.leaves_only:
            cls = self._td._meta_class(found)  # type: ignore[attr-defined]
            is_leaf = self.is_leaf
            return (found[0] != "group" and not issubclass(cls, _NON_TENSOR)) if is_leaf is None else bool(is_leaf(cls))
        return True


class H5ValuesView(H5KeysView):
    """Values of a ``PersistentTensorDict``: keys listed from metadata, each value read when reached."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return (v for _, v in self._pairs())

    def __contains__(self, value: object) -> bool:
        return any(v is value for v in self)

    def __repr__(self) -> str:
        return f"_ValuesView(keys={list(H5KeysView.__iter__(self))!r})"


class H5ItemsView(H5KeysView):
    """``(key, value)`` pairs of a ``PersistentTensorDict``: keys from metadata, values read when reached."""

    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[NestedKey, Any]]:
        return iter(self._pairs())

    def __contains__(self, item: object) -> bool:
        return any(k == item[0] and v is item[1] for k, v in self)  # type: ignore[index]

    def __repr__(self) -> str:
        return f"_ItemsView(keys={list(H5KeysView.__iter__(self))!r})"
