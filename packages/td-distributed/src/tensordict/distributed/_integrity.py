"""Completeness of received messages, and the cap on what a header may make us allocate.

gloo accepts a message *shorter* than the posted receive buffer and does not say how
many bytes arrived. A sender that stops early (a crash, a bug, a hostile peer) would
leave the rest of the buffer as it was: zeros, or the previous transfer's bytes in a
reused buffer. So every point-to-point transfer over gloo carries a completeness check,
in one of two modes (:func:`set_integrity_mode`, ``TENSORDICT_DIST_INTEGRITY``):

- ``"tail"`` (the default, flag ``TAILS``): the header's reserved bytes ``48:56`` hold a
  CRC-32 of the rest of the *prefix* (segment table, metadata: what is parsed) and a
  random per-transfer nonce. The stream ends with a trailer: the last (up to) 8 bytes
  of every payload segment, then the nonce and its complement. A message that stops
  early leaves the trailer position holding older bytes, which match a fresh 32-bit
  nonce with probability 2**-32; before receiving a segment, the receiver writes the
  complement of the expected last bytes into the destination, so a short segment is
  always caught. The cost does not grow with the payload (a few small ops per
  transfer), which keeps a transfer of small leaves close to one raw ``send``.
- ``"crc"`` (flag ``CHECKED``): two CRC-32 checksums, one over the stream after the
  header (segment table, metadata, inline payload), one over the payload segments in
  order. This also catches bytes corrupted in the middle of the payload (which TCP's
  own checksums already guard on the wire), at about 0.5 ms per MB on each side.

The receiver accepts either mode, requires one of them on a backend that can deliver
short messages (gloo), and checks it before any value is used; a mismatch raises
:class:`WireError` ("incomplete or corrupted"). Backends that only deliver exact sizes
(nccl) need no check, and the collectives (exact sizes on every backend) carry none.

The allocation cap: a header announcing more bytes than :func:`max_message_bytes`
(default: half the machine's physical memory; ``TENSORDICT_DIST_MAX_BYTES`` or
:func:`set_max_message_bytes` change it) is refused before anything is allocated.
"""

from __future__ import annotations

import ctypes
import os
import random
import struct
import zlib

import torch

__all__ = [
    "FLAG_CHECKED",
    "FLAG_TAILS",
    "max_message_bytes",
    "set_max_message_bytes",
    "integrity_mode",
    "set_integrity_mode",
    "crc_of",
    "crc_chain",
    "write_crcs",
]

#: flag: the header's checksum fields are set (mode ``"crc"``)
FLAG_CHECKED = 4
#: flag: the header holds a prefix checksum and a nonce; the stream ends with a trailer (mode ``"tail"``)
FLAG_TAILS = 8
#: bytes of the nonce pair that ends a ``TAILS`` stream
NONCE_LEN = 8
_MODES = ("tail", "crc")
_MODE: list[str | None] = [None]
_NONCE = struct.Struct("<II")
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
    if n <= 4096:
        return zlib.crc32(ctypes.string_at(t.data_ptr(), n), crc)
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
    poke(stream, CRC_OFFSET, _CRCS.pack(crc_of(stream[HEADER_LEN:stream_len]), crc_chain(segments)))


def read_crcs(raw: bytes) -> tuple[int, int]:
    """``(stream crc, segments crc)`` from the header bytes."""
    return _CRCS.unpack_from(raw, CRC_OFFSET)


# ---------------------------------------------------------------------- modes
def integrity_mode() -> str:
    """How this process's point-to-point sends over gloo prove they arrived whole.

    Returns:
        ``"tail"`` (default: a prefix checksum, a per-transfer nonce at the end of the
        stream and the last bytes of every segment; constant cost) or ``"crc"``
        (CRC-32 of every byte sent; about 0.5 ms per MB on each side). Set with
        :func:`set_integrity_mode` or the ``TENSORDICT_DIST_INTEGRITY`` environment
        variable. A receiver accepts both.

    Raises:
        ValueError: ``TENSORDICT_DIST_INTEGRITY`` names another mode.

    Examples:
        >>> from tensordict.distributed import integrity_mode
        >>> integrity_mode()
        'tail'
    """
    mode = _MODE[0]
    if mode is None:
        env = os.environ.get("TENSORDICT_DIST_INTEGRITY", "tail").strip().lower() or "tail"
        if env not in _MODES:
            msg = f"TENSORDICT_DIST_INTEGRITY must be one of {_MODES}, got {env!r}."
            raise ValueError(msg)
        mode = _MODE[0] = env
    return mode


def set_integrity_mode(mode: str | None) -> None:
    """Sets how this process's sends are checked (see :func:`integrity_mode`).

    Args:
        mode (str or None): ``"tail"`` or ``"crc"``; ``None`` restores the default
            (the environment variable, else ``"tail"``).

    Raises:
        ValueError: an unknown mode.

    Examples:
        >>> from tensordict.distributed import integrity_mode, set_integrity_mode
        >>> set_integrity_mode("crc")
        >>> integrity_mode()
        'crc'
        >>> set_integrity_mode(None)
    """
    if mode is not None and mode not in _MODES:
        msg = f"set_integrity_mode expects one of {_MODES} or None, got {mode!r}."
        raise ValueError(msg)
    _MODE[0] = mode


def tail_of(seg: torch.Tensor) -> bytes:
    """The last (up to) 8 bytes of a ``uint8`` segment, zero-padded to 8."""
    k = min(8, seg.numel())
    if not k:
        return bytes(8)
    end = seg[seg.numel() - k :]
    if end.device.type != "cpu" or not end.is_contiguous():
        end = end.contiguous().cpu()
    return ctypes.string_at(end.data_ptr(), k) + bytes(8 - k)


def trailer(segments: list) -> tuple[bytes, int]:
    """``(trailer bytes, nonce)`` of a ``TAILS`` stream whose payload segments are ``segments``."""
    nonce = random.getrandbits(32)
    tails = b"".join(tail_of(s) for s in segments)
    return tails + _NONCE.pack(nonce, nonce ^ 0xFFFFFFFF), nonce


def poke(t: torch.Tensor, offset: int, data: bytes) -> None:
    """Writes ``data`` at byte ``offset`` of a contiguous CPU ``uint8`` tensor (no tensor ops)."""
    if offset < 0 or offset + len(data) > t.numel():
        raise IndexError(f"poke: {len(data)} bytes at {offset} do not fit in {t.numel()} bytes")
    ctypes.memmove(t.data_ptr() + offset, data, len(data))


def write_tail_header(stream: torch.Tensor, prefix_len: int, nonce: int, end: bytes) -> None:
    """Writes the prefix checksum and the nonce into the header of ``stream``, ``end`` at its end."""
    addr = stream.data_ptr()
    poke(stream, stream.numel() - len(end), end)
    poke(stream, CRC_OFFSET, _CRCS.pack(zlib.crc32(ctypes.string_at(addr + HEADER_LEN, prefix_len - HEADER_LEN)), nonce))


def nonce_ok(end: bytes, nonce: int) -> bool:
    """Whether the last 8 bytes of a received stream are the nonce pair the header announced."""
    return end == _NONCE.pack(nonce, nonce ^ 0xFFFFFFFF)


def arm_segments(bufs: list, tails: bytes) -> None:
    """Before receiving: writes the complement of each segment's expected last bytes into it."""
    for j, buf in enumerate(bufs):
        k = min(8, buf.numel())
        if k:
            flipped = bytes(b ^ 0xFF for b in tails[8 * j : 8 * j + k])
            if buf.device.type == "cpu" and buf.is_contiguous():
                poke(buf, buf.numel() - k, flipped)
            else:
                buf[buf.numel() - k :].copy_(torch.frombuffer(bytearray(flipped), dtype=torch.uint8))


def segments_ok(bufs: list, tails: bytes) -> bool:
    """After receiving: whether every segment ends with the bytes the trailer announced."""
    return all(tail_of(buf) == tails[8 * j : 8 * j + 8] for j, buf in enumerate(bufs))
