"""``update``, ``update_`` and ``update_at_``: writing the entries of another TensorDict or
mapping into a TensorDict, a mixin of :class:`~tensordict.TensorDictBase`.

``update`` validates every value before it writes any (a failed update changes nothing):
``_plan_update`` lists the ``(nested key, value)`` pairs (nested TensorDicts merge key by
key), then each value is checked against ``batch_size`` and converted, then written.
``_update_fast`` is the all-tensor, str-keyed path that skips the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._classes import is_tensor_collection
from tensordict._errors import batch_mismatch_error, locked_error
from tensordict._host import TensorDictHost
from tensordict._keys import NestedKey, _as_tuple, _KeysView, unravel_key
from tensordict._nested_shape import leaf_shape
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._unbatched import UnbatchedTensor

if TYPE_CHECKING:
    from typing_extensions import Self

    from tensordict._base import TensorDictBase

__all__ = ["UpdateMixin"]

#: returned by ``_get_any_raw(key, _ABSENT)`` for a missing key (instead of raising)
_ABSENT: Any = object()
_TENSOR_ONLY = frozenset((torch.Tensor,))


class UpdateMixin(TensorDictHost):
    """``update``/``update_``/``update_at_`` of :class:`~tensordict.TensorDictBase`."""

    def _plan_update(self, source: Any, keys_to_update: Any, prefix: tuple = (), is_leaf: Any = None) -> list:
        """The ``(full key, value)`` writes of ``update(source)``, depth first in key order.
        The sources nested in existing TensorDicts are walked with an explicit stack of
        ``(items, prefix, existing node)``, so any depth works. A nested source whose class
        ``is_leaf`` accepts (a dict counts as a TensorDict) replaces the existing entry."""
        plan: list = []
        tdb = _classes.TensorDictBase
        lazy_cls = _classes.LazyStackedTensorDict
        node: Any = self._get_any_raw(prefix, None) if prefix else self
        stack = [(iter(source._items_raw() if isinstance(source, tdb) else source.items()), prefix, node)]
        while stack:
            items, prefix, node = stack[-1]
            for key, value in items:
                sub = _as_tuple(key)
                full = prefix + sub
                if keys_to_update is not None and not any(
                    full[: len(k)] == k or k[: len(full)] == full for k in keys_to_update
                ):
                    continue
                if isinstance(value, tdb) or (isinstance(value, Mapping) and not is_tensor_collection(type(value))):
                    # read relative to the existing node at ``prefix`` (one level, not the whole path)
                    existing = None if not full else node._get_any_raw(sub, None) if node is not None else None
                    if (
                        isinstance(value, lazy_cls)
                        and isinstance(existing, tdb)
                        and not isinstance(existing, lazy_cls)
                        and value.stack_dim < existing.batch_dims
                        and existing.batch_size == value.batch_size[: existing.batch_dims]
                        and keys_to_update is None
                    ):
                        # a lazy stack merged into a dense TensorDict: the result is a lazy stack
                        # (its TensorDicts may be heterogeneous), with the dense one's other keys
                        parts = [p.clone(False) for p in existing.unbind(value.stack_dim)]
                        for part, src in zip(parts, value.tensordicts):
                            part.batch_size = src.batch_size
                            part.update(src)
                        plan.append((full, lazy_cls._from_list(parts, value.stack_dim)))
                        continue
                    if isinstance(existing, tdb) and not (
                        is_leaf is not None and is_leaf(type(value) if isinstance(value, tdb) else _classes.TensorDict)
                    ):
                        nested = iter(value._items_raw() if isinstance(value, tdb) else value.items())
                        stack.append((nested, full, existing))
                        break
                plan.append((full, value))
            else:
                stack.pop()
        return plan

    def update(
        self,
        input_dict_or_td: Mapping | TensorDictBase | None = None,
        clone: bool = False,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        is_leaf: Any = None,
        update_batch_size: bool = False,
        ignore_lock: bool = False,
        **kwargs: Any,
    ) -> Self:
        """Writes every key of ``input_dict_or_td`` into ``self`` (nested TensorDicts merge).

        Every value is validated before anything is written: if one fails, no key
        is changed.

        Args:
            input_dict_or_td (Mapping or TensorDictBase): the values to write; nested
                mappings and TensorDicts are merged key by key into the nested
                TensorDicts of ``self``. Each tensor's shape must start with
                ``batch_size``; plain dicts become TensorDicts, other objects
                non-tensor data.
            clone (bool, optional): write clones of the values instead of the values
                themselves. Defaults to ``False``.
            inplace (bool, optional): copy into the existing tensors (``set_``) where a
                key exists, instead of replacing them; required on a locked TensorDict.
                Defaults to ``False``.

        Keyword Args:
            non_blocking (bool, optional): non-blocking copies when a value is moved to
                ``self.device``. Defaults to ``False``.
            keys_to_update (sequence of NestedKey, optional): write only these keys
                (and what is nested under them). Defaults to every key.
            is_leaf (callable, optional): ``is_leaf(cls) -> bool``; a nested TensorDict
                (or dict, as a TensorDict) of the source whose class it accepts replaces
                the entry of ``self`` whole instead of being merged into it. Defaults to
                ``None``: nested TensorDicts are merged key by key.
            update_batch_size (bool, optional): first set ``self.batch_size`` to
                ``input_dict_or_td.batch_size`` (when it is a TensorDict). Defaults to
                ``False``.
            ignore_lock (bool, optional): write into a locked TensorDict (it is
                unlocked for the update and locked again). Defaults to ``False``.
            **kwargs: more entries (``key=value``), written after
                ``input_dict_or_td`` (they win on conflicts), as ``dict.update`` does.

        Returns:
            ``self``.

        Raises:
            RuntimeError: a value's leading dims do not match ``batch_size``
                (``batch_size`` and the key are named), or the TensorDict is locked
                and a key would be added or replaced.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> _ = td.update({"b": torch.ones(2)})
            >>> sorted(td.keys())
            ['a', 'b']
        """
        if kwargs:
            merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
            merged.update(kwargs)
            input_dict_or_td = merged
        if input_dict_or_td is None:
            return self
        if input_dict_or_td is self:
            return self
        if update_batch_size and isinstance(input_dict_or_td, _classes.TensorDictBase):
            return self._update_resize(input_dict_or_td, clone, inplace, non_blocking, keys_to_update, is_leaf, ignore_lock)
        if keys_to_update is None and is_leaf is None and not (clone or inplace or update_batch_size or self.is_locked):
            if self._update_fast(input_dict_or_td, non_blocking):
                return self
        if isinstance(input_dict_or_td, _classes.TensorDictBase):
            self._check_update_batch(input_dict_or_td)
        ktu = None if keys_to_update is None else [_as_tuple(k) for k in keys_to_update]
        plan = self._plan_update(input_dict_or_td, ktu, is_leaf=is_leaf)
        if update_batch_size and isinstance(input_dict_or_td, _classes.TensorDictBase):
            self.batch_size = input_dict_or_td.batch_size
        checked = []
        for full, value in plan:
            if clone and hasattr(value, "clone"):
                value = value.clone()
            parent_bs = self.batch_size
            if isinstance(value, torch.Tensor):
                if value.__class__ is UnbatchedTensor:
                    value = value._rebatch(parent_bs)
                elif value.shape[: len(parent_bs)] != parent_bs:
                    raise batch_mismatch_error(full if len(full) > 1 else full[0], value.shape, parent_bs)
                if self.device is not None and value.device != self.device:
                    value = value.to(self.device, non_blocking=non_blocking)
            else:
                value = self._convert_value(full, value)
            checked.append((full, value))
        lock_state = self.is_locked
        if ignore_lock and lock_state:
            self.unlock_()
        try:
            if self.is_locked and not inplace:
                for full, _ in checked:
                    if self._get_any_raw(full, _ABSENT) is _ABSENT or not inplace:
                        raise locked_error("update", full)
            for full, value in checked:
                if len(full) == 1:
                    self._set_str(full[0], value, inplace, validated=True)
                else:
                    self._set_tuple(full, value, inplace, validated=True)
        finally:
            if ignore_lock and lock_state:
                self.lock_()
        return self

    def _update_resize(
        self,
        source: TensorDictBase,
        clone: bool,
        inplace: bool,
        non_blocking: bool,
        keys_to_update: Any,
        is_leaf: Any,
        ignore_lock: bool,
    ) -> Self:
        """``update(source, update_batch_size=True)``: ``self`` (and each nested
        TensorDict that ``source`` also holds, updated in place) takes the batch size of
        ``source``; the other entries of ``source`` replace those of ``self``."""
        if inplace:
            msg = "update(update_batch_size=True) replaces the entries: it cannot be combined with inplace=True."
            raise RuntimeError(msg)
        if keys_to_update is not None:
            msg = "update(update_batch_size=True) updates every key: it cannot be combined with keys_to_update."
            raise RuntimeError(msg)
        if self.is_locked and not ignore_lock:
            raise locked_error("update the batch size")
        nested = []
        leaves = []
        for key, value in source._items_raw():
            mine = self._get_raw(key, None)
            collection = isinstance(value, _classes.TensorDictBase) or is_tensor_collection(value)
            if (
                collection
                and mine is not None
                and (isinstance(mine, _classes.TensorDictBase) or is_tensor_collection(mine))
                and not (is_leaf is not None and is_leaf(type(value)))
                and not isinstance(value, (NonTensorData, NonTensorStack))
            ):
                nested.append((mine, value))
            else:
                leaves.append((key, value))
        lock_state = self.is_locked
        if lock_state:
            self.unlock_()
        try:
            for key, _ in leaves:  # replaced below, after the batch size changed
                if self._get_raw(key, None) is not None:
                    self._del_raw(key)
            for mine, value in nested:
                mine.update(value, clone=clone, non_blocking=non_blocking, is_leaf=is_leaf, update_batch_size=True)
            self.batch_size = source.batch_size
            for key, value in leaves:
                if clone and hasattr(value, "clone"):
                    value = value.clone()
                self._set_str(key, value, False)
        finally:
            if lock_state:
                self.lock_()
        return self

    def _update_fast(self, source: Any, non_blocking: bool) -> bool:
        """All-tensor, str-keyed update: validate everything, then assign. False if not applicable."""
        td_cls = _classes.TensorDict
        if source.__class__ is td_cls and self.__class__ is td_cls:
            # a TensorDict of plain tensors already holds the invariant: its batch size starts
            # with ours and its device is ours, so no leaf needs checking (one C-speed pass)
            bs, sbs, dev = self._batch_size, source._batch_size, self._device
            store = source._tensordict
            if (
                (sbs == bs or (len(sbs) > len(bs) and sbs[: len(bs)] == bs))
                and (dev is None or source._device == dev)
                and _TENSOR_ONLY.issuperset(map(type, store.values()))
            ):
                self._tensordict.update(store)
                return True
        items = source._items_raw() if isinstance(source, _classes.TensorDictBase) else source.items()
        bs = self.batch_size
        n = len(bs)
        dev = self.device
        staged = []
        for key, value in items:
            if key.__class__ is not str or not isinstance(value, torch.Tensor) or value.__class__ is UnbatchedTensor:
                return False
            if n and leaf_shape(value)[:n] != bs:
                raise batch_mismatch_error(key, leaf_shape(value), bs)
            if dev is not None and value.device != dev:
                value = value.to(dev, non_blocking=non_blocking)
            staged.append((key, value))
        if not staged and isinstance(source, _classes.TensorDictBase):
            self._check_update_batch(source)  # (a non-empty source was checked key by key)
        set_raw = self._set_raw
        for key, value in staged:
            set_raw(key, value)
        return True

    def _check_update_batch(self, source: TensorDictBase) -> None:
        """Raises if the batch sizes of ``self`` and of the TensorDict ``source`` are
        incompatible (neither is a prefix of the other)."""
        other_bs = source.batch_size
        my_bs = self.batch_size
        n = min(len(other_bs), len(my_bs))
        if other_bs != my_bs and other_bs[:n] != my_bs[:n]:
            msg = (
                f"batch dimension mismatch: cannot update a TensorDict of batch_size "
                f"{tuple(my_bs)} with one of batch_size {tuple(other_bs)}. Pass "
                "update_batch_size=True to take the batch size of the source."
            )
            raise RuntimeError(msg)

    def update_(
        self,
        input_dict_or_td: Mapping | TensorDictBase | None = None,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        **kwargs: Any,
    ) -> Self:
        """In-place update: every key must already exist (KeyError otherwise).

        Args:
            input_dict_or_td (Mapping or TensorDictBase): the values, copied into the
                existing leaves (broadcast to their shapes).
            clone (bool, optional): accepted for compatibility (values are copied
                anyway). Defaults to ``False``.

        Keyword Args:
            non_blocking (bool, optional): non-blocking copies. Defaults to ``False``.
            keys_to_update (sequence of NestedKey, optional): write only these keys (and
                the entries nested under them).
            **kwargs: more entries (``key=value``), written after ``input_dict_or_td``.

        Returns:
            ``self``.

        Raises:
            KeyError: a key of ``input_dict_or_td`` is missing from ``self``.
        """
        if kwargs:
            merged = dict(input_dict_or_td.items()) if input_dict_or_td is not None else {}
            merged.update(kwargs)
            input_dict_or_td = merged
        if input_dict_or_td is None:
            return self
        if not isinstance(input_dict_or_td, _classes.TensorDictBase):
            input_dict_or_td = _classes.TensorDict(dict(input_dict_or_td), batch_size=[])
        items = _KeysView(input_dict_or_td, True, True)._pairs()
        if isinstance(keys_to_update, (str, tuple)):
            keys_to_update = [keys_to_update]
        ktu = None if keys_to_update is None else [_as_tuple(unravel_key(k)) for k in keys_to_update]
        if ktu is not None:
            for k in ktu:  # a key to update must exist in self
                self._get_any_raw(k if len(k) > 1 else k[0])
        pairs = []
        for key, value in items:
            if ktu is not None:
                full = _as_tuple(key)
                if not any(full[: len(k)] == k for k in ktu):
                    continue
            dest = self._get_any_raw(key, _ABSENT)
            if dest is _ABSENT:
                msg = (
                    f"key {key!r} was not found in the TensorDict: update_() writes in place into existing "
                    f"keys only (keys: {sorted(str(k) for k in self.keys())}). Use update() to add keys."
                )
                raise KeyError(msg)
            pairs.append((key, dest, value))
        for key, dest, value in pairs:
            if isinstance(value, torch.Tensor) and clone:
                value = value.clone()
            self._write_inplace(key, dest, value)
        return self

    def update_at_(self, input_dict_or_td: Mapping | TensorDictBase, index: Any, clone: bool = False) -> Self:
        """Writes ``input_dict_or_td``'s leaves into ``self[index]`` in place.

        Args:
            input_dict_or_td (dict or TensorDictBase): the values to write, shaped like
                ``self[index]``.
            index (index): where to write in the batch dims (any index ``td[index]`` accepts).
            clone (bool, optional): clone the values first.
        """
        for key, value in input_dict_or_td.items():
            self.set_at_(key, value, index)
        return self
