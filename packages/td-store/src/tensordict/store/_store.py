"""``TensorDictStore``: a TensorDict whose leaves live in a Redis-protocol server."""

from __future__ import annotations

import importlib
import math
import sys
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensor_collection,
    unravel_key,
)
from tensordict.base import NO_DEFAULT
from tensordict.store._codec import (
    StoreDataError,
    check_blob,
    dtype_tag,
    nbytes,
)
from tensordict.store._conn import STORE_BACKENDS, Connection, dumps_json, path_field
from tensordict.store._groups import group_entry, new_gid, plan_groups, write_leaves
from tensordict.store._io import build_td, decode_leaf, flatten_value, positions
from tensordict.store._root import (
    StoreHandleMixin,
    _Root,
    connection_from_handle,
    probe_meta,
    read_meta,
    write_meta,
)

__all__ = ["TensorDictStore", "STORE_BACKENDS"]

_MISSING: Any = object()
#: the largest JSON value a read accepts (a planted value cannot make a reader allocate more)
_JSON_LIMIT = 1 << 28


class TensorDictStore(StoreHandleMixin, TensorDictBase):
    """A TensorDict whose leaves live in a Redis-protocol key-value server.

    Several processes (on several machines) open the same data by its ``td_id`` and
    read and write it; the data may be larger than one process's memory. Each tensor
    leaf is one string on the server (its raw bytes); an indexed read or write touches
    only the bytes of the selected batch elements, in one round trip and one atomic
    server-side call (a read never sees half of a write). Non-tensor leaves are JSON.

    Shapes: every leaf's shape starts with ``batch_size``; ``td[index]`` returns an
    in-memory :class:`~tensordict.TensorDict` of the selected elements; ``td[key]``
    returns the whole leaf (a tensor, a nested :class:`TensorDictStore`, or the
    non-tensor value).

    Keyword Args:
        backend (str): ``"redis"`` or ``"dragonfly"`` (a label; both speak the Redis
            protocol, as do Valkey and KeyDB). Defaults to ``"redis"``.
        host (str): the server's host. Defaults to ``"localhost"``.
        port (int): the server's port. Defaults to ``6379``.
        db (int): the database number. Defaults to ``0``.
        unix_socket_path (str, optional): a Unix socket to connect through instead.
        prefix (str): the namespace of the keys on the server. Defaults to ``"tensordict"``.
        batch_size (torch.Size or list of int, optional): the batch size of a new store
            (read from the server when ``td_id`` names an existing one).
        device (torch.device, optional): where tensors read from the server are put.
        client (redis.Redis, optional): an existing client to use (not closed by :meth:`close`).
        td_id (str, optional): the id of the stored TensorDict; a new UUID by default.
        cache_metadata (bool): keep the shapes and dtypes of the leaves in this process
            (no metadata round trip per read). Defaults to ``True``.
        allow_pickle (bool): store values that JSON cannot carry as pickles and unpickle
            them on read. Defaults to ``False``: nothing read from the server is unpickled.
        **redis_kwargs: passed to ``redis.Redis`` (``password``, ``username``, ``ssl``,
            ``socket_timeout``, ``socket_connect_timeout``, ...).

    Raises:
        ConnectionError: the server cannot be reached (the message names it).
        PermissionError: the server refused the credentials.
        ValueError: ``batch_size`` differs from that of the stored ``td_id``.

    Examples:
        >>> import torch
        >>> from tensordict.store import TensorDictStore
        >>> td = TensorDictStore(batch_size=[10], port=PORT)  # doctest: +SKIP
        >>> td["obs"] = torch.randn(10, 3)  # doctest: +SKIP
        >>> td[2:5]["obs"].shape  # doctest: +SKIP
        torch.Size([3, 3])
    """

    _is_tensorclass = False

    def __init__(
        self,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        batch_size: Any = None,
        device: Any = None,
        client: Any = None,
        td_id: str | None = None,
        cache_metadata: bool = True,
        allow_pickle: bool = False,
        **redis_kwargs: Any,
    ) -> None:
        conn = Connection(backend, host, port, db, unix_socket_path, client, redis_kwargs)
        new = td_id is None
        td_id = str(uuid.uuid4()) if new else str(td_id)
        root = _Root(conn, prefix, td_id, cache_metadata, allow_pickle)
        bs = torch.Size([] if batch_size is None else ([batch_size] if isinstance(batch_size, int) else batch_size))
        device = None if device is None else torch.device(device)
        if not new:
            meta = read_meta(root)
            if meta is not None:
                stored = torch.Size(meta["batch_size"])
                if batch_size is not None and bs != stored:
                    msg = (
                        f"TensorDictStore {td_id!r} on {conn.server} has batch_size {tuple(stored)}, "
                        f"got batch_size={tuple(bs)}."
                    )
                    raise ValueError(msg)
                bs = stored
                root.tensorclass = meta.get("tensorclass") or None
                if device is None and meta.get("device"):
                    device = torch.device(meta["device"])
                self._init_node(root, (), bs, device)
                return
        write_meta(root, bs, device)
        self._init_node(root, (), bs, device)

    def _init_node(self, root: _Root, path: tuple, bs: torch.Size, device: Any) -> None:
        self._root = root
        self._path = path
        self._batch_size = bs
        self._device = device
        self._is_locked = False
        self._is_shallow_copy = False

    @classmethod
    def _node(cls, root: _Root, path: tuple, bs: torch.Size, device: Any, locked: bool = False) -> TensorDictStore:
        obj = cls.__new__(cls)
        obj._init_node(root, path, bs, device)
        obj._is_locked = locked
        return obj

    # ------------------------------------------------------------------ upstream's attribute names
    def _full_key_path(self, key: Any) -> str:
        key = unravel_key(key)
        return path_field((*self._path, *((key,) if isinstance(key, str) else key)))

    @property
    def _meta_cache(self) -> dict | None:
        """``{full key path: (shape, dtype)}`` of the cached tensor leaves (``None`` when
        ``cache_metadata=False``)."""
        cache = self._root.cache
        if cache is None:
            return None
        return {path_field(p): (e["shape"], e["dtype"]) for p, e in cache.get("entries", {}).items() if e["t"] == "tensor"}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_tensordict(
        cls,
        td: TensorDictBase,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        **kwargs: Any,
    ) -> TensorDictStore:
        """Uploads ``td`` (a TensorDict or tensorclass) and returns a store on it.

        All leaves are written in one transaction. A tensorclass's class path is stored
        so that :meth:`from_store` can give an instance of it back.

        Args:
            td (TensorDictBase or tensorclass): the data; its batch size becomes the store's.

        Keyword Args:
            backend, host, port, db, unix_socket_path, prefix: as for :class:`TensorDictStore`.
            device (torch.device, optional): the store's device; defaults to ``td.device``.
            **kwargs: the other keywords of :class:`TensorDictStore`.

        Returns:
            TensorDictStore: batch size ``td.batch_size``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from tensordict.store import TensorDictStore
            >>> src = TensorDict(obs=torch.zeros(4, 3), batch_size=[4])
            >>> st = TensorDictStore.from_tensordict(src, port=PORT)  # doctest: +SKIP
            >>> st["obs"].shape  # doctest: +SKIP
            torch.Size([4, 3])
        """
        tc_path = kwargs.pop("tensorclass", None)
        if getattr(type(td), "_is_tensorclass", False):
            tc_path = f"{type(td).__module__}.{type(td).__qualname__}"
            td = td.to_tensordict()
        elif not isinstance(td, TensorDictBase):
            msg = f"from_tensordict expects a TensorDictBase or a tensorclass instance, got {type(td).__name__}."
            raise TypeError(msg)
        kwargs.pop("batch_size", None)
        store = cls(
            backend=backend, host=host, port=port, db=db, unix_socket_path=unix_socket_path, prefix=prefix,
            batch_size=td.batch_size, device=device if device is not None else td.device, **kwargs,
        )
        store._write_tree(td, tensorclass=tc_path)
        return store

    @classmethod
    def from_dict(  # type: ignore[override]
        cls,
        input_dict: Any,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        auto_batch_size: bool = False,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> TensorDictStore:
        """Builds a TensorDict from ``input_dict`` (as :meth:`TensorDict.from_dict`) and uploads it.

        Args:
            input_dict (dict or TensorDictBase): the data.

        Keyword Args:
            auto_batch_size, batch_size, batch_dims, names: as for :meth:`TensorDict.from_dict`.
            backend, host, port, db, unix_socket_path, prefix, device, **kwargs: as for
                :meth:`from_tensordict`.

        Returns:
            TensorDictStore.
        """
        if isinstance(input_dict, TensorDictBase) and batch_size is None and not auto_batch_size:
            td = input_dict
        else:
            td = TensorDict.from_dict(
                input_dict, batch_size=batch_size, device=device, batch_dims=batch_dims,
                auto_batch_size=auto_batch_size or (batch_size is None and batch_dims is None),
            )
        return cls.from_tensordict(
            td, backend=backend, host=host, port=port, db=db, unix_socket_path=unix_socket_path, prefix=prefix,
            device=device, **kwargs,
        )

    @classmethod
    def from_schema(  # type: ignore[override]
        cls,
        schema: dict,
        *,
        batch_size: Any = None,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        **kwargs: Any,
    ) -> TensorDictStore:
        """A new store with zero-filled leaves of the given feature shapes and dtypes.

        The server allocates each leaf (``SETRANGE`` of its last byte); no data goes
        through this process. Use it for a replay buffer whose layout is known.

        Args:
            schema (dict): ``{key: (feature_shape, dtype)}``; a leaf has shape
                ``[*batch_size, *feature_shape]``. Keys may be nested tuples.

        Keyword Args:
            batch_size (torch.Size or list of int, optional): defaults to ``[]``.
            backend, host, port, db, unix_socket_path, prefix, device, **kwargs: as for
                :class:`TensorDictStore`.

        Returns:
            TensorDictStore.

        Examples:
            >>> import torch
            >>> from tensordict.store import TensorDictStore
            >>> rb = TensorDictStore.from_schema({"obs": ([64], torch.float32)}, batch_size=[1000], port=PORT)  # doctest: +SKIP
            >>> rb["obs"].sum().item()  # doctest: +SKIP
            0.0
        """
        store = cls(
            backend=backend, host=host, port=port, db=db, unix_socket_path=unix_socket_path, prefix=prefix,
            batch_size=batch_size, device=device, **kwargs,
        )
        root = store._root
        bs = list(store._batch_size)
        pipe = root.conn.pipeline()
        specs = []
        for key, spec in schema.items():
            feat, dtype = spec
            path = unravel_key(key)
            path = (path,) if isinstance(path, str) else tuple(path)
            store._queue_delete(pipe, path)
            specs.append((path, [*bs, *feat], dtype))
        written = []
        grouped: set = set()
        rows = math.prod(bs)
        for members, rs in plan_groups(specs, bs):  # leaves interleaved per row (see _groups)
            gid = new_gid()
            pipe.setrange(root.base + "g:" + gid, rows * rs - 1, b"\0")
            for i, off in members:
                path, shape, dtype = specs[i]
                written.append((path, group_entry(shape, dtype, gid, off, rs, len(bs))))
                grouped.add(i)
        for i, (path, shape, dtype) in enumerate(specs):
            if i in grouped:
                continue
            size = nbytes(shape, dtype)
            dkey = root.data_key(path_field(path))
            if size:
                pipe.setrange(dkey, size - 1, b"\0")
            else:
                pipe.set(dkey, b"")
            written.append((path, {"t": "tensor", "shape": shape, "dtype": dtype_tag(dtype)}))
        for path, entry in written:
            pipe.hset(root.schema_key, path_field(path), dumps_json(entry))
        root.conn.execute(pipe)
        for path, entry in written:
            root.forget_under(path)
            root.remember(path, entry)
        return store

    @classmethod
    def from_store(
        cls,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        td_id: str,
        device: Any = None,
        tensorclass_cls: type | str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Opens the stored TensorDict ``td_id`` (written by another handle, process or machine).

        Keyword Args:
            td_id (str): the id (``store._td_id`` of the writer).
            device (torch.device, optional): overrides the stored device.
            tensorclass_cls (type or str, optional): wrap the store in this tensorclass.
                By default the class recorded by :meth:`from_tensordict` is used when its
                module is already imported in this process (no module is imported on the
                server's word); otherwise a warning is issued and the store is returned.
            backend, host, port, db, unix_socket_path, prefix, **kwargs: as for :class:`TensorDictStore`.

        Returns:
            TensorDictStore, or a tensorclass instance wrapping one.

        Raises:
            KeyError: no TensorDictStore ``td_id`` on the server.
        """
        meta, server = probe_meta(backend, host, port, db, unix_socket_path, prefix, td_id, kwargs)
        if meta is None:
            msg = f"No TensorDictStore with td_id={td_id!r} under prefix {prefix!r} on server {server}."
            raise KeyError(msg)
        store = cls(
            backend=backend, host=host, port=port, db=db, unix_socket_path=unix_socket_path, prefix=prefix,
            td_id=td_id, device=device, **kwargs,
        )
        cls_ref = tensorclass_cls if tensorclass_cls is not None else store._root.tensorclass
        if cls_ref is None:
            return store
        tc = _resolve_class(cls_ref, explicit=tensorclass_cls is not None)
        if tc is None:
            return store
        return tc.from_tensordict(store)

    # ------------------------------------------------------------------ lifecycle
    def __reduce__(self) -> tuple:
        root = self._root
        state = {
            "handle": root.conn.handle(),
            "prefix": root.namespace,
            "td_id": root.td_id,
            "path": self._path,
            "batch_size": list(self._batch_size),
            "device": None if self._device is None else str(self._device),
            "cache": root.cache is not None,
            "allow_pickle": root.allow_pickle,
            "tensorclass": root.tensorclass,
            "locked": self._is_locked,
        }
        return (_rebuild, (type(self), state))

    # ------------------------------------------------------------------ schema views
    def _child_node(self, name: str, entry: dict | None) -> TensorDictStore:
        bs = torch.Size(entry["bs"]) if entry is not None else self._batch_size
        return TensorDictStore._node(self._root, (*self._path, name), bs, self._device, self._is_locked)

    # ------------------------------------------------------------------ primitives
    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:
        root = self._root
        path = (*self._path, key)
        entry = root.entry(path)
        if entry is None:
            n = len(path)
            if any(p[:n] == path for p in root.entries()) or (
                root.cache is not None and any(p[:n] == path for p in root.entries(refresh=True))
            ):
                return self._child_node(key, None)
            return default
        if entry["t"] == "td":
            return self._child_node(key, entry)
        conn = root.conn
        dkey = root.data_key(path_field(path))
        if entry["t"] == "jsonl":
            raw = conn.call(conn.client.lrange, dkey, 0, -1)
        elif entry["t"] == "tensor" and "g" in entry:
            return self._get_grouped(path, entry)
        elif entry["t"] == "tensor":
            raw = self._fetch(("GET", dkey), [nbytes(entry["shape"], entry["dtype"])], False, [path])
            raw = raw[0] if raw is not None else conn.call(conn.client.get, dkey)
        else:
            raw = conn.call(conn.client.get, dkey)
        return decode_leaf(entry, raw, path, conn.server, root.allow_pickle, self._device)

    def _get_grouped(self, path: tuple, entry: dict) -> torch.Tensor:
        """A whole leaf stored in a group: the group string read once, the leaf's bytes
        copied out of each row as the rows arrive (``GroupSink``)."""
        root = self._root
        conn = root.conn
        gkey = root.base + "g:" + entry["g"]
        size = math.prod(entry["shape"][: entry["rb"]]) * entry["rs"]
        if not size or not nbytes(entry["shape"][entry["rb"] :], entry["dtype"]):
            return torch.empty(entry["shape"], dtype=entry["dtype"], device=self._device)
        sink = _sink_for(conn, [entry])
        raw = self._fetch(("GET", gkey), [size], False, [path], [sink])
        raw = raw[0] if raw is not None else conn.call(conn.client.get, gkey)
        if raw is sink:
            out = sink.outs[0]
            return out if self._device is None else out.to(self._device)
        return _grouped_leaf(raw, entry, path, conn.server, self._device)

    def _fetch(self, args: tuple, limits: list, array: bool, paths: list, into: list | None = None) -> list | None:
        """``Connection.fetch`` with the error of an oversized reply naming the keys."""
        conn = self._root.conn
        try:
            return conn.fetch(args, limits, array, into)
        except ValueError as err:
            msg = f"Key(s) {paths!r} on server {conn.server}: {err} (a value written by another client?)."
            raise StoreDataError(msg) from err

    def _create_nested(self, key: str) -> TensorDictBase:
        out = self._get_raw(key, _MISSING)
        if out is _MISSING:
            if self.is_locked:
                msg = f"Cannot create the nested key {key!r}: the TensorDictStore is locked."
                raise RuntimeError(msg)
            root = self._root
            path = (*self._path, key)
            entry = {"t": "td", "bs": list(self._batch_size)}
            root.conn.call(root.conn.client.hset, root.schema_key, path_field(path), dumps_json(entry))
            root.remember(path, entry)
            return self._child_node(key, entry)
        if not isinstance(out, TensorDictBase):
            msg = f"Cannot write a nested key under {key!r}: it holds a {type(out).__name__}, not a TensorDict."
            raise KeyError(msg)
        return out

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        root = self._root
        path = (*self._path, key)
        nodes: list = []
        leaves: list = []
        flatten_value(value, path, nodes, leaves)
        pipe = root.conn.pipeline()
        self._queue_delete(pipe, path)
        written = []
        for p, bs in nodes:
            entry = {"t": "td", "bs": bs}
            pipe.hset(root.schema_key, path_field(p), dumps_json(entry))
            written.append((p, entry))
        written += write_leaves(pipe, root, leaves, list(self._batch_size), not self._path)
        root.conn.execute(pipe)
        root.forget_under(path)
        for p, e in written:
            root.remember(p, e)

    def _del_raw(self, key: str) -> None:
        root = self._root
        path = (*self._path, key)
        pipe = root.conn.pipeline()
        self._queue_delete(pipe, path)
        root.conn.execute(pipe)
        root.forget_under(path)

    def _write_tree(self, td: TensorDictBase, tensorclass: str | None = None) -> None:
        """Writes every entry of ``td`` (batch size checked) in one transaction."""
        root = self._root
        pipe = root.conn.pipeline()
        written = []
        leaves: list = []
        for key, value in td.items():
            path = (*self._path, key)
            value = self._convert_value(key, value)
            self._queue_delete(pipe, path)
            nodes: list = []
            flatten_value(value, path, nodes, leaves)
            for p, bs in nodes:
                entry = {"t": "td", "bs": bs}
                pipe.hset(root.schema_key, path_field(p), dumps_json(entry))
                written.append((p, entry))
        written += write_leaves(pipe, root, leaves, list(self._batch_size), not self._path)
        if tensorclass is not None:
            pipe.hset(root.meta_key, "tensorclass", tensorclass)
            root.tensorclass = tensorclass
        root.conn.execute(pipe)
        for key in td.keys():
            root.forget_under((*self._path, key))
        for p, e in written:
            root.remember(p, e)

    def _write_back(self, local: TensorDictBase) -> None:
        self._write_tree(local)

    def entry_class(self, key: Any) -> type:
        """The class of the value under ``key`` (``torch.Tensor``, ``TensorDictStore``,
        ``NonTensorData`` or ``NonTensorStack``), from metadata only."""
        key = unravel_key(key)
        path = (*self._path, *((key,) if isinstance(key, str) else key))
        root = self._root
        entry = root.entry(path)
        if entry is None:
            n = len(path)
            if any(p[:n] == path for p in root.entries(refresh=True)):
                return TensorDictStore
            msg = f"key {key!r} not found in the TensorDictStore {root.td_id!r}."
            raise KeyError(msg)
        return {"tensor": torch.Tensor, "td": TensorDictStore, "jsonl": NonTensorStack}.get(entry["t"], NonTensorData)

    def get_item_shape(self, key: Any) -> torch.Size:
        """The shape of the leaf ``key`` from metadata (no data read)."""
        key = unravel_key(key)
        path = (*self._path, *((key,) if isinstance(key, str) else key))
        entry = self._root.entry(path)
        if entry is None:
            return self.get(key).batch_size
        if entry["t"] == "tensor":
            return torch.Size(entry["shape"])
        return torch.Size(entry.get("bs", self._batch_size))

    # ------------------------------------------------------------------ whole reads
    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """Reads the whole (sub)tree into an in-memory :class:`~tensordict.TensorDict`.

        One round trip: every tensor and JSON leaf with one ``MGET``, one ``LRANGE`` per
        per-element non-tensor leaf, in one transaction (a consistent snapshot).

        Returns:
            TensorDict: batch size ``batch_size``, on ``device``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> st = TensorDict(a=torch.arange(3), batch_size=[3]).to_store(port=PORT)  # doctest: +SKIP
            >>> st.to_tensordict()["a"]  # doctest: +SKIP
            tensor([0, 1, 2])
        """
        root = self._root
        conn = root.conn
        nodes, leaves = self._subtree(refresh=root.cache is None)
        plain = [(rel, e) for rel, e in leaves.items() if e["t"] != "jsonl"]
        lists = [(rel, e) for rel, e in leaves.items() if e["t"] == "jsonl"]
        full = self._path
        values: dict = {}
        if plain or lists:
            keys, limits, where = _whole_units(root, full, plain)
            if not lists:
                into = _group_sinks(conn, keys, plain, where)  # group strings: decoded as they arrive
                fast = self._fetch(("MGET", *keys), limits, True, [(*full, *r) for r, _ in plain], into) if keys else []
                got = [fast if fast is not None else conn.call(conn.client.mget, keys)]
            else:
                pipe = conn.pipeline()
                if keys:
                    pipe.mget(keys)
                for rel, _ in lists:
                    pipe.lrange(root.data_key(path_field((*full, *rel))), 0, -1)
                got = conn.execute(pipe)
                if not keys:
                    got = [[], *got]
            server = conn.server
            blobs = got[0]
            for (rel, e), at in zip(plain, where):
                raw = blobs[at]
                if e["t"] == "tensor" and "g" in e and hasattr(raw, "outs"):
                    at_out = raw.index.get(rel)
                    out = torch.empty(e["shape"], dtype=e["dtype"]) if at_out is None else raw.outs[at_out]
                    values[rel] = out if self._device is None else out.to(self._device)
                elif e["t"] == "tensor" and "g" in e:
                    values[rel] = _grouped_leaf(raw, e, (*full, *rel), server, self._device)
                else:
                    values[rel] = decode_leaf(e, raw, (*full, *rel), server, root.allow_pickle, self._device)
            for (rel, e), raw in zip(lists, got[1:]):
                values[rel] = decode_leaf(e, raw, (*full, *rel), server, root.allow_pickle, self._device)
        return build_td((), list(self._batch_size), nodes, values, self._device)

    def to_local(self) -> TensorDict:
        """Alias of :meth:`to_tensordict` (deprecated in tensordict 0.15; kept without a warning here)."""
        return self.to_tensordict()

    def contiguous(self, *args: Any, **kwargs: Any) -> TensorDict:
        """An in-memory copy (:meth:`to_tensordict`)."""
        return self.to_tensordict()

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictStore:
        """``recurse=True``: a copy of the data under a new ``td_id`` on the same server
        (copied server-side); ``recurse=False``: a second handle on the same data."""
        root = self._root
        if not recurse:
            out = TensorDictStore._node(root, self._path, self._batch_size, self._device)
            out._is_shallow_copy = True
            return out
        conn = root.conn
        new_id = str(uuid.uuid4())
        new_root = _Root(conn, root.namespace, new_id, root.cache is not None, root.allow_pickle)
        new_root.tensorclass = root.tensorclass
        write_meta(new_root, self._batch_size, self._device)
        pipe = conn.pipeline()
        nodes, leaves = self._subtree(refresh=True)
        for rel, bs in nodes.items():
            pipe.hset(new_root.schema_key, path_field(rel), dumps_json({"t": "td", "bs": bs}))
        copied: set = set()
        for rel, e in leaves.items():
            g = e.get("g") if e["t"] == "tensor" else None
            if g is None:
                src = root.data_key(path_field((*self._path, *rel)))
                pipe.copy(src, new_root.data_key(path_field(rel)), replace=True)
            elif g not in copied:
                copied.add(g)
                pipe.copy(root.base + "g:" + g, new_root.base + "g:" + g, replace=True)
            out_e = dict(e)
            if out_e["t"] == "tensor":
                out_e["dtype"] = dtype_tag(out_e["dtype"])
            pipe.hset(new_root.schema_key, path_field(rel), dumps_json(out_e))
        conn.execute(pipe)
        return TensorDictStore._node(new_root, (), self._batch_size, self._device)

    # ------------------------------------------------------------------ indexed reads
    def _index(self, index: Any) -> TensorDictBase:
        try:
            pos = positions(self._batch_size, index)
        except (IndexError, TypeError, RuntimeError):
            return self.to_tensordict()[index]
        return self._gather(pos)

    def _gather(self, pos: torch.Tensor) -> TensorDict:
        """The elements at flat positions ``pos`` (shaped like the result batch), read
        in one atomic server call (see ``_read``)."""
        from tensordict.store._read import gather

        return gather(self, pos)

    def get_at(self, key: Any, index: Any, default: Any = NO_DEFAULT) -> Any:
        """``td.get(key)[index]``, reading only the selected elements."""
        try:
            view = self._index(index)
        except KeyError:
            if default is not NO_DEFAULT:
                return default
            raise
        return view.get(key) if default is NO_DEFAULT else view.get(key, default)

    # ------------------------------------------------------------------ writes
    def __setitem__(self, index: Any, value: Any) -> None:
        cls = index.__class__
        if cls is str or (cls is tuple and index and all(i.__class__ is str or i.__class__ is tuple for i in index)):
            TensorDictBase.__setitem__(self, index, value)
            return
        self._write_index(index, value)

    def _write_index(self, index: Any, value: Any) -> None:
        from tensordict.store._write import scatter

        pos = positions(self._batch_size, index)
        out_bs = torch.Size(pos.shape)
        if getattr(type(value), "_is_tensorclass", False):
            value = value.to_tensordict()
        if isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
            value = TensorDict(value, batch_size=out_bs)
        if isinstance(value, (torch.Tensor, int, float, bool)):
            _, entries = self._subtree(refresh=self._root.cache is None)
            items = []
            for rel, e in entries.items():
                if e["t"] == "tensor":
                    items.append((rel, torch.as_tensor(value, dtype=e["dtype"])))
            scatter(self, pos, items, [], broadcast=True)
            return
        if not (isinstance(value, TensorDictBase) or is_tensor_collection(value)):
            msg = f"Cannot write a {type(value).__name__} at index {index!r} of a TensorDictStore: pass a TensorDict or a dict."
            raise TypeError(msg)
        if value.batch_size != out_bs:
            try:
                value = value.expand(out_bs) if len(value.batch_size) <= len(out_bs) else value
            except (RuntimeError, ValueError):
                pass
            if value.batch_size[: len(out_bs)] != out_bs:
                msg = (
                    f"batch dimension mismatch: the indexed destination has batch size {tuple(out_bs)} at "
                    f"index {index!r}, the value has batch size {tuple(value.batch_size)}."
                )
                raise RuntimeError(msg)
        nodes: list = []
        leaves: list = []
        flatten_value(value, (), nodes, leaves)
        scatter(self, pos, leaves, nodes)

    def set_at_(self, key: Any, value: Any, index: Any, *, non_blocking: bool = False) -> TensorDictStore:
        """Writes ``value`` into ``td[key][index]``, sending only those elements (one atomic call)."""
        from tensordict.store._write import scatter

        key = unravel_key(key)
        rel = (key,) if isinstance(key, str) else tuple(key)
        entry = self._root.entry((*self._path, *rel))
        if entry is None:
            msg = f"key {key!r} not found in the TensorDictStore {self._root.td_id!r}."
            raise KeyError(msg)
        pos = positions(self._batch_size, index)
        if entry["t"] == "tensor":
            value = torch.as_tensor(value, dtype=entry["dtype"])
        elif not isinstance(value, (NonTensorData, NonTensorStack)):
            value = NonTensorData(value, batch_size=list(pos.shape))
        scatter(self, pos, [(rel, value)], [], broadcast=True)
        return self

    def _write_inplace(self, key: Any, existing: Any, value: Any) -> None:
        if isinstance(existing, torch.Tensor) and isinstance(value, torch.Tensor | int | float | bool):
            value = torch.as_tensor(value, dtype=existing.dtype)
            try:
                value = value.expand(existing.shape)
            except RuntimeError as err:
                msg = (
                    f"Failed to update {key!r} in place: expected shape {tuple(existing.shape)} "
                    f"(or one that broadcasts to it), got {tuple(value.shape)}."
                )
                raise ValueError(msg) from err
            self.set(key, value.contiguous())
            return
        super()._write_inplace(key, existing, value)

    def fill_(self, key: Any, value: float | bool) -> TensorDictStore:
        """Fills the leaf ``key`` with ``value`` (written whole, in one command)."""
        existing = self.get(key)
        if isinstance(existing, TensorDictBase):
            for k in existing.keys(True, True):
                existing.fill_(k, value)
            return self
        self.set(key, torch.full_like(existing, value))
        return self

    def rename_key_(self, old_key: Any, new_key: Any, safe: bool = False) -> TensorDictStore:
        """Renames ``old_key`` to ``new_key`` on the server (``RENAME``, one transaction)."""
        old = unravel_key(old_key)
        new = unravel_key(new_key)
        old_p = (*self._path, *((old,) if isinstance(old, str) else old))
        new_p = (*self._path, *((new,) if isinstance(new, str) else new))
        if self._is_locked:
            msg = f"Cannot rename {old_key!r}: the TensorDictStore is locked."
            raise RuntimeError(msg)
        root = self._root
        entries = root.entries(refresh=True)
        moving = {p: e for p, e in entries.items() if p[: len(old_p)] == old_p}
        if not moving:
            msg = f"key {old_key!r} not found in the TensorDictStore {root.td_id!r}."
            raise KeyError(msg)
        if safe and any(p[: len(new_p)] == new_p for p in entries):
            msg = f"key {new_key!r} already present in TensorDict."
            raise KeyError(msg)
        pipe = root.conn.pipeline()
        self._queue_delete(pipe, new_p)
        for p, e in moving.items():
            dest = (*new_p, *p[len(old_p) :])
            raw = root.conn.call(root.conn.client.hget, root.schema_key, path_field(p))
            if e["t"] != "td" and "g" not in e:  # a group member moves with its schema entry
                pipe.rename(root.data_key(path_field(p)), root.data_key(path_field(dest)))
            pipe.hdel(root.schema_key, path_field(p))
            pipe.hset(root.schema_key, path_field(dest), raw)
        root.conn.execute(pipe)
        root.forget_under(old_p)
        root.forget_under(new_p)
        if root.cache is not None:
            root.cache.pop("__loaded__", None)
        return self

    def popitem(self) -> tuple:
        keys = self._keys_raw()
        if not keys:
            msg = "popitem(): TensorDictStore is empty"
            raise KeyError(msg)
        key = keys[-1]
        return key, self.pop(key)

    # ------------------------------------------------------------------ repr
    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(\n    keys={self._keys_raw()!r},\n    batch_size={self._batch_size!r},\n"
            f"    device={self._device!r},\n    backend={self._backend!r},\n    td_id={self._td_id!r})"
        )


# ---------------------------------------------------------------------- helpers
def _whole_units(root: _Root, full: tuple, plain: list) -> tuple:
    """``(keys, limits, where)`` to read the leaves ``plain`` whole with one ``MGET``: each
    group once; ``where[i]`` is the index of leaf ``i``'s string among ``keys``."""
    keys: list = []
    limits: list = []
    where: list = []
    seen: dict = {}
    for rel, e in plain:
        if e["t"] == "tensor" and "g" in e:
            key = root.base + "g:" + e["g"]
            limit = math.prod(e["shape"][: e["rb"]]) * e["rs"]
        else:
            key = root.data_key(path_field((*full, *rel)))
            limit = nbytes(e["shape"], e["dtype"]) if e["t"] == "tensor" else _JSON_LIMIT
        at = seen.get(key)
        if at is None:
            at = seen[key] = len(keys)
            keys.append(key)
            limits.append(limit)
        elif limits[at] != limit:
            msg = f"Key {(*full, *rel)!r} on server {root.conn.server}: the members of its group disagree on the group's size."
            raise StoreDataError(msg)
        where.append(at)
    return keys, limits, where


def _sink_for(conn: Any, entries: list) -> Any:
    """A ``GroupSink`` decoding the members ``entries`` (of one group) from the group string."""
    from tensordict.store._read import SINK_CHUNK, GroupSink

    e0 = entries[0]
    rows = math.prod(e0["shape"][: e0["rb"]])
    members = [(e["off"], nbytes(e["shape"][e["rb"] :], e["dtype"]), e["shape"], e["dtype"]) for e in entries]
    members = [m for m in members if m[1]]
    return GroupSink(rows, e0["rs"], members, conn.scratch(max(SINK_CHUNK, e0["rs"])))


def _group_sinks(conn: Any, keys: list, plain: list, where: list) -> list | None:
    """One ``GroupSink`` per group string among ``keys`` (``None`` for the others); a sink's
    ``index`` maps each member's relative path to its place in ``outs``."""
    groups: dict = {}
    for (rel, e), at in zip(plain, where):
        if e["t"] == "tensor" and "g" in e and nbytes(e["shape"][e["rb"] :], e["dtype"]) and math.prod(e["shape"][: e["rb"]]):
            groups.setdefault(at, []).append((rel, e))
    if not groups:
        return None
    out: list = [None] * len(keys)
    for at, members in groups.items():
        sink = _sink_for(conn, [e for _, e in members])
        sink.index = {rel: i for i, (rel, _) in enumerate(members)}
        out[at] = sink
    return out


def _grouped_leaf(raw: Any, e: dict, path: tuple, server: str, device: Any) -> torch.Tensor:
    from tensordict.store._read import column_of

    rows = math.prod(e["shape"][: e["rb"]])
    check_blob(raw, rows * e["rs"], path, server)
    esz_row = nbytes(e["shape"][e["rb"] :], e["dtype"])
    out = column_of(raw, rows, e["rs"], e["off"], esz_row, e["shape"], e["dtype"])
    return out if device is None else out.to(device)


def _rebuild(cls: Any, state: dict) -> Any:
    h = state["handle"]
    root_store = cls.__new__(cls)
    conn = connection_from_handle(h)
    root = _Root(conn, state["prefix"], state["td_id"], state["cache"], state["allow_pickle"])
    root.tensorclass = state["tensorclass"]
    device = None if state["device"] is None else torch.device(state["device"])
    root_store._init_node(root, tuple(state["path"]), torch.Size(state["batch_size"]), device)
    root_store._is_locked = state["locked"]
    return root_store


def _resolve_class(ref: Any, explicit: bool) -> Any:
    if isinstance(ref, type):
        return ref
    mod_name, _, qual = str(ref).rpartition(".")
    mod = sys.modules.get(mod_name)
    if mod is None and explicit:
        mod = importlib.import_module(mod_name)
    if mod is None:
        warnings.warn(
            f"The stored TensorDict was written from the tensorclass {ref!r}, whose module is not "
            "imported in this process; returning the TensorDictStore. Import the module or pass "
            "tensorclass_cls= to get an instance of the class.",
            stacklevel=3,
        )
        return None
    obj: Any = mod
    for part in qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if not getattr(obj, "_is_tensorclass", False):
        msg = f"{ref!r} is not a tensorclass."
        raise TypeError(msg)
    return obj


