"""What every stored TensorDict shares: the connection, its ids and key names, the schema
cache (``_Root``), and the handle methods common to :class:`TensorDictStore` and
:class:`LazyStackedTensorDictStore` (``StoreHandleMixin``)."""

from __future__ import annotations

import json
from typing import Any

import torch

from tensordict import TensorDict
from tensordict.base import NO_DEFAULT
from tensordict.ext import INPLACE_METHODS
from tensordict.store._codec import StoreDataError, parse_entry
from tensordict.store._conn import Connection, dumps_json, field_path

__all__ = ["StoreHandleMixin", "read_meta", "write_meta"]

class _Root:
    """What every node of one stored TensorDict shares: connection, ids, schema cache."""

    __slots__ = ("conn", "namespace", "td_id", "base", "cache", "allow_pickle", "tensorclass", "commands")

    def __init__(self, conn: Connection, namespace: str, td_id: str, cache: bool, allow_pickle: bool) -> None:
        self.conn = conn
        self.namespace = namespace
        self.td_id = td_id
        self.base = f"{namespace}:{{{td_id}}}:"
        self.cache: dict | None = {} if cache else None
        self.allow_pickle = allow_pickle
        self.tensorclass: str | None = None
        self.commands: Any = None  # the CommandCache of indexed reads (see _txn), made on first use

    @property
    def meta_key(self) -> str:
        return self.base + "meta"

    @property
    def schema_key(self) -> str:
        return self.base + "schema"

    def data_key(self, field: str) -> str:
        return self.base + "d:" + field

    # ------------------------------------------------------------------ schema
    def entries(self, refresh: bool = False) -> dict:
        """``{path: entry}`` for every stored path (from the cache unless ``refresh``)."""
        cache = self.cache
        if cache is not None and not refresh and cache.get("__loaded__"):
            return cache["entries"]
        conn = self.conn
        raw = conn.call(conn.client.hgetall, self.schema_key)
        server = conn.server
        out = {}
        for f, v in raw.items():
            field = f.decode() if isinstance(f, bytes) else f
            out[field_path(field)] = parse_entry(v, field_path(field), server)
        if cache is not None:
            cache["entries"] = out
            cache["__loaded__"] = True
        return out

    def entry(self, path: tuple) -> dict | None:
        entries = self.entries()
        e = entries.get(path)
        if e is None and self.cache is not None:
            e = self.entries(refresh=True).get(path)
        return e

    def remember(self, path: tuple, entry: dict | None) -> None:
        cache = self.cache
        if cache is not None and cache.get("__loaded__"):
            if entry is None:
                cache["entries"].pop(path, None)
            else:
                cache["entries"][path] = parse_entry(dumps_json(entry), path, "")

    def forget_under(self, path: tuple) -> None:
        cache = self.cache
        if cache is not None and cache.get("__loaded__"):
            n = len(path)
            for p in [p for p in cache["entries"] if p[:n] == path]:
                del cache["entries"][p]




class StoreHandleMixin:
    """Handle methods shared by the store classes (they hold ``_root``, ``_batch_size``,
    ``_device``, ``_is_locked``)."""

    _root: _Root
    _path: tuple
    _batch_size: torch.Size
    _device: Any
    _is_locked: bool

    @property
    def _td_id(self) -> str:
        return self._root.td_id

    @property
    def _backend(self) -> str:
        return self._root.conn.backend

    @property
    def _tensorclass_cls(self) -> str | None:
        return self._root.tensorclass

    @property
    def _client(self) -> Any:
        return self._root.conn.client

    def close(self) -> None:
        """Closes the connection (a ``client=`` passed in is left open). Data stays on the server."""
        self._root.conn.close()

    def clear_redis(self) -> None:
        """Deletes every key of this stored TensorDict from the server (all of ``td_id``)."""
        root = self._root
        conn = root.conn
        pattern = _glob_escape(root.base) + "*"
        keys = list(conn.call(lambda: list(conn.client.scan_iter(match=pattern, count=1000))))
        if keys:
            conn.call(conn.client.delete, *keys)
        if root.cache is not None:
            root.cache.clear()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ metadata
    @property
    def batch_size(self) -> torch.Size:
        """The batch size (stored on the server with the data)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        new = torch.Size([value] if isinstance(value, int) else value)
        if new == self._batch_size:
            return
        msg = "The batch_size of a TensorDictStore is fixed; use to_tensordict() for an in-memory copy."
        raise RuntimeError(msg)

    @property
    def device(self) -> torch.device | None:
        """Where tensors read from the server are put (``None``: CPU, no device)."""
        return self._device

    @device.setter
    def device(self, value: Any) -> None:
        msg = "device cannot be set directly on a TensorDictStore; use td.to(device) for an in-memory copy."
        raise RuntimeError(msg)

    def clear_device_(self) -> Any:
        self._device = None
        return self

    @property
    def names(self) -> list:
        return [None] * len(self._batch_size)

    @names.setter
    def names(self, value: Any) -> None:
        if value is not None and any(v is not None for v in value):
            msg = "TensorDictStore does not support dim names."
            raise RuntimeError(msg)

    def _has_names(self) -> bool:
        return False

    def is_shared(self) -> bool:
        return False

    def is_contiguous(self) -> bool:
        """``False``: the data is on a server."""
        return False

    def share_memory_(self) -> Any:
        msg = "A TensorDictStore lives on a server and cannot be put in shared memory; use to_tensordict() first."
        raise NotImplementedError(msg)

    def _set_lock_flag(self, value: bool) -> None:
        self._is_locked = value

    def _batch_transform(self, fn: Any, nd: Any = None, names: Any = None) -> Any:
        msg = (
            "Shape operations (view, permute, unsqueeze, squeeze, ...) are not supported on a "
            "TensorDictStore; call to_tensordict() first."
        )
        raise RuntimeError(msg)

    def view(self, *args: Any, **kwargs: Any) -> Any:
        return self._batch_transform(None)

    permute: Any = view
    unsqueeze: Any = view
    squeeze: Any = view
    reshape: Any = view
    transpose: Any = view
    flatten: Any = view
    unflatten: Any = view
    expand: Any = view

    def _new_like(self, source: dict, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT) -> TensorDict:
        return TensorDict(
            source,
            batch_size=self._batch_size if batch_size is None else batch_size,
            device=self._device if device is NO_DEFAULT else device,
        )

    def _keys_raw(self) -> list:
        return sorted(self._children(refresh=True))

    def _items_raw(self) -> list:
        return [(k, self._get_raw(k)) for k in self._keys_raw()]  # type: ignore[attr-defined]

    def _subtree(self, refresh: bool = False) -> tuple:
        """``(nodes, leaves)``: ``{rel path: abs bs}`` and ``{rel path: entry}`` under this node."""
        entries = self._root.entries(refresh)
        base = self._path
        n = len(base)
        nodes: dict = {}
        leaves: dict = {}
        for p, e in entries.items():
            if len(p) > n and p[:n] == base:
                rel = p[n:]
                if e["t"] == "td":
                    nodes[rel] = e["bs"]
                else:
                    leaves[rel] = e
        return nodes, leaves

    def _children(self, refresh: bool = True) -> dict:
        """``{name: entry or None}`` of the direct children (``None``: an implicit node)."""
        nodes, leaves = self._subtree(refresh)
        out: dict = {}
        for rel, e in leaves.items():
            out.setdefault(rel[0], e if len(rel) == 1 else None)
        for rel, bs in nodes.items():
            if len(rel) == 1:
                out[rel[0]] = {"t": "td", "bs": bs}
            else:
                out.setdefault(rel[0], None)
        return out

    def _queue_delete(self, pipe: Any, path: tuple) -> None:
        from tensordict.store._groups import delete_commands

        root = self._root
        for cmd in delete_commands(root, path, root.entries(refresh=root.cache is None)):
            pipe.execute_command(*cmd)

    def empty(self, recurse: bool = False, *, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = None) -> TensorDict:
        """An in-memory TensorDict with this batch size and no keys."""
        return TensorDict(
            {}, batch_size=self._batch_size if batch_size is None else batch_size,
            device=self._device if device is NO_DEFAULT else device,
        )


def read_meta(root: _Root) -> dict | None:
    """The meta hash of ``root`` (checked), or ``None`` when no such stored TensorDict."""
    conn = root.conn
    raw = conn.call(conn.client.hgetall, root.meta_key)
    if not raw:
        return None
    meta = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v) for k, v in raw.items()}

    try:
        bs = json.loads(meta.get("batch_size", "[]"))
        if not isinstance(bs, list) or not all(type(s) is int and s >= 0 for s in bs):
            raise ValueError(bs)
    except ValueError as err:
        msg = f"TensorDictStore {root.td_id!r} on server {conn.server}: invalid batch_size {meta.get('batch_size')!r}."
        raise StoreDataError(msg) from err
    meta["batch_size"] = bs
    return meta


def write_meta(root: _Root, bs: torch.Size, device: Any, **extra: Any) -> None:
    """Writes the meta hash of a new stored TensorDict."""
    conn = root.conn
    mapping = {"batch_size": dumps_json(list(bs)), "device": "" if device is None else str(device), "kind": "td", "version": "1"}
    mapping.update({k: str(v) for k, v in extra.items()})
    conn.call(conn.client.hset, root.meta_key, mapping=mapping)


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def probe_meta(backend: str, host: str, port: int, db: int, unix_socket_path: str | None, prefix: str,
               td_id: str, kwargs: dict) -> tuple:
    """``(meta or None, server name)`` of the stored TensorDict ``td_id`` (a short-lived
    connection; ``kwargs`` are the store keywords, the connection's among them)."""
    redis_kwargs = {k: v for k, v in kwargs.items() if k not in ("client", "cache_metadata", "allow_pickle")}
    root = _Root(Connection(backend, host, port, db, unix_socket_path, kwargs.get("client"), redis_kwargs),
                 prefix, str(td_id), False, False)
    try:
        return read_meta(root), root.conn.server
    finally:
        root.conn.close()


def connection_from_handle(h: dict) -> Connection:
    """The connection a pickled store describes (``Connection.handle()``)."""
    return Connection(h["backend"], h["host"], h["port"], h["db"], h["unix_socket_path"], None, h["redis_kwargs"])


#: in-place math on a store: run on an in-memory copy, written back in one transaction
#: (the leaves a TensorDict method modifies in place would otherwise be read copies)
_THROUGH_COPY = sorted(
    (set(INPLACE_METHODS) - {"apply_"})
    | {"zero_", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__"}
)


def _through_copy(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        local = self.to_tensordict()
        getattr(local, name)(*args, **kwargs)
        self._write_back(local)
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (
        f"``TensorDict.{name}`` on an in-memory copy (:meth:`to_tensordict`), written back in one "
        "transaction; not atomic with other clients' writes in between."
    )
    return method


for _name in _THROUGH_COPY:
    setattr(StoreHandleMixin, _name, _through_copy(_name))
