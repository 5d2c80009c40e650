"""The wire format on its own (no process group): layout, round trips, digests, hostile input."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest
import torch
from _jobs import assert_td_equal, big_td, rich_td

from tensordict import TensorDict
from tensordict.distributed import _wire
from tensordict.distributed._decode import (
    build_from_payload,
    parse_header,
    parse_meta,
    tensor_bytes,
)
from tensordict.distributed._wire import FLAG_INLINE, HEADER_SIZE, Outgoing, Template, WireError


def _roundtrip(td: TensorDict) -> TensorDict:
    out = Outgoing(td, inline=True)
    header = parse_header(tensor_bytes(out.stream[:HEADER_SIZE]), "test")
    meta = parse_meta(out.stream, header, "test")
    payload = out.stream[header.prefix_len : header.prefix_len + header.total]
    return build_from_payload(meta, payload, "test")


def test_inline_roundtrip_keeps_everything():
    td = rich_td(3.0)
    back = _roundtrip(td)
    assert_td_equal(back, td)
    assert back.batch_size == td.batch_size and back.names == ["time"]
    assert back["nested"].batch_size == td["nested"].batch_size
    assert back.is_consolidated()
    # every leaf is a view into the one received payload
    ptrs = {back.get(k).untyped_storage().data_ptr() for k in back.keys(True, True) if isinstance(back.get(k), torch.Tensor)}
    assert len(ptrs) == 1


def test_payload_layout_is_the_consolidated_storage():
    td = rich_td(1.0)
    out = Outgoing(td, inline=True)
    header = parse_header(tensor_bytes(out.stream[:HEADER_SIZE]), "test")
    payload = out.stream[header.prefix_len :]
    storage = td.consolidate()._consolidated.storage
    assert torch.equal(payload, storage)


def test_big_leaves_travel_as_their_own_segments():
    td = big_td(2.0)
    out = Outgoing(td)
    header = parse_header(tensor_bytes(out.stream[:HEADER_SIZE + 64]), "test")
    assert not header.flags & FLAG_INLINE
    sizes = [s.numel() for s in out.segments]
    assert sizes == header.segments and sum(sizes) == header.total
    # the two big leaves are sent straight from their tensors (no packing copy)
    ptrs = {s.data_ptr() for s in out.segments}
    assert td["big"].data_ptr() in ptrs and td["big_i"].data_ptr() in ptrs
    # a consolidated sender sends its storage as one segment
    ctd = td.consolidate()
    cout = Outgoing(ctd)
    assert len(cout.segments) == 1 and cout.segments[0].data_ptr() == ctd._consolidated.storage.data_ptr()


def test_template_fills_in_place_from_segments():
    src = big_td(5.0)
    out = Outgoing(src)
    header = parse_header(tensor_bytes(out.stream[: HEADER_SIZE + 8 * len(out.segments)]), "test")
    for tmpl_td in (big_td(0.0), big_td(0.0).consolidate()):
        tmpl = Template(tmpl_td)
        assert tmpl.digest == header.digest
        bufs = tmpl.segment_buffers(header.segments, torch.device("cpu"))
        for buf, seg in zip(bufs, out.segments):
            buf.copy_(seg)
        tmpl.finish_segments()
        assert_td_equal(tmpl_td, src)


def test_digest_covers_structure_not_values():
    d = Template(rich_td(1.0)).digest
    assert Template(rich_td(2.0)).digest == d  # other values, other label
    changed = rich_td(1.0)
    changed["obs"] = torch.zeros(4, 3, dtype=torch.float64)
    assert Template(changed).digest != d
    reshaped = rich_td(1.0)
    reshaped["obs"] = torch.zeros(4, 4)
    assert Template(reshaped).digest != d
    renamed = rich_td(1.0).rename_key_("obs", "obs2")
    assert Template(renamed).digest != d


@pytest.mark.timeout(60)
def test_digest_is_the_same_in_another_process():
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from _jobs import rich_td; from tensordict.distributed._wire import Template;"
        "print(Template(rich_td(0.0)).digest)"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    here = os.path.dirname(os.path.abspath(__file__))
    res = subprocess.run([sys.executable, "-c", code, here], capture_output=True, text=True, env=env, timeout=50)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.strip()) == Template(rich_td(0.0)).digest


def _stream_with_meta(meta: dict, total: int) -> torch.Tensor:
    raw = json.dumps(meta).encode()
    head = _wire.HEADER.pack(_wire.MAGIC, _wire.VERSION, FLAG_INLINE, 0, len(raw), total, 0)
    pad = _wire.align(HEADER_SIZE + len(raw)) - HEADER_SIZE - len(raw)
    return torch.frombuffer(bytearray(head + raw + bytes(pad) + bytes(total)), dtype=torch.uint8)


@pytest.mark.parametrize(
    ("meta", "needle"),
    [
        ({"root": {"batch_size": [2], "device": None, "names": None, "entries": [["a", "tensor", 0]]},
          "leaves": [{"dtype": "float32", "shape": [2], "offset": 64}]}, "outside"),
        ({"root": {"batch_size": [2], "device": None, "names": None, "entries": [["a", "tensor", 0]]},
          "leaves": [{"dtype": "pickle", "shape": [2], "offset": 0}]}, "dtype"),
        ({"root": {"batch_size": [3], "device": None, "names": None, "entries": [["a", "tensor", 0]]},
          "leaves": [{"dtype": "float32", "shape": [2], "offset": 0}]}, "batch_size"),
        ({"root": {"batch_size": [2], "device": None, "names": None,
                   "entries": [["a", "tensor", 0], ["a", "tensor", 0]]},
          "leaves": [{"dtype": "float32", "shape": [2], "offset": 0}]}, "twice"),
        ({"root": {"batch_size": [2], "device": None, "names": None, "entries": [["a", "module", "os"]]},
          "leaves": []}, "unknown entry kind"),
        ({"root": {"batch_size": [2], "device": None, "names": None, "entries": []},
          "leaves": [{"dtype": "float32", "shape": [2], "offset": 0}]}, "uses 0"),
    ],
)
def test_malformed_metadata_is_rejected(meta, needle):
    stream = _stream_with_meta(meta, 8)
    header = parse_header(tensor_bytes(stream[:HEADER_SIZE]), "rank 9")
    parsed = parse_meta(stream, header, "rank 9")
    with pytest.raises(WireError, match=needle) as info:
        build_from_payload(parsed, stream[header.prefix_len :], "rank 9")
    assert "rank 9" in str(info.value)


def test_malformed_headers_are_rejected():
    good = Outgoing(rich_td(0.0), inline=True).stream
    raw = tensor_bytes(good[:HEADER_SIZE])
    with pytest.raises(WireError, match="not a TensorDict transfer"):
        parse_header(b"X" * 8 + raw[8:], "rank 1")
    with pytest.raises(WireError, match="version"):
        parse_header(raw[:8] + struct.pack("<I", 99) + raw[12:], "rank 1")
    with pytest.raises(WireError, match="fewer than"):
        parse_header(raw[:10], "rank 1")
    huge = _wire.HEADER.pack(_wire.MAGIC, _wire.VERSION, 0, 0, 0, 1 << 60, 0)
    with pytest.raises(WireError, match="impossible"):
        parse_header(huge, "rank 1")
    bad_table = _wire.HEADER.pack(_wire.MAGIC, _wire.VERSION, 0, 0, 0, 100, 2) + struct.pack("<2Q", 10, 20)
    with pytest.raises(WireError, match="tile"):
        parse_header(bad_table, "rank 1")
    garbage = bytearray(tensor_bytes(good))
    header = parse_header(raw, "rank 1")
    garbage[header.meta_offset] = ord("}")
    with pytest.raises(WireError, match="not valid JSON"):
        parse_meta(torch.frombuffer(garbage, dtype=torch.uint8), header, "rank 1")


def test_unsendable_values_are_refused():
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    td["obj"] = object()
    with pytest.raises(TypeError, match="JSON"):
        Outgoing(td)
    sparse = TensorDict(a=torch.eye(2).to_sparse(), batch_size=[2])
    with pytest.raises(TypeError, match="dense"):
        Outgoing(sparse)


def test_copy_bytes_handles_unaligned_ranges():
    src = torch.arange(100, dtype=torch.uint8)
    dst = torch.zeros(100, dtype=torch.uint8)
    _wire.copy_bytes(dst[3:43], src[5:45])
    assert dst[3:43].tolist() == list(range(5, 45))
    _wire.copy_bytes(dst[:64], src[:64])
    assert dst[:64].tolist() == list(range(64))


def test_lazy_layout_round_trip_and_bad_layouts():
    from tensordict import LazyStackedTensorDict
    from tensordict.distributed._decode import _rebuild_lazy
    from tensordict.distributed._lazy_view import lazy_layout, plain_view

    stack = LazyStackedTensorDict(TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2), b=torch.ones(1)), stack_dim=0)
    outer = TensorDict({"s": stack, "x": torch.zeros(2, 3)}, [2])
    assert lazy_layout(TensorDict(a=torch.zeros(2))) is None
    layout = lazy_layout(outer)
    assert layout == [{"path": [], "batch_size": [2]}, {"path": ["s"], "lazy": {"stack_dim": 0, "n": 2}}]
    back = _rebuild_lazy(plain_view(outer), layout, "rank 0")
    assert back.batch_size == torch.Size([2]) and isinstance(back["s"], LazyStackedTensorDict)
    assert back["s"].tensordicts[1]["b"].tolist() == [1.0]
    view = plain_view(stack)
    for bad in (
        [{"path": [], "lazy": {"stack_dim": 0, "n": 3}}],  # more members than sent
        [{"path": [], "lazy": {"stack_dim": 5, "n": 2}}],  # impossible stack dim
        [{"path": [1], "lazy": {"stack_dim": 0, "n": 2}}],  # a key that is not a str
        [{"path": [], "batch_size": "x"}],
        "not a list",
    ):
        with pytest.raises(WireError):
            _rebuild_lazy(view, bad, "rank 0")
