"""Completeness of received messages, and the cap on what a header may make us allocate.

gloo accepts a message *shorter* than the posted receive buffer and does not say how
many bytes arrived. A sender that stops early (a crash, a bug, a hostile peer) would
leave the rest of the buffer as it was: zeros, or the previous transfer's bytes in a
reused buffer. So every transfer carries two CRC-32 checksums in its header (its
reserved bytes ``48:56``): one over the stream after the header (segment table, metadata, inline
payload), one over the payload segments in order, and the ``CHECKED`` flag. On a
backend that can deliver short messages (gloo), the receiver requires the flag and
checks both sums before any value is used; a mismatch raises :class:`WireError`
("incomplete or corrupted"). Backends that only deliver exact sizes (nccl) need no
checksum, and their buffers live on the GPU: the sender leaves the flag off there.

The allocation cap: a header announcing more bytes than :func:`max_message_bytes`
(default: half the machine's physical memory; ``TENSORDICT_DIST_MAX_BYTES`` or
:func:`set_max_message_bytes` change it) is refused before anything is allocated.
"""

from __future__ import annotations

import ctypes
import os
import struct
import zlib

import torch

__all__ = ["FLAG_CHECKED", "max_message_bytes", "set_max_message_bytes", "crc_of", "crc_chain", "write_crcs"]

#: flag: the header's checksum fields are set
FLAG_CHECKED = 4
#: byte offset of the two ``uint32`` checksums in the 56-byte header
CRC_OFFSET = 48
#: bytes of the header (the checksummed stream starts after it)
HEADER_LEN = 56
_CRCS = struct.Struct("<II")

_CAP: list[int | None] = [None]


def _default_cap() -> int:
    env = os.environ.get("TENSORDICT_DIST_MAX_BYTES")
    if env:
        try:
            value = int(env)
        except ValueError:
            msg = f"TENSORDICT_DIST_MAX_BYTES must be an integer number of bytes, got {env!r}."
            raise ValueError(msg) from None
        if value <= 0:
            msg = f"TENSORDICT_DIST_MAX_BYTES must be positive, got {value}."
            raise ValueError(msg)
        return value
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        physical = 16 << 30
    return max(physical // 2, 1 << 20)


def max_message_bytes() -> int:
    """The most bytes one received message (metadata plus payload) may announce.

    Returns:
        the cap in bytes: :func:`set_max_message_bytes`'s value, else the
        ``TENSORDICT_DIST_MAX_BYTES`` environment variable, else half the machine's
        physical memory.

    Examples:
        >>> from tensordict.distributed import max_message_bytes
        >>> max_message_bytes() > 0
        True
    """
    cap = _CAP[0]
    if cap is None:
        cap = _CAP[0] = _default_cap()
    return cap


def set_max_message_bytes(nbytes: int | None) -> None:
    """Sets the receive cap of this process (see :func:`max_message_bytes`).

    Args:
        nbytes (int or None): the cap in bytes; ``None`` restores the default.

    Raises:
        ValueError: ``nbytes`` is not a positive int.

    Examples:
        >>> from tensordict.distributed import max_message_bytes, set_max_message_bytes
        >>> set_max_message_bytes(1 << 30)
        >>> max_message_bytes()
        1073741824
        >>> set_max_message_bytes(None)
    """
    if nbytes is not None and (not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0):
        msg = f"set_max_message_bytes expects a positive int (bytes) or None, got {nbytes!r}."
        raise ValueError(msg)
    _CAP[0] = nbytes


def crc_of(t: torch.Tensor, crc: int = 0) -> int:
    """CRC-32 of the bytes of a contiguous CPU ``uint8`` tensor, continuing ``crc``."""
    n = t.numel()
    if n == 0:
        return crc
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.contiguous().cpu()
    view = (ctypes.c_char * n).from_address(t.data_ptr())
    return zlib.crc32(view, crc)


def crc_chain(tensors: list) -> int:
    """CRC-32 of the concatenated bytes of ``tensors`` (``uint8`` views)."""
    crc = 0
    for t in tensors:
        crc = crc_of(t, crc)
    return crc


def write_crcs(stream: torch.Tensor, stream_len: int, segments: list) -> None:
    """Writes both checksums into the header of ``stream`` (a CPU ``uint8`` tensor)."""
    values = _CRCS.pack(crc_of(stream[HEADER_LEN:stream_len]), crc_chain(segments))
    stream[CRC_OFFSET : CRC_OFFSET + 8].copy_(torch.frombuffer(bytearray(values), dtype=torch.uint8))


def read_crcs(raw: bytes) -> tuple[int, int]:
    """``(stream crc, segments crc)`` from the header bytes."""
    return _CRCS.unpack_from(raw, CRC_OFFSET)
