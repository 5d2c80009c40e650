"""Non-tensor leaves: ``NonTensorData`` (one Python object for the whole batch) and
``NonTensorStack`` (one object per batch element).

Both carry a ``batch_size`` so they follow every batch operation of the TensorDict
that holds them. Shape operations are computed on an index tensor
(``torch.arange(numel).view(batch_size)``): whatever torch does to that tensor is
done to the objects, so every torch index form and shape op is supported with one
code path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["NonTensorData", "NonTensorStack", "is_non_tensor"]


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        eq = a == b
        if isinstance(eq, bool):
            return eq
        if isinstance(eq, torch.Tensor):
            return bool(eq.all())
        return bool(eq)
    except Exception:
        return False


def _shape_of_index(batch_size: torch.Size, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Size:
    probe = torch.zeros((), dtype=torch.uint8).expand(batch_size)
    return fn(probe).shape


class NonTensorData:
    """A non-tensor value (str, number, any object) stored as a TensorDict leaf.

    The same object stands for every element of ``batch_size``.

    Args:
        data (Any): the object.
        batch_size (torch.Size or sequence of int, optional): defaults to ``[]``.
        device (torch.device, optional): informative only; defaults to ``None``.

    Examples:
        >>> d = NonTensorData("hello", batch_size=[3])
        >>> d[0].data
        'hello'
        >>> d.batch_size
        torch.Size([3])
    """

    __slots__ = ("data", "_batch_size", "_device")

    def __init__(self, data: Any, batch_size: Sequence[int] | None = None, device: Any = None) -> None:
        if isinstance(data, NonTensorData):
            data = data.data
        self.data = data
        self._batch_size = torch.Size(batch_size) if batch_size is not None else torch.Size(())
        self._device = torch.device(device) if device is not None else None

    # shape -------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        self._batch_size = torch.Size(value)

    shape = batch_size

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def batch_dims(self) -> int:
        return len(self._batch_size)

    ndim = batch_dims

    def numel(self) -> int:
        return self._batch_size.numel()

    def tolist(self) -> Any:
        """The data repeated over the batch, as nested lists (the object for ``[]``)."""
        def build(dims: tuple) -> Any:
            if not dims:
                return self.data
            return [build(dims[1:]) for _ in range(dims[0])]

        return build(tuple(self._batch_size))

    # batch operations --------------------------------------------------
    def _batch_transform(self, fn: Callable[[torch.Tensor, int], torch.Tensor], nd: int) -> NonTensorData:
        shape = _shape_of_index(self._batch_size, lambda t: fn(t, nd))
        return NonTensorData(self.data, shape, self._device)

    def __getitem__(self, index: Any) -> NonTensorData:
        shape = _shape_of_index(self._batch_size, lambda t: t[index])
        return NonTensorData(self.data, shape, self._device)

    def clone(self, recurse: bool = True) -> NonTensorData:
        return NonTensorData(self.data, self._batch_size, self._device)

    def to(self, device: Any = None, *args: Any, **kwargs: Any) -> NonTensorData:
        if isinstance(device, (str, torch.device, int)):
            return NonTensorData(self.data, self._batch_size, device)
        return self

    def _with_batch(self, batch_size: Sequence[int]) -> NonTensorData:
        return NonTensorData(self.data, batch_size, self._device)

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        if isinstance(other, NonTensorData):
            return _same(self.data, other.data)
        return _same(self.data, other)

    def __ne__(self, other: object) -> bool:  # type: ignore[override]
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return (NonTensorData, (self.data, tuple(self._batch_size), self._device))

    def __repr__(self) -> str:
        return f"NonTensorData(data={self.data}, batch_size={self._batch_size}, device={self._device})"


class NonTensorStack:
    """Non-tensor leaf holding one object per batch element.

    Built when TensorDicts whose non-tensor values differ are stacked or
    concatenated. ``tolist()`` returns nested lists shaped like ``batch_size``.

    Args:
        *items (Any or NonTensorData): the objects along the first batch dim.
        stack_dim (int, optional): where the new dim goes. Defaults to ``0``.

    Examples:
        >>> s = NonTensorStack("a", "b", "c")
        >>> s.tolist()
        ['a', 'b', 'c']
        >>> s[1].data
        'b'
    """

    __slots__ = ("_items", "_batch_size", "_device")

    def __init__(self, *items: Any, stack_dim: int = 0) -> None:
        parts = [it if isinstance(it, (NonTensorData, NonTensorStack)) else NonTensorData(it) for it in items]
        if parts:
            stacked = _stack_non_tensor(parts, stack_dim, collapse=False)
            self._items, self._batch_size, self._device = stacked._items, stacked._batch_size, stacked._device
        else:
            self._items, self._batch_size, self._device = [], torch.Size([0]), None

    @classmethod
    def _from_flat(cls, items: list, batch_size: Sequence[int], device: Any = None) -> NonTensorStack:
        obj = cls.__new__(cls)
        obj._items = items
        obj._batch_size = torch.Size(batch_size)
        obj._device = device
        return obj

    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    shape = batch_size

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def batch_dims(self) -> int:
        return len(self._batch_size)

    ndim = batch_dims

    def numel(self) -> int:
        return self._batch_size.numel()

    def tolist(self) -> Any:
        """The objects as nested lists shaped like ``batch_size``."""
        items = iter(self._items)

        def build(dims: tuple) -> Any:
            if not dims:
                return next(items)
            return [build(dims[1:]) for _ in range(dims[0])]

        return build(tuple(self._batch_size))

    @property
    def data(self) -> Any:
        return self.tolist()

    def _index_tensor(self) -> torch.Tensor:
        return torch.arange(len(self._items)).view(self._batch_size)

    def _from_index(self, idx: torch.Tensor) -> NonTensorStack | NonTensorData:
        flat = idx.reshape(-1).tolist()
        items = [self._items[i] for i in flat]
        if idx.ndim == 0:
            return NonTensorData(items[0], (), self._device)
        return NonTensorStack._from_flat(items, idx.shape, self._device)

    def _batch_transform(self, fn: Callable[[torch.Tensor, int], torch.Tensor], nd: int) -> Any:
        return self._from_index(fn(self._index_tensor(), nd))

    def __getitem__(self, index: Any) -> Any:
        return self._from_index(self._index_tensor()[index])

    def __setitem__(self, index: Any, value: Any) -> None:
        idx = self._index_tensor()[index].reshape(-1).tolist()
        if isinstance(value, NonTensorStack):
            values = value._items
        elif isinstance(value, NonTensorData):
            values = [value.data] * len(idx)
        else:
            values = [value] * len(idx)
        if len(values) != len(idx):
            msg = f"Cannot write {len(values)} non-tensor values into {len(idx)} positions."
            raise RuntimeError(msg)
        for i, v in zip(idx, values):
            self._items[i] = v

    def clone(self, recurse: bool = True) -> NonTensorStack:
        return NonTensorStack._from_flat(list(self._items), self._batch_size, self._device)

    def to(self, device: Any = None, *args: Any, **kwargs: Any) -> NonTensorStack:
        if isinstance(device, (str, torch.device, int)):
            return NonTensorStack._from_flat(self._items, self._batch_size, torch.device(device))
        return self

    def _with_batch(self, batch_size: Sequence[int]) -> NonTensorStack:
        return NonTensorStack._from_flat(self._items, batch_size, self._device)

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        if isinstance(other, NonTensorStack):
            return self._batch_size == other._batch_size and all(
                _same(a, b) for a, b in zip(self._items, other._items)
            )
        return False

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return (NonTensorStack._from_flat, (list(self._items), tuple(self._batch_size), self._device))

    def __repr__(self) -> str:
        return f"NonTensorStack({self.tolist()!r}, batch_size={self._batch_size}, device={self._device})"


def is_non_tensor(value: Any) -> bool:
    """``True`` for a ``NonTensorData`` or ``NonTensorStack`` (instance or class)."""
    cls = value if isinstance(value, type) else type(value)
    return issubclass(cls, (NonTensorData, NonTensorStack))


def _parts_index(parts: Sequence[NonTensorData | NonTensorStack]) -> tuple[list, list[torch.Tensor]]:
    items: list = []
    idx = []
    for p in parts:
        n = p.numel()
        if isinstance(p, NonTensorData):
            base = len(items)
            items.append(p.data)
            idx.append(torch.full(tuple(p.batch_size), base, dtype=torch.long))
        else:
            idx.append(torch.arange(len(items), len(items) + n).view(p.batch_size))
            items.extend(p._items)
    return items, idx


def _stack_non_tensor(parts: Sequence[Any], dim: int, collapse: bool = True) -> NonTensorData | NonTensorStack:
    """Stacks non-tensor leaves; equal values collapse to one ``NonTensorData``."""
    if collapse and all(isinstance(p, NonTensorData) for p in parts):
        first = parts[0].data
        if all(_same(first, p.data) for p in parts[1:]):
            bs = list(parts[0].batch_size)
            d = dim if dim >= 0 else dim + len(bs) + 1
            bs.insert(d, len(parts))
            return NonTensorData(first, bs, parts[0].device)
    items, idx = _parts_index(parts)
    stacked = torch.stack(idx, dim)
    flat = stacked.reshape(-1).tolist()
    return NonTensorStack._from_flat([items[i] for i in flat], stacked.shape, parts[0].device)


def _cat_non_tensor(parts: Sequence[Any], dim: int) -> NonTensorData | NonTensorStack:
    if all(isinstance(p, NonTensorData) for p in parts):
        first = parts[0].data
        if all(_same(first, p.data) for p in parts[1:]):
            bs = list(parts[0].batch_size)
            bs[dim] = sum(p.batch_size[dim] for p in parts)
            return NonTensorData(first, bs, parts[0].device)
    items, idx = _parts_index(parts)
    cat = torch.cat(idx, dim)
    flat = cat.reshape(-1).tolist()
    return NonTensorStack._from_flat([items[i] for i in flat], cat.shape, parts[0].device)
