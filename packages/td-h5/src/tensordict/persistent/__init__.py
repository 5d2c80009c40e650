"""``tensordict.persistent`` (distribution ``td-h5``): TensorDicts stored in HDF5 files.

:class:`PersistentTensorDict` opens an HDF5 file (written by ``to_h5`` or by any other
HDF5 tool) as a TensorDict whose datasets are read lazily, only the rows an index
asks for. ``tensordict.from_h5`` and ``TensorDict.from_h5`` open a file;
``td.to_h5(filename, **h5_kwargs)`` writes one. With zarr>=3 installed (the ``zarr``
extra), the same class reads and writes Zarr stores: ``td.to_zarr(path)``,
``tensordict.from_zarr(path)``, ``PersistentTensorDict(filename=path, backend="zarr")``.

Public: ``PersistentTensorDict``, ``from_h5``, ``from_zarr``. Everything in ``_``-modules is private.
"""

from tensordict.persistent._persistent import PersistentTensorDict, from_h5, from_zarr
from tensordict.persistent._version import __version__

__all__ = ["PersistentTensorDict", "from_h5", "from_zarr", "__version__"]
