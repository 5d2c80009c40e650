"""Comparison operators returning TensorDicts of bools, and ``all``/``any`` (``CompareMixin``)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._apply import _refuse_exclusive
from tensordict._deep import trampoline
from tensordict._host import TensorDictHost
from tensordict._keys import _MISSING
from tensordict._nontensor import NonTensorData, NonTensorStack, _same

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["CompareMixin"]


class CompareMixin(TensorDictHost):
    """``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` leaf by leaf; ``all``/``any``."""

    # ------------------------------------------------------------------ comparisons
    def _compare(self, other: Any, op: Callable) -> TensorDictBase:
        # by recursion (the fastest for the usual few levels); a nest deeper than the
        # recursion limit allows is compared by :func:`_compare_node` (see _compare_leaf)
        if getattr(other, "_is_tensorclass", False):  # a tensorclass compares as its TensorDict
            other = other.to_tensordict(retain_none=True)  # (non-tensor fields included)
        if _is_td(other) or (isinstance(other, Mapping) and not isinstance(other, torch.Tensor)):
            source = {}
            for key, value in self._items_raw():
                o = other._get_raw(key, _MISSING) if _is_td(other) else other.get(key, _MISSING)
                if o is _MISSING:
                    msg = f"key {key!r} is missing from the other TensorDict in a comparison."
                    raise KeyError(msg)
                if value.__class__ is torch.Tensor and o.__class__ is torch.Tensor:
                    source[key] = op(value, o)
                else:
                    source[key] = _compare_leaf(value, o, op, self.batch_size)
            return self._new_like(source, device=self.device)
        # against a number or a tensor, non-tensor leaves have nothing to compare: they are
        # left out of the result (so ``.all()`` is decided by the tensors, as in tensordict)
        source = {
            k: _compare_leaf(v, other, op, self.batch_size)
            for k, v in self._items_raw()
            if v.__class__ is torch.Tensor or not isinstance(v, (NonTensorData, NonTensorStack))
        }
        return self._new_like(source)

    def all(self, dim: int | None = None) -> bool | TensorDictBase:
        """``True`` if every element of every leaf is true; with ``dim``, a TensorDict
        reduced over that batch dim."""
        if dim is None:
            mine = CompareMixin.all
            todo: list[Any] = [self]  # nested TensorDicts walked without recursion
            while todo:
                for _, v in todo.pop()._items_raw():
                    if isinstance(v, torch.Tensor):
                        if not bool(v.all()):
                            return False
                    elif _is_td(v):
                        if type(v).all is mine:
                            todo.append(v)
                        elif not v.all():
                            return False
                    elif isinstance(v, NonTensorData) and not bool(v.data):
                        return False
            return True
        if dim < 0:
            dim += self.batch_dims
        return self._reduce_dim(lambda t: t.all(dim=dim), dim)

    def any(self, dim: int | None = None) -> bool | TensorDictBase:
        """``True`` if any element of any leaf is true; with ``dim``, reduced over it."""
        if dim is None:
            mine = CompareMixin.any
            todo: list[Any] = [self]
            while todo:
                for _, v in todo.pop()._items_raw():
                    if isinstance(v, torch.Tensor):
                        if bool(v.any()):
                            return True
                    elif _is_td(v):
                        if type(v).any is mine:
                            todo.append(v)
                        elif v.any():
                            return True
            return False
        if dim < 0:
            dim += self.batch_dims
        return self._reduce_dim(lambda t: t.any(dim=dim), dim)

    def _compare_body(self, other: Any, op: Callable) -> Generator[tuple, Any, TensorDictBase]:
        """One node of :meth:`_compare` (see :func:`_compare_node`)."""
        mine = CompareMixin._compare
        if getattr(other, "_is_tensorclass", False):  # a tensorclass compares as its TensorDict
            other = other.to_tensordict(retain_none=True)  # (non-tensor fields included)
        if _is_td(other) or (isinstance(other, Mapping) and not isinstance(other, torch.Tensor)):
            source = {}
            for key, value in self._items_raw():
                o = other._get_raw(key, _MISSING) if _is_td(other) else other.get(key, _MISSING)
                if o is _MISSING:
                    msg = f"key {key!r} is missing from the other TensorDict in a comparison."
                    raise KeyError(msg)
                if value.__class__ is torch.Tensor and o.__class__ is torch.Tensor:
                    source[key] = op(value, o)
                elif _is_td(value) and type(value)._compare is mine:
                    source[key] = yield (value, o, op)
                else:
                    source[key] = _compare_leaf(value, o, op, self.batch_size)
            return self._new_like(source, device=self.device)
        # against a number or a tensor, non-tensor leaves have nothing to compare: they are
        # left out of the result (so ``.all()`` is decided by the tensors, as in tensordict)
        source = {}
        for k, v in self._items_raw():
            if v.__class__ is torch.Tensor or not isinstance(v, (NonTensorData, NonTensorStack)):
                if _is_td(v) and getattr(type(v), "_compare", None) is mine:
                    source[k] = yield (v, other, op)
                else:
                    source[k] = _compare_leaf(v, other, op, self.batch_size)
        return self._new_like(source)

    def __eq__(self, other: Any) -> TensorDictBase | bool:  # type: ignore[override]
        if other is None or isinstance(other, (str, bytes)):
            return False  # not comparable leaf-wise: never equal (as tensordict)
        return self._compare(other, torch.eq)

    def __ne__(self, other: Any) -> TensorDictBase | bool:  # type: ignore[override]
        if other is None or isinstance(other, (str, bytes)):
            return True
        return self._compare(other, torch.ne)

    def __lt__(self, other: Any) -> TensorDictBase:
        return self._compare(other, torch.lt)

    def __le__(self, other: Any) -> TensorDictBase:
        return self._compare(other, torch.le)

    def __gt__(self, other: Any) -> TensorDictBase:
        return self._compare(other, torch.gt)

    def __ge__(self, other: Any) -> TensorDictBase:
        return self._compare(other, torch.ge)

    __hash__ = object.__hash__

    def _reduce_dim(self, fn: Callable, dim: int) -> TensorDictBase:
        if isinstance(self, _classes.LazyStackedTensorDict):
            _refuse_exclusive(self)  # the stacked walk below would drop a key held by some only
        source = {}
        for key, value in self._items_raw():
            if _is_td(value):
                source[key] = value._reduce_dim(fn, dim)
            elif isinstance(value, torch.Tensor):
                source[key] = fn(value)
        bs = list(self.batch_size)
        del bs[dim]
        names = None
        if self._has_names():
            names = self.names
            del names[dim]
        return self._new_like(source, batch_size=torch.Size(bs), names=names)


def _compare_node(td: Any, other: Any, op: Callable) -> Generator[tuple, Any, TensorDictBase]:
    """``td._compare(other, op)`` as a node generator for :func:`trampoline`: a nested
    TensorDict that keeps :meth:`CompareMixin._compare` is yielded, others compare
    themselves."""
    return td._compare_body(other, op)


def _is_td(value: Any) -> bool:
    return isinstance(value, _classes.TensorDictBase)


def _compare_leaf(value: Any, other: Any, op: Callable, batch_size: torch.Size) -> Any:
    if _is_td(value):
        try:
            return value._compare(other, op)
        except RecursionError:  # nested too deep: compare this subtree without recursion
            if type(value)._compare is not CompareMixin._compare:
                raise
            return trampoline(_compare_node, value, other, op)
    if isinstance(value, torch.Tensor):
        if isinstance(other, NonTensorData):  # a tensor against stored non-tensor data
            try:
                return op(value, other.data)
            except (TypeError, RuntimeError):
                return torch.full(value.shape, op is torch.ne, dtype=torch.bool)
        if isinstance(other, torch.Tensor) and other.ndim and other.shape != value.shape:
            if other.ndim <= value.ndim and other.shape == value.shape[: other.ndim]:
                # a batch-shaped operand: expand it on the right to the leaf's shape
                other = other.reshape(*other.shape, *([1] * (value.ndim - other.ndim))).expand_as(value)
        return op(value, other)
    if isinstance(value, (NonTensorData, NonTensorStack)):
        same = _non_tensor_equal(value, other, batch_size)
        if op is torch.eq:
            return same
        if op is torch.ne:
            return ~same
        return torch.zeros(tuple(batch_size), dtype=torch.bool)
    if isinstance(other, Mapping) and getattr(value, "_is_tensorclass", False):
        # a tensorclass against a dict (``td == td.to_dict()``): torch.eq would refuse the
        # dict before dispatching to the tensorclass, so compare its TensorDict
        return value._tensordict._compare(other, op)
    return op(value, other)


def _non_tensor_items(value: Any, batch_size: torch.Size) -> list:
    n = batch_size.numel()
    if isinstance(value, NonTensorStack):
        return list(value._items) if value.batch_size == batch_size else [value.tolist()] * n
    if isinstance(value, NonTensorData):
        return [value.data] * n
    return [value] * n


def _non_tensor_equal(value: Any, other: Any, batch_size: torch.Size) -> torch.Tensor:
    """Element-wise equality of non-tensor leaves (data or stacks) as a bool tensor."""
    batch_size = torch.Size(batch_size)
    if isinstance(value, NonTensorData) and not isinstance(other, NonTensorStack):
        o = other.data if isinstance(other, NonTensorData) else other
        return torch.full(tuple(batch_size), _same(value.data, o))
    mine = _non_tensor_items(value, batch_size)
    theirs = _non_tensor_items(other, batch_size)
    flags = [_same(a, b) for a, b in zip(mine, theirs)]
    return torch.tensor(flags, dtype=torch.bool).view(batch_size)
