"""Reading large bulk replies straight into their final buffers.

redis-py's pure-Python parser copies a large reply several times (socket chunks into a
``BytesIO``, then out of it). For the replies that carry tensor data (``GET``, ``MGET``)
the store reads the reply itself: the header lines through a small buffer, each payload
with ``recv_into`` into a ``bytearray`` of the declared size, which then backs the tensor
(``torch.frombuffer``) without another copy, or into a sink that decodes a record group
as it arrives (``_read.GroupSink``). The transactions of indexed reads and writes are
read by ``_txn``, on the same reader.

A declared size larger than what the store's metadata allows is refused before anything
is allocated (the connection is then dropped, so no half-read reply is left on it). Any
other surprise (an unexpected reply type, unread bytes in redis-py's own buffer) falls
back to the ordinary client call.
"""

from __future__ import annotations

import select
import socket
from typing import Any

import redis.exceptions as rexc

__all__ = ["bulk_call", "socket_of", "Fallback"]

_CHUNK = 1 << 16


class Fallback(Exception):
    """The fast path does not apply; use the ordinary client call."""


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0

    def _fill(self) -> None:
        chunk = self.sock.recv(_CHUNK)
        if not chunk:
            raise rexc.ConnectionError("Connection closed by server.")
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += chunk

    def line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                out = bytes(self.buf[self.pos : end])
                self.pos = end + 2
                return out
            self._fill()

    def payload(self, n: int, into: memoryview | None = None) -> Any:
        """The next ``n`` payload bytes (and their CRLF): a new ``bytearray``, or the first
        ``n`` bytes of ``into`` (a buffer the caller reuses) when given."""
        if into is not None and n <= len(into):
            out: Any = into[:n]
            view = out
        else:
            out = bytearray(n)
            view = memoryview(out)
        have = min(len(self.buf) - self.pos, n)
        view[:have] = self.buf[self.pos : self.pos + have]
        self.pos += have
        got = have
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise rexc.ConnectionError("Connection closed by server.")
            got += k
        while len(self.buf) - self.pos < 2:
            self._fill()
        self.pos += 2  # the CRLF after the payload
        return out

    def streamed(self, n: int, sink: Any) -> Any:
        """The next ``n`` payload bytes handed to ``sink`` as they arrive (``sink.space()``:
        where the next bytes go; ``sink.advance(k)``: ``k`` bytes were put there;
        ``sink.finish()``); returns ``sink``."""
        have = min(len(self.buf) - self.pos, n)
        fed = 0
        while fed < have:
            space = sink.space()
            k = min(len(space), have - fed)
            space[:k] = self.buf[self.pos + fed : self.pos + fed + k]
            sink.advance(k)
            fed += k
        self.pos += have
        got = have
        while got < n:
            space = sink.space()
            k = self.sock.recv_into(space, min(len(space), n - got))
            if not k:
                raise rexc.ConnectionError("Connection closed by server.")
            sink.advance(k)
            got += k
        while len(self.buf) - self.pos < 2:
            self._fill()
        self.pos += 2
        sink.finish()
        return sink

    def bulk(self, limit: int, into: Any = None) -> Any:
        """A bulk reply (``None`` for a nil) of at most ``limit`` bytes: a ``bytearray``, the
        region of the buffer ``into``, or, when ``into`` is a sink expecting exactly this
        many bytes (``into.nbytes``), the sink fed with them (see :meth:`streamed`)."""
        head = self.line()
        kind = head[:1]
        if kind == b"$":
            n = int(head[1:])
            if n < 0:
                return None
            if n > limit:
                raise _TooLarge(n, limit)
            if into is not None and hasattr(into, "space"):
                return self.streamed(n, into) if n == into.nbytes else self.payload(n)
            return self.payload(n, into)
        if kind == b"_":
            return None
        if kind == b"-":
            raise _error(head)
        raise _Unexpected(head[:40])

    def reply(self, limit: int | None = None) -> Any:
        """One reply of any of the simple types (errors are returned, not raised); a bulk
        string declared longer than ``limit`` raises ``_TooLarge`` before it is read."""
        head = self.line()
        kind = head[:1]
        if kind in (b"+", b":"):
            return int(head[1:]) if kind == b":" else head[1:]
        if kind == b"$":
            n = int(head[1:])
            if limit is not None and n > limit:
                raise _TooLarge(n, limit)
            return None if n < 0 else bytes(self.payload(n))
        if kind == b"_":
            return None
        if kind == b"-":
            return _error(head)
        if kind == b"*":
            n = int(head[1:])
            return None if n < 0 else [self.reply(limit) for _ in range(n)]
        raise _Unexpected(head[:40])


def _error(head: bytes) -> rexc.ResponseError:
    text = head[1:].decode(errors="replace")
    return rexc.NoScriptError(text) if text.startswith("NOSCRIPT") else rexc.ResponseError(text)


class _TooLarge(Exception):
    def __init__(self, n: int, limit: int) -> None:
        super().__init__(n, limit)
        self.n = n
        self.limit = limit


class _Unexpected(Exception):
    pass


def _idle(sock: Any) -> bool:
    """Whether a connected socket has nothing to read (neither bytes nor the server's end
    of stream): one ``select`` that does not wait (a ``recv`` would wait for the socket's
    timeout when it has one)."""
    try:
        return not select.select([sock], [], [], 0)[0]
    except (OSError, ValueError):
        return False


def socket_of(conn: Any) -> Any:
    """The socket of ``conn`` (a redis-py connection, connected if it is not, reconnected
    if the server closed it since the last call), with nothing left unread in redis-py's
    own buffer.

    Raises:
        Fallback: not a connection whose socket the store can use.
    """
    sock = getattr(conn, "_sock", None)
    if sock is not None and not _idle(sock):  # closed by the server (restarted?) or stale bytes
        conn.disconnect()
        sock = None
    if sock is None:
        conn.connect()
        sock = getattr(conn, "_sock", None)
    sbuf = getattr(getattr(conn, "_parser", None), "_buffer", None)
    if sock is None or (sbuf is not None and sbuf.unread_bytes()):
        raise Fallback
    return sock


def bulk_call(conn: Any, args: tuple, limits: list, array: bool, into: list | None = None) -> list:
    """Sends ``args`` on ``conn`` (a checked-out redis-py connection) and reads a bulk reply (``array=False``) or an array of bulk
    replies (one limit per element). Returns a list of ``bytearray`` (or ``None``); an
    element with a buffer in ``into`` is read into it instead (a ``memoryview`` of it is
    returned, valid until the caller reuses the buffer).

    Raises:
        Fallback: the fast path does not apply (nothing was sent, or the connection was
            dropped after an unexpected reply); call the client normally.
        ValueError: a payload declared larger than its limit (the connection is dropped).
        redis.exceptions.ResponseError / ConnectionError: as the client would raise them.
    """
    try:
        socket_of(conn)
        conn.send_command(*args)
        reader = _Reader(conn._sock)
        inside = False  # reading the elements of an array: an error leaves the rest unread
        try:
            if not array:
                return [reader.bulk(limits[0], into[0] if into else None)]
            head = reader.line()
            if head[:1] == b"-":
                raise _error(head)
            if head[:1] != b"*" or int(head[1:]) != len(limits):
                raise _Unexpected(head[:40])
            inside = True
            return [reader.bulk(lim, into[i] if into else None) for i, lim in enumerate(limits)]
        except _TooLarge as err:
            conn.disconnect()
            msg = f"the server declared a reply of {err.n} bytes where at most {err.limit} were expected"
            raise ValueError(msg) from None
        except _Unexpected:
            conn.disconnect()
            raise Fallback from None
        except rexc.ResponseError:
            if inside or reader.pos != len(reader.buf):
                conn.disconnect()
            raise
    except (rexc.ConnectionError, rexc.TimeoutError, OSError):
        conn.disconnect()
        raise
