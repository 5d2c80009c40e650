"""Stores of TensorDicts nested 1,000 levels deep: save, load, memmap_like and memmap_
work under the default recursion limit (issue 21), a link planted deep in the store is
still refused, and loading stays linear in the depth (each folder checks only its own
new path component).

Folder names are one character so that the deepest path (about two characters per
level) stays under the file system's PATH_MAX (4,096 bytes on Linux): a store is a tree
of real folders, as in tensordict's own format."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from tensordict import TensorDict
from tensordict.memmap import MemoryMappedTensor

DEPTH = 1_000
PATH = ("a",) * DEPTH


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000)
    yield
    sys.setrecursionlimit(old)


def remove_tree(root) -> None:
    """Deletes a folder tree without recursion. pytest later removes old ``tmp_path``
    folders with ``shutil.rmtree``, which recurses once per level on Python 3.11 and
    fails on a 1,000-deep tree (breaking the end of a later pytest session)."""
    todo = [(os.fspath(root), False)]
    while todo:
        path, emptied = todo.pop()
        if emptied:
            os.rmdir(path)
            continue
        todo.append((path, True))
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    todo.append((entry.path, False))
                else:
                    os.unlink(entry.path)


@pytest.fixture
def store_dir(tmp_path):
    """``tmp_path``, emptied without recursion after the test."""
    yield tmp_path
    for entry in os.listdir(tmp_path):
        path = os.path.join(tmp_path, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            remove_tree(path)
        else:
            os.unlink(path)


def chain() -> TensorDict:
    td = TensorDict(batch_size=[4])
    td.set(PATH + ("leaf",), torch.arange(8.0).view(4, 2))
    td.set(PATH[:500] + ("mid",), torch.ones(4, 3))
    return td


def test_save_and_load_a_deep_store(store_dir):
    td = chain()
    saved = td.memmap(store_dir / "s")
    assert isinstance(saved.get(PATH + ("leaf",)), MemoryMappedTensor)
    assert saved.get(PATH).is_locked
    loaded = TensorDict.load_memmap(store_dir / "s")
    assert torch.equal(loaded.get(PATH + ("leaf",)), torch.arange(8.0).view(4, 2))
    assert torch.equal(loaded.get(PATH[:500] + ("mid",)), torch.ones(4, 3))
    assert loaded.get(PATH).batch_size == torch.Size([4])
    assert isinstance(loaded.get(PATH + ("leaf",)), MemoryMappedTensor)
    deepest = os.path.join(store_dir, "s", *PATH)
    assert os.path.isfile(os.path.join(deepest, "meta.json"))


def test_memmap_like_and_in_place(store_dir):
    td = chain()
    like = td.memmap_like(store_dir / "like")
    assert torch.equal(like.get(PATH + ("leaf",)), torch.zeros(4, 2))
    copy = td.clone()
    copy.memmap_(store_dir / "inplace")
    assert isinstance(copy.get(PATH + ("leaf",)), MemoryMappedTensor)
    copy.get(PATH + ("leaf",)).add_(1)  # writes through to the file
    again = TensorDict.load_memmap(store_dir / "inplace")
    assert torch.equal(again.get(PATH + ("leaf",)), torch.arange(8.0).view(4, 2) + 1)


def test_a_link_deep_in_the_store_is_refused(store_dir):
    chain().memmap(store_dir / "s")
    parent = os.path.join(store_dir, "s", *PATH[:700])
    target = os.path.join(parent, "a")
    moved = os.path.join(store_dir, "elsewhere")
    os.rename(target, moved)
    os.symlink(moved, target)
    with pytest.raises(RuntimeError, match="symbolic link"):
        TensorDict.load_memmap(store_dir / "s")
