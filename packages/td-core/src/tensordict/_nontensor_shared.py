"""The objects of a ``NonTensorStack`` in shared memory (``share_memory_()``).

A ``NonTensorStack`` normally keeps its objects in a Python list, which a process
that receives the stack gets a copy of. ``SharedItems`` is the list-like store used
once the stack is shared: each object is pickled into a fixed-size slot of a
shared ``uint8`` tensor (its length in a shared ``int64`` tensor). Pickling the
store through ``torch.multiprocessing`` sends the tensors' shared-memory handles,
so a write made by a worker (``td[1::2] = other``) is read by the parent and the
other workers.

A slot has room for twice the largest pickled object at the time of sharing (at
least :data:`MIN_SLOT` bytes); a bigger object cannot be written later (the shared
buffer cannot grow across processes) and raises a ``RuntimeError`` saying so.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import Any

import torch

__all__ = ["MIN_SLOT", "SharedItems"]

#: smallest slot (bytes) given to each object of a shared stack
MIN_SLOT = 256


class SharedItems:
    """List-like store of pickled objects in shared-memory tensors (fixed length).

    Args:
        buffer (torch.Tensor): ``uint8`` tensor of ``len * slot`` bytes.
        lengths (torch.Tensor): ``int64`` tensor, the pickle size of each object.
        slot (int): bytes per object.
    """

    __slots__ = ("_buffer", "_lengths", "_slot")

    def __init__(self, buffer: torch.Tensor, lengths: torch.Tensor, slot: int) -> None:
        self._buffer = buffer
        self._lengths = lengths
        self._slot = slot

    @classmethod
    def from_items(cls, items: Iterable[Any]) -> SharedItems:
        """Pickles ``items`` into new shared-memory tensors."""
        payloads = [pickle.dumps(item) for item in items]
        slot = max([MIN_SLOT, *(2 * len(p) for p in payloads)])
        buffer = torch.zeros(len(payloads) * slot, dtype=torch.uint8)
        lengths = torch.zeros(len(payloads), dtype=torch.int64)
        out = cls(buffer, lengths, slot)
        for i, payload in enumerate(payloads):
            out._write(i, payload)
        buffer.share_memory_()
        lengths.share_memory_()
        return out

    def _write(self, i: int, payload: bytes) -> None:
        n = len(payload)
        if n > self._slot:
            msg = (
                f"cannot write an object of {n} pickled bytes into position {i} of a shared NonTensorStack: "
                f"its slots hold {self._slot} bytes (twice the largest object when it was shared). "
                "Share the stack again (e.g. `td.clone().share_memory_()`) with the larger objects in it."
            )
            raise RuntimeError(msg)
        start = i * self._slot
        if n:
            self._buffer[start : start + n] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        self._lengths[i] = n

    def __len__(self) -> int:
        return self._lengths.numel()

    def _read(self, i: int) -> Any:
        n = int(self._lengths[i])
        start = i * self._slot
        return pickle.loads(bytes(self._buffer[start : start + n].tolist()))  # noqa: S301 - our own shared memory

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            msg = f"index {index} is out of range for a shared NonTensorStack of {n} objects."
            raise IndexError(msg)
        return self._read(index % n)

    def __setitem__(self, index: int, value: Any) -> None:
        n = len(self)
        if not -n <= index < n:
            msg = f"index {index} is out of range for a shared NonTensorStack of {n} objects."
            raise IndexError(msg)
        self._write(index % n, pickle.dumps(value))

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self._read(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (SharedItems, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        # the tensors go through torch.multiprocessing's reductions (shared handles)
        return (SharedItems, (self._buffer, self._lengths, self._slot))

    def __repr__(self) -> str:
        return f"SharedItems({list(self)!r})"
