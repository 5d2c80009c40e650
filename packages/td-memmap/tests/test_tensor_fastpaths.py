"""The per-call fast paths of MemoryMappedTensor: ``empty``/``zeros``/``from_tensor`` of a
shape seen before, and views retyped in place. Each test pins a behaviour the fast path
must share with the full path (errors, autograd, sharing, fork)."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest
import torch

from tensordict.memmap import MemoryMappedTensor


def test_empty_fast_path_keeps_shape_errors():
    MemoryMappedTensor.empty((2, 3))  # (2, 3) is now a validated shape
    MemoryMappedTensor.empty(())  # so is ()
    with pytest.raises(TypeError, match="shape must hold ints"):
        MemoryMappedTensor.empty((2.0, 3))  # equal (and hashed) like (2, 3)
    with pytest.raises(TypeError, match="a shape is required"):
        MemoryMappedTensor.empty()
    with pytest.raises(ValueError, match="negative dimension"):
        MemoryMappedTensor.empty((-2, 3))
    assert MemoryMappedTensor.empty((True, 3)).shape == (1, 3)  # operator.index accepts bools
    assert MemoryMappedTensor.empty(2, 3).shape == (2, 3)
    assert MemoryMappedTensor.empty(torch.Size([2, 3])).shape == (2, 3)
    assert MemoryMappedTensor.empty([2, 3]).shape == (2, 3)


@pytest.mark.parametrize("dtype", [None, torch.float64, torch.uint8, torch.bool, torch.complex64])
def test_empty_fast_path_results(dtype):
    for _ in range(2):  # the second call takes the fast path
        t = MemoryMappedTensor.empty((5, 7), dtype=dtype)
        assert type(t) is MemoryMappedTensor
        assert t.dtype == (dtype or torch.get_default_dtype())
        assert t.shape == (5, 7) and t.is_contiguous() and t.is_shared()
        assert t.filename is None and t._handler is not None
        assert not t.requires_grad and t.grad_fn is None
        assert (t == 0).all()  # shared memory starts zeroed
        assert t.storage_offset() * t.element_size() % 64 == 0


def test_empty_follows_default_dtype():
    MemoryMappedTensor.empty((4,))
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert MemoryMappedTensor.empty((4,)).dtype == torch.float64
        assert MemoryMappedTensor.zeros((4,)).dtype == torch.float64
    finally:
        torch.set_default_dtype(old)
    assert MemoryMappedTensor.empty((4,)).dtype == old


def test_small_tensors_do_not_share_bytes_or_version_counters():
    a = MemoryMappedTensor.zeros((8,))
    b = MemoryMappedTensor.zeros((8,))
    b.fill_(3.0)
    assert (a == 0).all()
    # autograd: a write into b must not look like a write into a (saved for backward)
    w = torch.ones(8, requires_grad=True)
    loss = (w * a).sum()
    b.add_(1.0)
    loss.backward()
    assert torch.equal(w.grad, a)


def test_views_retype_in_place_and_keep_their_file(tmp_path):
    t = MemoryMappedTensor.from_tensor(torch.arange(12.0).view(3, 4), filename=tmp_path / "x.memmap")
    for view in (t[1], t[:2], t[..., 1], t.view(-1), t.permute(1, 0), *t.unbind(0)):
        assert type(view) is MemoryMappedTensor and view.filename == t.filename
    assert type(t[torch.tensor([0, 2])]) is torch.Tensor  # advanced indexing copies
    assert type(t.clone()) is torch.Tensor and type(t + 1) is torch.Tensor
    anon = MemoryMappedTensor.from_tensor(torch.arange(4.0))
    assert anon[1:]._handler.shm is anon._handler.shm


def test_views_of_a_tensor_requiring_grad_are_detached():
    t = MemoryMappedTensor.from_tensor(torch.arange(4.0)).requires_grad_()
    row = t[1:]
    assert type(row) is MemoryMappedTensor and not row.requires_grad


def test_from_tensor_fast_path():
    src = torch.arange(6.0).view(2, 3)
    for _ in range(2):
        out = MemoryMappedTensor.from_tensor(src)
        assert type(out) is MemoryMappedTensor and out.is_shared() and torch.equal(out, src)
        assert out.untyped_storage().data_ptr() != src.untyped_storage().data_ptr()
    grad_src = torch.ones(3, requires_grad=True)
    out = MemoryMappedTensor.from_tensor(grad_src)
    assert not out.requires_grad and out.grad_fn is None
    assert MemoryMappedTensor.from_tensor(src, copy_data=False).eq(0).all()
    assert MemoryMappedTensor.from_tensor(torch.empty(0, 3)).shape == (0, 3)
    strided = torch.arange(12.0).view(3, 4).t()
    assert torch.equal(MemoryMappedTensor.from_tensor(strided), strided)


def _child_allocates(q) -> None:
    t = MemoryMappedTensor.empty((16,))
    t.fill_(7.0)
    q.put(True)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_does_not_allocate_from_the_parent_slab():
    MemoryMappedTensor.empty((16,))  # the parent has a current slab
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_allocates, args=(q,))
    p.start()
    assert q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    # the parent's next tensor: had the child cut from the same slab, it would read 7s
    assert (MemoryMappedTensor.empty((16,)) == 0).all()


def test_default_device_context_does_not_move_memmaps(tmp_path):
    # a memory-mapped tensor is CPU memory: the same on the first call (full path) and later ones
    with torch.device("meta"):
        for _ in range(2):
            for out in (
                MemoryMappedTensor.empty((3, 9)),
                MemoryMappedTensor.zeros((3, 9), dtype=torch.int16),
                MemoryMappedTensor.full((2,), fill_value=4.0),
                MemoryMappedTensor.empty((0, 9)),
                MemoryMappedTensor.from_tensor(torch.ones(3, device="cpu")),
                MemoryMappedTensor.empty((4,), filename=tmp_path / "x.memmap", existsok=True),
            ):
                assert type(out) is MemoryMappedTensor and out.device.type == "cpu"
