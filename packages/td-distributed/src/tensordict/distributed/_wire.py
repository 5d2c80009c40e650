"""The wire format: how a TensorDict is laid out to travel between ranks.

A transfer is a *prefix* (header, segment table, JSON metadata) and a *payload*:
every tensor leaf in one contiguous byte range, laid out exactly as td-core's
:meth:`~tensordict.TensorDictBase.consolidate` lays out its storage (grouped by
dtype, largest item size first, leaf order within a dtype; so every leaf is
aligned and a consolidated TensorDict *is* its payload).

Prefix (all integers little-endian):

====================  ==========================================================
bytes ``0:56``        header: magic ``b"TDWIRE01"``, ``uint32`` version (``2``),
                      ``uint32`` flags, ``uint64`` structure digest, ``uint64``
                      metadata length ``M``, ``uint64`` payload length ``N``,
                      ``uint64`` number of segments ``S``, two ``uint32``: with
                      flag ``CHECKED`` the CRC-32 of the rest of the stream and
                      of the segments; with flag ``TAILS`` the CRC-32 of the rest
                      of the prefix and a nonce (see ``_integrity``)
``S`` x ``uint64``    segment sizes (they tile the payload, in order)
``M`` bytes           UTF-8 JSON metadata (below)
zero padding          up to a multiple of 64 bytes: the prefix length ``P``
(inline payload)      with flag ``INLINE``
trailer               with flag ``TAILS`` (point-to-point over gloo): ``S`` x 8
                      bytes (the last bytes of each segment, zero-padded), then
                      the nonce and its complement (2 x ``uint32``)
====================  ==========================================================

With the ``INLINE`` flag (small payloads, and the one-buffer collectives) the
payload follows the prefix in the same buffer, the *stream*, and ``S`` is 0.
Otherwise the payload travels as ``S`` further messages, one per segment: a
consolidated sender sends its storage as one segment; any other sender sends each
large leaf (``BIG_LEAF`` bytes or more) as its own segment straight from the
tensor, and packs the runs of small leaves between them. The receiver receives
each segment into the matching byte range of its destination: the storage of a
consolidated template, the leaf itself, or a new storage. Large data is never
copied for packing, and the number of messages does not grow with the number of
small leaves.

The metadata is ``{"root": node, "leaves": [spec, ...]}``: ``node`` is the tree
format of td-core's consolidated files (``tensordict._consolidate``):
``{"batch_size", "device", "names", "entries": [[key, kind, payload], ...]}`` with
kind ``"tensor"`` (payload: leaf index), ``"td"`` (a node), ``"data"`` (the JSON
value of a ``NonTensorData``) or ``"stack"`` (``{"shape", "items"}`` of a
``NonTensorStack``); a spec is ``{"dtype", "shape", "offset"}`` (offset in the payload).

The *digest* is a 63-bit BLAKE2b hash of the structure: keys and nesting, which
entries are tensors, nested TensorDicts or non-tensor data, and the dtype and shape
of every tensor, in order. It leaves out non-tensor values, batch sizes, devices
and names. Equal digests mean the same payload layout, so a receiver with a
template checks the digest and needs no parsing.

Nothing received is trusted: the metadata is JSON (never unpickled), every field
is type- and range-checked, sizes are checked against the header, and a receiver
never posts a buffer smaller than what the header announces. Reading is in
:mod:`tensordict.distributed._decode`; this module lays TensorDicts out (plans,
packing, :class:`Outgoing`) and fills templates (:class:`Template`).
"""

from __future__ import annotations

import hashlib
import json
import operator
import struct
import weakref
from typing import Any

import torch

from tensordict import TensorDict, TensorDictBase
from tensordict.distributed._integrity import (
    FLAG_CHECKED,
    FLAG_TAILS,
    HEADER_LEN,
    NONCE_LEN,
    trailer,
    write_crcs,
    write_tail_header,
)
from tensordict.distributed._lazy_view import has_lazy
from tensordict.distributed._pickling import encode_default
from tensordict.ext import CONSOLIDATE_DTYPES as _DTYPES
from tensordict.ext import SKELETON_TD as _TD
from tensordict.ext import SKELETON_TENSOR as _TENSOR
from tensordict.ext import layout as _layout
from tensordict.ext import leaf_specs as _leaf_specs
from tensordict.ext import run_views as _views
from tensordict.ext import skeleton as _skeleton
from tensordict.ext import skeleton_matches as _matches
from tensordict.ext import unsupported_leaf_error as _bad_leaf_error

__all__ = [
    "BIG_LEAF",
    "HEADER_SIZE",
    "INLINE_MAX",
    "Outgoing",
    "Template",
    "WireError",
    "copy_bytes",
]

MAGIC = b"TDWIRE01"
VERSION = 2
HEADER = struct.Struct("<8sIIQQQQ8x")
HEADER_SIZE = HEADER.size  # 56
if HEADER_SIZE != HEADER_LEN:  # pragma: no cover - the two modules describe one layout
    raise ImportError(f"wire header is {HEADER_SIZE} bytes, _integrity expects {HEADER_LEN}")
ALIGN = 64
#: leaves of at least this many bytes travel as their own segment (no packing copy)
BIG_LEAF = 1 << 20
#: payloads up to this size travel inside the stream (one message with gloo)
INLINE_MAX = 512 << 10
#: largest size a header may announce (guards allocations against garbage)
MAX_BYTES = 1 << 42
#: flag: the metadata holds non-tensor values the receiver must set
FLAG_VALUES = 1
#: flag: the payload follows the prefix in the stream
FLAG_INLINE = 2

_NAMES = {dt: name for name, dt in _DTYPES.items()}
_MAX_DEPTH = 1000


class WireError(ValueError):
    """A message that is not a well-formed TensorDict transfer."""


def align(n: int) -> int:
    """``n`` rounded up to a multiple of 64."""
    return -(-n // ALIGN) * ALIGN


# ---------------------------------------------------------------------- describing a tree

def _dtype_name(t: torch.Tensor, path: tuple) -> str:
    name = _NAMES.get(t.dtype)
    if name is None:
        msg = f"the leaf {'.'.join(path)!r} has dtype {t.dtype}, which cannot be sent; supported: {sorted(_DTYPES)}."
        raise TypeError(msg)
    return name


def _walk(node: tuple, leaves: list, path: tuple, tokens: list, with_meta: bool) -> dict | None:
    """One pass over a skeleton: the structure tokens (digest) and, optionally, the JSON node."""
    from tensordict.ext import NonTensorData, NonTensorStack

    bs, dev, names, entries = node
    out_entries: list | None = [] if with_meta else None
    append = tokens.append
    for key, kind, payload in entries:
        append(key)
        if kind == _TENSOR:
            t = leaves[payload]
            append(_dtype_name(t, (*path, key)))
            append(list(t.shape))
            if out_entries is not None:
                out_entries.append([key, "tensor", payload])
        elif kind == _TD:
            append("{")
            sub = _walk(payload, leaves, (*path, key), tokens, with_meta)
            append("}")
            if out_entries is not None:
                out_entries.append([key, "td", sub])
        else:
            append("~")
            if out_entries is None:
                continue
            if isinstance(payload, NonTensorStack):
                out_entries.append([key, "stack", {"shape": list(payload.batch_size), "items": list(payload._items)}])
            elif isinstance(payload, NonTensorData):
                out_entries.append([key, "data", payload.data])
            else:
                msg = (
                    f"the entry {'.'.join((*path, key))!r} holds a {type(payload).__name__}, which cannot be "
                    "sent: only tensors, nested TensorDicts and non-tensor data with JSON values travel."
                )
                raise TypeError(msg)
    if out_entries is None:
        return None
    return {
        "batch_size": list(bs),
        "device": None if dev is None else str(dev),
        "names": None if names is None else list(names),
        "entries": out_entries,
    }


def _digest(tokens: list) -> int:
    raw = json.dumps(tokens, separators=(",", ":")).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") & ((1 << 63) - 1)


_OPEN, _CLOSE, _NONTENSOR = "{", "}", "~"


def _scan(td: Any, leaves: list, sig: list, td_cls: Any, base: Any) -> tuple[bool, bool]:
    """Collects the tensor leaves and a hashable signature of the structure.

    The signature holds, per level, ``(batch_size, device, names)`` and, per entry,
    the key and the ``dtype`` and ``shape`` of a tensor, a nested level, or a
    non-tensor marker: everything the payload layout and the value-free metadata
    depend on. Returns ``(has non-tensor values, every level is a plain TensorDict)``.
    """
    append = sig.append
    if td.__class__ is td_cls:
        items = td._tensordict.items()
        names = td._names
        append((td._batch_size, td._device, None if names is None else tuple(names)))
        plain = True
    else:
        items = td._items_raw()
        append((td.batch_size, td.device, tuple(td.names) if td._has_names() else None))
        plain = False
    values = False
    tensor = torch.Tensor
    strided = torch.strided
    for key, value in items:
        cls = value.__class__
        append(key)
        if cls is tensor or (cls is not td_cls and isinstance(value, tensor)):
            if value.layout is not strided or value.is_nested:
                raise _bad_leaf_error(td, value)
            leaves.append(value)
            append(value.dtype)
            append(value.shape)
        elif cls is td_cls or isinstance(value, base):
            append(_OPEN)
            sub_values, sub_plain = _scan(value, leaves, sig, td_cls, base)
            values = values or sub_values
            plain = plain and sub_plain
            append(_CLOSE)
        else:
            append(_NONTENSOR)
            values = True
    return values, plain


# ---------------------------------------------------------------------- plans
class Plan:
    """What a structure implies, whatever the values: digest, payload layout, segments.

    Plans are cached by structure signature, so a loop that sends or receives
    TensorDicts of one structure computes them once.

    Attributes:
        digest (int): the structure digest.
        runs (list): the payload layout, ``(dtype, byte start, nbytes, leaf indices)``
            per dtype (td-core's consolidation layout).
        total (int): payload length in bytes.
        offsets, sizes (list[int]): byte offset and length of each leaf.
        segments (list): how a non-consolidated sender cuts the payload:
            ``(start, stop, leaf index)`` for a big leaf, ``(start, stop, None)`` for
            a packed stretch of small leaves.
        meta (bytes | None): the metadata, when it holds no non-tensor value.
    """

    __slots__ = (
        "digest", "runs", "total", "offsets", "sizes", "segments", "specs", "meta", "leaf_at", "same_shape",
        "_prefixes", "_expected", "_parts",
    )

    def __init__(self, td: Any, leaves: list, has_values: bool) -> None:
        skeleton = _skeleton(td, [])
        tokens: list = []
        root = _walk(skeleton, leaves, (), tokens, not has_values)
        self.digest = _digest(tokens)
        self.runs, self.total = _layout(leaves)
        self.same_shape = [all(leaves[i].shape == leaves[idxs[0]].shape for i in idxs) for _, _, _, idxs in self.runs]
        n = len(leaves)
        self.offsets = [0] * n
        self.sizes = [0] * n
        order = []
        for dtype, start, _, idxs in self.runs:
            off = start
            for i in idxs:
                size = leaves[i].numel() * dtype.itemsize
                self.offsets[i], self.sizes[i] = off, size
                off += size
                order.append(i)
        segments: list = []
        pack_start = None
        for i in order:  # payload order
            if self.sizes[i] >= BIG_LEAF:
                if pack_start is not None:
                    segments.append((pack_start, self.offsets[i], None))
                    pack_start = None
                segments.append((self.offsets[i], self.offsets[i] + self.sizes[i], i))
            elif pack_start is None and self.sizes[i]:
                pack_start = self.offsets[i]
        if pack_start is not None:
            segments.append((pack_start, self.total, None))
        self.segments = segments
        self.leaf_at = {(self.offsets[i], self.offsets[i] + self.sizes[i]): i for i in range(n) if self.sizes[i]}
        self.specs = _leaf_specs(self.runs, leaves)
        self.meta = None if has_values else _encode_meta(root, self.specs)
        self._prefixes: dict = {}
        self._expected: Any = 0  # not computed yet (``None``: no one-message form)
        self._parts: tuple | None = None

    def expected_prefix(self) -> bytes | None:
        """The prefix of the one-message form of this structure over gloo (``INLINE`` and ``TAILS``
        flags, no non-tensor values), as bytes; ``None`` when the structure has no such form.

        Two ends with the same plan produce the same bytes except the per-transfer checksum
        and nonce (bytes ``48:56``): a receiver compares them instead of parsing.
        """
        expected = self._expected
        if expected == 0:
            expected = None
            if self.meta is not None and self.total <= INLINE_MAX:
                prefix = self.prefix(FLAG_INLINE | FLAG_TAILS, ())
                expected = _tensor_to_bytes(prefix)
            self._expected = expected
        return expected

    def expected_parts(self) -> tuple:
        """``(bytes 0:48, bytes 56:)`` of :meth:`expected_prefix` (which must not be ``None``):
        what a received prefix must hold around the per-transfer checksum and nonce."""
        parts = self._parts
        if parts is None:
            expected = self.expected_prefix()
            parts = self._parts = (expected[:48], expected[HEADER_SIZE:])  # type: ignore[index]
        return parts

    def prefix(self, flags: int, seg_sizes: tuple, meta: bytes | None = None) -> torch.Tensor:
        """Header + segment table + metadata + padding, as a ``uint8`` tensor (cached without values)."""
        if meta is None:
            key = (flags, seg_sizes)
            out = self._prefixes.get(key)
            if out is None:
                out = self._prefixes[key] = _prefix(flags, self.digest, self.total, seg_sizes, self.meta or b"")
            return out
        return _prefix(flags, self.digest, self.total, seg_sizes, meta)


def _tensor_to_bytes(t: torch.Tensor) -> bytes:
    out = bytearray(t.numel())
    torch.frombuffer(out, dtype=torch.uint8).copy_(t)
    return bytes(out)


def _encode_meta(root: dict | None, specs: list, tensorclass: str | None = None, lazy: list | None = None) -> bytes:
    doc = {"root": root, "leaves": specs}
    if lazy is not None:
        doc["lazy"] = lazy
    if tensorclass is not None:
        doc["tensorclass"] = tensorclass  # type: ignore[assignment]
    try:
        return json.dumps(doc, separators=(",", ":"), default=encode_default).encode("utf-8")
    except (TypeError, ValueError) as err:
        msg = (
            f"the non-tensor data of this TensorDict is not JSON-serializable ({err}); only JSON values "
            "(str, numbers, bool, None, lists, dicts with str keys) travel between ranks. Convert the "
            "value, or exclude its key before sending."
        )
        raise TypeError(msg) from None


def _prefix(flags: int, digest: int, total: int, seg_sizes: tuple, meta: bytes) -> torch.Tensor:
    head = HEADER.pack(MAGIC, VERSION, flags, digest, len(meta), total, len(seg_sizes))
    table = struct.pack(f"<{len(seg_sizes)}Q", *seg_sizes)
    used = HEADER_SIZE + len(table) + len(meta)
    raw = bytearray(head) + table + meta + bytes(align(used) - used)
    return torch.frombuffer(raw, dtype=torch.uint8)


_PLANS: dict = {}
_MAX_PLANS = 256


def _plan(td: Any, leaves: list, sig: list, has_values: bool) -> Plan:
    key = tuple(sig)
    plan = _PLANS.get(key)
    if plan is None:
        plan = Plan(td, leaves, has_values)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


#: id(td) -> [weakref to td, _Snapshot or None, (prefix, send stream) or None]
#: Kept outside the TensorDict (whose ``__dict__`` is pickled and copied) and
#: dropped when the TensorDict is collected; it never holds the TensorDict itself.
_TD_CACHE: dict = {}


def _cache_entry(td: Any, create: bool) -> list | None:
    key = id(td)
    entry = _TD_CACHE.get(key)
    if entry is not None and entry[0]() is td:
        return entry
    if not create:
        return None

    def forget(ref: Any, key: int = key) -> None:
        current = _TD_CACHE.get(key)
        if current is not None and current[0] is ref:
            del _TD_CACHE[key]

    entry = [weakref.ref(td, forget), None, None]
    _TD_CACHE[key] = entry
    return entry


class _Snapshot:
    """What a plain TensorDict looked like when it was analysed, checked in C-speed passes.

    Per level: the TensorDict (``None`` for the root, which it must not keep
    alive), its keys, its values (by identity), batch size,
    device and names. If all of it is unchanged, so are the plan and the leaves
    (a leaf resized in place with ``resize_``/``set_`` is not noticed: the next
    transfer then fails on the size mismatch, as td-core's consolidation would).
    """

    __slots__ = ("levels", "state", "result", "views", "fast")

    def __init__(self, td: Any, leaves: list, state: Any, result: tuple, td_cls: Any) -> None:
        levels = []
        stack = [td]
        while stack:
            lvl = stack.pop()
            d = lvl._tensordict
            ref = None if lvl is td else lvl
            levels.append((ref, tuple(d), tuple(d.values()), lvl._batch_size, lvl._device, lvl._names))
            stack.extend(v for v in d.values() if v.__class__ is td_cls)
        self.levels = levels
        self.views: tuple | None = None  # (receive buffer, payload offset, views of the leaves in it)
        self.fast: Any = None  # the one-message send buffer (``_fastpath``), built on the first fast send
        self.state = state
        self.result = result

    def valid(self, td: Any) -> bool:
        if getattr(td, "_consolidated", None) is not self.state:
            return False
        for lvl, keys, values, bs, device, names in self.levels:
            if lvl is None:
                lvl = td
            d = lvl._tensordict
            if (
                len(d) != len(keys)
                or lvl._batch_size != bs
                or lvl._device != device
                or lvl._names != names
                or tuple(d) != keys
                or not all(map(_is, d.values(), values))
            ):
                return False
        return True


_is = operator.is_


def _analyse(td: Any) -> tuple[list, Plan, bool, bool, Any]:
    """``(leaves, plan, has_values, plain, consolidated storage or None)`` of a TensorDict.

    A plain ``TensorDict`` remembers the result (in ``_TD_CACHE``) and checks it
    against a :class:`_Snapshot` on each use, so a loop that sends or receives the
    same TensorDict skips the walk.
    """
    base, td_cls = TensorDictBase, TensorDict
    plain_cls = td.__class__ is td_cls
    entry = _cache_entry(td, False) if plain_cls else None
    if entry is not None:
        cached = entry[1]
        if cached is not None and cached.valid(td):
            return cached.result
    state = getattr(td, "_consolidated", None)
    leaves: list = []
    sig: list = []
    has_values, plain = _scan(td, leaves, sig, td_cls, base)
    plan = _plan(td, leaves, sig, has_values)
    storage = None
    if (
        plain
        and state is not None
        and state.storage.numel() == plan.total
        and len(state.leaves) == len(leaves)
        and all(map(_is, state.leaves, leaves))
        and [r[:3] for r in state.runs] == [r[:3] for r in plan.runs]
        and [list(r[3]) for r in state.runs] == [list(r[3]) for r in plan.runs]
        and _matches(td, state.skeleton, state.leaves)
    ):
        storage = state.storage
    result = (leaves, plan, has_values, plain, storage)
    if plain and plain_cls:
        _cache_entry(td, True)[1] = _Snapshot(td, leaves, state, result, td_cls)  # type: ignore[index]
    return result


def snapshot(td: Any, analyse: bool = True) -> _Snapshot | None:
    """The valid :class:`_Snapshot` of a plain ``TensorDict`` (analysed now if needed).

    ``None`` unless every level of ``td`` is a plain ``TensorDict`` (no subclass, lazy
    stack or tensorclass). A snapshot stays valid while the keys, leaf objects, batch
    sizes, devices and names do, so a loop that sends or receives one TensorDict
    analyses it once. With ``analyse=False``, only an existing valid snapshot is returned.
    """
    if td.__class__ is not TensorDict:
        return None
    entry = _cache_entry(td, False)
    if entry is not None:
        snap = entry[1]
        if snap is not None and snap.valid(td):
            return snap
    if not analyse or has_lazy(td):  # with a lazy stack, its plain view is another TensorDict
        return None
    _analyse(td)
    entry = _cache_entry(td, False)
    return entry[1] if entry is not None else None


# ---------------------------------------------------------------------- packing
_WORDS = ((8, torch.int64), (4, torch.int32), (2, torch.int16))


def copy_bytes(dst: torch.Tensor, src: torch.Tensor) -> None:
    """``dst.copy_(src)`` for ``uint8`` ranges, moved as 8-byte words when aligned.

    A word copy has up to 8x fewer elements, which keeps copies up to ~2 MB below
    torch's parallelization grain: no thread-pool wake-up for a small buffer (which
    costs far more than the copy itself on a busy machine).
    """
    n = dst.numel()
    if dst.device == src.device and n >= 64:
        a, b = dst.data_ptr(), src.data_ptr()
        for size, dtype in _WORDS:
            if a % size == 0 and b % size == 0:
                body = n - n % size
                dst[:body].view(dtype).copy_(src[:body].view(dtype))
                if body != n:
                    dst[body:].copy_(src[body:])
                return
    dst.copy_(src)


def word_pairs(dst: torch.Tensor, src: torch.Tensor) -> list:
    """``[(dst part, src part), ...]``: the copy of one ``uint8`` range into another, as
    8-byte words where both are aligned (fewer elements, see :func:`copy_bytes`) and the rest."""
    n = dst.numel()
    body = n - n % 8
    pairs = []
    if body and dst.data_ptr() % 8 == 0 and src.data_ptr() % 8 == 0:
        pairs.append((dst[:body].view(torch.int64), src[:body].view(torch.int64)))
    else:
        body = 0
    if body != n:
        pairs.append((dst[body:], src[body:]))
    return pairs


def _byte_range(t: torch.Tensor) -> torch.Tensor | None:
    """A flat ``uint8`` view of a contiguous ``t`` (``None`` if it is not contiguous)."""
    if not t.is_contiguous():
        return None
    return t.reshape(-1).view(torch.uint8)


def _pack_run(dst: torch.Tensor, dtype: torch.dtype, leaves: list, same_shape: bool) -> None:
    """Copies ``leaves`` (one dtype) one after the other into the ``uint8`` range ``dst``."""
    slab = dst.view(dtype)
    try:
        if same_shape:
            torch.stack(leaves, out=slab.view(len(leaves), *leaves[0].shape))
        else:
            torch.cat([t.reshape(-1) for t in leaves], out=slab)
    except RuntimeError:
        if all(t.device == dst.device for t in leaves):
            raise
        _pack_run(dst, dtype, [t.to(dst.device) for t in leaves], same_shape)


def _pack(dst: torch.Tensor, base: int, start: int, stop: int, plan: Plan, leaves: list) -> None:
    """Fills ``dst`` (payload bytes ``base + [0, len)``) with the leaves inside ``[start, stop)``."""
    offsets, sizes = plan.offsets, plan.sizes
    with torch.no_grad():
        for (dtype, run_start, nbytes, idxs), same_shape in zip(plan.runs, plan.same_shape):
            run_stop = run_start + nbytes
            if run_start >= start and run_stop <= stop:
                sel = idxs
            else:
                lo, hi = max(start, run_start), min(stop, run_stop)
                if lo >= hi:
                    continue
                sel = [i for i in idxs if offsets[i] >= lo and offsets[i] + sizes[i] <= hi and sizes[i]]
            if not sel:
                continue
            first = offsets[sel[0]] - base
            last = offsets[sel[-1]] + sizes[sel[-1]] - base
            _pack_run(dst[first:last], dtype, [leaves[i] for i in sel], same_shape)


class Outgoing:
    """A TensorDict prepared for sending: the stream and the payload segments.

    Args:
        td (TensorDictBase): the tensordict to send.
        inline (bool): put the whole payload in the stream (one buffer), as the
            collectives that exchange equal-size buffers need. Defaults to
            ``False``: inline only up to :data:`INLINE_MAX` bytes.
        device (torch.device): where the buffers live (the backend's device).
    """

    __slots__ = ("stream", "segments", "digest")

    def __init__(self, td: Any, *, inline: bool = False, device: Any = None, reuse: bool = False,
                 tensorclass: str | None = None, check: str | None = None, lazy: list | None = None) -> None:
        leaves, plan, has_values, _, storage = _analyse(td)
        device = torch.device(device) if device is not None else torch.device("cpu")
        self.digest = plan.digest
        meta = None
        if has_values or tensorclass is not None or lazy is not None:
            skeleton = _skeleton(td, [])
            meta = _encode_meta(_walk(skeleton, leaves, (), [], True), plan.specs, tensorclass, lazy)
        flags = FLAG_VALUES if has_values else 0
        # completeness checks (``_integrity``) for the backends that may deliver short messages
        checked = check == "crc" and device.type == "cpu"
        tails = check == "tail" and device.type == "cpu"
        if checked:
            flags |= FLAG_CHECKED
        elif tails:
            flags |= FLAG_TAILS
        if storage is not None and storage.device != device:
            storage = None
        if inline or plan.total <= INLINE_MAX:
            prefix = plan.prefix(flags | FLAG_INLINE, (), meta)
            p = prefix.numel()
            n = p + plan.total + (NONCE_LEN if tails else 0)
            if storage is not None and meta is None and reuse:
                # a consolidated TensorDict sent again: reuse its stream, only the payload changes
                entry = _cache_entry(td, True)
                cached = entry[2]  # type: ignore[index]
                if cached is not None and cached[0] is prefix and cached[1].device == device:
                    stream = cached[1]
                else:
                    stream = torch.empty(n, dtype=torch.uint8, device=device)
                    copy_bytes(stream[:p], prefix)
                    entry[2] = (prefix, stream)  # type: ignore[index]
                copy_bytes(stream[p : p + plan.total], storage)
            else:
                stream = torch.empty(n, dtype=torch.uint8, device=device)
                copy_bytes(stream[:p], prefix)
                if storage is not None:
                    copy_bytes(stream[p : p + plan.total], storage)
                elif plan.total:
                    _pack(stream[p : p + plan.total], 0, 0, plan.total, plan, leaves)
            if checked:
                write_crcs(stream, stream.numel(), [])
            elif tails:
                end, nonce = trailer([])
                write_tail_header(stream, p, nonce, end)
            self.stream, self.segments = stream, []
            return
        if storage is not None:  # consolidated: the storage is the payload, one segment, no copy
            segments = [storage]
        else:
            segments = []
            for start, stop, leaf in plan.segments:
                if leaf is not None:
                    t = leaves[leaf].detach()
                    if t.device != device:
                        t = t.to(device)
                    segments.append(t.contiguous().reshape(-1).view(torch.uint8))
                else:
                    buf = torch.empty(stop - start, dtype=torch.uint8, device=device)
                    _pack(buf, start, start, stop, plan, leaves)
                    segments.append(buf)
        prefix = plan.prefix(flags, tuple(s.numel() for s in segments), meta)
        if checked:
            prefix = prefix.clone()  # the cached prefix is shared: the checksums are per transfer
            write_crcs(prefix, prefix.numel(), segments)
        elif tails:
            end, nonce = trailer(segments)
            p = prefix.numel()
            prefix = torch.cat([prefix, torch.frombuffer(bytearray(end), dtype=torch.uint8)])
            write_tail_header(prefix, p, nonce, end)
        self.stream = prefix.to(device) if prefix.device != device else prefix
        self.segments = segments


# ---------------------------------------------------------------------- receiving into a template
class Template:
    """A TensorDict seen as a receive target: its leaves, plan and payload destinations.

    Args:
        td (TensorDictBase): the tensordict to fill.
    """

    __slots__ = ("td", "leaves", "plan", "plain", "storage", "_staged", "_direct")

    def __init__(self, td: Any, analysis: tuple | None = None) -> None:
        self.td = td
        self.leaves, self.plan, _, self.plain, self.storage = _analyse(td) if analysis is None else analysis
        self._staged: torch.Tensor | None = None
        self._direct: set = set()

    @property
    def digest(self) -> int:
        return self.plan.digest

    def fill_inline(self, payload: torch.Tensor, reusable: Any = None) -> None:
        """Copies a received payload into the leaves (one copy into a consolidated storage).

        ``reusable`` names a receive buffer that the caller reuses from call to call
        (``(buffer, offset)``): the copies from the payload inside it (its views and the
        destinations) are then planned once per TensorDict and kept with its cached
        analysis.
        """
        snap = None
        if reusable is not None:
            entry = _cache_entry(self.td, False)
            snap = entry[1] if entry is not None else None
        if snap is not None and snap.result[1] is self.plan:
            cached = snap.views
            if cached is None or cached[0] is not reusable[0] or cached[1] != reusable[1]:
                dst: Any
                src: Any
                if self.storage is not None and self.storage.device == payload.device:
                    dst, src = zip(*word_pairs(self.storage, payload)) if payload.numel() else ((), ())
                else:
                    dst, src = self.leaves, _views(payload, self.plan.runs, self.leaves)
                cached = snap.views = (reusable[0], reusable[1], list(dst), list(src))
            if cached[2]:
                with torch.no_grad():  # leaves that require grad are written in place too
                    torch._foreach_copy_(cached[2], cached[3])
            return
        with torch.no_grad():
            if self.storage is not None and self.storage.device == payload.device:
                copy_bytes(self.storage, payload)
                return
            self._unpack(payload, None)

    def segment_buffers(self, sizes: list, device: torch.device) -> list:
        """Where to receive each segment: a byte range of the destination, or of a staging buffer."""
        plan = self.plan
        bufs = []
        start = 0
        direct = set()
        for size in sizes:
            stop = start + size
            dest = None
            if self.storage is not None and self.storage.device == device:
                dest = self.storage[start:stop]
            else:
                leaf = plan.leaf_at.get((start, stop))
                if leaf is not None and self.leaves[leaf].device == device:
                    dest = _byte_range(self.leaves[leaf])
                    if dest is not None:
                        direct.add(leaf)
            if dest is None:
                if self._staged is None:
                    self._staged = torch.empty(plan.total, dtype=torch.uint8, device=device)
                dest = self._staged[start:stop]
            bufs.append(dest)
            start = stop
        self._direct = direct
        return bufs

    def finish_segments(self) -> None:
        """Copies whatever was staged into the leaves."""
        if self._staged is not None:
            with torch.no_grad():
                self._unpack(self._staged, self._direct)

    def _unpack(self, payload: torch.Tensor, skip: set | None) -> None:
        plan = self.plan
        leaves = self.leaves
        if skip:
            keep = [i for i in range(len(leaves)) if i not in skip]
            if not keep:
                return
            dst = [leaves[i] for i in keep]
            views = [payload[plan.offsets[i] : plan.offsets[i] + plan.sizes[i]].view(leaves[i].dtype).view(leaves[i].shape)
                     for i in keep]
        else:
            dst = leaves
            views = _views(payload, plan.runs, leaves)
        if dst:
            torch._foreach_copy_(dst, views)
