"""Collectives over a process group: broadcast, all_reduce, reduce, all_gather, gather_and_stack, scatter.

Every rank of the group calls the same method. Ranks (``src``, ``dst``) are given in
the group's own numbering (``0 .. group size - 1``), so the code is the same for the
default group and for a group made with ``torch.distributed.new_group``; they are
converted with ``torch.distributed.get_global_rank``.

Data movement reuses the wire format of :mod:`tensordict.distributed._wire`: a
TensorDict travels as one stream (header, JSON metadata, packed leaves) plus, for
``broadcast``, one message per big leaf. Reductions run on one flat buffer per
dtype: the consolidated storage itself when the TensorDict is consolidated
(:meth:`~tensordict.TensorDictBase.consolidate`), otherwise a packed copy that is
written back. Before a reduction the ranks compare a digest of their structures in
one 16-byte all-reduce, so mismatched TensorDicts raise an error naming the
differing keys on every rank instead of corrupting data.
"""

from __future__ import annotations

import json
import time
from typing import Any

import torch
import torch.distributed as dist
from torch._C._nn import flatten_dense_tensors as _flatten_dense
from torch._C._nn import unflatten_dense_tensors as _unflatten_dense

from tensordict.distributed._decode import (
    build_from_payload,
    describe_differences,
    parse_header,
    parse_meta,
    read_counts,
    set_values,
    stream_length,
    structure_of,
    tensor_bytes,
)
from tensordict.distributed._pickling import with_allow_pickle
from tensordict.distributed._transport import (
    check_initialized,
    comm_error,
    comm_mode,
    global_rank,
    group_rank,
    group_size,
    wait_all,
)
from tensordict.distributed._wire import (
    FLAG_VALUES,
    HEADER_SIZE,
    Outgoing,
    Template,
    WireError,
    copy_bytes,
)
from tensordict.ext import copy_leaves as _copy

__all__ = ["broadcast", "all_reduce", "reduce", "all_gather", "gather_and_stack", "scatter"]

_WHO = "the process group"


def _blocking(opname: str, group: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    started = time.monotonic()
    try:
        return fn(*args, group=group, **kwargs)
    except RuntimeError as err:
        raise comm_error(opname, err, _WHO, group, started) from err


def _member(op: str, group: Any) -> tuple[int, int]:
    check_initialized(op)
    me = group_rank(group)
    if me < 0:
        msg = f"{op}: this process (global rank {dist.get_rank()}) is not a member of the given process group."
        raise ValueError(msg)
    return me, group_size(group)


# ---------------------------------------------------------------------- decoding helpers
def _decode(stream: torch.Tensor, who: str) -> Any:
    """A TensorDict from a self-contained (inline) stream; its leaves are views into it."""
    flags, _, meta_len, total, n_seg = read_counts(tensor_bytes(stream[:HEADER_SIZE].cpu()), who)
    if stream_length(flags, meta_len, total, n_seg) > stream.numel() or n_seg:
        raise WireError(f"{who} sent a truncated buffer, or one whose payload is not inline.")
    header = parse_header(tensor_bytes(stream[:HEADER_SIZE].cpu()), who)
    meta = parse_meta(stream, header, who)
    return build_from_payload(meta, stream[header.prefix_len : header.prefix_len + header.total], who)


def _lengths(op: str, n: int, group: Any, device: torch.device, size: int) -> list[int]:
    mine = torch.tensor([n], dtype=torch.int64, device=device)
    out = [torch.empty(1, dtype=torch.int64, device=device) for _ in range(size)]
    _blocking(op, group, dist.all_gather, out, mine)
    return [int(t.item()) for t in out]


def _padded(stream: torch.Tensor, n: int) -> torch.Tensor:
    if stream.numel() == n:
        return stream
    buf = torch.zeros(n, dtype=torch.uint8, device=stream.device)
    copy_bytes(buf[: stream.numel()], stream)
    return buf


def _all_gather_bytes(op: str, payload: bytes, group: Any, device: torch.device, size: int) -> list[bytes]:
    lens = _lengths(op, len(payload), group, device, size)
    n = max(lens) or 1
    buf = torch.zeros(n, dtype=torch.uint8, device=device)
    if payload:
        buf[: len(payload)].copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
    out = [torch.empty(n, dtype=torch.uint8, device=device) for _ in range(size)]
    _blocking(op, group, dist.all_gather, out, buf)
    return [tensor_bytes(t[:m].cpu()) for t, m in zip(out, lens)]


def _numel_digest(template: Template) -> int:
    """A 63-bit hash of the keys, dtypes and element counts of the leaves, in order:
    what an element-wise reduction of the flattened leaves needs to agree on (a leaf
    of shape ``[1, 2]`` reduces with one of shape ``[2]``, as with torch.distributed)."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    for key, leaf in template.td.items(include_nested=True, leaves_only=True):
        if isinstance(leaf, torch.Tensor):
            h.update(repr((key, str(leaf.dtype), leaf.numel())).encode())
    return int.from_bytes(h.digest(), "little") >> 1


def _check_same_structure(op: str, template: Template, group: Any, device: torch.device, size: int,
                          by_numel: bool = False) -> None:
    """One tiny all-reduce: every rank must hold the same structure (keys, dtypes, shapes;
    element counts instead of shapes with ``by_numel``)."""
    d = _numel_digest(template) if by_numel else template.digest
    probe = torch.tensor([d, -d], dtype=torch.int64, device=device)
    _blocking(op, group, dist.all_reduce, probe, op=dist.ReduceOp.MAX)
    hi, neg_lo = (int(v) for v in probe.tolist())
    if hi == d and -neg_lo == d:
        return
    # someone differs: every rank sees it; exchange structures to say what differs
    mine = structure_of(template.td)
    payload = json.dumps([[list(k), v] for k, v in mine.items()]).encode("utf-8")
    everyone = _all_gather_bytes(op, payload, group, device, size)
    me = group_rank(group)
    lines = []
    for r, raw in enumerate(everyone):
        if r == me:
            continue
        try:
            theirs = {tuple(k): v for k, v in json.loads(raw.decode("utf-8"))}
        except (ValueError, TypeError):
            theirs = {}
        if theirs != mine:
            diff = describe_differences(mine, theirs, f"rank {me} (this rank)", f"rank {r}")
            lines.append(f"with group rank {r}:\n{diff}")
    msg = (
        f"{op}: the TensorDicts of the ranks do not have the same structure (keys, dtypes and shapes "
        f"must match on every rank; nothing was reduced). Differences {'; '.join(lines) or '(none with this rank)'}"
    )
    raise RuntimeError(msg)


# ---------------------------------------------------------------------- broadcast
@with_allow_pickle
def broadcast(td: Any, src: int, *, group: Any = None, device: Any = None, _tensorclass: str | None = None) -> Any:
    """Sends the TensorDict of rank ``src`` to every rank of the group.

    Every rank calls it. Rank ``src`` sends its header, then its metadata and packed
    small leaves, then each big leaf (1 MiB or more) as one broadcast. On the
    other ranks, a TensorDict with the same keys, dtypes and shapes is filled in
    place (big leaves are received straight into it) and returned; otherwise (an
    empty ``TensorDict()`` for instance) a new consolidated TensorDict is built.

    Args:
        src (int): the sending rank, in the group's own numbering.

    Keyword Args:
        group (ProcessGroup, optional): the process group. Defaults to the default group.
        device (torch.device, optional): on receiving ranks, the device of a newly
            built result. Defaults to ``None`` (where the backend received it).

    Returns:
        on ``src``, the TensorDict itself; elsewhere, the filled TensorDict or a new one.

    Raises:
        RuntimeError: not initialized; a rank died or the process group timed out.
        ValueError: ``src`` is not a rank of the group.
        TypeError: a leaf cannot be sent (sparse/nested, non-JSON non-tensor value).

    Examples:
        >>> import torch
        >>> import torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> from tensordict.testing import free_port
        >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        >>> td = TensorDict(x=torch.arange(3.0), tag="cfg", batch_size=[3])
        >>> out = TensorDict().broadcast(0) if dist.get_rank() else td.broadcast(0)
        >>> out["x"].tolist(), out["tag"]
        ([0.0, 1.0, 2.0], 'cfg')
        >>> dist.destroy_process_group()
    """
    me, _ = _member("broadcast", group)
    gsrc = global_rank(group, src, "broadcast", "src")
    dev, _ = comm_mode(group)
    op = "broadcast"
    if me == src:
        out = Outgoing(td, device=dev, tensorclass=_tensorclass)
        _blocking(op, group, dist.broadcast, out.stream[:HEADER_SIZE], gsrc)
        if out.stream.numel() > HEADER_SIZE:
            _blocking(op, group, dist.broadcast, out.stream[HEADER_SIZE:], gsrc)
        for seg in out.segments:
            _blocking(op, group, dist.broadcast, seg, gsrc)
        return td
    who = f"group rank {src}"
    head = torch.empty(HEADER_SIZE, dtype=torch.uint8, device=dev)
    _blocking(op, group, dist.broadcast, head, gsrc)
    flags, _, meta_len, total, n_seg = read_counts(tensor_bytes(head.cpu()), who)
    n = stream_length(flags, meta_len, total, n_seg)
    stream = torch.empty(n, dtype=torch.uint8, device=dev)
    copy_bytes(stream[:HEADER_SIZE], head)
    if n > HEADER_SIZE:
        _blocking(op, group, dist.broadcast, stream[HEADER_SIZE:], gsrc)
    header = parse_header(tensor_bytes(stream[: HEADER_SIZE + 8 * n_seg].cpu()), who)
    payload = stream[header.prefix_len : header.prefix_len + header.total]
    template = Template(td)
    if template.digest == header.digest and template.plain:
        if header.inline:
            template.fill_inline(payload)
        else:
            for buf in template.segment_buffers(header.segments, dev):
                _blocking(op, group, dist.broadcast, buf, gsrc)
            template.finish_segments()
        if header.flags & FLAG_VALUES:
            set_values(td, parse_meta(stream, header, who), who)
        return td
    meta = parse_meta(stream, header, who)
    if not header.inline:
        payload = torch.empty(header.total, dtype=torch.uint8, device=dev)
        start = 0
        for size in header.segments:
            _blocking(op, group, dist.broadcast, payload[start : start + size], gsrc)
            start += size
    result = build_from_payload(meta, payload, who)
    return result.to(device) if device is not None else result


# ---------------------------------------------------------------------- reductions
def _bool_op(op: Any) -> Any:
    """A reduction of ``bool`` leaves as ``uint8``: SUM/MAX are OR, PRODUCT/MIN are AND."""
    if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.BOR):
        return dist.ReduceOp.MAX
    if op in (dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.BAND):
        return dist.ReduceOp.MIN
    return op


def _buckets(leaves: list, bucket_bytes: int | None) -> list:
    """Consecutive leaves grouped into buckets of at most ``bucket_bytes`` bytes (a larger
    leaf is a bucket of its own); one bucket when ``bucket_bytes`` is ``None``."""
    if bucket_bytes is None:
        return [leaves]
    out: list = []
    current: list = []
    size = 0
    for leaf in leaves:
        n = leaf.numel() * leaf.element_size()
        if current and size + n > bucket_bytes:
            out.append(current)
            current, size = [], 0
        current.append(leaf)
        size += n
    if current:
        out.append(current)
    return out


def _check_bucket_bytes(op: str, bucket_bytes: Any) -> None:
    if bucket_bytes is not None and (
        not isinstance(bucket_bytes, int) or isinstance(bucket_bytes, bool) or bucket_bytes <= 0
    ):
        msg = f"{op}: bucket_bytes must be a positive int (bytes) or None, got {bucket_bytes!r}."
        raise ValueError(msg)


class _Buffers:
    """One flat buffer per dtype to reduce, and how to write the results back."""

    def __init__(self, td: Any, device: torch.device, bucket_bytes: int | None = None) -> None:
        self.td = td
        self.items: list = []  # (flat tensor given to the backend, dtype, leaves or None, staged slice or None)
        self.writeback = None
        template = Template(td)
        if not template.plain:  # a lazy stack: reduce a dense copy, then write it back
            dense = td.to_tensordict()
            self.writeback = dense
            template = Template(dense)
        self.template = template
        if template.storage is not None:  # consolidated: reduce its storage in place, per dtype run
            for dtype, start, nbytes, _ in template.plan.runs:
                if not nbytes:
                    continue
                step = nbytes
                if bucket_bytes is not None:  # whole elements per bucket, at least one
                    step = max(bucket_bytes // dtype.itemsize, 1) * dtype.itemsize
                for lo in range(start, start + nbytes, step):
                    slab = template.storage[lo : min(lo + step, start + nbytes)]
                    if slab.device != device:
                        self.items.append((slab.to(device).view(dtype), dtype, None, slab))
                    else:
                        self.items.append((slab.view(dtype), dtype, None, None))
            return
        groups: dict = {}
        for leaf in template.leaves:
            groups.setdefault(leaf.dtype, []).append(leaf)
        for dtype, leaves in groups.items():
            for bucket in _buckets(leaves, bucket_bytes):
                flat = _flatten_dense([t.detach() for t in bucket])
                if flat.device != device:
                    flat = flat.to(device)
                self.items.append((flat, dtype, bucket, None))

    def wire(self, flat: torch.Tensor, dtype: torch.dtype, op: Any) -> tuple[torch.Tensor, Any]:
        if dtype is torch.bool:
            return flat.view(torch.uint8), _bool_op(op)
        return flat, op

    def finish_one(self, index: int, divide_by: int | None) -> None:
        flat, dtype, leaves, staged = self.items[index]
        if divide_by is not None and dtype is not torch.bool:
            if flat.is_floating_point() or flat.is_complex():
                flat.div_(divide_by)
            else:
                flat.copy_(torch.div(flat, divide_by, rounding_mode="floor"))
        with torch.no_grad():
            if staged is not None:
                staged.copy_(flat.view(torch.uint8))
            elif leaves is not None:
                src = _unflatten_dense(flat.to(leaves[0].device) if flat.device != leaves[0].device else flat, leaves)
                _copy(leaves, list(src), 0, False)

    def finish_all(self) -> None:
        if self.writeback is not None:
            with torch.no_grad():
                self.td.update_(self.writeback)


def _avg_supported(group: Any) -> bool:
    return "nccl" in str(dist.get_backend(group)).lower()


def _reduce_impl(opname: str, td: Any, op: Any, group: Any, dst: int | None, async_op: bool,
                 bucket_bytes: int | None = None) -> Any:
    _check_bucket_bytes(opname, bucket_bytes)
    _, size = _member(opname, group)
    gdst = None if dst is None else global_rank(group, dst, opname, "dst")
    if op is None:
        op = dist.ReduceOp.SUM
    dev, _ = comm_mode(group)
    bufs = _Buffers(td, dev, bucket_bytes)
    _check_same_structure(opname, bufs.template, group, dev, size, by_numel=True)
    divide = None
    wire_op = op
    if op == dist.ReduceOp.AVG and not _avg_supported(group):
        wire_op, divide = dist.ReduceOp.SUM, size
    started = time.monotonic()
    works = []
    try:
        for flat, dtype, _, _ in bufs.items:
            tensor, real_op = bufs.wire(flat, dtype, wire_op)
            if gdst is None:
                works.append(dist.all_reduce(tensor, op=real_op, group=group, async_op=True))
            else:
                works.append(dist.reduce(tensor, gdst, op=real_op, group=group, async_op=True))
    except RuntimeError as err:
        raise comm_error(opname, err, _WHO, group, started) from err
    if async_op:
        futures = []
        last = len(works) - 1
        for i, work in enumerate(works):

            def done(fut: Any, i: int = i, is_last: bool = i == last) -> Any:
                fut.value()  # re-raises a backend error
                bufs.finish_one(i, divide)
                if is_last:
                    bufs.finish_all()
                return None

            futures.append(work.get_future().then(done))
        return futures
    wait_all(works, opname, _WHO, group, started)
    for i in range(len(works)):
        bufs.finish_one(i, divide)
    bufs.finish_all()
    return None


def all_reduce(td: Any, op: Any = None, *, group: Any = None, async_op: bool = False,
               bucket_bytes: int | None = None) -> Any:
    """Reduces every leaf over the ranks of the group, in place, on every rank.

    Every rank calls it with a TensorDict of the same structure. The leaves are
    reduced one flat buffer per dtype (the consolidated storage itself when the
    TensorDict is consolidated), so the number of backend calls does not grow with
    the number of leaves. ``bool`` leaves reduce as logical OR (``SUM``/``MAX``)
    or AND (``PRODUCT``/``MIN``). ``ReduceOp.AVG`` works on gloo too (sum, then
    divide). Non-tensor data is left as is.

    Args:
        op (torch.distributed.ReduceOp, optional): the reduction. Defaults to ``SUM``.

    Keyword Args:
        group (ProcessGroup, optional): the process group.
        async_op (bool): return a list of ``torch.futures.Future`` (one per dtype)
            at once; the results are written into the TensorDict when each completes.
            Defaults to ``False``.
        bucket_bytes (int, optional): reduce the leaves of each dtype in buckets of at
            most this many bytes (a larger leaf is a bucket of its own; a consolidated
            storage is cut into pieces of this size) instead of one buffer per dtype.
            Defaults to ``None`` (one buffer per dtype).

    Returns:
        ``None``, or the list of futures with ``async_op=True``.

    Raises:
        RuntimeError: the ranks' structures differ (the message names the keys,
            dtypes and shapes); a rank died or the process group timed out.

    Examples:
        >>> import torch
        >>> import torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> from tensordict.testing import free_port
        >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        >>> grads = TensorDict(w=torch.ones(2, 2), b=torch.ones(2), batch_size=[])
        >>> grads.all_reduce(dist.ReduceOp.AVG)
        >>> grads["w"].tolist()
        [[1.0, 1.0], [1.0, 1.0]]
        >>> dist.destroy_process_group()
    """
    return _reduce_impl("all_reduce", td, op, group, None, async_op, bucket_bytes)


def reduce(td: Any, dst: int, op: Any = None, async_op: bool = False, return_premature: bool = False,
           group: Any = None, *, bucket_bytes: int | None = None) -> Any:
    """Reduces every leaf over the ranks of the group into the TensorDict of rank ``dst``.

    As :meth:`all_reduce`, but only rank ``dst`` holds the result; on the other
    ranks the values afterwards are unspecified (gloo may leave partial sums).

    Args:
        dst (int): the rank that receives the result, in the group's own numbering.
        op (torch.distributed.ReduceOp, optional): the reduction. Defaults to ``SUM``.
        async_op (bool): run asynchronously. With ``return_premature=True`` the list
            of futures is returned at once; otherwise they are waited for here.
        return_premature (bool): see ``async_op``. Defaults to ``False``.
        group (ProcessGroup, optional): the process group.

    Keyword Args:
        bucket_bytes (int, optional): as in :meth:`all_reduce`.

    Returns:
        ``None``, or the list of futures with ``async_op=True, return_premature=True``.

    Raises:
        RuntimeError: the ranks' structures differ; a rank died or timed out.
        ValueError: ``dst`` is not a rank of the group.

    Examples:
        >>> import torch
        >>> import torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> from tensordict.testing import free_port
        >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        >>> td = TensorDict(x=torch.full((2,), 3.0), batch_size=[2])
        >>> td.reduce(0, dist.ReduceOp.MAX)
        >>> td["x"].tolist()
        [3.0, 3.0]
        >>> dist.destroy_process_group()
    """
    futures = _reduce_impl("reduce", td, op, group, dst, async_op, bucket_bytes)
    if async_op and not return_premature:
        for fut in futures:
            fut.wait()
        return None
    return futures


# ---------------------------------------------------------------------- gathers / scatter
def all_gather(td: Any, *, group: Any = None) -> list:
    """Returns the TensorDict of every rank of the group, on every rank.

    The TensorDicts may differ in structure. Each rank packs its TensorDict into one
    buffer (header, metadata, leaves); the buffers are exchanged in one
    ``all_gather`` (after one exchanging their sizes). The results are consolidated
    TensorDicts whose leaves are views into the received buffers (no further copy).

    Keyword Args:
        group (ProcessGroup, optional): the process group.

    Returns:
        a list with one TensorDict per rank, in the group's rank order (this rank's
        entry is a copy too).

    Raises:
        RuntimeError: a rank died or the process group timed out.
        TypeError: a leaf cannot be sent.

    Examples:
        >>> import torch
        >>> import torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> from tensordict.testing import free_port
        >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        >>> tds = TensorDict(x=torch.zeros(2), batch_size=[2]).all_gather()
        >>> len(tds), tds[0]["x"].tolist()
        (1, [0.0, 0.0])
        >>> dist.destroy_process_group()
    """
    op = "all_gather"
    _, size = _member(op, group)
    dev, _ = comm_mode(group)
    out = Outgoing(td, inline=True, device=dev)
    lens = _lengths(op, out.stream.numel(), group, dev, size)
    n = max(lens)
    bufs = [torch.empty(n, dtype=torch.uint8, device=dev) for _ in range(size)]
    _blocking(op, group, dist.all_gather, bufs, _padded(out.stream, n))
    return [_decode(b[:m], f"group rank {r}") for r, (b, m) in enumerate(zip(bufs, lens))]


def gather_and_stack(td: Any, dst: int, group: Any = None) -> Any:
    """Gathers the TensorDicts of all ranks on rank ``dst`` and stacks them.

    Every rank calls it. On ``dst``:

    - if its TensorDict has one row per *other* rank (``batch_size[0] == world_size - 1``
      and the others send ``batch_size[1:]``), the others' TensorDicts are written
      into it in place, in rank order, and it is returned;
    - otherwise every rank's TensorDict (its own included) is stacked along a new
      first dimension into a new TensorDict of batch size ``[world_size, *batch_size]``.

    Args:
        dst (int): the gathering rank, in the group's own numbering.
        group (ProcessGroup, optional): the process group.

    Returns:
        the stacked TensorDict on ``dst``, ``None`` on the other ranks.

    Raises:
        RuntimeError: the TensorDicts cannot be stacked (different keys/shapes); a
            rank died or the process group timed out.
        ValueError: ``dst`` is not a rank of the group.

    Examples:
        >>> import torch
        >>> import torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> from tensordict.testing import free_port
        >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        >>> stacked = TensorDict(x=torch.ones(3), batch_size=[3]).gather_and_stack(0)
        >>> stacked.batch_size  # [world_size, 3] on rank 0
        torch.Size([1, 3])
        >>> dist.destroy_process_group()
    """
    op = "gather_and_stack"
    me, size = _member(op, group)
    gdst = global_rank(group, dst, op, "dst")
    dev, _ = comm_mode(group)
    out = Outgoing(td, inline=True, device=dev)
    lens = _lengths(op, out.stream.numel(), group, dev, size)
    n = max(lens)
    mine = _padded(out.stream, n)
    if me != dst:
        _blocking(op, group, dist.gather, mine, None, dst=gdst)
        return None
    bufs = [torch.empty(n, dtype=torch.uint8, device=dev) for _ in range(size)]
    _blocking(op, group, dist.gather, mine, bufs, dst=gdst)
    tds = [_decode(b[:m], f"group rank {r}") for r, (b, m) in enumerate(zip(bufs, lens))]
    others = [t for r, t in enumerate(tds) if r != me]
    bs = td.batch_size
    if len(bs) >= 1 and bs[0] == size - 1 and all(t.batch_size == bs[1:] for t in others):
        with torch.no_grad():
            for i, t in enumerate(others):
                td[i] = t
        return td
    try:
        return torch.stack(tds, 0)
    except (RuntimeError, ValueError, KeyError) as err:
        msg = f"{op}: the TensorDicts gathered from the ranks cannot be stacked: {err}"
        raise RuntimeError(msg) from err


def scatter(td: Any, src: int, tensordicts: list | None = None, *, group: Any = None, device: Any = None) -> Any:
    """Sends one slice per rank from rank ``src``; each rank gets its own.

    On ``src``, ``tensordicts`` is a list with one TensorDict per rank; if it is not
    given, the TensorDict itself is split along its first dimension, which must be
    the group size. Each piece is packed into one buffer; the buffers go out in one
    ``scatter`` (after a broadcast of their size). On a receiving rank whose
    TensorDict has the same keys, dtypes and shapes as its piece, the piece is
    written into it in place and it is returned.

    Args:
        src (int): the scattering rank, in the group's own numbering.
        tensordicts (list of TensorDictBase, optional): on ``src``, one TensorDict per rank.

    Keyword Args:
        group (ProcessGroup, optional): the process group.
        device (torch.device, optional): the device of a newly built result.

    Returns:
        this rank's piece.

    Raises:
        ValueError: on ``src``, the pieces do not number the group size.
        RuntimeError: a rank died or the process group timed out.

    Examples:
        >>> import torch
        >>> import torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> from tensordict.testing import free_port
        >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        >>> batch = TensorDict(x=torch.arange(4.0).view(1, 4), batch_size=[1, 4])  # one row per rank
        >>> batch.scatter(0)["x"].tolist()
        [0.0, 1.0, 2.0, 3.0]
        >>> dist.destroy_process_group()
    """
    op = "scatter"
    me, size = _member(op, group)
    gsrc = global_rank(group, src, op, "src")
    dev, _ = comm_mode(group)
    if me == src:
        pieces = list(tensordicts) if tensordicts is not None else None
        if pieces is None:
            if td.batch_dims < 1 or td.batch_size[0] != size:
                msg = (
                    f"{op}: rank {src} must pass `tensordicts` (one per rank) or hold a TensorDict whose first "
                    f"batch dimension is the group size {size}; got batch_size {tuple(td.batch_size)}."
                )
                raise ValueError(msg)
            pieces = list(td.unbind(0))
        if len(pieces) != size:
            msg = f"{op}: expected one TensorDict per rank ({size}), got {len(pieces)}."
            raise ValueError(msg)
        outs = [Outgoing(p, inline=True, device=dev) for p in pieces]
        n = max(o.stream.numel() for o in outs)
        length = torch.tensor([n], dtype=torch.int64, device=dev)
        _blocking(op, group, dist.broadcast, length, gsrc)
        recv_buf = torch.empty(n, dtype=torch.uint8, device=dev)
        _blocking(op, group, dist.scatter, recv_buf, [_padded(o.stream, n) for o in outs], src=gsrc)
    else:
        length = torch.empty(1, dtype=torch.int64, device=dev)
        _blocking(op, group, dist.broadcast, length, gsrc)
        recv_buf = torch.empty(int(length.item()), dtype=torch.uint8, device=dev)
        _blocking(op, group, dist.scatter, recv_buf, None, src=gsrc)
    piece = _decode(recv_buf, f"group rank {src}")
    if me != src and not td.is_empty():
        if structure_of(td) == structure_of(piece):
            with torch.no_grad():
                td.update_(piece)
            return td
    return piece.to(device) if device is not None else piece
