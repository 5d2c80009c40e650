"""Reading a transfer: header, metadata, and a TensorDict built from a received payload.

The format is described in :mod:`tensordict.distributed._wire`. Nothing received
is trusted: the metadata is JSON (never unpickled), every field is type- and
range-checked against the header, and errors name the sender (:class:`WireError`,
a ``ValueError``). Also here: the per-key structure of a TensorDict and the
readable list of differences used in mismatch errors.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import torch

from tensordict.distributed._integrity import FLAG_TAILS, NONCE_LEN, max_message_bytes
from tensordict.distributed._pickling import decode_hook
from tensordict.distributed._wire import (
    _MAX_DEPTH,
    _NAMES,
    FLAG_INLINE,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MAX_BYTES,
    VERSION,
    WireError,
    align,
)
from tensordict.ext import CONSOLIDATE_DTYPES as _DTYPES
from tensordict.ext import SKELETON_OTHER as _OTHER
from tensordict.ext import SKELETON_TD as _TD
from tensordict.ext import SKELETON_TENSOR as _TENSOR
from tensordict.ext import ConsolidatedState as _State
from tensordict.ext import build_from_skeleton as _build
from tensordict.ext import runs_from_specs as _runs_from_specs
from tensordict.ext import skeleton as _skeleton

__all__ = [
    "Header",
    "build_from_payload",
    "describe_differences",
    "leaf_specs",
    "parse_header",
    "parse_meta",
    "read_counts",
    "set_values",
    "stream_length",
    "structure_of",
    "tensor_bytes",
]


# ---------------------------------------------------------------------- reading
class Header:
    """The parsed prefix of a stream: flags, digest, sizes and the segment table."""

    __slots__ = ("flags", "digest", "meta_len", "total", "segments", "prefix_len")

    def __init__(self, flags: int, digest: int, meta_len: int, total: int, segments: list) -> None:
        self.flags = flags
        self.digest = digest
        self.meta_len = meta_len
        self.total = total
        self.segments = segments
        self.prefix_len = align(HEADER_SIZE + 8 * len(segments) + meta_len)

    @property
    def inline(self) -> bool:
        return bool(self.flags & FLAG_INLINE)

    @property
    def stream_len(self) -> int:
        """Bytes of the stream: the prefix, plus the payload when inline, plus the ``TAILS`` trailer."""
        return stream_length(self.flags, self.meta_len, self.total, len(self.segments))

    @property
    def meta_offset(self) -> int:
        return HEADER_SIZE + 8 * len(self.segments)


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The bytes of a small ``uint8`` CPU tensor (no numpy needed)."""
    n = t.numel()
    if n == 0:
        return b""
    buf = bytearray(n)
    torch.frombuffer(buf, dtype=torch.uint8).copy_(t.reshape(-1))
    return bytes(buf)


def read_counts(raw: bytes, who: str) -> tuple[int, int, int, int, int]:
    """``(flags, digest, meta_len, total, n_segments)`` from the 64 header bytes, checked."""
    if len(raw) < HEADER_SIZE:
        raise WireError(f"{who} sent {len(raw)} bytes, fewer than the {HEADER_SIZE}-byte header.")
    magic, version, flags, digest, meta_len, total, n_seg = HEADER.unpack_from(raw)
    if magic != MAGIC:
        msg = (
            f"{who} sent a message that is not a TensorDict transfer (magic {magic!r}, expected {MAGIC!r}). "
            "Both sides must make matching tensordict calls (send/recv, isend/irecv, init_remote/"
            "from_remote_init) with the same tags."
        )
        raise WireError(msg)
    if version != VERSION:
        raise WireError(f"{who} uses wire format version {version}; this process reads version {VERSION}.")
    if meta_len > MAX_BYTES or total > MAX_BYTES or n_seg > MAX_BYTES // 8:
        raise WireError(f"{who} sent a header with impossible sizes (metadata {meta_len}, payload {total}).")
    cap = max_message_bytes()
    if meta_len + total + 8 * n_seg > cap:
        msg = (
            f"{who} announced a message of {meta_len + total + 8 * n_seg} bytes (metadata {meta_len}, payload "
            f"{total}), more than this process accepts ({cap} bytes); nothing was allocated. Raise the cap "
            "with tensordict.distributed.set_max_message_bytes() or TENSORDICT_DIST_MAX_BYTES if the "
            "transfer is legitimate."
        )
        raise WireError(msg)
    if flags & FLAG_INLINE and n_seg:
        raise WireError(f"{who} sent an inline payload with a segment table.")
    return flags, digest, meta_len, total, n_seg


def stream_length(flags: int, meta_len: int, total: int, n_seg: int) -> int:
    """Bytes of a stream with these header counts (with ``TAILS``: plus the trailer)."""
    n = align(HEADER_SIZE + 8 * n_seg + meta_len) + (total if flags & FLAG_INLINE else 0)
    if flags & FLAG_TAILS:
        n += 8 * n_seg + NONCE_LEN
    return n


def parse_header(stream_start: bytes, who: str) -> Header:
    """Parses the header and the segment table (``stream_start`` holds at least both)."""
    flags, digest, meta_len, total, n_seg = read_counts(stream_start, who)
    need = HEADER_SIZE + 8 * n_seg
    if len(stream_start) < need:
        raise WireError(f"{who} sent a truncated segment table.")
    segments = list(struct.unpack_from(f"<{n_seg}Q", stream_start, HEADER_SIZE)) if n_seg else []
    if not flags & FLAG_INLINE and (sum(segments) != total or any(s == 0 for s in segments)):
        raise WireError(f"{who} sent segments {segments[:8]}... that do not tile its {total}-byte payload.")
    return Header(flags, digest, meta_len, total, segments)


def parse_meta(stream: torch.Tensor, header: Header, who: str, raw_stream: Any = None) -> dict:
    """Decodes and checks the JSON metadata of a stream (``raw_stream``: the same bytes, if at hand)."""
    start = header.meta_offset
    if raw_stream is not None:
        raw = bytes(raw_stream[start : start + header.meta_len])
    else:
        raw = tensor_bytes(stream[start : start + header.meta_len].cpu())
    try:
        meta = json.loads(raw.decode("utf-8"), object_hook=decode_hook)
    except WireError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise WireError(f"the metadata sent by {who} is not valid JSON ({err}).") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("root"), dict) or not isinstance(meta.get("leaves"), list):
        raise WireError(f"the metadata sent by {who} does not describe a TensorDict.")
    return meta


def _ints(value: Any, who: str, what: str) -> list:
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise WireError(f"{who} sent an invalid {what}: {value!r}.")
    return value


def leaf_specs(meta: dict, total: int, who: str) -> list:
    """The validated ``(dtype, shape, offset, nbytes)`` of every leaf."""
    specs = []
    for spec in meta["leaves"]:
        if not isinstance(spec, dict):
            raise WireError(f"{who} sent an invalid leaf description {spec!r}.")
        name = spec.get("dtype")
        dtype = _DTYPES.get(name) if isinstance(name, str) else None
        if dtype is None:
            raise WireError(f"{who} sent an unsupported dtype {name!r}.")
        shape = torch.Size(_ints(spec.get("shape"), who, "leaf shape"))
        nbytes = shape.numel() * dtype.itemsize
        off = spec.get("offset")
        if type(off) is not int or off < 0 or off % dtype.itemsize or off + nbytes > total:
            raise WireError(f"{who} sent a leaf at offset {off!r} outside its {total}-byte payload.")
        specs.append((dtype, shape, off, nbytes))
    return specs


def _decode_node(node: Any, who: str, n_leaves: int, used: set, parent_bs: list, depth: int,
                 device: Any, views: list) -> tuple:
    from tensordict.ext import NonTensorData

    if depth > _MAX_DEPTH:
        raise WireError(f"the tree sent by {who} is nested too deeply.")
    if not isinstance(node, dict):
        raise WireError(f"{who} sent a tree node that is not an object.")
    bs = _ints(node.get("batch_size"), who, "batch_size")
    if bs[: len(parent_bs)] != parent_bs:
        raise WireError(f"{who} sent a nested batch_size {bs} that does not start with its parent's {parent_bs}.")
    dev = node.get("device")
    if dev is not None and not isinstance(dev, str):
        raise WireError(f"{who} sent an invalid device {dev!r}.")
    names = node.get("names")
    if names is not None and (
        not isinstance(names, list) or len(names) != len(bs) or not all(n is None or isinstance(n, str) for n in names)
    ):
        raise WireError(f"{who} sent invalid dim names {names!r}.")
    entries_in = node.get("entries")
    if not isinstance(entries_in, list):
        raise WireError(f"{who} sent a tree node without entries.")
    batch_size = torch.Size(bs)
    entries = []
    seen: set = set()
    for entry in entries_in:
        if not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[0], str):
            raise WireError(f"{who} sent an invalid entry {entry!r}.")
        key, kind, payload = entry
        if key in seen:
            raise WireError(f"{who} sent the key {key!r} twice.")
        seen.add(key)
        if kind == "tensor":
            if type(payload) is not int or not 0 <= payload < n_leaves or payload in used:
                raise WireError(f"{who} sent an invalid leaf index {payload!r} for key {key!r}.")
            used.add(payload)
            if list(views[payload].shape[: len(bs)]) != bs:
                msg = (
                    f"{who} sent the leaf {key!r} of shape {list(views[payload].shape)}, which does not start "
                    f"with batch_size {bs}."
                )
                raise WireError(msg)
            entries.append((key, _TENSOR, payload))
        elif kind == "td":
            entries.append((key, _TD, _decode_node(payload, who, n_leaves, used, bs, depth + 1, device, views)))  # type: ignore[arg-type]
        elif kind == "data":
            entries.append((key, _OTHER, NonTensorData(payload, batch_size, None)))  # type: ignore[arg-type]
        elif kind == "stack":
            entries.append((key, _OTHER, _stack_value(payload, key, bs, who)))
        else:
            raise WireError(f"{who} sent an unknown entry kind {kind!r} for key {key!r}.")
    # the result lives where its storage is; a level without a device stays without one
    return (batch_size, None if dev is None else device, names, entries)


def _stack_value(payload: Any, key: str, bs: list | None, who: str) -> Any:
    from tensordict.ext import NonTensorStack

    if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
        raise WireError(f"{who} sent an invalid non-tensor stack under {key!r}.")
    shape = torch.Size(_ints(payload.get("shape"), who, "stack shape"))
    if shape.numel() != len(payload["items"]) or (bs is not None and list(shape[: len(bs)]) != bs):
        raise WireError(f"{who} sent a non-tensor stack {key!r} that does not match its shape {list(shape)}.")
    return NonTensorStack._from_flat(payload["items"], shape, None)


def build_from_payload(meta: dict, storage: torch.Tensor, who: str) -> Any:
    """A consolidated TensorDict whose leaves are views into ``storage`` (the payload)."""
    specs = leaf_specs(meta, storage.numel(), who)
    views = [storage[off : off + nbytes].view(dtype).view(shape) for dtype, shape, off, nbytes in specs]
    used: set = set()
    skeleton = _decode_node(meta["root"], who, len(views), used, [], 0, storage.device, views)
    if len(used) != len(views):
        raise WireError(f"{who} described {len(views)} leaves but its tree uses {len(used)}.")
    td, skeleton = _build(skeleton, views)
    td._consolidated = _State(storage, skeleton, _runs_from_specs(specs), views, None)
    if meta.get("lazy") is not None:
        td = _rebuild_lazy(td, meta["lazy"], who)
    name = meta.get("tensorclass")
    if name is not None:
        return _as_tensorclass(td, name, who)
    return td


def _rebuild_lazy(td: Any, layout: Any, who: str) -> Any:
    """The lazy stacks ``init_remote`` described (``_lazy_view.lazy_layout``), over the received leaves.

    A lazy stack at the root shares the received storage and stays consolidated; a
    TensorDict holding a nested lazy stack is rebuilt around it (its leaves are still
    views into the one storage, but it is not consolidated).
    """
    from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

    if not isinstance(layout, list) or len(layout) > 1 << 20:
        raise WireError(f"{who} sent an invalid lazy-stack layout.")
    nodes: dict = {}
    for entry in layout:
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, list) or not all(isinstance(k, str) for k in path) or len(path) > _MAX_DEPTH:
            raise WireError(f"{who} sent an invalid lazy-stack layout entry {entry!r}.")
        lazy, bs = entry.get("lazy"), entry.get("batch_size")
        if lazy is not None:
            ok = isinstance(lazy, dict) and type(lazy.get("n")) is int and type(lazy.get("stack_dim")) is int
            if not ok or lazy["n"] < 1:
                raise WireError(f"{who} sent an invalid lazy-stack description {lazy!r}.")
        else:
            _ints(bs, who, "batch size")
        nodes[tuple(path)] = entry

    def rebuild(node: Any, path: tuple) -> Any:
        entry = nodes.get(path)
        if entry is None:
            return node
        items = {}
        for key, value in node._items_raw():
            if isinstance(value, TensorDictBase) and (*path, key) in nodes:
                value = rebuild(value, (*path, key))
            items[key] = value
        lazy = entry.get("lazy")
        try:
            if lazy is not None:
                n = lazy["n"]
                if sorted(items) != sorted(str(i) for i in range(n)):
                    raise ValueError(f"the members are {sorted(items)[:8]}, expected '0'..'{n - 1}'")
                out = LazyStackedTensorDict(*(items[str(i)] for i in range(n)), stack_dim=lazy["stack_dim"])
                if not path and td.is_consolidated():
                    out._consolidated = td._consolidated  # the stack over the holder's views: still one storage
                return out
            return TensorDict(items, batch_size=entry["batch_size"], device=node.device)
        except (ValueError, RuntimeError, IndexError, TypeError) as err:
            raise WireError(f"{who} sent a lazy-stack layout that does not fit its data at {list(path)}: {err}") from None

    return rebuild(td, ())


def _as_tensorclass(td: Any, name: Any, who: str) -> Any:
    """``td`` wrapped in the registered tensorclass ``name`` (the class is looked up in
    td-tensorclass's registry, never imported by name); ``td`` itself, with a warning,
    when no tensorclass of that name is registered in this process."""
    import warnings

    if not isinstance(name, str):
        raise WireError(f"{who} sent an invalid tensorclass name {name!r}.")
    try:
        from tensordict.tensorclass import get_tensorclass

        cls = get_tensorclass(name)
    except (ImportError, KeyError, LookupError, ValueError):
        warnings.warn(
            f"{who} sent a {name!r} tensorclass, which is not registered in this process (import the "
            "module that defines it first); received as a TensorDict.",
            stacklevel=4,
        )
        return td
    return cls.from_tensordict(td)  # type: ignore[attr-defined]


def set_values(td: Any, meta: dict, who: str) -> None:
    """Writes the non-tensor values of ``meta`` into the matching entries of ``td``, in place.

    An existing ``NonTensorData``/``NonTensorStack`` of the same shape is updated in
    place (as tensor leaves are), so a consolidated template stays consolidated.
    """
    from tensordict.ext import NonTensorData, NonTensorStack

    def visit(target: Any, node: Any, depth: int) -> None:
        if depth > _MAX_DEPTH or not isinstance(node, dict) or not isinstance(node.get("entries"), list):
            raise WireError(f"{who} sent a malformed tree.")
        for entry in node["entries"]:
            if not isinstance(entry, list) or len(entry) != 3:
                raise WireError(f"{who} sent an invalid entry {entry!r}.")
            key, kind, payload = entry
            if kind == "td":
                visit(target._get_raw(key, None), payload, depth + 1)
            elif kind == "data":
                old = target._get_raw(key, None)
                if isinstance(old, NonTensorData):
                    old.data = payload
                else:
                    target._set_raw(key, NonTensorData(payload, target.batch_size, None))
            elif kind == "stack":
                new = _stack_value(payload, key, None, who)
                old = target._get_raw(key, None)
                if isinstance(old, NonTensorStack) and old.batch_size == new.batch_size:
                    old._items = new._items
                else:
                    target._set_raw(key, new)

    visit(td, meta["root"], 0)


# ---------------------------------------------------------------------- explaining mismatches
def _flatten_skeleton(node: tuple, leaves: list, prefix: tuple, out: dict) -> None:
    for key, kind, payload in node[3]:
        path = (*prefix, key)
        if kind == _TENSOR:
            t = leaves[payload]
            out[path] = f"{_NAMES.get(t.dtype, str(t.dtype))}{list(t.shape)}"
        elif kind == _TD:
            out[path] = "TensorDict"
            _flatten_skeleton(payload, leaves, path, out)
        else:
            out[path] = "non-tensor"


def structure_of(td: Any) -> dict:
    """``{key path: "dtype[shape]" | "TensorDict" | "non-tensor"}`` of a TensorDict."""
    leaves: list = []
    skeleton = _skeleton(td, leaves)
    out: dict = {}
    _flatten_skeleton(skeleton, leaves, (), out)
    return out


def describe_differences(mine: dict, theirs: dict, me: str, them: str, limit: int = 20) -> str:
    """A readable list of the keys/dtypes/shapes that differ between two structures."""
    lines = []
    for path in theirs:
        if path not in mine:
            lines.append(f"  {'.'.join(path)!r}: {them} has {theirs[path]}, {me} has no such key")
    for path in mine:
        if path not in theirs:
            lines.append(f"  {'.'.join(path)!r}: {me} has {mine[path]}, {them} has no such key")
        elif mine[path] != theirs[path]:
            lines.append(f"  {'.'.join(path)!r}: {them} has {theirs[path]}, {me} has {mine[path]}")
    if not lines:
        if list(mine) != list(theirs):
            return "  same keys, dtypes and shapes, but in a different order"
        return "  (no difference in keys, dtypes or shapes)"
    extra = len(lines) - limit
    lines = lines[:limit] + ([f"  ... and {extra} more"] if extra > 0 else [])
    return "\n".join(lines)
