"""Writes into a lazy stack (``LazyWriteMixin``).

A value shaped like the stack is split along ``stack_dim`` (``unbind``) and each
part is written into the matching stacked TensorDict; any other value (a number,
a tensor that broadcasts) is written into each of them. Keys are set, replaced,
deleted and renamed in the stacked TensorDicts, so the originals change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from tensordict._base import TensorDictBase, is_tensor_collection
from tensordict._errors import locked_error, missing_key_error
from tensordict._host import LazyStackHost
from tensordict._keys import NestedKey, _as_tuple, unravel_key
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._td import TensorDict

__all__ = ["LazyWriteMixin"]

_Tensor = torch.Tensor


def _td_has(td: Any, key: tuple) -> bool:
    """``True`` if ``td`` holds the (flat tuple) ``key``, without stacking any leaf."""
    for sub in key[:-1]:
        td = td._get_raw(sub, None)
        if not isinstance(td, TensorDictBase):
            return False
    return key[-1] in td._keys_raw()


class LazyWriteMixin(LazyStackHost):
    """Set, in-place set, delete and rename, through to the stacked TensorDicts."""

    def _split_value(self, value: Any) -> list:
        """``value`` (shaped like the stack) split into one part per stacked TensorDict."""
        tds = self.tensordicts
        n = len(tds)
        sd = self.stack_dim
        bs = self._batch_size
        if isinstance(value, _Tensor):
            nd = len(bs)
            if value.ndim >= nd and value.shape[:nd] == bs:
                return list(value.unbind(sd))
            return [value] * n
        if isinstance(value, NonTensorData):
            return [NonTensorData(value.data, td.batch_size, value.device) for td in tds]
        if isinstance(value, NonTensorStack):
            head = (slice(None),) * sd
            return [value[head + (i,)] for i in range(n)]
        if isinstance(value, TensorDictBase) or is_tensor_collection(value):
            vbs = value.batch_size
            if vbs[: len(bs)] != bs:
                msg = f"cannot split a value of batch_size {tuple(vbs)} over a lazy stack of batch_size {tuple(bs)}."
                raise RuntimeError(msg)
            return list(value.unbind(sd))
        return [value] * n

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        for td, part in zip(self.tensordicts, self._split_value(value)):
            td._set_raw(key, part)

    def _del_raw(self, key: str) -> None:
        for td in self.tensordicts:
            if key in td._keys_raw():
                td._del_raw(key)

    def _create_nested(self, key: str) -> TensorDictBase:
        for td in self.tensordicts:
            if key not in td._keys_raw():
                td._create_nested(key)
        out = self._get_raw(key)
        if not isinstance(out, TensorDictBase):
            msg = f"Cannot write a nested key under {key!r}: it holds a {type(out).__name__}, not a TensorDict."
            raise KeyError(msg)
        return out

    def _split_list(self, value: list) -> list | None:
        """A (nested) list shaped like the batch dims up to the stack dim, split into one
        list element per stacked TensorDict (``value[i][j]`` for ``stack_dim == 1``);
        ``None`` when ``value`` has another shape."""
        bs, sd, n = self._batch_size, self.stack_dim, len(self.tensordicts)

        def fits(v: Any, depth: int) -> bool:
            if not isinstance(v, list) or len(v) != bs[depth]:
                return False
            return depth == sd or all(fits(x, depth + 1) for x in v)

        if not n or not fits(value, 0):
            return None

        def split(v: list, depth: int) -> list:
            if depth == sd:
                return list(v)
            cols = [split(x, depth + 1) for x in v]
            return [[c[j] for c in cols] for j in range(n)]

        return split(value, 0)

    def _set_str(self, key: str, value: Any, inplace: bool, validated: bool = False) -> None:
        if not validated and value.__class__ is list:
            parts = self._split_list(value)
            if parts is not None:
                # one element per stacked TensorDict (tensors of different shapes allowed)
                if not inplace and self.is_locked:
                    raise locked_error("set a new value", key)
                for td, part in zip(self.tensordicts, parts):
                    td._set_str(key, part, inplace, False)
                return
        if not validated:
            value = self._convert_value(key, value)
        if not inplace and self.is_locked:
            raise locked_error("set a new value", key)
        for td, part in zip(self.tensordicts, self._split_value(value)):
            td._set_str(key, part, inplace, True)

    def set_(self, key: NestedKey, item: Any, *, non_blocking: bool = False) -> Any:
        """Copies ``item`` into the existing value of every stacked TensorDict under ``key``.

        ``item`` is split along ``stack_dim`` when its leading dims are the stack's
        batch size, and broadcast to every stacked TensorDict otherwise.

        Raises:
            KeyError: ``key`` is missing from some stacked TensorDicts (indices named).
            RuntimeError: shapes do not broadcast.
        """
        key = unravel_key(key)
        try:
            self._check_present(key)
        except KeyError as err:  # tensordict 0.15's wording first, then ours
            msg = f"setting a value in-place on a stack of TensorDict needs an existing key: {err.args[0]}"
            raise KeyError(msg) from None
        if isinstance(item, Mapping) and not isinstance(item, TensorDictBase):
            try:
                item = TensorDict(item, batch_size=self._batch_size)
            except RuntimeError:
                pass
        elif not isinstance(item, (torch.Tensor, TensorDictBase)) and hasattr(item, "__array__"):
            item = torch.as_tensor(item)  # a numpy array is split along the stack dim as a tensor is
        for td, part in zip(self.tensordicts, self._split_value(item)):
            td.set_(key, part, non_blocking=non_blocking)
        return self

    def fill_(self, key: NestedKey, value: float | bool) -> Any:
        """Fills the leaf (or every leaf of the sub-TensorDict) under ``key`` in every stacked TensorDict."""
        key = unravel_key(key)
        self._check_present(key)
        for td in self.tensordicts:
            td.fill_(key, value)
        return self

    def del_(self, key: NestedKey) -> Any:
        """Removes ``key`` from every stacked TensorDict that holds it.

        Raises:
            KeyError: no stacked TensorDict holds ``key``.
            RuntimeError: the stack is locked.
        """
        if self.is_locked:
            raise locked_error("delete a key", key)
        key = unravel_key(key)
        t = _as_tuple(key)
        have = [td for td in self.tensordicts if _td_has(td, t)]
        if not have:
            raise missing_key_error(key, self.keys(True))
        for td in have:
            td.del_(key)
        return self

    def clear(self) -> Any:
        """Removes every key from every stacked TensorDict. Raises RuntimeError if locked."""
        if self.is_locked:
            raise locked_error("clear")
        for td in self.tensordicts:
            td.clear()
        return self

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> Any:
        """Renames ``old_key`` to ``new_key`` in every stacked TensorDict.

        Raises:
            KeyError: ``old_key`` is missing from some of them, or ``safe=True`` and
                ``new_key`` exists.
            RuntimeError: the stack is locked.
        """
        if self.is_locked:
            raise locked_error("rename a key", old_key)
        self._check_present(old_key)
        if safe:
            t = _as_tuple(new_key)
            if any(_td_has(td, t) for td in self.tensordicts):
                msg = f"key {unravel_key(new_key)!r} already present in TensorDict (one of the stacked TensorDicts; safe=True)."
                raise KeyError(msg)
        for td in self.tensordicts:
            td.rename_key_(old_key, new_key)
        return self
