"""Indexing a lazy stack (``LazyIndexMixin``): reads and in-place writes.

An index over the stack's batch dims is split into the entry that falls on
``stack_dim`` (which picks stacked TensorDicts) and the rest (applied to each
picked TensorDict). An int on the stack dim returns the stacked TensorDict itself;
a slice, a 1-D integer tensor or a 1-D mask gives a new lazy stack of the picked
TensorDicts. Indices this split cannot express (several tensor indices, a mask
spanning the stack dim and another dim, a multi-dim tensor on the stack dim) fall
back to a dense copy for reads and raise for writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from tensordict import _classes
from tensordict._host import LazyStackHost
from tensordict._keys import _MISSING

__all__ = ["LazyIndexMixin"]

_Tensor = torch.Tensor
_Size = torch.Size
_FULL = slice(None)
_LONG = torch.int64


def _as_int(entry: Any) -> Any:
    if (
        isinstance(entry, _Tensor)
        and entry.ndim == 0
        and not entry.is_floating_point()
        and entry.dtype is not torch.bool
    ):
        return int(entry)
    return entry


class _Plan:
    """An index split around the stack dim."""

    __slots__ = ("stack", "rest", "new_sd", "trivial")

    def __init__(self, stack: Any, rest: tuple, new_sd: int) -> None:
        self.stack = stack
        self.rest = rest
        self.new_sd = new_sd
        self.trivial = all(e.__class__ is slice and e == _FULL for e in rest)


def _check_first_class_dims(idx: tuple, stack_dim: int) -> None:
    """Raises if a first-class dim (``functorch.dim``) indexes the stack dim."""
    pos = 0
    for i in idx:
        if i is None:
            continue
        cls = type(i)
        if pos == stack_dim and cls.__name__ == "Dim" and cls.__module__.startswith("functorch"):
            msg = (
                f"Cannot index a lazy stack along its stack dim ({stack_dim}) with a first-class "
                "dimension; densify it first with `contiguous()`."
            )
            raise ValueError(msg)
        pos += i.ndim if isinstance(i, _Tensor) and i.dtype is torch.bool else 1


class LazyIndexMixin(LazyStackHost):
    """``stacked[index]`` and ``stacked[index] = value`` for lazy stacks."""

    def _plan_index(self, idx: tuple) -> _Plan | None:
        """Splits a normalised index; ``None`` when the split cannot express it."""
        sd = self.stack_dim
        n_adv = 0
        d = 0
        out = 0
        stack = _MISSING
        new_sd = 0
        rest: list = []
        for e in idx:
            if e is None:
                rest.append(None)
                out += 1
                continue
            if e.__class__ is bool:
                return None
            e = _as_int(e)
            if isinstance(e, _Tensor):
                if e.dtype is torch.bool:
                    k = e.ndim
                    if k == 0:
                        return None
                    if d <= sd < d + k and stack is _MISSING:
                        if k != 1:
                            return None
                        e = e.nonzero().squeeze(-1)
                    else:
                        n_adv += 1
                        rest.append(e)
                        d += k
                        out += 1
                        continue
                elif e.is_floating_point():
                    msg = f"tensors used as indices must be integer or bool tensors, got {e.dtype}."
                    raise IndexError(msg)
            if d == sd and stack is _MISSING:
                stack = e
                new_sd = out
                d += 1
                if e.__class__ is slice:
                    out += 1
                elif isinstance(e, _Tensor):
                    if e.ndim != 1:
                        return None
                    n_adv += 1
                    out += 1
                elif not isinstance(e, int):
                    return None
                continue
            rest.append(e)
            d += 1
            if e.__class__ is slice:
                out += 1
            elif isinstance(e, _Tensor):
                n_adv += 1
                out += e.ndim
            elif not isinstance(e, int):
                return None
        if n_adv > 1:
            return None
        if stack is _MISSING:
            stack = _FULL
            new_sd = out + (sd - d)
        return _Plan(stack, tuple(rest), new_sd)

    def _positions(self, stack: Any) -> list:
        n = len(self.tensordicts)
        if stack.__class__ is slice:
            return list(range(n))[stack]
        pos = stack.tolist()
        if pos and not (-n <= min(pos) and max(pos) < n):
            bad = next(p for p in pos if not -n <= p < n)
            msg = f"index {bad} is out of bounds for the stack dim {self.stack_dim} of size {n}."
            raise IndexError(msg)
        return pos

    def _check_int(self, i: int) -> int:
        n = len(self.tensordicts)
        if not -n <= i < n:
            msg = f"index {i} is out of bounds for the stack dim {self.stack_dim} of size {n} (batch_size {tuple(self.batch_size)})."
            raise IndexError(msg)
        return i

    def _index(self, index: Any) -> Any:
        tds = self.tensordicts
        cls = index.__class__
        if self.stack_dim == 0:
            if cls is int:
                return tds[self._check_int(index)]
            if cls is slice and (tds[index] or not tds):
                sel = tds[index]
                return self._new_lazy(sel, 0, self._resized(len(sel)))
            if cls is _Tensor and index.dtype is _LONG and index.ndim == 1:
                try:
                    sel = [tds[i] for i in index.tolist()]
                except IndexError:
                    self._positions(index)
                    raise
                return self._new_lazy(sel, 0, self._resized(len(sel)))
        idx = self._normalize_index(index)
        _check_first_class_dims(idx, self.stack_dim)
        plan = self._plan_index(idx)
        if plan is None:
            return self.contiguous()._index(idx)
        stack = plan.stack
        if stack.__class__ is int:
            td = tds[self._check_int(stack)]
            return td if plan.trivial else td._index(plan.rest)
        sel = [tds[i] for i in self._positions(stack)]
        if not plan.trivial:
            sel = [td._index(plan.rest) for td in sel]
        if sel:
            if -1 in self._batch_size:  # TensorDicts of different batch sizes: recompute the -1 dims
                out = _classes.LazyStackedTensorDict._from_list(sel, plan.new_sd)
                out._stack_name = self._stack_name
                return out
            return self._new_lazy(sel, plan.new_sd)
        if tds:  # nothing picked: a dense empty result keeps the keys (a stack of none has none)
            try:
                return self.contiguous()._index(idx)
            except RuntimeError:  # heterogeneous shapes: no dense form
                pass
        probe = torch.zeros((), dtype=torch.uint8).expand(self._batch_size)[idx]

        sd = plan.new_sd
        td_bs = (*probe.shape[:sd], *probe.shape[sd + 1 :])  # an empty stack takes its TensorDicts' batch size
        return _classes.LazyStackedTensorDict._from_list([], sd, batch_size=td_bs)

    # -------------------------------------------------------------- writes
    def _write_index(self, index: Any, value: Any, writer: Callable[[Any, Any, Any], None]) -> None:
        """Calls ``writer(td, td_index, part)`` for every stacked TensorDict ``index`` touches."""

        idx = self._normalize_index(index)
        plan = self._plan_index(idx)
        if plan is None:
            msg = (
                f"cannot write into a lazy stack at index {index!r}: index the stack dim "
                f"({self.stack_dim}) with an int, a slice or a 1-D tensor, with at most one tensor "
                "index overall, or write into `stacked.tensordicts[i]` directly."
            )
            raise RuntimeError(msg)
        tds = self.tensordicts
        rest = Ellipsis if plan.trivial else plan.rest
        if plan.stack.__class__ is int:
            writer(tds[self._check_int(plan.stack)], rest, value)
            return
        positions = self._positions(plan.stack)
        ibs = torch.zeros((), dtype=torch.uint8).expand(self._batch_size)[idx].shape
        if isinstance(value, Mapping) and not isinstance(value, _classes.TensorDictBase):
            value = _classes.TensorDict(value, batch_size=ibs)
        m = len(positions)
        nd = len(ibs)
        if isinstance(value, _classes.TensorDictBase) or _classes.is_tensor_collection(value):
            if value.batch_size[:nd] != ibs and value.batch_dims <= nd:
                try:  # a TensorDict broadcast to the indexed batch size, as tensors are
                    value = value.expand(ibs)
                except RuntimeError:
                    pass
            if value.batch_size[:nd] != ibs:
                msg = (
                    f"batch dimension mismatch: cannot write a TensorDict of batch_size {tuple(value.batch_size)} "
                    f"at index {index!r} of a lazy stack: the indexed destination TensorDict batch size is "
                    f"{tuple(ibs)}; Cannot broadcast the tensordict to it."
                )
                raise RuntimeError(msg)
            parts = value.unbind(plan.new_sd)
        elif isinstance(value, _Tensor) and value.ndim >= nd and value.shape[:nd] == ibs:
            parts = value.unbind(plan.new_sd)
        else:
            parts = [value] * m
        for pos, part in zip(positions, parts):
            writer(tds[pos], rest, part)

    def _setitem_index(self, index: Any, value: Any) -> None:
        def write(td: Any, idx: Any, part: Any) -> None:
            td[idx] = part

        if self._plan_index(self._normalize_index(index)) is None and self.tensordicts:
            # an index that mixes elements across the stack dim (e.g. a mask spanning it):
            # write into a dense copy of the shared keys, then copy each slice back in place
            try:
                dense = self.contiguous()
            except RuntimeError:
                dense = None  # heterogeneous shapes: no dense form
            if dense is not None:
                dense[index] = value
                for td, part in zip(self.tensordicts, dense.unbind(self.stack_dim)):
                    td.update_(part)
                return
        self._write_index(index, value, write)

    def set_at_(self, key: Any, value: Any, index: Any, *, non_blocking: bool = False) -> Any:
        """Writes ``value`` into ``stacked.get(key)[index]``, in the stacked TensorDicts.

        Raises:
            KeyError: ``key`` is missing from some stacked TensorDicts (indices named).
        """
        self._check_present(key)
        if not isinstance(value, (_Tensor, _classes.TensorDictBase, Mapping)) and hasattr(value, "__array__"):
            value = torch.as_tensor(value)  # a numpy array is split over the stacked TensorDicts as a tensor

        def write(td: Any, idx: Any, part: Any) -> None:
            td.set_at_(key, part, idx)

        self._write_index(index, value, write)
        return self
