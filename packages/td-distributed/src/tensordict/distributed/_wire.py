"""The wire format: how a TensorDict is laid out to travel between ranks.

A transfer is one *stream* (a ``uint8`` buffer) followed by zero or more *big*
messages. Both are computed from the structure alone (keys, nesting, dtypes and
shapes), so a receiver holding a template of the same structure knows the layout
without being told.

Stream (all integers little-endian):

====================  ==========================================================
bytes ``0:64``        header: magic ``b"TDWIRE01"``, ``uint32`` version (``1``),
                      ``uint32`` flags, ``uint64`` structure digest, ``uint64``
                      metadata length ``M``, ``uint64`` region length ``L``,
                      ``uint64`` number of big leaves, ``uint64`` their total
                      bytes, 8 reserved bytes
bytes ``64:64+M``     UTF-8 JSON metadata (below)
zero padding          up to ``R = ceil((64 + M) / 64) * 64``
bytes ``R:R+L``       the *region*: every leaf smaller than :data:`BIG_LEAF` bytes,
                      packed with td-core's consolidation layout (grouped by dtype,
                      largest item size first, so every leaf is aligned)
====================  ==========================================================

Each leaf of at least :data:`BIG_LEAF` bytes then travels as its own message of
raw contiguous bytes, in leaf order, straight from the sender's tensor into the
receiver's: no packing copy for large data, and the number of messages does not
grow with the number of small leaves.

The metadata is ``{"root": node, "leaves": [spec, ...]}``. ``node`` is the tree
format of td-core's consolidated files (``tensordict._consolidate``):
``{"batch_size", "device", "names", "entries": [[key, kind, payload], ...]}`` with
kind ``"tensor"`` (payload: leaf index), ``"td"`` (a node), ``"data"`` (the JSON
value of a ``NonTensorData``) or ``"stack"`` (``{"shape", "items"}`` of a
``NonTensorStack``). A spec is ``{"dtype", "shape", "offset"}`` for a region leaf
and ``{"dtype", "shape", "big": j}`` for the ``j``-th big leaf.

The *digest* is a 63-bit BLAKE2b hash of the structure: keys and nesting, which
entries are tensors, nested TensorDicts or non-tensor data, and the dtype and shape
of every tensor, in order. It leaves out the values of non-tensor data, batch
sizes, devices and names. Equal digests mean the same wire layout.

Nothing received is trusted: metadata is parsed as JSON (never unpickled), every
field is type- and range-checked, and sizes are checked against the header.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import torch

from tensordict._consolidate import (
    _DTYPES,
    _TD,
    _TENSOR,
    _OTHER,
    _BadLeaf,
    _bad_leaf_error,
    _base,
    _build,
    _copy,
    _layout,
    _leaf_specs,
    _runs_from_specs,
    _State,
    _td_cls,
    _views,
)

__all__ = [
    "BIG_LEAF",
    "HEADER",
    "Header",
    "Outgoing",
    "Template",
    "WireError",
    "align",
    "build_from_stream",
    "describe_differences",
    "parse_header",
    "parse_meta",
]

MAGIC = b"TDWIRE01"
VERSION = 1
HEADER = struct.Struct("<8sIIQQQQQ8x")
HEADER_SIZE = HEADER.size  # 64
ALIGN = 64
#: leaves of at least this many bytes travel as their own message (no packing copy)
BIG_LEAF = 1 << 20
#: flag: the metadata holds non-tensor values the receiver must set
FLAG_VALUES = 1

_NAMES = {dt: name for name, dt in _DTYPES.items()}

_MAX_DEPTH = 1000


class WireError(ValueError):
    """A message that is not a well-formed TensorDict transfer."""


def align(n: int) -> int:
    """``n`` rounded up to a multiple of 64."""
    return -(-n // ALIGN) * ALIGN


# ---------------------------------------------------------------------- describing a tree
def _collect(td: Any, leaves: list, base: Any, td_cls: Any) -> tuple:
    """The skeleton ``(batch_size, device, names, entries)`` of ``td``; tensor leaves go to ``leaves``.

    Entries are ``(key, kind, payload)`` as in td-core's consolidation (``_TENSOR``:
    index into ``leaves``; ``_TD``: a sub-skeleton; otherwise the non-tensor object),
    the format ``tensordict._consolidate._build`` turns back into a TensorDict.
    """
    entries = []
    append = entries.append
    if td.__class__ is td_cls:
        items = td._tensordict.items()
        bs, device, names = td._batch_size, td._device, td._names
    else:
        items = td._items_raw()
        bs, device = td.batch_size, td.device
        names = td.names if td._has_names() else None
    tensor = torch.Tensor
    for key, value in items:
        cls = value.__class__
        if cls is tensor or (cls is not td_cls and isinstance(value, tensor)):
            append((key, _TENSOR, len(leaves)))
            leaves.append(value)
        elif cls is td_cls or isinstance(value, base):
            append((key, _TD, _collect(value, leaves, base, td_cls)))
        else:
            append((key, _OTHER, value))
    return (bs, device, names, entries)


def _dtype_name(t: torch.Tensor, path: tuple) -> str:
    name = _NAMES.get(t.dtype)
    if name is None:
        msg = f"the leaf {'.'.join(path)!r} has dtype {t.dtype}, which cannot be sent; supported: {sorted(_DTYPES)}."
        raise TypeError(msg)
    return name


def _walk(node: tuple, leaves: list, path: tuple, struct_out: list, with_meta: bool, state: list) -> dict | None:
    """One pass over a ``_collect`` skeleton: the structure tokens and (optionally) the JSON node."""
    from tensordict._nontensor import NonTensorData, NonTensorStack

    bs, dev, names, entries = node
    out_entries: list | None = [] if with_meta else None
    append = struct_out.append
    for key, kind, payload in entries:
        if kind == _TENSOR:
            t = leaves[payload]
            append(key)
            append(_dtype_name(t, (*path, key)))
            append(list(t.shape))
            if out_entries is not None:
                out_entries.append([key, "tensor", payload])
        elif kind == _TD:
            append(key)
            append("{")
            sub = _walk(payload, leaves, (*path, key), struct_out, with_meta, state)
            append("}")
            if out_entries is not None:
                out_entries.append([key, "td", sub])
        else:
            append(key)
            append("~")
            if out_entries is None:
                continue
            if isinstance(payload, NonTensorStack):
                value: Any = {"shape": list(payload.batch_size), "items": list(payload._items)}
                kind_name = "stack"
            elif isinstance(payload, NonTensorData):
                value = payload.data
                kind_name = "data"
            else:
                msg = (
                    f"the entry {'.'.join((*path, key))!r} holds a {type(payload).__name__}, which cannot be "
                    "sent: only tensors, nested TensorDicts and non-tensor data with JSON values travel."
                )
                raise TypeError(msg)
            state[0] = True
            out_entries.append([key, kind_name, value])
    if out_entries is None:
        return None
    return {
        "batch_size": list(bs),
        "device": None if dev is None else str(dev),
        "names": None if names is None else list(names),
        "entries": out_entries,
    }


def _digest(struct_tokens: list) -> int:
    raw = json.dumps(struct_tokens, separators=(",", ":")).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") & ((1 << 63) - 1)


def _split(leaves: list) -> tuple[list, list]:
    small, big = [], []
    for i, t in enumerate(leaves):
        (big if t.numel() * t.element_size() >= BIG_LEAF else small).append(i)
    return small, big


def _check_dense(td: Any, leaves: list) -> None:
    for t in leaves:
        if t.layout is not torch.strided or t.is_nested:
            raise _bad_leaf_error(td, t)


class Template:
    """A TensorDict seen as a receive target: its leaves, digest and wire plan.

    Args:
        td (TensorDictBase): the tensordict to fill.
    """

    __slots__ = ("td", "skeleton", "leaves", "digest", "small", "big", "runs", "region_len", "plain")

    def __init__(self, td: Any) -> None:
        base, td_cls = _base(), _td_cls()
        self.td = td
        self.leaves: list = []
        self.skeleton = _collect(td, self.leaves, base, td_cls)
        _check_dense(td, self.leaves)
        tokens: list = []
        _walk(self.skeleton, self.leaves, (), tokens, False, [False])
        self.digest = _digest(tokens)
        self.small, self.big = _split(self.leaves)
        self.runs, self.region_len = _layout([self.leaves[i] for i in self.small])
        self.plain = _is_plain(td, td_cls)

    def unpack_region(self, region: torch.Tensor) -> None:
        """Copies the packed small leaves out of ``region`` into the template's leaves."""
        if not self.small:
            return
        dst = [self.leaves[i] for i in self.small]
        views = _views(region, self.runs, dst)
        with torch.no_grad():
            _copy(dst, views, 0, False)


def _is_plain(td: Any, td_cls: Any) -> bool:
    """``True`` if every level is a plain ``TensorDict`` (its leaves are the stored tensors)."""
    if td.__class__ is not td_cls:
        return False
    base = _base()
    for value in td._tensordict.values():
        if isinstance(value, base) and not _is_plain(value, td_cls):
            return False
    return True


class Outgoing:
    """A TensorDict prepared for sending: the stream buffer and the big leaves.

    Args:
        td (TensorDictBase): the tensordict to send.
        pack_all (bool): put every leaf in the region (one buffer, no big messages),
            as the collectives that need equal-size buffers do.
        device (torch.device): where to build the stream.
    """

    __slots__ = ("stream", "bigs", "digest", "header")

    def __init__(self, td: Any, *, pack_all: bool = False, device: Any = None) -> None:
        base, td_cls = _base(), _td_cls()
        leaves: list = []
        skeleton = _collect(td, leaves, base, td_cls)
        _check_dense(td, leaves)
        tokens: list = []
        has_values = [False]
        root = _walk(skeleton, leaves, (), tokens, True, has_values)
        self.digest = _digest(tokens)
        if pack_all:
            small, big = list(range(len(leaves))), []
        else:
            small, big = _split(leaves)
        small_leaves = [leaves[i] for i in small]
        try:
            runs, region_len = _layout(small_leaves)
        except _BadLeaf as bad:  # pragma: no cover - _check_dense ran first
            raise _bad_leaf_error(td, small_leaves[bad.args[0]]) from None
        specs: list = [None] * len(leaves)
        for i, spec in zip(small, _leaf_specs(runs, small_leaves)):
            specs[i] = spec
        big_total = 0
        for j, i in enumerate(big):
            t = leaves[i]
            specs[i] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "big": j}
            big_total += t.numel() * t.element_size()
        try:
            meta = json.dumps({"root": root, "leaves": specs}, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as err:
            msg = (
                f"the non-tensor data of this TensorDict is not JSON-serializable ({err}); only JSON values "
                "(str, numbers, bool, None, lists, dicts with str keys) travel between ranks. Convert the "
                "value, or exclude its key before sending."
            )
            raise TypeError(msg) from None
        flags = FLAG_VALUES if has_values[0] else 0
        region_off = align(HEADER_SIZE + len(meta))
        storage_device = torch.device(device) if device is not None else torch.device("cpu")
        stream = torch.empty(region_off + region_len, dtype=torch.uint8, device=storage_device)
        head = HEADER.pack(MAGIC, VERSION, flags, self.digest, len(meta), region_len, len(big), big_total)
        self.header = Header(*HEADER.unpack(head))
        prefix = bytearray(head) + meta + bytes(region_off - HEADER_SIZE - len(meta))
        stream[:region_off].copy_(torch.frombuffer(prefix, dtype=torch.uint8))
        if small_leaves:
            views = _views(stream[region_off:], runs, small_leaves)
            with torch.no_grad():
                _copy(views, [t.detach() for t in small_leaves], 0, False)
        self.stream = stream
        self.bigs = [_as_bytes(leaves[i].detach(), storage_device) for i in big]


def _as_bytes(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A flat ``uint8`` view (or contiguous copy) of ``t`` on ``device``."""
    if t.device != device:
        t = t.to(device)
    return t.contiguous().reshape(-1).view(torch.uint8)


def byte_view(t: torch.Tensor) -> torch.Tensor | None:
    """A flat ``uint8`` view of a contiguous ``t`` (``None`` if it is not contiguous)."""
    if not t.is_contiguous():
        return None
    return t.reshape(-1).view(torch.uint8)


# ---------------------------------------------------------------------- reading
class Header:
    """The parsed fixed-size header of a stream."""

    __slots__ = ("flags", "digest", "meta_len", "region_len", "n_big", "big_total")

    def __init__(self, magic: bytes, version: int, flags: int, digest: int, meta_len: int,
                 region_len: int, n_big: int, big_total: int) -> None:
        self.flags = flags
        self.digest = digest
        self.meta_len = meta_len
        self.region_len = region_len
        self.n_big = n_big
        self.big_total = big_total

    @property
    def region_offset(self) -> int:
        return align(HEADER_SIZE + self.meta_len)

    @property
    def stream_len(self) -> int:
        return self.region_offset + self.region_len


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The bytes of a small ``uint8`` tensor (no numpy needed)."""
    n = t.numel()
    if n == 0:
        return b""
    buf = bytearray(n)
    torch.frombuffer(buf, dtype=torch.uint8).copy_(t.reshape(-1))
    return bytes(buf)


#: largest metadata/region a header may announce (guards allocations against garbage)
MAX_STREAM = 1 << 40


def parse_header(raw: bytes, who: str) -> Header:
    """Parses and checks the 64-byte header; ``who`` names the sender in errors."""
    if len(raw) < HEADER_SIZE:
        raise WireError(f"{who} sent {len(raw)} bytes, fewer than the {HEADER_SIZE}-byte header.")
    magic, version, flags, digest, meta_len, region_len, n_big, big_total = HEADER.unpack_from(raw)
    if magic != MAGIC:
        msg = (
            f"{who} sent a message that is not a TensorDict transfer (magic {magic!r}, expected {MAGIC!r}). "
            "Both sides must use the same tensordict calls (send/recv, isend/irecv, init_remote/"
            "from_remote_init) with the same tags."
        )
        raise WireError(msg)
    if version != VERSION:
        raise WireError(f"{who} uses wire format version {version}; this process reads version {VERSION}.")
    if meta_len > MAX_STREAM or region_len > MAX_STREAM or big_total > MAX_STREAM or n_big > MAX_STREAM:
        raise WireError(f"{who} sent a header with impossible sizes (metadata {meta_len}, region {region_len}).")
    return Header(magic, version, flags, digest, meta_len, region_len, n_big, big_total)


def parse_meta(stream: torch.Tensor, header: Header, who: str) -> dict:
    """Decodes and checks the JSON metadata of a stream."""
    raw = tensor_bytes(stream[HEADER_SIZE : HEADER_SIZE + header.meta_len].cpu())
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise WireError(f"the metadata sent by {who} is not valid JSON ({err}).") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("root"), dict) or not isinstance(meta.get("leaves"), list):
        raise WireError(f"the metadata sent by {who} does not describe a TensorDict.")
    return meta


def _ints(value: Any, who: str, what: str) -> list:
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise WireError(f"{who} sent an invalid {what}: {value!r}.")
    return value


class Specs:
    """The validated leaf specs of a metadata: ``(dtype, shape, nbytes, offset | None, big | None)``."""

    __slots__ = ("items", "big_order")

    def __init__(self, meta: dict, header: Header, who: str) -> None:
        items = []
        big_order: list = []
        for spec in meta["leaves"]:
            if not isinstance(spec, dict):
                raise WireError(f"{who} sent an invalid leaf description {spec!r}.")
            name = spec.get("dtype")
            dtype = _DTYPES.get(name) if isinstance(name, str) else None
            if dtype is None:
                raise WireError(f"{who} sent an unsupported dtype {name!r}.")
            shape = torch.Size(_ints(spec.get("shape"), who, "leaf shape"))
            nbytes = shape.numel() * dtype.itemsize
            if "big" in spec:
                j = spec["big"]
                if type(j) is not int or j != len(big_order):
                    raise WireError(f"{who} sent big leaves out of order ({j!r}).")
                big_order.append(len(items))
                items.append((dtype, shape, nbytes, None, j))
            else:
                off = spec.get("offset")
                if type(off) is not int or off < 0 or off % dtype.itemsize or off + nbytes > header.region_len:
                    raise WireError(f"{who} sent a leaf at offset {off!r} outside its {header.region_len}-byte region.")
                items.append((dtype, shape, nbytes, off, None))
        if len(big_order) != header.n_big or sum(items[i][2] for i in big_order) != header.big_total:
            raise WireError(f"the big leaves described by {who} do not match its header.")
        self.items = items
        self.big_order = big_order


def _decode_node(node: Any, who: str, n_leaves: int, used: set, parent_bs: list, depth: int,
                 device: Any, views: list) -> tuple:
    from tensordict._nontensor import NonTensorData, NonTensorStack

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
                msg = f"{who} sent the leaf {key!r} of shape {list(views[payload].shape)}, which does not start with batch_size {bs}."
                raise WireError(msg)
            entries.append((key, _TENSOR, payload))
        elif kind == "td":
            entries.append((key, _TD, _decode_node(payload, who, n_leaves, used, bs, depth + 1, device, views)))
        elif kind == "data":
            entries.append((key, 2, NonTensorData(payload, batch_size, None)))
        elif kind == "stack":
            if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
                raise WireError(f"{who} sent an invalid non-tensor stack under {key!r}.")
            shape = torch.Size(_ints(payload.get("shape"), who, "stack shape"))
            if shape.numel() != len(payload["items"]) or list(shape[: len(bs)]) != bs:
                raise WireError(f"{who} sent a non-tensor stack {key!r} that does not match its shape {list(shape)}.")
            entries.append((key, 2, NonTensorStack._from_flat(payload["items"], shape, None)))
        else:
            raise WireError(f"{who} sent an unknown entry kind {kind!r} for key {key!r}.")
    # the result lives where its storage is; a level without a device stays without one
    out_dev = None if dev is None else device
    return (batch_size, out_dev, names, entries)


def storage_layout(specs: Specs, header: Header) -> tuple[int, list]:
    """Offsets of every leaf in a consolidated storage: the region, then the big leaves."""
    offsets = []
    big_start = align(header.region_len)
    big_off = big_start
    big_offsets = {}
    for pos in specs.big_order:
        big_offsets[pos] = big_off
        big_off = align(big_off + specs.items[pos][2])
    for pos, (_, _, _, off, _) in enumerate(specs.items):
        offsets.append(off if off is not None else big_offsets[pos])
    return (big_off if specs.big_order else header.region_len), offsets


def build_from_stream(meta: dict, specs: Specs, storage: torch.Tensor, offsets: list, who: str) -> Any:
    """A consolidated TensorDict over ``storage`` described by ``meta`` (leaves at ``offsets``)."""
    views = []
    spec_tuples = []
    for (dtype, shape, nbytes, _, _), off in zip(specs.items, offsets):
        views.append(storage[off : off + nbytes].view(dtype).view(shape))
        spec_tuples.append((dtype, shape, off, nbytes))
    used: set = set()
    skeleton = _decode_node(meta["root"], who, len(views), used, [], 0, storage.device, views)
    if len(used) != len(views):
        raise WireError(f"{who} described {len(views)} leaves but its tree uses {len(used)}.")
    td, skeleton = _build(skeleton, views, None, _td_cls(), False, False)
    td._consolidated = _State(storage, skeleton, _runs_from_specs(spec_tuples), views, None)
    return td


def set_values(td: Any, meta: dict, who: str) -> None:
    """Writes the non-tensor values of ``meta`` into the matching entries of ``td``."""
    from tensordict._nontensor import NonTensorData, NonTensorStack

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
                bs = getattr(old, "batch_size", target.batch_size)
                target._set_raw(key, NonTensorData(payload, bs, getattr(old, "device", None)))
            elif kind == "stack":
                if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
                    raise WireError(f"{who} sent an invalid non-tensor stack under {key!r}.")
                shape = torch.Size(_ints(payload.get("shape"), who, "stack shape"))
                if shape.numel() != len(payload["items"]):
                    raise WireError(f"{who} sent a non-tensor stack {key!r} that does not match its shape.")
                target._set_raw(key, NonTensorStack._from_flat(payload["items"], shape, None))

    visit(td, meta["root"], 0)


# ---------------------------------------------------------------------- explaining mismatches
def _flatten_meta(node: Any, specs: Specs | None, prefix: tuple, out: dict, depth: int = 0) -> None:
    if depth > _MAX_DEPTH or not isinstance(node, dict) or not isinstance(node.get("entries"), list):
        return
    for entry in node["entries"]:
        if not isinstance(entry, list) or len(entry) != 3:
            continue
        key, kind, payload = entry
        path = (*prefix, str(key))
        if kind == "tensor" and specs is not None and type(payload) is int and 0 <= payload < len(specs.items):
            dtype, shape, *_ = specs.items[payload]
            out[path] = f"{_NAMES[dtype]}{list(shape)}"
        elif kind == "td":
            out[path] = "TensorDict"
            _flatten_meta(payload, specs, path, out, depth + 1)
        else:
            out[path] = "non-tensor"


def _flatten_template(node: tuple, leaves: list, prefix: tuple, out: dict) -> None:
    for key, kind, payload in node[3]:
        path = (*prefix, key)
        if kind == _TENSOR:
            t = leaves[payload]
            out[path] = f"{_NAMES.get(t.dtype, str(t.dtype))}{list(t.shape)}"
        elif kind == _TD:
            out[path] = "TensorDict"
            _flatten_template(payload, leaves, path, out)
        else:
            out[path] = "non-tensor"


def structure_of_template(template: Template) -> dict:
    """``{key path: "dtype[shape]" | "TensorDict" | "non-tensor"}`` of a template."""
    out: dict = {}
    _flatten_template(template.skeleton, template.leaves, (), out)
    return out


def structure_of_meta(meta: dict, specs: Specs | None) -> dict:
    """``{key path: description}`` of received metadata."""
    out: dict = {}
    _flatten_meta(meta.get("root"), specs, (), out)
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
