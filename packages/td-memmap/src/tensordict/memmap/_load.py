"""Reading a store back. Everything on disk is untrusted input.

- ``meta.json`` is parsed as JSON and every field is type-checked; dtypes resolve
  only through torch's dtype table; types other than TensorDict and lazy stacks
  resolve only through the registry (nothing is imported).
- File and folder names from the metadata must look like names this library
  writes and must resolve inside the store (symbolic links out are refused).
- Each data file must have exactly the size its metadata says; shapes must agree
  with the batch size. Errors name the file.
- Pickled values are read only with ``allow_pickle=True``.
- A missing ``meta.json`` or an interrupted save next to the folder is reported
  as an incomplete store.
"""

from __future__ import annotations

import math
import os
import stat
import warnings
from collections.abc import Generator
from typing import Any

import torch

from tensordict.ext import NonTensorData, NonTensorStack, TensorDictBase, trampoline
from tensordict.ext import lookup_memmap_name as lookup_name
from tensordict.memmap._fileio import check_file, dtype_from_name, tensor_on
from tensordict.memmap._names import _VALID, member_path
from tensordict.memmap._save import VERSION, make_lazy_stack
from tensordict.memmap._store import (
    JOURNAL,
    META,
    META_MAX_BYTES,
    find_partial,
    parse_meta,
    read_meta,
)
from tensordict.memmap._tensor import _map_file
from tensordict.memmap._upstream import is_upstream_meta, load_upstream_folder
from tensordict.memmap._values import load_pickle

__all__ = ["load_tree", "transplant"]


class _Ctx:
    __slots__ = ("root", "meta_device", "fake", "allow_pickle", "generation", "seen", "shared", "zfs", "device")

    def __init__(self, root: str, meta_device: bool, fake: bool, allow_pickle: bool, shared: bool = True,
                 device: torch.device | None = None) -> None:
        self.root, self.meta_device, self.fake, self.allow_pickle = root, meta_device, fake, allow_pickle
        self.shared = shared  # False: copy-on-write mappings (writes stay in this process)
        self.device = device  # the device the caller asked for (cpu or meta), given to every TensorDict
        self.zfs: Any = None  # a ZipFS when loading a one-file archive
        self.generation: Any = None  # the root's generation id, once read
        self.seen: set = set()  # (st_dev, st_ino) of every folder visited


# --------------------------------------------------------------------------- folders or archive members
def _join(folder: str, name: str, ctx: _Ctx) -> str:
    if ctx.zfs is None:
        return os.path.join(folder, name)
    return f"{folder}/{name}" if folder else name


def _where(path: str, ctx: _Ctx) -> str:
    return path if ctx.zfs is None else f"{ctx.root}:{path or '.'}"


def _fs_meta(folder: str, ctx: _Ctx) -> dict:
    if ctx.zfs is None:
        return read_meta(folder)
    name = _join(folder, META, ctx)
    if not ctx.zfs.exists(name):
        raise FileNotFoundError(_where(name, ctx))
    return parse_meta(ctx.zfs.read(name, META_MAX_BYTES), _where(name, ctx))


def _fs_member(folder: str, name: Any, ctx: _Ctx, what: str) -> str:
    if ctx.zfs is None:
        # below the root's own members (fully checked), ``folder`` came from here: only
        # ``name`` needs checking, so a deep store loads in time linear in its depth
        return member_path(folder, name, ctx.root, what, checked=folder != ctx.root)
    if not isinstance(name, str) or not _VALID.fullmatch(name):
        msg = f"{_where(_join(folder, META, ctx), ctx)}: invalid {what} name {name!r} in the metadata."
        raise RuntimeError(msg)
    return _join(folder, name, ctx)


def _fs_isdir(path: str, ctx: _Ctx) -> bool:
    return os.path.isdir(path) if ctx.zfs is None else ctx.zfs.is_dir(path)


def _fs_tensor(path: str, nbytes: int, dtype: torch.dtype, shape: tuple, ctx: _Ctx) -> torch.Tensor:
    if ctx.zfs is None:
        check_file(path, nbytes, exact=True)
        return _map_file(path, dtype, shape, ctx.shared)
    if not ctx.zfs.exists(path):
        msg = f"memory-mapped data member {_where(path, ctx)!r} is missing (expected {nbytes} bytes)."
        raise FileNotFoundError(msg)
    if ctx.zfs.nbytes(path) != nbytes:
        msg = (f"memory-mapped data member {_where(path, ctx)!r} holds {ctx.zfs.nbytes(path)} bytes, the metadata "
               f"expects {nbytes} bytes. The archive is damaged.")
        raise RuntimeError(msg)
    return ctx.zfs.tensor(path, dtype, shape)


def _fs_pickle(path: str, key: str, ctx: _Ctx) -> Any:
    if ctx.zfs is None or not ctx.allow_pickle:
        return load_pickle(_where(path, ctx), key, ctx.allow_pickle)
    import pickle

    return pickle.loads(ctx.zfs.read(path, 1 << 40))  # noqa: S301 - explicit opt-in (allow_pickle=True)


class _Changed(Exception):
    """The store was replaced by another save while it was being read."""


def _bad(where: str, what: str) -> RuntimeError:
    return RuntimeError(f"{where}: invalid metadata: {what}. The store is damaged or was not written by td-memmap.")


def _ints(value: Any, where: str, what: str) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int and 0 <= v < (1 << 63) for v in value):
        raise _bad(where, f"{what} must be a list of non-negative int64 values, got {value!r}")
    return value


def _incomplete(folder: str, detail: str) -> RuntimeError:
    return RuntimeError(
        f"the store at {folder!r} is incomplete: {detail}. It was left by an interrupted save (or copy) "
        "and cannot be loaded; save it again."
    )


def _read_folder_meta(folder: str, ctx: _Ctx | None = None) -> dict:
    try:
        meta = _fs_meta(folder, ctx) if ctx is not None else read_meta(folder)
    except FileNotFoundError:
        if ctx is not None and ctx.zfs is not None:
            raise _incomplete(ctx.root, f"{META} of {folder or '.'!r} is missing") from None
        if ctx is not None and ctx.generation is not None and _root_generation(ctx.root) != ctx.generation:
            raise _Changed from None
        raise _incomplete(folder, f"{META} is missing") from None
    if ctx is not None:
        gen = meta.get("generation")
        if ctx.generation is None:
            ctx.generation = gen if gen is not None else False
        elif gen != (ctx.generation or None):
            raise _Changed(folder)
    return meta


def _root_generation(root: str) -> Any:
    """The generation id the store at ``root`` holds now (``False`` when it has none)."""
    try:
        gen = read_meta(root).get("generation")
    except (FileNotFoundError, RuntimeError):
        return None
    return gen if gen is not None else False


def _tensor(entry: dict, folder: str, bs: list[int], ctx: _Ctx) -> torch.Tensor:
    where = os.path.join(folder, META)
    if entry.get("file") is None and entry.get("nbytes") == 0 and "nested_shape" not in entry:
        return _empty_tensor(entry, where, bs, ctx)
    path = _fs_member(folder, entry.get("file"), ctx, "data file")
    dtype = dtype_from_name(entry.get("dtype"), _where(path, ctx))
    shape = tuple(_ints(entry.get("shape"), where, f"shape of key {entry['key']!r}"))
    nbytes = entry.get("nbytes")
    if "nested_shape" in entry:
        return _nested_tensor(entry, path, dtype, shape, nbytes, bs, ctx)
    expected = math.prod(shape) * dtype.itemsize
    if type(nbytes) is not int or nbytes != expected:
        msg = (
            f"{path}: metadata mismatch for key {entry['key']!r}: shape {shape} of {dtype} needs {expected} bytes, "
            f"the metadata records {nbytes!r}."
        )
        raise RuntimeError(msg)
    if list(shape[: len(bs)]) != bs:
        msg = f"{path}: key {entry['key']!r} has shape {shape}, which does not start with the batch size {tuple(bs)}."
        raise RuntimeError(msg)
    if ctx.meta_device:
        return torch.empty(shape, dtype=dtype, device="meta")
    if ctx.fake:
        return torch.empty(shape, dtype=dtype)
    return _fs_tensor(path, nbytes, dtype, shape, ctx)


def _empty_tensor(entry: dict, where: str, bs: list[int], ctx: _Ctx) -> torch.Tensor:
    """A leaf with no elements: saved without a data file, rebuilt from its shape and dtype."""
    dtype = dtype_from_name(entry.get("dtype"), where)
    shape = tuple(_ints(entry.get("shape"), where, f"shape of key {entry['key']!r}"))
    if math.prod(shape) != 0:
        raise _bad(where, f"key {entry['key']!r} of shape {shape} has no data file")
    if list(shape[: len(bs)]) != bs:
        msg = f"{where}: key {entry['key']!r} has shape {shape}, which does not start with the batch size {tuple(bs)}."
        raise RuntimeError(msg)
    if ctx.meta_device:
        return torch.empty(shape, dtype=dtype, device="meta")
    from tensordict.memmap._tensor import MemoryMappedTensor

    return MemoryMappedTensor.empty(shape, dtype=dtype)


def _nested_tensor(entry: dict, path: str, dtype: torch.dtype, shape: tuple, nbytes: Any, bs: list[int],
                   ctx: _Ctx) -> torch.Tensor:
    """A nested (per-element shapes) leaf: ``"nested_shape"`` lists each element's shape."""
    where = _where(path, ctx)
    sizes = entry["nested_shape"]
    if (not isinstance(sizes, list) or not sizes or len(sizes) != (shape[0] if shape else -1)
            or not all(isinstance(s, list) and len(s) == len(sizes[0]) for s in sizes)):
        raise _bad(where, f"nested_shape of key {entry['key']!r} must be {shape[:1]} lists of equal length")
    for s in sizes:
        _ints(s, where, f"an element shape of key {entry['key']!r}")
    # the batch dims are the dim of the elements, then dims every element shares
    if bs and (bs[0] != len(sizes) or any(list(s[: len(bs) - 1]) != bs[1:] for s in sizes)):
        raise _bad(where, f"nested leaf {entry['key']!r} of {len(sizes)} elements in a TensorDict of batch size {bs}")
    expected = sum(math.prod(s) for s in sizes) * dtype.itemsize
    if type(nbytes) is not int or nbytes != expected:
        raise _bad(where, f"nested leaf {entry['key']!r} needs {expected} bytes, the metadata records {nbytes!r}")
    if ctx.meta_device or ctx.fake:
        msg = f"{where}: nested leaf {entry['key']!r} loads only on the CPU (not on 'meta' nor under fake tensors)."
        raise RuntimeError(msg)
    from tensordict.memmap._tensor import MemoryMappedTensor, _DisableTF

    shapes = torch.tensor(sizes, dtype=torch.int64)
    if ctx.zfs is not None:
        if ctx.shared:
            msg = (f"{where}: key {entry['key']!r} is a nested tensor; mode='r+' cannot write through an archive's "
                   "nested tensor. Load with mode='r' (writes stay in memory), or unpack the archive.")
            raise RuntimeError(msg)
        flat = _fs_tensor(path, nbytes, dtype, (expected // dtype.itemsize,), ctx)
        # copied into a segment of its own (archives load copy-on-write): a nested view into the
        # archive's map would not start at offset 0, which a nested tensor needs to be contiguous
        out = MemoryMappedTensor.empty(shapes, dtype=dtype)
        with _DisableTF():
            tensor_on(out.untyped_storage(), dtype, (expected // dtype.itemsize,)).copy_(flat)
        return out
    check_file(path, nbytes, exact=True)
    return MemoryMappedTensor.from_filename(path, dtype, shapes)


def _non_tensor(entry: dict, folder: str, ctx: _Ctx) -> Any:
    where = os.path.join(folder, META)
    key = entry["key"]
    bs = _ints(entry.get("batch_size"), where, f"batch_size of key {key!r}")
    encoding = entry.get("encoding")
    if encoding == "json":
        if "value" not in entry:
            raise _bad(where, f"key {key!r} has no value")
        payload = entry["value"]
    elif encoding == "pickle":
        path = _fs_member(folder, entry.get("file"), ctx, "pickle file")
        payload = _fs_pickle(path, key, ctx)
    else:
        raise _bad(where, f"unknown encoding {encoding!r} for key {key!r}")
    if entry["kind"] == "non_tensor":
        return NonTensorData(payload, bs)
    if not isinstance(payload, list) or len(payload) != math.prod(bs):
        raise _bad(where, f"the stack under key {key!r} must hold {math.prod(bs)} items")
    return NonTensorStack._from_flat(payload, bs)


def _load_td(folder: str, meta: dict, ctx: _Ctx) -> Generator[tuple, Any, TensorDictBase]:
    """The TensorDict of ``folder`` (part of :func:`_load_folder_node`): a nested folder is
    yielded as ``(sub_folder, ctx, "")`` and its loaded value sent back."""
    from tensordict.ext import TensorDict

    where = os.path.join(folder, META)
    bs = _ints(meta.get("batch_size"), where, "batch_size")
    names = meta.get("names")
    if names is not None and (not isinstance(names, list) or len(names) != len(bs)
                              or not all(n is None or isinstance(n, str) for n in names)
                              or len({n for n in names if n is not None}) != sum(n is not None for n in names)):
        raise _bad(where, f"names {names!r}")
    entries = meta.get("entries")
    if not isinstance(entries, list):
        raise _bad(where, "entries must be a list")
    source: dict = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise _bad(where, f"entry {entry!r}")
        key = entry["key"]
        if key in source:
            raise _bad(where, f"key {key!r} appears twice")
        kind = entry.get("kind")
        if kind == "tensor":
            source[key] = _tensor(entry, folder, bs, ctx)
        elif kind in ("non_tensor", "non_tensor_stack"):
            value = _non_tensor(entry, folder, ctx)
            if list(value.batch_size) != bs:
                raise _bad(where, f"key {key!r} has batch size {list(value.batch_size)}, expected {bs}")
            source[key] = value
        elif kind == "tensordict":
            sub = _fs_member(folder, entry.get("dir"), ctx, "sub-folder")
            if not _fs_isdir(sub, ctx):
                raise _incomplete(ctx.root, f"the folder {sub!r} of key {key!r} is missing")
            value = yield (sub, ctx, "")
            sub_bs = getattr(value, "batch_size", None)
            if sub_bs is None or list(sub_bs[: len(bs)]) != bs:
                raise _bad(where, f"key {key!r} has batch size {list(sub_bs)}, which does not start with {bs}")  # type: ignore[arg-type]
            source[key] = value
        else:
            raise _bad(where, f"unknown kind {kind!r} for key {key!r}")
    if names is not None and all(n is None for n in names):
        names = None
    # the leaves are memory maps on the cpu (or meta tensors): the TensorDict says so,
    # whatever device it had when saved, as tensordict 0.15
    device = torch.device("meta") if ctx.meta_device else torch.device("cpu")
    if ctx.device is not None:  # load_memmap(..., device=d): the result is on d, as upstream
        device = ctx.device
    return TensorDict._new_unsafe(source, torch.Size(bs), device, names)


def _visit_once(folder: str, ctx: _Ctx) -> None:
    """Refuses a folder reached twice in one load (metadata naming a shared or cyclic sub-folder)."""
    if ctx.zfs is not None:
        ident: Any = folder
    else:
        try:
            st = os.stat(folder)
        except OSError:
            return
        ident = (st.st_dev, st.st_ino)
    if ident in ctx.seen:
        raise _bad(folder, "this folder is referenced more than once (a shared or cyclic sub-folder); td-memmap "
                           "writes each sub-folder once")
    ctx.seen.add(ident)


def _load_folder(folder: str, ctx: _Ctx, key: str = "") -> Any:
    """The container stored in ``folder`` and every folder under it, at any depth: the
    folders are read without recursion (:func:`tensordict.ext.trampoline`)."""
    return trampoline(_load_folder_node, folder, ctx, key)


def _load_folder_node(folder: str, ctx: _Ctx, key: str) -> Generator[tuple, Any, Any]:
    """One folder of :func:`_load_folder`; a nested folder is yielded and its value sent back."""
    _visit_once(folder, ctx)
    meta = _read_folder_meta(folder, ctx)
    where = os.path.join(folder, META)
    if is_upstream_meta(meta):
        if ctx.zfs is not None:
            msg = f"{_where(where, ctx)}: archives of stores written by the tensordict package are not read here; unzip it."
            raise RuntimeError(msg)
        result = load_upstream_folder(folder, meta, ctx, _load_folder,
                                      lambda p, d, sh: _map_file(p, d, sh, ctx.shared), key)
        if isinstance(result, TensorDictBase):
            result._saved_path = folder
            result._is_memmap = not ctx.meta_device and not ctx.fake
        return result
    if meta.get("version") != VERSION:
        msg = f"{where}: unsupported td-memmap format version {meta.get('version')!r} (this reader: {VERSION})."
        raise RuntimeError(msg)
    kind = meta.get("type")
    if kind == "TensorDict":
        result = yield from _load_td(folder, meta, ctx)
    elif kind == "LazyStackedTensorDict":
        stack = meta.get("stack")
        dim = meta.get("stack_dim")
        if not isinstance(stack, list) or type(dim) is not int:
            raise _bad(where, "a lazy stack needs 'stack' (list) and 'stack_dim' (int)")
        subs = []
        for name in stack:
            sub = _fs_member(folder, name, ctx, "stacked sub-folder")
            if not _fs_isdir(sub, ctx):
                raise _incomplete(ctx.root, f"the stacked folder {sub!r} is missing")
            subs.append((yield (sub, ctx, "")))
        bs = _ints(meta.get("batch_size"), where, "batch_size")
        names = meta.get("names")
        if names is not None and (not isinstance(names, list) or len(names) != len(bs)
                                  or not all(n is None or isinstance(n, str) for n in names)
                              or len({n for n in names if n is not None}) != sum(n is not None for n in names)):
            raise _bad(where, f"names {names!r}")
        try:
            result = make_lazy_stack(subs, dim, where, torch.Size(bs), names)
        except (RuntimeError, ValueError, IndexError) as err:
            raise _bad(where, f"the stacked folders do not form a stack of batch size {bs} ({err})") from None
    else:
        msg = f"{where}: unknown container type {kind!r} (expected 'TensorDict' or 'LazyStackedTensorDict')."
        raise RuntimeError(msg)
    result._saved_path = folder if ctx.zfs is None else None
    result._is_memmap = not ctx.meta_device and not ctx.fake
    reg = meta.get("registered")
    if reg is None:
        return result
    if not isinstance(reg, dict):
        raise _bad(where, "'registered' must be an object")
    entry = lookup_name(reg.get("name"), where)
    extra = reg.get("extra")
    try:
        return entry.load_fn(result, dict(extra) if isinstance(extra, dict) else {})
    except (TypeError, KeyError, ValueError, AttributeError) as err:
        msg = (f"{where}: invalid metadata for the registered type {reg.get('name')!r}: "
               f"{type(err).__name__}: {err} (extra={extra!r}).")
        raise RuntimeError(msg) from None


def _is_regular(path: str) -> bool:
    """``path`` is a regular file itself (a link to one does not count)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _locate(prefix: Any) -> str:
    path = os.path.abspath(os.fspath(prefix))
    root = os.path.realpath(path)
    if _is_regular(root):
        return root  # a one-file archive
    if os.path.isdir(root):
        if os.path.lexists(os.path.join(root, META)):
            return root  # read_meta refuses it if it is a link or not a regular file
        staging, _ = find_partial(root)
        leftovers = [e for e in os.listdir(root) if e.endswith((".memmap", ".pkl"))]
        if staging or leftovers:
            raise _incomplete(root, f"{META} is missing")
        msg = f"no td-memmap store at {root!r}: the folder has no {META}."
        raise FileNotFoundError(msg)
    staging, old = find_partial(root)
    for candidate in old:
        if _is_regular(os.path.join(candidate, META)):
            warnings.warn(
                f"{root!r} is missing because a save was interrupted while replacing it; loading the earlier "
                f"complete save from {candidate!r}. Save again to repair the store.",
                RuntimeWarning,
                stacklevel=4,
            )
            return candidate
    if staging:
        raise _incomplete(root, "a save into it was interrupted before it completed")
    msg = f"no td-memmap store at {root!r}: the path does not exist."
    raise FileNotFoundError(msg)


def _fake_mode_active() -> bool:
    try:
        from torch._guards import detect_fake_mode
    except ImportError:  # pragma: no cover
        return False
    return detect_fake_mode() is not None


#: ``mode`` of ``load_memmap``: whether writes to the loaded tensors reach the files
MODES = {"r+": True, "r": False, "c": False}


def _subpath_parts(subpath: Any) -> list[str]:
    if isinstance(subpath, str):
        return [p for p in subpath.replace(os.sep, "/").split("/") if p]
    if isinstance(subpath, (tuple, list)):
        out: list[str] = []
        for part in subpath:
            out.extend(_subpath_parts(part))
        return out
    msg = f"subpath must be a str (\"a/b\") or a nested key, got {type(subpath).__name__}."
    raise TypeError(msg)


def _select_subpath(result: Any, subpath: Any, root: str) -> Any:
    node = result
    for part in _subpath_parts(subpath):
        subs = getattr(node, "tensordicts", None)
        if subs is not None and part.isdigit() and int(part) < len(subs):
            node = subs[int(part)]
            continue
        value = None
        if isinstance(node, TensorDictBase) and part in node._keys_raw():
            value = node._get_raw(part, None)
        if not isinstance(value, TensorDictBase):
            msg = f"No tensordict found under subpath {subpath!r} in the store {root!r} (no container at {part!r})."
            raise ValueError(msg)
        node = value
    return node


def _subpath_folder(folder: str, parts: list[str], subpath: Any, ctx: _Ctx) -> str | None:
    """The folder of the container at ``parts`` below ``folder``, found from the metadata alone,
    so that nothing else of the store is read (``None`` for a store written by the tensordict
    package: the whole tree is loaded, then the container selected)."""
    for part in parts:
        meta = _read_folder_meta(folder, ctx)
        if is_upstream_meta(meta):
            return None
        name = None
        if meta.get("type") == "LazyStackedTensorDict":
            stack = meta.get("stack")
            if isinstance(stack, list) and part.isdigit() and int(part) < len(stack):
                name = stack[int(part)]
        elif meta.get("registered") is None:
            for entry in meta.get("entries") or ():
                if isinstance(entry, dict) and entry.get("key") == part and entry.get("kind") == "tensordict":
                    name = entry.get("dir")
                    break
        if name is None:
            msg = f"No tensordict found under subpath {subpath!r} in the store {ctx.root!r} (no container at {part!r})."
            raise ValueError(msg)
        sub = _fs_member(folder, name, ctx, "sub-folder")
        if not _fs_isdir(sub, ctx):
            raise _incomplete(ctx.root, f"the folder {sub!r} of key {part!r} is missing")
        folder = sub
    return folder


def _load_start(start: str, ctx: _Ctx, subpath: Any) -> tuple[Any, bool]:
    """Loads the folder ``start`` of the store, or only the container at ``subpath`` below it;
    the flag tells whether ``subpath`` was applied."""
    if subpath is not None:
        folder = _subpath_folder(start, _subpath_parts(subpath), subpath, ctx)
        if folder is not None:
            return _load_folder(folder, ctx), True
    return _load_folder(start, ctx), False


def load_tree(prefix: Any, device: Any = None, non_blocking: bool = False, *, out: Any = None,
              allow_pickle: bool = False, subpath: Any = None, mode: str | None = None, lock: bool = True) -> Any:
    """Loads the store at ``prefix``; see :func:`tensordict.memmap.load_memmap`."""
    if allow_pickle is None:
        allow_pickle = False
    elif allow_pickle.__class__ is not bool:  # 1, np.bool_(True)...: the opt-in to run code must be explicit
        msg = f"allow_pickle must be a bool or None, got {allow_pickle!r} of type {type(allow_pickle).__name__}."
        raise TypeError(msg)
    if mode is None:  # folders: writes reach the files; archives: copy-on-write
        mode = "c" if _is_regular(os.path.realpath(os.path.abspath(os.fspath(prefix)))) else "r+"
    if mode not in MODES:
        msg = f"load_memmap: mode must be one of {sorted(MODES)} ('r+': writes reach the files; 'r'/'c': copy-on-write), got {mode!r}."
        raise ValueError(msg)
    root = _locate(prefix)
    if os.path.lexists(os.path.join(root, JOURNAL)):
        msg = (f"the store at {root!r} is being appended to, or an append to it was interrupted ({JOURNAL} is "
               "there). Wait for the append to finish; after a killed append, tensordict.append_memmap(prefix, None) "
               "rolls the store back to the rows it held before.")
        raise RuntimeError(msg)
    dev = torch.device(device) if device is not None else None
    out_dev = getattr(out, "device", None) if out is not None else None
    if out_dev is not None:  # out= keeps its device: the data is loaded on it
        if dev is not None and (dev.type != out_dev.type or (
                dev.index is not None and out_dev.index is not None and dev.index != out_dev.index)):
            msg = f"load_memmap: cannot load on device {dev} into a TensorDict on device {out_dev} (out=)."
            raise ValueError(msg)
        dev = out_dev
    meta_device = dev is not None and dev.type == "meta"
    fake = _fake_mode_active()
    # cpu and meta: the leaves are already there, so only the TensorDicts' device is set
    on_dev = dev if dev is not None and dev.type in ("cpu", "meta") and not fake else None
    if subpath is not None:
        _subpath_parts(subpath)  # a bad type raises before anything is read
    result, selected = _load_consistent(root, meta_device, fake, allow_pickle, MODES[mode], on_dev, subpath)
    if subpath is not None and not selected:
        result = _select_subpath(result, subpath, root)
    if dev is not None and dev.type not in ("cpu", "meta") and not fake:
        result = result.to(dev, non_blocking=non_blocking)
    if out is not None:
        transplant(out, result)
        out._saved_path = root
        return out
    if lock and isinstance(result, TensorDictBase) and hasattr(result, "lock_"):
        result.lock_()
    return result


#: how long a load keeps retrying while other processes keep re-saving the store
RETRY_SECONDS = 10.0


def _load_consistent(root: str, meta_device: bool, fake: bool, allow_pickle: bool, shared: bool = True,
                     device: torch.device | None = None, subpath: Any = None) -> tuple[Any, bool]:
    """Loads ``root``, retrying while a concurrent save replaces it, so the result holds one save.

    Every ``meta.json`` read must carry the root's generation id, and after every
    file is mapped the root must still hold that generation. A failure while the
    generation moved (a file removed under the reader) is retried too.
    """
    import time

    if _is_regular(root):  # an archive: one open file, one consistent snapshot
        from tensordict.memmap._archive import ZipFS

        ctx = _Ctx(root, meta_device, fake, allow_pickle, shared, device)
        ctx.zfs = ZipFS(root, shared)
        try:
            return _load_start("", ctx, subpath)
        finally:
            ctx.zfs.close()
    deadline = time.monotonic() + RETRY_SECONDS
    attempts = 0
    while True:
        attempts += 1
        ctx = _Ctx(root, meta_device, fake, allow_pickle, shared, device)
        try:
            result = _load_start(root, ctx, subpath)
            if ctx.generation is False or _root_generation(root) == ctx.generation:
                return result
        except _Changed as changed:
            if _root_generation(root) == ctx.generation:  # nothing was re-saved: the tree itself is mixed
                msg = (
                    f"{os.path.join(changed.args[0], META)}: this folder belongs to another save than the store's "
                    f"root {root!r} (different generation ids); the store is damaged (folders copied between "
                    "stores?). Save it again."
                )
                raise RuntimeError(msg) from None
        except (FileNotFoundError, RuntimeError):
            if ctx.generation in (None, False) or _root_generation(root) == ctx.generation:
                raise
        if time.monotonic() > deadline:
            msg = (
                f"the store at {root!r} was replaced by other saves during each of {attempts} attempts to load it "
                f"over {RETRY_SECONDS:g} s; load it again once the writer pauses."
            )
            raise RuntimeError(msg)
        time.sleep(min(0.001 * attempts, 0.05))


def transplant(dst: Any, src: Any) -> Any:
    """Makes ``dst`` hold ``src``'s content: nested containers of ``dst`` are kept,
    leaves are rebound to ``src``'s, keys missing from ``src`` are removed."""
    if not isinstance(dst, TensorDictBase) or not isinstance(src, TensorDictBase):
        msg = f"out= must be a TensorDict matching the stored structure, got {type(dst).__name__}."
        raise TypeError(msg)
    src_keys = set(src._keys_raw())
    for key in list(dst._keys_raw()):
        if key not in src_keys:
            dst._del_raw(key)
    for key, value in src._items_raw():
        current = dst._get_raw(key, None)
        if (isinstance(value, TensorDictBase) and type(current) is type(value)
                and hasattr(current, "_tensordict")):
            transplant(current, value)
            current._saved_path = getattr(value, "_saved_path", None)
        else:
            dst._set_raw(key, value)
    if dst.batch_size != src.batch_size and hasattr(dst, "_batch_size"):
        dst._batch_size = src.batch_size
    if hasattr(dst, "_device"):
        dst._device = src.device
    return dst
