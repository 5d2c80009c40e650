"""Entry-level helpers of the tensordict API: building, combining and describing entries.

``create_nested``, ``cat_tensors``/``stack_tensors``, ``separates``, ``replace``,
``get_item_shape``, ``from_schema``; the descriptive ``dtype``, ``bytes``,
``param_count``; and the ``_check_batch_size`` / ``_has_non_tensor`` helpers that code
written against tensordict calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._host import TensorDictHost
from tensordict._keys import NO_DEFAULT, NestedKey, unravel_key
from tensordict._nested_shape import leaf_shape
from tensordict._stack import cat as _cat
from tensordict._stack import stack as _stack

if TYPE_CHECKING:
    from typing_extensions import Self

    from tensordict._base import TensorDictBase

__all__ = ["EntriesMixin"]

_STORAGES = ("memory", "memmap", "h5", "zarr", "shared")


def _leaf_parts(t: torch.Tensor) -> list[torch.Tensor]:
    """The dense tensors holding ``t``'s data (a jagged tensor: values, offsets, lengths)."""
    if t.is_nested and t.layout is torch.jagged:
        parts = [t._values, t._offsets]  # type: ignore[attr-defined]
        if t._lengths is not None:  # type: ignore[attr-defined]
            parts.append(t._lengths)  # type: ignore[attr-defined]
        return parts
    return [t]


def _count(td: Any, measure: Any, count_duplicates: bool, with_grad: bool) -> int:
    seen: set = set()
    total = 0
    for _, leaf in td.items(include_nested=True, leaves_only=True):
        if not isinstance(leaf, torch.Tensor):
            continue
        tensors = _leaf_parts(leaf)
        if with_grad and leaf.grad is not None:
            tensors = tensors + _leaf_parts(leaf.grad)
        for t in tensors:
            if not count_duplicates:
                ident = (t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))
                if ident in seen:
                    continue
                seen.add(ident)
            total += measure(t)
    return total


def _schema_tree(schema: Mapping, batch_size: torch.Size, device: Any) -> dict:
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        if isinstance(spec, Mapping):
            out[key] = _classes.TensorDict._new_unsafe(_schema_tree(spec, batch_size, device), batch_size, device)
            continue
        try:
            shape, dtype = spec
        except (TypeError, ValueError):
            msg = f"from_schema: entry {key!r} must be a (shape, dtype) pair or a nested dict, got {spec!r}."
            raise TypeError(msg) from None
        out[key] = torch.zeros((*batch_size, *shape), dtype=dtype, device=device)
    return out


class EntriesMixin(TensorDictHost):
    """Mixed into TensorDictBase: entry-level helpers (see the module docstring)."""

    # ------------------------------------------------------------------ building
    def create_nested(self, key: NestedKey) -> Self:
        """Creates an empty nested TensorDict under ``key`` (with this batch size and
        device), creating the missing levels.

        Returns:
            ``self``.

        Raises:
            RuntimeError: the TensorDict is locked.
            KeyError: a level of ``key`` holds a leaf.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({}, [3])
            >>> td.create_nested(("a", "b"))["a", "b"].batch_size
            torch.Size([3])
        """
        key = unravel_key(key)
        node = self
        for sub in (key,) if isinstance(key, str) else key:
            node = node._create_nested(sub)  # type: ignore[arg-type, assignment]
        return self

    def _combine_tensors(self, op: Any, name: str, keys: tuple, out_key: NestedKey, dim: int, keep_entries: bool) -> Any:
        if len(keys) == 1 and isinstance(keys[0], (list, tuple)) and not all(isinstance(k, str) for k in keys[0]):
            keys = tuple(keys[0])
        values = [self._get_any_raw(key) for key in keys]
        for key, value in zip(keys, values):
            if not isinstance(value, torch.Tensor):
                msg = f"{name}: entry {key!r} is a {type(value).__name__}, not a tensor."
                raise TypeError(msg)
        result = op(values, dim)
        if not keep_entries:
            for key in keys:
                self.del_(key)
        self.set(out_key, result)
        return self

    def cat_tensors(self, *keys: NestedKey, out_key: NestedKey, dim: int = 0, keep_entries: bool = False) -> TensorDictBase:
        """Concatenates the tensors under ``keys`` along ``dim`` into ``out_key``.

        Args:
            *keys (NestedKey): the entries to concatenate.

        Keyword Args:
            out_key (NestedKey): where the result is written.
            dim (int): the tensor dim to concatenate along (a feature dim, usually
                negative). Defaults to ``0``.
            keep_entries (bool): keep the source entries. Defaults to ``False``.

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 1), "b": torch.ones(3, 2)}, [3])
            >>> td.cat_tensors("a", "b", out_key="c", dim=-1)["c"].shape
            torch.Size([3, 3])
            >>> "a" in td.keys()
            False
        """
        return self._combine_tensors(lambda v, d: torch.cat(v, d), "cat_tensors", keys, out_key, dim, keep_entries)

    def stack_tensors(self, *keys: NestedKey, out_key: NestedKey, dim: int = 0, keep_entries: bool = False) -> TensorDictBase:
        """Stacks the tensors under ``keys`` along a new ``dim`` into ``out_key``.

        Keyword args as :meth:`cat_tensors`.

        Args:
            *keys (NestedKey): the entries to stack, all tensors of one shape.
            out_key (NestedKey): where the stacked tensor is written (keyword only).
            dim (int, optional): the new dim of the result, counted in the leaves' dims.
                Defaults to ``0``.
            keep_entries (bool, optional): keep the stacked entries (they are deleted by
                default).

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": torch.ones(3)}, [3])
            >>> td.stack_tensors("a", "b", out_key="c", dim=-1, keep_entries=True)["c"].shape
            torch.Size([3, 2])
        """
        return self._combine_tensors(lambda v, d: torch.stack(v, d), "stack_tensors", keys, out_key, dim, keep_entries)

    def separates(
        self,
        *keys: NestedKey,
        default: Any = NO_DEFAULT,
        strict: bool = True,
        filter_empty: bool = True,
    ) -> TensorDictBase:
        """Moves the entries under ``keys`` out of ``self`` into a new TensorDict.

        Args:
            *keys (NestedKey): the entries to move.

        Keyword Args:
            default (Any, optional): the value given for a missing key (without it a
                missing key raises ``KeyError`` and nothing is moved).
            strict (bool): ``False`` skips missing keys. Defaults to ``True``.
            filter_empty (bool): drop the nested TensorDicts of ``self`` left empty.

        Returns:
            a TensorDict with the batch size of ``self`` holding the moved entries.

        Raises:
            KeyError: a key is missing, ``strict=True`` and no ``default`` is given.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2)}}, [2])
            >>> out = td.separates("a", ("b", "c"))
            >>> sorted(out.keys(True, True), key=str), list(td.keys())
            ([('b', 'c'), 'a'], [])
        """
        keys = [unravel_key(k) for k in keys]  # type: ignore[assignment]
        if default is NO_DEFAULT and strict:
            for key in keys:
                if self._get_any_raw(key, None) is None:
                    msg = f"separates: key {key!r} not found in {sorted(map(str, self.keys(True)))}."
                    raise KeyError(msg)
        out = self.empty()
        for key in keys:
            value = self._get_any_raw(key, None)
            if value is None:
                if default is NO_DEFAULT:
                    continue
                out.set(key, default)
                continue
            out.set(key, value)
            self.del_(key)
            if filter_empty and isinstance(key, tuple):
                for depth in range(len(key) - 1, 0, -1):
                    parent = self._get_any_raw(key[:depth], None)
                    if isinstance(parent, _classes.TensorDictBase) and parent.is_empty():
                        self.del_(key[:depth] if depth > 1 else key[0])
                    else:
                        break
        return out

    def replace(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        """A shallow copy of ``self`` with some entries replaced (``self`` is unchanged).

        Args:
            *args (dict or TensorDictBase): the new entries.
            **kwargs: more new entries (``key=value``).

        Returns:
            a new TensorDict of the same structure.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2)}, [2])
            >>> out = td.replace(a=torch.ones(2))
            >>> out["a"].sum().item(), td["a"].sum().item(), out["b"] is td["b"]
            (2.0, 0.0, True)
        """
        out = self.copy()
        for arg in args:
            out.update(arg)
        if kwargs:
            out.update(kwargs)
        return out

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry under ``key`` (a nested TensorDict's batch size),
        without stacking lazy entries where the container can avoid it.

        Raises:
            KeyError: ``key`` is missing.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(3, 4)}, [3]).get_item_shape("a")
            torch.Size([3, 4])
        """
        value = self._get_any_raw(key)
        if isinstance(value, torch.Tensor):
            return leaf_shape(value)
        return value.batch_size

    @classmethod
    def from_schema(
        cls,
        schema: Mapping,
        *,
        batch_size: Sequence[int] | torch.Size = (),
        device: Any = None,
        storage: str | None = None,
        prefix: str | None = None,
        filename: str | None = None,
    ) -> TensorDictBase:
        """A zero-filled TensorDict laid out by ``schema``.

        Args:
            schema (dict): ``key -> (feature_shape, dtype)``, or a nested dict.

        Keyword Args:
            batch_size (sequence of int): the batch size. Defaults to ``()``.
            device (torch.device, optional): where the tensors live.
            storage (str, optional): ``"memory"`` (default), ``"shared"`` (shared
                memory), ``"memmap"`` (files under ``prefix``, needs td-memmap) or
                ``"h5"`` (an HDF5 ``filename``, needs td-h5) or ``"zarr"`` (a Zarr store
                at ``filename``, needs td-h5 and zarr>=3).

        Returns:
            a TensorDict, memory-mapped TensorDict or PersistentTensorDict.

        Raises:
            ValueError: an unknown ``storage``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict.from_schema({"obs": ([4], torch.float32)}, batch_size=[2])
            >>> td["obs"].shape
            torch.Size([2, 4])
        """
        storage = storage or "memory"
        if storage not in _STORAGES:
            msg = f"Unknown storage backend {storage!r}; expected one of {_STORAGES}."
            raise ValueError(msg)
        bs = torch.Size(batch_size)
        dev = torch.device(device) if device is not None else None
        td = _classes.TensorDict._new_unsafe(_schema_tree(schema, bs, dev), bs, dev)
        if storage == "shared":
            return td.share_memory_()
        if storage == "memmap":
            return td.memmap_(prefix)
        if storage == "h5":
            from tensordict.persistent import PersistentTensorDict  # sibling, loaded on use

            return PersistentTensorDict.from_dict(td, filename=filename)
        if storage == "zarr":
            from tensordict.persistent import PersistentTensorDict  # sibling, loaded on use

            return PersistentTensorDict.from_dict(td, filename=filename, backend="zarr")
        return td

    def _leaves_sorted(self, sorted_keys: Any) -> list:
        items = [(k, v) for k, v in self.items(include_nested=True, leaves_only=True) if isinstance(v, torch.Tensor)]
        if sorted_keys is True:
            items.sort(key=lambda kv: kv[0] if isinstance(kv[0], str) else ".".join(kv[0]))
        elif sorted_keys:
            order = {unravel_key(k): i for i, k in enumerate(sorted_keys)}
            items = sorted((kv for kv in items if kv[0] in order), key=lambda kv: order[kv[0]])
        if not items:
            msg = "the TensorDict has no tensor leaf to combine."
            raise RuntimeError(msg)
        return [v for _, v in items]

    def stack_from_tensordict(self, dim: int = 0, *, sorted: Any = None, out: Any = None) -> torch.Tensor:  # noqa: A002
        """Stacks every tensor leaf into one tensor along a new ``dim``.

        Args:
            dim (int): where the new dim goes. Defaults to ``0``.

        Keyword Args:
            sorted (bool or list of NestedKey, optional): ``True`` orders the leaves
                by key; a list of keys gives the order (and selection). By default the
                order of ``keys(True, True)``.
            out (Tensor, optional): where to write the result.

        Returns:
            a tensor of shape ``leaf_shape`` with a dim of size ``num_leaves`` at ``dim``.

        Raises:
            RuntimeError: the leaves have different shapes, or there is none.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, 4)}}, [3, 4])
            >>> td.stack_from_tensordict(dim=1).shape
            torch.Size([3, 2, 4])
        """
        return torch.stack(self._leaves_sorted(sorted), dim, out=out)

    def cat_from_tensordict(self, dim: int = 0, *, sorted: Any = None, out: Any = None) -> torch.Tensor:  # noqa: A002
        """Concatenates every tensor leaf into one tensor along ``dim`` (key order as in
        :meth:`stack_from_tensordict`).

        Args:
            dim (int, optional): the dim (of the leaves, batch dims included) to concatenate
                along. Defaults to ``0``.
            sorted (bool or list of NestedKey, optional): ``True`` orders the leaves by key
                (nested keys joined with ``"."``); a list of keys takes those leaves in that
                order (keyword only). Defaults to insertion order.
            out (torch.Tensor, optional): written in place with the result (keyword only).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, 4)}}, [3, 4])
            >>> td.cat_from_tensordict(dim=1).shape
            torch.Size([3, 8])
        """
        return torch.cat(self._leaves_sorted(sorted), dim, out=out)

    def copy_at_(self, tensordict: Any, idx: Any, *, non_blocking: bool = False, fast: Any = None) -> TensorDictBase:
        """Copies ``tensordict`` into ``self[idx]`` in place (same as :meth:`update_at_`).

        Args:
            tensordict (TensorDictBase or dict): the values, with the batch size of
                ``self[idx]`` (or one that broadcasts to it).
            idx: any index ``self[idx]`` accepts.

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(4)}, [4])
            >>> td.copy_at_(TensorDict({"a": torch.ones(2)}, [2]), slice(1, 3))["a"]
            tensor([0., 1., 1., 0.])
        """
        return self.update_at_(tensordict, idx)

    def __getitems__(self, indices: Any) -> Any:
        """``self[indices]`` for a list of indices: lets ``torch.utils.data.DataLoader``
        read a whole batch in one indexing operation (a TensorDict of
        ``batch_size=[len(indices), ...]``)."""
        if isinstance(indices, (list, tuple)):
            indices = torch.as_tensor(indices, dtype=torch.long)
        return self[indices]

    @classmethod
    def stack(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None) -> TensorDictBase:  # noqa: A002
        """``torch.stack`` of TensorDicts, as a class method (``TensorDict.stack(tds, 0)``).

        Args:
            input (sequence of TensorDictBase): the TensorDicts to stack; all share one
                ``batch_size``.
            dim (int, optional): where the new batch dim goes. Defaults to ``0``.
            out (TensorDictBase, optional): written in place with the result (keyword only).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict.stack([TensorDict({"a": torch.zeros(3)}, [3])] * 2).batch_size
            torch.Size([2, 3])
        """
        return _stack(list(input), dim, out=out)

    @classmethod
    def cat(cls, input: Sequence[Any], dim: int = 0, *, out: Any = None) -> TensorDictBase:  # noqa: A002
        """``torch.cat`` of TensorDicts, as a class method (``TensorDict.cat(tds, 0)``).

        Args:
            input (sequence of TensorDictBase): the TensorDicts to concatenate; their batch
                sizes must match except along ``dim``.
            dim (int, optional): the batch dim to concatenate along. Defaults to ``0``.
            out (TensorDictBase, optional): written in place with the result (keyword only).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict.cat([TensorDict({"a": torch.zeros(3)}, [3])] * 2).batch_size
            torch.Size([6])
        """
        return _cat(list(input), dim, out=out)

    @classmethod
    def from_list(
        cls,
        input_list: Sequence[Any],
        *,
        auto_batch_size: bool | None = None,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        names: Any = None,
        lazy: bool | None = None,
    ) -> TensorDictBase:
        """A TensorDict stacked from a list of dicts or TensorDicts (a batch of samples,
        e.g. as ``collate_fn`` of a ``DataLoader``).

        Args:
            input_list (list): the samples; dicts are converted with ``from_dict``.

        Keyword Args:
            auto_batch_size (bool, optional): compute each sample's batch size.
            batch_size (sequence of int, optional): each sample's batch size.
            device (torch.device, optional): the result's device.
            batch_dims (int, optional): at most this many batch dims per sample.
            names (list of str, optional): the names of the result's batch dims.
            lazy (bool, optional): return a lazy stack. Otherwise the samples are
                stacked densely where their keys and shapes agree, lazily where they
                differ (ragged samples give a lazy stack, as :func:`maybe_dense_stack`).
                ``LazyStackedTensorDict.from_list`` always returns a lazy stack.

        Returns:
            a TensorDict of ``batch_size=[len(input_list), *sample_batch_size]``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict.from_list([{"a": torch.zeros(2)}, {"a": torch.ones(2)}])
            >>> td.batch_size, td["a"][1]
            (torch.Size([2]), tensor([1., 1.]))
        """
        items = []
        for item in input_list:
            if not isinstance(item, _classes.TensorDictBase):
                item = _classes.TensorDict.from_dict(
                    item, batch_size=batch_size, auto_batch_size=auto_batch_size, batch_dims=batch_dims, device=device
                )
            items.append(item)
        out: TensorDictBase
        if lazy or issubclass(cls, _classes.LazyStackedTensorDict):
            out = _classes.LazyStackedTensorDict(*items, stack_dim=0)
        else:
            out = _stack(items, 0, maybe_dense_stack=True)
        if device is not None and out.device != torch.device(device):
            out = out.to(device)
        if names is not None:
            out.names = names
        return out

    # ------------------------------------------------------------------ description
    @property
    def depth(self) -> int:
        """How deep the leaves are nested: ``0`` when every leaf is at the root (empty
        nested TensorDicts do not count).

        Examples:
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": {"b": {"c": 0}}, "d": 0}).depth
            2
        """
        best = 0
        for key in self.keys(include_nested=True, leaves_only=True):
            if isinstance(key, tuple):
                best = max(best, len(key) - 1)
        return best

    @property
    def dtype(self) -> torch.dtype | None:
        """The dtype shared by every tensor leaf, or ``None`` when they differ.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(2), "b": torch.ones(2)}, [2]).dtype
            torch.float32
            >>> TensorDict({"a": torch.zeros(2), "b": torch.ones(2, dtype=torch.int64)}, [2]).dtype is None
            True
        """
        dtype = None
        for _, leaf in self.items(include_nested=True, leaves_only=True):
            if not isinstance(leaf, torch.Tensor):
                continue
            if dtype is None:
                dtype = leaf.dtype
            elif leaf.dtype != dtype:
                return None
        return dtype

    def bytes(self, *, count_duplicates: bool = True) -> int:
        """Number of bytes of the tensor leaves (and their ``.grad``).

        Args:
            count_duplicates (bool): count a tensor stored under several keys each
                time (``False``: once). Defaults to ``True``, as tensordict 0.15.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": torch.zeros(2, dtype=torch.int64)}, [])
            >>> td.bytes()
            28
        """
        return _count(self, lambda t: t.numel() * t.element_size(), count_duplicates, True)

    def param_count(self, *, count_duplicates: bool = True) -> int:
        """Number of elements of the tensor leaves.

        Args:
            count_duplicates (bool): count a tensor stored under several keys each
                time. Defaults to ``True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3)}, [])
            >>> td["b"] = td["a"]
            >>> td.param_count(), td.param_count(count_duplicates=False)
            (6, 3)
        """
        return _count(self, torch.Tensor.numel, count_duplicates, False)

    @property
    def _has_non_tensor(self) -> bool:
        """``True`` if an entry (nested ones included) is non-tensor data."""
        for _, value in self._items_raw():
            if isinstance(value, (_classes.NonTensorData, _classes.NonTensorStack)):
                return True
            if isinstance(value, _classes.TensorDictBase) and value._has_non_tensor:
                return True
            inner = getattr(value, "_tensordict", None)
            if getattr(value, "_is_tensorclass", False) and inner is not None and inner._has_non_tensor:
                return True
        return False

    def _check_device(self) -> None:
        """Raises if a tensor leaf is not on ``self.device`` (when it has one)."""
        device = self.device
        if device is None:
            return
        for key, value in self.items(include_nested=True, leaves_only=True):
            if isinstance(value, torch.Tensor) and value.device != device:
                msg = f"entry {key!r} is on {value.device}, the TensorDict on {device}."
                raise RuntimeError(msg)

    def _check_batch_size(self) -> None:
        """Raises if a leaf (nested ones included) does not start with the batch size."""
        bs = self.batch_size
        n = len(bs)
        for key, value in self._items_raw():
            if isinstance(value, torch.Tensor):
                shape = value.shape
            elif hasattr(value, "batch_size"):
                shape = value.batch_size
                if isinstance(value, _classes.TensorDictBase):
                    value._check_batch_size()
            else:
                continue
            if tuple(shape[:n]) != tuple(bs):
                msg = f"batch_size {tuple(bs)} does not match the shape {tuple(shape)} of entry {key!r}."
                raise RuntimeError(msg)
