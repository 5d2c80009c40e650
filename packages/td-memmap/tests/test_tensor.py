"""MemoryMappedTensor: construction, views, sparse files, pickling, processes."""

import copy
import os
import pickle
import sys
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch.multiprocessing as mp

from tensordict.memmap import MemoryMappedTensor, is_memmap

sys.path.insert(0, os.path.dirname(__file__))
from _memmap_helpers import allocated_bytes, rss_kib  # noqa: E402


def test_from_tensor_file_roundtrip(tmp_path):
    src = torch.randn(4, 5)
    path = tmp_path / "x.memmap"
    t = MemoryMappedTensor.from_tensor(src, filename=path)
    assert isinstance(t, MemoryMappedTensor) and isinstance(t, torch.Tensor)
    assert t.filename == str(path) and t.is_memmap() and is_memmap(t)
    assert torch.equal(t, src)
    assert os.path.getsize(path) == src.numel() * 4
    reread = MemoryMappedTensor.from_filename(path, torch.float32, (4, 5))
    assert torch.equal(reread, src)
    t[0, 0] = 42.0  # writes go to the file
    assert MemoryMappedTensor.from_filename(path, torch.float32, (4, 5))[0, 0] == 42.0


def test_from_tensor_anonymous_is_shared_copy():
    src = torch.arange(10)
    t = MemoryMappedTensor.from_tensor(src)
    assert t.filename is None and t.is_shared()
    assert torch.equal(t, src)
    t[0] = 7
    assert src[0] == 0  # a copy


def test_existsok(tmp_path):
    path = tmp_path / "x.memmap"
    MemoryMappedTensor.from_tensor(torch.zeros(3), filename=path)
    with pytest.raises(RuntimeError, match="already exists"):
        MemoryMappedTensor.from_tensor(torch.ones(3), filename=path)
    with pytest.raises(RuntimeError, match="existsok"):
        MemoryMappedTensor.empty(3, filename=path)
    t = MemoryMappedTensor.from_tensor(torch.ones(3), filename=path, existsok=True)
    assert t.tolist() == [1.0, 1.0, 1.0]
    z = MemoryMappedTensor.zeros(3, filename=path, existsok=True)
    assert z.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("with_file", [False, True])
def test_constructors(tmp_path, with_file):
    kw = lambda name: {"filename": tmp_path / name} if with_file else {}  # noqa: E731
    assert MemoryMappedTensor.empty((2, 3), dtype=torch.int16, **kw("e")).shape == (2, 3)
    assert MemoryMappedTensor.empty(2, 3, **kw("e2")).dtype == torch.get_default_dtype()
    assert MemoryMappedTensor.zeros(2, 2, **kw("z")).sum() == 0
    assert MemoryMappedTensor.ones((2,), dtype=torch.int64, **kw("o")).tolist() == [1, 1]
    assert MemoryMappedTensor.full((2,), fill_value=3.5, **kw("f")).tolist() == [3.5, 3.5]
    like = torch.zeros(2, 4, dtype=torch.float64)
    assert MemoryMappedTensor.empty_like(like, **kw("el")).dtype == torch.float64
    assert MemoryMappedTensor.zeros_like(like, **kw("zl")).shape == (2, 4)
    assert MemoryMappedTensor.ones_like(like, **kw("ol")).sum() == 8
    assert MemoryMappedTensor.full_like(like, 2.0, **kw("fl")).sum() == 16
    with pytest.raises(RuntimeError, match="CPU"):
        MemoryMappedTensor.empty(2, device="meta")


def test_from_filename_index_and_errors(tmp_path):
    path = tmp_path / "x.memmap"
    MemoryMappedTensor.from_tensor(torch.arange(12, dtype=torch.int32), filename=path)
    row = MemoryMappedTensor.from_filename(path, torch.int32, (3, 4), index=1)
    assert isinstance(row, MemoryMappedTensor) and row.tolist() == [4, 5, 6, 7]
    with pytest.raises(RuntimeError, match=r"x\.memmap.*truncated"):
        MemoryMappedTensor.from_filename(path, torch.int32, (4, 4))
    with pytest.raises(FileNotFoundError, match="missing"):
        MemoryMappedTensor.from_filename(tmp_path / "nope.memmap", torch.int32, (1,))
    assert not (tmp_path / "nope.memmap").exists()  # never created by a read


def test_from_storage_and_constructor(tmp_path):
    path = tmp_path / "s.memmap"
    storage = torch.UntypedStorage.from_file(str(path), True, 16)
    t = MemoryMappedTensor.from_storage(storage, dtype=torch.int32, shape=(2, 2))
    assert t.filename == str(path)
    t.fill_(3)
    assert MemoryMappedTensor.from_filename(path, torch.int32, (4,)).tolist() == [3, 3, 3, 3]
    wrapped = MemoryMappedTensor(t.view(-1))
    assert wrapped.data_ptr() == t.data_ptr() and wrapped.filename == str(path)
    with pytest.raises(RuntimeError, match="needs"):
        MemoryMappedTensor.from_storage(storage, dtype=torch.int64, shape=(3,))


def test_views_stay_memmap_copies_do_not(tmp_path):
    t = MemoryMappedTensor.from_tensor(torch.arange(24.0).view(4, 6), filename=tmp_path / "x.memmap")
    for view in (t[1:3], t[0], t[:, 2], t.view(-1), t.permute(1, 0), t.unbind(0)[2], t.split(2)[1], t.detach()):
        assert isinstance(view, MemoryMappedTensor), view
        assert view.filename == t.filename
        assert view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    for copy_ in (t + 1, t[[0, 2]], t[t > 3], t.clone(), t.to(torch.float64), torch.stack([t, t])):
        assert type(copy_) is torch.Tensor
    t.add_(1)  # in place keeps the object
    assert isinstance(t, MemoryMappedTensor) and t[0, 0] == 1


def test_empty_huge_file_is_sparse(tmp_path):
    path = tmp_path / "images.memmap"
    before = rss_kib()
    images = MemoryMappedTensor.empty((1_000_000, 3, 480, 480), dtype=torch.uint8, filename=path)
    batch = images[:10]
    assert isinstance(batch, MemoryMappedTensor) and batch.shape == (10, 3, 480, 480)
    assert int(batch.sum()) == 0
    assert os.path.getsize(path) == 691_200_000_000
    assert allocated_bytes(path) < (1 << 20)  # sparse: no blocks written
    assert rss_kib() - before < 64 * 1024  # reading 10 images maps ~7 MB at most


def test_empty_huge_anonymous_costs_no_ram():
    before = rss_kib()
    images = MemoryMappedTensor.empty((1_000_000, 3, 480, 480), dtype=torch.uint8)
    assert images.filename is None
    images[:2] = 1
    assert int(images[:10].sum()) == 2 * 3 * 480 * 480
    assert rss_kib() - before < 64 * 1024


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.complex64, torch.bool, torch.int8, torch.float64, torch.uint8]
)
def test_dtypes(tmp_path, dtype):
    src = (torch.randn(5, 3) * 10).to(dtype)
    t = MemoryMappedTensor.from_tensor(src, filename=tmp_path / "d.memmap")
    assert t.dtype == dtype and torch.equal(t, src)


def test_non_contiguous_and_conj_sources(tmp_path):
    base = torch.randn(6, 8)
    src = base.t()[::2]
    t = MemoryMappedTensor.from_tensor(src, filename=tmp_path / "nc.memmap")
    assert torch.equal(t, src) and t.is_contiguous()
    c = torch.randn(3, dtype=torch.complex64)
    tc = MemoryMappedTensor.from_tensor(c.conj(), filename=tmp_path / "c.memmap")
    assert torch.equal(tc, c.conj().resolve_conj())


def test_pickle_sends_no_data(tmp_path):
    t = MemoryMappedTensor.empty((10_000, 256), dtype=torch.float32, filename=tmp_path / "big.memmap")
    t[5000:5002] = 3.0
    view = t[5000:5010, 4:]
    for dumps in (pickle.dumps, lambda x: bytes(ForkingPickler.dumps(x))):
        blob = dumps(view)
        assert len(blob) < 1000  # 10 MB of data, a few hundred bytes of pickle
        back = pickle.loads(blob)
        assert isinstance(back, MemoryMappedTensor) and back.filename == t.filename
        assert back.shape == view.shape and back.stride() == view.stride()
        assert torch.equal(back, view)
        back[0, 0] = -1.0
        assert t[5000, 4] == -1.0  # same file


def test_pickle_anonymous_copies():
    t = MemoryMappedTensor.from_tensor(torch.arange(4))
    back = pickle.loads(pickle.dumps(t))
    assert isinstance(back, MemoryMappedTensor) and back.tolist() == [0, 1, 2, 3]
    back[0] = 9
    assert t[0] == 0


def test_deepcopy_does_not_alias(tmp_path):
    t = MemoryMappedTensor.from_tensor(torch.arange(4), filename=tmp_path / "x.memmap")
    c = copy.deepcopy(t)
    assert isinstance(c, MemoryMappedTensor) and c.filename is None and torch.equal(c, t)
    c[0] = 5
    assert t[0] == 0


_CHILD = """
import torch
assert type(view).__name__ == "MemoryMappedTensor", type(view)
assert view.filename == expected_file, view.filename
assert view.tolist() == [[1.0, 1.0], [2.0, 2.0]], view.tolist()
view.mul_(10)
assert anon.filename is None and anon.tolist() == [1, 2, 3]
anon[0] = 100
"""


@pytest.mark.timeout(120)
def test_spawned_process_maps_same_file_and_memory(tmp_path):
    t = MemoryMappedTensor.zeros((1000, 2), filename=tmp_path / "shared.memmap")
    t[10] = 1.0
    t[11] = 2.0
    anon = MemoryMappedTensor.from_tensor(torch.tensor([1, 2, 3]))
    ctx = mp.get_context("spawn")
    env = {"view": t[10:12], "anon": anon, "expected_file": t.filename}
    proc = ctx.Process(target=exec, args=(_CHILD, env))
    proc.start()
    proc.join(110)
    assert proc.exitcode == 0
    assert t[10:12].tolist() == [[10.0, 10.0], [20.0, 20.0]]  # the child wrote into the file
    assert anon.tolist() == [100, 2, 3]  # and into the shared memory


def test_empty_without_file_is_cheap():
    # correctness of the slab allocator: distinct tensors never alias
    ts = [MemoryMappedTensor.empty((1000, 16)) for _ in range(100)]
    for i, t in enumerate(ts):
        t.fill_(i)
    assert all(int(t[0, 0]) == i for i, t in enumerate(ts))
    assert len({t.data_ptr() for t in ts}) == 100


def test_repr_and_format_of_memmap_tensors():
    x = MemoryMappedTensor.zeros(3, dtype=torch.long)
    assert repr(x) == "MemoryMappedTensor([0, 0, 0])"
    assert f"{x[1]}" == "0"
    assert "MemoryMappedTensor" in repr(MemoryMappedTensor.ones(2, 2))


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_empty_nested_gives_nested_or_plain_tensor(tmp_path):
    shapes = torch.tensor([[2, 3], [4, 3]])
    nested = MemoryMappedTensor.empty_nested(shapes, dtype=torch.float32, filename=tmp_path / "n.memmap")
    assert isinstance(nested, MemoryMappedTensor) and nested.is_nested
    assert [e.shape for e in nested.unbind(0)] == [torch.Size([2, 3]), torch.Size([4, 3])]
    plain = MemoryMappedTensor.empty_nested(shape=(2, 3), dtype=torch.int64)
    assert plain.shape == torch.Size([2, 3]) and plain.dtype == torch.int64
