"""The one-message fast path of send/recv (``_fastpath``, ``_Incoming.try_fast``) on a real
2-rank gloo process group: it is taken for repeated transfers of one structure, it sees
in-place changes, replaced leaves and new structures, and its bytes are the general path's."""

from __future__ import annotations

import pytest
import torch
from _dist_harness import run_ranks

from tensordict import TensorDict
from tensordict.distributed._fastpath import COUNTS, SendBuffer
from tensordict.distributed._integrity import set_integrity_mode
from tensordict.distributed._wire import HEADER_SIZE, Outgoing, snapshot


def _many(value: float) -> TensorDict:
    """100 small float leaves, int64 leaves of other shapes, a nested level, dim names."""
    td = TensorDict(
        {f"leaf{i}": torch.full((4, 64), value + i) for i in range(100)},
        batch_size=[4],
    )
    td["nested"] = TensorDict(
        ids=torch.arange(4) * int(value + 1),
        rows=torch.arange(12).view(4, 3) + int(value),
        t=torch.full((3, 4), value).t(),  # non-contiguous
        batch_size=[4],
    )
    td.refine_names("time")
    return td


def _same(a: TensorDict, b: TensorDict) -> bool:
    keys = sorted(a.keys(True, True), key=str)
    return keys == sorted(b.keys(True, True), key=str) and all(torch.equal(a[k], b[k]) for k in keys)


def fast_job(rank: int, world: int) -> dict:
    out: dict = {}
    if rank == 0:
        td = _many(1.0)
        for step in range(3):  # the same TensorDict, changed in place between sends
            td["leaf0"].add_(1)
            td["nested", "ids"].mul_(2)
            td.send(1, init_tag=10 * step)
        out["sends_same"] = COUNTS[0]
        td["leaf5"] = torch.full((4, 64), -5.0)  # a replaced leaf
        td.send(1, init_tag=100)
        ctd = _many(2.0).consolidate()
        ctd.send(1, init_tag=110)
        ctd["leaf1"].fill_(7.0)  # written through the consolidated storage
        ctd.send(1, init_tag=120)
        _many(3.0).send(1, init_tag=130)  # plain sender, consolidated receiver
        grad = TensorDict(w=torch.ones(3, requires_grad=True), batch_size=[])
        grad.send(1, init_tag=140)
        out["isend_tag"] = _many(4.0).isend(1, init_tag=150)
        _many(5.0).send(1, init_tag=160, pseudo_rand=True)
        # same keys, dtypes and shapes, another batch size: the receiver's template takes it
        TensorDict({k: v for k, v in _many(6.0).items(True, True)}, batch_size=[]).send(1, init_tag=170)
        # a new key: the receiver's template no longer matches (error on the receiver only)
        td["extra"] = torch.zeros(4)
        td.send(1, init_tag=180)
        td.send(1, init_tag=190)
        set_integrity_mode("crc")  # the general path (the fast one is for "tail")
        _many(8.0).send(1, init_tag=200)
        set_integrity_mode(None)
        _dtypes(2.0).send(1, init_tag=210)
        out["sends"] = COUNTS[0]
        return out
    tmpl = _many(0.0)
    leaf = tmpl["leaf0"]
    ref = _many(1.0)
    for step in range(3):
        tmpl.recv(0, init_tag=10 * step)
        ref["leaf0"].add_(1)
        ref["nested", "ids"].mul_(2)
        assert _same(tmpl, ref), step
    assert tmpl["leaf0"] is leaf  # received in place
    out["recvs_same"] = COUNTS[1]
    tmpl.recv(0, init_tag=100)
    assert bool((tmpl["leaf5"] == -5).all()) and bool((tmpl["leaf6"] == ref["leaf6"]).all())
    ctmpl = _many(0.0).consolidate()
    storage = ctmpl._consolidated.storage
    ctmpl.recv(0, init_tag=110)
    assert _same(ctmpl, _many(2.0))
    ctmpl.recv(0, init_tag=120)
    assert bool((ctmpl["leaf1"] == 7).all()) and bool((ctmpl["leaf2"] == 4).all())
    ctmpl.recv(0, init_tag=130)
    assert _same(ctmpl, _many(3.0)) and ctmpl._consolidated.storage is storage
    grad = TensorDict(w=torch.zeros(3, requires_grad=True), batch_size=[])
    grad.recv(0, init_tag=140)
    assert grad["w"].tolist() == [1.0, 1.0, 1.0] and grad["w"].requires_grad
    out["irecv_tag"] = tmpl.irecv(0, init_tag=150)
    assert _same(tmpl, _many(4.0))
    tmpl.recv(0, init_tag=160, pseudo_rand=True)
    assert _same(tmpl, _many(5.0))
    before = COUNTS[1]
    tmpl.recv(0, init_tag=170)
    assert _same(tmpl, _many(6.0))
    out["other_batch_size_fast"] = COUNTS[1] - before
    try:
        tmpl.recv(0, init_tag=180)
    except RuntimeError as err:
        out["new_key"] = str(err)
    grown = _many(0.0)
    grown["extra"] = torch.ones(4)
    grown.recv(0, init_tag=190)
    assert bool((grown["extra"] == 0).all())
    tmpl.recv(0, init_tag=200)
    assert _same(tmpl, _many(8.0))
    kinds = _dtypes(0.0)
    kinds.recv(0, init_tag=210)
    assert _same(kinds, _dtypes(2.0))
    out["recvs"] = COUNTS[1]
    return out


@pytest.mark.timeout(120)
def test_fast_path_on_two_ranks(tmp_path):
    sender, receiver = run_ranks(fast_job, 2, out_dir=str(tmp_path), timeout=110)
    # three sends of one TensorDict, changed in place: the first takes the general path
    # (which analyses it), the next ones the fast path; every receive takes it
    assert sender["sends_same"] == 2 and receiver["recvs_same"] == 3
    # fast sends: those two, the consolidated TensorDict sent again, the grown TensorDict sent
    # again; a TensorDict sent for the first time or changed since takes the general path
    assert sender["sends"] == 4, sender
    assert sender["isend_tag"] == receiver["irecv_tag"] == 152
    # another batch size changes the metadata bytes: the general path takes it (and accepts it)
    assert receiver["other_batch_size_fast"] == 0
    assert "does not match the structure" in receiver["new_key"] and "'extra'" in receiver["new_key"]
    # fast receives: 3 + replaced leaf + 3 consolidated + grad + irecv + pseudo_rand + grown key
    # + every dtype; not: another batch size, the mismatch, the "crc" sender
    assert receiver["recvs"] == 12, receiver


def _dtypes(value: float) -> TensorDict:
    """Every kind of leaf the wire carries, in runs of equal and of different shapes."""
    return TensorDict(
        {
            "f16": torch.full((3, 2), value, dtype=torch.float16),
            "bf16": torch.full((3,), value, dtype=torch.bfloat16),
            "c64": torch.full((3, 2), complex(value, -value), dtype=torch.complex64),
            "mask": torch.tensor([True, False, value > 0]),
            "u8": torch.arange(3, dtype=torch.uint8),
            "i32": torch.arange(6, dtype=torch.int32).view(3, 2),
            "f64": torch.full((3, 5), value, dtype=torch.float64),
            "empty": torch.zeros(3, 0),
        },
        batch_size=[3],
    )


@pytest.mark.parametrize("consolidate", [False, True])
@pytest.mark.parametrize("make", [_many, _dtypes])
def test_send_buffer_bytes_are_the_general_paths(consolidate, make):
    td = make(3.0)
    if consolidate:
        td = td.consolidate()
    snap = snapshot(td)
    leaves, plan, _, _, storage = snap.result
    buf = SendBuffer(plan, leaves, storage)
    with torch.no_grad():
        buf.fill()
    general = Outgoing(td, check="tail").stream
    fast = buf.stream
    assert fast.numel() == general.numel()
    # equal but for the per-transfer checksum/nonce pair and the trailer holding the nonce
    assert torch.equal(fast[:48], general[:48])
    assert torch.equal(fast[48:52], general[48:52])  # the prefix checksum does not depend on the nonce
    assert torch.equal(fast[HEADER_SIZE:-8], general[HEADER_SIZE:-8])
    nonce = fast[52:56].clone()
    assert torch.equal(fast[-8:-4], nonce)
    # the buffer sees in-place changes of the leaves at the next fill
    next(iter(td.values())).fill_(-1.0)
    with torch.no_grad():
        buf.fill()
    assert torch.equal(buf.stream[HEADER_SIZE:-8], Outgoing(td, check="tail").stream[HEADER_SIZE:-8])
