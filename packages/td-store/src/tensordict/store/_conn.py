"""The connection to a Redis-protocol server and the key layout of a stored TensorDict.

Every key of one TensorDict carries its id in a hash tag (``{<td_id>}``), so on a
cluster all of them live in one slot and multi-key commands (``MGET``, ``MULTI``/``EXEC``,
scripts) stay legal::

    <prefix>:{<td_id>}:meta      hash    batch_size, device, kind, tensorclass, ...
    <prefix>:{<td_id>}:schema    hash    one field per stored path -> JSON description
    <prefix>:{<td_id>}:d:<path>  string  a tensor's raw bytes (C order, little endian)
                                 string  a JSON value shared by the whole batch
                                 list    one JSON value per batch element
    <prefix>:{<td_id>}:g:<gid>   string  a record group: the tensor leaves written
                                         together, interleaved per batch element (``_groups``)

Server errors are raised as :class:`StoreConnectionError` (a built-in
``ConnectionError``) or :class:`StoreAuthenticationError` (a ``PermissionError``), both
naming the server; both also derive from redis-py's own exception classes.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

import redis
import redis.exceptions as rexc

from tensordict.store._wire import Fallback, bulk_call

__all__ = [
    "STORE_BACKENDS",
    "StoreConnectionError",
    "StoreAuthenticationError",
    "Connection",
    "path_field",
    "field_path",
]

from typing import Literal

#: the largest reply kept in a reused buffer (larger ones get a buffer of their own)
SCRATCH_MAX = 1 << 26

#: The server families a store can talk to (all speak the Redis protocol).
STORE_BACKENDS = Literal["redis", "dragonfly"]
_BACKENDS = ("redis", "dragonfly")

#: separates the parts of a nested key in a data key's name and a schema field
_SEP = "\x1f"


class StoreConnectionError(ConnectionError, rexc.ConnectionError):
    """The server cannot be reached (or went away mid-command); the message names it."""


class StoreAuthenticationError(PermissionError, rexc.AuthenticationError):
    """The server refused the credentials (or asked for some); the message names it."""


def path_field(path: tuple) -> str:
    """The schema field (and data key suffix) of a nested key path."""
    return _SEP.join(path)


def field_path(field: str) -> tuple:
    return tuple(field.split(_SEP))


# Reads elements of JSON lists (one JSON value per batch element).
# KEYS: list keys; ARGV: group size per key, then flat element positions.
_LIST_GATHER = """
local nk = #KEYS
local out = {}
for k = 1, nk do
  local g = tonumber(ARGV[k])
  local vals = {}
  if redis.call('TYPE', KEYS[k]).ok == 'list' then
    for i = nk + 1, #ARGV do
      local p = tonumber(ARGV[i]) * g
      local got = redis.call('LRANGE', KEYS[k], p, p + g - 1)
      for j = 1, #got do vals[#vals + 1] = got[j] end
    end
  else
    local v = redis.call('GET', KEYS[k])
    if v then vals[1] = v end
  end
  out[k] = vals
end
return out
"""

# Writes elements of JSON lists: KEYS[1] the list key; ARGV[1] the number of elements of
# the whole list, ARGV[2] the group size, then (position, value) pairs. A shared JSON
# string is first expanded into a list of that many copies.
_LIST_SCATTER = """
local key = KEYS[1]
local n = tonumber(ARGV[1])
local g = tonumber(ARGV[2])
local t = redis.call('TYPE', key).ok
if t ~= 'list' then
  local v = 'null'
  if t == 'string' then v = redis.call('GET', key) end
  redis.call('DEL', key)
  for i = 1, n do redis.call('RPUSH', key, v) end
end
for i = 3, #ARGV, 2 do
  redis.call('LSET', key, tonumber(ARGV[i]) * g, ARGV[i + 1])
end
return 1
"""


# Reads byte ranges of several string keys in one atomic call. KEYS: data keys; ARGV:
# for each key, the number of ranges then (start, length) pairs. One string per key.
_RANGES = """
local out = {}
local a = 1
for k = 1, #KEYS do
  local n = tonumber(ARGV[a])
  a = a + 1
  local parts = {}
  for r = 1, n do
    local s = tonumber(ARGV[a])
    local l = tonumber(ARGV[a + 1])
    a = a + 2
    if l > 0 then parts[#parts + 1] = redis.call('GETRANGE', KEYS[k], s, s + l - 1) end
  end
  out[k] = table.concat(parts)
end
return out
"""


# Deletes the group strings that no schema entry refers to any more. KEYS[1]: the schema
# hash, KEYS[2..]: group keys; ARGV: their group ids (entries name theirs as "g":"<id>").
_GROUP_DROP = """
local vals = redis.call('HVALS', KEYS[1])
local dropped = 0
for i = 2, #KEYS do
  local pat = '"g":"' .. ARGV[i - 1] .. '"'
  local used = false
  for j = 1, #vals do
    if string.find(vals[j], pat, 1, true) then used = true break end
  end
  if not used then dropped = dropped + redis.call('DEL', KEYS[i]) end
end
return dropped
"""


class Connection:
    """A redis-py client plus what is needed to name the server, rebuild the client in
    another process (pickling) and run the store's scripts.

    Errors of the client are re-raised as :class:`StoreConnectionError` /
    :class:`StoreAuthenticationError` with the server's address in the message. A
    dropped connection is re-established by the client's pool on the next command.
    """

    def __init__(
        self,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        client: Any = None,
        redis_kwargs: dict | None = None,
    ) -> None:
        if backend not in _BACKENDS:
            msg = f"backend must be one of {_BACKENDS}, got {backend!r}."
            raise ValueError(msg)
        self.backend = backend
        self.host = host
        self.port = int(port)
        self.db = int(db)
        self.unix_socket_path = unix_socket_path
        self.redis_kwargs = dict(redis_kwargs or {})
        self._owns_client = client is None
        if client is None:
            kwargs = dict(self.redis_kwargs)
            if "retry" not in kwargs:
                # a dropped connection is retried quickly (redis-py's default backs off for
                # seconds, and also retries refused credentials, which cannot succeed)
                from redis.backoff import ExponentialBackoff
                from redis.retry import Retry

                kwargs["retry"] = Retry(ExponentialBackoff(cap=0.5, base=0.02), 3)
            if unix_socket_path is not None:
                client = redis.Redis(unix_socket_path=unix_socket_path, db=self.db, **kwargs)
            else:
                client = redis.Redis(host=host, port=self.port, db=self.db, **kwargs)
        else:
            ck = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
            self.host = ck.get("host", host)
            self.port = int(ck.get("port", port))
            self.db = int(ck.get("db", db))
            self.unix_socket_path = ck.get("path", unix_socket_path)
        self.client = client
        self._lock = threading.Lock()
        # the store's own connection for the calls it packs and reads itself (``_txn``,
        # ``_wire``): checked out of the client's pool once, not per call
        self._raw: Any = None
        self._raw_pid = 0
        self._raw_lock = threading.Lock()
        self._tls = threading.local()  # per thread: the scratch buffer of whole reads

    # ------------------------------------------------------------------ naming
    @property
    def server(self) -> str:
        """``host:port/db`` (or ``unix:<path>/db``): how errors name the server."""
        where = f"unix:{self.unix_socket_path}" if self.unix_socket_path else f"{self.host}:{self.port}"
        return f"{where}/{self.db}"

    def handle(self) -> dict:
        """What another process needs to open the same server (see ``__reduce__``)."""
        kwargs = dict(self.redis_kwargs)
        if not self._owns_client:
            ck = dict(getattr(getattr(self.client, "connection_pool", None), "connection_kwargs", {}))
            for drop in ("host", "port", "db", "path", "connection_class"):
                ck.pop(drop, None)
            import inspect

            accepted = inspect.signature(redis.Redis.__init__).parameters
            kwargs = {k: v for k, v in ck.items() if k in accepted and _picklable(v)}
        return {
            "backend": self.backend,
            "host": self.host,
            "port": self.port,
            "db": self.db,
            "unix_socket_path": self.unix_socket_path,
            "redis_kwargs": kwargs,
        }

    # ------------------------------------------------------------------ calls
    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Runs ``fn(*args, **kwargs)`` (a client or pipeline method), translating errors."""
        try:
            return fn(*args, **kwargs)
        except rexc.AuthenticationError as err:
            raise self._auth_error(err) from err
        except rexc.ResponseError as err:
            text = str(err)
            if text.startswith(("NOAUTH", "WRONGPASS", "NOPERM")) or "Authentication required" in text:
                raise self._auth_error(err) from err
            raise
        except (rexc.ConnectionError, rexc.TimeoutError, OSError) as err:
            if isinstance(err, (StoreConnectionError, StoreAuthenticationError)):
                raise
            msg = (
                f"Lost or could not open the connection to the {self.backend} server at {self.server} "
                f"({type(err).__name__}: {err}). Check that the server runs and is reachable; "
                "the next call reconnects."
            )
            raise StoreConnectionError(msg) from err

    def _auth_error(self, err: Exception) -> StoreAuthenticationError:
        ck = getattr(getattr(self.client, "connection_pool", None), "connection_kwargs", {})
        what = "refused the password" if ck.get("password") else "requires a password and none was given"
        msg = (
            f"The {self.backend} server at {self.server} {what} ({err}). "
            "Pass password=... (and username=... for an ACL user) to the store."
        )
        return StoreAuthenticationError(msg)

    def execute(self, pipe: Any) -> list:
        return self.call(pipe.execute)

    def pipeline(self, transaction: bool = True) -> Any:
        return self.client.pipeline(transaction=transaction)

    def _checkout(self) -> tuple:
        """``(redis-py connection, release)`` for a call the store packs itself: the
        store's own connection, or one from the pool while another thread holds it.

        Raises:
            Fallback: the client has no connection pool (a cluster client).
        """
        pool = getattr(self.client, "connection_pool", None)
        if pool is None or not hasattr(pool, "get_connection"):
            raise Fallback
        if self._raw_lock.acquire(blocking=False):
            try:
                if self._raw is None or self._raw_pid != os.getpid():  # none yet, or forked
                    self._raw = pool.get_connection()
                    self._raw_pid = os.getpid()
            except BaseException:
                self._raw_lock.release()
                raise
            return self._raw, self._raw_lock.release
        conn = pool.get_connection()
        return conn, lambda: pool.release(conn)

    def _raw_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        conn, release = self._checkout()
        try:
            return fn(conn, *args)
        finally:
            release()

    def scratch(self, n: int) -> memoryview | None:
        """A buffer of at least ``n`` bytes that this thread reuses from call to call (for
        replies that are copied out before the next call), or ``None`` above
        :data:`SCRATCH_MAX`: a fresh buffer per reply would cost a page fault per 4 KiB."""
        if n > SCRATCH_MAX:
            return None
        buf = getattr(self._tls, "buf", None)
        if buf is None or len(buf) < n:
            buf = self._tls.buf = bytearray(max(n, 1 << 16))
        return memoryview(buf)

    def fetch(self, args: tuple, limits: list, array: bool, into: list | None = None) -> list | None:
        """A bulk (or array of bulk) reply read into fresh buffers (see ``_wire``), or
        ``None`` when the fast path does not apply (call the client normally)."""
        try:
            return self.call(self._raw_call, bulk_call, args, limits, array, into)
        except Fallback:
            return None

    def run_txn(self, txn: Any) -> tuple:
        """Runs a :class:`~tensordict.store._txn.Txn` (one ``MULTI``/``EXEC`` round trip):
        ``(block results, generic replies)``."""
        try:
            return self.call(self._raw_call, txn.run)
        except Fallback:
            return self.call(txn.run_pipeline, self.client)

    @staticmethod
    def queue_script(pipe: Any, name: str, keys: list, args: list) -> None:
        """Queues the script in a transaction as ``EVAL`` (its source travels along): a
        server that lost its script cache cannot fail one command of the transaction,
        and redis-py sends no ``SCRIPT EXISTS`` round trip first. ``pipe`` is a redis-py
        pipeline or a list of commands for a transaction."""
        if isinstance(pipe, list):
            pipe.append(("EVAL", _SCRIPTS[name], len(keys), *keys, *args))
        else:
            pipe.eval(_SCRIPTS[name], len(keys), *keys, *args)

    def close(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None and self._raw_pid == os.getpid():
            try:
                pool = self.client.connection_pool
                pool.release(raw)
            except Exception:  # noqa: BLE001 - a client closed elsewhere
                pass
        if self._owns_client:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error
                pass


_SCRIPTS = {
    "lgather": _LIST_GATHER, "lscatter": _LIST_SCATTER, "ranges": _RANGES, "gdrop": _GROUP_DROP,
}


def _picklable(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, bytes, tuple, list, dict))


def dumps_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
