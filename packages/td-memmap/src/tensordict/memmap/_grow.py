"""Adding leaves to a published store: ``make_memmap``, ``make_memmap_from_storage``,
``make_memmap_from_tensor``.

The TensorDict must have been memory-mapped to a folder (``td.memmap_(prefix)``).
A new leaf is a new data file in the folder of its (nested) TensorDict; missing
nested TensorDicts get their own sub-folder and ``meta.json``. Each ``meta.json``
that changes is rewritten under a temporary name and renamed over the old one,
so a reader sees the old or the new metadata, never half of one. The TensorDicts
stay locked: the new key is added through the storage layer.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from tensordict.memmap._fileio import dtype_name
from tensordict.memmap._names import assign_names
from tensordict.memmap._store import META, read_meta
from tensordict.memmap._tensor import MemoryMappedTensor

__all__ = ["make_memmap", "make_memmap_from_storage", "make_memmap_from_tensor"]


def _key_tuple(key: Any) -> tuple:
    if isinstance(key, str):
        return (key,)
    out: list = []
    for part in key:
        out.extend(_key_tuple(part))
    if not out or not all(isinstance(p, str) for p in out):
        msg = f"expected a str or a nested key of str, got {key!r}."
        raise TypeError(msg)
    return tuple(out)


def _write_meta(folder: str, meta: dict) -> None:
    tmp = os.path.join(folder, f".{META}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="ascii") as f:
        json.dump(meta, f, allow_nan=True, separators=(",", ":"))
    os.replace(tmp, os.path.join(folder, META))


def _stem(meta: dict, key: str) -> str:
    taken = [e["key"] for e in meta.get("entries", []) if isinstance(e, dict) and isinstance(e.get("key"), str)]
    return assign_names([*taken, key])[key]


def _folder_of(td: Any) -> str:
    path = getattr(td, "_saved_path", None)
    if path is None or not os.path.isdir(path):
        msg = (
            "this TensorDict is not memory-mapped to a folder; call td.memmap_(prefix) first, then add leaves with "
            "make_memmap / make_memmap_from_storage / make_memmap_from_tensor."
        )
        raise RuntimeError(msg)
    return path


def _parent(td: Any, key: tuple) -> tuple[Any, str, dict]:
    """The TensorDict holding ``key[-1]`` (nested ones created on disk and in memory), its folder and meta."""
    from tensordict.ext import TensorDict, TensorDictBase

    node = td
    folder = _folder_of(td)
    meta = read_meta(folder)
    for part in key[:-1]:
        child = node._get_raw(part, None) if part in node._keys_raw() else None
        if child is not None:
            if not isinstance(child, TensorDictBase):
                msg = f"cannot add {key!r}: {part!r} holds a {type(child).__name__}, not a TensorDict."
                raise RuntimeError(msg)
            node, folder = child, _folder_of(child)
            meta = read_meta(folder)
            continue
        stem = _stem(meta, part)
        sub = os.path.join(folder, stem)
        os.mkdir(sub)
        sub_meta = {key_: value for key_, value in meta.items() if key_ in ("format", "version", "generation")}
        sub_meta.update(type="TensorDict", batch_size=list(node.batch_size), device=meta.get("device"),
                        names=None, entries=[])
        _write_meta(sub, sub_meta)
        meta.setdefault("entries", []).append({"key": part, "kind": "tensordict", "dir": stem})
        _write_meta(folder, meta)
        child = TensorDict._new_unsafe({}, node.batch_size, node.device, None)
        child._saved_path = sub
        child._is_memmap = True
        node._set_raw(part, child)
        if node.is_locked:
            child.lock_()
        node, folder, meta = child, sub, sub_meta
    if key[-1] in node._keys_raw():
        msg = f"The key {key!r} already exists within the target tensordict. Delete it first."
        raise RuntimeError(msg)
    return node, folder, meta


def _add(td: Any, key: Any, build: Any) -> MemoryMappedTensor:
    key = _key_tuple(key)
    node, folder, meta = _parent(td, key)
    stem = _stem(meta, key[-1])
    path = os.path.join(folder, stem + ".memmap")
    tensor = build(path)
    bs = tuple(node.batch_size)
    entry: dict = {"key": key[-1], "kind": "tensor", "file": stem + ".memmap", "dtype": dtype_name(tensor.dtype)}
    if tensor.is_nested:
        sizes = tensor._nested_tensor_size()
        if bs:
            os.unlink(path)
            msg = f"a nested tensor can only be added to a TensorDict with an empty batch size, not {bs}."
            raise RuntimeError(msg)
        entry.update(nested_shape=sizes.tolist(), shape=[int(sizes.shape[0])],
                     nbytes=int(sizes.prod(-1).sum()) * tensor.element_size())
    else:
        if tuple(tensor.shape[: len(bs)]) != bs:
            os.unlink(path)
            msg = f"cannot add {key!r} of shape {tuple(tensor.shape)}: it must start with the batch size {bs}."
            raise RuntimeError(msg)
        entry.update(shape=list(tensor.shape), nbytes=tensor.numel() * tensor.element_size())
    meta.setdefault("entries", []).append(entry)
    _write_meta(folder, meta)
    node._set_raw(key[-1], tensor)
    return tensor


def make_memmap(td: Any, key: Any, shape: Any, *, dtype: torch.dtype | None = None) -> MemoryMappedTensor:
    """Adds an empty (zero-filled) memory-mapped leaf ``key`` to the store ``td`` was saved to.

    Args:
        key (NestedKey): the new key; missing nested TensorDicts are created.
        shape (torch.Size or a 2-d tensor of shapes): the leaf's shape (starting with
            the batch size), or per-element shapes for a nested tensor.

    Keyword Args:
        dtype (torch.dtype, optional): defaults to ``torch.get_default_dtype()``.

    Returns:
        MemoryMappedTensor: the new leaf (also in ``td``, which stays locked).

    Raises:
        RuntimeError: ``td`` is not memory-mapped to a folder, or ``key`` exists.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as path:
        ...     td = TensorDict({}, [3]).memmap_(path)
        ...     t = td.make_memmap(("obs", "pixels"), shape=(3, 4), dtype=torch.uint8)
        ...     (t.shape, TensorDict.load_memmap(path)["obs", "pixels"].shape)
        (torch.Size([3, 4]), torch.Size([3, 4]))
    """
    return _add(td, key, lambda path: MemoryMappedTensor.empty(shape, dtype=dtype, filename=path))


def make_memmap_from_storage(td: Any, key: Any, storage: torch.UntypedStorage, shape: Any, *,
                             dtype: torch.dtype | None = None) -> MemoryMappedTensor:
    """Adds the leaf ``key``, a memory-mapped file holding ``storage``'s bytes.

    A storage mapped from a file can only be used for that same file (the path the
    new leaf gets); anonymous storages are copied into the new file.

    Args:
        key (NestedKey): the new key; missing nested TensorDicts are created.
        storage (torch.UntypedStorage): the bytes of the leaf.
        shape (torch.Size): the leaf's shape (starting with the batch size).

    Keyword Args:
        dtype (torch.dtype, optional): defaults to ``torch.get_default_dtype()``.

    Raises:
        RuntimeError: the storage maps another file, or ``key`` exists.
    """
    def build(path: str) -> MemoryMappedTensor:
        fname = getattr(storage, "filename", None)
        if fname and os.path.abspath(fname) != os.path.abspath(path):
            msg = (
                f"Providing a storage with an associated filename ({fname!r}) that differs from the leaf's file "
                f"({path!r}) is not supported: pass a tensor to make_memmap_from_tensor to copy it."
            )
            raise RuntimeError(msg)
        dt = dtype or torch.get_default_dtype()
        flat = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),))  # type: ignore[call-overload]
        if _is_nested(shape):
            count = int(torch.as_tensor(shape).prod(-1).sum())
            data = flat[: count * dt.itemsize].view(dt)
            nested = torch.nested.nested_tensor([t.clone() for t in data.split(
                torch.as_tensor(shape).prod(-1).tolist())])
            return MemoryMappedTensor.from_tensor(
                torch.nested.nested_tensor([n.view(*s) for n, s in zip(nested.unbind(), torch.as_tensor(shape).tolist())]),
                filename=path, existsok=True)
        size = tuple(shape)
        count = 1
        for s in size:
            count *= int(s)
        data = flat[: count * dt.itemsize].clone().view(dt).view(size)
        return MemoryMappedTensor.from_tensor(data, filename=path, existsok=True)

    return _add(td, key, build)


def make_memmap_from_tensor(td: Any, key: Any, tensor: torch.Tensor, *, copy_data: bool = True) -> MemoryMappedTensor:
    """Adds the leaf ``key``: a copy of ``tensor`` in a new memory-mapped file (``copy_data=False``: zeros).

    Args:
        key (NestedKey): the new key; missing nested TensorDicts are created.
        tensor (torch.Tensor): the leaf's values (its shape starts with the batch size).

    Keyword Args:
        copy_data (bool): copy the values (``False``: the file holds zeros). Defaults
            to ``True``.

    Raises:
        RuntimeError: ``key`` exists.
    """
    return _add(td, key, lambda path: MemoryMappedTensor.from_tensor(tensor, filename=path, copy_existing=True,
                                                                      copy_data=copy_data))


def _is_nested(shape: Any) -> bool:
    return isinstance(shape, torch.Tensor) and shape.ndim == 2
