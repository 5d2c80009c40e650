"""Growing a saved store along its first batch dimension (:func:`append_memmap`).

An append never rewrites existing bytes: each data file grows by the new rows, and
each folder's ``meta.json`` is replaced (through a temporary file) once every file
has grown. Before the first byte is written, a journal (``.td-append.json`` at the
root of the store) records every file's size, every ``meta.json`` and every file the
append creates. A failed append rolls back from it at once; an append killed midway
leaves it behind, and then:

* :func:`~tensordict.memmap.load_memmap` refuses the store (``RuntimeError``) and says
  how to repair it;
* the next :func:`append_memmap` (``rows=None`` only repairs) rolls the store back to
  the rows it held before, then appends.

Readers that mapped the store before an append keep seeing the old rows (files only
grow); a new :func:`load_memmap` sees every row. Use one writer at a time.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import torch

from tensordict.ext import NonTensorData, NonTensorStack, TensorDictBase
from tensordict.ext import lookup_memmap_object as lookup_object
from tensordict.memmap._fileio import _contiguous_pieces, _write_pieces, dtype_from_name
from tensordict.memmap._names import assign_names, member_path
from tensordict.memmap._store import JOURNAL, META, fsync_path, new_generation, read_meta
from tensordict.memmap._upstream import is_upstream_meta
from tensordict.memmap._values import dump_pickle, json_faithful, load_pickle

__all__ = ["JOURNAL", "append_memmap", "interrupted_append"]


def interrupted_append(root: str) -> str | None:
    """The journal path when an append to the store at ``root`` was interrupted, else ``None``."""
    path = os.path.join(root, JOURNAL)
    return path if os.path.lexists(path) else None


class _Plan:
    def __init__(self, root: str, allow_pickle: bool) -> None:
        self.root = root
        self.allow_pickle = allow_pickle
        self.generation = new_generation()
        self.rows = -1  # rows appended (the first batch dim of ``rows``)
        self.grow: list[tuple[str, torch.Tensor, int]] = []  # (file, rows' values, current size)
        self.created: list[str] = []  # files the append creates
        self.pickles: list[tuple[str, Any, str]] = []  # (new pickle file, payload, key)
        self.obsolete: list[str] = []  # files no longer referenced once the append is complete
        self.old_metas: list[tuple[str, dict]] = []
        self.new_metas: list[tuple[str, dict]] = []  # children first: the root's is the last


def _error(folder: str, msg: str) -> RuntimeError:
    return RuntimeError(f"append_memmap to {os.path.join(folder, META)!r}: {msg}")


def _inner(value: Any) -> Any:
    """A registered type (tensorclass...) as the TensorDict its store folder holds."""
    if isinstance(value, TensorDictBase):
        return value
    reg = lookup_object(value)
    if reg is None:
        return value
    inner, _extra = reg.save_fn(value)
    return inner


def _flat_items(value: Any) -> list:
    if isinstance(value, NonTensorStack):
        return list(value._items)
    return [value.data] * math.prod(value.batch_size)


def _plan_non_tensor(folder: str, entry: dict, value: Any, bs: list[int], plan: _Plan, stems: dict) -> dict:
    key = entry["key"]
    if not isinstance(value, (NonTensorData, NonTensorStack)):
        raise _error(folder, f"key {key!r} holds non-tensor data; the rows give a {type(value).__name__}.")
    old_bs = entry.get("batch_size")
    new = dict(entry)
    new["batch_size"] = bs
    if entry.get("encoding") == "pickle":
        if not plan.allow_pickle:
            msg = (f"key {key!r} is stored with pickle; appending to it reads it back, which can run arbitrary "
                   "code. Pass allow_pickle=True if you trust this store.")
            raise _error(folder, msg)
        old_path = member_path(folder, entry.get("file"), plan.root, "pickle file")
        old = load_pickle(old_path, key, True)
        old_items = old if entry["kind"] == "non_tensor_stack" else [old] * math.prod(old_bs)  # type: ignore[arg-type]
        plan.obsolete.append(old_path)
    else:
        old = entry.get("value")
        if entry["kind"] == "non_tensor" and isinstance(value, NonTensorData) and value.data == old \
                and type(value.data) is type(old):
            return new  # one value for every row, the new ones included
        old_items = old if entry["kind"] == "non_tensor_stack" else [old] * math.prod(old_bs)  # type: ignore[arg-type]
    items = list(old_items) + _flat_items(value)
    new["kind"] = "non_tensor_stack"
    new.pop("value", None)
    new.pop("file", None)
    if json_faithful(items):
        new["encoding"] = "json"
        new["value"] = items
    else:
        new["encoding"] = "pickle"
        new["file"] = f"{stems[key]}~{plan.generation[:12]}.pkl"
        path = os.path.join(folder, new["file"])
        plan.pickles.append((path, items, key))
        plan.created.append(path)
    return new


def _plan_tensor(folder: str, entry: dict, value: Any, plan: _Plan, stems: dict) -> dict:
    key = entry["key"]
    if not isinstance(value, torch.Tensor) or value.is_nested:
        raise _error(folder, f"key {key!r} holds a tensor; the rows give a {type(value).__name__}.")
    if "nested_shape" in entry:
        raise _error(folder, f"key {key!r} is a nested tensor, which has no batch dimension to grow.")
    dtype = dtype_from_name(entry.get("dtype"), os.path.join(folder, META))
    shape = entry.get("shape")
    if value.dtype != dtype or list(value.shape[1:]) != shape[1:]:  # type: ignore[index]
        msg = (f"key {key!r} is stored as {dtype} of shape {tuple(shape)}; the rows give {value.dtype} of shape "  # type: ignore[arg-type]
               f"{tuple(value.shape)} (rows must match every dim but the first, and the dtype).")
        raise _error(folder, msg)
    value = value.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    value = value.resolve_conj().resolve_neg()
    nbytes = entry.get("nbytes", 0)
    name = entry.get("file")
    if name is None:  # an empty leaf (no file yet)
        name = stems[key] + ".memmap"
        path = member_path(folder, name, plan.root, "data file", strict=False)
        if os.path.lexists(path):
            raise _error(folder, f"the file {name!r} for key {key!r} exists but the metadata does not name it.")
        plan.created.append(path)
        size = 0
    else:
        path = member_path(folder, name, plan.root, "data file")
        size = os.path.getsize(path)
        if size != nbytes:
            raise _error(folder, f"the file of key {key!r} holds {size} bytes, the metadata {nbytes}: the store is "
                                 "damaged; nothing was appended.")
    plan.grow.append((path, value, size))
    new = dict(entry)
    new["shape"] = [shape[0] + value.shape[0], *shape[1:]]  # type: ignore[index]
    new["nbytes"] = nbytes + value.numel() * value.element_size()
    new["file"] = name if new["nbytes"] else None
    return new


def _plan_folder(folder: str, meta: dict, rows: Any, plan: _Plan) -> None:
    if meta.get("type") != "TensorDict":
        raise _error(folder, f"appending to a {meta.get('type')} is not supported (only TensorDict folders).")
    rows = _inner(rows)
    if not isinstance(rows, TensorDictBase):
        raise _error(folder, f"the rows must be a TensorDict (or a tensorclass), got {type(rows).__name__}.")
    bs = list(meta.get("batch_size") or [])
    if not bs:
        raise _error(folder, "the store has no batch dimension to append along (batch_size=[]).")
    rbs = list(rows.batch_size)
    if len(rbs) != len(bs) or rbs[1:] != bs[1:] or (plan.rows >= 0 and rbs[0] != plan.rows):
        expect = [plan.rows if plan.rows >= 0 else "n", *bs[1:]]
        raise _error(folder, f"the store has batch_size {bs}; the rows must have batch_size {expect}, got {rbs}.")
    plan.rows = rbs[0]
    entries = meta.get("entries") or []
    stored = [e["key"] for e in entries]
    given = list(rows._keys_raw())
    if set(stored) != set(given):
        missing = sorted(set(stored) - set(given))
        extra = sorted(set(given) - set(stored))
        raise KeyError(f"append_memmap to {folder!r}: the rows must have the stored keys: missing {missing}, "
                       f"not in the store {extra}.")
    stems = assign_names(stored)
    new_bs = [bs[0] + plan.rows, *bs[1:]]
    new_entries = []
    for entry in entries:
        key, kind = entry["key"], entry.get("kind")
        value = rows._get_raw(key)
        if kind == "tensor":
            new_entries.append(_plan_tensor(folder, entry, value, plan, stems))
        elif kind in ("non_tensor", "non_tensor_stack"):
            new_entries.append(_plan_non_tensor(folder, entry, value, new_bs, plan, stems))
        elif kind == "tensordict":
            sub = member_path(folder, entry.get("dir"), plan.root, "sub-folder")
            _plan_folder(sub, read_meta(sub), value, plan)
            new_entries.append(entry)
        else:
            raise _error(folder, f"unknown entry kind {kind!r} for key {key!r}.")
    new = dict(meta)
    new.update(batch_size=new_bs, shape=new_bs, generation=plan.generation, entries=new_entries)
    plan.old_metas.append((folder, meta))
    plan.new_metas.append((folder, new))


def _write_json(path: str, value: Any, fsync: bool) -> None:
    tmp = path + ".append-tmp"
    with open(tmp, "w", encoding="ascii") as f:
        json.dump(value, f, allow_nan=True, separators=(",", ":"))
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def _rollback(root: str, journal: dict) -> None:
    """Puts the store back as the journal recorded it (idempotent), then removes the journal."""
    for path, size in journal.get("files", {}).items():
        full = os.path.join(root, path)
        if os.path.isfile(full) and not os.path.islink(full) and os.path.getsize(full) > size:
            os.truncate(full, size)
    for path in journal.get("created", []):
        full = os.path.join(root, path)
        if os.path.lexists(full):
            os.remove(full)
    for folder, meta in journal.get("metas", []):
        _write_json(os.path.join(root, folder, META), meta, False)
    os.remove(os.path.join(root, JOURNAL))


def _read_journal(root: str) -> dict:
    path = os.path.join(root, JOURNAL)
    if os.path.islink(path) or not os.path.isfile(path):
        msg = f"{path!r} is not a regular file: the store is damaged; remove it by hand if you know why it is there."
        raise RuntimeError(msg)
    with open(path, encoding="ascii") as f:
        journal = json.load(f)
    for rel in [*journal.get("files", {}), *journal.get("created", []), *(m[0] for m in journal.get("metas", []))]:
        full = os.path.realpath(os.path.join(root, rel))
        if os.path.commonpath([full, root]) != root:
            msg = f"{path!r} names {rel!r}, outside the store: refusing to repair from it."
            raise RuntimeError(msg)
    return journal


def append_memmap(prefix: str | Path, rows: Any, *, allow_pickle: bool | None = None, fsync: bool = False) -> None:
    """Appends ``rows`` to the store saved at ``prefix``, along its first batch dimension.

    Each data file grows by the bytes of the new rows; nothing already written is
    rewritten. The store's ``meta.json`` files are replaced once every file has grown,
    so a failed append leaves the store as it was (a journal at the root of the store
    rolls it back, at once or, after a killed process, on the next append). Readers that
    mapped the store before keep their rows; :func:`load_memmap` afterwards sees all.

    Args:
        prefix (str or Path): a folder written by ``memmap``/``memmap_``/``save``
            (not an archive).
        rows (TensorDict or tensorclass): the same keys, dtypes and non-batch shapes
            as the store, batch size ``[n, *batch_size[1:]]``. Non-tensor values are
            appended too (a value shared by every row stays one value). ``None`` only
            repairs an interrupted append.

    Keyword Args:
        allow_pickle (bool, optional): needed when a pickled non-tensor value of the
            store must be read back to be extended. Defaults to ``None`` (``False``).
        fsync (bool): flush the grown files and the new metadata to stable storage.

    Raises:
        RuntimeError: ``prefix`` is not a folder store, holds a lazy stack, has no batch
            dimension, or the rows do not match it; a pickled value must be read and
            ``allow_pickle`` is not ``True``.
        KeyError: the rows do not have exactly the stored keys.
        TypeError: ``allow_pickle`` is not a bool or ``None``.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict, append_memmap
        >>> with tempfile.TemporaryDirectory() as path:
        ...     _ = TensorDict(a=torch.zeros(2, 3), b={"c": torch.zeros(2)}, batch_size=[2]).memmap(path)
        ...     append_memmap(path, TensorDict(a=torch.ones(3, 3), b={"c": torch.ones(3)}, batch_size=[3]))
        ...     td = TensorDict.load_memmap(path)
        ...     (td.batch_size, td["a"][:, 0].tolist())
        (torch.Size([5]), [0.0, 0.0, 1.0, 1.0, 1.0])
    """
    if allow_pickle is not None and allow_pickle.__class__ is not bool:
        msg = f"allow_pickle must be a bool or None, got {allow_pickle!r} of type {type(allow_pickle).__name__}."
        raise TypeError(msg)
    root = os.path.realpath(os.path.abspath(os.fspath(prefix)))
    if not os.path.isdir(root):
        what = "an archive" if os.path.isfile(root) else "missing"
        msg = (f"append_memmap: {root!r} is {what}; only a folder store can grow (unpack an archive with "
               "unpack_memmap(), append, then pack_memmap()).")
        raise RuntimeError(msg)
    if interrupted_append(root):
        _rollback(root, _read_journal(root))
    if rows is None:
        return
    meta = read_meta(root)
    if is_upstream_meta(meta):
        msg = (f"append_memmap: {root!r} was written by the tensordict package; load it and save it again with "
               "memmap() to append to it.")
        raise RuntimeError(msg)
    plan = _Plan(root, bool(allow_pickle))
    _plan_folder(root, meta, rows, plan)
    rel = lambda p: os.path.relpath(p, root)  # noqa: E731
    journal = {
        "files": {rel(path): size for path, _, size in plan.grow if path not in plan.created},
        "created": [rel(p) for p in plan.created],
        "metas": [(rel(folder), meta) for folder, meta in plan.old_metas],
    }
    _write_json(os.path.join(root, JOURNAL), journal, fsync)
    try:
        for path, value, size in plan.grow:
            if value.numel() == 0:
                continue
            if path in plan.created:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
                os.close(fd)
            os.truncate(path, size + value.numel() * value.element_size())
            _write_pieces(path, [(piece, off) for piece, off, _ in _contiguous_pieces(value, size)])
            if fsync:
                fsync_path(path)
        for path, payload, key in plan.pickles:
            dump_pickle(path, payload, key)
        for folder, new in plan.new_metas:  # children first, the root last
            _write_json(os.path.join(folder, META), new, fsync)
    except BaseException:
        _rollback(root, journal)
        raise
    os.remove(os.path.join(root, JOURNAL))
    for path in plan.obsolete:
        if os.path.lexists(path):
            os.remove(path)

