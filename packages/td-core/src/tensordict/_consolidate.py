"""Consolidation: every leaf of a TensorDict in one contiguous storage (``ConsolidateMixin``).

``td.consolidate()`` copies every tensor leaf into one ``uint8`` storage and returns a
TensorDict (locked) whose leaves are views into it. ``to(device)``, pickling and
sending then move one block of bytes. Leaves are grouped by dtype, largest item
size first, so every leaf starts at a multiple of its item size without padding.
Non-tensor data stays as Python objects in memory (and is written as JSON in a file).

A consolidated TensorDict remembers its layout (``td._consolidated``). Its
``to(device)`` moves the storage in one copy and rebuilds the views, *only if* the
TensorDict still matches that layout: same keys in the same order, the same leaf
tensor objects, same batch sizes. After a key is added, replaced or deleted (on an
unlocked copy), ``is_consolidated()`` is ``False`` and ``to`` takes the regular
leaf-by-leaf path, so nothing is silently lost.

File format (``consolidate(filename=...)``, read by :func:`from_consolidated`), all
integers little-endian:

====================  =========================================================
bytes ``0:8``         magic ``b"TDCONSOL"``
bytes ``8:12``        ``uint32`` format version (``1``)
bytes ``12:20``       ``uint64`` length ``M`` of the JSON metadata
bytes ``20:20+M``     UTF-8 JSON metadata (below)
zero padding          up to ``D = ceil((20 + M) / 64) * 64``
bytes ``D:D+nbytes``  the raw storage: the leaves' bytes, in native byte order
====================  =========================================================

The metadata is ``{"format": "tensordict.consolidated", "version": 1, "nbytes": int,
"leaves": [{"dtype": "float32", "shape": [...], "offset": int}, ...], "root": node}``
where a node is ``{"batch_size": [...], "device": str | null, "names": [...] | null,
"entries": [[key, kind, payload], ...]}`` and ``kind`` is ``"tensor"`` (payload: index
into ``leaves``; ``offset`` is relative to ``D``), ``"td"`` (payload: a node),
``"data"`` (payload: the JSON value of a ``NonTensorData``) or ``"stack"`` (payload:
``{"shape": [...], "items": [...]}`` for a ``NonTensorStack``, items in row-major order).
Loading never unpickles and never imports anything named in the file; a file that is
not in this format, or is truncated, raises ``ValueError`` naming the file.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch
from torch._C._nn import flatten_dense_tensors as _flatten_dense
from torch._C._nn import unflatten_dense_tensors as _unflatten_dense

from tensordict import _classes
from tensordict._formats import (
    CONSOLIDATED_ALIGN,
    CONSOLIDATED_FORMAT,
    CONSOLIDATED_HEADER,
    CONSOLIDATED_MAGIC,
    CONSOLIDATED_VERSION,
)
from tensordict._host import TensorDictHost
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._unbatched import UnbatchedTensor

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["ConsolidateMixin", "from_consolidated"]

_new_obj = object.__new__

MAGIC = CONSOLIDATED_MAGIC
VERSION = CONSOLIDATED_VERSION
_HEADER = CONSOLIDATED_HEADER
_ALIGN = CONSOLIDATED_ALIGN
_FORMAT = CONSOLIDATED_FORMAT

#: dtypes a file may name (anything else is rejected when reading)
_DTYPES = {
    str(dt).split(".")[-1]: dt
    for dt in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16,
        torch.complex128, torch.complex64,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
        torch.uint16, torch.uint32, torch.uint64, torch.bool,
        torch.float8_e4m3fn, torch.float8_e5m2,
    )
}

_TENSOR, _TD, _OTHER = 0, 1, 2
#: levels that ``_build`` makes by recursion before it hands the subtree to ``_build_deep``
_RECURSION_DEPTH = 200


class _State:
    """What a consolidated TensorDict knows about its storage.

    ``skeleton`` mirrors the tree: ``(batch_size, device, names, entries)`` with entries
    ``(key, kind, payload)``: kind ``_TENSOR`` -> index into ``leaves``; ``_TD`` -> a
    sub-skeleton; ``_OTHER`` -> the non-tensor object. ``runs`` are the contiguous
    same-dtype stretches of the storage: ``(dtype, byte_start, nbytes, leaf indices)``.
    """

    __slots__ = ("storage", "skeleton", "runs", "leaves", "filename")

    def __init__(self, storage: torch.Tensor, skeleton: tuple, runs: list, leaves: list, filename: str | None) -> None:
        self.storage = storage
        self.skeleton = skeleton
        self.runs = runs
        self.leaves = leaves
        self.filename = filename

    def __getstate__(self) -> tuple:
        return (self.storage, self.skeleton, self.runs, self.leaves, self.filename)

    def __getitem__(self, name: str) -> Any:
        """``state["storage"]`` (upstream exposes the consolidated state as a dict).

        ``state["metadata"]`` is the layout as the file format writes it: ``nbytes``,
        ``leaves`` (dtype, shape, offset) and ``root`` (omitted when a non-tensor value
        is not JSON-serializable).
        """
        if name == "metadata":
            meta: dict = {"format": _FORMAT, "version": VERSION, "nbytes": int(self.storage.numel()),
                          "leaves": _leaf_specs(self.runs, self.leaves)}
            try:
                meta["root"] = _json_node(self.skeleton, ())
            except TypeError:
                pass
            return meta
        try:
            return getattr(self, name)
        except AttributeError:
            raise KeyError(name) from None

    def __setstate__(self, state: tuple) -> None:
        self.storage, self.skeleton, self.runs, self.leaves, self.filename = state


# ---------------------------------------------------------------------- tree walks
def _collect(td: Any, leaves: list, base: Any, td_cls: Any, slots: list | None = None) -> tuple:
    """The skeleton of ``td`` (its tensor leaves appended to ``leaves``).

    With ``slots``, also builds the locked output tree in the same walk: a TensorDict
    per level whose tensor entries are placeholders, listed in ``slots`` as
    ``(source dict, key)`` in leaf order, for the caller to fill with the views.
    Returns ``(skeleton, output or None)``.

    Depth first in key order, with an explicit stack (no recursion limit on the nesting
    depth). A node's entry list and output TensorDict are made when the walk meets it and
    filled as it goes; everything per node and per leaf is written inline (this walk is
    most of what consolidating a deep tree costs above the copy itself).
    """
    tensor = torch.Tensor
    unbatched = UnbatchedTensor
    tensor_kind, td_kind, other_kind = _TENSOR, _TD, _OTHER
    add_leaf = leaves.append
    n = len(leaves)
    build = slots is not None
    add_slot = slots.append if slots is not None else None
    stack: list = []
    root: tuple | None = None
    out = sub = None
    entries: list = []
    src: dict = {}
    items: Any = None
    parent_key = None
    pending = td  # a TensorDict met but not opened yet
    while True:
        if pending is not None:
            if pending.__class__ is td_cls:
                node_items = pending._tensordict.items()
                bs, device, names = pending._batch_size, pending._device, pending._names
            else:
                node_items = pending._items_raw()
                bs, device = pending.batch_size, pending.device
                names = pending.names if pending._has_names() else None
            node_entries: list = []
            node = (bs, device, names, node_entries)
            node_src: dict = {}
            if build:
                sub = _new_obj(td_cls)  # ``_new_unsafe``, locked
                sub._tensordict = node_src
                sub._batch_size = bs
                sub._device = device
                sub._is_locked = True
                if names is not None:
                    sub._names = list(names)
            if root is None:
                root, out = node, sub
            else:
                entries.append((parent_key, td_kind, node))
                if build:
                    src[parent_key] = sub
                stack.append((items, entries, src))
            items, entries, src = iter(node_items), node_entries, node_src
            pending = None
        for key, value in items:
            cls = value.__class__
            if cls is tensor or (cls is not unbatched and cls is not td_cls and isinstance(value, tensor)):
                entries.append((key, tensor_kind, n))
                n += 1
                add_leaf(value)
                if build:
                    src[key] = None
                    add_slot((src, key))  # type: ignore[misc]
            elif cls is td_cls or (cls is not unbatched and isinstance(value, base)):
                pending, parent_key = value, key
                break
            else:
                # an UnbatchedTensor is not packed: a storage view would lose the wrapper (and
                # with it the exemption from the batch-size rule); it stays as it is
                entries.append((key, other_kind, value))
                src[key] = value
        else:
            if not stack:
                return root, out
            items, entries, src = stack.pop()


def _matches(td: Any, node: tuple, leaves: list, base: Any) -> bool:
    """``True`` if ``td`` still is exactly the tree described by ``node`` (levels checked
    from an explicit stack: no recursion limit on the depth)."""
    todo = [(td, node)]
    while todo:
        td, node = todo.pop()
        if td.batch_size != node[0]:
            return False
        entries = node[3]
        n = len(entries)
        i = 0
        for key, value in td._items_raw():
            if i >= n:
                return False
            k, kind, payload = entries[i]
            i += 1
            if key != k:
                return False
            if kind == _TENSOR:
                if value is not leaves[payload]:
                    return False
            elif kind == _TD:
                if not isinstance(value, base):
                    return False
                todo.append((value, payload))
            elif value is not payload:
                return False
        if i != n:
            return False
    return True


def _build(node: tuple, views: list, device: Any, td_cls: Any, move: bool, lock: bool, depth: int = 0) -> tuple:
    """A TensorDict over ``views`` shaped like ``node``, and its skeleton.

    With ``move``, every level gets ``device`` (non-tensor leaves are moved too).
    Recursive (the cheapest per level) down to ``_RECURSION_DEPTH`` levels; a deeper tree
    is built by :func:`_build_deep`.
    """
    if depth >= _RECURSION_DEPTH:
        return _build_deep(node, views, device, td_cls, move, lock)
    bs, dev, names, entries = node
    source = {}
    if not move:
        for key, kind, payload in entries:
            if kind == _TENSOR:
                source[key] = views[payload]
            elif kind == _TD:
                source[key] = _build(payload, views, device, td_cls, False, lock, depth + 1)[0]
            else:
                source[key] = payload
        out = td_cls._new_unsafe(source, bs, dev, names)
        if lock:
            out._is_locked = True
        return out, node
    new_entries = []
    for entry in entries:
        key, kind, payload = entry
        if kind == _TENSOR:
            source[key] = views[payload]
        elif kind == _TD:
            sub, sub_node = _build(payload, views, device, td_cls, True, lock, depth + 1)
            source[key] = sub
            entry = (key, _TD, sub_node)
        else:
            if device is not None and hasattr(payload, "to"):
                payload = payload.to(device)
                entry = (key, _OTHER, payload)
            source[key] = payload
        new_entries.append(entry)
    out = td_cls._new_unsafe(source, bs, device, names)
    if lock:
        out._is_locked = True
    return out, (bs, device, names, new_entries)


def _build_deep(node: tuple, views: list, device: Any, td_cls: Any, move: bool, lock: bool) -> tuple:
    """:func:`_build` for trees of any depth.

    With ``move``, every level gets ``device`` (non-tensor leaves are moved too) and the
    skeleton returned is a new one. Top down with an explicit stack (no recursion limit
    on the depth): each level's TensorDict is made when it is met and its entries filled
    as the walk goes, in the order of the skeleton.
    """
    stack: list = []
    root: Any = None
    pending: Any = node
    parent_key = None
    entries: Any = None
    source: dict = {}
    new_entries: list = []
    while True:
        if pending is not None:
            bs, dev, names, node_entries = pending
            node_source: dict = {}
            out = td_cls._new_unsafe(node_source, bs, device if move else dev, names)
            if lock:
                out._is_locked = True
            node_new: list = []
            new_node = (bs, device, names, node_new) if move else pending
            if root is None:
                root = (out, new_node)
            else:
                source[parent_key] = out
                if move:
                    new_entries.append((parent_key, _TD, new_node))
                stack.append((entries, source, new_entries))
            entries, source, new_entries = iter(node_entries), node_source, node_new
            pending = None
        for entry in entries:
            key, kind, payload = entry
            if kind == _TENSOR:
                source[key] = views[payload]
            elif kind == _TD:
                pending, parent_key = payload, key
                break
            else:
                if move and device is not None and hasattr(payload, "to"):
                    payload = payload.to(device)
                    entry = (key, _OTHER, payload)
                source[key] = payload
            if move:
                new_entries.append(entry)
        else:
            if not stack:
                return root
            entries, source, new_entries = stack.pop()


def _assign_inplace(td: Any, node: tuple, views: list) -> None:
    todo = [(td, node)]  # an explicit stack: no recursion limit on the depth
    while todo:
        td, node = todo.pop()
        for key, kind, payload in node[3]:
            if kind == _TENSOR:
                td._set_raw(key, views[payload])
            elif kind == _TD:
                todo.append((td._get_raw(key), payload))


# ---------------------------------------------------------------------- layout
class _BadLeaf(Exception):
    """A leaf that cannot live in a flat storage (sparse, nested); carries its index."""


def _bad_leaf_error(td: Any, leaf: torch.Tensor) -> TypeError:
    key = next((k for k, v in td.items(True, True) if v is leaf), "?")
    kind = "nested" if leaf.is_nested else str(leaf.layout)
    msg = (
        f"consolidate: the leaf under key {key!r} is a {kind} tensor; only dense (strided) tensors "
        "can be consolidated. Convert it first (e.g. `.to_dense()`), or exclude the key."
    )
    return TypeError(msg)


def _layout(leaves: list) -> tuple[list, int]:
    groups: dict = {}
    strided = torch.strided
    i = 0
    for t in leaves:
        if t.layout is not strided or t.is_nested:
            raise _BadLeaf(i)
        dtype = t.dtype
        idxs = groups.get(dtype)
        if idxs is None:
            groups[dtype] = [i]
        else:
            idxs.append(i)
        i += 1
    runs = []
    start = 0
    for dtype in sorted(groups, key=_minus_itemsize):
        idxs = groups[dtype]
        nbytes = sum(map(_numel, map(leaves.__getitem__, idxs))) * dtype.itemsize  # C-speed passes
        runs.append((dtype, start, nbytes, idxs))
        start += nbytes
    return runs, start


def _minus_itemsize(dtype: torch.dtype) -> int:
    return -dtype.itemsize


_numel = torch.Tensor.numel


def _run_views(slab: torch.Tensor, templates: list) -> Any:
    """Views of a 1-d ``slab`` shaped like ``templates`` (laid out one after the other)."""
    shape = templates[0].shape
    if len(templates) > 1:
        for t in templates:  # a loop, not a generator: this check runs per leaf
            if t.shape != shape:
                return _unflatten_dense(slab, templates)
        return slab.view(len(templates), *shape).unbind(0)  # one C++ call, one view per leaf
    return _unflatten_dense(slab, templates)


def _views(storage: torch.Tensor, runs: list, templates: list) -> list:
    """Views into ``storage`` shaped like ``templates`` (one C++ call per dtype run)."""
    if len(runs) == 1 and runs[0][3] == list(range(len(templates))):
        dtype, start, nbytes, _ = runs[0]
        return list(_run_views(storage[start : start + nbytes].view(dtype), templates))
    views: list = [None] * len(templates)
    for dtype, start, nbytes, idxs in runs:
        slab = storage[start : start + nbytes].view(dtype)
        _scatter(views, idxs, _run_views(slab, [templates[i] for i in idxs]))
    return views


def _scatter(views: list, idxs: list, run_views: Any) -> list:
    for i, v in zip(idxs, run_views):
        views[i] = v
    return views


def _copy(views: list, leaves: list, num_threads: int, non_blocking: bool) -> None:
    if not views:
        return
    device = views[0].device
    # cross-device: plain copies (``is_cpu``, a flag, is cheaper to read than ``device``)
    if not all(t.is_cpu for t in leaves) if device.type == "cpu" else any(t.device != device for t in leaves):
        for view, leaf in zip(views, leaves):
            view.copy_(leaf, non_blocking=non_blocking)
        return
    if num_threads and num_threads > 1 and len(views) > 1:
        chunks = _balanced_chunks(leaves, num_threads)
        with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
            futures = [
                pool.submit(torch._foreach_copy_, [views[i] for i in c], [leaves[i] for i in c], non_blocking=non_blocking)
                for c in chunks
            ]
            for f in futures:
                f.result()
        return
    torch._foreach_copy_(views, leaves, non_blocking=non_blocking)


def _balanced_chunks(leaves: list, n: int) -> list[list[int]]:
    total = sum(t.numel() * t.element_size() for t in leaves) or 1
    target = total / n
    chunks: list[list[int]] = [[]]
    acc = 0
    for i, t in enumerate(leaves):
        chunks[-1].append(i)
        acc += t.numel() * t.element_size()
        if acc >= target * len(chunks) and len(chunks) < n:
            chunks.append([])
    return [c for c in chunks if c]


# ---------------------------------------------------------------------- file metadata
def _json_node(node: tuple, path: tuple) -> dict:
    bs, dev, names, entries = node
    out_entries = []
    for key, kind, payload in entries:
        if kind == _TENSOR:
            out_entries.append([key, "tensor", payload])
        elif kind == _TD:
            out_entries.append([key, "td", _json_node(payload, (*path, key))])
        else:
            if isinstance(payload, UnbatchedTensor):
                msg = (
                    f"consolidate(filename=...): key {'.'.join((*path, key))!r} holds an UnbatchedTensor "
                    f"(shape {list(payload.shape)}), which the consolidated file format cannot record; "
                    "consolidate without a filename (the leaf is kept as it is) or store it as a regular tensor."
                )
                raise TypeError(msg)
            if isinstance(payload, NonTensorStack):
                flat = list(payload._items)
                value: Any = {"shape": list(payload.batch_size), "items": flat}
                kind_name = "stack"
            elif isinstance(payload, NonTensorData):
                value = payload.data
                kind_name = "data"
            else:
                msg = (
                    f"consolidate(filename=...): key {'.'.join((*path, key))!r} holds a "
                    f"{type(payload).__name__}, which cannot be written to a consolidated file."
                )
                raise TypeError(msg)
            try:
                json.dumps(value)
            except (TypeError, ValueError) as err:
                msg = (
                    f"consolidate(filename=...): the non-tensor value under key {'.'.join((*path, key))!r} "
                    f"({type(payload.data if kind_name == 'data' else value).__name__}) is not JSON-serializable "
                    f"({err}). Only JSON values (str, numbers, bool, None, lists, dicts with str keys) can be "
                    "written; consolidate without a filename to keep arbitrary objects in memory."
                )
                raise TypeError(msg) from None
            out_entries.append([key, kind_name, value])
    return {
        "batch_size": list(bs),
        # the file's storage is mapped on the CPU when read back: record that, not the source device
        "device": None if dev is None else "cpu",
        "names": None if names is None else list(names),
        "entries": out_entries,
    }


def _leaf_specs(runs: list, leaves: list) -> list:
    specs: list = [None] * len(leaves)
    for dtype, start, _, idxs in runs:
        off = start
        name = str(dtype).split(".")[-1]
        for i in idxs:
            t = leaves[i]
            specs[i] = {"dtype": name, "shape": list(t.shape), "offset": off}
            off += t.numel() * dtype.itemsize
    return specs


def _data_offset(meta_len: int) -> int:
    head = _HEADER.size + meta_len
    return -(-head // _ALIGN) * _ALIGN


def _open_file_storage(path: str, meta: dict, total: int) -> tuple[torch.Tensor, str]:
    """Writes header + metadata to a temporary file next to ``path`` and maps it."""
    meta_bytes = json.dumps(meta).encode("utf-8")
    data_offset = _data_offset(len(meta_bytes))
    size = data_offset + total
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        msg = f"consolidate: the folder of {path!r} does not exist."
        raise FileNotFoundError(msg)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as f:
        f.write(_HEADER.pack(MAGIC, VERSION, len(meta_bytes)))
        f.write(meta_bytes)
        f.truncate(size)
    if total == 0:
        return torch.empty(0, dtype=torch.uint8), tmp
    mapped = torch.from_file(tmp, shared=True, size=size, dtype=torch.uint8)
    return mapped[data_offset:], tmp


def _fill_file(path: str, meta: dict, total: int, runs: list, leaves: list, num_threads: int) -> tuple:
    """Writes the file (to a temporary name, renamed into place once complete)."""
    storage, tmp = _open_file_storage(path, meta, total)
    try:
        views = _views(storage, runs, leaves)
        _copy(views, leaves, num_threads, False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return storage, views


# ---------------------------------------------------------------------- reading files
def _bad_file(path: str, why: str) -> ValueError:
    return ValueError(
        f"{path!r} is not a readable consolidated TensorDict file: {why}. It must be written by "
        "`td.consolidate(filename=...)` (see the format in tensordict._consolidate)."
    )


def _int_list(value: Any, path: str, what: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise _bad_file(path, f"{what} must be a list of non-negative integers, got {value!r}")
    if any(v > _INT64_MAX for v in value):
        raise _bad_file(path, f"{what} {value!r} has a dimension beyond int64")
    return value


_INT64_MAX = (1 << 63) - 1


def _read_node(node: Any, path: str, specs: list, views: list, used: set, parent_bs: list, depth: int) -> tuple:
    if depth > 1000:
        raise _bad_file(path, "the tree is nested too deeply")
    if not isinstance(node, dict):
        raise _bad_file(path, "a tree node is not an object")
    bs = _int_list(node.get("batch_size"), path, "batch_size")
    if bs[: len(parent_bs)] != parent_bs:
        raise _bad_file(path, f"nested batch_size {bs} does not start with its parent's {parent_bs}")
    device = node.get("device")
    if device is not None and device != "cpu":  # a file-backed storage lives on the CPU
        raise _bad_file(path, f"invalid device {device!r} (a consolidated file holds CPU data)")
    names = node.get("names")
    if names is not None and (not isinstance(names, list) or len(names) != len(bs)):
        raise _bad_file(path, f"invalid names {names!r}")
    entries_in = node.get("entries")
    if not isinstance(entries_in, list):
        raise _bad_file(path, "a tree node has no entry list")
    batch_size = torch.Size(bs)
    entries: list[tuple[str, int, Any]] = []
    seen = set()
    for entry in entries_in:
        if not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[0], str):
            raise _bad_file(path, f"invalid entry {entry!r}")
        key, kind, payload = entry
        if key in seen:
            raise _bad_file(path, f"duplicate key {key!r}")
        seen.add(key)
        if kind == "tensor":
            if not isinstance(payload, int) or isinstance(payload, bool) or not 0 <= payload < len(specs) or payload in used:
                raise _bad_file(path, f"invalid leaf index {payload!r} for key {key!r}")
            used.add(payload)
            if list(views[payload].shape[: len(bs)]) != bs:
                raise _bad_file(path, f"leaf {key!r} of shape {list(views[payload].shape)} does not start with batch_size {bs}")
            entries.append((key, _TENSOR, payload))
        elif kind == "td":
            entries.append((key, _TD, _read_node(payload, path, specs, views, used, bs, depth + 1)))
        elif kind == "data":
            entries.append((key, _OTHER, NonTensorData(payload, batch_size, None)))
        elif kind == "stack":
            if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
                raise _bad_file(path, f"invalid non-tensor stack under {key!r}")
            shape = torch.Size(_int_list(payload.get("shape"), path, "stack shape"))
            if shape.numel() != len(payload["items"]) or list(shape[: len(bs)]) != bs:
                raise _bad_file(path, f"non-tensor stack {key!r} does not match its shape {list(shape)}")
            entries.append((key, _OTHER, NonTensorStack._from_flat(payload["items"], shape, None)))
        else:
            raise _bad_file(path, f"unknown entry kind {kind!r} for key {key!r}")
    return (batch_size, torch.device(device) if device is not None else None, names, entries)


def _runs_from_specs(specs: list) -> list:
    order = sorted(range(len(specs)), key=lambda i: specs[i][2])
    runs: list = []
    for i in order:
        dtype, _, offset, nbytes = specs[i]
        if runs and runs[-1][0] == dtype and runs[-1][1] + runs[-1][2] == offset:
            last = runs[-1]
            runs[-1] = (dtype, last[1], last[2] + nbytes, [*last[3], i])
        else:
            runs.append((dtype, offset, nbytes, [i]))
    return runs


def from_consolidated(filename: str | os.PathLike) -> Any:
    """Reads a TensorDict written by ``td.consolidate(filename=...)``.

    The leaves are views into one copy-on-write memory map of the file: reading is
    lazy, and in-place writes into the leaves do not reach the file. The result is
    consolidated (``to(device)`` moves one buffer) and not locked. Batch sizes,
    devices (as recorded), dim names and JSON non-tensor data are restored.

    Args:
        filename (str or os.PathLike): the file to read.

    Returns:
        a ``TensorDict``.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is not a consolidated TensorDict file (wrong magic bytes,
            unknown version, malformed metadata) or is truncated.

    Examples:
        >>> import tempfile, os
        >>> import torch
        >>> from tensordict import TensorDict, from_consolidated
        >>> td = TensorDict(a=torch.zeros(3), b={"c": torch.ones(3)}, s="hello", batch_size=[3])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = td.consolidate(filename=os.path.join(d, "td.bin"))
        ...     loaded = from_consolidated(os.path.join(d, "td.bin"))
        ...     print(loaded["b", "c"], loaded["s"], loaded.is_consolidated())
        tensor([1., 1., 1.]) hello True
    """
    path = os.fspath(filename)
    if not os.path.isfile(path):
        if os.path.isdir(path):
            msg = f"from_consolidated: {path!r} is a folder, not a consolidated file (a td-memmap store? use load_memmap)."
            raise FileNotFoundError(msg)
        if os.path.exists(path):
            msg = f"from_consolidated: {path!r} is not a regular file (a FIFO, device or socket); refusing to read it."
            raise ValueError(msg)
        msg = f"from_consolidated: no such file {path!r}."
        raise FileNotFoundError(msg)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(_HEADER.size)
        if len(head) < _HEADER.size:
            raise _bad_file(path, f"it has {size} bytes, fewer than the {_HEADER.size}-byte header")
        magic, version, meta_len = _HEADER.unpack(head)
        if magic != MAGIC:
            raise _bad_file(path, f"wrong magic bytes {magic!r} (expected {MAGIC!r})")
        if version != VERSION:
            raise _bad_file(path, f"format version {version} is not supported (this reader knows {VERSION})")
        if _HEADER.size + meta_len > size:
            raise _bad_file(path, f"truncated: the header announces {meta_len} bytes of metadata, the file has {size} bytes")
        meta_bytes = f.read(meta_len)
    try:
        meta = json.loads(meta_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise _bad_file(path, f"the metadata is not valid JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT or meta.get("version") != VERSION:
        raise _bad_file(path, "the metadata does not describe a consolidated TensorDict")
    nbytes = meta.get("nbytes")
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
        raise _bad_file(path, f"invalid storage size {nbytes!r}")
    data_offset = _data_offset(meta_len)
    if data_offset + nbytes > size:
        raise _bad_file(
            path, f"truncated: expected {data_offset + nbytes} bytes ({nbytes} bytes of data), found {size} bytes"
        )
    raw_specs = meta.get("leaves")
    if not isinstance(raw_specs, list):
        raise _bad_file(path, "the metadata has no leaf list")
    specs = []
    for spec in raw_specs:
        if not isinstance(spec, dict):
            raise _bad_file(path, f"invalid leaf description {spec!r}")
        dtype = _DTYPES.get(spec.get("dtype")) if isinstance(spec.get("dtype"), str) else None  # type: ignore[arg-type]
        if dtype is None:
            raise _bad_file(path, f"unsupported dtype {spec.get('dtype')!r}")
        shape = torch.Size(_int_list(spec.get("shape"), path, "a leaf shape"))
        offset = spec.get("offset")
        leaf_bytes = math.prod(shape) * dtype.itemsize  # Python ints: no int64 wrap-around
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or offset % dtype.itemsize:
            raise _bad_file(path, f"invalid leaf offset {offset!r}")
        if offset + leaf_bytes > nbytes:
            raise _bad_file(path, f"a leaf at bytes {offset}:{offset + leaf_bytes} overruns the {nbytes}-byte storage")
        specs.append((dtype, shape, offset, leaf_bytes))
    ranges = sorted((off, off + nb) for _, _, off, nb in specs if nb)
    for (_, end), (start, stop) in zip(ranges, ranges[1:]):
        if start < end:  # leaves sharing bytes: a write to one would change another
            raise _bad_file(path, f"leaves overlap: bytes {start}:{min(end, stop)} belong to two leaves")
    if nbytes:
        mapped = torch.from_file(path, shared=False, size=data_offset + nbytes, dtype=torch.uint8)
        storage = mapped[data_offset : data_offset + nbytes]
    else:
        storage = torch.empty(0, dtype=torch.uint8)
    views = [storage[off : off + nb].view(dtype).view(shape) for dtype, shape, off, nb in specs]
    for dtype, _, off, nb in specs:
        if dtype is torch.bool and nb and bool((storage[off : off + nb] > 1).any()):
            raise _bad_file(path, f"a bool leaf at bytes {off}:{off + nb} holds bytes other than 0 and 1")
    used: set = set()
    skeleton = _read_node(meta.get("root"), path, specs, views, used, [], 0)
    td, skeleton = _build(skeleton, views, None, _classes.TensorDict, False, False)
    td._consolidated = _State(storage, skeleton, _runs_from_specs(specs), views, path)
    lazy_meta = meta.get("lazy_stack")
    if lazy_meta is not None:
        return lazy_from_holder(td, _check_lazy_meta(lazy_meta, td, path))
    return td


# ---------------------------------------------------------------------- lazy stacks
# A lazy stack is consolidated as a "holder": a TensorDict of batch size [] whose
# entries "0", "1", ... are the stacked TensorDicts (so keys that only some of them
# hold are kept). The file records ``{"stack_dim", "n", "stack_name"}`` under
# ``lazy_stack`` in its metadata, and reading it gives the lazy stack back.


def lazy_holder(stack: Any) -> Any:
    """The holder TensorDict of a lazy stack (no copy: its entries are the stacked TensorDicts)."""
    source = {str(i): td for i, td in enumerate(stack.tensordicts)}
    return _classes.TensorDict._new_unsafe(source, torch.Size(()), None)


def lazy_meta_of(stack: Any) -> dict:
    """What a lazy stack needs besides its holder to be rebuilt."""
    return {"stack_dim": stack.stack_dim, "n": len(stack.tensordicts), "stack_name": stack._stack_name}


def _check_lazy_meta(meta: Any, holder: Any, path: str) -> dict:
    ok = (
        isinstance(meta, dict)
        and isinstance(meta.get("n"), int)
        and isinstance(meta.get("stack_dim"), int)
        and meta["n"] >= 1
        and all(str(i) in holder._tensordict for i in range(meta["n"]))
        and (meta.get("stack_name") is None or isinstance(meta.get("stack_name"), str))
    )
    if not ok:
        raise _bad_file(path, f"invalid lazy-stack description {meta!r}")
    return meta


def lazy_from_holder(holder: Any, meta: dict) -> Any:
    """The lazy stack over the entries of a consolidated holder; it shares the holder's storage."""
    tds = [holder._tensordict[str(i)] for i in range(meta["n"])]
    out = _classes.LazyStackedTensorDict(*tds, stack_dim=meta["stack_dim"])
    if meta.get("stack_name") is not None:
        out._stack_name = meta["stack_name"]
    out._consolidated = holder._consolidated
    return out


def _rebuild_lazy_consolidated(meta: dict, *args: Any) -> Any:
    """Unpickles a consolidated lazy stack (its holder, then the stack over it)."""
    return lazy_from_holder(_rebuild_consolidated(*args), meta)


# ---------------------------------------------------------------------- pickling
def _views_from_shapes(storage: torch.Tensor, runs: list, shapes: list) -> list:
    views: list = [None] * len(shapes)
    for dtype, start, nbytes, idxs in runs:
        slab = storage[start : start + nbytes].view(dtype)
        numels = [torch.Size(shapes[i]).numel() for i in idxs]
        for i, chunk in zip(idxs, slab.split_with_sizes(numels)):
            views[i] = chunk.view(shapes[i])
    return views


def _rebuild_consolidated(storage: torch.Tensor, skeleton: tuple, runs: list, shapes: list, locked: bool, filename: Any) -> Any:
    """Unpickles a consolidated TensorDict: one storage, views rebuilt from the layout."""
    views = _views_from_shapes(storage, runs, shapes)
    td, skeleton = _build(skeleton, views, None, _classes.TensorDict, False, locked)
    td._consolidated = _State(storage, skeleton, runs, views, filename)
    return td


def consolidate_future(td: Any, filename: Any, kwargs: dict) -> Any:
    """``consolidate(return_early=True)``: a future of the result (done at once without threads)."""
    from concurrent.futures import Future

    if kwargs.get("non_blocking"):
        msg = "consolidate: return_early=True cannot be combined with non_blocking=True."
        raise NotImplementedError(msg)
    if kwargs.get("use_buffer"):
        msg = "consolidate: return_early=True cannot be combined with use_buffer=True."
        raise NotImplementedError(msg)
    kwargs = {k: v for k, v in kwargs.items() if k not in ("return_early", "use_buffer", "non_blocking")}
    if kwargs.get("num_threads", 0) > 0:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="td-consolidate")
        try:
            return executor.submit(td.consolidate, filename, **kwargs)
        finally:
            executor.shutdown(wait=False)
    future: Future = Future()
    try:
        future.set_result(td.consolidate(filename, **kwargs))
    except BaseException as err:  # noqa: BLE001 - handed to the future, as a thread would
        future.set_exception(err)
    return future


# ---------------------------------------------------------------------- the mixin
class ConsolidateMixin(TensorDictHost):
    """Mixed into TensorDictBase: consolidate / from_consolidated."""

    _consolidated: _State | None = None

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickles a consolidated TensorDict as its one storage plus its layout.

        Its leaves are views of several dtypes into one ``uint8`` storage, which
        ``torch.save`` cannot write leaf by leaf; the storage is written once instead
        (and shared once by ``torch.multiprocessing``). A TensorDict that no longer
        matches its storage is pickled as a copy of its leaves.
        """
        state = self._consolidated
        if state is None:
            return object.__reduce_ex__(self, protocol)
        if self.__class__ is _classes.TensorDict and _matches(self, state.skeleton, state.leaves, _classes.TensorDictBase):
            shapes = [tuple(v.shape) for v in state.leaves]
            args = (state.storage, state.skeleton, state.runs, shapes, self._is_locked, state.filename)
            return (_rebuild_consolidated, args)
        copy = self.clone()
        copy.__dict__.pop("_consolidated", None)
        return copy.__reduce_ex__(protocol)

    def consolidate(
        self,
        filename: str | os.PathLike | None = None,
        *,
        num_threads: int = 0,
        device: Any = None,
        non_blocking: bool = False,
        inplace: bool = False,
        return_early: bool = False,
        use_buffer: bool = False,
        share_memory: bool = False,
        pin_memory: bool = False,
        metadata: bool = False,
    ) -> TensorDictBase:
        """Copies every leaf into one contiguous storage; returns a TensorDict of views of it.

        A consolidated TensorDict moves between devices (``to``) in one copy of one
        buffer. The result is locked: in-place writes into its leaves are fine (they
        stay in the storage), adding or removing entries is not. Non-tensor data is
        kept as is (and written as JSON metadata with ``filename``). A TensorDict that
        is already consolidated is returned as is (moved with ``device=``). Lazy
        stacks come back as lazy stacks (every key of every stacked TensorDict kept);
        other TensorDict types as dense ``TensorDict``.

        Args:
            filename (str or os.PathLike, optional): write the storage to this file
                (format in :mod:`tensordict._consolidate`) and back the result by a
                memory map of it (the result's device is then ``cpu``); read it later
                with :func:`tensordict.from_consolidated`.
                The file is written next to ``filename`` and renamed into place, so
                an earlier file is replaced only by a complete one. Non-tensor data
                must then be JSON-serializable.

        Keyword Args:
            num_threads (int, optional): copy with this many threads. Defaults to ``0``.
            device (torch.device, optional): where to allocate the storage. Defaults
                to the TensorDict's device, or the leaves' device.
            non_blocking (bool, optional): non-blocking copies. Defaults to ``False``.
            inplace (bool, optional): replace the leaves of ``self`` with the views
                and return ``self``. Defaults to ``False``.
            return_early (bool, optional): return a ``concurrent.futures.Future`` whose
                ``result()`` is the consolidated TensorDict. With ``num_threads > 0``
                the copy runs in a background thread (do not modify the source until
                the future is done); with ``num_threads=0`` the future is already done.
                Defaults to ``False``.
            use_buffer (bool, optional): accepted for compatibility: a file is always
                filled through a temporary file renamed into place. Not compatible
                with ``return_early``. Defaults to ``False``.
            share_memory (bool, optional): allocate the storage in shared memory.
            pin_memory (bool, optional): allocate the storage in pinned memory (ignored
                when no accelerator is available).
            metadata (bool, optional): accepted for compatibility: the layout (keys,
                dtypes, shapes, offsets) is always kept with the storage, and
                ``td._consolidated["metadata"]`` gives it as a JSON-able dict (the
                file format's metadata). Defaults to ``False``.

        Returns:
            the consolidated TensorDict (``batch_size``, names and nesting unchanged;
            every leaf is a view into one ``uint8`` storage).

        Raises:
            TypeError: a leaf is sparse or nested, or (with ``filename``) a non-tensor
                value is not JSON-serializable.
            ValueError: ``filename`` with a ``device`` other than the CPU.
            NotImplementedError: ``return_early`` with ``non_blocking`` or ``use_buffer``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(3, dtype=torch.int64)}}, [3])
            >>> ctd = td.consolidate()
            >>> ctd.is_consolidated(), td.is_consolidated()
            (True, False)
            >>> ctd["a"].untyped_storage().data_ptr() == ctd["b", "c"].untyped_storage().data_ptr()
            True
            >>> ctd.to("cpu").is_consolidated()
            True
        """
        if return_early:
            kwargs = {"num_threads": num_threads, "device": device, "non_blocking": non_blocking,
                      "inplace": inplace, "use_buffer": use_buffer, "share_memory": share_memory,
                      "pin_memory": pin_memory}
            return consolidate_future(self, filename, kwargs)
        if device is not None:
            device = torch.device(device)
            if device.type == "cuda" and device.index is None and torch.cuda.is_available():
                device = torch.device("cuda", torch.cuda.current_device())
        state = self._consolidated
        if state is not None and filename is None and not share_memory and not pin_memory:
            if _matches(self, state.skeleton, state.leaves, _classes.TensorDictBase):
                if device is None or device == state.storage.device:
                    return self  # type: ignore[return-value]
                return self._to_consolidated(device, non_blocking)
        base = _classes.TensorDictBase
        td_cls = _classes.TensorDict
        leaves: list = []
        fast_build = device is None and filename is None and not inplace
        slots: list | None = [] if fast_build else None
        skeleton, out = _collect(self, leaves, base, td_cls, slots)
        path = None
        if filename is not None:
            path = os.fspath(filename)
            if device is not None and device.type != "cpu":
                msg = f"consolidate: a file-backed storage lives on the CPU, got device={device}."
                raise ValueError(msg)
        storage_device = device or self.device or (leaves[0].device if leaves else torch.device("cpu"))
        fused = path is None and len(leaves) > 1 and not (share_memory or pin_memory or num_threads)
        if fused:
            # one dtype, dense leaves, one device (unless a TensorDict device vouches for it):
            # one loop, no generator
            dtype0 = leaves[0].dtype
            strided = torch.strided
            same_device = device is None and self.device is not None
            for t in leaves:
                if t.dtype is not dtype0 or t.layout is not strided or t.is_nested or (
                    not same_device and t.device != storage_device
                ):
                    fused = False
                    break
        with torch.no_grad():
            if fused:
                # one dtype, one device: one fused C++ flatten builds the storage
                flat = _flatten_dense(leaves)
                storage = flat.view(torch.uint8)
                views = list(_run_views(flat, leaves))
                runs = [(dtype0, 0, storage.numel(), list(range(len(leaves))))]
            else:
                try:
                    runs, total = _layout(leaves)
                except _BadLeaf as bad:
                    raise _bad_leaf_error(self, leaves[bad.args[0]]) from None
                if path is not None:
                    meta = {
                        "format": _FORMAT,
                        "version": VERSION,
                        "nbytes": total,
                        "leaves": _leaf_specs(runs, leaves),
                        "root": _json_node(skeleton, ()),
                    }
                    lazy_meta = self.__dict__.get("_lazy_stack_meta")
                    if lazy_meta is not None:
                        meta["lazy_stack"] = lazy_meta
                    storage, views = _fill_file(path, meta, total, runs, leaves, num_threads)
                    storage_device = torch.device("cpu")
                else:
                    pin = pin_memory and storage_device.type == "cpu" and torch.cuda.is_available()
                    storage = torch.empty(total, dtype=torch.uint8, device=storage_device, pin_memory=pin)
                    if share_memory and storage_device.type == "cpu":
                        storage.share_memory_()
                    views = _views(storage, runs, leaves)
                    _copy(views, leaves, num_threads, non_blocking)
                    if non_blocking and storage_device.type == "cpu" and torch.cuda.is_available():
                        torch.cuda.synchronize()
        # every level gets the storage's device when one was asked for, or a file's (the
        # CPU, where it is mapped), as tensordict 0.15 does
        move = device is not None or path is not None
        if inplace:
            _assign_inplace(self, skeleton, views)
            if move:
                self._set_device_tree(storage_device)
                skeleton = _collect(self, [], base, td_cls)[0]
            self._consolidated = _State(storage, skeleton, runs, views, path)
            self._set_lock_flag(True)
            return self  # type: ignore[return-value]
        if fast_build:
            for (src, key), view in zip(slots, views):  # type: ignore[arg-type]
                src[key] = view
        else:
            out, skeleton = _build(skeleton, views, storage_device, td_cls, move, True)
        out._consolidated = _State(storage, skeleton, runs, views, path)
        return out

    def is_consolidated(self) -> bool:
        """``True`` if the leaves are the views into one storage made by :meth:`consolidate`.

        Becomes ``False`` once the TensorDict no longer matches its storage: an entry
        added, replaced or deleted (on an unlocked TensorDict), or a batch-size
        change. In-place writes into the tensor leaves keep it ``True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(3))
            >>> td.is_consolidated(), td.consolidate().is_consolidated()
            (False, True)
        """
        state = self._consolidated
        if state is None:
            return False
        return _matches(self, state.skeleton, state.leaves, _classes.TensorDictBase)

    def _to_consolidated(self, device: torch.device, non_blocking: bool) -> Any:
        """``to(device)`` of a consolidated TensorDict: one copy of the storage.

        Returns ``None`` when the TensorDict no longer matches its storage (the caller
        then takes the regular leaf-by-leaf path).
        """
        state = self._consolidated
        if state is None or not _matches(self, state.skeleton, state.leaves, _classes.TensorDictBase):
            return None
        storage = state.storage
        if storage.device == device and self.device == device:
            return self
        with torch.no_grad():
            new_storage = storage.to(device, non_blocking=non_blocking)
        if non_blocking and device.type == "cpu" and torch.cuda.is_available():
            torch.cuda.synchronize()
        views = _views(new_storage, state.runs, state.leaves)
        out, skeleton = _build(state.skeleton, views, device, _classes.TensorDict, True, self.is_locked)
        out._consolidated = _State(new_storage, skeleton, state.runs, views, None)
        return out

    @classmethod
    def from_consolidated(cls, filename: str | os.PathLike) -> TensorDictBase:
        """Reads a file written by ``consolidate(filename=...)``; see :func:`tensordict.from_consolidated`."""
        return from_consolidated(filename)
