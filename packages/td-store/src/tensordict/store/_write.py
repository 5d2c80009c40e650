"""Indexed writes (``store[index] = td``, ``set_at_``): one atomic ``MULTI``/``EXEC``.

Tensor leaves are written per unit (a group or a column, see ``_groups``): the members
written together are interleaved locally into the bytes of their row window, then sent
as one ``SETRANGE`` per run of consecutive rows when the window is the whole row, or
one per row otherwise. Per-element non-tensor leaves are written by a script (``LSET``
per element). Keys that do not exist yet are allocated zero-filled on the server first,
in the same transaction (several new tensor keys at the root form a group).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tensordict import NonTensorData, NonTensorStack
from tensordict.store._codec import dtype_tag, encode_nontensor, nbytes
from tensordict.store._conn import _SCRIPTS, dumps_json, path_field
from tensordict.store._groups import (
    _as_bytes,
    group_entry,
    interleave,
    new_gid,
    plan_groups,
    unit_of,
)
from tensordict.store._io import index_frame, runs_of
from tensordict.store._txn import Txn

__all__ = ["scatter", "queue_setranges"]


def _flat(stack: NonTensorStack) -> list:
    out = stack.tolist()
    for _ in range(len(stack.batch_size) - 1):
        out = [x for sub in out for x in sub]
    return out


def queue_setranges(txn: Txn, key: str, rows: torch.Tensor, rs: int, lo: int, data: torch.Tensor) -> None:
    """Queues the writes of ``data`` (``[len(rows), w]`` uint8) at bytes ``[lo, lo + w)``
    of rows ``rows`` of the string ``key`` (``rs`` bytes per row)."""
    m, w = data.shape
    if not m or not w:
        return
    flat = _raw(data)
    if lo == 0 and w == rs:  # whole rows: one write per run of consecutive rows
        runs = runs_of(rows)
        a = 0
        for r in range(0, len(runs), 2):
            f, c = runs[r], runs[r + 1]
            txn.command("SETRANGE", key, f * rs, flat[a * rs : (a + c) * rs])
            a += c
        return
    for i, r in enumerate(rows.tolist()):
        txn.command("SETRANGE", key, r * rs + lo, flat[i * w : (i + 1) * w])


def _raw(data: torch.Tensor) -> memoryview:
    import ctypes

    data = data.contiguous()
    return memoryview(ctypes.string_at(data.data_ptr(), data.numel()))


def scatter(store: Any, pos: torch.Tensor, leaves: list, nodes: list, broadcast: bool = False) -> None:
    """Writes ``leaves`` (``(rel path, value)``, value batch = ``pos.shape``) at the flat
    positions ``pos`` of ``store``'s batch, creating missing keys and ``nodes``."""
    root = store._root
    conn = root.conn
    bs, numel, out_bs, flat = index_frame(store, pos)
    nb = len(bs)
    nob = len(out_bs)
    m = flat.numel()
    full = store._path
    entries = root.entries(refresh=root.cache is None)
    txn = Txn()
    created: list = []
    for rel, vbs in nodes:
        if not rel:
            continue
        path = (*full, *rel)
        if path not in entries:
            entry = {"t": "td", "bs": [*bs, *vbs[nob:]]}
            txn.command("HSET", root.schema_key, path_field(path), dumps_json(entry))
            created.append((path, entry))
    tensors: list = []  # (path, entry or None, value)
    lists: list = []
    for rel, v in leaves:
        path = (*full, *rel)
        field = path_field(path)
        e = entries.get(path)
        if e is None and root.cache is not None:
            e = root.entries(refresh=True).get(path)
            entries = root.entries()
        if isinstance(v, torch.Tensor):
            if e is None:
                if store._is_locked:
                    msg = f"Cannot create the key {rel!r} at an index: the TensorDictStore is locked."
                    raise RuntimeError(msg)
                e = {"t": "tensor", "shape": [*bs, *v.shape[nob:]], "dtype": v.dtype, "new": True}
            elif e["t"] != "tensor":
                msg = f"Cannot write a tensor at an index of key {rel!r} of {root.conn.server}: it holds {e['t']} data."
                raise TypeError(msg)
            feat = e["shape"][nb:]
            target = [*out_bs, *feat]
            if v.dtype != e["dtype"]:
                v = v.to(e["dtype"])
            if list(v.shape) != target:
                vv = v
                while len(vv.shape) > len(target) and vv.shape[0] == 1:
                    vv = vv[0]
                try:
                    v = vv.expand(target)
                except RuntimeError as err:
                    msg = (
                        f"cannot write key {rel!r} at the index: expected shape {tuple(target)} "
                        f"(feature shape {tuple(feat)}), got {tuple(v.shape)}."
                    )
                    raise RuntimeError(msg) from err
            tensors.append((path, e, v))
            continue
        # non-tensor: one JSON value per element
        if isinstance(v, NonTensorStack):
            vbs = list(v.batch_size)
            items = _flat(v)
        else:
            vbs = list(v.batch_size) if isinstance(v, NonTensorData) and len(v.batch_size) >= nob else out_bs
            data = v.data if isinstance(v, NonTensorData) else v
            items = [data] * max(math.prod(vbs), 1)
        lbs = [*bs, *vbs[nob:]]
        if e is None or e["t"] not in ("json", "jsonl"):
            if e is not None and e["t"] == "tensor":
                msg = f"Cannot write a non-tensor value at an index of the tensor key {rel!r}."
                raise TypeError(msg)
            if e is None and store._is_locked:
                msg = f"Cannot create the key {rel!r} at an index: the TensorDictStore is locked."
                raise RuntimeError(msg)
            if e is not None:  # a pickle: replaced by a list
                txn.command("DEL", root.data_key(field))
        if e is None or e["t"] != "jsonl":
            stored = {"t": "jsonl", "bs": lbs}
            txn.command("HSET", root.schema_key, field, dumps_json(stored))
            created.append((path, stored))
        total = max(math.prod(lbs), 1)
        g = total // numel
        args: list = [total, 1]
        encoded = [encode_nontensor(x, rel, False)[1] for x in items]
        if len(encoded) != m * g:
            if len(encoded) == 1:
                encoded = encoded * (m * g)
            else:
                msg = f"Key {rel!r}: {len(encoded)} non-tensor values for {m * g} elements."
                raise RuntimeError(msg)
        for i, p in enumerate(flat.tolist()):
            for j in range(g):
                args.append(p * g + j)
                args.append(encoded[i * g + j])
        lists.append((root.data_key(field), args))
    tensors = _create(store, txn, tensors, created)
    units: dict = {}
    for path, e, v in tensors:
        key, rs, off, esz_row, k, esz = unit_of(root, path, e, bs)
        units.setdefault((key, k, rs, e.get("g")), []).append((off, esz_row, esz, v))
    for (key, k, rs, g), members in units.items():
        if not m:
            continue
        if k == 1:
            members.sort(key=lambda x: x[0])
            kept = _unwritten(root.entries() if g is not None else {}, g, members)

            def free(a: int, b: int, kept: list = kept) -> bool:  # no other member's bytes in [a, b)
                return not any(o < b and o + n > a for o, n in kept)

            block: list = []
            for mem in members:
                if block and not free(block[-1][0] + block[-1][1], mem[0]):
                    _write_block(txn, key, flat, rs, block, m, free)
                    block = []
                block.append(mem)
            if block:
                _write_block(txn, key, flat, rs, block, m, free)
            continue
        rows = flat // k
        sub = flat % k
        for off, _esz_row, esz, v in members:
            if esz:
                data = _as_bytes(v, m)
                raw = _raw(data)
                for i, (r, s) in enumerate(zip(rows.tolist(), sub.tolist())):
                    txn.command("SETRANGE", key, r * rs + off + s * esz, raw[i * esz : (i + 1) * esz])
    for lkey, args in lists:
        txn.command("EVAL", _SCRIPTS["lscatter"], 1, lkey, *args)
    if len(txn):
        conn.run_txn(txn)
    for path, entry in created:
        root.remember(path, entry)


def _unwritten(entries: dict, g: Any, members: list) -> list:
    """``(offset, bytes per row)`` of the members of group ``g`` that are not written now."""
    if g is None:
        return []
    written = {(off, n) for off, n, _, _ in members}
    return [
        (e["off"], nbytes(e["shape"][e["rb"] :], e["dtype"]))
        for e in entries.values()
        if e["t"] == "tensor" and e.get("g") == g and (e["off"], nbytes(e["shape"][e["rb"] :], e["dtype"])) not in written
    ]


def _write_block(txn: Txn, key: str, flat: torch.Tensor, rs: int, block: list, m: int, free: Any) -> None:
    """Queues the writes of ``block`` (members adjacent but for bytes no other member
    holds), widened to the whole row when nothing else lives in the row."""
    lo = block[0][0]
    hi = block[-1][0] + block[-1][1]
    if free(0, lo):
        lo = 0
    if free(hi, rs):
        hi = rs
    data = interleave([x[3] for x in block], m, hi - lo, [x[0] - lo for x in block])
    queue_setranges(txn, key, flat, rs, lo, data)


def _create(store: Any, txn: Txn, tensors: list, created: list) -> list:
    """Queues the allocation of the new tensor keys among ``tensors`` (entries marked
    ``"new"``): a group for several of them at the root, a column otherwise. Returns
    ``tensors`` with their final entries."""
    new = [(i, p, e) for i, (p, e, _) in enumerate(tensors) if e.get("new")]
    if not new:
        return tensors
    root = store._root
    bs = list(store._batch_size)
    out = list(tensors)
    grouped: set = set()
    if not store._path:
        plan = plan_groups([(p, e["shape"], e["dtype"]) for _, p, e in new], bs)
        for members, rs in plan:
            gid = new_gid()
            gkey = root.base + "g:" + gid
            txn.command("SETRANGE", gkey, math.prod(bs) * rs - 1, b"\0")
            for j, off in members:
                i, p, e = new[j]
                stored = group_entry(e["shape"], e["dtype"], gid, off, rs, len(bs))
                txn.command("HSET", root.schema_key, path_field(p), dumps_json(stored))
                created.append((p, stored))
                out[i] = (p, {**stored, "dtype": e["dtype"]}, tensors[i][2])
                grouped.add(i)
    for i, p, e in new:
        if i in grouped:
            continue
        shape, dtype = e["shape"], e["dtype"]
        size = nbytes(shape, dtype)
        dkey = root.data_key(path_field(p))
        txn.command("DEL", dkey)
        txn.command(*(("SETRANGE", dkey, size - 1, b"\0") if size else ("SET", dkey, b"")))
        stored = {"t": "tensor", "shape": shape, "dtype": dtype_tag(dtype)}
        txn.command("HSET", root.schema_key, path_field(p), dumps_json(stored))
        created.append((p, stored))
        out[i] = (p, {**stored, "dtype": dtype}, tensors[i][2])
    return out
