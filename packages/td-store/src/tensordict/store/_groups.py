"""Record groups: tensor leaves written together, stored interleaved per batch element.

A TensorDictStore keeps each tensor leaf either as its own string (a *column*: the
leaf's raw bytes, element after element) or as a slice of a *group*: one string for
several leaves where batch element ``r`` (a *row*) holds the bytes of every member's
element ``r`` side by side::

    <prefix>:{<td_id>}:g:<gid>    row 0: obs[0] action[0] reward[0] done[0] | row 1: ...

A group's schema entries say where a member lives: ``"g"`` (the group id), ``"off"``
(its byte offset in a row), ``"rs"`` (the row size in bytes) and ``"rb"`` (how many
leading dims of the leaf's shape index rows: the root's batch dims when the group was
written). Sampling rows then costs one range read per row for all the members at
once, instead of one per row and leaf; writing a run of consecutive rows is one write.

Groups are formed when several leaves are written in one call at the root of a store
(``from_tensordict``/``to_store``, ``from_schema``, ``td[key] = sub_td``, an indexed
write that creates keys): leaves of at most :data:`MAX_LEAF_ROW` bytes per row, up to
:data:`MAX_ROW` bytes per row and :data:`MAX_BYTES` per group. Writing one member
whole (``td["obs"] = x``) moves it to a column of its own; a group no member refers to
any more is deleted in the same transaction.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import torch

from tensordict.store._codec import nbytes
from tensordict.store._conn import path_field

__all__ = ["plan_groups", "new_gid", "unit_of", "interleave", "MAX_LEAF_ROW", "MAX_ROW", "MAX_BYTES"]

#: a leaf with more bytes per batch element than this stays a column of its own
MAX_LEAF_ROW = 4096
#: the largest row of a group, in bytes
MAX_ROW = 16384
#: the largest group string, in bytes (Redis strings hold at most 512 MiB)
MAX_BYTES = 1 << 28


def new_gid() -> str:
    return uuid.uuid4().hex[:16]


def plan_groups(leaves: list, bs: Any) -> list:
    """Which of ``leaves`` (``(path, shape, dtype)``) to store as groups, for a root of
    batch size ``bs``: a list of groups, each ``[(index into leaves, byte offset), ...]``
    with its row size; groups of one leaf are not formed."""
    nb = len(bs)
    rows = math.prod(bs)
    if nb == 0 or rows == 0:
        return []
    # widest elements first: every member's offset is a multiple of its element size, so
    # a whole read copies elements, not bytes; the row is padded to the widest element
    order = sorted(range(len(leaves)), key=lambda i: -leaves[i][2].itemsize)
    groups: list = []
    cur: list = []
    rs = 0
    for i in order:
        _, shape, dtype = leaves[i]
        if list(shape[:nb]) != list(bs):
            continue
        esz = nbytes(shape[nb:], dtype)
        if not 0 < esz <= MAX_LEAF_ROW:
            continue
        if cur and (rs + esz > MAX_ROW or (rs + esz) * rows > MAX_BYTES):
            groups.append((cur, rs))
            cur, rs = [], 0
        cur.append((i, rs))
        rs += esz
    if cur:
        groups.append((cur, rs))
    out = []
    for g, size in groups:
        if len(g) >= 2:
            wide = max(leaves[i][2].itemsize for i, _ in g)
            out.append((g, -(-size // wide) * wide))
    return out


def interleave(tensors: list, rows: int, rs: int, offsets: list) -> torch.Tensor:
    """``[rows, rs]`` uint8: row ``r`` holds the bytes of ``tensors[i]``'s element ``r`` at
    ``offsets[i]`` (each tensor's leading dims flattened to ``rows``)."""
    parts = [_as_bytes(t, rows) for t in tensors]
    end = 0
    for p, off in zip(parts, offsets):
        if off != end:
            break
        end += p.shape[1]
    else:  # the members fill the row in order (then padding): one concatenation
        if end < rs:
            parts.append(torch.zeros(rows, rs - end, dtype=torch.uint8))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    out = torch.zeros(rows, rs, dtype=torch.uint8)
    for b, off in zip(parts, offsets):
        out[:, off : off + b.shape[1]] = b
    return out


def _as_bytes(t: torch.Tensor, rows: int) -> torch.Tensor:
    """``t`` as ``[rows, bytes per row]`` uint8 (on CPU, contiguous)."""
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_complex():
        t = t.resolve_conj().resolve_neg()
    t = t.reshape(rows, -1)
    if not t.is_contiguous():
        t = t.contiguous()
    return t if t.dtype is torch.uint8 else t.view(torch.uint8)


def unit_of(root: Any, path: tuple, entry: dict, node_bs: Any) -> tuple:
    """``(key, rs, off, esz_row, k, esz)`` of a tensor leaf read at a node of batch size
    ``node_bs``: the string holding it, its row size, the leaf's byte offset in a row and
    bytes per row, how many node elements share a row (``k``) and the bytes of one node
    element (``esz``)."""
    shape, dtype = entry["shape"], entry["dtype"]
    nb = len(node_bs)
    esz = nbytes(shape[nb:], dtype)
    g = entry.get("g")
    if g is None:
        return root.data_key(path_field(path)), esz, 0, esz, 1, esz
    rb = entry["rb"]
    k = math.prod(shape[rb:nb]) if nb >= rb else 0
    return root.base + "g:" + g, entry["rs"], entry["off"], nbytes(shape[rb:], dtype), k, esz


def group_entry(shape: list, dtype: Any, gid: str, off: int, rs: int, rb: int) -> dict:
    from tensordict.store._codec import dtype_tag

    return {"t": "tensor", "shape": list(shape), "dtype": dtype_tag(dtype), "g": gid, "off": off, "rs": rs, "rb": rb}


def write_leaves(pipe: Any, root: Any, leaves: list, bs: Any, group: bool) -> list:
    """Queues on ``pipe`` (a redis-py pipeline) the commands that store ``leaves``
    (``(path, value)``) whole; the tensor leaves form groups when ``group`` (a write at
    the root of batch size ``bs``). Returns ``[(path, schema entry)]``."""
    from tensordict.store._conn import dumps_json, path_field
    from tensordict.store._io import leaf_commands

    written = []
    plan = []
    if group:
        tens = [(i, p, v) for i, (p, v) in enumerate(leaves) if isinstance(v, torch.Tensor)]
        plan = [([tens[j] for j, _ in members], [off for _, off in members], rs)
                for members, rs in plan_groups([(p, list(v.shape), v.dtype) for _, p, v in tens], bs)]
    done: set = set()
    rows = math.prod(bs)
    for members, offs, rs in plan:
        gid = new_gid()
        blob = interleave([v for _, _, v in members], rows, rs, offs)
        pipe.set(root.base + "g:" + gid, _bytes(blob))
        for (i, p, v), off in zip(members, offs):
            entry = group_entry(list(v.shape), v.dtype, gid, off, rs, len(bs))
            pipe.hset(root.schema_key, path_field(p), dumps_json(entry))
            written.append((p, entry))
            done.add(i)
    for i, (p, leaf) in enumerate(leaves):
        if i not in done:
            written.append((p, leaf_commands(pipe, root.data_key, root.schema_key, p, leaf, root.allow_pickle)))
    return written


def _bytes(t: torch.Tensor) -> bytes:
    import ctypes

    t = t.contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel()) if t.numel() else b""


def delete_commands(root: Any, path: tuple, entries: dict) -> list:
    """The commands (argument tuples) that delete every stored path under ``path``: the
    schema fields, the columns, and the groups left without members (checked on the
    server, against the schema as it is then)."""
    from tensordict.store._conn import _SCRIPTS, path_field

    n = len(path)
    out: list = []
    gids: list = []
    for p, e in entries.items():
        if p[:n] != path:
            continue
        g = e.get("g") if e["t"] == "tensor" else None
        if g is None:
            out.append(("DEL", root.data_key(path_field(p))))
        elif g not in gids:
            gids.append(g)
        out.append(("HDEL", root.schema_key, path_field(p)))
    if gids:
        keys = [root.base + "g:" + g for g in gids]
        out.append(("EVAL", _SCRIPTS["gdrop"], 1 + len(keys), root.schema_key, *keys, *gids))
    return out
