"""TensorDictBase methods provided by td-h5 through td-core's sibling seam.

td-core forwards ``td.to_h5(...)`` and ``TensorDict.from_h5(...)`` here (see
``tensordict._seams``): the TensorDict (or class) comes first.
"""

from __future__ import annotations

from typing import Any

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

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(1000), b={"c": torch.zeros(1000, 3)}, batch_size=[1000])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with td.to_h5(os.path.join(tmp, "data.h5"), compression="gzip") as td_h5:
        ...         print(type(td_h5).__name__, td_h5.batch_size, td_h5["b", "c"].shape)
        PersistentTensorDict torch.Size([1000]) torch.Size([1000, 3])
    """
    return PersistentTensorDict.from_dict(td, filename, **h5_kwargs)


def from_h5(cls: Any, filename: Any, mode: str = "r", **kwargs: Any) -> PersistentTensorDict:
    """``TensorDict.from_h5(filename, mode="r", ...)``: see :func:`tensordict.persistent.from_h5`."""
    return PersistentTensorDict.from_h5(filename, mode=mode, **kwargs)
