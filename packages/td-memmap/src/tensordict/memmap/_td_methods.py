"""``TensorDictBase`` methods provided by td-memmap.

td-core's ``_seams.py`` forwards ``td.memmap(...)`` and friends here, passing the
TensorDict (or, for the class methods ``load_memmap``/``load``, the class) first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from tensordict.ext import TensorDictBase
from tensordict.memmap._grow import make_memmap, make_memmap_from_storage, make_memmap_from_tensor
from tensordict.memmap._load import load_tree, transplant
from tensordict.memmap._safetensors import from_safetensors as _from_safetensors
from tensordict.memmap._safetensors import to_safetensors as _to_safetensors
from tensordict.memmap._save import save_tree
from tensordict.memmap._shared_value import share_non_tensor_leaves
from tensordict.memmap._tensor import MemoryMappedTensor

__all__ = [
    "make_memmap",
    "make_memmap_from_storage",
    "make_memmap_from_tensor",
    "memmap",
    "memmap_",
    "memmap_like",
    "load_memmap",
    "load_memmap_",
    "memmap_refresh_",
    "save",
    "dumps",
    "load",
    "load_",
    "is_memmap",
    "to_safetensors",
    "from_safetensors",
]


def memmap(td: Any, prefix: str | Path | None = None, copy_existing: bool = False, *, num_threads: int = 0,
           return_early: bool = False, share_non_tensor: bool = False, existsok: bool = True,
           robust_key: bool | None = None, fsync: bool = False, compression: str | None = None,
           archive: bool | None = None) -> Any:
    """Writes every leaf to a memory-mapped file and returns a new, locked TensorDict of them.

    The folder tree under ``prefix`` mirrors the key tree: each (nested)
    TensorDict is a folder with a ``meta.json`` and one ``<key>.memmap`` file per
    tensor, so any sub-folder loads on its own. Keys are encoded into safe file
    names (the key itself is kept in ``meta.json``). The save is crash-safe: the
    tree is written next to ``prefix`` and published in one atomic step, so an
    earlier save at ``prefix`` stays loadable if the process dies midway.

    Args:
        prefix (str or Path, optional): the folder to write. Defaults to ``None``:
            anonymous shared memory, no files.
        copy_existing (bool): if a leaf is already a ``MemoryMappedTensor`` of a
            whole file elsewhere, copy it (``False`` raises instead, so that a file
            is never duplicated by accident). Defaults to ``False``.

    Keyword Args:
        num_threads (int): threads writing the files (``0``/``1``: this thread).
        return_early (bool): with ``num_threads > 0``, return a
            ``concurrent.futures.Future`` of the result immediately.
        share_non_tensor (bool): keep each non-tensor value (``NonTensorData``) of
            the result in shared memory (:class:`~tensordict.memmap.SharedNonTensorData`):
            the TensorDict sent to other processes shares them, and an in-place write
            (``td.set_(key, value)``, ``td.get(key).update_(...)``) in any process is
            seen by all; ``NonTensorStack`` values are shared element by element
            (``share_memory_()``). The store on disk is the same either way. Defaults
            to ``False``.
        existsok (bool): allow replacing a non-empty ``prefix``. Defaults to ``True``.
        robust_key (bool, optional): accepted for compatibility: keys are always
            encoded into safe, unique file names (the key is kept in ``meta.json``).
        fsync (bool): flush every file and folder to stable storage before the
            save is published, so it also survives a power cut (slower). Defaults
            to ``False``: the save survives a crash of the process, not of the machine.
        archive (bool, optional): write one zip file instead of a folder (see
            :func:`tensordict.memmap.pack_memmap`). Defaults to ``None``: an archive
            when ``prefix`` ends in ``.tdz``.
        compression (str, optional): for archives, ``"deflate"``, ``"lzma"`` or
            ``"bzip2"`` (members are then read into memory when loaded).

    Returns:
        TensorDict: same keys, batch size and names; every tensor leaf a
        :class:`MemoryMappedTensor`, and device ``cpu`` at every level (memory maps live there).

    Raises:
        RuntimeError: ``prefix`` is not empty and ``existsok`` is False; a leaf is
            memory-mapped elsewhere and ``copy_existing`` is False.
        TypeError: a value cannot be stored (non-JSON non-tensor values are
            pickled; an unpicklable one raises).

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(3, 2)}}, [3])
        >>> with tempfile.TemporaryDirectory() as path:
        ...     mm = td.memmap(path)
        ...     (mm.is_locked, mm.is_memmap(), type(mm["b", "c"]).__name__)
        (True, True, 'MemoryMappedTensor')
    """
    from tensordict.memmap._archive import save_archive, wants_archive

    if robust_key is False:
        _check_legacy_keys(td, prefix)
    if wants_archive(prefix, archive):
        out = save_archive(td, prefix, copy_existing=copy_existing, existsok=existsok, num_threads=num_threads,
                           compression=compression, fsync=fsync)
        return share_non_tensor_leaves(out) if share_non_tensor else out
    if compression is not None:
        msg = (f"compression is only supported for archives (a prefix ending in '.tdz', or archive=True); "
               f"got compression={compression!r} for the folder {str(prefix)!r}.")
        raise ValueError(msg)
    out = save_tree(td, prefix, copy_existing=copy_existing, existsok=existsok,
                    num_threads=num_threads, return_early=return_early, fsync=fsync)
    return share_non_tensor_leaves(out) if share_non_tensor else out


def _check_legacy_keys(td: Any, prefix: Any) -> None:
    """``robust_key=False`` asks for files named after the keys (tensordict's legacy layout):
    a key that is not a plain file name cannot be stored that way, so it is refused."""
    if prefix is None or not isinstance(td, TensorDictBase):
        return
    for key in td.keys(include_nested=True):
        parts = (key,) if isinstance(key, str) else key
        for part in parts:
            if "/" in part or os.sep in part or "\0" in part or part in ("", ".", ".."):
                path = os.path.join(os.fspath(prefix), *parts) + ".memmap"
                msg = (f"cannot memory-map key {key!r} with robust_key=False: its legacy file {path!r} is not a "
                       "file in the store (No such file or directory). Pass robust_key=True (or leave the "
                       "default), which encodes keys into safe file names.")
                raise RuntimeError(msg)


def memmap_(td: Any, prefix: str | Path | None = None, copy_existing: bool = False, *, num_threads: int = 0,
            return_early: bool = False, share_non_tensor: bool = False, existsok: bool = True,
            robust_key: bool | None = None, fsync: bool = False) -> Any:
    """Like :func:`memmap`, but replaces ``td``'s leaves in place and returns ``td`` (locked).

    With ``prefix=None`` a TensorDict already saved to a folder is written there
    again (``saved_path``); otherwise anonymous shared memory is used.

    Args:
        prefix (str or Path, optional): the folder to write (``None``: ``td``'s ``saved_path``, else anonymous shared memory).
        copy_existing (bool): copy a leaf that is already a ``MemoryMappedTensor`` of a
            whole file elsewhere (``False`` raises instead). Defaults to ``False``.

    Keyword Args:
        num_threads, return_early, share_non_tensor, existsok, robust_key, fsync: as in :func:`memmap`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3)}, [3])
        >>> td.memmap_() is td, td.is_memmap()
        (True, True)
    """
    if isinstance(td, torch.nn.Module):
        msg = (f"Cannot build a memmap TensorDict in-place from a {type(td).__name__}: its leaves are module "
               "parameters/buffers and would stop being registered. Use memmap() for a memory-mapped copy.")
        raise RuntimeError(msg)
    if prefix is None:
        prefix = getattr(td, "_saved_path", None)
    out = save_tree(td, prefix, inplace=True, copy_existing=copy_existing, existsok=existsok,
                    num_threads=num_threads, return_early=return_early, fsync=fsync)
    return share_non_tensor_leaves(out) if share_non_tensor else out


def memmap_like(td: Any, prefix: str | Path | None = None, copy_existing: bool = False, *, existsok: bool = True,
                num_threads: int = 0, return_early: bool = False, share_non_tensor: bool = False,
                robust_key: bool | None = None, fsync: bool = False, archive: bool | None = None) -> Any:
    """A locked, memory-mapped TensorDict with ``td``'s structure, shapes and dtypes, and zeros.

    No value is copied or written: each file is created sparse at its full size,
    so ``td.expand(1_000_000).memmap_like(path)`` takes no time, RAM or disk
    blocks until the result is filled (``result[i] = ...``, ``update_``...).
    Non-tensor values are copied. Arguments as in :func:`memmap`.

    Args:
        prefix (str or Path, optional): the folder to write (``None``: anonymous shared memory).
        copy_existing (bool): copy a leaf that is already a ``MemoryMappedTensor`` of a
            whole file elsewhere (``False`` raises instead). Defaults to ``False``.

    Keyword Args:
        existsok, num_threads, return_early, share_non_tensor, robust_key, fsync, archive: as in :func:`memmap`.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"img": torch.zeros(8, 8, dtype=torch.uint8)}, []).expand(1000)
        >>> with tempfile.TemporaryDirectory() as path:
        ...     buf = td.memmap_like(path)
        ...     buf[3] = TensorDict({"img": torch.ones(8, 8, dtype=torch.uint8)}, [])
        ...     (buf.shape, int(buf["img"].sum()))
        (torch.Size([1000]), 64)
    """
    from tensordict.memmap._archive import save_archive, wants_archive

    if wants_archive(prefix, archive):
        if return_early:
            msg = ("memmap_like(return_early=True) is not supported for archives: the archive is written whole "
                   "before it is mapped. Call it without return_early.")
            raise NotImplementedError(msg)
        out = save_archive(td, prefix, copy_existing=copy_existing, existsok=existsok, num_threads=num_threads,
                           compression=None, fsync=fsync, like=True)
    else:
        out = save_tree(td, prefix, like=True, copy_existing=copy_existing, existsok=existsok,
                        num_threads=num_threads, return_early=return_early, fsync=fsync)
    return share_non_tensor_leaves(out) if share_non_tensor else out


def load_memmap(cls: Any, prefix: str | Path, device: Any = None, non_blocking: bool = False, *,
                out: Any = None, allow_pickle: bool = False, num_threads: int = 0, subpath: Any = None,
                mode: str | None = None, robust_key: bool | None = None) -> Any:
    """Loads a TensorDict that :func:`memmap`/:func:`save` wrote (``cls`` is ignored:
    the stored type is returned).

    Every leaf is a :class:`MemoryMappedTensor` of its file: nothing is read until
    used. Any sub-folder of a store loads on its own (``prefix / "0"``).

    Args:
        prefix (str or Path): the store folder.
        device (torch.device, optional): ``None``/``"cpu"`` keeps the memory maps;
            ``"meta"`` reads only the metadata (meta tensors); another device copies
            the data there. Under ``torch._subclasses.FakeTensorMode`` the leaves are
            fake tensors and no data file is opened.
        non_blocking (bool): non-blocking copies to ``device``.

    Keyword Args:
        out (TensorDictBase, optional): fill this TensorDict instead (its nested
            TensorDicts are kept, its leaves rebound, keys absent on disk removed).
        allow_pickle (bool): allow loading non-tensor values that were pickled.
            Pickle runs arbitrary code: only for stores you trust. Defaults to ``False``.
        num_threads (int): accepted for API compatibility (mapping is lazy).
        subpath (str or nested key, optional): load only the container under this
            path (``"1/sub"`` or ``("1", "sub")``; digits index a lazy stack).
        mode (str, optional): ``"r+"``: writes to the leaves reach the files;
            ``"r"`` or ``"c"``: copy-on-write maps, the files are never modified.
            Defaults to ``"r+"`` for a folder and ``"c"`` for an archive.
        robust_key (bool, optional): accepted for compatibility (keys are always
            stored robustly).

    Returns:
        the stored TensorDict / LazyStackedTensorDict / registered type, locked
        (in-place writes work; new keys need ``unlock_()``).

    Raises:
        FileNotFoundError: no store at ``prefix``, or a data file is missing.
        RuntimeError: the store is incomplete (interrupted save), damaged
            (truncated/resized file, bad metadata), holds an unregistered type, or
            holds pickled values and ``allow_pickle`` is False.
        ValueError: ``subpath`` names no container, or ``mode`` is unknown.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(3), "b": {"c": torch.zeros(3)}}, [3])
        >>> with tempfile.TemporaryDirectory() as path:
        ...     _ = td.memmap(path)
        ...     loaded = TensorDict.load_memmap(path)
        ...     nested = TensorDict.load_memmap(path + "/b")
        ...     (loaded["a"].tolist(), loaded.is_memmap(), nested.batch_size)
        ([0, 1, 2], True, torch.Size([3]))
    """
    return load_tree(prefix, device, non_blocking, out=out, allow_pickle=allow_pickle, subpath=subpath, mode=mode)


def load_memmap_(td: Any, prefix: str | Path, *, allow_pickle: bool = False, **kwargs: Any) -> Any:
    """Loads the store at ``prefix`` into ``td`` (``load_memmap(prefix, out=td)``) and returns ``td``.

    Nested TensorDicts are kept; leaves are rebound to the loaded memory maps;
    keys missing on disk are removed. The lock state of ``td`` is kept.

    Args:
        prefix (str or Path): the store folder.

    Keyword Args:
        allow_pickle (bool): allow loading pickled non-tensor values (only for stores
            you trust). Defaults to ``False``.
        **kwargs: the other keywords of :func:`load_memmap`.
    """
    return load_tree(prefix, out=td, allow_pickle=allow_pickle, **kwargs)


def memmap_refresh_(td: Any, *, allow_pickle: bool = False) -> Any:
    """Re-reads ``td``'s folder (``saved_path``), e.g. after another process re-saved it.

    Keyword Args:
        allow_pickle (bool): allow loading pickled non-tensor values (only for stores
            you trust). Defaults to ``False``.

    Raises:
        RuntimeError: ``td`` was not memory-mapped to a folder.
    """
    path = getattr(td, "_saved_path", None)
    if path is None:
        msg = "memmap_refresh_: this TensorDict has no saved_path (it was not memory-mapped to a folder)."
        raise RuntimeError(msg)
    loaded = load_tree(path, allow_pickle=allow_pickle, lock=False)
    transplant(td, loaded)
    td._saved_path = path
    return td


def save(td: Any, prefix: str | Path | None = None, copy_existing: bool = False, *, num_threads: int = 0,
         return_early: bool = False, share_non_tensor: bool = False, existsok: bool = True,
         robust_key: bool | None = None, fsync: bool = False, compression: str | None = None,
         archive: bool | None = None) -> Any:
    """Saves ``td`` to ``prefix``: a proxy of :func:`memmap` (returns its result).

    With ``archive=True``, or a ``prefix`` ending in ``.tdz``, the store is one zip
    file (see :func:`tensordict.memmap.pack_memmap`); ``compression`` (``"deflate"``,
    ``"lzma"``, ``"bzip2"``) applies to archives only.

    Args:
        prefix (str or Path, optional): the folder to write (``None``: anonymous shared memory).
        copy_existing (bool): copy a leaf that is already a ``MemoryMappedTensor`` of a
            whole file elsewhere (``False`` raises instead). Defaults to ``False``.

    Keyword Args:
        num_threads, return_early, share_non_tensor, existsok, robust_key, fsync, compression, archive: as in :func:`memmap`.

    Raises:
        ValueError: ``compression`` is given for a folder store.
    """
    return memmap(td, prefix, copy_existing, num_threads=num_threads, return_early=return_early,
                  share_non_tensor=share_non_tensor, existsok=existsok, fsync=fsync, compression=compression,
                  archive=archive)


dumps = save


def load(cls: Any, prefix: str | Path, *args: Any, **kwargs: Any) -> Any:
    """Loads a saved TensorDict: a proxy of :func:`load_memmap`.

    Args:
        prefix (str or Path): the store folder.
        *args: the other positional arguments of :func:`load_memmap`.
        **kwargs: its keyword arguments.
    """
    return load_memmap(cls, prefix, *args, **kwargs)


def load_(td: Any, prefix: str | Path, *args: Any, **kwargs: Any) -> Any:
    """Loads a saved TensorDict into ``td``: a proxy of :func:`load_memmap_`.

    Args:
        prefix (str or Path): the store folder.
        *args: the other positional arguments of :func:`load_memmap_`.
        **kwargs: its keyword arguments.
    """
    return load_memmap_(td, prefix, *args, **kwargs)


def is_memmap(td: Any) -> bool:
    """``True`` if every tensor leaf of ``td`` (at least one) is a :class:`MemoryMappedTensor`,
    or ``td`` has no tensor leaf and was produced by a memmap call or a load."""
    found = False
    stack = [td]
    while stack:
        node = stack.pop()
        subs = getattr(node, "tensordicts", None)
        if subs is not None and not hasattr(node, "_tensordict"):
            stack.extend(subs)
            continue
        for _, value in node._items_raw():
            if isinstance(value, MemoryMappedTensor):
                found = True
            elif hasattr(value, "_items_raw"):
                stack.append(value)
            elif hasattr(value, "_tensordict") and hasattr(value._tensordict, "_items_raw"):
                stack.append(value._tensordict)
            elif isinstance(value, torch.Tensor):
                return False
    return found or bool(getattr(td, "_is_memmap", False))


def to_safetensors(td: Any, path: str | Path) -> None:
    """Saves this TensorDict to a safetensors file (see :func:`tensordict.to_safetensors`).

    Tensors are stored under their nested keys joined with ``"."``; the structure
    (batch sizes, names, lazy stacks, tensorclasses, JSON non-tensor values) is JSON
    metadata, as tensordict 0.15 writes it. A failed write leaves an earlier file intact.

    Args:
        path (str or Path): the file.

    Raises:
        ImportError: safetensors is not installed.
        TypeError: a value safetensors cannot hold (nested tensor, non-JSON object, a
            ``NonTensorStack``).
        ValueError: two keys with one ``"."``-joined name.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     TensorDict(a=torch.ones(2), batch_size=[2]).to_safetensors(Path(tmp) / "a.safetensors")
        ...     TensorDict.from_safetensors(Path(tmp) / "a.safetensors")["a"]
        tensor([1., 1.])
    """
    _to_safetensors(td, path)


def from_safetensors(cls: Any, path: str | Path, *, device: Any = None) -> Any:
    """Loads a TensorDict from a safetensors file (see :func:`tensordict.from_safetensors`).

    The structure saved by ``to_safetensors`` is restored; any other safetensors file
    loads as a nested TensorDict with batch size ``[]`` (names split on ``"."``). The
    header is checked before a tensor is read; nothing is unpickled or imported.

    Args:
        path (str or Path): the file.

    Keyword Args:
        device (torch.device, optional): where the tensors load (the result's device).

    Raises:
        ImportError: safetensors is not installed.
        FileNotFoundError: no such file.
        ValueError: a corrupt or truncated file (file and key named).

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     TensorDict(a=torch.ones(2), batch_size=[2]).to_safetensors(Path(tmp) / "a.safetensors")
        ...     TensorDict.from_safetensors(Path(tmp) / "a.safetensors").batch_size
        torch.Size([2])
    """
    return _from_safetensors(path, device=device)
