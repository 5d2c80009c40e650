"""Point-to-point transfers: ``send``/``recv``, ``isend``/``irecv``, ``init_remote``/``from_remote_init``.

A transfer (format in :mod:`tensordict.distributed._wire`) is a *stream* (header,
segment table, JSON metadata and, for payloads up to ``INLINE_MAX``, the payload
itself) followed by the payload *segments* of a larger TensorDict. Messages:

- slot 0: the start of the stream. With gloo it carries up to :data:`FIRST_CAP`
  bytes, so a TensorDict of many small leaves is **one message**: the receiver
  posts a receive of ``FIRST_CAP`` bytes (gloo accepts a message smaller than the
  buffer, never a larger one, and the sender never sends more). With nccl and the
  other backends, which need exact sizes, slot 0 is the 64-byte header alone;
- slot 1: the rest of the stream, if any;
- slot ``2 + j``: payload segment ``j``.

The sender posts every message at once. The receiver posts slot 0 first, inspects
its template while the data arrives, reads the header and compares the structure
digest with its template's; only then does it post the other receives, sized from
the header: a mismatch can never overflow a buffer. On a mismatch it still takes in
the whole transfer (the sender finishes cleanly), then raises an error listing the
keys, dtypes and shapes that differ, and leaves the template untouched.

``dst``/``src`` are global ranks, as in ``torch.distributed.send``/``recv``;
``group_dst``/``group_src`` take a rank in ``group``'s own numbering.
"""

from __future__ import annotations

import contextvars
import ctypes
import struct
import threading
import time
import zlib
from typing import Any

import torch
import torch.distributed as dist

from tensordict import TensorDict
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
from tensordict.distributed._fastpath import COUNTS, fast_send
from tensordict.distributed._integrity import (
    FLAG_CHECKED,
    FLAG_TAILS,
    NONCE_LEN,
    arm_segments,
    crc_chain,
    crc_of,
    integrity_mode,
    nonce_ok,
    read_crcs,
    segments_ok,
)
from tensordict.distributed._lazy_view import lazy_layout, plain_view
from tensordict.distributed._pickling import pickle_allowed, with_allow_pickle
from tensordict.distributed._transport import (
    check_initialized,
    check_peer_args,
    comm_error,
    comm_mode,
    default_gloo,
    my_rank,
    p2p_irecv,
    p2p_isend,
    resolve_peer,
    tag_sequence,
    wait_all,
)
from tensordict.distributed._wire import (
    FLAG_VALUES,
    HEADER_SIZE,
    Outgoing,
    Template,
    WireError,
    copy_bytes,
    snapshot,
)

__all__ = ["send", "recv", "isend", "irecv", "init_remote", "from_remote_init", "FIRST_CAP"]

#: bytes of the stream that the first message carries with gloo (receive-buffer capacity)
FIRST_CAP = 1 << 20


# ---------------------------------------------------------------------- sending
def _post_sends(op: str, td: Any, gdst: int, group: Any, init_tag: int, pseudo_rand: bool,
                reuse: bool = False, tensorclass: str | None = None, describe_lazy: bool = False) -> tuple[list, int, float]:
    device, exact = comm_mode(group)
    check = None if exact else integrity_mode()
    lazy = lazy_layout(td) if describe_lazy else None
    out = Outgoing(plain_view(td), device=device, reuse=reuse, tensorclass=tensorclass, check=check, lazy=lazy)
    tag = tag_sequence(init_tag, pseudo_rand)
    stream = out.stream
    first_len = HEADER_SIZE if exact else min(stream.numel(), FIRST_CAP)
    msgs = [(stream[:first_len], 0)]
    if stream.numel() > first_len:
        msgs.append((stream[first_len:], 1))
    msgs.extend((seg, 2 + j) for j, seg in enumerate(out.segments))
    started = time.monotonic()
    works = []
    try:
        for t, slot in msgs:
            works.append(p2p_isend(t, gdst, group, tag(slot)))
    except RuntimeError as err:
        raise comm_error(op, err, f"rank {gdst}", group, started) from err
    return works, init_tag + 2 + len(out.segments), started


def _check_not_self(op: str, peer: int, name: str, group: Any = None) -> None:
    if peer == my_rank(group):
        msg = f"{op}: {name}={peer} is this process's own rank; a TensorDict cannot be sent to itself."
        raise ValueError(msg)


@with_allow_pickle
def send(td: Any, dst: int | None = None, *, group: Any = None, group_dst: int | None = None,
         init_tag: int = 0, pseudo_rand: bool = False, consolidated: bool = False) -> None:
    """Sends the TensorDict to rank ``dst``, which receives it with :meth:`recv` (or :meth:`irecv`).

    The leaves travel in as few messages as the data allows: the small leaves,
    the keys and the non-tensor data (JSON values) are packed into one buffer with
    a small header carrying a checksum of the structure; each leaf of 1 MiB or more
    is one more message, sent straight from its tensor. The cost does not grow with
    the number of small leaves. The call returns once every message is handed over.

    Args:
        dst (int): the global rank of the receiver (as in
            ``torch.distributed.send``). Exclusive with ``group_dst``.

    Keyword Args:
        group (ProcessGroup, optional): the process group. Defaults to the default group.
        group_dst (int, optional): the receiver's rank in ``group``'s own numbering.
        init_tag (int): tag of the first message; the transfer uses the tags
            ``init_tag .. init_tag + 1 + n_big``. The receiver must pass the same.
            Defaults to ``0``.
        pseudo_rand (bool): draw the tags from a generator seeded by ``init_tag``
            (the receiver must pass the same). Defaults to ``False``.
        consolidated (bool): send the TensorDict's consolidated storage as one
            message (the TensorDict is consolidated first if it is not); the
            receiver passes ``consolidated=True`` to :meth:`recv` with a consolidated
            template (e.g. from :meth:`from_remote_init`). Defaults to ``False``.

    Raises:
        RuntimeError: torch.distributed is not initialized; the transfer failed
            (the receiver died, or did not post the matching receive within the
            process group's timeout).
        ValueError: ``dst`` is not a valid rank, or is this process's rank.
        TypeError: a leaf is sparse/nested, or a non-tensor value is not JSON-serializable.

    Examples:
        Two processes of one job (``torchrun --nproc_per_node=2 script.py``)::

            import torch
            import torch.distributed as dist
            from tensordict import TensorDict

            dist.init_process_group("gloo")
            td = TensorDict(obs=torch.zeros(4, 3), info="", batch_size=[4])
            if dist.get_rank() == 0:
                td["obs"] += 1
                td["info"] = "step 1"
                td.send(1)
            else:
                td.recv(0)  # td["obs"] is all ones, td["info"] == "step 1"
    """
    if group is None and group_dst is None and fast_send("send", td, dst, init_tag, pseudo_rand):
        return
    check_peer_args("send", dst, group, group_dst, "dst")
    check_initialized("send", group)
    gdst, _ = resolve_peer("send", dst, group, group_dst, "dst")
    _check_not_self("send", gdst, "dst", group)
    if consolidated:
        td = _as_consolidated(td)
    # the call waits for its messages: a consolidated TensorDict may reuse its send buffer
    works, _, started = _post_sends("send", td, gdst, group, init_tag, pseudo_rand, reuse=True)
    wait_all(works, "send", f"rank {gdst}", group, started)


@with_allow_pickle
def isend(td: Any, dst: int | None = None, *, group: Any = None, group_dst: int | None = None,
          init_tag: int = 0, pseudo_rand: bool = False, return_early: bool = False,
          consolidated: bool = False) -> int | list:
    """Sends the TensorDict asynchronously: every message is posted at once.

    Same transfer as :meth:`send` (the receiver calls :meth:`recv` or :meth:`irecv`).

    Args:
        dst (int): the global rank of the receiver. Exclusive with ``group_dst``.

    Keyword Args:
        group, group_dst, init_tag, pseudo_rand, consolidated: as in :meth:`send`.
        return_early (bool): return the list of ``torch.distributed.Work`` objects
            at once; call ``wait()`` on each before modifying the TensorDict.
            Defaults to ``False`` (wait here).

    Returns:
        the list of works with ``return_early=True``; otherwise the next free tag
        (``init_tag`` plus the number of tag slots this transfer used).

    Raises:
        RuntimeError, ValueError, TypeError: as in :meth:`send`.

    Examples:
        Two processes of one job::

            if dist.get_rank() == 0:
                works = td.isend(1, return_early=True)
                ...                              # overlap other work, but leave td alone
                for w in works:
                    w.wait()
            else:
                futures = td.irecv(0, return_premature=True)
                ...                              # do not read td yet
                for f in futures:
                    f.wait()
    """
    if (
        not return_early and group is None and group_dst is None
        and fast_send("isend", td, dst, init_tag, pseudo_rand)
    ):
        return init_tag + 2
    check_peer_args("isend", dst, group, group_dst, "dst")
    check_initialized("isend", group)
    gdst, _ = resolve_peer("isend", dst, group, group_dst, "dst")
    if consolidated:
        td = _as_consolidated(td)
    _check_not_self("isend", gdst, "dst", group)
    works, next_tag, started = _post_sends("isend", td, gdst, group, init_tag, pseudo_rand)
    if return_early:
        return works
    wait_all(works, "isend", f"rank {gdst}", group, started)
    return next_tag


@with_allow_pickle
def init_remote(td: Any, dst: int | None = None, group: Any = None, device: Any = None, *,
                group_dst: int | None = None, init_tag: int = 0, pseudo_rand: bool = False,
                use_broadcast: bool = False, tensorclass: str | None = None) -> None:
    """Sends the TensorDict to a rank that has no template: it calls :meth:`from_remote_init`.

    The metadata goes first (length-prefixed JSON in a ``uint8`` buffer: keys,
    nesting, batch sizes, dim names, dtypes, shapes and non-tensor values), then
    the content, in the messages described in :meth:`send`. The receiver builds a
    consolidated TensorDict and can then receive further batches into it with
    :meth:`recv`.

    Args:
        dst (int): the global rank of the receiver. Exclusive with ``group_dst``.
        group (ProcessGroup, optional): the process group.
        device (torch.device, optional): accepted for API compatibility; the
            buffers live where the backend needs them (CPU for gloo, the current
            CUDA device for nccl).

    Keyword Args:
        group_dst, init_tag, pseudo_rand: as in :meth:`send`.
        use_broadcast (bool): send to every other rank of ``group`` at once with
            broadcasts (``dst`` is then not needed); each receiver calls
            ``from_remote_init(src=<this rank>, use_broadcast=True)``. Defaults to ``False``.
        tensorclass (str, optional): the registered name of the tensorclass the
            TensorDict holds the fields of (``tensordict.tensorclass.tensorclass_name``);
            the receiver rebuilds an instance of it if that class is registered there
            (it is looked up, never imported). A tensorclass's own ``init_remote``
            passes it. Defaults to ``None``.

    Raises:
        RuntimeError, ValueError, TypeError: as in :meth:`send`.

    Examples:
        Two processes of one job; rank 1 knows nothing of the structure::

            if dist.get_rank() == 0:
                batch = TensorDict(obs=torch.randn(32, 8), step=3, batch_size=[32])
                batch.init_remote(1)
                for _ in range(10):
                    batch["obs"].normal_()
                    batch.send(1)
            else:
                batch = TensorDict.from_remote_init(0)   # consolidated, batch_size [32]
                for _ in range(10):
                    batch.recv(0)                        # straight into its one storage
    """
    if use_broadcast:
        from tensordict.distributed._collectives import broadcast

        check_initialized("init_remote", group)
        broadcast(td, dist.get_rank(group) if group is not None else dist.get_rank(), group=group,
                  _tensorclass=tensorclass, allow_pickle=pickle_allowed())
        return
    check_peer_args("init_remote", dst, group, group_dst, "dst")
    check_initialized("init_remote", group)
    gdst, _ = resolve_peer("init_remote", dst, group, group_dst, "dst")
    _check_not_self("init_remote", gdst, "dst", group)
    works, _, started = _post_sends("init_remote", td, gdst, group, init_tag, pseudo_rand, tensorclass=tensorclass,
                                    describe_lazy=True)
    wait_all(works, "init_remote", f"rank {gdst}", group, started)


# ---------------------------------------------------------------------- receiving
_LOCAL = threading.local()
_GLOO_MODE = (torch.device("cpu"), False)
_CRC_AT = 48  # the header's (checksum, nonce) pair
_U32 = struct.Struct("<I")
_NONCE_PAIR = struct.Struct("<II")


def _scratch(cap: int) -> tuple[bytearray, torch.Tensor]:
    """This thread's reusable first-message buffer (CPU), readable as bytes without torch ops."""
    cached = getattr(_LOCAL, "scratch", None)
    if cached is None or len(cached[0]) != cap:
        raw = bytearray(cap)
        cached = (raw, torch.frombuffer(raw, dtype=torch.uint8))
        _LOCAL.scratch = cached
    return cached


class _Incoming:
    """A transfer being received: the first receive is posted on construction."""

    def __init__(self, op: str, gsrc: int, group: Any, tag: Any, mode: tuple | None = None, pg: Any = None) -> None:
        self.op, self.gsrc, self.group, self.tag = op, gsrc, group, tag
        self.pg = pg  # the default gloo group itself (fast path): receives go straight to it
        self.who = f"rank {gsrc}"
        self.device, self.exact = comm_mode(group) if mode is None else mode
        self.waited = False
        self.started = time.monotonic()
        # post the first receive at once: the caller prepares its template while it arrives
        self.cap = HEADER_SIZE if self.exact else FIRST_CAP
        if self.device.type == "cpu" and not self.exact:
            self.raw, self.first = _scratch(self.cap)
            # a message that stops early must never be read as the previous one: clear every
            # byte the previous message left (a crc-checked stream has no per-transfer nonce,
            # so a truncated copy of the same bytes would pass its checksum)
            ctypes.memset(self.first.data_ptr(), 0, min(max(getattr(_LOCAL, "used", 0), HEADER_SIZE), self.cap))
            _LOCAL.used = self.cap  # until this message is measured: a failure clears it all next time
        else:
            self.raw, self.first = None, torch.empty(self.cap, dtype=torch.uint8, device=self.device)  # type: ignore[assignment]
        self.first_work = self._irecv(self.first, 0)

    def read_prefix(self) -> None:
        """Waits for the first message; receives the rest of the prefix if needed."""
        first, cap, raw = self.first, self.cap, self.raw
        if not self.waited:
            self._wait([self.first_work])
        head = raw if raw is not None else tensor_bytes(first[:HEADER_SIZE].cpu())
        flags, _, meta_len, total, n_seg = read_counts(head, self.who)  # type: ignore[arg-type]
        n = stream_length(flags, meta_len, total, n_seg)
        if raw is not None:
            _LOCAL.used = min(n, cap)
        self.scratch = raw is not None and n <= cap
        if n <= cap:
            self.stream = first[:n]
        else:
            self.raw = raw = None  # type: ignore[assignment]
            self.stream = torch.empty(n, dtype=torch.uint8, device=self.device)
            copy_bytes(self.stream[:cap], first)
            self._wait([self._irecv(self.stream[cap:], 1)])
        if not self.exact:
            # gloo may deliver fewer bytes than posted: check the stream is the one announced
            self._check_stream(flags, n, meta_len, n_seg)
        table_end = HEADER_SIZE + 8 * n_seg
        self.header = parse_header(
            raw[:table_end] if raw is not None else tensor_bytes(self.stream[:table_end].cpu()), self.who  # type: ignore[arg-type]
        )

    def _check_stream(self, flags: int, n: int, meta_len: int, n_seg: int) -> None:
        head = self.raw[:HEADER_SIZE] if self.raw is not None else tensor_bytes(self.stream[:HEADER_SIZE].cpu())
        self.tails = None
        if flags & FLAG_TAILS:
            crc_prefix, nonce = read_crcs(head)  # type: ignore[arg-type]
            start = n - NONCE_LEN - 8 * n_seg
            prefix_len = stream_length(0, meta_len, 0, n_seg)
            if self.raw is not None:
                tail_raw = bytes(self.raw[start:n])
                prefix_crc = zlib.crc32(memoryview(self.raw)[HEADER_SIZE:prefix_len])
            else:
                tail_raw = tensor_bytes(self.stream[start:n].cpu())
                prefix_crc = crc_of(self.stream[HEADER_SIZE:prefix_len])
            if not nonce_ok(tail_raw[-NONCE_LEN:], nonce) or prefix_crc != crc_prefix:
                msg = (
                    f"{self.op}: the message from {self.who} is incomplete or corrupted (its {n}-byte stream does "
                    "not end with the nonce its header announces, or its metadata does not match the header's "
                    "checksum); nothing was used."
                )
                raise WireError(msg)
            self.tails = tail_raw[: 8 * n_seg]
            return
        if not flags & FLAG_CHECKED:
            msg = (
                f"{self.op}: the message from {self.who} carries no completeness check; this process only "
                "accepts checked transfers over a backend that may deliver short messages (gloo). Both sides "
                "must run the same tensordict version."
            )
            raise WireError(msg)
        self.crc_stream, self.crc_segments = read_crcs(head)  # type: ignore[arg-type]
        if crc_of(self.stream[HEADER_SIZE:n]) != self.crc_stream:
            msg = (
                f"{self.op}: the message from {self.who} is incomplete or corrupted (its {n}-byte stream does "
                "not match the checksum in its header); nothing was used."
            )
            raise WireError(msg)

    def try_fast(self, template: Template) -> bool:
        """Takes the one-message form sent for the template's own structure (``_fastpath``).

        Over gloo, a sender with the same structure (and the same batch sizes, devices,
        names and integrity mode) sends a prefix that equals, byte for byte, the one the
        template's plan implies, except the checksum and nonce at ``48:56``. Comparing
        the bytes replaces parsing them; the trailer must hold this transfer's nonce (a
        message that stopped early leaves older bytes there). Then the payload is copied
        into the template. Returns ``False`` (the first message received, nothing
        written) when the message is anything else: the general path takes it from there.
        """
        raw = self.raw
        if raw is None or not template.plain:
            return False
        plan = template.plan
        expected = plan.expected_prefix()
        if expected is None:
            return False
        p = len(expected)
        n = p + plan.total + NONCE_LEN
        if n > self.cap:
            return False
        self._wait([self.first_work])
        self.waited = True
        head, body = plan.expected_parts()
        if raw[:_CRC_AT] != head or raw[HEADER_SIZE:p] != body:
            return False
        nonce = _U32.unpack_from(raw, _CRC_AT + 4)[0]
        if raw[n - NONCE_LEN : n] != _NONCE_PAIR.pack(nonce, nonce ^ 0xFFFFFFFF):
            return False  # incomplete: the general path reports it
        template.fill_inline(self.first[p : n - NONCE_LEN], (self.first, p))
        _LOCAL.used = n
        COUNTS[1] += 1
        return True

    def arm_segments(self, bufs: list) -> None:
        """Before posting the segment receives (``TAILS``): marks each segment's last bytes."""
        if not self.exact and self.tails is not None:
            arm_segments(bufs, self.tails)

    def check_segments(self, bufs: list, written: str) -> None:
        """Checks the received segments against the header's checksum or the trailer (gloo)."""
        if self.exact:
            return
        ok = segments_ok(bufs, self.tails) if self.tails is not None else crc_chain(bufs) == self.crc_segments
        if not ok:
            msg = (
                f"{self.op}: the payload from {self.who} is incomplete or corrupted (its segments do not "
                f"match the checksum in its header); {written}."
            )
            raise WireError(msg)

    def meta(self) -> dict:
        return parse_meta(self.stream, self.header, self.who, self.raw)

    def _irecv(self, buf: torch.Tensor, slot: int) -> Any:
        try:
            if self.pg is not None:
                return self.pg.recv([buf], self.gsrc, self.tag(slot))
            return p2p_irecv(buf, self.gsrc, self.group, self.tag(slot))
        except RuntimeError as err:
            raise comm_error(self.op, err, self.who, self.group, self.started) from err

    def _wait(self, works: list) -> None:
        try:
            wait_all(works, self.op, self.who, self.group, self.started)
        except BaseException:
            _LOCAL.scratch = None  # the backend may still hold the buffer: never reuse it
            raise

    @property
    def slots_used(self) -> int:
        return 2 + len(self.header.segments)

    def _payload(self) -> torch.Tensor:
        h = self.header
        return self.stream[h.prefix_len : h.prefix_len + h.total]

    def into_template(self, template: Template) -> None:
        """Receives the payload straight into the template (the digests match)."""
        header = self.header
        if header.inline:
            template.fill_inline(self._payload(), (self.first, header.prefix_len) if self.scratch else None)
        else:
            bufs = template.segment_buffers(header.segments, self.device)
            self.arm_segments(bufs)
            self._wait([self._irecv(b, 2 + j) for j, b in enumerate(bufs)])
            self.check_segments(bufs, "the receiving TensorDict's values are undefined")
            template.finish_segments()
        if header.flags & FLAG_VALUES:
            set_values(template.td, self.meta(), self.who)

    def into_new(self) -> Any:
        """Receives the payload into a new consolidated TensorDict (one storage)."""
        header = self.header
        meta = self.meta()
        if header.inline:
            storage = self._payload()
            if self.scratch:  # do not keep the whole receive buffer alive
                copy = torch.empty_like(storage)
                copy_bytes(copy, storage)
                storage = copy
        else:
            storage = torch.empty(header.total, dtype=torch.uint8, device=self.device)
            bufs, start = [], 0
            for size in header.segments:
                bufs.append(storage[start : start + size])
                start += size
            self.arm_segments(bufs)
            self._wait([self._irecv(b, 2 + j) for j, b in enumerate(bufs)])
            self.check_segments(bufs, "nothing was used")
        return build_from_payload(meta, storage, self.who)


def _as_consolidated(td: Any) -> Any:
    """``td`` if consolidated, else its consolidated copy (one storage: one message)."""
    if td.is_consolidated():
        return td
    return td.consolidate()


def _recv(op: str, td: Any, src: int | None, group: Any, group_src: int | None, init_tag: int,
          pseudo_rand: bool) -> int:
    info = default_gloo() if group is None and group_src is None else None
    mode: tuple | None
    if info is not None and src.__class__ is int and 0 <= src < info[2] and src != info[1]:
        gsrc, mode, pg = src, _GLOO_MODE, info[0]  # the default gloo group, a valid peer: nothing to resolve
    else:
        check_initialized(op, group)
        gsrc, _ = resolve_peer(op, src, group, group_src, "src")
        _check_not_self(op, gsrc, "src", group)
        mode = pg = None
    tag = tag_sequence(init_tag, pseudo_rand)
    incoming = _Incoming(op, gsrc, group, tag, mode, pg)
    original = td
    snap = snapshot(td)  # a TensorDict received into (or sent) before, unchanged since
    if snap is not None:
        template = Template(td, snap.result)
    else:
        td = plain_view(td)
        template = Template(td)
    if incoming.try_fast(template):
        return init_tag + 2
    incoming.read_prefix()
    expected = template.plan.total
    if incoming.header.digest == template.digest and template.plain:
        if incoming.header.total != expected:
            msg = (
                f"{op}: {incoming.who} announced a {incoming.header.total}-byte payload for a structure whose "
                f"layout takes {expected} bytes; nothing was received."
            )
            raise WireError(msg)
        incoming.into_template(template)
        return init_tag + incoming.slots_used
    if incoming.header.total > max(2 * expected, 1 << 20):
        # a template bounds what may be allocated: a same-structure sender sends as many bytes
        msg = (
            f"{op}: {incoming.who} announced a {incoming.header.total}-byte payload; the receiving "
            f"TensorDict takes {expected} bytes, so the structures differ. Nothing was received "
            "(receive without a template with TensorDict.from_remote_init())."
        )
        raise RuntimeError(msg)
    received = incoming.into_new()
    theirs = structure_of(received)
    mine = structure_of(td)
    targets = [(td, mine)]
    if original is not td:  # a lazy stack: a dense sender's leaves may match its stacked view
        try:
            targets.append((original, structure_of(original)))
        except RuntimeError:  # members of different shapes cannot be read stacked
            pass
    for target, structure in targets:
        if structure == theirs:  # same keys, dtypes and shapes (in another order, or into a lazy stack)
            with torch.no_grad():
                target.update_(received)
            return init_tag + incoming.slots_used
    diff = describe_differences(mine, theirs, "the receiver", f"the sender ({incoming.who})")
    msg = (
        f"{op}: the TensorDict sent by {incoming.who} does not match the structure of the receiving "
        f"TensorDict (nothing was written). Differences:\n{diff}\nGive the receiver a TensorDict with the "
        "same keys, dtypes and shapes, or receive without a template with TensorDict.from_remote_init()."
    )
    raise RuntimeError(msg)


@with_allow_pickle
def recv(td: Any, src: int | None = None, *, group: Any = None, group_src: int | None = None,
         init_tag: int = 0, pseudo_rand: bool = False, consolidated: bool = False) -> int:
    """Receives what :meth:`send`/:meth:`isend` sends into this TensorDict, in place.

    The TensorDict is the template: the sender's TensorDict must have the same
    keys, dtypes and shapes (key order may differ). Small leaves arrive in one
    buffer and are copied into place; big leaves (1 MiB or more) are received
    straight into the leaf when it is contiguous. Non-tensor data is replaced by
    the sender's values.

    Args:
        src (int): the global rank of the sender. Exclusive with ``group_src``.

    Keyword Args:
        group (ProcessGroup, optional): the process group.
        group_src (int, optional): the sender's rank in ``group``'s own numbering.
        init_tag (int): the ``init_tag`` the sender passed. Defaults to ``0``.
        pseudo_rand (bool): the ``pseudo_rand`` the sender passed. Defaults to ``False``.
        consolidated (bool): the sender passed ``consolidated=True``. A consolidated
            TensorDict (:meth:`consolidate`, :meth:`from_remote_init`) receives the
            payload straight into its storage (one message) with or without the flag;
            any other receives it leaf by leaf. Defaults to ``False``.

    Returns:
        the next free tag (``init_tag`` plus the number of tag slots used).

    Raises:
        RuntimeError: the sender's structure differs (the message lists the keys,
            dtypes and shapes that differ; nothing is written); the transfer failed
            (the sender died, or nothing arrived within the process group's timeout);
            torch.distributed is not initialized.
        ValueError: ``src`` is not a valid rank, or the message is malformed.

    Examples:
        Two processes of one job (``torchrun --nproc_per_node=2 script.py``)::

            import torch
            import torch.distributed as dist
            from tensordict import TensorDict

            dist.init_process_group("gloo")
            td = TensorDict(obs=torch.zeros(4, 3), info="", batch_size=[4])
            if dist.get_rank() == 0:
                td["obs"] += 1
                td["info"] = "step 1"
                td.send(1)
            else:
                td.recv(0)  # td["obs"] is all ones, td["info"] == "step 1"
    """
    check_peer_args("recv", src, group, group_src, "src")
    del consolidated  # a consolidated template receives into its storage either way
    return _recv("recv", td, src, group, group_src, init_tag, pseudo_rand)


@with_allow_pickle
def irecv(td: Any, src: int | None = None, *, group: Any = None, group_src: int | None = None,
          return_premature: bool = False, init_tag: int = 0, pseudo_rand: bool = False,
          consolidated: bool = False) -> Any:
    """Receives asynchronously what :meth:`send`/:meth:`isend` sends into this TensorDict.

    The transfer (see :meth:`recv`) runs in a background thread; its blocking waits
    are bounded by the process group's timeout.

    Args:
        src (int): the global rank of the sender. Exclusive with ``group_src``.

    Keyword Args:
        group, group_src, init_tag, pseudo_rand, consolidated: as in :meth:`recv`.
        return_premature (bool): return ``[future]`` at once (a
            ``torch.futures.Future`` whose ``wait()`` returns the next tag or raises
            the transfer's error); do not read the TensorDict before it completes.
            Defaults to ``False`` (wait here and return the next tag).

    Returns:
        ``[future]`` with ``return_premature=True``, else the next free tag.

    Raises:
        RuntimeError, ValueError: as in :meth:`recv` (from ``future.wait()`` with
            ``return_premature=True``).

    Examples:
        Two processes of one job::

            if dist.get_rank() == 0:
                works = td.isend(1, return_early=True)
                ...                              # overlap other work, but leave td alone
                for w in works:
                    w.wait()
            else:
                futures = td.irecv(0, return_premature=True)
                ...                              # do not read td yet
                for f in futures:
                    f.wait()
    """
    check_peer_args("irecv", src, group, group_src, "src")
    del consolidated  # as in recv
    check_initialized("irecv", group)
    resolve_peer("irecv", src, group, group_src, "src")  # argument errors surface here, not in the thread
    future: Any = torch.futures.Future()

    def job() -> None:
        try:
            result = _recv("irecv", td, src, group, group_src, init_tag, pseudo_rand)
        except BaseException as err:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(err)
        else:
            future.set_result(result)

    # the thread runs in a copy of this context: it sees the allow_pickle policy of the call
    ctx = contextvars.copy_context()
    threading.Thread(target=ctx.run, args=(job,), name="tensordict-irecv", daemon=True).start()
    if return_premature:
        return [future]
    return future.wait()


@with_allow_pickle
def from_remote_init(cls: Any, src: int | None = None, group: Any = None, device: Any = None, *,
                     group_src: int | None = None, init_tag: int = 0, pseudo_rand: bool = False,
                     use_broadcast: bool = False) -> Any:
    """Receives a TensorDict that :meth:`init_remote` sends, without a template.

    The metadata arrives first (checked, JSON, never unpickled), then the content.
    The result is consolidated: all its leaves are views into one storage, so it
    can be reused as the template of the next :meth:`recv` and moved to a device
    in one copy.

    Args:
        src (int): the global rank of the sender. Exclusive with ``group_src``.
        group (ProcessGroup, optional): the process group.
        device (torch.device, optional): the device of the result. Defaults to
            ``None``: where the backend received it (CPU with gloo).

    Keyword Args:
        group_src, init_tag, pseudo_rand: as in :meth:`recv`.
        use_broadcast (bool): the sender called ``init_remote(use_broadcast=True)``:
            receive its broadcast (``src`` is the sender's rank in ``group``).
            Defaults to ``False``.

    Returns:
        a new ``TensorDict`` with the sender's keys, batch sizes, dim names, dtypes,
        shapes, values and non-tensor data.

    Raises:
        RuntimeError: the transfer failed (sender died, timeout); not initialized.
        ValueError: ``src`` is invalid, or the message is malformed.

    Examples:
        Two processes of one job; rank 1 knows nothing of the structure::

            if dist.get_rank() == 0:
                batch = TensorDict(obs=torch.randn(32, 8), step=3, batch_size=[32])
                batch.init_remote(1)
                for _ in range(10):
                    batch["obs"].normal_()
                    batch.send(1)
            else:
                batch = TensorDict.from_remote_init(0)   # consolidated, batch_size [32]
                for _ in range(10):
                    batch.recv(0)                        # straight into its one storage
    """
    if use_broadcast:
        from tensordict.distributed._collectives import broadcast

        check_initialized("from_remote_init", group)
        root = src if src is not None else group_src
        if root is None:
            msg = "from_remote_init(use_broadcast=True): pass src, the rank that calls init_remote."
            raise ValueError(msg)
        td = broadcast(TensorDict(), root, group=group, allow_pickle=pickle_allowed())
        return td.to(device) if device is not None else td
    check_peer_args("from_remote_init", src, group, group_src, "src")
    check_initialized("from_remote_init", group)
    gsrc, _ = resolve_peer("from_remote_init", src, group, group_src, "src")
    _check_not_self("from_remote_init", gsrc, "src", group)
    tag = tag_sequence(init_tag, pseudo_rand)
    incoming = _Incoming("from_remote_init", gsrc, group, tag)
    incoming.read_prefix()
    td = incoming.into_new()
    if device is not None:
        td = td.to(device)
    return td
