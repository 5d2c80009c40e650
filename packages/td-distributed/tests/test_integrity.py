"""Received messages are checked complete before use, allocations are capped
(crafted messages between real gloo ranks, bounded by timeouts)."""

from __future__ import annotations

import struct

import pytest
import torch
import torch.distributed as dist
from _dist_harness import run_ranks

from tensordict import TensorDict
from tensordict.distributed import WireError, max_message_bytes, set_max_message_bytes
from tensordict.distributed._integrity import (
    NONCE_LEN,
    crc_chain,
    crc_of,
    integrity_mode,
    set_integrity_mode,
)
from tensordict.distributed._wire import HEADER, HEADER_SIZE, MAGIC, VERSION, Outgoing


def _td(value: float) -> TensorDict:
    return TensorDict(a=torch.full((4, 3), value), b=torch.full((4,), value, dtype=torch.float64), batch_size=[4])


def _error(fn) -> str:
    try:
        fn()
    except (WireError, RuntimeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return "no error"


def truncated_job(rank: int, world: int, mode: str) -> dict:
    """1: a full transfer; 2: the same prefix without its inline payload (the receiver's
    scratch buffer still holds transfer 1); 3: a prefix shorter than the header;
    4: a stream announcing a 2 MB segment, then only 1 MB of it."""
    set_integrity_mode(mode)
    big = TensorDict(x=torch.arange(1 << 19, dtype=torch.float32))  # 2 MB: one segment
    if rank == 0:
        _td(7.0).send(1, init_tag=10)
        stream = Outgoing(_td(9.0), check=mode).stream
        cut = 4 * 3 * 4 + 4 * 8 + (NONCE_LEN if mode == "tail" else 0)
        dist.isend(stream[: stream.numel() - cut].clone(), 1, tag=20).wait()
        dist.isend(stream[:20].clone(), 1, tag=30).wait()
        out = Outgoing(big, check=mode)
        dist.isend(out.stream.clone(), 1, tag=40).wait()
        dist.isend(out.segments[0][: 1 << 20].clone(), 1, tag=42).wait()
        return {}
    target = _td(0.0)
    target.recv(0, init_tag=10)
    first = bool((target["a"] == 7).all())
    out = {"first": first, "prefix_only": _error(lambda: target.recv(0, init_tag=20))}
    out["short_header"] = _error(lambda: target.recv(0, init_tag=30))
    out["untouched"] = bool((target["a"] == 7).all())
    out["short_segment"] = _error(lambda: big.zero_().recv(0, init_tag=40))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["tail", "crc"])
def test_truncated_messages_are_refused(tmp_path, mode):
    _, r = run_ranks(truncated_job, 2, mode, out_dir=str(tmp_path), timeout=100, pg_timeout=20)
    assert r["first"] is True
    assert "incomplete or corrupted" in r["prefix_only"], r["prefix_only"]
    assert r["short_header"].startswith("WireError"), r["short_header"]
    assert r["untouched"] is True
    assert "incomplete or corrupted" in r["short_segment"], r["short_segment"]


def stale_copy_job(rank: int, world: int, mode: str) -> dict:
    """Each round: a full transfer, then a copy of the same bytes cut short by ``cut`` bytes,
    so the receiver's buffer still holds what the cut copy lacks (issue 31: over a crc-checked
    stream, the stale bytes matched the checksum and the cut copy was taken)."""
    set_integrity_mode(mode)
    stream = Outgoing(_td(9.0), check=mode).stream
    cuts = list(range(1, stream.numel() - HEADER_SIZE, 5))
    if rank == 0:
        for i, cut in enumerate(cuts):
            _td(9.0).send(1, init_tag=100 * i)
            dist.isend(stream[: stream.numel() - cut].clone(), 1, tag=100 * i + 50).wait()
        return {}
    taken = []
    target = _td(0.0)
    for i, cut in enumerate(cuts):
        target.recv(0, init_tag=100 * i)
        if _error(lambda: target.recv(0, init_tag=100 * i + 50)) == "no error":  # noqa: B023 - called at once
            taken.append(cut)
    return {"taken": taken, "rounds": len(cuts)}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["tail", "crc"])
def test_cut_copy_of_the_previous_message_is_refused(tmp_path, mode):
    _, r = run_ranks(stale_copy_job, 2, mode, out_dir=str(tmp_path), timeout=100, pg_timeout=20)
    assert r["rounds"] > 10
    assert r["taken"] == [], f"cut copies taken (bytes cut): {r['taken']}"


def test_integrity_mode_setter(monkeypatch):
    assert integrity_mode() == "tail"
    set_integrity_mode("crc")
    assert integrity_mode() == "crc"
    set_integrity_mode(None)
    monkeypatch.setenv("TENSORDICT_DIST_INTEGRITY", "crc")
    assert integrity_mode() == "crc"
    set_integrity_mode(None)
    monkeypatch.setenv("TENSORDICT_DIST_INTEGRITY", "md5")
    with pytest.raises(ValueError, match="TENSORDICT_DIST_INTEGRITY"):
        integrity_mode()
    with pytest.raises(ValueError, match="one of"):
        set_integrity_mode("none")
    monkeypatch.delenv("TENSORDICT_DIST_INTEGRITY")
    set_integrity_mode(None)
    assert integrity_mode() == "tail"


def mixed_modes_job(rank: int, world: int) -> dict:
    """Each sender picks its mode; the receiver takes both (inline and segmented payloads)."""
    if rank == 0:
        for i, mode in enumerate(["tail", "crc", "tail"]):
            set_integrity_mode(mode)
            _td(float(i)).send(1, init_tag=100 * i)
            TensorDict(x=torch.full((1 << 19,), float(i))).send(1, init_tag=100 * i + 50)
        return {}
    out = []
    for i in range(3):
        small, big = _td(-1.0), TensorDict(x=torch.zeros(1 << 19))
        small.recv(0, init_tag=100 * i)
        big.recv(0, init_tag=100 * i + 50)
        out.append(bool((small["a"] == i).all()) and bool((big["x"] == i).all()))
    return {"ok": out}


@pytest.mark.timeout(120)
def test_receiver_accepts_both_modes(tmp_path):
    _, r = run_ranks(mixed_modes_job, 2, out_dir=str(tmp_path), timeout=100, pg_timeout=20)
    assert r["ok"] == [True, True, True]


def _raw_prefix(total: int, segments: list, meta: bytes, flags: int) -> torch.Tensor:
    table = struct.pack(f"<{len(segments)}Q", *segments)
    head = bytearray(HEADER.pack(MAGIC, VERSION, flags, 0, len(meta), total, len(segments)))
    body = table + meta
    pad = (-(HEADER_SIZE + len(body))) % 64
    raw = head + body + bytes(pad)
    t = torch.frombuffer(raw, dtype=torch.uint8).clone()
    # a well-formed stream checksum; the segments' checksum announces the full payload
    stream_crc = crc_of(t[HEADER_SIZE:])
    seg_crc = crc_chain([torch.zeros(total, dtype=torch.uint8)]) if total <= 1 << 20 else 0
    t[48:56] = torch.frombuffer(bytearray(struct.pack("<II", stream_crc, seg_crc)), dtype=torch.uint8)
    return t


def oversized_job(rank: int, world: int) -> dict:
    meta = b'{"root":{"batch_size":[],"device":null,"names":null,"entries":[["x","tensor",0]]},' \
           b'"leaves":[{"dtype":"uint8","shape":[%d],"offset":0}]}'
    if rank == 0:
        big = 16 << 30
        dist.isend(_raw_prefix(big, [big], meta % big, 4), 1, tag=0).wait()
        one_mib = 1 << 20
        dist.isend(_raw_prefix(one_mib, [one_mib], meta % one_mib, 4), 1, tag=100).wait()
        dist.isend(torch.ones(10, dtype=torch.uint8), 1, tag=102).wait()
        return {}
    set_max_message_bytes(1 << 30)
    out = {"cap": max_message_bytes()}
    out["huge"] = _error(lambda: TensorDict.from_remote_init(0))
    set_max_message_bytes(None)
    out["short_segment"] = _error(lambda: TensorDict.from_remote_init(0, init_tag=100))
    return out


@pytest.mark.timeout(120)
def test_allocation_is_capped_and_short_segments_are_refused(tmp_path):
    _, r = run_ranks(oversized_job, 2, out_dir=str(tmp_path), timeout=100, pg_timeout=20)
    assert r["cap"] == 1 << 30
    assert "more than this process accepts" in r["huge"], r["huge"]
    assert "incomplete or corrupted" in r["short_segment"], r["short_segment"]


def layout_job(rank: int, world: int) -> dict:
    if rank == 0:
        TensorDict(a=torch.zeros(4, 3), batch_size=[4]).send(1)
        return {}
    bigger = TensorDict(a=torch.zeros(4, 3), b=torch.zeros(4), batch_size=[4])
    return {"mismatch": _error(lambda: bigger.recv(0))}


@pytest.mark.timeout(120)
def test_template_mismatch_is_reported(tmp_path):
    _, r = run_ranks(layout_job, 2, out_dir=str(tmp_path), timeout=100, pg_timeout=20)
    assert "does not match the structure" in r["mismatch"], r["mismatch"]


def test_cap_setter_validates():
    with pytest.raises(ValueError, match="positive int"):
        set_max_message_bytes(0)
    set_max_message_bytes(123)
    assert max_message_bytes() == 123
    set_max_message_bytes(None)
    assert max_message_bytes() > 123
