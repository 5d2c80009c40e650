"""``tensordict.memmap``: memory-mapped tensors and TensorDicts on disk.

Provided by the ``td-memmap`` distribution. ``from tensordict import memmap``
gives the :func:`memmap` function (td-core keeps that name bound to the function
even after this subpackage is imported); the subpackage's other names are
reachable as ``from tensordict.memmap import MemoryMappedTensor, ...`` and as the
top-level ``tensordict.MemoryMappedTensor``, ``tensordict.save``, ``tensordict.load``,
``tensordict.load_memmap`` and ``tensordict.is_memmap``.

The on-disk format (one folder per TensorDict, ``meta.json`` + ``<key>.memmap``
files), the safety rules for loading untrusted stores and the crash-safety
protocol are described in the package README and in ``_save.py``, ``_load.py``
and ``_store.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tensordict.memmap import _td_methods
from tensordict.memmap._append import append_memmap
from tensordict.memmap._archive import (
    is_memmap_archive,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)
from tensordict.memmap._registry import register_memmap_type, registered_types
from tensordict.memmap._safetensors import from_safetensors, to_safetensors
from tensordict.memmap._shared_value import SharedNonTensorData
from tensordict.memmap._tensor import MemoryMappedTensor
from tensordict.memmap._version import __version__

__all__ = [
    "MemoryMappedTensor",
    "memmap",
    "save",
    "load",
    "load_memmap",
    "is_memmap",
    "is_memmap_archive",
    "pack_memmap",
    "unpack_memmap",
    "refresh_archive_checksums",
    "append_memmap",
    "to_safetensors",
    "from_safetensors",
    "SharedNonTensorData",
    "register_memmap_type",
    "registered_types",
    "__version__",
]


def memmap(data: Any, prefix: str | Path | None = None, copy_existing: bool = False, *, num_threads: int = 0,
           return_early: bool = False, share_non_tensor: bool = False, existsok: bool = True,
           robust_key: bool | None = None, fsync: bool = False, compression: str | None = None,
           archive: bool | None = None) -> Any:
    """Writes every tensor of ``data`` to memory-mapped files; returns the locked, mapped copy.

    ``data`` is a TensorDict, a lazy stack or an object of a registered type (e.g.
    a tensorclass). See :meth:`tensordict.TensorDictBase.memmap` for the arguments.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict, memmap
        >>> with tempfile.TemporaryDirectory() as path:
        ...     mm = memmap(TensorDict({"a": torch.ones(2)}, [2]), path)
        ...     type(mm["a"]).__name__
        'MemoryMappedTensor'
    """
    return _td_methods.memmap(data, prefix, copy_existing, num_threads=num_threads, return_early=return_early,
                              share_non_tensor=share_non_tensor, existsok=existsok, robust_key=robust_key,
                              fsync=fsync, compression=compression, archive=archive)


def save(data: Any, prefix: str | Path | None = None, copy_existing: bool = False, *, num_threads: int = 0,
         return_early: bool = False, share_non_tensor: bool = False, existsok: bool = True,
         robust_key: bool | None = None, fsync: bool = False, compression: str | None = None,
         archive: bool | None = None) -> Any:
    """Saves ``data`` to the folder ``prefix``: a proxy of :func:`memmap`.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict, save, load
        >>> with tempfile.TemporaryDirectory() as path:
        ...     _ = save(TensorDict({"a": torch.arange(3)}, [3]), path)
        ...     load(path)["a"].tolist()
        [0, 1, 2]
    """
    return memmap(data, prefix, copy_existing, num_threads=num_threads, return_early=return_early,
                  share_non_tensor=share_non_tensor, existsok=existsok, robust_key=robust_key, fsync=fsync,
                  compression=compression, archive=archive)


def load_memmap(prefix: str | Path, device: Any = None, non_blocking: bool = False, *, out: Any = None,
                allow_pickle: bool = False, num_threads: int = 0, subpath: Any = None, mode: str | None = None,
                robust_key: bool | None = None) -> Any:
    """Loads the store at ``prefix`` (see :meth:`tensordict.TensorDictBase.load_memmap`).

    Pickled non-tensor values load only with ``allow_pickle=True``; ``device="meta"``
    reads only metadata; under ``FakeTensorMode`` the leaves are fake tensors.

    Raises:
        FileNotFoundError: no store at ``prefix``.
        RuntimeError: the store is incomplete or damaged (the error names the file).

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict, load_memmap
        >>> with tempfile.TemporaryDirectory() as path:
        ...     _ = TensorDict({"a": torch.zeros(2, 3)}, [2]).memmap(path)
        ...     load_memmap(path, device="meta")["a"].device
        device(type='meta')
    """
    return _td_methods.load_memmap(None, prefix, device, non_blocking, out=out, allow_pickle=allow_pickle,
                                   num_threads=num_threads, subpath=subpath, mode=mode)


def load(prefix: str | Path, device: Any = None, non_blocking: bool = False, *, out: Any = None,
         allow_pickle: bool = False, num_threads: int = 0, subpath: Any = None, mode: str | None = None,
         robust_key: bool | None = None) -> Any:
    """Loads a saved TensorDict: a proxy of :func:`load_memmap`."""
    return load_memmap(prefix, device, non_blocking, out=out, allow_pickle=allow_pickle, num_threads=num_threads,
                       subpath=subpath, mode=mode)


def is_memmap(datatype: Any) -> bool:
    """``True`` for a :class:`MemoryMappedTensor` (instance or class), or a memory-mapped TensorDict.

    Examples:
        >>> import torch
        >>> is_memmap(MemoryMappedTensor.zeros(2)), is_memmap(torch.zeros(2)), is_memmap(MemoryMappedTensor)
        (True, False, True)
    """
    if isinstance(datatype, type):
        return issubclass(datatype, MemoryMappedTensor)
    if isinstance(datatype, MemoryMappedTensor):
        return True
    if hasattr(datatype, "_items_raw"):
        return _td_methods.is_memmap(datatype)
    inner = getattr(datatype, "_tensordict", None)
    if inner is not None and hasattr(inner, "_items_raw"):
        return _td_methods.is_memmap(inner)
    return False


def _expose_on_function() -> None:
    """Makes ``import tensordict.memmap as m; m.MemoryMappedTensor`` work.

    td-core binds ``tensordict.memmap`` to the :func:`memmap` function (so that
    ``from tensordict import memmap`` is the function). ``import tensordict.memmap
    as m`` and ``import tensordict.memmap._x as y`` read attributes through that
    binding, so the public names and the submodules are also set on the function.
    """
    import sys
    import types

    module = sys.modules[__name__]
    for name in __all__:
        if name != "memmap":
            setattr(memmap, name, getattr(module, name))
    for name, value in list(vars(module).items()):
        if isinstance(value, types.ModuleType) and value.__name__.startswith(__name__ + "."):
            setattr(memmap, name, value)


from tensordict.memmap import (  # noqa: E402, F401
    _archive,
    _fileio,
    _load,
    _names,
    _registry,
    _save,
    _store,
    _tensor,
    _upstream,
    _values,
)

_expose_on_function()
