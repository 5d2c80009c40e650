"""Non-tensor values shared between processes (``memmap(..., share_non_tensor=True)``).

A :class:`SharedNonTensorData` keeps its value in a small shared-memory slot (an
anonymous ``MemoryMappedTensor`` of bytes) instead of a Python attribute. The slot
travels with the TensorDict to other processes (``torch.multiprocessing``, ``spawn``
or ``fork``), and an in-place write in any of them (``td.set_("key", value)``,
``td.get("key").update_(...)``) is seen by every other one at its next read.

Slot layout (little-endian ``int64`` header, then the payload)::

    [0:8]   sequence number: odd while a write is in progress (readers retry)
    [8:16]  payload length in bytes
    [16:24] encoding: 0 = JSON (UTF-8), 1 = pickle
    [64:]   payload

A value that is not JSON-faithful is pickled into the slot. The slot is never written
to disk and only processes this one shared the TensorDict with can map it, so reading
it back is no more trusting than ``torch.multiprocessing``'s own pickling. The slot's
capacity is fixed when it is created (twice the first value, at least 4 KiB); a
larger value raises ``RuntimeError``.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import torch

from tensordict.ext import NonTensorData, NonTensorStack, TensorDictBase
from tensordict.ext import lookup_memmap_object as lookup_object
from tensordict.memmap._tensor import MemoryMappedTensor
from tensordict.memmap._values import json_faithful

__all__ = ["SharedNonTensorData", "share_non_tensor_leaves"]

_HEADER = 64
_MIN_CAPACITY = 4096


def _encode(value: Any) -> tuple[bytes, int]:
    if json_faithful(value):
        return json.dumps(value, allow_nan=True, separators=(",", ":")).encode("utf-8"), 0
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1


class SharedNonTensorData(NonTensorData):
    """A :class:`~tensordict.NonTensorData` whose value lives in shared memory.

    Built by ``td.memmap(...)``/``memmap_``/``memmap_like`` with
    ``share_non_tensor=True``; every process holding the TensorDict reads and writes
    the same value. Indexing and shape ops give views on the same slot; ``clone()``
    gives a plain, unshared ``NonTensorData``.

    Args:
        data (Any): the value.
        batch_size (sequence of int, optional): defaults to ``[]``.
        device (torch.device, optional): informative only.

    Keyword Args:
        capacity (int, optional): payload bytes the slot holds. Defaults to twice the
            first value's encoding, at least 4096.

    Raises:
        RuntimeError: a value written later does not fit in the slot.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"step": 0, "name": "run"}, []).memmap(share_non_tensor=True)
        >>> type(td.get("name")).__name__
        'SharedNonTensorData'
        >>> _ = td.set_("name", "run-2")  # in place: every process sharing td sees it
        >>> td["name"]
        'run-2'
    """

    __slots__ = ("_slot",)
    _writes_in_place = True  # td-core writes into this leaf instead of replacing it

    def __init__(self, data: Any = None, batch_size: Sequence[int] | None = None, device: Any = None,
                 names: Any = None, *, capacity: int | None = None, _slot: Any = None) -> None:
        if _slot is not None:  # a view on an existing slot: its value is not touched
            self._slot = _slot
            self._batch_size = torch.Size(batch_size) if batch_size is not None else torch.Size(())
            self._device = torch.device(device) if device is not None else None
            return
        payload, _ = _encode(data.data if isinstance(data, NonTensorData) else data)
        size = max(_MIN_CAPACITY, 2 * len(payload)) if capacity is None else int(capacity)
        self._slot = MemoryMappedTensor.zeros(_HEADER + size, dtype=torch.uint8)
        super().__init__(data, batch_size, device, names)

    # ------------------------------------------------------------------ the value
    def _header(self) -> torch.Tensor:
        return self._slot[:24].view(torch.int64)

    @property
    def data(self) -> Any:
        """The current value (read from the shared slot)."""
        header = self._header()
        for _ in range(100_000):
            seq = int(header[0])
            if seq % 2:
                time.sleep(0)
                continue
            length, encoding = int(header[1]), int(header[2])
            raw = bytes(self._slot[_HEADER : _HEADER + length].numpy())
            if int(header[0]) == seq:
                return json.loads(raw) if encoding == 0 else pickle.loads(raw)  # noqa: S301 - our own shared slot
        msg = "the shared non-tensor value is being written by another process that seems stuck (or died mid-write)."
        raise RuntimeError(msg)

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, NonTensorData):
            value = value.data
        payload, encoding = _encode(value)
        capacity = self._slot.numel() - _HEADER
        if len(payload) > capacity:
            msg = (f"the new non-tensor value needs {len(payload)} bytes; its shared slot holds {capacity} "
                   "(share_non_tensor=True sizes a slot from its first value: twice its size, at least 4 KiB). "
                   "Save again with the larger value to grow it.")
            raise RuntimeError(msg)
        header = self._header()
        header[0] += 1  # odd: write in progress
        if payload:
            self._slot[_HEADER : _HEADER + len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        header[1] = len(payload)
        header[2] = encoding
        header[0] += 1

    # ------------------------------------------------------------------ views, copies, pickling
    def _rebuild(self, batch_size: Sequence[int]) -> NonTensorData:
        return SharedNonTensorData(None, batch_size, self._device, _slot=self._slot)

    def clone(self, recurse: bool = True) -> NonTensorData:
        """An unshared :class:`~tensordict.NonTensorData` holding the current value."""
        return NonTensorData(self.data, self._batch_size, self._device)

    def to(self, device: Any = None, *args: Any, **kwargs: Any) -> NonTensorData:
        if isinstance(device, (str, torch.device, int)):
            return SharedNonTensorData(None, self._batch_size, device, _slot=self._slot)
        return self

    def __reduce__(self) -> tuple:
        return (_rebuild_shared, (self._slot, tuple(self._batch_size), self._device))


def _rebuild_shared(slot: Any, batch_size: tuple, device: Any) -> SharedNonTensorData:
    return SharedNonTensorData(None, batch_size, device, _slot=slot)


def share_non_tensor_leaves(obj: Any) -> Any:
    """Replaces every :class:`~tensordict.NonTensorData` leaf of ``obj`` (a TensorDict, lazy
    stack or registered type such as a tensorclass, at any depth) by a
    :class:`SharedNonTensorData` holding the same value; returns ``obj``.

    ``NonTensorStack`` leaves (one object per element) are shared with their own
    ``share_memory_()`` (one shared slot per element).
    A ``concurrent.futures.Future`` (``return_early=True``) gives a Future of the result.
    """
    if isinstance(obj, Future):
        out: Future = Future()

        def done(f: Future) -> None:
            err = f.exception()
            if err is not None:
                out.set_exception(err)
            else:
                out.set_result(share_non_tensor_leaves(f.result()))

        obj.add_done_callback(done)
        return out
    td = obj
    if not isinstance(td, TensorDictBase):
        reg = lookup_object(obj)
        if reg is None:
            return obj
        td, _extra = reg.save_fn(obj)
    members = getattr(td, "tensordicts", None)
    if members is not None:  # a lazy stack: its stacked TensorDicts hold the leaves
        for member in members:
            share_non_tensor_leaves(member)
        return obj
    for key, value in list(td._items_raw()):
        if isinstance(value, NonTensorData):
            if not isinstance(value, SharedNonTensorData):
                td._set_raw(key, SharedNonTensorData(value.data, value.batch_size, value.device))
        elif isinstance(value, NonTensorStack):
            value.share_memory_()  # td-core's shared slots, one per element
        elif isinstance(value, TensorDictBase) or lookup_object(value) is not None:
            share_non_tensor_leaves(value)
    return obj
