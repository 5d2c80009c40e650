"""Consolidating a lazy stack (``LazyConsolidateMixin``).

The stacked TensorDicts are consolidated together, as the entries ``"0"``,
``"1"``, ... of one holder TensorDict (see ``_consolidate.py``), so every key is
kept, also keys that only some stacked TensorDicts hold. The result is a lazy stack
again, over views into the one storage; it pickles as that storage.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from tensordict import _classes
from tensordict._consolidate import (
    _matches,
    _rebuild_lazy_consolidated,
    consolidate_future,
    lazy_from_holder,
    lazy_holder,
    lazy_meta_of,
)
from tensordict._host import LazyStackHost

__all__ = ["LazyConsolidateMixin"]


class LazyConsolidateMixin(LazyStackHost):
    """consolidate / is_consolidated / pickling of consolidated lazy stacks."""

    def consolidate(self, filename: str | os.PathLike | None = None, **kwargs: Any) -> Any:
        """Copies the leaves of every stacked TensorDict into one storage; returns a lazy
        stack of the same shape over views of it.

        Takes the arguments of :meth:`TensorDictBase.consolidate`. Keys that only some
        stacked TensorDicts hold are kept. ``inplace=True`` swaps the leaves of the
        stacked TensorDicts for the views and returns ``self``. With ``filename``,
        :func:`tensordict.from_consolidated` reads the file back as a lazy stack.

        Raises:
            RuntimeError: the stack is empty.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(3), b=torch.ones(1))])
            >>> c = s.consolidate()
            >>> type(c).__name__, c.is_consolidated(), "b" in c.tensordicts[1].keys()
            ('LazyStackedTensorDict', True, True)
        """
        if not self.tensordicts:
            msg = "consolidate: the lazy stack is empty; there is nothing to consolidate."
            raise RuntimeError(msg)
        if kwargs.get("return_early"):
            return consolidate_future(self, filename, kwargs)
        meta = lazy_meta_of(self)
        holder = lazy_holder(self)
        holder.__dict__["_lazy_stack_meta"] = meta
        out = holder.consolidate(filename, **kwargs)
        if kwargs.get("inplace"):
            self._consolidated = holder._consolidated
            return self
        out.__dict__.pop("_lazy_stack_meta", None)
        out = lazy_from_holder(out, meta)
        if filename is not None and out.device is None:
            out._set_device_tree(torch.device("cpu"))  # the file-backed storage is on the CPU
        return out

    def is_consolidated(self) -> bool:
        """``True`` while the stacked TensorDicts still are the views made by :meth:`consolidate`."""
        state = self._consolidated
        if state is None or not self.tensordicts:
            return False
        return _matches(lazy_holder(self), state.skeleton, state.leaves, _classes.TensorDictBase)

    def _to_consolidated(self, device: Any, non_blocking: bool) -> Any:
        if not self.is_consolidated():
            return None
        state = self._consolidated
        holder = lazy_holder(self)
        holder._consolidated = state
        moved = holder._to_consolidated(device, non_blocking)
        if moved is None:
            return None
        return lazy_from_holder(moved, lazy_meta_of(self))

    def __reduce_ex__(self, protocol: Any) -> Any:
        state = self._consolidated
        if state is not None and self.is_consolidated():
            shapes = [tuple(v.shape) for v in state.leaves]
            args = (state.storage, state.skeleton, state.runs, shapes, False, state.filename)
            return (_rebuild_lazy_consolidated, (lazy_meta_of(self), *args))
        if state is not None:
            self.__dict__.pop("_consolidated", None)
        return object.__reduce_ex__(self, protocol)
