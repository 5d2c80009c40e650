"""``LazyStackedTensorDict``: TensorDicts stacked along a new batch dim, lazily.

The stack keeps the TensorDicts it was built from (``tensordicts``) and the
position of the new dim (``stack_dim``). Building one costs a batch-size check
per TensorDict and no work per key. A leaf is stacked only when it is read
(``get``, ``td[key]``, ``items()``); writes are split along ``stack_dim`` and
written into the stacked TensorDicts, so the originals see every change.

The stacked TensorDicts may hold different keys (``keys()`` lists the keys they
all have) and leaves whose feature shapes differ (such a dim shows as ``-1`` in
the repr and in :meth:`LazyStackedTensorDict._shape_of`; reading the leaf raises
and tells how to get it as a list, a nested tensor or a padded tensor).

Concerns live in sibling modules: indexing in ``_lazy_index.py``, shape
operations in ``_lazy_shape.py``, dense conversions and the repr in
``_lazy_dense.py``, per-TensorDict methods (apply, select, update, ...) in
``_lazy_ops.py``, element-wise math in ``_lazy_math.py``, writes in
``_lazy_write.py`` and the stacking functions in ``_lazy_funcs.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tensordict import _classes
from tensordict._base import _GET_DEFAULTS_TO_NONE, TensorDictBase, is_tensor_collection
from tensordict._errors import locked_error, missing_key_error
from tensordict._keys import _MISSING, NO_DEFAULT, NestedKey, _as_tuple, _KeysView, unravel_key
from tensordict._lazy_consolidate import LazyConsolidateMixin
from tensordict._lazy_dense import LazyDenseMixin
from tensordict._lazy_funcs import dense_stack_tds, lazy_stack, maybe_dense_stack
from tensordict._lazy_index import LazyIndexMixin
from tensordict._lazy_math import LazyMathMixin
from tensordict._lazy_ops import LazyOpsMixin
from tensordict._lazy_shape import LazyShapeMixin
from tensordict._lazy_write import LazyWriteMixin, _td_has
from tensordict._legacy_views import (  # noqa: F401 - upstream's module path for the legacy views
    _CustomOpTensorDict,
    _PermutedTensorDict,
    _SqueezedTensorDict,
    _TransposedTensorDict,
    _UnsqueezedTensorDict,
    _ViewedTensorDict,
)
from tensordict._names import check_names
from tensordict._nontensor import NonTensorData, NonTensorStack, _stack_non_tensor
from tensordict._stack import _one_unbatched
from tensordict._td import TensorDict
from tensordict._unbatched import UnbatchedTensor

__all__ = ["LazyStackedTensorDict", "lazy_stack", "maybe_dense_stack", "dense_stack_tds"]

_Tensor = torch.Tensor
_Size = torch.Size
_RAISE: Any = object()
_new_object = object.__new__


def _format_indices(indices: Sequence[int]) -> str:
    shown = list(indices[:20])
    return str(shown)[:-1] + ", ...]" if len(indices) > 20 else str(shown)


class StackDimError(IndexError, RuntimeError):
    """``stack_dim`` out of range: an ``IndexError`` (as for tensors) that is also the
    ``RuntimeError`` tensordict raises."""


class _LazyKeysView(_KeysView):
    """Keys view of a lazy stack: lists nested keys without stacking any leaf."""

    __slots__ = ()

    def _lazy_keys(self, td: Any, prefix: tuple, out: list) -> None:
        if not isinstance(td, LazyStackedTensorDict) or not td.tensordicts:
            sub = _KeysView(td, self.include_nested, self.leaves_only, self.is_leaf)
            out.extend(
                (prefix + k if k.__class__ is tuple else prefix + (k,)) if prefix else k
                for k in sub
            )
            return
        is_leaf = self.is_leaf
        first_td = td.tensordicts[0]
        for key in td._keys_raw():
            full = prefix + (key,) if prefix else key
            first = first_td._get_raw(key, None)
            is_coll = isinstance(first, TensorDictBase)
            if is_leaf is None:  # non-tensor data is not a leaf by default
                leaf = not is_coll and not isinstance(first, (NonTensorData, NonTensorStack))
            else:
                leaf = is_leaf(LazyStackedTensorDict if is_coll else type(first))
            # a nested key's own keys come before it, as in tensordict 0.15
            if self.include_nested and is_coll:
                self._lazy_keys(td._get_raw(key), prefix + (key,), out)
            if not self.leaves_only or leaf:
                out.append(full)

    def __iter__(self) -> Any:
        if not self.include_nested and not self.leaves_only:
            return iter(self._td._keys_raw())
        out: list = []
        self._lazy_keys(self._td, (), out)
        return iter(out)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if key.__class__ is str:
            t: tuple = (key,)
        elif key.__class__ is tuple:
            try:
                t = _as_tuple(key)
            except (TypeError, ValueError):
                return False
        else:
            return False
        if len(t) > 1 and not self.include_nested:
            if self.leaves_only:
                return False
            # tensordict 0.15 still finds it here (a TensorDict's view does not), and warns
            if not _LazyKeysView(self._td, True, False, self.is_leaf).__contains__(t):
                return False
            warnings.warn(
                f"Finding the nested key {t!r} in LazyStackedTensorDict.keys() without "
                "include_nested=True is deprecated: a TensorDict's view returns False. Use "
                "keys(include_nested=True) to look up a nested key.",
                FutureWarning,
                stacklevel=2,
            )
            return True
        node: Any = self._td
        for sub in t[:-1]:
            node = node._get_raw(sub, None)
            if not isinstance(node, TensorDictBase):
                return False
        if not isinstance(node, LazyStackedTensorDict):
            return _KeysView(node, True, self.leaves_only, self.is_leaf).__contains__(t[-1])
        if t[-1] not in node._keys_raw():
            return False
        if not self.leaves_only:
            return True
        first = node.tensordicts[0]._get_raw(t[-1], None)
        is_coll = isinstance(first, TensorDictBase)
        if self.is_leaf is None:
            return not is_coll and not isinstance(first, (NonTensorData, NonTensorStack))
        return self.is_leaf(LazyStackedTensorDict if is_coll else type(first))


def _check_stack_name(td: Any, prefix: list, sd: int, stack_name: str) -> None:
    """Raises if naming the stack dim ``stack_name`` repeats a name in ``td``'s nested TensorDicts."""
    for _, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            names = list(prefix) + value.names[len(prefix) :]
            if stack_name in names:
                full = list(names)
                full.insert(sd, stack_name)
                msg = f"dim names must be unique: naming the stack dim {stack_name!r} gives a nested TensorDict the names {full}."
                raise ValueError(msg)
            _check_stack_name(value, names, sd, stack_name)


class LazyStackedTensorDict(  # type: ignore[misc]
    LazyConsolidateMixin,
    LazyMathMixin,
    LazyShapeMixin,
    LazyIndexMixin,
    LazyDenseMixin,
    LazyOpsMixin,
    LazyWriteMixin,
    TensorDictBase,
):
    """A stack of TensorDicts along a new batch dim ``stack_dim``, stacked lazily.

    Reading a key stacks that key's values (``torch.stack`` for tensors, a lazy
    stack for nested TensorDicts, a :class:`~tensordict.NonTensorStack` for
    non-tensor data). Writing a key splits the value along ``stack_dim`` and writes
    each part into the matching stacked TensorDict. Indexing the stack dim with an
    int returns the stacked TensorDict itself.

    Args:
        *tensordicts (TensorDictBase): the TensorDicts to stack; all must share one
            ``batch_size``. Their keys and feature shapes may differ.
        stack_dim (int, optional): where the new dim goes in the batch size
            (``-1`` is after the last dim). Defaults to ``0``.

    Keyword Args:
        batch_size (torch.Size, optional): for an empty stack (no TensorDicts), the
            batch size of the TensorDicts to come (the stack's is that with ``0`` at
            ``stack_dim``; ``[]`` by default); otherwise checked against the computed
            batch size.
        device (torch.device, optional): move every TensorDict there first.
        names (list of str, optional): names of the batch dims.
        stack_dim_name (str, optional): name of the stack dim.
        strict_shape (bool, optional): raise at construction if a shared key has
            different shapes across the TensorDicts. Defaults to ``False``.

    Attributes:
        tensordicts (list of TensorDictBase): the stacked TensorDicts.
        stack_dim (int): the position of the stack dim in ``batch_size``.

    Raises:
        RuntimeError: the TensorDicts have different batch sizes (both are named).
        TypeError: an element is not a TensorDict.
        IndexError: ``stack_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from tensordict import LazyStackedTensorDict, TensorDict
        >>> tds = [TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(2)]
        >>> stacked = LazyStackedTensorDict(*tds, stack_dim=0)
        >>> stacked.batch_size
        torch.Size([2, 3])
        >>> stacked["a"] = torch.ones(2, 3)
        >>> tds[0]["a"]
        tensor([1., 1., 1.])
        >>> stacked[1] is tds[1]
        True
    """

    _fast: bool | None = None
    _bs_cache: dict | None = None
    _lock_flag: bool = False
    _stack_name: str | None = None
    _empty_device: torch.device | None = None

    def __init__(
        self,
        *tensordicts: TensorDictBase,
        stack_dim: int = 0,
        batch_size: Any = None,
        device: Any = None,
        names: Sequence[str] | None = None,
        stack_dim_name: str | None = None,
        strict_shape: bool = False,
    ) -> None:
        tds = list(tensordicts)
        if len(tds) == 1 and isinstance(tds[0], (list, tuple)):
            tds = list(tds[0])
        self._init(tds, stack_dim, batch_size, strict_shape)
        if device is not None:
            self.tensordicts = [td.to(device) for td in self.tensordicts]
            if not tds:
                self._empty_device = torch.device(device)
        if strict_shape:
            self._check_strict_shapes()
        if names is not None:
            self.names = names
        elif stack_dim_name is not None:
            new: list[str | None] = [None] * len(self._batch_size)
            new[self.stack_dim] = stack_dim_name
            self.names = new

    # ------------------------------------------------------------------ construction
    def _init(self, tds: list, stack_dim: int, batch_size: Any = None, strict: bool = False) -> None:
        n = len(tds)
        if not n:
            # an empty stack: ``batch_size`` is the batch size of the TensorDicts to come
            td_bs = _Size(() if batch_size is None else batch_size)
            nd = len(td_bs)
            if not -nd - 1 <= stack_dim <= nd:
                msg = f"stack_dim={stack_dim} is out of range for an empty stack of TensorDicts with batch_size {tuple(td_bs)} (expected -{nd + 1} <= stack_dim <= {nd})."
                raise StackDimError(msg)
            if stack_dim < 0:
                stack_dim += nd + 1
            self.tensordicts = tds
            self.stack_dim = stack_dim
            self._batch_size = _Size((*td_bs[:stack_dim], 0, *td_bs[stack_dim:]))
            return
        try:
            bs = tds[0]._batch_size
            for td in tds:
                if td._batch_size is not bs and td._batch_size != bs:  # often the same object
                    break
            else:
                bs = None
        except AttributeError:
            bs = self._check_slow(tds)
        td_bs = tds[0].batch_size if bs is None else self._mixed_batch_size(tds, strict)
        nd = len(td_bs)
        if not -nd - 1 <= stack_dim <= nd:
            msg = f"stack_dim={stack_dim} is out of range for TensorDicts with batch_size {tuple(td_bs)} (expected -{nd + 1} <= stack_dim <= {nd})."
            raise StackDimError(msg)
        if stack_dim < 0:
            stack_dim += nd + 1
        self.tensordicts = tds
        self.stack_dim = stack_dim
        # a list insert, not two torch.Size slices (each costs more than the rest of a small stack)
        dims = list(td_bs)
        dims.insert(stack_dim, n)
        self._batch_size = new_bs = _Size(dims)
        if batch_size is not None and _Size(batch_size) != new_bs:
            msg = f"batch_size={tuple(batch_size)} does not match the stack's batch size {tuple(new_bs)} (stack_dim={stack_dim})."
            raise RuntimeError(msg)

    @staticmethod
    def _check_slow(tds: list) -> Any:
        for i, td in enumerate(tds):
            if not is_tensor_collection(td) or not hasattr(td, "batch_size"):
                msg = f"LazyStackedTensorDict expects TensorDicts, got a {type(td).__name__} at position {i}."
                raise TypeError(msg)
        bs = tds[0].batch_size
        return None if all(td.batch_size == bs for td in tds) else bs

    @staticmethod
    def _mixed_batch_size(tds: list, strict: bool) -> torch.Size:
        """The batch size shared by TensorDicts whose batch sizes differ: ``-1`` where they
        differ (as upstream). Raises when the numbers of dims differ, or with ``strict``."""
        bs = tds[0].batch_size
        for i, td in enumerate(tds):
            other = td.batch_size
            if other != bs and (strict or len(other) != len(bs)):
                msg = (
                    "stacking tensordicts requires one batch size (batch sizes in tensordicts differs): "
                    f"got {tuple(bs)} (TensorDict 0) and {tuple(other)} (TensorDict {i}). "
                    + (
                        "Drop strict_shape=True to stack them with -1 in the differing dims."
                        if len(other) == len(bs)
                        else "Lazy stacks need TensorDicts with the same number of batch dims."
                    )
                )
                raise RuntimeError(msg)
        return _Size(
            s if all(td.batch_size[d] == s for td in tds) else -1 for d, s in enumerate(bs)
        )

    @classmethod
    def _from_list(
        cls, tds: Sequence[TensorDictBase], stack_dim: int = 0, batch_size: Any = None
    ) -> LazyStackedTensorDict:
        """Checked constructor from a list (no ``*args`` packing)."""
        obj = cls.__new__(cls)
        obj._init(list(tds), stack_dim, batch_size)
        return obj

    @classmethod
    def from_dict(  # type: ignore[override]
        cls,
        input_dict: Any,
        *other: Any,
        auto_batch_size: bool = False,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        stack_dim_name: str | None = None,
        stack_dim: int = 0,
        names: Sequence[str] | None = None,
    ) -> LazyStackedTensorDict:
        """A lazy stack of ``TensorDict.from_dict(d)`` for each dict ``d`` (keys and shapes
        may differ); a dict keyed ``"0"``, ``"1"``, ... is read as that list.

        Args:
            input_dict (list of dict, or dict of dict): one dict per stacked TensorDict.
            *other: not supported (a ``TypeError``, as tensordict 0.15.3): pass
                ``batch_size``, ``device`` and ``batch_dims`` by keyword.

        Keyword Args:
            auto_batch_size (bool): each TensorDict's batch size is computed.
            batch_size (torch.Size, optional): each stacked TensorDict's batch size.
            device (torch.device, optional): each TensorDict's device.
            batch_dims (int, optional): with ``auto_batch_size``, the most batch dims.
            stack_dim_name (str, optional): the name of the stack dim.
            stack_dim (int): the stack dim. Defaults to ``0``.
            names (list of str, optional): the names of every dim of the result (stack
                dim included); exclusive with ``stack_dim_name``.

        Raises:
            ValueError: ``names`` and ``stack_dim_name`` are both given.

        Examples:
            >>> import torch
            >>> s = LazyStackedTensorDict.from_dict([{"a": torch.zeros(3)}, {"a": torch.zeros(4)}], stack_dim_name="t")
            >>> s.batch_size, s.names
            (torch.Size([2]), ['t'])
        """
        if names is not None and stack_dim_name is not None:
            msg = "names and stack_dim_name are exclusive."
            raise ValueError(msg)
        if isinstance(input_dict, Mapping):
            input_dict = [input_dict[str(i)] for i in range(len(input_dict))]
        member_names = None
        if names is not None:
            names = list(names)
            stack_dim_name = names[stack_dim]
            rest = names[:stack_dim] + names[stack_dim + 1 :]
            if batch_size is not None and len(rest) == len(batch_size):
                member_names = rest
        if other:
            # the keywords below fill TensorDict.from_dict's positional slots
            msg = (
                f"LazyStackedTensorDict.from_dict takes one positional argument (input_dict), got "
                f"{1 + len(other)}: pass batch_size, device and batch_dims by keyword."
            )
            raise TypeError(msg)
        tds = [
            _classes.TensorDict.from_dict(
                d, batch_size=batch_size, device=device, batch_dims=batch_dims,
                auto_batch_size=auto_batch_size or None, names=member_names,
            )
            for d in input_dict
        ]
        out = cls._from_list(tds, stack_dim)
        if stack_dim_name is not None:
            dim_names: list[str | None] = [None] * out.batch_dims
            if member_names is not None:
                dim_names = [*member_names[:stack_dim], None, *member_names[stack_dim:]]
            dim_names[stack_dim] = stack_dim_name
            out.names = dim_names
        return out

    @classmethod
    def _new_unsafe(
        cls, tds: list, stack_dim: int, batch_size: torch.Size | None = None
    ) -> LazyStackedTensorDict:
        """Builds without checks: the caller guarantees ``tds`` share one batch size."""
        obj = cls.__new__(cls)
        obj.tensordicts = tds
        obj.stack_dim = stack_dim
        if batch_size is None:
            td_bs = tds[0].batch_size
            batch_size = _Size((*td_bs[:stack_dim], len(tds), *td_bs[stack_dim:]))
        obj._batch_size = batch_size
        return obj

    def _new_lazy(
        self, tds: list, stack_dim: int | None = None, batch_size: torch.Size | None = None
    ) -> LazyStackedTensorDict:
        obj = _new_object(LazyStackedTensorDict)
        obj.tensordicts = tds
        if self._stack_name is not None:
            obj._stack_name = self._stack_name
        obj.stack_dim = stack_dim = self.stack_dim if stack_dim is None else stack_dim
        if batch_size is None:
            td_bs = tds[0].batch_size
            batch_size = _Size((*td_bs[:stack_dim], len(tds), *td_bs[stack_dim:]))
        obj._batch_size = batch_size
        return obj

    def _resized(self, m: int) -> torch.Size:
        """``batch_size`` with the stack dim set to ``m`` (memoised: indexing the same
        stack with the same number of positions is common)."""
        cache = self._bs_cache
        if cache is None:
            cache = self._bs_cache = {}
        out = cache.get(m)
        if out is None:
            bs = list(self._batch_size)
            bs[self.stack_dim] = m
            out = cache[m] = _Size(bs)
        return out

    def _new_like(
        self,
        source: dict,
        batch_size: Any = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
    ) -> TensorDict:
        """A dense ``TensorDict`` (results of generic ops on a lazy stack are dense)."""
        if batch_size is None:
            batch_size = self._batch_size
            if names is NO_DEFAULT:
                names = self._names
        elif names is NO_DEFAULT:
            names = None
        if names is not None and len(names) != len(batch_size):
            names = None
        return TensorDict._new_unsafe(
            source, _Size(batch_size), self.device if device is NO_DEFAULT else device, names
        )

    def _check_strict_shapes(self) -> None:
        for key in self.keys(include_nested=True, leaves_only=True):
            shape = self._shape_of(key)
            if -1 in shape:
                msg = f"strict_shape=True: key {key!r} has different shapes across the stacked TensorDicts (stacked shape {list(shape)})."
                raise RuntimeError(msg)

    # ------------------------------------------------------------------ metadata
    @property
    def _has_exclusive_keys(self) -> bool:
        """Whether the stacked TensorDicts differ in their leaf keys (nested ones included).

        Upstream's private property; TorchRL's batched envs and ``BatchedActor`` read it.
        """
        first = None
        for td in self.tensordicts:
            keys = set(td.keys(True, True))
            if first is None:
                first = keys
            elif keys != first:
                return True
        return False

    @property
    def batch_size(self) -> torch.Size:
        """``batch_size`` of the stacked TensorDicts with ``len(tensordicts)`` inserted at ``stack_dim``.

        Setting it sets the stacked TensorDicts' batch size (the stack dim itself
        cannot change).

        Raises:
            RuntimeError: (setter) the new size changes the stack dim or a leaf does not fit.
        """
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new_size: Any) -> None:
        new_size = _Size(new_size)
        if new_size == self._batch_size:
            return
        if self.is_locked:
            raise locked_error("change the batch_size")
        sd, n = self.stack_dim, len(self.tensordicts)
        if len(new_size) <= sd or new_size[sd] != n:
            msg = (
                f"cannot set batch_size={tuple(new_size)} on a lazy stack of {n} TensorDicts "
                f"along stack_dim={sd}: the stack dim must keep size {n}. Densify first with `contiguous()`."
            )
            raise RuntimeError(msg)
        td_bs = _Size((*new_size[:sd], *new_size[sd + 1 :]))
        for td in self.tensordicts:
            td.batch_size = td_bs
        self._batch_size = new_size
        self._bs_cache = None

    @property
    def device(self) -> torch.device | None:
        """The device shared by every stacked TensorDict, or ``None``."""
        tds = self.tensordicts
        if not tds:
            return self._empty_device
        device = tds[0].device
        for td in tds:
            if td.device != device:
                return None
        return device

    @device.setter
    def device(self, value: Any) -> None:
        msg = "device cannot be set directly; use `td = td.to(device)` or `td.clear_device_()`."
        raise RuntimeError(msg)

    def _set_device_tree(self, device: Any) -> None:
        for td in self.tensordicts:
            td._set_device_tree(device)

    def clear_device_(self) -> LazyStackedTensorDict:
        """Sets ``device`` to ``None`` in every stacked TensorDict (leaves stay put)."""
        for td in self.tensordicts:
            td.clear_device_()
        return self

    def _has_names(self) -> bool:
        if self._stack_name is not None:
            return True
        tds = self.tensordicts
        return bool(tds) and tds[0]._has_names()

    @property
    def names(self) -> list:
        """Names of the batch dims (``None`` for unnamed dims).

        The stack dim's name is the stack's own; the other names are the stacked
        TensorDicts' names (setting ``names`` renames them).

        Raises:
            ValueError: (setter) wrong length or repeated names, also once the stack
                dim's name is added to the names of nested TensorDicts.
        """
        tds = self.tensordicts
        inner = tds[0].names if tds else [None] * (len(self._batch_size) - 1)
        inner.insert(self.stack_dim, self._stack_name)
        return inner

    @names.setter
    def names(self, value: Any) -> None:
        new = None if value is None else check_names(value, self._batch_size)
        sd = self.stack_dim
        if new is None:
            for td in self.tensordicts:
                if td._has_names():
                    td.names = None
            self._stack_name = None
            return
        stack_name = new[sd]
        inner = new[:sd] + new[sd + 1 :]
        if stack_name is not None and self.tensordicts:
            _check_stack_name(self.tensordicts[0], inner, sd, stack_name)
        for td in self.tensordicts:
            td.names = inner
        self._stack_name = stack_name

    @property
    def _names(self) -> list | None:
        return self.names if self._has_names() else None

    @_names.setter
    def _names(self, value: Any) -> None:
        self.names = value

    # ------------------------------------------------------------------ locking
    @property
    def _is_locked(self) -> bool:
        tds = self.tensordicts
        if not tds:
            return self._lock_flag
        return all(td.is_locked for td in tds)

    @_is_locked.setter
    def _is_locked(self, value: bool) -> None:
        self._lock_flag = bool(value)

    def _set_lock_flag(self, value: bool) -> None:
        self._lock_flag = value
        for td in self.tensordicts:
            td._set_lock_flag(value)

    # ------------------------------------------------------------------ storage primitives
    def _keys_raw(self) -> Any:
        """Keys every stacked TensorDict holds, in the first TensorDict's order."""
        tds = self.tensordicts
        if not tds:
            return {}.keys()
        first = tds[0]._keys_raw()
        for td in tds:
            if td._keys_raw() != first:
                break
        else:
            return first
        others = [set(td._keys_raw()) for td in tds[1:]]
        return dict.fromkeys(k for k in first if all(k in s for s in others)).keys()

    def _items_raw(self) -> list:
        get = self._get_raw
        return [(key, get(key)) for key in self._keys_raw()]

    def _leaf_values(self, key: str, missing: Any = _RAISE) -> Any:
        """The raw value of ``key`` in every stacked TensorDict (a list).

        When some TensorDicts lack ``key``, returns ``missing`` if given, and raises
        the KeyError naming their indices otherwise.
        """
        tds = self.tensordicts
        fast = self._fast
        if fast is None:
            fast = self._fast = all(td.__class__ is TensorDict for td in tds)
        if fast:
            try:
                return [td._tensordict[key] for td in tds]
            except KeyError:
                pass
            except AttributeError:  # ``tensordicts`` was changed after the first read
                self._fast = False
        values = [td._get_raw(key, _MISSING) for td in tds]
        absent = [i for i, v in enumerate(values) if v is _MISSING]
        if absent or not tds:
            if missing is not _RAISE:
                return missing
            raise self._missing_error(key, absent)
        return values

    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:
        """The stacked value of ``key``, or ``default`` if some stacked TensorDict lacks it."""
        values = self._leaf_values(key, None)
        if values is None:
            return default
        return self._stack_values(key, values)

    def _stack_values(self, key: Any, values: list) -> Any:
        first = values[0]
        sd = self.stack_dim
        if first.__class__ is UnbatchedTensor:  # kept whole, as a dense stack does
            return _one_unbatched(key, values)._rebatch(self.batch_size)
        if isinstance(first, _Tensor):
            try:
                return torch.stack(values, sd)
            except Exception as err:  # noqa: BLE001 - re-raised with a diagnosis
                raise self._stack_error(key, values, err) from None
        if isinstance(first, TensorDictBase):
            for i, v in enumerate(values):
                if not isinstance(v, TensorDictBase):
                    raise self._type_error(key, first, v, i)
            try:
                out = LazyStackedTensorDict._from_list(values, sd)
                if self._stack_name is not None:
                    out._stack_name = self._stack_name
                return out
            except RuntimeError as err:
                msg = f"cannot lazily stack the nested TensorDicts under key {key!r}: {err}"
                raise RuntimeError(msg) from None
        if isinstance(first, (NonTensorData, NonTensorStack)):
            for i, v in enumerate(values):
                if not isinstance(v, (NonTensorData, NonTensorStack)):
                    raise self._type_error(key, first, v, i)
            return _stack_non_tensor(values, sd)
        return torch.stack(values, sd)

    def _type_error(self, key: Any, first: Any, value: Any, i: int) -> RuntimeError:
        msg = (
            f"key {key!r} holds a {type(first).__name__} in TensorDict 0 of the lazy stack but a "
            f"{type(value).__name__} in TensorDict {i}; values of one key must have one kind to be stacked."
        )
        return RuntimeError(msg)

    def _stack_error(self, key: Any, values: list, err: Exception) -> Exception:
        for i, v in enumerate(values):
            if not isinstance(v, _Tensor):
                return self._type_error(key, values[0], v, i)
        shapes = [tuple(v.shape) for v in values]
        if len(set(shapes)) > 1:
            shown = sorted(set(shapes))[:5]
            msg = (
                f"Failed to stack tensors within a tensordict: cannot stack key {key!r} of the lazy stack: "
                "the stacked TensorDicts hold different "
                f"shapes {shown} (stacked shape {list(self._combine_shapes(shapes))}, -1 marks the dims "
                f"that differ). Read it with `get({key!r}, as_list=True)`, `get({key!r}, as_nested_tensor=True)` "
                f"or `get({key!r}, as_padded_tensor=True)`, or convert the whole stack with "
                "`densify(layout=torch.jagged)`."
            )
            return RuntimeError(msg)
        return err

    def _combine_shapes(self, shapes: Sequence[Sequence[int]]) -> torch.Size:
        """The stacked shape of leaves with ``shapes``: differing dims are ``-1``."""
        ndims = {len(s) for s in shapes}
        if len(ndims) != 1:
            msg = f"the stacked leaves have different numbers of dims: {sorted({tuple(s) for s in shapes})}."
            raise RuntimeError(msg)
        out = [s if all(t[i] == s for t in shapes) else -1 for i, s in enumerate(shapes[0])]
        out.insert(self.stack_dim, len(shapes))
        return _Size(out)

    def _shape_of(self, key: NestedKey) -> torch.Size:
        """Stacked shape of the leaf (or batch size of the nested TensorDict) under ``key``,
        without stacking: dims that differ across the stacked TensorDicts are ``-1``.

        Raises:
            KeyError: ``key`` is missing from some stacked TensorDicts (their indices are named).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict({"a": torch.zeros(3)}), TensorDict({"a": torch.zeros(4)})])
            >>> s._shape_of("a")
            torch.Size([2, -1])
        """
        key = _as_tuple(key)
        node: Any = self
        for sub in key[:-1]:
            node = node._get_any_raw(sub)
            if not isinstance(node, LazyStackedTensorDict):
                if isinstance(node, TensorDictBase):
                    return node._get_any_raw(key[-1]).shape
                raise missing_key_error(key, self.keys(True))
        shapes = []
        for value in node._leaf_values(key[-1]):
            if value.__class__ is UnbatchedTensor:
                return value.shape  # kept whole: not stacked
            if isinstance(value, LazyStackedTensorDict):
                shapes.append(value.batch_size)
            elif isinstance(value, TensorDictBase) or is_tensor_collection(value):
                shapes.append(value.batch_size)
            elif isinstance(value, _Tensor):
                shapes.append(value.shape)
            else:
                shapes.append(_Size(getattr(value, "batch_size", ())))
        return node._combine_shapes(shapes)

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry under ``key`` (a nested TensorDict's batch size) without
        stacking: dims that differ across the stacked TensorDicts are ``-1``, and entries
        with different numbers of dims give ``torch.Size([-1])``, as in tensordict 0.15.

        Raises:
            KeyError: ``key`` is missing.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict({"a": torch.zeros(3)}), TensorDict({"a": torch.zeros(4)})])
            >>> s.get_item_shape("a")
            torch.Size([2, -1])
        """
        key = _as_tuple(key)
        if len(key) > 1:
            node = self._get_any_raw(key[:-1])
            if not isinstance(node, TensorDictBase):
                raise missing_key_error(key, self.keys(True))
            return node.get_item_shape(key[-1])
        shapes = []
        for td in self.tensordicts:
            if isinstance(td, LazyStackedTensorDict):
                shapes.append(td.get_item_shape(key))
                continue
            value = td._get_any_raw(key[0])
            if value.__class__ is UnbatchedTensor:
                return value.shape  # kept whole: not stacked
            shapes.append(value.shape if isinstance(value, _Tensor) else _Size(getattr(value, "batch_size", ())))
        if len({len(shape) for shape in shapes}) > 1:
            return _Size([-1])
        return self._combine_shapes(shapes)

    def _missing_error(self, key: Any, missing: Sequence[int]) -> KeyError:
        n = len(self.tensordicts)
        if len(missing) == n:
            return missing_key_error(key, self._keys_raw())
        msg = (
            f"key {key!r} is missing from TensorDict(s) {_format_indices(missing)} of the lazy stack "
            f"({n} TensorDicts along stack_dim={self.stack_dim}); only {n - len(missing)} of them hold it. "
            "Read it from the TensorDicts that have it (`stacked.tensordicts[i]`), or set it in every "
            "stacked TensorDict first."
        )
        return KeyError(msg)

    def _check_present(self, key: NestedKey) -> tuple:
        """Raises the KeyError naming the stacked TensorDicts that lack ``key``."""
        t = _as_tuple(key)
        missing = [i for i, td in enumerate(self.tensordicts) if not _td_has(td, t)]
        if missing or not self.tensordicts:
            raise self._missing_error(unravel_key(key), missing)
        return t

    # ------------------------------------------------------------------ get
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Any = None,
        *,
        sort: bool = False,
    ) -> Any:
        """Keys held by every stacked TensorDict (see :meth:`TensorDictBase.keys`).

        Keys only some TensorDicts hold are left out (they show under
        ``exclusive_fields`` in the repr). Listing keys never stacks a leaf.
        """
        view = _LazyKeysView(self, include_nested, leaves_only, is_leaf)
        if sort:
            return sorted(view, key=lambda k: k if isinstance(k, str) else ".".join(k))
        return view

    def __contains__(self, item: object) -> bool:
        """A key (as for any TensorDict), or a TensorDict: ``True`` if it is one of the
        stacked TensorDicts (identity, not equality)."""
        if isinstance(item, TensorDictBase):
            return any(item is td for td in self.tensordicts)
        return TensorDictBase.__contains__(self, item)

    def __getitem__(self, index: Any) -> Any:
        cls = index.__class__
        if cls is str:
            out = self._stack_values(index, self._leaf_values(index))
            if out.__class__ is _Tensor:
                return out
            return self._unwrap_leaf(out)
        if (
            cls is tuple
            and index
            and all(i.__class__ is str or i.__class__ is tuple for i in index)
        ):
            return self._unwrap_leaf(self._get_any_raw(index))
        return self._index(index)

    def get(
        self,
        key: NestedKey,
        default: Any = NO_DEFAULT,
        *,
        as_list: bool = False,
        as_nested_tensor: bool = False,
        as_padded_tensor: bool = False,
        layout: Any = None,
        padding_value: float = 0.0,
        padding_side: str = "right",
        **kwargs: Any,
    ) -> Any:
        """Stacks and returns the value under ``key``.

        Args:
            key (NestedKey): a str or nested tuple key.
            default (Any, optional): returned when ``key`` is missing from every
                stacked TensorDict, or from some of them.

        Keyword Args:
            as_list (bool): return the list of per-TensorDict values instead.
            as_nested_tensor (bool): return a ``torch.nested`` tensor along the stack
                dim (leaves of different shapes; ``stack_dim`` must be 0).
            as_padded_tensor (bool): pad every value to the largest shape with
                ``padding_value`` (on ``padding_side``, ``"right"`` or ``"left"``) and stack.
            layout (torch.layout, optional): nested tensor layout (``torch.strided``
                by default, or ``torch.jagged``).

        Returns:
            a tensor of shape ``batch_size + feature_shape``, a lazy stack of the
            nested TensorDicts, or the non-tensor object(s).

        Raises:
            KeyError: ``key`` is missing and no default is given; when only some
                stacked TensorDicts lack it the message names their indices.
            RuntimeError: the values have different shapes (see the keyword
                arguments to read them anyway).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.ones(3)})])
            >>> s.get("a", as_padded_tensor=True)
            tensor([[0., 0., 0.],
                    [1., 1., 1.]])
            >>> [t.shape for t in s.get("a", as_list=True)]
            [torch.Size([2]), torch.Size([3])]
        """
        if as_list or as_nested_tensor or as_padded_tensor:
            return self._get_special(
                key,
                default,
                as_list,
                as_nested_tensor,
                as_padded_tensor,
                layout,
                padding_value,
                padding_side,
            )
        if default is NO_DEFAULT and _GET_DEFAULTS_TO_NONE[0]:
            default = None
        return self._get_any_raw(key, default)

    def _get_any_raw(self, key: NestedKey, default: Any = _MISSING) -> Any:
        if key.__class__ is not str:
            key = unravel_key(key)
        if key.__class__ is str:
            out = self._get_raw(key, _MISSING)
        else:
            node: Any = self
            last = len(key) - 1
            for i, sub in enumerate(key):
                node = node._get_raw(sub, _MISSING)
                if node is _MISSING or (i != last and not isinstance(node, TensorDictBase)):
                    node = _MISSING
                    break
            out = node
        if out is _MISSING:
            if default is not _MISSING:
                return default
            self._check_present(key)
            raise missing_key_error(key, self.keys(True))
        return out

    def _per_td_values(self, key: NestedKey) -> list:
        t = self._check_present(key)
        k = t[0] if len(t) == 1 else t
        return [td._get_any_raw(k) for td in self.tensordicts]

    # ------------------------------------------------------------------ growing the stack
    def insert(self, index: int, tensordict: TensorDictBase) -> None:
        """Inserts ``tensordict`` at position ``index`` along the stack dim (in place).

        Args:
            index (int): where it goes, as in ``list.insert``.
            tensordict (TensorDictBase): its batch size must be the stack's without
                the stack dim; with the stack on a device, it must be on that device.

        Raises:
            TypeError: ``tensordict`` is not a TensorDict.
            ValueError: devices or batch sizes differ ("Devices differ", "Batch sizes
                in tensordicts differs").
            RuntimeError: the stack is locked.

        Examples:
            >>> import torch
            >>> from tensordict import LazyStackedTensorDict, TensorDict
            >>> s = LazyStackedTensorDict(stack_dim=0, batch_size=[2])
            >>> s.insert(0, TensorDict(a=torch.zeros(2), batch_size=[2]))
            >>> s.append(TensorDict(a=torch.ones(2), batch_size=[2]))
            >>> s.batch_size, s["a"][:, 0]
            (torch.Size([2, 2]), tensor([0., 1.]))
        """
        if not isinstance(tensordict, TensorDictBase) and not is_tensor_collection(tensordict):
            msg = f"Expected new value to be TensorDictBase instance but got {type(tensordict).__name__} instead."
            raise TypeError(msg)
        if self.is_locked and self.tensordicts:
            raise locked_error("insert a TensorDict into the lazy stack")
        device = self.device
        if device is not None and tensordict.device != device:
            msg = f"Devices differ: the stack is on {device}, the new TensorDict on {tensordict.device}."
            raise ValueError(msg)
        sd = self.stack_dim
        bs = self._batch_size
        td_bs = _Size((*bs[:sd], *bs[sd + 1 :]))
        if tensordict.batch_size != td_bs:
            msg = (
                f"Batch sizes in tensordicts differs: the stacked TensorDicts have batch_size "
                f"{tuple(td_bs)}, the new one {tuple(tensordict.batch_size)}."
            )
            raise ValueError(msg)
        tds = list(self.tensordicts)  # the list may be the caller's (``lazy_stack(list)``)
        tds.insert(index, tensordict)
        self.tensordicts = tds
        self._batch_size = _Size((*td_bs[:sd], len(self.tensordicts), *td_bs[sd:]))
        self._fast = None
        self._bs_cache = None

    def append(self, tensordict: TensorDictBase) -> None:
        """Appends ``tensordict`` at the end of the stack dim (see :meth:`insert`)."""
        self.insert(len(self.tensordicts), tensordict)

    def extend(self, tensordicts: Sequence[TensorDictBase]) -> None:
        """Appends each TensorDict of ``tensordicts`` (see :meth:`insert`)."""
        for td in tensordicts:
            self.append(td)

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_lock_stack", None)
        state.pop("_fast", None)
        state.pop("_bs_cache", None)
        state.pop("_lock_parents", None)
        state.pop("_shape_source", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


_classes._bind(LazyStackedTensorDict=LazyStackedTensorDict)
