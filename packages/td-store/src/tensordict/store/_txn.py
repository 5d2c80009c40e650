"""One ``MULTI``/``EXEC`` transaction per store call, packed and read by the store itself.

An indexed read of a stored TensorDict is a list of byte ranges (``GETRANGE``) of a few
string keys: one range per selected batch element, or one per run of consecutive
elements. A transaction holds *blocks* of ranges, each block one key and one range
length, plus any other commands (``SETRANGE``, ``EVAL``, ``GET``, ...).

Why not redis-py's pipeline: packing a few hundred commands in Python and parsing their
replies one by one costs milliseconds, several times the server's work. Here:

* a block's commands are encoded (RESP multi-bulk, per the Redis serialization protocol
  specification) by one bytes-format call, with the offsets' digit counts computed as
  tensors;
* the reply to a block is a run of bulk strings of one length, so its layout is known
  in advance: it is received into one buffer and checked as a ``[n, width]`` byte
  tensor (every header and trailer at its place), then the payloads are a strided view
  of that buffer. A reply that differs anywhere (a range shorter than asked, an error,
  a missing key) is parsed element by element instead and reported as
  :class:`RangeMismatch`; the connection is left clean or dropped, never half read.

Nothing here waits for bytes the server does not owe: before every blocking ``recv``
the bytes received so far are checked against the expected layout, so a reply that
diverges is detected from what has arrived.
"""

from __future__ import annotations

from typing import Any

import redis.exceptions as rexc
import torch

from tensordict.store._wire import _Reader, _TooLarge, _Unexpected, socket_of

__all__ = ["Txn", "RangeMismatch", "CommandCache", "pack"]

_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC = b"*1\r\n$4\r\nEXEC\r\n"
_CRLF = torch.tensor([13, 10], dtype=torch.uint8)
#: bulk replies of generic commands larger than this are refused (a planted value)
GENERIC_LIMIT = 1 << 28


class RangeMismatch(Exception):
    """A block's reply is not the ranges asked for: ``block`` is its index, ``detail`` says
    what came back instead (the whole reply was read; the connection is usable)."""

    def __init__(self, block: int, detail: str) -> None:
        super().__init__(block, detail)
        self.block = block
        self.detail = detail


def pack(args: tuple) -> list:
    """The multi-bulk encoding of one command, as a list of byte strings (payloads given as
    ``bytes``/``bytearray``/``memoryview`` are not copied here)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if a.__class__ is str:
            a = a.encode()
        elif a.__class__ is int:
            a = b"%d" % a
        elif not isinstance(a, (bytes, bytearray, memoryview)):
            a = str(a).encode()  # a float, as redis-py sends it
        out.append(b"$%d\r\n" % len(a))
        out.append(a)
        out.append(b"\r\n")
    return out


#: ``10 ** k`` for k = 1..18: ``bucketize`` against it counts a number's decimal digits
_TENS = torch.tensor([10**k for k in range(1, 19)], dtype=torch.int64)


def _getranges(key: bytes, starts: torch.Tensor, length: int, split: bool = False) -> Any:
    """The ``GETRANGE key s s+length-1`` commands for every ``s`` of ``starts`` (int64,
    non-negative), multi-bulk encoded: one format call for all of them, with the digit
    counts of the offsets computed as tensors. ``split``: a list of one command each."""
    head = b"*4\r\n$8\r\nGETRANGE\r\n$%d\r\n%b\r\n" % (len(key), key)
    fmt = head.replace(b"%", b"%%") + b"$%d\r\n%d\r\n$%d\r\n%d\r\n"
    ends = starts + (length - 1)
    cols = [torch.bucketize(starts, _TENS, right=True) + 1, starts, torch.bucketize(ends, _TENS, right=True) + 1, ends]
    vals = torch.stack(cols, 1).view(-1).tolist()
    out = (fmt * starts.numel()) % tuple(vals)
    if not split:
        return out
    base = len(head) + 10  # per offset: "$", its digit count, CRLF, the digits, CRLF
    pieces = []
    at = 0
    for ds, de in zip(vals[0::4], vals[2::4]):
        n = base + ds + de + len(str(ds)) + len(str(de))
        pieces.append(out[at : at + n])
        at += n
    return pieces


class _Block:
    __slots__ = ("key", "starts", "length", "n", "hdr", "size", "at", "hdr_t", "payload")

    def __init__(self, key: bytes, starts: Any, length: int, payload: bytes | None = None) -> None:
        self.key = key
        self.starts = starts  # int64 tensor or list of int
        self.length = length
        self.n = starts.numel() if isinstance(starts, torch.Tensor) else len(starts)
        self.hdr = b"$%d\r\n" % length
        self.size = len(self.hdr) + length + 2  # one element of the reply
        self.at = 0
        self.hdr_t: Any = None
        self.payload = payload

    def encoded(self) -> bytes:
        if self.payload is None:
            starts = self.starts if isinstance(self.starts, torch.Tensor) else torch.tensor(self.starts, dtype=torch.int64)
            self.payload = _getranges(self.key, starts, self.length)
        return self.payload

    def start_list(self) -> list:
        return self.starts.tolist() if isinstance(self.starts, torch.Tensor) else list(self.starts)

    def check(self, u8: torch.Tensor, buf: bytearray, upto: int) -> bool:
        """Whether the received bytes ``buf[self.at:upto]`` agree with this block's layout."""
        have = min(upto - self.at, self.n * self.size)
        if have <= 0:
            return True
        full = have // self.size
        h = len(self.hdr)
        if full:
            if self.hdr_t is None:
                self.hdr_t = torch.frombuffer(bytearray(self.hdr), dtype=torch.uint8)
            v = u8[self.at : self.at + full * self.size].view(full, self.size)
            if not torch.equal(v[:, :h], self.hdr_t.expand(full, h)) or not torch.equal(
                v[:, h + self.length :], _CRLF.expand(full, 2)
            ):
                return False
        rem = have - full * self.size
        if rem:
            p = self.at + full * self.size
            k = min(rem, h)
            if buf[p : p + k] != self.hdr[:k]:
                return False
            if rem > h + self.length:
                t = rem - h - self.length
                if buf[p + h + self.length : p + rem] != b"\r\n"[:t]:
                    return False
        return True


class CommandCache:
    """The encoded ``GETRANGE`` command of every row of a row window of a string, built
    once (one vectorized encoding of all the rows) when the window is first read by
    index: an indexed read then joins cached commands instead of encoding offsets.

    Bounded: strings of more than ``limit_rows`` rows are not cached (their commands are
    encoded per call), and past ``max_rows`` cached rows in all the cache starts over.
    """

    def __init__(self, limit_rows: int = 1 << 16, max_rows: int = 1 << 18) -> None:
        self.limit_rows = limit_rows
        self.max_rows = max_rows
        self.tables: dict = {}
        self.size = 0

    def commands(self, key: bytes, rs: int, lo: int, w: int, rows: list, total_rows: int) -> bytes | None:
        """The commands reading bytes ``[lo, lo + w)`` of each row of ``rows`` (in order; all
        below ``total_rows``), or ``None`` when the string is too large to cache."""
        at = (key, rs, lo, w, total_rows)
        table = self.tables.get(at)
        if table is None:
            if total_rows > self.limit_rows:
                return None
            if self.size + total_rows > self.max_rows:
                self.tables.clear()
                self.size = 0
            table = []
            for first in range(0, total_rows, 8192):  # bounded temporaries
                starts = torch.arange(first, min(first + 8192, total_rows), dtype=torch.int64) * rs + lo
                table += _getranges(key, starts, w, split=True)
            self.tables[at] = table
            self.size += total_rows
        return b"".join([table[r] for r in rows])


class Txn:
    """Commands run as one ``MULTI``/``EXEC`` round trip: blocks of ranges (see the module
    docstring) and generic commands."""

    def __init__(self) -> None:
        self.blocks: list = []
        self.commands: list = []
        self.limits: list = []

    def ranges(self, key: str, starts: Any, length: int, payload: bytes | None = None) -> int:
        """Queues ``GETRANGE`` of ``length`` bytes at each byte offset of ``starts`` (an int64
        tensor or a list of int; ``payload``: those commands already encoded, see
        :class:`CommandCache`); returns the block's index (its result is
        ``[len(starts), length]`` uint8)."""
        if isinstance(starts, torch.Tensor):
            starts = starts.reshape(-1).to(torch.int64)
        self.blocks.append(_Block(key.encode(), starts, int(length), payload))
        return len(self.blocks) - 1

    def command(self, *args: Any, limit: int = GENERIC_LIMIT) -> int:
        """Queues a command; returns its index among the generic replies."""
        self.commands.append(args)
        self.limits.append(limit)
        return len(self.commands) - 1

    def __len__(self) -> int:
        return len(self.blocks) + len(self.commands)

    # ------------------------------------------------------------------ running
    def run(self, conn: Any) -> tuple:
        """Runs on ``conn`` (a checked-out redis-py connection): ``(block results, generic
        replies)``; raises :class:`RangeMismatch`,
        ``redis.exceptions.ResponseError`` (a refused command: nothing applied) or the
        connection errors; :class:`~tensordict.store._wire.Fallback` when the client is
        not a plain redis-py client (nothing was sent)."""
        try:
            sock = socket_of(conn)
            parts = [_MULTI]
            for b in self.blocks:
                if b.n and b.length:
                    parts.append(b.encoded())
            for c in self.commands:
                parts += pack(c)
            parts.append(_EXEC)
            sock.sendall(b"".join(parts))
            try:
                return self._read(sock)
            except (_Unexpected, _TooLarge):
                conn.disconnect()
                raise rexc.ResponseError("unexpected reply to a transaction") from None
        except (rexc.ConnectionError, rexc.TimeoutError, OSError):
            conn.disconnect()
            raise

    def run_pipeline(self, client: Any) -> tuple:
        """:meth:`run` through the client's own transaction pipeline (a cluster client, or
        another client type)."""
        pipe = client.pipeline(transaction=True)
        for b in self.blocks:
            for s in b.start_list():
                pipe.getrange(b.key, s, s + b.length - 1)
        for c in self.commands:
            pipe.execute_command(*c)
        got = pipe.execute()
        out = []
        i = 0
        for j, b in enumerate(self.blocks):
            items = got[i : i + b.n]
            i += b.n
            for r in items:
                if not isinstance(r, bytes) or len(r) != b.length:
                    what = f"{len(r)} bytes" if isinstance(r, bytes) else repr(r)
                    raise RangeMismatch(j, f"expected {b.length} bytes per range, the server returned {what}")
            data = bytearray(b"".join(items))
            out.append(torch.frombuffer(data, dtype=torch.uint8).view(b.n, b.length) if data else torch.empty(b.n, b.length, dtype=torch.uint8))
        return out, got[i:]

    def _read(self, sock: Any) -> tuple:
        blocks = [b for b in self.blocks if b.n and b.length]
        total = len(blocks) and sum(b.n for b in blocks)
        total += len(self.commands)
        prefix = b"+OK\r\n" + b"+QUEUED\r\n" * total + b"*%d\r\n" % total
        at = len(prefix)
        for b in blocks:
            b.at = at
            at += b.n * b.size
        buf = bytearray(at)
        view = memoryview(buf)
        u8 = torch.frombuffer(buf, dtype=torch.uint8) if at else torch.empty(0, dtype=torch.uint8)
        got = 0
        while got < at:
            if got and not self._agrees(u8, buf, got, prefix):
                return self._slow(sock, bytes(buf[:got]), total)
            k = sock.recv_into(view[got:], at - got)
            if not k:
                raise rexc.ConnectionError("Connection closed by server.")
            got += k
        if not self._agrees(u8, buf, got, prefix):
            return self._slow(sock, bytes(buf), total)
        reader = _Reader(sock)
        replies = [reader.reply(lim) for lim in self.limits]
        for r in replies:
            if isinstance(r, rexc.ResponseError):
                raise r
        out = []
        for b in self.blocks:
            if not (b.n and b.length):
                out.append(torch.empty(b.n, b.length, dtype=torch.uint8))
                continue
            h = len(b.hdr)
            out.append(u8[b.at : b.at + b.n * b.size].view(b.n, b.size)[:, h : h + b.length])
        return out, replies

    def _agrees(self, u8: torch.Tensor, buf: bytearray, got: int, prefix: bytes) -> bool:
        k = min(got, len(prefix))
        if buf[:k] != prefix[:k]:
            return False
        return all(b.check(u8, buf, got) for b in self.blocks if b.n and b.length)

    def _slow(self, sock: Any, head: bytes, total: int) -> tuple:
        """Reads the rest of a reply that differs from the expected layout, element by
        element; raises the first error or :class:`RangeMismatch`."""
        reader = _Reader(sock)
        reader.buf = bytearray(head)
        first = reader.reply(GENERIC_LIMIT)
        queued = [reader.reply(GENERIC_LIMIT) for _ in range(total)]
        result = reader.reply(GENERIC_LIMIT)
        for r in (first, *queued, result):
            if isinstance(r, rexc.ResponseError):
                raise r
        if not isinstance(result, list) or len(result) != total:
            raise rexc.ResponseError("the transaction was not executed")
        out = []
        i = 0
        mismatch = None
        for j, b in enumerate(self.blocks):
            if not (b.n and b.length):
                out.append(torch.empty(b.n, b.length, dtype=torch.uint8))
                continue
            items = result[i : i + b.n]
            i += b.n
            for r in items:
                if mismatch is None and (not isinstance(r, bytes) or len(r) != b.length):
                    what = f"an error ({r})" if isinstance(r, Exception) else f"{len(r)} bytes" if isinstance(r, bytes) else repr(r)
                    mismatch = RangeMismatch(j, f"expected {b.length} bytes per range, the server returned {what}")
            if mismatch is None:
                out.append(torch.frombuffer(bytearray(b"".join(items)), dtype=torch.uint8).view(b.n, b.length))
        replies = result[i:]
        if mismatch is not None:
            raise mismatch
        for r in replies:
            if isinstance(r, rexc.ResponseError):
                raise r
        return out, replies
