"""The one-message fast path of ``send``/``isend`` over gloo, for a TensorDict sent again.

A small TensorDict (payload up to :data:`~tensordict.distributed._wire.INLINE_MAX`)
travels over gloo as one message: the stream (header, metadata, inline payload,
``TAILS`` trailer; format in :mod:`tensordict.distributed._wire`). Once a plain
``TensorDict`` has been analysed (its :class:`~tensordict.distributed._wire._Snapshot`
is valid: same keys, same leaf objects, same batch sizes), everything in that
message except the payload and the per-transfer nonce is known. :class:`SendBuffer`
keeps the message ready: the prefix written once, its checksum computed once, and
the copy of the leaves into the payload planned once (one ``torch.stack`` or
``torch.cat`` per dtype, or one copy of a consolidated storage). A send then packs
the payload, writes a fresh nonce into the header and the trailer, and posts the
message: no walk of the TensorDict, no JSON, no argument resolution through
``torch.distributed``'s wrappers.

The bytes on the wire are exactly those of the general path (``_p2p``): a receiver
cannot tell them apart, and a receiver takes the same shortcut in reverse (it
compares the received prefix with the one its template implies, see
``_Incoming.try_fast``).

Only the common case takes this path: the default process group, gloo, a global
``dst`` (no ``group``/``group_dst``), the ``"tail"`` integrity mode, a plain
``TensorDict`` of CPU leaves without non-tensor data. Anything else, or a second
thread sending the same TensorDict at the same moment, takes the general path.
"""

from __future__ import annotations

import ctypes
import random
import struct
import threading
import time
import zlib
from typing import Any

import torch

from tensordict.distributed._integrity import integrity_mode
from tensordict.distributed._transport import comm_error, default_gloo, tag_sequence
from tensordict.distributed._wire import HEADER_SIZE, snapshot, word_pairs

__all__ = ["COUNTS", "SendBuffer", "fast_send"]

#: transfers that took the fast path in this process: ``[sends, receives]`` (for tests and tuning)
COUNTS = [0, 0]

_II = struct.Struct("<II")
#: byte offset of the (prefix checksum, nonce) pair in the header
_CRC_AT = 48


class SendBuffer:
    """The ready-made one-message stream of a TensorDict's structure and leaves.

    Args:
        plan: the structure's :class:`~tensordict.distributed._wire.Plan`.
        leaves (list): the TensorDict's tensor leaves (the snapshot's).
        storage (torch.Tensor or None): the consolidated storage, if the TensorDict is
            consolidated (the payload is then one copy of it).

    A buffer is used by one send at a time (``lock``); it is kept with the
    TensorDict's snapshot, so it dies with it.
    """

    __slots__ = ("stream", "window", "n", "crc", "runs", "pairs", "lock")

    def __init__(self, plan: Any, leaves: list, storage: torch.Tensor | None) -> None:
        prefix = plan.expected_prefix()
        p, total = len(prefix), plan.total
        self.n = n = p + total + 8
        self.stream = stream = torch.empty(n, dtype=torch.uint8)
        # a writable bytes view of the stream's memory, for struct.pack_into (no tensor ops)
        self.window = (ctypes.c_char * n).from_address(stream.data_ptr())
        ctypes.memmove(stream.data_ptr(), prefix, p)
        self.crc = zlib.crc32(memoryview(prefix)[HEADER_SIZE:])
        payload = stream[p : p + total]
        self.pairs: list = []
        self.runs: list = []  # (out tensor, leaves, stack?) per dtype run
        if storage is not None:
            self.pairs = word_pairs(payload, storage)
        else:
            for (dtype, start, nbytes, idxs), same in zip(plan.runs, plan.same_shape):
                if not nbytes:
                    continue
                slab = payload[start : start + nbytes].view(dtype)
                run = [leaves[i] for i in idxs]
                if same:
                    self.runs.append((slab.view(len(run), *run[0].shape), run, True))
                elif all(t.is_contiguous() for t in run):
                    self.runs.append((slab, [t.view(-1) for t in run], False))
                else:  # a non-contiguous leaf: flattened (copied) at each send
                    self.runs.append((slab, run, None))
        self.lock = threading.Lock()

    def fill(self) -> None:
        """Packs the current values of the leaves and stamps a fresh nonce."""
        for out, src in self.pairs:
            out.copy_(src)
        for out, run, same in self.runs:
            if same:
                torch.stack(run, out=out)
            elif same is None:
                torch.cat([t.reshape(-1) for t in run], out=out)
            else:
                torch.cat(run, out=out)
        nonce = random.getrandbits(32)
        _II.pack_into(self.window, _CRC_AT, self.crc, nonce)
        _II.pack_into(self.window, self.n - 8, nonce, nonce ^ 0xFFFFFFFF)


def _buffer_of(td: Any) -> SendBuffer | None:
    # only a TensorDict sent (or received into) before: a first send takes the general path,
    # which costs no more than building the buffer (a new TensorDict per step gains nothing)
    snap = snapshot(td, analyse=False)
    if snap is None:
        return None
    buf = snap.fast
    if buf is None:
        leaves, plan, has_values, plain, storage = snap.result
        ok = (
            plain
            and not has_values
            and plan.expected_prefix() is not None
            and all(t.device.type == "cpu" for t in leaves)
            and (storage is None or storage.device.type == "cpu")
        )
        buf = snap.fast = SendBuffer(plan, leaves, storage) if ok else False
    return buf or None


def fast_send(op: str, td: Any, dst: Any, init_tag: int, pseudo_rand: bool) -> bool:
    """Sends ``td`` to global rank ``dst`` over the default gloo group in one message, if the
    fast path applies (module docstring); returns ``False`` without doing anything otherwise.

    Raises:
        RuntimeError: the transfer failed (as the general path reports it).
    """
    info = default_gloo()
    if info is None or dst.__class__ is not int or integrity_mode() != "tail":
        return False
    pg, rank, size = info
    if not 0 <= dst < size or dst == rank or init_tag.__class__ is not int or init_tag < 0:
        return False
    buf = _buffer_of(td)
    if buf is None or not buf.lock.acquire(blocking=False):
        return False
    try:
        tag = tag_sequence(init_tag, True)(0) if pseudo_rand else init_tag
        with torch.no_grad():  # leaves that require grad are packed too
            buf.fill()
        started = time.monotonic()
        try:
            pg.send([buf.stream], dst, tag).wait()
        except Exception as err:  # noqa: BLE001 - any backend failure, as in wait_all
            raise comm_error(op, err, f"rank {dst}", None, started) from err
    finally:
        buf.lock.release()
    COUNTS[0] += 1
    return True

