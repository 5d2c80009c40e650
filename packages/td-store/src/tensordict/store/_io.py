"""Reads and writes of a stored TensorDict's subtree: the commands, batched so that a call
is one round trip and one atomic unit on the server.

A *node* is a TensorDict at a path (``()`` for the root) with an absolute batch size; a
*leaf* is a tensor or non-tensor value at a path. Positions are flat indices over a
node's batch size; runs are ``(first, count)`` pairs of consecutive positions.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensor_collection,
)
from tensordict.store._codec import (
    bytes_to_tensor,
    check_blob,
    decode_json,
    decode_pickle,
    dtype_tag,
    encode_nontensor,
    nbytes,
    tensor_to_bytes,
)
from tensordict.store._conn import dumps_json, path_field

__all__ = ["positions", "runs_of", "index_frame", "flatten_value", "nested_list", "build_td"]

#: up to this many positions, index plans are computed in plain Python
_SMALL = 4096


def positions(bs: torch.Size, index: Any) -> torch.Tensor:
    """Flat positions (over ``bs``) that ``index`` selects, shaped like the result batch."""
    if len(bs) == 1:
        if index.__class__ is slice:
            return torch.arange(*index.indices(bs[0]))
        if index.__class__ is int:
            if not -bs[0] <= index < bs[0]:
                msg = f"index {index} is out of bounds for dimension 0 with size {bs[0]}"
                raise IndexError(msg)
            return torch.tensor(index % bs[0])
        if (
            isinstance(index, torch.Tensor) and index.dtype in (torch.int64, torch.int32)
            and index.dim() == 1 and index.device.type == "cpu" and index.numel()
        ):  # an index tensor: checked, not gathered from an arange of the whole batch
            lo, hi = (int(x) for x in torch.aminmax(index))
            n = bs[0]
            if lo < -n or hi >= n:
                msg = f"index {hi if hi >= n else lo} is out of bounds for dimension 0 with size {n}"
                raise IndexError(msg)
            index = index.long()
            return index if lo >= 0 else torch.where(index < 0, index + n, index)
    n = math.prod(bs)
    return torch.arange(n).view(bs)[index]


def index_frame(store: Any, pos: torch.Tensor) -> tuple:
    """``(batch size, its numel (at least 1), result batch size, flat positions)`` of an
    indexed read or write of ``store`` at positions ``pos``."""
    bs = list(store._batch_size)
    return bs, max(math.prod(bs), 1), list(pos.shape), pos.reshape(-1)


def runs_of(flat: torch.Tensor) -> list:
    """``[first0, count0, first1, count1, ...]`` for the flat positions ``flat``."""
    m = flat.numel()
    if m == 0:
        return []
    if m == 1:
        return [int(flat[0]), 1]
    if m <= _SMALL:  # plain Python: small torch ops cost milliseconds on a busy machine
        items = flat.tolist()
        if items[-1] - items[0] == m - 1 and items == list(range(items[0], items[0] + m)):
            return [items[0], m]
        out = [items[0], 1]
        for p, q in zip(items, items[1:]):
            if q == p + 1:
                out[-1] += 1
            else:
                out += (q, 1)
        return out
    brk = ((flat[1:] - flat[:-1]) != 1).nonzero().view(-1) + 1
    if brk.numel() == 0:
        return [int(flat[0]), m]
    starts = torch.cat([torch.zeros(1, dtype=torch.long), brk])
    ends = torch.cat([brk, torch.tensor([m])])
    return torch.stack([flat[starts], ends - starts], 1).view(-1).tolist()


def nested_list(flat: list, shape: Any) -> Any:
    """``flat`` (row major) as nested lists of ``shape``."""
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = math.prod(shape[1:])
    return [nested_list(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def as_nontensor(values: list, bs: Any, device: Any) -> Any:
    """A ``NonTensorData`` (``bs == []``) or ``NonTensorStack`` of ``values`` (flat)."""
    if not bs:
        return NonTensorData(values[0], batch_size=[], device=device)
    if any(s == 0 for s in bs):
        return NonTensorData(None, batch_size=list(bs), device=device)
    return NonTensorStack.from_list(nested_list(values, list(bs)), device=device)


def flatten_value(value: Any, path: tuple, nodes: list, leaves: list) -> None:
    """Appends ``(path, batch_size)`` for ``value``'s nested TensorDicts to ``nodes`` and
    ``(path, leaf)`` for its leaves (tensors, NonTensorData, NonTensorStack) to ``leaves``."""
    stack = [(path, value)]
    while stack:
        p, v = stack.pop()
        if isinstance(v, (NonTensorData, NonTensorStack)) or isinstance(v, torch.Tensor):
            leaves.append((p, v))
            continue
        if getattr(type(v), "_is_tensorclass", False):
            v = v.to_tensordict()
        if isinstance(v, TensorDictBase) or is_tensor_collection(v):
            if p != path or not nodes or nodes[-1][0] != p:
                nodes.append((p, list(v.batch_size)))
            for k, sub in v.items():
                stack.append(((*p, k), sub))
            continue
        msg = f"Cannot store a {type(v).__name__} under key {p!r} of a TensorDictStore."
        raise TypeError(msg)


def leaf_commands(pipe: Any, keyfn: Any, schema_key: str, path: tuple, leaf: Any, allow_pickle: bool) -> dict:
    """Queues the commands that store ``leaf`` whole at ``path``; returns its schema entry."""
    field = path_field(path)
    dkey = keyfn(field)
    if isinstance(leaf, torch.Tensor):
        entry = {"t": "tensor", "shape": list(leaf.shape), "dtype": dtype_tag(leaf.dtype)}
        pipe.set(dkey, tensor_to_bytes(leaf))
    elif isinstance(leaf, NonTensorData):
        tag, payload = encode_nontensor(leaf.data, path, allow_pickle)
        entry = {"t": tag, "bs": list(leaf.batch_size)}
        pipe.set(dkey, payload)
    else:  # NonTensorStack: one JSON value per element
        items = _flat_items(leaf)
        encoded = [encode_nontensor(x, path, allow_pickle) for x in items]
        if any(tag != "json" for tag, _ in encoded):
            msg = f"Key {path!r}: a stack of non-tensor values is stored as JSON; {type(items[0]).__name__} values are not JSON-serializable."
            raise TypeError(msg)
        entry = {"t": "jsonl", "bs": list(leaf.batch_size)}
        if encoded:
            pipe.rpush(dkey, *[payload for _, payload in encoded])
    pipe.hset(schema_key, field, dumps_json(entry))
    return entry


def _flat_items(stack: Any) -> list:
    out = stack.tolist()
    for _ in range(len(stack.batch_size) - 1):
        out = [x for sub in out for x in sub]
    return out


def decode_leaf(entry: dict, raw: Any, path: tuple, server: str, allow_pickle: bool, device: Any) -> Any:
    """The value of a whole leaf from its raw server reply (``GET`` or ``LRANGE``)."""
    t = entry["t"]
    if t == "tensor":
        shape, dtype = entry["shape"], entry["dtype"]
        check_blob(raw, nbytes(shape, dtype), path, server)
        out = bytes_to_tensor(raw, shape, dtype)
        return out if device is None else out.to(device)
    bs = entry.get("bs", [])
    if t == "json":
        return NonTensorData(decode_json(raw, path, server), batch_size=bs, device=device)
    if t == "pickle":
        return NonTensorData(decode_pickle(raw, path, server, allow_pickle), batch_size=bs, device=device)
    values = [decode_json(x, path, server) for x in (raw or [])]
    n = math.prod(bs)
    if len(values) != n:
        from tensordict.store._codec import StoreDataError

        msg = f"Key {path!r} on server {server}: expected {n} non-tensor values, the server holds {len(values)}."
        raise StoreDataError(msg)
    return as_nontensor(values, bs, device)


def build_td(node_path: tuple, node_bs: Any, nodes: dict, leaves: dict, device: Any) -> TensorDict:
    """A TensorDict of the subtree at ``node_path`` from ``{path: bs}`` and ``{path: value}``."""
    depth = len(node_path)
    children: dict = {}
    sub_nodes: set = set()
    for p, v in leaves.items():
        if len(p) > depth and p[:depth] == node_path:
            if len(p) == depth + 1:
                children[p[depth]] = v
            else:
                sub_nodes.add(p[: depth + 1])
    for p in nodes:
        if len(p) == depth + 1 and p[:depth] == node_path:
            sub_nodes.add(p)
    for p in sorted(sub_nodes):
        children[p[depth]] = build_td(p, nodes.get(p, node_bs), nodes, leaves, device)
    return TensorDict(children, batch_size=node_bs, device=device)
