"""TensorDictBase methods provided by td-h5 through td-core's sibling seam.

td-core forwards ``td.to_h5(...)`` and ``TensorDict.from_h5(...)`` here (see
``tensordict._seams``): the TensorDict (or class) comes first.
"""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase
from tensordict.persistent._persistent import PersistentTensorDict

__all__ = ["to_h5", "from_h5"]


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
