"""Encoding of leaves and metadata, and the checks applied to what the server returns.

A tensor is stored as its raw bytes (C order, little endian) beside a schema entry
``{"t": "tensor", "shape": [...], "dtype": "float32"}``. Non-tensor data is JSON:
``{"t": "json"}`` (one value for the batch, a string key) or ``{"t": "jsonl"}`` (one
value per batch element, a list key). A value that JSON cannot carry is pickled
(``{"t": "pickle"}``) only when the store was opened with ``allow_pickle=True``, and a
pickle is unpickled only then: the server is a trust boundary.

Everything read back is checked before anything is allocated: the dtype tag is one of
a fixed table, the shape a list of non-negative ints, the byte length the one the shape
implies. A bad value raises ``ValueError`` naming the key and the server.
"""

from __future__ import annotations

import ctypes
import json
import math
from typing import Any

import torch

__all__ = ["DTYPES", "tensor_to_bytes", "bytes_to_tensor", "parse_entry", "StoreDataError"]

#: the dtypes a store holds, by tag (the tag is the torch dtype's name without ``torch.``)
DTYPES: dict = {
    str(dt).split(".")[-1]: dt
    for dt in (
        torch.float16, torch.bfloat16, torch.float32, torch.float64,
        torch.complex64, torch.complex128,
        torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool,
    )
}
#: a declared leaf larger than this is refused (64 GiB): a planted shape cannot make a
#: reader allocate without bound
MAX_BYTES = 1 << 36


class StoreDataError(ValueError):
    """A value read from the server is not what the store's layout allows."""


def dtype_tag(dtype: torch.dtype) -> str:
    tag = str(dtype).split(".")[-1]
    if tag not in DTYPES:
        msg = f"dtype {dtype} cannot be stored in a TensorDictStore; supported: {sorted(DTYPES)}."
        raise TypeError(msg)
    return tag


def tensor_to_bytes(tensor: torch.Tensor) -> bytes:
    """The raw bytes of ``tensor`` (moved to CPU, made contiguous): one copy."""
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.is_complex():  # lazy conjugate / negative views hold other bytes than they show
        tensor = tensor.resolve_conj().resolve_neg()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    n = tensor.numel() * tensor.element_size()
    if n == 0:
        return b""
    return ctypes.string_at(tensor.data_ptr(), n)


def bytes_to_tensor(data: Any, shape: Any, dtype: torch.dtype) -> torch.Tensor:
    """A new tensor of ``shape``/``dtype`` holding ``data`` (checked by the caller)."""
    if not data:
        return torch.empty(shape, dtype=dtype)
    buf = bytearray(data) if isinstance(data, bytes) else data
    return torch.frombuffer(buf, dtype=dtype).view(shape)


def nbytes(shape: Any, dtype: torch.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


def parse_entry(raw: Any, key: Any, server: str) -> dict:
    """A schema entry read from the server, validated (raises :class:`StoreDataError`)."""
    try:
        entry = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise StoreDataError(f"Key {key!r} on server {server}: its schema entry is not valid JSON ({err}).") from err
    if not isinstance(entry, dict) or entry.get("t") not in ("tensor", "stack", "json", "jsonl", "pickle", "td"):
        raise StoreDataError(f"Key {key!r} on server {server}: unknown schema entry {str(raw)[:80]!r}.")
    if entry["t"] == "stack":  # a lazy stack's leaf: one shape per element, or one for all
        tag = entry.get("dtype")
        if tag not in DTYPES:
            raise StoreDataError(f"Key {key!r} on server {server}: dtype tag {tag!r} is not one of {sorted(DTYPES)}.")
        entry["dtype"] = DTYPES[tag]
        if "shape" in entry:
            entry["shape"] = _check_shape(entry["shape"], key, server)
        else:
            shapes = entry.get("shapes")
            if not isinstance(shapes, list):
                raise StoreDataError(f"Key {key!r} on server {server}: a stacked leaf needs 'shape' or 'shapes'.")
            entry["shapes"] = [_check_shape(s, key, server) for s in shapes]
    elif entry["t"] == "tensor":
        tag = entry.get("dtype")
        if tag not in DTYPES:
            raise StoreDataError(
                f"Key {key!r} on server {server}: dtype tag {tag!r} is not one of {sorted(DTYPES)}."
            )
        entry["dtype"] = DTYPES[tag]
        entry["shape"] = _check_shape(entry.get("shape"), key, server)
        if nbytes(entry["shape"], entry["dtype"]) > MAX_BYTES:
            raise StoreDataError(
                f"Key {key!r} on server {server}: declared shape {entry['shape']} is larger than "
                f"the {MAX_BYTES} bytes a store leaf may hold."
            )
        if "g" in entry:
            _check_group(entry, key, server)
    elif entry["t"] == "td":
        entry["bs"] = _check_shape(entry.get("bs"), key, server)
    return entry


def _check_group(entry: dict, key: Any, server: str) -> None:
    """A group member's placement (see ``_groups``): a hex group id, and a row layout that
    holds the leaf and stays within :data:`MAX_BYTES`."""
    g, off, rs, rb = entry.get("g"), entry.get("off"), entry.get("rs"), entry.get("rb")
    shape = entry["shape"]
    ok = isinstance(g, str) and 0 < len(g) <= 32 and all(c in "0123456789abcdef" for c in g)
    if ok and type(off) is int and type(rs) is int and type(rb) is int and min(off, rs, rb) >= 0 and rb <= len(shape):
        esz_row = nbytes(shape[rb:], entry["dtype"])
        ok = off + esz_row <= rs and math.prod(shape[:rb]) * rs <= MAX_BYTES
    else:
        ok = False
    if not ok:
        raise StoreDataError(
            f"Key {key!r} on server {server}: invalid group placement "
            f"(g={g!r}, off={off!r}, rs={rs!r}, rb={rb!r}) for shape {shape}."
        )


def _check_shape(shape: Any, key: Any, server: str) -> list:
    if not isinstance(shape, list) or not all(type(s) is int and 0 <= s < (1 << 40) for s in shape):
        raise StoreDataError(f"Key {key!r} on server {server}: shape {shape!r} is not a list of non-negative ints.")
    return shape


def check_blob(data: Any, expected: int, key: Any, server: str) -> None:
    if data is None:
        raise StoreDataError(f"Key {key!r} on server {server}: its data is missing (deleted by another client?).")
    if len(data) != expected:
        raise StoreDataError(
            f"Key {key!r} on server {server}: expected {expected} bytes of tensor data, the server holds "
            f"{len(data)} (a value written by another client, or a shape that changed)."
        )


def decode_json(raw: Any, key: Any, server: str) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        head = bytes(raw[:16]) if isinstance(raw, (bytes, bytearray)) else raw
        raise StoreDataError(
            f"Key {key!r} on server {server}: expected a JSON value, got {head!r}... ({err}). "
            "Values that are not JSON are never unpickled unless the store is opened with allow_pickle=True."
        ) from err


def encode_nontensor(value: Any, key: Any, allow_pickle: bool) -> tuple:
    """``(tag, payload)`` for a Python object: JSON when it round-trips, else a pickle
    (only with ``allow_pickle``)."""
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=True)
        if json.loads(text) == value or value != value:  # noqa: PLR0124 - NaN
            return "json", text
    except (TypeError, ValueError):
        pass
    if not allow_pickle:
        msg = (
            f"Cannot store the {type(value).__name__} under key {key!r}: it is not JSON-serializable. "
            "Open the store with allow_pickle=True to store (and read back) pickled objects."
        )
        raise TypeError(msg)
    import pickle

    return "pickle", pickle.dumps(value)


def decode_pickle(raw: Any, key: Any, server: str, allow_pickle: bool) -> Any:
    if not allow_pickle:
        msg = (
            f"Key {key!r} on server {server} holds a pickled object. Unpickling data from a shared "
            "server can run arbitrary code; open the store with allow_pickle=True if you trust it."
        )
        raise StoreDataError(msg)
    import pickle

    return pickle.loads(raw)  # noqa: S301 - the caller opted in with allow_pickle=True
