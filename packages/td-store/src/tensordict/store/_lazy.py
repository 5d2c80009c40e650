"""``LazyStackedTensorDictStore``: a lazy stack of TensorDicts stored on a Redis-protocol
server, one blob per leaf with the elements at offsets (shapes may differ per element).

Schema entries of a lazy store: ``{"t": "stack", "dtype": ..., "shape": [...]}`` when
every element has the same shape, else ``{"t": "stack", "dtype": ..., "shapes": [[...],
...]}`` (one per element); per-element non-tensor data is a JSON list (``"jsonl"``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from typing import Any

import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from tensordict.ext import LazyStackedTensorDict
from tensordict.store._codec import (
    StoreDataError,
    bytes_to_tensor,
    check_blob,
    decode_json,
    dtype_tag,
    encode_nontensor,
    nbytes,
    tensor_to_bytes,
)
from tensordict.store._conn import STORE_BACKENDS, Connection, dumps_json, path_field
from tensordict.store._io import as_nontensor
from tensordict.store._root import (
    StoreHandleMixin,
    _Root,
    connection_from_handle,
    probe_meta,
    read_meta,
    write_meta,
)

__all__ = ["LazyStackedTensorDictStore"]

_MISSING: Any = object()


def _layout(entry: dict, count: int) -> tuple:
    """``(shapes, offsets)`` of a stacked leaf: one shape per element, ``count + 1`` offsets."""
    if "shape" in entry:
        shapes = [entry["shape"]] * count
        step = nbytes(entry["shape"], entry["dtype"])
        return shapes, [i * step for i in range(count + 1)]
    shapes = entry["shapes"]
    offsets = [0]
    for s in shapes:
        offsets.append(offsets[-1] + nbytes(s, entry["dtype"]))
    return shapes, offsets


def _element_leaves(td: Any, path: tuple, out: dict, nodes: dict) -> None:
    """``out[path] = leaf`` for every leaf of one element; ``nodes[path] = bs`` for its TensorDicts."""
    for key, v in td.items():
        p = (*path, key)
        if isinstance(v, (torch.Tensor, NonTensorData)):
            out[p] = v
        elif isinstance(v, NonTensorStack):
            out[p] = NonTensorData(v.tolist(), batch_size=[])
        elif isinstance(v, TensorDictBase) or getattr(type(v), "_is_tensorclass", False):
            nodes[p] = list(v.batch_size)
            _element_leaves(v, p, out, nodes)
        else:
            out[p] = NonTensorData(v, batch_size=[])


def _upload(root: _Root, pipe: Any, base: tuple, elements: list) -> list:
    """Queues the commands storing ``elements`` (TensorDicts of one stack) under ``base``;
    returns ``(path, entry)`` of what was written."""
    per: list = []
    nodes: dict = {}
    for el in elements:
        leaves: dict = {}
        _element_leaves(el, base, leaves, nodes)
        per.append(leaves)
    keys = list(per[0]) if per else []
    for i, leaves in enumerate(per[1:], 1):
        if set(leaves) != set(keys):
            msg = (
                f"LazyStackedTensorDictStore needs the same keys in every stacked TensorDict: element 0 has "
                f"{sorted(map(str, keys))}, element {i} has {sorted(map(str, leaves))}."
            )
            raise ValueError(msg)
    written: list = []
    entry: dict
    for p, bs in nodes.items():
        entry = {"t": "td", "bs": bs}
        pipe.hset(root.schema_key, path_field(p), dumps_json(entry))
        written.append((p, entry))
    for p in keys:
        vals = [leaves[p] for leaves in per]
        dkey = root.data_key(path_field(p))
        pipe.delete(dkey)
        if isinstance(vals[0], torch.Tensor):
            dtype = vals[0].dtype
            shapes = [list(v.shape) for v in vals]
            entry = {"t": "stack", "dtype": dtype_tag(dtype)}
            if all(s == shapes[0] for s in shapes):
                entry["shape"] = shapes[0]
            else:
                entry["shapes"] = shapes
            pipe.set(dkey, b"".join(tensor_to_bytes(v.to(dtype)) for v in vals))
        else:
            payloads = [encode_nontensor(v.data if isinstance(v, NonTensorData) else v, p, False)[1] for v in vals]
            entry = {"t": "jsonl", "bs": [len(vals)]}
            pipe.rpush(dkey, *payloads)
        pipe.hset(root.schema_key, path_field(p), dumps_json(entry))
        written.append((p, entry))
    return written


class LazyStackedTensorDictStore(StoreHandleMixin, TensorDictBase):
    """A lazy stack of ``count`` TensorDicts (batch size ``inner_batch_size`` each) on a
    Redis-protocol server: one blob per leaf, the elements at offsets, so elements may
    have leaves of different shapes (heterogeneous stacks).

    Batch size ``[count, *inner_batch_size]`` (stacked along dim 0). ``store[i]`` is a
    write-through view of element ``i`` (reads and in-place writes touch only its bytes);
    ``store[slice or index tensor]`` reads the selected elements in one round trip and
    returns an in-memory lazy stack; ``store[key]`` reads a whole leaf (stacked).

    Keyword Args:
        backend, host, port, db, unix_socket_path, prefix, device, client, td_id,
            cache_metadata, allow_pickle, **redis_kwargs: as for
            :class:`~tensordict.store.TensorDictStore`.
        count (int): the number of stacked TensorDicts.
        stack_dim (int): the stack dim; only ``0`` is supported.
        inner_batch_size (sequence of int): the batch size of each stacked TensorDict.

    Raises:
        NotImplementedError: ``stack_dim`` is not 0.
        ConnectionError: the server cannot be reached.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> from tensordict.store import LazyStackedTensorDictStore
        >>> ls = lazy_stack([TensorDict(a=torch.zeros(3, 4), batch_size=[3]), TensorDict(a=torch.zeros(3, 8), batch_size=[3])])
        >>> st = LazyStackedTensorDictStore.from_lazy_stack(ls, port=PORT)  # doctest: +SKIP
        >>> st[1]["a"].shape  # doctest: +SKIP
        torch.Size([3, 8])
    """

    def __init__(
        self,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        count: int,
        stack_dim: int = 0,
        inner_batch_size: Any,
        device: Any = None,
        client: Any = None,
        td_id: str | None = None,
        cache_metadata: bool = True,
        allow_pickle: bool = False,
        **redis_kwargs: Any,
    ) -> None:
        if stack_dim != 0:
            msg = f"LazyStackedTensorDictStore stacks along dim 0 only, got stack_dim={stack_dim}."
            raise NotImplementedError(msg)
        conn = Connection(backend, host, port, db, unix_socket_path, client, redis_kwargs)
        new = td_id is None
        root = _Root(conn, prefix, str(uuid.uuid4()) if new else str(td_id), cache_metadata, allow_pickle)
        inner = torch.Size(inner_batch_size)
        device = None if device is None else torch.device(device)
        meta = None if new else read_meta(root)
        if meta is not None:
            count = int(meta.get("count", count))
            inner = torch.Size(meta["batch_size"][1:])
        else:
            write_meta(root, torch.Size([count, *inner]), device, kind="lazy", count=count, stack_dim=0)
        self._init(root, (), int(count), inner, device)

    def _init(self, root: _Root, path: tuple, count: int, inner: torch.Size, device: Any) -> None:
        self._root = root
        self._path = path
        self._count = count
        self._stack_dim = 0
        self._inner_batch_size = inner
        self._batch_size = torch.Size([count, *inner])
        self._device = device
        self._is_locked = False

    def _child_node(self, name: str, entry: dict | None) -> LazyStackedTensorDictStore:
        obj = LazyStackedTensorDictStore.__new__(LazyStackedTensorDictStore)
        inner = torch.Size(entry["bs"]) if entry is not None else self._inner_batch_size
        obj._init(self._root, (*self._path, name), self._count, inner, self._device)
        obj._is_locked = self._is_locked
        return obj

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_lazy_stack(
        cls,
        lazy_td: Any,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        **kwargs: Any,
    ) -> LazyStackedTensorDictStore:
        """Uploads a lazy stack (its TensorDicts, without stacking them) in one transaction.

        Args:
            lazy_td (LazyStackedTensorDict): stacked along dim 0; every stacked
                TensorDict must have the same keys (shapes may differ).

        Keyword Args:
            backend, host, port, db, unix_socket_path, prefix, device, **kwargs: as for
                :class:`LazyStackedTensorDictStore`.

        Returns:
            LazyStackedTensorDictStore: batch size ``lazy_td.batch_size``.

        Raises:
            ValueError: the stacked TensorDicts have different keys.
            NotImplementedError: ``lazy_td`` is stacked along a dim other than 0.
        """
        stack_dim = getattr(lazy_td, "stack_dim", 0)
        tds = list(getattr(lazy_td, "tensordicts", None) or lazy_td.unbind(0))
        if stack_dim != 0:
            msg = f"LazyStackedTensorDictStore stacks along dim 0 only, got a lazy stack along dim {stack_dim}."
            raise NotImplementedError(msg)
        inner = tds[0].batch_size if tds else lazy_td.batch_size[1:]
        store = cls(
            backend=backend, host=host, port=port, db=db, unix_socket_path=unix_socket_path, prefix=prefix,
            count=len(tds), inner_batch_size=inner, device=device if device is not None else lazy_td.device, **kwargs,
        )
        root = store._root
        pipe = root.conn.pipeline()
        written = _upload(root, pipe, (), tds)
        root.conn.execute(pipe)
        for p, e in written:
            root.remember(p, e)
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
        **kwargs: Any,
    ) -> LazyStackedTensorDictStore:
        """Opens the stored lazy stack ``td_id``.

        Raises:
            KeyError: no LazyStackedTensorDictStore ``td_id`` on the server.
        """
        meta, server = probe_meta(backend, host, port, db, unix_socket_path, prefix, td_id, kwargs)
        if meta is None or meta.get("kind") != "lazy":
            msg = f"No LazyStackedTensorDictStore with td_id={td_id!r} under prefix {prefix!r} on server {server}."
            raise KeyError(msg)
        return cls(
            backend=backend, host=host, port=port, db=db, unix_socket_path=unix_socket_path, prefix=prefix,
            count=int(meta["count"]), inner_batch_size=meta["batch_size"][1:], td_id=td_id, device=device, **kwargs,
        )

    def __reduce__(self) -> tuple:
        root = self._root
        state = {
            "handle": root.conn.handle(), "prefix": root.namespace, "td_id": root.td_id, "path": self._path,
            "count": self._count, "inner": list(self._inner_batch_size),
            "device": None if self._device is None else str(self._device),
            "cache": root.cache is not None, "allow_pickle": root.allow_pickle,
        }
        return (_rebuild, (state,))

    # ------------------------------------------------------------------ primitives
    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:
        children = self._children(refresh=self._root.cache is None)
        if key not in children:
            children = self._children(refresh=True)
            if key not in children:
                return default
        entry = children[key]
        if entry is None or entry["t"] == "td":
            return self._child_node(key, entry)
        return self.to_tensordict(only=(key,)).get(key) if entry["t"] != "jsonl" else self._read_list(key, entry)

    def _read_list(self, key: str, entry: dict) -> Any:
        root = self._root
        conn = root.conn
        path = (*self._path, key)
        raw = conn.call(conn.client.lrange, root.data_key(path_field(path)), 0, -1)
        values = [decode_json(x, path, conn.server) for x in raw]
        inner_n = max(math.prod(self._inner_batch_size), 1)
        return as_nontensor([v for v in values for _ in range(inner_n)], list(self._batch_size), self._device)

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        if isinstance(value, (torch.Tensor, TensorDictBase)) and value.shape[:1] != (self._count,):
            msg = f"Cannot store key {key!r}: its leading dim must be the stack's count {self._count}."
            raise RuntimeError(msg)
        elements = [TensorDict({key: v}, batch_size=self._inner_batch_size) for v in value.unbind(0)] if not isinstance(
            value, NonTensorData
        ) else [TensorDict({key: value.data}, batch_size=self._inner_batch_size)] * self._count
        root = self._root
        pipe = root.conn.pipeline()
        self._queue_delete(pipe, (*self._path, key))
        written = _upload(root, pipe, self._path, elements)
        root.conn.execute(pipe)
        root.forget_under((*self._path, key))
        for p, e in written:
            root.remember(p, e)

    def _del_raw(self, key: str) -> None:
        root = self._root
        pipe = root.conn.pipeline()
        self._queue_delete(pipe, (*self._path, key))
        root.conn.execute(pipe)
        root.forget_under((*self._path, key))

    # ------------------------------------------------------------------ reads
    def _read_elements(self, idx: list, only: tuple | None = None) -> list:
        """The elements ``idx`` (element numbers) as TensorDicts, read in one atomic call."""
        root = self._root
        conn = root.conn
        nodes, leaves = self._subtree(refresh=root.cache is None)
        if only is not None:
            n = len(only)
            leaves = {r: e for r, e in leaves.items() if r[:n] == only}
            nodes = {r: b for r, b in nodes.items() if r[:n] == only}
        stacks = [(r, e) for r, e in leaves.items() if e["t"] == "stack"]
        lists = [(r, e) for r, e in leaves.items() if e["t"] == "jsonl"]
        keys, args, layouts = [], [], []
        for rel, e in stacks:
            shapes, offsets = _layout(e, self._count)
            layouts.append((shapes, offsets))
            keys.append(root.data_key(path_field((*self._path, *rel))))
            args.append(len(idx))
            for i in idx:
                args.extend((offsets[i], offsets[i + 1] - offsets[i]))
        pipe = conn.pipeline()
        if keys:
            conn.queue_script(pipe, "ranges", keys, args)
        for rel, _ in lists:
            pipe.lrange(root.data_key(path_field((*self._path, *rel))), 0, -1)
        got = conn.execute(pipe) if (keys or lists) else []
        blobs = got.pop(0) if keys else []
        server = conn.server
        per: list[dict] = [{} for _ in idx]
        for (rel, e), blob, (shapes, offsets) in zip(stacks, blobs, layouts):
            path = (*self._path, *rel)
            check_blob(blob, sum(offsets[i + 1] - offsets[i] for i in idx), path, server)
            pos = 0
            for j, i in enumerate(idx):
                n = offsets[i + 1] - offsets[i]
                t = bytes_to_tensor(blob[pos : pos + n], shapes[i], e["dtype"])
                per[j][rel] = t if self._device is None else t.to(self._device)
                pos += n
        for (rel, _), raw in zip(lists, got):
            path = (*self._path, *rel)
            if len(raw) != self._count:
                msg = f"Key {path!r} on server {server}: expected {self._count} non-tensor values, got {len(raw)}."
                raise StoreDataError(msg)
            for j, i in enumerate(idx):
                per[j][rel] = decode_json(raw[i], path, server)
        from tensordict.store._io import build_td

        out = []
        for values in per:
            vals = {}
            for rel, v in values.items():
                vals[rel] = v if isinstance(v, torch.Tensor) else NonTensorData(v, batch_size=self._inner_node_bs(rel, nodes))
            out.append(build_td((), list(self._inner_batch_size), nodes, vals, self._device))
        return out

    def _inner_node_bs(self, rel: tuple, nodes: dict) -> list:
        return list(nodes.get(rel[:-1], self._inner_batch_size)) if len(rel) > 1 else list(self._inner_batch_size)

    def to_tensordict(self, *, retain_none: bool | None = None, only: tuple | None = None) -> TensorDictBase:
        """Reads everything: a dense :class:`~tensordict.TensorDict` when all elements have
        the same shapes, else an in-memory lazy stack."""
        tds = self._read_elements(list(range(self._count)), only)
        return _stack(tds, self._batch_size, self._device)

    def to_local(self) -> TensorDictBase:
        """Alias of :meth:`to_tensordict`."""
        return self.to_tensordict()

    def contiguous(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        return self.to_tensordict()

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictBase:
        """``recurse=True``: an in-memory copy; ``False``: a second handle on the same data."""
        if not recurse:
            return self._child_like()
        return self.to_tensordict()

    def _child_like(self) -> LazyStackedTensorDictStore:
        obj = LazyStackedTensorDictStore.__new__(LazyStackedTensorDictStore)
        obj._init(self._root, self._path, self._count, self._inner_batch_size, self._device)
        return obj

    def _elements_of(self, index: Any) -> tuple:
        """``(element numbers, rest of the index, single)`` for an index of the stack dim."""
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) and index else (index, ())
        if first is Ellipsis and not rest:
            return list(range(self._count)), (), False
        pos = torch.arange(self._count)[first]
        if pos.ndim == 0:
            return [int(pos)], rest, True
        return pos.view(-1).tolist(), rest, False

    def _index(self, index: Any) -> Any:
        try:
            idx, rest, single = self._elements_of(index)
        except (IndexError, TypeError, RuntimeError):
            return self.to_tensordict()[index]
        if single:
            view = _StackElement(self, idx[0])
            return view[rest] if rest else view
        out = _stack(self._read_elements(idx), torch.Size([len(idx), *self._inner_batch_size]), self._device)
        return out[(slice(None),) + tuple(rest)] if rest else out

    # ------------------------------------------------------------------ writes
    def __setitem__(self, index: Any, value: Any) -> None:
        cls = index.__class__
        if cls is str or (cls is tuple and index and all(i.__class__ is str or i.__class__ is tuple for i in index)):
            TensorDictBase.__setitem__(self, index, value)
            return
        idx, rest, single = self._elements_of(index)
        if rest:
            msg = "LazyStackedTensorDictStore: write whole elements (store[i] = td), not parts of them."
            raise NotImplementedError(msg)
        if isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
            value = TensorDict(value, batch_size=self._inner_batch_size if single else [len(idx), *self._inner_batch_size])
        elements = [value] if single else list(value.unbind(0))
        if len(elements) != len(idx):
            msg = f"Cannot write {len(elements)} stacked TensorDicts into {len(idx)} elements."
            raise RuntimeError(msg)
        pipe = self._root.conn.pipeline()
        for i, el in zip(idx, elements):
            _StackElement(self, i)._queue_element_write(pipe, el)
        self._root.conn.execute(pipe)

    def _write_back(self, local: TensorDictBase) -> None:
        self[slice(None)] = local

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(\n    keys={self._keys_raw()!r},\n    batch_size={self._batch_size!r},\n"
            f"    count={self._count},\n    stack_dim={self._stack_dim},\n    device={self._device!r},\n"
            f"    backend={self._backend!r},\n    td_id={self._td_id!r})"
        )


def _stack(tds: list, bs: torch.Size, device: Any) -> TensorDictBase:
    if not tds:
        return TensorDict({}, batch_size=bs, device=device)
    try:
        return torch.stack(tds, 0)  # type: ignore[return-value]
    except RuntimeError:
        return LazyStackedTensorDict.lazy_stack(tds, 0)


class _StackElement(StoreHandleMixin, TensorDictBase):
    """Element ``i`` of a :class:`LazyStackedTensorDictStore` (or a nested TensorDict of
    it): reads and writes go to that element's bytes on the server; the shapes of its
    leaves are fixed (writing another shape raises ``RuntimeError``)."""

    def __init__(self, store: LazyStackedTensorDictStore, i: int, path: tuple | None = None, bs: Any = None) -> None:
        self._store = store
        self._i = i
        self._root = store._root
        self._path = store._path if path is None else path
        self._batch_size = store._inner_batch_size if bs is None else torch.Size(bs)
        self._device = store._device
        self._is_locked = False

    def _child_node(self, name: str, entry: dict | None) -> _StackElement:
        bs = entry["bs"] if entry is not None else self._batch_size
        return _StackElement(self._store, self._i, (*self._path, name), bs)

    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:
        children = self._children(refresh=self._root.cache is None)
        if key not in children:
            return default
        entry = children[key]
        if entry is None or entry["t"] == "td":
            return self._child_node(key, entry)
        return self.to_tensordict()._get_raw(key, default)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """This element as an in-memory TensorDict (one round trip)."""
        store = self._store
        n = len(store._path)
        if len(self._path) == n:
            return store._read_elements([self._i])[0]
        full = store._read_elements([self._i], only=self._path[n:])[0]
        return full.get(self._path[n:])

    def _index(self, index: Any) -> Any:
        return self.to_tensordict()[index]

    def clone(self, recurse: bool = True, **kwargs: Any) -> Any:
        return self.to_tensordict() if recurse else self

    def _queue_element_write(self, pipe: Any, value: Any) -> None:
        """Queues the ``SETRANGE``/``LSET`` commands writing ``value`` (a TensorDict of this
        element's structure) into this element; checks shapes first."""
        store = self._store
        root = self._root
        leaves: dict = {}
        nodes: dict = {}
        _element_leaves(value, self._path, leaves, nodes)
        entries = root.entries(refresh=root.cache is None)
        for path, v in leaves.items():
            e = entries.get(path)
            if e is None:
                e = root.entries(refresh=True).get(path)
            if e is None:
                msg = f"Key {path!r} is not in the LazyStackedTensorDictStore: its keys are fixed."
                raise RuntimeError(msg)
            dkey = root.data_key(path_field(path))
            if e["t"] == "stack":
                shapes, offsets = _layout(e, store._count)
                shape = shapes[self._i]
                if not isinstance(v, torch.Tensor) or list(v.shape) != list(shape):
                    got = tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__
                    msg = (
                        f"Cannot write key {path!r} of element {self._i}: its shape is fixed at {tuple(shape)}, "
                        f"got {got}."
                    )
                    raise RuntimeError(msg)
                pipe.setrange(dkey, offsets[self._i], tensor_to_bytes(v.to(e["dtype"])))
            elif e["t"] == "jsonl":
                data = v.data if isinstance(v, NonTensorData) else v
                pipe.lset(dkey, self._i, encode_nontensor(data, path, False)[1])

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        self._write_back(TensorDict({key: value}, batch_size=self._batch_size))

    def _write_back(self, local: Any) -> None:
        pipe = self._root.conn.pipeline()
        self._queue_element_write(pipe, local)
        self._root.conn.execute(pipe)

    def _write_inplace(self, key: Any, existing: Any, value: Any) -> None:
        if isinstance(existing, torch.Tensor) and isinstance(value, torch.Tensor):
            if value.shape != existing.shape:
                msg = f"Cannot write key {key!r} of element {self._i}: its shape is fixed at {tuple(existing.shape)}, got {tuple(value.shape)}."
                raise RuntimeError(msg)
            self.set(key, value)
            return
        super()._write_inplace(key, existing, value)

    def _del_raw(self, key: str) -> None:
        msg = "Cannot delete a key from one element of a LazyStackedTensorDictStore; delete it from the store."
        raise RuntimeError(msg)

    def __repr__(self) -> str:
        return f"_StackElement(index={self._i}, keys={self._keys_raw()!r}, batch_size={self._batch_size!r}, td_id={self._td_id!r})"


def _rebuild(state: dict) -> LazyStackedTensorDictStore:
    h = state["handle"]
    conn = connection_from_handle(h)
    root = _Root(conn, state["prefix"], state["td_id"], state["cache"], state["allow_pickle"])
    obj = LazyStackedTensorDictStore.__new__(LazyStackedTensorDictStore)
    device = None if state["device"] is None else torch.device(state["device"])
    obj._init(root, tuple(state["path"]), state["count"], torch.Size(state["inner"]), device)
    return obj
