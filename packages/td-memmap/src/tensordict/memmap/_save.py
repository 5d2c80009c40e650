"""Writing a TensorDict (or lazy stack, or registered type) to a folder tree.

Three phases:

1. *plan*: walk the structure once; create the folders, allocate every data file
   (sparse, sized) inside a staging folder, queue the write jobs, pickle the
   non-JSON non-tensor values, and build each folder's ``meta.json`` content;
2. *write*: run the jobs (threads when ``num_threads > 1``), then write the
   metadata files, children before parents;
3. *publish and build*: commit the staging folder (see ``_store.py``), then map
   the published files into the resulting TensorDict, or into the original one
   for the in-place variants.

Layout of one folder (``meta.json`` always; the rest as the keys require)::

    meta.json          {"format": "td-memmap", "version": 1, "type": "TensorDict", "batch_size": [...],
                        "shape": [...] (= batch_size, the name tensordict's stores use; not read back),
                        "device": ..., "names": ..., "entries": [{"key": ..., "kind": ..., ...}, ...]}
    <stem>.memmap      raw bytes of a tensor leaf (C-contiguous); none for an empty tensor ("file": null)
    <stem>.pkl         a pickled non-tensor value (read only with allow_pickle=True)
    <stem>/            a nested TensorDict (its own meta.json: it loads on its own)

A lazy stack folder has ``"type": "LazyStackedTensorDict"``, ``"stack_dim"`` and
``"stack": ["0", "1", ...]``, one sub-folder per stacked TensorDict.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from tensordict.ext import (
    MemmapType,
    NonTensorData,
    NonTensorStack,
    TensorDictBase,
    set_write_hook,
    trampoline,
)
from tensordict.ext import lookup_memmap_object as lookup_object
from tensordict.memmap._fileio import DTYPES, allocate, dtype_name, run_jobs, write_tensor_jobs
from tensordict.memmap._names import assign_names
from tensordict.memmap._stack_sink import StackFileSink
from tensordict.memmap._store import FORMAT, META, Staging, fsync_path, new_generation
from tensordict.memmap._tensor import MemoryMappedTensor, _DisableTF, _map_file
from tensordict.memmap._values import dump_pickle, json_faithful

__all__ = ["save_tree", "is_lazy_stack", "make_lazy_stack", "VERSION"]

VERSION = 1


# --------------------------------------------------------------------------- lazy stacks
def _lazy_module() -> Any:
    try:
        import tensordict.ext as mod  # LazyStackedTensorDict loads on first read
    except ImportError:
        return None
    return mod


def is_lazy_stack(obj: Any) -> bool:
    mod = _lazy_module()
    cls = getattr(mod, "LazyStackedTensorDict", None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def make_lazy_stack(tds: list, stack_dim: int, where: str, batch_size: Any = None, names: Any = None) -> Any:
    mod = _lazy_module()
    cls = getattr(mod, "LazyStackedTensorDict", None) if mod is not None else None
    if cls is None:
        msg = f"{where}: the store holds a LazyStackedTensorDict, which this td-core does not provide."
        raise RuntimeError(msg)
    out = cls(*tds, stack_dim=stack_dim, batch_size=batch_size)
    if names is not None:
        out.names = names
    return out


# --------------------------------------------------------------------------- plan nodes
class _Leaf:
    __slots__ = ("final", "dtype", "shape", "reuse", "source")

    def __init__(self, final: str | None, dtype: torch.dtype, shape: tuple, reuse: Any, source: Any) -> None:
        self.final, self.dtype, self.shape, self.reuse, self.source = final, dtype, shape, reuse, source


class _Folder:
    __slots__ = ("obj", "inner", "final", "reg", "extra", "entries", "children", "lazy")

    def __init__(self, obj: Any, inner: Any, final: str | None, reg: MemmapType | None, extra: dict | None) -> None:
        self.obj, self.inner, self.final, self.reg, self.extra = obj, inner, final, reg, extra
        self.lazy = False
        self.entries: list[tuple[str, Any]] = []
        self.children: list[_Folder] = []


class _Ctx:
    def __init__(self, like: bool, copy_existing: bool, anonymous: bool, fsync: bool = False) -> None:
        self.like = like
        self.copy_existing = copy_existing
        self.anonymous = anonymous
        self.fsync = fsync
        self.generation = new_generation()
        self.jobs: list = []
        self.metas: list[tuple[str, dict]] = []
        self.files: list[str] = []


def _is_full_file(t: MemoryMappedTensor) -> bool:
    with _DisableTF():
        if t.storage_offset() != 0 or not t.is_contiguous():
            return False
        nbytes = t.numel() * t.element_size()
        if nbytes != t.untyped_storage().nbytes():
            return False
    try:
        return os.path.getsize(t._filename) == nbytes  # type: ignore[arg-type]
    except OSError:
        return False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _plan_tensor(value: torch.Tensor, stage: str | None, final: str | None, key: str, ctx: _Ctx) -> _Leaf:
    dtype, shape = value.dtype, tuple(value.shape)
    if ctx.anonymous:
        reuse = value if isinstance(value, MemoryMappedTensor) and not ctx.like else None
        return _Leaf(None, dtype, shape, reuse, value)
    assert stage is not None and final is not None
    nbytes = value.numel() * value.element_size()
    if nbytes == 0:  # no file: shape and dtype in the metadata are all there is
        return _Leaf(None, dtype, shape, None, value)
    if ctx.like:
        allocate(stage, nbytes, existsok=False)
        return _Leaf(final, dtype, shape, None, None)
    if isinstance(value, MemoryMappedTensor) and value._filename is not None and _is_full_file(value):
        if _same_file(value._filename, final):
            try:
                os.link(final, stage)
                return _Leaf(final, dtype, shape, value, None)
            except OSError:
                pass  # no hard links here: copy instead
        elif not ctx.copy_existing:
            msg = (
                "A filename was provided but the tensor already has a file associated: "
                f"key {key!r} is already memory-mapped to {value._filename!r}; saving it to {final!r} would "
                "duplicate the file. Pass copy_existing=True to copy it."
            )
            raise RuntimeError(msg)
    ctx.jobs.extend(write_tensor_jobs(stage, value))
    return _Leaf(final, dtype, shape, None, None)


def _plan_nested(value: torch.Tensor, stage: str | None, final: str | None, key: str, ctx: _Ctx) -> tuple:
    """A nested (per-element shapes) leaf: its elements packed one after the other in one file.

    Returns the leaf to build and its metadata entry (without ``"file"``): ``"shape"`` is
    ``[number of elements]`` and ``"nested_shape"`` lists each element's shape.
    """
    if value.layout is not torch.strided:
        msg = f"cannot memory-map key {key!r}: nested tensors of layout {value.layout} are not supported (only torch.strided)."
        raise TypeError(msg)
    sizes = value._nested_tensor_size()
    elements = value.unbind()
    entry = {
        "key": key, "kind": "tensor", "dtype": dtype_name(value.dtype), "shape": [len(elements)],
        "nested_shape": sizes.tolist(), "nbytes": sum(e.numel() for e in elements) * value.element_size(),
    }
    if ctx.anonymous:
        reuse = value if isinstance(value, MemoryMappedTensor) and not ctx.like else None
        return _Leaf(None, value.dtype, sizes, reuse, value), entry  # type: ignore[arg-type]
    assert stage is not None
    if ctx.like:
        allocate(stage, entry["nbytes"], existsok=False)  # type: ignore[arg-type]
    else:
        flat = torch.cat([e.detach().reshape(-1).cpu() for e in elements]) if elements else value.new_empty(0)
        ctx.jobs.extend(write_tensor_jobs(stage, flat))
    return _Leaf(final, value.dtype, sizes, None, None), entry  # type: ignore[arg-type]


def _non_tensor_entry(key: str, value: Any, stem: str, stage: str | None) -> dict:
    if value.__class__ is NonTensorData or isinstance(value, NonTensorData):
        entry: dict = {"key": key, "kind": "non_tensor", "batch_size": list(value.batch_size)}
        payload = value.data
    else:
        entry = {"key": key, "kind": "non_tensor_stack", "batch_size": list(value.batch_size)}
        payload = list(value._items)
    if json_faithful(payload):
        entry["encoding"] = "json"
        entry["value"] = payload
    else:
        entry["encoding"] = "pickle"
        entry["file"] = stem + ".pkl"
        if stage is not None:
            dump_pickle(os.path.join(stage, entry["file"]), payload, key)
    return entry


def _plan(obj: Any, stage: str | None, final: str | None, ctx: _Ctx) -> _Folder:
    """The plan of the store of ``obj`` (folders made, files allocated): nested TensorDicts at
    any depth, walked without recursion by :func:`tensordict.ext.trampoline`."""
    return trampoline(_plan_node, obj, stage, final, ctx)


def _plan_node(obj: Any, stage: str | None, final: str | None, ctx: _Ctx) -> Generator[tuple, Any, _Folder]:
    """One folder of :func:`_plan`; a nested folder is yielded and its plan sent back (each
    child finishes, its ``meta.json`` queued, before its parent's)."""
    reg = None
    extra = None
    inner = obj
    if not isinstance(obj, TensorDictBase):
        reg = lookup_object(obj)
        if reg is None:
            msg = f"cannot memory-map an object of type {type(obj).__name__}: it is not a TensorDict nor a registered type."
            raise TypeError(msg)
        inner, extra = reg.save_fn(obj)
        if not isinstance(inner, TensorDictBase) or not isinstance(extra, dict) or not json_faithful(extra):
            msg = f"save_fn of registered type {reg.name!r} must return (TensorDictBase, JSON-serialisable dict)."
            raise TypeError(msg)
    folder = _Folder(obj, inner, final, reg, extra)
    device = inner.device
    meta: dict = {
        "format": FORMAT,
        "version": VERSION,
        "batch_size": list(inner.batch_size),
        "shape": list(inner.batch_size),  # the field name tensordict's own stores use
        "device": str(device) if device is not None else None,
        "generation": ctx.generation,
    }
    if reg is not None:
        meta["registered"] = {"name": reg.name, "extra": extra}
    if is_lazy_stack(inner):
        subs = list(inner.tensordicts)
        names = [str(i) for i in range(len(subs))]
        meta.update(type="LazyStackedTensorDict", stack_dim=int(inner.stack_dim), stack=names,
                    names=inner.names if inner._has_names() else None)
        folder.lazy = True
        for name, sub in zip(names, subs):
            sub_stage = sub_final = None
            if stage is not None:
                sub_stage, sub_final = os.path.join(stage, name), os.path.join(final, name)  # type: ignore[arg-type]
                os.mkdir(sub_stage)
            folder.children.append((yield (sub, sub_stage, sub_final, ctx)))
    else:
        names_attr = inner.names if inner._has_names() else None
        meta.update(type="TensorDict", names=names_attr)
        items = list(inner._items_raw())
        stems = assign_names(k for k, _ in items)
        entries = []
        for key, value in items:
            stem = stems[key]
            if isinstance(value, torch.Tensor):
                dtensor_mod = sys.modules.get("torch.distributed.tensor")
                if dtensor_mod is not None and isinstance(value, dtensor_mod.DTensor):
                    # a distributed tensor: save the full tensor (gathering is a collective:
                    # the other ranks of its mesh gather too)
                    value = value.full_tensor()
                if dtype_name(value.dtype) not in DTYPES:
                    msg = f"cannot memory-map key {key!r}: dtype {value.dtype} is not supported (not plain bytes)."
                    raise TypeError(msg)
                file = stem + ".memmap"
                s = os.path.join(stage, file) if stage is not None else None
                f = os.path.join(final, file) if final is not None else None
                if value.is_nested:
                    leaf, entry = _plan_nested(value, s, f, key, ctx)
                    folder.entries.append((key, leaf))
                    entries.append({"file": file, **entry})
                    continue
                leaf = _plan_tensor(value, s, f, key, ctx)
                folder.entries.append((key, leaf))
                nbytes = value.numel() * value.element_size()
                entries.append({
                    "key": key, "kind": "tensor", "file": file if nbytes else None, "dtype": dtype_name(value.dtype),
                    "shape": list(value.shape), "nbytes": nbytes,
                })
            elif isinstance(value, (NonTensorData, NonTensorStack)):
                entries.append(_non_tensor_entry(key, value, stem, stage))
                folder.entries.append((key, value))
            elif isinstance(value, TensorDictBase) or lookup_object(value) is not None:
                s = f = None
                if stage is not None:
                    s, f = os.path.join(stage, stem), os.path.join(final, stem)  # type: ignore[arg-type]
                    if os.path.islink(f):
                        msg = (f"cannot memory-map key {key!r}: refusing to save a nested TensorDict through symlink "
                               f"{f!r} (it points to {os.path.realpath(f)!r}). Remove the link or save to another "
                               "folder.")
                        raise RuntimeError(msg)
                    os.mkdir(s)
                folder.entries.append((key, (yield (value, s, f, ctx))))
                entries.append({"key": key, "kind": "tensordict", "dir": stem})
            else:
                msg = f"cannot memory-map key {key!r}: values of type {type(value).__name__} are not supported."
                raise TypeError(msg)
        meta["entries"] = entries
    if stage is not None:
        ctx.metas.append((os.path.join(stage, META), meta))
    return folder


# --------------------------------------------------------------------------- build
def _leaf_value(leaf: _Leaf, like: bool) -> Any:
    if leaf.reuse is not None:
        return leaf.reuse
    if isinstance(leaf.shape, torch.Tensor):  # a nested leaf: element shapes
        if leaf.final is not None:
            return MemoryMappedTensor.from_filename(leaf.final, leaf.dtype, leaf.shape)
        if like:
            return MemoryMappedTensor.zeros(leaf.shape, dtype=leaf.dtype)
        return MemoryMappedTensor.from_tensor(leaf.source)
    if leaf.final is None:  # anonymous shared memory
        if like:
            return MemoryMappedTensor.zeros(leaf.shape, dtype=leaf.dtype)
        return MemoryMappedTensor.from_tensor(leaf.source)
    return _map_file(leaf.final, leaf.dtype, leaf.shape)


def _build(folder: _Folder, ctx: _Ctx, inplace: bool) -> Any:
    """The memory-mapped TensorDict of a planned ``folder`` (without recursion)."""
    return trampoline(_build_node, folder, ctx, inplace)


def _build_node(folder: _Folder, ctx: _Ctx, inplace: bool) -> Generator[tuple, Any, Any]:
    inner = folder.inner
    cpu = torch.device("cpu")
    if folder.lazy:
        subs = []
        for child in folder.children:
            subs.append((yield (child, ctx, inplace)))
        names = inner.names if inner._has_names() else None
        result = inner if inplace else make_lazy_stack(subs, inner.stack_dim, folder.final or "memmap",
                                                       inner.batch_size, names)
    else:
        source = {}
        for key, item in folder.entries:
            if isinstance(item, _Leaf):
                source[key] = _leaf_value(item, ctx.like)
            elif isinstance(item, _Folder):
                source[key] = yield (item, ctx, inplace)
            else:
                source[key] = value = item if inplace else item.clone()
                if folder.final is not None and isinstance(value, NonTensorStack):
                    # in-place element writes are persisted into this folder's meta.json
                    set_write_hook(value, StackFileSink(folder.final, key, _non_tensor_entry, ctx.generation))
        if inplace:
            if inner.device != cpu:  # memory maps are on the cpu: the result says so, as tensordict 0.15
                inner._set_device_tree(cpu)  # first: it rebuilds non-tensor values, the ones below keep their hooks
            for key, value in source.items():
                inner._set_raw(key, value)
            result = inner
        else:
            from tensordict.ext import TensorDict

            names = inner.names if inner._has_names() else None
            result = TensorDict._new_unsafe(source, inner.batch_size, cpu, names)
    result._saved_path = folder.final
    result._is_memmap = True
    if folder.reg is None:
        return result
    if inplace:
        return folder.obj
    return folder.reg.load_fn(result, dict(folder.extra or {}))


# --------------------------------------------------------------------------- entry point
def _write_metas(metas: list[tuple[str, dict]], fsync: bool = False) -> None:
    """Writes every folder's ``meta.json``, children first: the root's is the last file of a save."""
    for path, meta in metas:
        try:
            with open(path, "w", encoding="ascii") as f:
                json.dump(meta, f, allow_nan=True, separators=(",", ":"))
                if fsync:
                    f.flush()
                    os.fsync(f.fileno())
        except OSError as err:
            raise (err if err.filename is not None else OSError(err.errno, err.strerror, path)) from err


def _fsync_tree(root: str) -> None:
    """Flushes every file and folder of ``root`` (data before metadata is guaranteed by the caller)."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name != META:
                fsync_path(os.path.join(folder, name))


_SPACE = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
_ACCESS = {errno.EACCES, errno.EPERM, errno.EROFS}


def _save_error(err: OSError, final: str, staging: Staging | None, published: bool, had_store: bool) -> OSError:
    """A copy of ``err`` (same errno, so the same ``OSError`` subclass) whose message
    names the store and the file, says why, and what became of the earlier save."""
    filename = err.filename
    if isinstance(filename, bytes):
        filename = os.fsdecode(filename)
    if isinstance(filename, str) and staging is not None and filename.startswith(staging.path):
        filename = final + filename[len(staging.path) :]  # the file as the published store would name it
    what = f"writing {filename!r}" if filename else "writing its files"
    reason = err.strerror or str(err)
    if err.errno in _SPACE:
        reason += " (the disk is full, or a file-size limit or quota was reached)"
    elif err.errno in _ACCESS:
        reason += " (no permission to write there, or a read-only file system)"
    if published:
        fate = (f"The save failed while publishing: {final!r} holds either "
                f"{'the earlier complete save' if had_store else 'nothing'} or the new complete save.")
    elif had_store:
        fate = (f"Nothing was published: the earlier complete save at {final!r} is intact and loadable "
                "(the partial files of this save were removed).")
    else:
        fate = f"Nothing was published at {final!r} (the partial files of this save were removed)."
    msg = f"cannot save the store at {final!r}: {what} failed: {reason}. {fate}"
    if err.errno is None:
        return OSError(msg)
    return OSError(err.errno, msg)


def _lock(obj: Any) -> None:
    lock = getattr(obj, "lock_", None)
    if lock is not None:
        lock()


def _save_now(obj: Any, prefix: Any, like: bool, inplace: bool, copy_existing: bool, existsok: bool,
              num_threads: int, fsync: bool = False) -> Any:
    ctx = _Ctx(like, copy_existing, anonymous=prefix is None, fsync=fsync)
    if prefix is None:
        folder = _plan(obj, None, None, ctx)
    else:
        final = os.path.realpath(os.path.abspath(os.fspath(prefix)))
        had_store = os.path.lexists(os.path.join(final, META))
        staging = None
        published = False
        try:
            staging = Staging(final, existsok)
            folder = _plan(obj, staging.path, final, ctx)
            run_jobs(ctx.jobs, num_threads)
            ctx.jobs.clear()
            if fsync:
                _fsync_tree(staging.path)
            _write_metas(ctx.metas, fsync)
            published = True
            staging.commit(fsync)
        except OSError as err:
            if staging is not None:
                staging.abort()
            raise _save_error(err, final, staging, published, had_store) from err
        except BaseException:
            if staging is not None:
                staging.abort()
            raise
    if inplace and getattr(obj, "is_locked", False):
        obj.unlock_()  # its leaves are replaced by the mapped ones (a view may write through to its source)
    result = _build(folder, ctx, inplace)
    _lock(result)
    return result


def save_tree(obj: Any, prefix: Any = None, *, like: bool = False, inplace: bool = False,
              copy_existing: bool = False, existsok: bool = True, num_threads: int = 0,
              return_early: bool = False, fsync: bool = False) -> Any:
    """Saves ``obj`` under ``prefix`` (anonymous shared memory if ``None``) and maps it back.

    Returns the memory-mapped result (``obj`` itself when ``inplace``), or a
    ``concurrent.futures.Future`` of it when ``return_early`` and ``num_threads > 0``.
    """
    num_threads = int(num_threads or 0)
    if return_early and num_threads > 0:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="td-memmap")
        future: Future = pool.submit(_save_now, obj, prefix, like, inplace, copy_existing, existsok, num_threads,
                                     fsync)
        pool.shutdown(wait=False)
        return future
    return _save_now(obj, prefix, like, inplace, copy_existing, existsok, num_threads, fsync)
