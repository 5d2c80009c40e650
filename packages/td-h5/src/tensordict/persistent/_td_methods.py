"""TensorDictBase methods provided by td-h5 through td-core's sibling seam.

td-core forwards ``td.to_h5(...)`` and ``TensorDict.from_h5(...)`` here (see
``tensordict._seams``): the TensorDict (or class) comes first.
"""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase
from tensordict.persistent._persistent import PersistentTensorDict

__all__ = ["to_h5", "from_h5", "to_zarr", "from_zarr"]


def to_h5(td: Any, filename: Any, **h5_kwargs: Any) -> PersistentTensorDict:
    """Writes ``td`` to a new HDF5 file and returns a :class:`PersistentTensorDict` on it.

    Each tensor leaf becomes a dataset, each nested TensorDict a group, non-tensor
    data a group attribute; batch sizes and dim names are kept. An existing file is
    replaced only once the new one is complete.

    Args:
        td (TensorDictBase): the data to write.
        filename (str or path): the file to create or overwrite.
        **h5_kwargs: passed to ``h5py.Group.create_dataset`` for every tensor, e.g.
            ``compression="gzip"``, ``compression_opts=4``, ``chunks=True``, ``shuffle=True``.

    Returns:
        PersistentTensorDict: opened in mode ``"r+"``; close it (or use ``with``).

    Raises:
        TypeError: a leaf cannot be stored in HDF5; nothing is written.
        ValueError: a lazy stack in ``td`` holds keys that not all of its TensorDicts
            have (HDF5 has no place for them); nothing is written.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(1000), b={"c": torch.zeros(1000, 3)}, batch_size=[1000])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with td.to_h5(os.path.join(tmp, "data.h5"), compression="gzip") as td_h5:
        ...         print(type(td_h5).__name__, td_h5.batch_size, td_h5["b", "c"].shape)
        PersistentTensorDict torch.Size([1000]) torch.Size([1000, 3])
    """
    _refuse_exclusive_keys(td)
    return PersistentTensorDict.from_dict(td, filename, **h5_kwargs)


def _refuse_exclusive_keys(td: Any, prefix: tuple = ()) -> None:
    """Raises ``ValueError`` if a lazy stack in ``td`` holds keys that not all its TensorDicts have.

    An HDF5 dataset holds one array per key for the whole batch; a key present in only
    some of the stacked TensorDicts has no such array. Writing the shared keys only would
    lose the others silently, so nothing is written.
    """
    members = getattr(td, "tensordicts", None)
    if members is not None:
        key_sets = [set(t.keys(include_nested=True, leaves_only=True)) for t in members]
        if key_sets and any(k != key_sets[0] for k in key_sets[1:]):
            exclusive = sorted(set.union(*key_sets) - set.intersection(*key_sets), key=str)
            where = f" at {prefix!r}" if prefix else ""
            msg = (
                f"to_h5: the lazy stack{where} holds keys that not all of its TensorDicts have: "
                f"{exclusive[:10]}{' ...' if len(exclusive) > 10 else ''}. HDF5 stores one dataset per key "
                "for the whole batch, so they cannot be written; nothing was written. Fill them in every "
                "TensorDict, or drop them with exclude(), or save with memmap() or consolidate(filename=...), "
                "which keep them."
            )
            raise ValueError(msg)
        for member in members:
            _refuse_exclusive_keys(member, prefix)
        return
    for key, value in td.items():
        if isinstance(value, TensorDictBase):
            _refuse_exclusive_keys(value, prefix + (key,))


def from_h5(cls: Any, filename: Any, mode: str = "r", **kwargs: Any) -> PersistentTensorDict:
    """``TensorDict.from_h5(filename, mode="r", ...)``: see :func:`tensordict.persistent.from_h5`.

    Args:
        filename (str or Path): the HDF5 file.
        mode (str, optional): ``"r"`` (read only, the default), ``"r+"``, ``"a"``,
            ``"w"``, ``"w-"`` or ``"x"``, as for ``h5py.File``.
        **kwargs: the other keywords of :meth:`PersistentTensorDict.from_h5`.
    """
    return PersistentTensorDict.from_h5(filename, mode=mode, **kwargs)


def to_zarr(td: Any, filename: Any, *, allow_pickle: bool | None = None, **kwargs: Any) -> PersistentTensorDict:
    """Writes ``td`` to a new Zarr (v3) store and returns a :class:`PersistentTensorDict` on it.

    Each tensor leaf becomes an array (one chunk, no compression by default), each
    nested TensorDict a group, a non-tensor value a ``uint8`` array holding its JSON (or
    pickle) encoding; batch sizes and dim names are kept in the groups' attributes, in
    the layout tensordict 0.15 writes. A folder store is written beside ``filename`` and
    moved in place once complete: an error leaves an earlier store intact.

    Args:
        td (TensorDictBase): the data to write.
        filename (str, path or zarr Store): the folder to create or overwrite, or a
            zarr ``Store`` (``LocalStore``, ``ZipStore``, ...) written in place.

    Keyword Args:
        allow_pickle (bool, optional): ``False`` refuses a non-tensor value that JSON
            cannot hold (it would need a pickle), before anything is written.
            Defaults to ``None``: such values are pickled, and the returned
            PersistentTensorDict may read them back (it wrote them).
        **kwargs: passed to ``zarr.Group.create_array`` for every tensor:
            ``chunks=(16,)`` constrains the leading dims of every leaf whatever its
            rank, ``compressors=zarr.codecs.ZstdCodec()``, ...

    Returns:
        PersistentTensorDict: on the new store, mode ``"r+"``; close it (or use ``with``).

    Raises:
        ImportError: zarr>=3 is not installed (the message gives the ``pip install`` line).
        TypeError: a leaf cannot be stored (``bfloat16``, an object with
            ``allow_pickle=False``); nothing is written.
        FileNotFoundError: the folder that should hold ``filename`` does not exist.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(4, 3), b={"c": torch.arange(4)}, batch_size=[4])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with td.to_zarr(os.path.join(tmp, "data.zarr"), chunks=(2,)) as ztd:
        ...         print(type(ztd).__name__, ztd.batch_size, ztd[1:3]["b", "c"].tolist())
        PersistentTensorDict torch.Size([4]) [1, 2]
    """
    _refuse_exclusive_keys(td)
    return PersistentTensorDict.from_dict(td, filename, backend="zarr", allow_pickle=allow_pickle, **kwargs)


def from_zarr(cls: Any, filename: Any, **kwargs: Any) -> PersistentTensorDict:
    """``TensorDict.from_zarr(filename, mode="r", ...)``: see :func:`tensordict.persistent.from_zarr`.

    Args:
        filename (str, path or zarr Store): the store to open.

    Keyword Args:
        mode (str): ``"r"`` (default), ``"r+"``, ``"a"``, ``"w"`` or ``"w-"``.
        auto_batch_size (bool): ignore the stored batch size; use the longest leading
            shape every array shares.
        batch_dims (int, optional): keep at most this many batch dims (turns
            ``auto_batch_size`` on).
        batch_size (torch.Size, optional): the batch size to use.
        non_tensor_as_stack (bool): read string arrays shaped like the batch as
            :class:`~tensordict.NonTensorStack`.
        allow_pickle (bool, optional): read pickled non-tensor entries. Defaults to
            ``None``, which refuses them (``RuntimeError``): a pickle can run code.
    """
    return PersistentTensorDict.from_zarr(filename, **kwargs)
