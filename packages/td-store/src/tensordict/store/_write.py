"""Indexed writes (``store[index] = td``, ``set_at_``): one atomic server transaction.

The tensor leaves are written by one script call (``SETRANGE`` of each run of
consecutive elements), the per-element non-tensor leaves by ``LSET``; keys that do not
exist yet are allocated zero-filled on the server first, in the same transaction.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tensordict import NonTensorData, NonTensorStack
from tensordict.store._codec import dtype_tag, encode_nontensor, nbytes, tensor_to_bytes
from tensordict.store._conn import dumps_json, path_field
from tensordict.store._io import runs_of

__all__ = ["scatter"]

#: up to this many runs of consecutive elements, an indexed write is plain SETRANGEs in a
#: MULTI/EXEC transaction; more runs go to one server-side script
_FEW_RUNS = 4


def _flat(stack: NonTensorStack) -> list:
    out = stack.tolist()
    for _ in range(len(stack.batch_size) - 1):
        out = [x for sub in out for x in sub]
    return out


def scatter(store: Any, pos: torch.Tensor, leaves: list, nodes: list, broadcast: bool = False) -> None:
    """Writes ``leaves`` (``(rel path, value)``, value batch = ``pos.shape``) at the flat
    positions ``pos`` of ``store``'s batch, creating missing keys and ``nodes``."""
    root = store._root
    conn = root.conn
    bs = list(store._batch_size)
    nb = len(bs)
    numel = max(math.prod(bs), 1)
    out_bs = list(pos.shape)
    nob = len(out_bs)
    flat = pos.reshape(-1)
    m = flat.numel()
    full = store._path
    entries = root.entries(refresh=root.cache is None)
    pipe: list = []  # the commands of one MULTI/EXEC
    created: list = []
    for rel, vbs in nodes:
        if not rel:
            continue
        path = (*full, *rel)
        if path not in entries:
            entry = {"t": "td", "bs": [*bs, *vbs[nob:]]}
            pipe.append(("HSET", root.schema_key, path_field(path), dumps_json(entry)))
            created.append((path, entry))
    keys: list = []
    sizes: list = []
    blobs: list = []
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
                shape = [*bs, *v.shape[nob:]]
                e = {"t": "tensor", "shape": shape, "dtype": v.dtype}
                size = nbytes(shape, v.dtype)
                dkey = root.data_key(field)
                pipe.append(("DEL", dkey))
                pipe.append(("SETRANGE", dkey, size - 1, b"\0") if size else ("SET", dkey, b""))
                stored = {"t": "tensor", "shape": shape, "dtype": dtype_tag(v.dtype)}
                pipe.append(("HSET", root.schema_key, field, dumps_json(stored)))
                created.append((path, stored))
            elif e["t"] != "tensor":
                msg = f"Cannot write a tensor at an index of key {rel!r} of {root.conn.server}: it holds {e['t']} data."
                raise TypeError(msg)
            feat = e["shape"][nb:]
            target = [*out_bs, *feat]
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
            keys.append(root.data_key(field))
            sizes.append(nbytes(feat, e["dtype"]))
            blobs.append(tensor_to_bytes(v))
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
                pipe.append(("DEL", root.data_key(field)))
        if e is None or e["t"] != "jsonl":
            stored = {"t": "jsonl", "bs": lbs}
            pipe.append(("HSET", root.schema_key, field, dumps_json(stored)))
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
    runs = runs_of(flat) if keys else []
    if len(runs) <= 2 * _FEW_RUNS:
        # a few runs (slices): plain SETRANGEs in the transaction, no script on the server
        for dkey, esz, blob in zip(keys, sizes, blobs):
            view = memoryview(blob)
            off = 0
            for r in range(0, len(runs), 2):
                n = runs[r + 1] * esz
                pipe.append(("SETRANGE", dkey, runs[r] * esz, view[off : off + n]))
                off += n
                pos += n
    elif not lists and not created and not len(pipe):
        conn.run_script("scatter", keys, [len(runs) // 2, *runs, *sizes, *blobs])  # one atomic EVALSHA
        return
    elif keys:
        conn.queue_script(pipe, "scatter", keys, [len(runs) // 2, *runs, *sizes, *blobs])
    for lkey, args in lists:
        conn.queue_script(pipe, "lscatter", [lkey], args)
    conn.transaction(pipe)
    for path, entry in created:
        root.remember(path, entry)
