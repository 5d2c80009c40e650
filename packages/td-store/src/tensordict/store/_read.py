"""Indexed reads (``store[index]``): every selected element of every leaf of a subtree, in
one ``MULTI``/``EXEC`` transaction (a consistent snapshot; see ``_txn``).

The tensor leaves are read per *unit* (a group string or a column, see ``_groups``): the
byte window of a row that covers the wanted members, either one range per selected
element, or whole rows per run of consecutive elements, whichever moves fewer bytes
for the server's cost per command (:data:`RANGE_COST_BYTES`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tensordict import NonTensorData
from tensordict.store._codec import StoreDataError, decode_json
from tensordict.store._conn import _SCRIPTS, path_field
from tensordict.store._groups import unit_of
from tensordict.store._io import as_nontensor, build_td, decode_leaf, index_frame
from tensordict.store._txn import CommandCache, RangeMismatch, Txn

__all__ = ["gather", "queue_rows", "column_of"]

#: one more range read costs the server about as much as sending this many more bytes
RANGE_COST_BYTES = 2048


#: up to this many rows, a read is planned in plain Python (small torch ops cost more)
_SMALL = 4096


class _Offsets:
    """The byte offsets ``r * rs + lo`` of rows ``rows``, computed when iterated."""

    __slots__ = ("rows", "rs", "lo")

    def __init__(self, rows: list, rs: int, lo: int) -> None:
        self.rows, self.rs, self.lo = rows, rs, lo

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Any:
        rs, lo = self.rs, self.lo
        return (r * rs + lo for r in self.rows)


def _runs(rows: list) -> list:
    """``[(first, count), ...]``: the runs of consecutive values of ``rows``, in order."""
    out = []
    first = prev = rows[0]
    for r in rows[1:]:
        if r != prev + 1:
            out.append((first, prev - first + 1))
            first = r
        prev = r
    out.append((first, prev - first + 1))
    return out


def queue_rows(txn: Txn, key: str, rows: torch.Tensor, rs: int, lo: int, hi: int,
               cache: CommandCache | None = None, total_rows: int = 0) -> Any:
    """Queues the reads of bytes ``[lo, hi)`` of rows ``rows`` (int64, any order, repeats
    allowed) of the string ``key`` (``total_rows`` rows of ``rs`` bytes); returns a
    function of the block results giving ``[len(rows), hi - lo]`` uint8."""
    m = rows.numel()
    w = hi - lo
    if m <= _SMALL:
        rl = rows.tolist()
        probe = rl[:33]  # whole rows pay only with many adjacent rows: a random sample has few
        if m > 64 and sum(b == a + 1 for a, b in zip(probe, probe[1:])) < 4:
            nruns = m
        else:
            nruns = m - list(map(int.__sub__, rl[1:], rl[:-1])).count(1) if m else 0
        runs: Any = None
    else:
        rl = None
        brk = ((rows[1:] - rows[:-1]) != 1).nonzero().view(-1) + 1
        at = torch.cat([torch.zeros(1, dtype=torch.int64), brk])
        counts = torch.diff(at, append=torch.tensor([m]))
        runs = list(zip(rows[at].tolist(), counts.tolist()))
        nruns = len(runs)
    if 4 * (nruns * RANGE_COST_BYTES + m * rs) >= 3 * m * (RANGE_COST_BYTES + w):  # whole rows only when clearly cheaper
        encoded = cache.commands(key.encode(), rs, lo, w, rl, total_rows) if rl is not None and cache is not None else None
        if encoded is not None and rl is not None:
            j = txn.ranges(key, _Offsets(rl, rs, lo), w, encoded)
        else:
            j = txn.ranges(key, rows * rs + lo, w)
        return lambda res: res[j]
    if runs is None:
        assert rl is not None
        runs = _runs(rl)
    if nruns == 1:  # one run of whole rows: one range
        j = txn.ranges(key, [runs[0][0] * rs], m * rs)
        return lambda res: res[j].view(m, rs)[:, lo:hi]
    # one block per run length (a block's ranges share one length)
    by_len: dict = {}
    dst = 0
    for first, c in runs:
        by_len.setdefault(c, []).append((first, dst))
        dst += c
    plan = []
    for c, items in by_len.items():
        j = txn.ranges(key, [f * rs for f, _ in items], c * rs)
        dest = (torch.tensor([a for _, a in items]).unsqueeze(1) + torch.arange(c)).view(-1)
        plan.append((j, dest))

    def finish(res: list) -> torch.Tensor:
        out = torch.empty(m, w, dtype=torch.uint8)
        for j, dest in plan:
            out[dest] = res[j].reshape(-1, rs)[:, lo:hi]
        return out

    return finish


#: whole reads of a group are decoded in chunks of about this many bytes
SINK_CHUNK = 1 << 20
#: element count under which torch runs a copy on one thread (``at::internal::GRAIN_SIZE``)
_GRAIN = 32767


class GroupSink:
    """Decodes a group string as it arrives (see ``_wire._Reader.streamed``): the rows are
    received into a reused chunk buffer and each wanted member's bytes are copied out of
    every full chunk, so the copy overlaps the transfer and no buffer of the whole string
    is made.

    ``members``: ``(byte offset in a row, bytes per row, shape, dtype)``; :attr:`outs` are
    the members' tensors (new, contiguous) once :meth:`finish` ran.
    """

    def __init__(self, rows: int, rs: int, members: list, scratch: Any = None) -> None:
        self.rows, self.rs = rows, rs
        self.nbytes = rows * rs
        per = max(1, SINK_CHUNK // max(rs, 1))
        size = per * rs
        buf = scratch[:size] if scratch is not None and len(scratch) >= size else memoryview(bytearray(size))
        self.mv = buf
        self.u8 = torch.frombuffer(buf, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
        self.fill = 0
        self.row = 0
        self.outs: list = []
        self.plan: list = []
        self.index: dict = {}
        for off, esz_row, shape, dtype in members:
            out = torch.empty(shape, dtype=dtype)
            self.outs.append(out)
            isz = dtype.itemsize
            if isz > 1 and not (off % isz or rs % isz or self.u8.data_ptr() % isz):
                self.plan.append((out.view(rows, esz_row // isz), dtype, off // isz, (off + esz_row) // isz))
            else:
                self.plan.append((out.view(-1).view(torch.uint8).view(rows, esz_row), None, off, off + esz_row))

    def space(self) -> memoryview:
        return self.mv[self.fill :]

    def advance(self, k: int) -> None:
        self.fill += k
        if self.fill == len(self.mv):
            self._flush()

    def finish(self) -> None:
        self._flush()

    def _flush(self) -> None:
        n = self.fill // self.rs if self.rs else 0
        if n:
            rows = self.u8[: n * self.rs].view(n, self.rs)
            r = self.row
            for dst, dtype, a, b in self.plan:
                src = (rows.view(dtype) if dtype is not None else rows)[:, a:b]
                # copies of fewer elements than torch's grain size run on this thread: the
                # server is still sending on the other core, and intra-op threads waiting
                # for a core cost more than the copy
                step = max(1, _GRAIN // max(b - a, 1))
                for i in range(0, n, step):
                    dst[r + i : r + min(i + step, n)].copy_(src[i : i + step])
            self.row += n
        self.fill = 0


def column_of(blob: Any, rows: int, rs: int, off: int, esz_row: int, shape: list, dtype: torch.dtype) -> torch.Tensor:
    """A new tensor of the leaf stored at byte ``off`` of each of the ``rows`` rows of
    ``blob`` (whose length the caller checked); ``blob`` is not referenced afterwards."""
    if not esz_row or not rows:
        return torch.empty(shape, dtype=dtype)
    u8 = torch.frombuffer(blob, dtype=torch.uint8)
    isz = dtype.itemsize
    if isz > 1 and not (off % isz or rs % isz or u8.data_ptr() % isz):  # aligned: copy whole elements
        typed = u8.view(dtype).view(rows, rs // isz)[:, off // isz : (off + esz_row) // isz]
        return typed.clone(memory_format=torch.contiguous_format).view(shape)
    part = u8.view(rows, rs)[:, off : off + esz_row]
    return part.clone(memory_format=torch.contiguous_format).view(dtype).view(shape)


def _decode(w: torch.Tensor, m: int, k: int, esz: int, sub: Any, dtype: torch.dtype, shape: list) -> torch.Tensor:
    if k > 1:
        w = w.reshape(m, k, esz)[torch.arange(m), sub]
    return _fresh(w).view(dtype).view(shape)


def _fresh(w: torch.Tensor) -> torch.Tensor:
    """``w`` (uint8, 2-D) in a buffer of its own, C-contiguous from offset 0 (what a view as
    a wider dtype needs); no copy when it already is. Copied in blocks of rows that torch
    runs on this thread (see ``GroupSink._flush``)."""
    if w.storage_offset() == 0 and w.is_contiguous() and (w.dim() < 2 or w.stride(0) == w.shape[1]):
        return w
    if w.dim() != 2 or w.numel() <= _GRAIN:
        return w.clone(memory_format=torch.contiguous_format)
    out = torch.empty(w.shape, dtype=w.dtype)
    step = max(1, _GRAIN // max(w.shape[1], 1))
    for i in range(0, w.shape[0], step):
        out[i : i + step].copy_(w[i : i + step])
    return out


def gather(store: Any, pos: torch.Tensor) -> Any:
    """The elements at flat positions ``pos`` (shaped like the result batch) of ``store``'s
    subtree, as an in-memory TensorDict."""
    root = store._root
    conn = root.conn
    bs, numel, out_bs, flat = index_frame(store, pos)
    nb = len(bs)
    m = flat.numel()
    nodes, leaves = store._subtree(refresh=root.cache is None)
    full = store._path
    server = conn.server
    txn = Txn()
    units: dict = {}
    lists = []
    singles = []
    for rel, e in leaves.items():
        t = e["t"]
        if t == "tensor":
            key, rs, off, esz_row, k, esz = unit_of(root, (*full, *rel), e, bs)
            if not k:
                msg = f"Key {(*full, *rel)!r} on server {server}: its group's rows do not follow the batch dims."
                raise StoreDataError(msg)
            units.setdefault((key, k, rs), []).append((rel, e, off, esz_row, esz))
        elif t == "jsonl":
            lists.append((rel, e))
        else:
            singles.append((rel, e))
    finish: dict = {}
    if m:
        cache = root.commands
        if cache is None:
            cache = root.commands = CommandCache()
        for (key, k, rs), members in units.items():
            lo = min(x[2] for x in members)
            hi = max(x[2] + x[3] for x in members)
            if hi > lo:
                rows = flat if k == 1 else flat // k
                total = numel // k  # rows of the string
                finish[key, k, rs] = (queue_rows(txn, key, rows, rs, lo, hi, cache, total), lo, len(txn.blocks))
    if lists:
        lkeys = [root.data_key(path_field((*full, *rel))) for rel, _ in lists]
        groups = [max(math.prod(e.get("bs", bs)), 1) // numel for _, e in lists]
        li = txn.command("EVAL", _SCRIPTS["lgather"], len(lkeys), *lkeys, *groups, *flat.tolist())
    for rel, _ in singles:
        txn.command("GET", root.data_key(path_field((*full, *rel))))
    res: list = []
    replies: list = []
    if len(txn):
        try:
            res, replies = conn.run_txn(txn)
        except RangeMismatch as err:
            paths = _paths_of_block(finish, units, err.block, full)
            msg = f"Key(s) {paths!r} on server {server}: {err.detail} (a value written by another client?)."
            raise StoreDataError(msg) from None
    values: dict = {}
    device = store._device
    for (key, k, rs), members in units.items():
        fin = finish.get((key, k, rs))
        w = fin[0](res) if fin is not None else None
        lo = fin[1] if fin is not None else 0
        sub = flat % k if k > 1 else None
        for rel, e, off, esz_row, esz in members:
            feat = e["shape"][nb:]
            if w is None or not m or not esz:
                t = torch.empty([*out_bs, *feat], dtype=e["dtype"])
            else:
                t = _decode(w[:, off - lo : off - lo + esz_row], m, k, esz, sub, e["dtype"], [*out_bs, *feat])
            values[rel] = t if device is None else t.to(device)
    if lists:
        for (rel, e), raw in zip(lists, replies[li]):
            path = (*full, *rel)
            lbs = e.get("bs", bs)
            vbs = [*out_bs, *lbs[nb:]]
            items = [decode_json(x, path, server) for x in raw]
            if len(items) == 1 and math.prod(vbs) != 1:  # a shared value stored as a string
                items = items * math.prod(vbs)
            if len(items) != math.prod(vbs):
                msg = f"Key {path!r} on server {server}: expected {math.prod(vbs)} non-tensor values, got {len(items)}."
                raise StoreDataError(msg)
            values[rel] = as_nontensor(items, vbs, device)
    for (rel, e), raw in zip(singles, replies[len(replies) - len(singles) :]):
        path = (*full, *rel)
        lbs = e.get("bs", bs)
        v = decode_leaf(e, raw, path, server, root.allow_pickle, device)
        values[rel] = NonTensorData(v.data, batch_size=[*out_bs, *lbs[nb:]], device=device)
    out_nodes = {rel: [*out_bs, *nbs[nb:]] for rel, nbs in nodes.items()}
    return build_td((), out_bs, out_nodes, values, device)


def _paths_of_block(finish: dict, units: dict, block: int, full: tuple) -> list:
    """The leaves read by the transaction block ``block``."""
    ends = sorted((end, u) for u, (_, _, end) in finish.items())
    for end, u in ends:
        if block < end:
            return [(*full, *m[0]) if full else (m[0][0] if len(m[0]) == 1 else m[0]) for m in units[u]]
    return []
