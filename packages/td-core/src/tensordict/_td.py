"""``TensorDict``: the dense container, a ``dict`` of leaves plus ``batch_size``,
``device`` and ``names``. The hot paths (get, set, ``td[k]``) are written out here
so that a str key costs one dict lookup and one shape check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tensordict import _classes
from tensordict._base import _GET_DEFAULTS_TO_NONE, TensorDictBase
from tensordict._device import _to_device
from tensordict._errors import batch_mismatch_error, locked_error, missing_key_error
from tensordict._keys import _MISSING, NO_DEFAULT, NestedKey, _as_tuple
from tensordict._names import check_names
from tensordict._nested_shape import leaf_shape
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._select import _like
from tensordict._unbatched import UnbatchedTensor

__all__ = ["TensorDict"]

_Tensor = torch.Tensor
_Size = torch.Size
_new_obj = object.__new__


def _misfits(value: torch.Tensor, bs: torch.Size) -> bool:
    """Whether ``value.shape`` does not start with the (non-empty) ``bs``. Slicing a torch.Size
    costs more than the rest of a ``set``, so the common cases compare items instead."""
    try:
        shape = value.shape
    except RuntimeError:  # a strided nested tensor has no sizes
        shape = leaf_shape(value)
    if shape == bs:
        return False
    n = len(bs)
    if len(shape) < n:
        return True
    if n == 1:
        return shape[0] != bs[0]
    return shape[:n] != bs


def _all_str(keys: Any) -> bool:
    """Whether every key is a str, checked at C speed (``str.join`` takes str only)."""
    try:
        "".join(keys)
    except TypeError:
        return False
    return True


def _plain_tensors(source: dict) -> bool:
    """Whether every value of ``source`` is a plain ``torch.Tensor`` and every key a str.
    (A Python loop over the values costs about 15 ns a value here: less than
    ``map(type, ...)`` into a set, which calls ``type`` through the generic call path.)"""
    for value in source.values():
        if value.__class__ is not _Tensor:
            return False
    return _all_str(source)


#: ``tuple(batch_size) -> torch.Size`` for the batch sizes met so far (bounded): building a
#: Size and checking its dims costs more than the rest of an empty ``TensorDict(...)``
_SIZE_CACHE: dict = {}


#: ``False`` in eager mode, ``True`` while Dynamo traces (a constant in the graph)
_dynamo_compiling = torch.compiler.is_dynamo_compiling


def _to_size(batch_size: Any) -> torch.Size:
    if batch_size is None:
        return _Size(())
    cls = batch_size.__class__
    if cls is _Size:
        return batch_size
    if (cls is list or cls is tuple) and not _dynamo_compiling():
        key = tuple(batch_size) if cls is list else batch_size
        try:
            return _SIZE_CACHE[key]
        except (KeyError, TypeError):
            pass
        size = _to_size_checked(batch_size)
        if len(_SIZE_CACHE) < 256 and all(d.__class__ is int for d in key):
            _SIZE_CACHE[key] = size
        return size
    return _to_size_checked(batch_size)


def _to_size_checked(batch_size: Any) -> torch.Size:
    try:
        # torch.Size takes a SymInt too (its stub says int)
        size = _Size((batch_size,)) if isinstance(batch_size, (int, torch.SymInt)) else _Size(batch_size)  # type: ignore[arg-type]
    except TypeError:
        msg = f"batch_size must be an int, a sequence of int or a torch.Size, got {batch_size!r}."
        raise TypeError(msg) from None
    if size and min(size) < 0:
        msg = f"batch_size must not have negative dims, got {tuple(size)}."
        raise ValueError(msg)
    return size


def _key_path(parent: Any, key: str) -> tuple:
    """The nested key of ``key`` under ``parent``, a ``(grand-parent, name)`` chain that
    :func:`_from_plain_dict` builds as it descends (only an error message needs it whole)."""
    names = [key]
    while parent.__class__ is tuple:
        parent, name = parent
        names.append(name)
    names.append(parent)
    return tuple(reversed(names))


def _from_plain_dict(source: dict, bs: torch.Size, dev: Any, parent: Any) -> TensorDict:
    """Nested plain dict -> TensorDict without going through ``__init__`` at each level.

    ``parent`` is the key of ``source`` as a chain (``"a"``, then ``("a", "b")``, then
    ``(("a", "b"), "c")``...): one pair per level, so deep nests cost no quadratic key
    building; :func:`_key_path` unrolls it for the error message. Recursive (the fastest
    for the usual few levels): the levels a RecursionError stops are built by
    :func:`_from_plain_dict_deep` instead (only those: the levels above carry on)."""
    obj = TensorDict.__new__(TensorDict)
    store: dict = {}
    obj._tensordict = store
    obj._batch_size = bs
    obj._device = dev
    obj._is_locked = False
    for key, value in source.items():
        cls = value.__class__
        if cls is _Tensor and key.__class__ is str:
            if bs and _misfits(value, bs):
                raise batch_mismatch_error(_key_path(parent, key), leaf_shape(value), bs)
            if dev is not None and value.device != dev:
                value = value.to(dev)
            store[key] = value
        elif cls is dict and key.__class__ is str:
            try:
                store[key] = _from_plain_dict(value, bs, dev, (parent, key))
            except RecursionError:  # deeper than the recursion limit: the rest without recursion
                store[key] = _from_plain_dict_deep(value, bs, dev, (parent, key))
        else:
            obj.set(key, value)
    return obj


def _from_plain_dict_deep(source: dict, bs: torch.Size, dev: Any, parent: Any) -> TensorDict:
    """:func:`_from_plain_dict` without recursion: a nest of any depth builds under the
    default recursion limit (nothing outside the new TensorDicts is written, so building
    again after the recursive walk gave up is safe)."""
    # without recursion, for nests of any depth: ``parents`` holds the levels above the one
    # being built, each with its entries still to read (the same order as a recursive walk)
    parents: list = []
    opening = True
    while True:
        if opening:
            obj = TensorDict.__new__(TensorDict)
            store: dict = {}
            obj._tensordict = store
            obj._batch_size = bs
            obj._device = dev
            obj._is_locked = False
            items = iter(source.items())
        for key, value in items:
            cls = value.__class__
            if cls is _Tensor and key.__class__ is str:
                if bs and _misfits(value, bs):
                    raise batch_mismatch_error(_key_path(parent, key), leaf_shape(value), bs)
                if dev is not None and value.device != dev:
                    value = value.to(dev)
                store[key] = value
            elif cls is dict and key.__class__ is str:
                parents.append((obj, store, items, parent, key))
                parent = (parent, key)
                source = value
                break
            else:
                obj.set(key, value)
        else:
            if not parents:
                return obj
            child = obj
            obj, store, items, parent, key = parents.pop()
            store[key] = child
            opening = False
            continue
        opening = True



_ABSENT_KEY: Any = object()


def _get_with_stack_options(td: TensorDict, key: NestedKey, default: Any, **options: Any) -> Any:
    """``td.get(key, default, **options)`` where ``options`` (``as_padded_tensor``, ...) are
    read by the lazy stack holding the leaf; a leaf of a dense TensorDict is returned as is
    (``as_list`` gives it unbound along the first batch dim)."""
    parts = _as_tuple(key)
    node: Any = td
    for i, sub in enumerate(parts[:-1]):
        if not isinstance(node, TensorDict):
            return node.get(parts[i:], default, **options)
        node = node._get_raw(sub, _ABSENT_KEY)
        if node is _ABSENT_KEY:
            return TensorDictBase.get(td, key, default)
    if not isinstance(node, TensorDict):
        return node.get(parts[-1], default, **options)
    value = TensorDictBase.get(node, parts[-1], default)
    if options.get("as_list") and isinstance(value, torch.Tensor) and node.batch_dims:
        return list(value.unbind(0))
    return value

class TensorDict(TensorDictBase):
    """A dictionary of tensors sharing leading ``batch_size`` dims.

    Args:
        source (Mapping, optional): initial content; nested dicts become nested
            TensorDicts, tuple keys are nested keys, non-tensor values become
            :class:`~tensordict.NonTensorData`. Keyword arguments are added too.
        batch_size (int, sequence of int or torch.Size, optional): leading dims shared
            by every leaf. Defaults to ``[]``.
        device (torch.device, str or int, optional): if given, every value is moved
            there on write. Defaults to ``None`` (leaves may live anywhere).
        names (list of str, optional): names of the batch dims.
        non_blocking (bool, optional): use non-blocking copies when moving values.
        lock (bool, optional): lock the TensorDict after construction.

    Keyword Args:
        auto_batch_size (bool): compute ``batch_size`` as the longest leading shape
            shared by every leaf. Defaults to ``False``.

    Raises:
        RuntimeError: a value's leading dims do not match ``batch_size``.
        TypeError: a key is not a str or tuple of str.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.ones(3)}}, batch_size=[3])
        >>> td["b", "c"].shape
        torch.Size([3])
        >>> td[1:]["a"].shape
        torch.Size([2, 4])
    """

    _names: list | None = None
    _device: torch.device | None = None
    #: set on results of squeeze/unsqueeze under ``set_lazy_legacy(True)`` (names are fixed)
    _frozen_names: bool = False
    #: keys whose values a pytree unflatten stored as non-tensor data (see ``_pytree.py``)
    _pytree_leaf_keys: frozenset | None = None

    def __init__(
        self,
        source: Mapping | None = None,
        batch_size: Any = None,
        device: Any = None,
        names: Sequence[str] | None = None,
        non_blocking: bool | None = None,
        lock: bool = False,
        *,
        auto_batch_size: bool = False,
        **kwargs: Any,
    ) -> None:
        if batch_size.__class__ is _Size:
            bs = batch_size
        elif batch_size.__class__ is list and not _dynamo_compiling():
            # (under Dynamo a cache lookup would hash, hence specialise, symbolic sizes)
            try:  # _to_size's cache, read here: the call would cost a quarter of an empty TensorDict
                bs = _SIZE_CACHE[tuple(batch_size)]
            except (KeyError, TypeError):
                bs = _to_size(batch_size)
        else:
            bs = _to_size(batch_size)
        self._batch_size = bs
        self._device = dev = None if device is None else _to_device(device)
        # an instance attribute, though the class has the default: CPython 3.11 reads an
        # instance's own attributes fast, a class default through the generic lookup (set
        # and td[k] = v read it on every call)
        self._is_locked = False
        if source is None:
            source = kwargs
        elif kwargs:
            msg = (
                f"TensorDict: pass the entries either as `source` or as keyword arguments, not both "
                f"(got source and {sorted(kwargs)})."
            )
            raise ValueError(msg)
        if source.__class__ is dict and dev is None and not auto_batch_size:
            # the common case in one pass of C-speed checks: str keys and plain tensors
            # (the loop below handles anything else, and reports the offending key)
            if not source:
                self._tensordict = {}
                if names is not None or lock:
                    self._finish_init(names, lock)
                return
            if _plain_tensors(source):
                if bs:
                    for key, value in source.items():
                        if _misfits(value, bs):
                            raise batch_mismatch_error(key, leaf_shape(value), bs)
                self._tensordict = dict(source)
                if names is not None or lock:
                    self._finish_init(names, lock)
                return
        self._tensordict = {}
        if isinstance(source, TensorDictBase):
            source = dict(source._items_raw())
        elif not isinstance(source, Mapping):
            msg = f"TensorDict source must be a mapping (dict or TensorDict), got {type(source).__name__}."
            raise TypeError(msg)
        n = len(bs)
        store = self._tensordict
        if auto_batch_size:
            self._batch_size = _Size(())
        check = n and not auto_batch_size
        for key, value in source.items():
            if key.__class__ is str and value.__class__ is _Tensor:
                if check and _misfits(value, bs):
                    raise batch_mismatch_error(key, leaf_shape(value), bs)
                if dev is not None and value.device != dev:
                    value = value.to(dev, non_blocking=bool(non_blocking))
                store[key] = value
            elif key.__class__ is str and value.__class__ is dict and not auto_batch_size:
                try:
                    store[key] = _from_plain_dict(value, bs, dev, key)
                except RecursionError:  # deeper than the recursion limit: build it without recursion
                    store[key] = _from_plain_dict_deep(value, bs, dev, key)
            else:
                self.set(key, value)
        if auto_batch_size:
            self.auto_batch_size_()
        if names is not None or lock:
            self._finish_init(names, lock)

    def _finish_init(self, names: Any, lock: bool) -> None:
        if names is not None:
            self.names = names
        if lock:
            self.lock_()

    @classmethod
    def _new_unsafe(
        cls, source: dict, batch_size: torch.Size, device: torch.device | None = None, names: Any = None
    ) -> TensorDict:
        """Builds without validation: the caller guarantees every leaf fits."""
        obj = TensorDict.__new__(TensorDict)
        obj._tensordict = source
        obj._batch_size = batch_size
        obj._device = device
        obj._is_locked = False
        if names is not None:
            obj._names = list(names)
        return obj

    def _new_like(self, source: dict, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT) -> TensorDict:
        if batch_size is None:
            batch_size = self._batch_size
            if names is NO_DEFAULT:
                names = self._names
        elif names is NO_DEFAULT:
            names = None
        return TensorDict._new_unsafe(
            source, batch_size, self._device if device is NO_DEFAULT else device, names
        )

    # ------------------------------------------------------------------ storage
    def _keys_raw(self) -> Any:
        return self._tensordict.keys()

    def _items_raw(self) -> Any:
        return self._tensordict.items()

    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:
        return self._tensordict.get(key, default)

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        self._tensordict[key] = value

    def _del_raw(self, key: str) -> None:
        del self._tensordict[key]

    # ------------------------------------------------------------------ batch size
    @property
    def batch_size(self) -> torch.Size:
        """Leading dims shared by every leaf. Setting it re-checks every leaf.

        Raises:
            RuntimeError: (setter) a leaf's leading dims do not match the new size.
        """
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new_size: Any) -> None:
        new_size = _to_size(new_size)
        if new_size == self._batch_size:
            return
        if self._is_locked:
            raise locked_error("change the batch_size")
        n = len(new_size)
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDictBase):
                if value.batch_size[:n] != new_size:
                    try:
                        value.batch_size = new_size
                    except RuntimeError:
                        raise batch_mismatch_error(key, value.batch_size, new_size) from None
            elif isinstance(value, _Tensor):
                if value.__class__ is UnbatchedTensor:
                    self._tensordict[key] = value._rebatch(new_size)
                elif leaf_shape(value)[:n] != new_size:
                    raise batch_mismatch_error(key, leaf_shape(value), new_size)
            elif isinstance(value, (NonTensorData,)):
                value._batch_size = new_size
            elif value.batch_size[:n] != new_size:
                raise batch_mismatch_error(key, value.batch_size, new_size)
        names = self._names
        if names is not None and len(names) != n:
            names = names[:n] + [None] * (n - len(names))
            self._names = names if any(v is not None for v in names) else None
        self._batch_size = new_size

    @property
    def device(self) -> torch.device | None:
        """Device every leaf lives on, or ``None`` if not fixed."""
        return self._device

    @device.setter
    def device(self, value: Any) -> None:
        msg = "device cannot be set directly; use `td = td.to(device)` or `td.clear_device_()`."
        raise RuntimeError(msg)

    # ------------------------------------------------------------------ names
    def _has_names(self) -> bool:
        return self._names is not None

    @property
    def names(self) -> list:
        """Names of the batch dims (``None`` for unnamed dims)."""
        if self._names is None:
            return [None] * len(self._batch_size)
        return list(self._names)

    @names.setter
    def names(self, value: Any) -> None:
        if self._frozen_names:
            msg = (
                "Names of a lazy tensordict cannot be modified (this TensorDict is the result of "
                "squeeze/unsqueeze under set_lazy_legacy(True)). Set the names before the op."
            )
            raise RuntimeError(msg)
        new = None if value is None else check_names(value, self._batch_size)
        nd = len(self._batch_size)
        for sub in self._tensordict.values():
            if sub.__class__ is _Tensor:
                continue
            if isinstance(sub, (TensorDictBase, NonTensorData, NonTensorStack)) or getattr(sub, "_is_tensorclass", False):
                cur = sub.names
                if new is None and all(n is None for n in cur):
                    continue
                sub.names = (new or [None] * nd) + cur[nd:]
        self._names = new

    # ------------------------------------------------------------------ hot paths
    def get(  # type: ignore[override]  # noqa: D102
        self,
        key: NestedKey,
        default: Any = NO_DEFAULT,
        # upstream's lazy-stack options, positional-or-keyword: keyword-only parameters with
        # defaults would cost every call on Python 3.11; a str key never reads them
        as_list: bool = False,
        as_nested_tensor: bool = False,
        as_padded_tensor: bool = False,
        layout: Any = None,
        padding_value: float = 0.0,
        padding_side: str = "right",
    ) -> Any:
        if key.__class__ is str:
            try:
                value = self._tensordict[key]
            except KeyError:
                if default is NO_DEFAULT:
                    if _GET_DEFAULTS_TO_NONE[0]:
                        return None
                    raise missing_key_error(key, self._tensordict) from None
                return default
            return value
        if as_list or as_nested_tensor or as_padded_tensor:
            # options for the lazy stacks met on the way (dense leaves are returned as they are)
            return _get_with_stack_options(
                self, key, default, as_list=as_list, as_nested_tensor=as_nested_tensor,
                as_padded_tensor=as_padded_tensor, layout=layout, padding_value=padding_value,
                padding_side=padding_side,
            )
        if key.__class__ is tuple and key:
            node: Any = self
            names: tuple[Any, ...] = key  # a tuple here, by the check above
            try:
                for sub in names:
                    # a name that is not a str (a nested tuple, an int) misses in the store
                    # (KeyError) or cannot be hashed (TypeError): the general path handles it
                    if node.__class__ is not TensorDict:
                        break
                    node = node._tensordict[sub]
                else:
                    return node
            except (KeyError, TypeError):
                pass
        return TensorDictBase.get(self, key, default)

    get.__doc__ = TensorDictBase.get.__doc__

    def __getitem__(self, index: Any) -> Any:
        if index.__class__ is str:
            try:
                value = self._tensordict[index]
            except KeyError:
                raise missing_key_error(index, self._tensordict) from None
            if value.__class__ is _Tensor:
                return value
            return self._unwrap_leaf(value)
        return TensorDictBase.__getitem__(self, index)

    def set(self, key: NestedKey, item: Any, inplace: bool = False, *, non_blocking: bool = False) -> TensorDict:  # type: ignore[override]  # noqa: D102
        if key.__class__ is str and item.__class__ is _Tensor and not inplace:
            if self._is_locked:
                raise locked_error("set a new value", key)
            bs = self._batch_size
            if bs and _misfits(item, bs):
                raise batch_mismatch_error(key, leaf_shape(item), bs)
            dev = self._device
            if dev is not None and item.device != dev:
                item = item.to(dev, non_blocking=non_blocking)
            self._tensordict[key] = item
            return self
        if key.__class__ is tuple and item.__class__ is _Tensor and not inplace and len(key) > 1 and self.__class__ is TensorDict:
            node: Any = self
            try:
                # a name that is not a str misses in the store (KeyError) or cannot be
                # hashed (TypeError): either way the general path below handles the key
                parents: Any = key[:-1]
                for sub in parents:
                    if node.__class__ is not TensorDict:
                        break
                    node = node._tensordict[sub]
            except (KeyError, TypeError):
                node = None
            if node is not None:
                last = key[-1]
                if last.__class__ is str and node.__class__ is TensorDict and not node._is_locked:
                    bs = node._batch_size
                    if bs and _misfits(item, bs):
                        raise batch_mismatch_error(key, leaf_shape(item), bs)
                    dev = node._device
                    if dev is not None and item.device != dev:
                        item = item.to(dev, non_blocking=non_blocking)
                    node._tensordict[last] = item
                    return self
        return TensorDictBase.set(self, key, item, inplace, non_blocking=non_blocking)  # type: ignore[return-value]

    def set_(self, key: NestedKey, item: Any, *, non_blocking: bool = False) -> TensorDict:  # noqa: D102
        if item.__class__ is _Tensor:
            if key.__class__ is str:
                existing = self._tensordict.get(key)
            elif key.__class__ is tuple:
                # a nested key through dense TensorDicts: walk the stores directly (a name
                # that is not a str misses in the store or cannot be hashed: general path)
                existing = self
                names: Any = key
                try:
                    for sub in names:
                        if existing.__class__ is not TensorDict:
                            existing = None
                            break
                        existing = existing._tensordict[sub]
                except (KeyError, TypeError):
                    existing = None
            else:
                existing = None
            if existing.__class__ is _Tensor:
                # copy_ broadcasts ``item`` exactly where the general path accepts it; what
                # it refuses goes there for the error (positional non_blocking: a keyword
                # costs more than the rest of this call)
                try:
                    existing.copy_(item, non_blocking)
                except RuntimeError:
                    pass
                else:
                    return self
        return TensorDictBase.set_(self, key, item, non_blocking=non_blocking)  # type: ignore[return-value]

    set_.__doc__ = TensorDictBase.set_.__doc__

    set.__doc__ = TensorDictBase.set.__doc__

    def __setitem__(self, index: Any, value: Any) -> None:
        if index.__class__ is str and value.__class__ is _Tensor:
            if self._is_locked:
                raise locked_error("set a new value", index)
            bs = self._batch_size
            if bs and _misfits(value, bs):
                raise batch_mismatch_error(index, leaf_shape(value), bs)
            dev = self._device
            if dev is not None and value.device != dev:
                value = value.to(dev)
            self._tensordict[index] = value
            return
        TensorDictBase.__setitem__(self, index, value)

    def select(  # noqa: D102
        self, *keys: NestedKey, inplace: bool = False, strict: bool = True, as_tensordict: bool = False
    ) -> TensorDictBase:
        if not inplace:
            # str keys that are all present: one store lookup each, nothing else (a plain
            # loop: a comprehension is a function call on Python 3.11)
            store = self._tensordict
            source: dict = {}
            try:
                for k in keys:
                    if k.__class__ is not str:
                        break
                    source[k] = store[k]
                else:
                    if self.__class__ is not TensorDict:
                        return self._new_like(source)
                    out = _new_obj(TensorDict)  # inline: a call costs a tenth of this select
                    out._tensordict = source
                    out._batch_size = self._batch_size
                    out._device = self._device
                    out._is_locked = False
                    names = self._names
                    if names is not None:
                        out._names = list(names)
                    return out
            except KeyError:
                for k in keys:
                    if k.__class__ is not str:
                        break  # the general path reports a bad key first
                else:
                    if strict:
                        missing = next(k for k in keys if k not in store)
                        raise missing_key_error(missing, store) from None
                    return _like(self, {k: store[k] for k in keys if k in store})
        return TensorDictBase.select(self, *keys, inplace=inplace, strict=strict)

    select.__doc__ = TensorDictBase.select.__doc__

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        if not inplace:
            # a copy of the store with the str keys popped: C-speed copy, one pop per key
            source = self._tensordict.copy()
            pop = source.pop
            for k in keys:
                if k.__class__ is not str:
                    break
                pop(k, None)
            else:
                return _like(self, source)
        return TensorDictBase.exclude(self, *keys, inplace=inplace)

    exclude.__doc__ = TensorDictBase.exclude.__doc__

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_lock_stack", None)
        state.pop("_lock_parents", None)  # weak refs: rebuilt when the copy is locked
        state.pop("_shape_source", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


_classes._bind(TensorDict=TensorDict)
