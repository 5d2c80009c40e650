"""consolidate / is_consolidated / to(device) of a consolidated TensorDict / from_consolidated."""

import json
import os
import pickle
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensordict
from tensordict import NonTensorStack, TensorDict, from_consolidated


def make(device=None):
    td = TensorDict(
        {
            "a": torch.arange(6.0).view(3, 2),
            "i": torch.arange(3),
            "m": torch.tensor([True, False, True]),
            "h": torch.randn(3, 5).half(),
            "nested": {"x": torch.randn(3, 4, dtype=torch.float64), "deeper": {"c": torch.randn(3).to(torch.complex64)}},
        },
        batch_size=[3],
        device=device,
        names=["batch"],
    )
    td["text"] = "hello"
    td["nested", "tags"] = NonTensorStack("x", "y", "z")
    return td


def storage_ptr(t):
    return t.untyped_storage().data_ptr()


def assert_same(a, b):
    assert a.batch_size == b.batch_size
    assert list(a.keys(True, True)) == list(b.keys(True, True))
    for key in a.keys(True, True):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, torch.Tensor):
            assert va.dtype == vb.dtype and va.shape == vb.shape, key
            assert torch.equal(va.cpu(), vb.cpu()), key
        else:
            assert va == vb, key


# ---------------------------------------------------------------------- in memory
def test_consolidate_one_storage(device):
    td = make(device)
    c = td.consolidate()
    assert_same(c, td)
    assert c.is_consolidated() and not td.is_consolidated()
    assert c.is_locked
    assert c.names == ["batch"] and c["nested"].batch_size == torch.Size([3])
    ptrs = {storage_ptr(t) for t in c.values(True, True) if isinstance(t, torch.Tensor)}
    assert len(ptrs) == 1
    total = sum(t.numel() * t.element_size() for t in td.values(True, True) if isinstance(t, torch.Tensor))
    assert c._consolidated.storage.numel() == total  # no padding: dtypes grouped by item size
    # a copy, not an alias
    c["a"][0, 0] = 100.0
    assert td["a"][0, 0] == 0


def test_in_place_writes_keep_consolidation():
    c = make().consolidate()
    c["a"].add_(1)
    c.set_("i", torch.tensor([7, 8, 9]))
    assert c.is_consolidated()
    moved = c.to("cpu")
    assert moved.is_consolidated()
    assert (moved["i"] == torch.tensor([7, 8, 9])).all() and moved["a"][0, 0] == 1


def test_single_leaf_is_copied_and_empty_td():
    t = torch.ones(4)
    c = TensorDict({"t": t}, [4]).consolidate()
    assert c["t"].data_ptr() != t.data_ptr()
    e = TensorDict({}, [2]).consolidate()
    assert e.is_consolidated() and e.batch_size == torch.Size([2])
    e2 = TensorDict({"n": {}}, [2]).consolidate()
    assert "n" in e2.keys()


def test_odd_leaves():
    td = TensorDict(
        {
            "expanded": torch.arange(4.0).expand(3, 4),
            "transposed": torch.arange(12.0).view(4, 3).t(),
            "scalar": torch.tensor(5.0),
            "empty": torch.zeros(0, 3),
            "grad": torch.ones(2, requires_grad=True),
        }
    )
    c = td.consolidate()
    assert_same(c, td.detach())
    assert not c["grad"].requires_grad
    with pytest.raises(TypeError, match="key .s. is a torch.sparse_coo"):
        TensorDict({"s": torch.eye(2).to_sparse(), "x": torch.zeros(2, dtype=torch.int32)}).consolidate()


def test_consolidate_options(tmp_path):
    td = make()
    assert_same(td.consolidate(num_threads=3), td)
    c = td.consolidate(device="cpu")
    assert c.device == torch.device("cpu") and c["nested"].device == torch.device("cpu")
    shared = td.consolidate(share_memory=True)
    assert shared._consolidated.storage.is_shared()
    again = c.consolidate()
    assert again is c
    other = td.clone()
    out = other.consolidate(inplace=True)
    assert out is other and other.is_consolidated() and other.is_locked
    assert_same(other, td)


def test_adding_a_key_is_never_lost_by_to(device):
    c = make().consolidate()
    c.unlock_()
    c["new"] = torch.full((3,), 7.0)
    c["nested", "extra"] = torch.ones(3)
    assert not c.is_consolidated()
    moved = c.to(device)
    assert (moved["new"] == 7).all() and (moved["nested", "extra"] == 1).all()
    moved_cpu = c.to("cpu")
    assert "new" in moved_cpu.keys() and ("nested", "extra") in moved_cpu.keys(True)


def test_replaced_or_deleted_leaf_falls_back():
    c = make().consolidate().unlock_()
    c["a"] = torch.zeros(3, 2)
    assert not c.is_consolidated()
    assert (c.to("cpu")["a"] == 0).all()
    c2 = make().consolidate().unlock_()
    del c2["i"]
    assert not c2.is_consolidated()
    assert "i" not in c2.to("cpu").keys()
    c3 = make().consolidate().unlock_()
    c3["text"] = "changed"
    assert not c3.is_consolidated()
    assert c3.to("cpu")["text"] == "changed"


def test_to_device_moves_one_buffer(device):
    td = make()
    c = td.consolidate()
    moved = c.to(device)
    assert moved.device == torch.device(device) if device.type == "cpu" else moved.device.type == "cuda"
    assert moved.is_consolidated()
    assert_same(moved, td)
    ptrs = {storage_ptr(t) for t in moved.values(True, True) if isinstance(t, torch.Tensor)}
    assert len(ptrs) == 1
    assert moved["nested"].device == moved.device
    back = moved.to("cpu", non_blocking=True)
    assert_same(back, td)
    assert back.is_consolidated()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_consolidate_on_cuda():
    td = make()
    c = td.consolidate(device="cuda")
    assert c.device.type == "cuda" and c._consolidated.storage.is_cuda
    assert_same(c, td)
    pinned = td.consolidate(pin_memory=True)
    assert pinned._consolidated.storage.is_pinned()
    assert_same(pinned.to("cuda", non_blocking=True).to("cpu"), td)


def test_pickle_keeps_consolidation():
    c = make().consolidate()
    c2 = pickle.loads(pickle.dumps(c))
    assert_same(c2, c)
    assert c2.is_consolidated()
    # one storage after the round trip too: in-place writes then survive to()
    c2["i"].fill_(5)
    assert (c2.to("cpu")["i"] == 5).all()
    ptrs = {storage_ptr(t) for t in c2.values(True, True) if isinstance(t, torch.Tensor)}
    assert ptrs == {storage_ptr(c2._consolidated.storage)}


# ---------------------------------------------------------------------- files
def test_file_round_trip(tmp_path):
    td = make()
    path = tmp_path / "td.bin"
    c = td.consolidate(filename=path)
    assert c.is_consolidated() and os.path.isfile(path)
    assert os.listdir(tmp_path) == ["td.bin"]  # no temporary file left
    loaded = from_consolidated(path)
    assert_same(loaded, td)
    assert loaded.names == ["batch"]
    assert loaded.is_consolidated() and not loaded.is_locked
    assert tensordict.from_consolidated is from_consolidated
    assert_same(TensorDict.from_consolidated(str(path)), td)
    # the consolidated result is backed by the file ...
    c["a"][0, 0] = 42.0
    assert from_consolidated(path)["a"][0, 0] == 42.0
    # ... and writes into a loaded copy do not reach it
    loaded["a"][0, 1] = -1.0
    assert from_consolidated(path)["a"][0, 1] == 1.0
    assert_same(loaded.to("cpu"), loaded)


def test_file_layout_is_documented_format(tmp_path):
    path = tmp_path / "td.bin"
    TensorDict({"a": torch.arange(4, dtype=torch.int32)}, [4]).consolidate(filename=path)
    raw = path.read_bytes()
    magic, version, meta_len = struct.unpack("<8sIQ", raw[:20])
    assert magic == b"TDCONSOL" and version == 1
    meta = json.loads(raw[20 : 20 + meta_len])
    data_start = -(-(20 + meta_len) // 64) * 64
    assert meta["nbytes"] == 16 and len(raw) == data_start + 16
    assert torch.equal(torch.frombuffer(bytearray(raw[data_start:]), dtype=torch.int32), torch.arange(4, dtype=torch.int32))


def test_non_json_value_fails_and_keeps_earlier_file(tmp_path):
    path = tmp_path / "td.bin"
    TensorDict({"a": torch.ones(2)}, [2]).consolidate(filename=path)
    before = path.read_bytes()
    bad = TensorDict({"a": torch.zeros(2), "obj": object()}, [2])
    with pytest.raises(TypeError, match="'obj'.*JSON"):
        bad.consolidate(filename=path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["td.bin"]
    # in memory, any object is fine
    assert bad.consolidate()["obj"] is bad["obj"]


def test_from_consolidated_truncated(tmp_path):
    path = tmp_path / "td.bin"
    make().consolidate(filename=path)
    raw = path.read_bytes()
    for cut in (len(raw) - 1, 40, 10, 0):
        bad = tmp_path / f"cut{cut}.bin"
        bad.write_bytes(raw[:cut])
        with pytest.raises(ValueError, match=f"cut{cut}.bin") as err:
            from_consolidated(bad)
        assert "truncated" in str(err.value) or "fewer than" in str(err.value)


def test_from_consolidated_foreign_and_corrupt(tmp_path):
    foreign = tmp_path / "model.pt"
    torch.save({"w": torch.zeros(3)}, foreign)
    with pytest.raises(ValueError, match="magic bytes"):
        from_consolidated(foreign)
    text = tmp_path / "notes.txt"
    text.write_text("just some text, long enough to hold a header")
    with pytest.raises(ValueError, match="notes.txt"):
        from_consolidated(text)
    # right magic, broken JSON
    junk = b"{not json"
    broken = tmp_path / "broken.bin"
    broken.write_bytes(struct.pack("<8sIQ", b"TDCONSOL", 1, len(junk)) + junk)
    with pytest.raises(ValueError, match="not valid JSON"):
        from_consolidated(broken)
    # unknown version
    future = tmp_path / "future.bin"
    future.write_bytes(struct.pack("<8sIQ", b"TDCONSOL", 99, 0))
    with pytest.raises(ValueError, match="version 99"):
        from_consolidated(future)
    with pytest.raises(FileNotFoundError):
        from_consolidated(tmp_path / "missing.bin")


def _write(path, meta, data=b""):
    body = json.dumps(meta).encode()
    start = -(-(20 + len(body)) // 64) * 64
    raw = struct.pack("<8sIQ", b"TDCONSOL", 1, len(body)) + body
    path.write_bytes(raw + b"\0" * (start - len(raw)) + data)


@pytest.mark.parametrize(
    "leaf, why",
    [
        ({"dtype": "object", "shape": [2], "offset": 0}, "dtype"),
        ({"dtype": "float32", "shape": [100], "offset": 0}, "overruns"),
        ({"dtype": "float32", "shape": [1], "offset": 2}, "offset"),
        ({"dtype": "float32", "shape": [-1], "offset": 0}, "non-negative"),
    ],
)
def test_from_consolidated_malicious_metadata(tmp_path, leaf, why):
    path = tmp_path / "evil.bin"
    root = {"batch_size": [], "device": None, "names": None, "entries": [["a", "tensor", 0]]}
    _write(path, {"format": "tensordict.consolidated", "version": 1, "nbytes": 8, "leaves": [leaf], "root": root}, b"\0" * 8)
    with pytest.raises(ValueError, match=why):
        from_consolidated(path)


def test_from_consolidated_bad_tree(tmp_path):
    path = tmp_path / "evil.bin"
    leaves = [{"dtype": "float32", "shape": [2], "offset": 0}]
    meta = {"format": "tensordict.consolidated", "version": 1, "nbytes": 8, "leaves": leaves}
    for root, why in [
        ({"batch_size": [], "device": None, "names": None, "entries": [["a", "tensor", 5]]}, "leaf index"),
        ({"batch_size": [3], "device": None, "names": None, "entries": [["a", "tensor", 0]]}, "batch_size"),
        ({"batch_size": [], "device": None, "names": None, "entries": [["a", "pickle", "cos\nsystem"]]}, "unknown entry kind"),
        ({"batch_size": [], "entries": [["a", "tensor", 0], ["a", "tensor", 0]]}, "duplicate"),
    ]:
        _write(path, {**meta, "root": root}, b"\0" * 8)
        with pytest.raises(ValueError, match=why):
            from_consolidated(path)


def test_filename_with_cuda_device_is_refused(tmp_path):
    with pytest.raises(ValueError, match="CPU"):
        make().consolidate(filename=tmp_path / "x.bin", device="cuda")


# ---------------------------------------------------------------------- properties
_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int16, torch.uint8, torch.bool, torch.float16]


@st.composite
def trees(draw, depth=0):
    n = draw(st.integers(0, 4))
    out = {}
    for i in range(n):
        if depth < 3 and draw(st.booleans()):
            out[f"n{i}"] = draw(trees(depth + 1))
        else:
            shape = draw(st.lists(st.integers(0, 3), max_size=2))
            dtype = draw(st.sampled_from(_DTYPES))
            out[f"t{i}"] = (torch.randn(2, *shape) * 10).to(dtype)
    return out


@settings(max_examples=25, deadline=None)
@given(trees())
def test_consolidate_matches_leaf_by_leaf(source):
    td = TensorDict(source, [2])
    c = td.consolidate()
    assert_same(c, td)
    assert c.is_consolidated()
    assert_same(c.to("cpu"), td)


def test_torch_save_and_deepcopy_of_mixed_dtypes(tmp_path):
    import copy

    c = make().consolidate()
    path = tmp_path / "c.pt"
    torch.save(c, path)  # leaves are views of several dtypes into one storage
    loaded = torch.load(path, weights_only=False)
    assert_same(loaded, c)
    assert loaded.is_consolidated() and loaded.is_locked
    ptrs = {storage_ptr(t) for t in loaded.values(True, True) if isinstance(t, torch.Tensor)}
    assert ptrs == {storage_ptr(loaded._consolidated.storage)}
    dup = copy.deepcopy(c)
    assert_same(dup, c) and dup.is_consolidated()
    stale = make().consolidate().unlock_()
    stale["extra"] = torch.zeros(3)
    torch.save(stale, path)
    back = torch.load(path, weights_only=False)
    assert "extra" in back.keys() and not back.is_consolidated()
    assert_same(back, stale)


@pytest.mark.parametrize("num_threads", [0, 2])
def test_return_early_gives_a_future(tmp_path, num_threads):
    from concurrent.futures import Future

    from tensordict import lazy_stack

    td = make()
    future = td.consolidate(num_threads=num_threads, return_early=True)
    assert isinstance(future, Future)
    out = future.result(timeout=30)
    assert out.is_consolidated() and out["text"] == "hello"
    assert_same(out, td)
    filed = td.consolidate(tmp_path / "f.td", num_threads=num_threads, return_early=True).result(timeout=30)
    assert_same(from_consolidated(tmp_path / "f.td"), filed)
    stack = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(3), b=torch.ones(1))])
    lazy = stack.consolidate(num_threads=num_threads, return_early=True).result(timeout=30)
    assert type(lazy) is type(stack) and lazy.is_consolidated()
    with pytest.raises(NotImplementedError, match="non_blocking"):
        td.consolidate(return_early=True, non_blocking=True)
    with pytest.raises(NotImplementedError, match="use_buffer"):
        td.consolidate(tmp_path / "g.td", return_early=True, use_buffer=True)
    # a failure surfaces from result(), not as a lost thread
    bad = TensorDict(s=torch.eye(2).to_sparse())
    with pytest.raises(TypeError, match="sparse"):
        bad.consolidate(num_threads=num_threads, return_early=True).result(timeout=30)


def test_metadata_flag_and_layout(tmp_path):
    td = make()
    c = td.consolidate(metadata=True)
    assert c.is_consolidated()
    assert_same(c, td)
    meta = c._consolidated["metadata"]
    assert meta["nbytes"] == c._consolidated["storage"].numel()
    assert len(meta["leaves"]) == sum(isinstance(v, torch.Tensor) for v in td.values(True, True))
    assert json.loads(json.dumps(meta)) == meta
    # use_buffer alone is accepted: the file is written and reads back
    filed = td.consolidate(tmp_path / "b.td", use_buffer=True)
    assert_same(from_consolidated(tmp_path / "b.td"), filed)
    # a file-backed result is on the CPU, where the file is mapped, at every level
    assert td.device is None and filed.device == torch.device("cpu") and filed["nested"].device == torch.device("cpu")


def test_unbatched_leaf_keeps_its_class_through_consolidate(tmp_path):
    from tensordict import UnbatchedTensor

    td = TensorDict({"a": torch.arange(12.0).reshape(4, 3), "u": UnbatchedTensor(torch.ones(7, 11))}, [4, 3])
    out = td.consolidate()
    assert isinstance(out.get("u"), UnbatchedTensor)
    assert out.get("u").shape == (7, 11)
    assert (out["a"] == td["a"]).all()
    with pytest.raises(TypeError, match="key 'u' holds an UnbatchedTensor"):
        td.consolidate(filename=tmp_path / "f.td")
    assert not (tmp_path / "f.td").exists()
