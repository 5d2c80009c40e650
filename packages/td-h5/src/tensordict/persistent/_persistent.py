"""``PersistentTensorDict``: a TensorDict whose leaves live in an HDF5 file.

Storage model: a group of the file is a (nested) PersistentTensorDict, a numeric
dataset is a tensor leaf, a string dataset or a group attribute is non-tensor data.
Nothing is read when the file is opened but metadata (names, shapes, dtypes); a
dataset is read when a key asks for it, and indexing returns a lazy view that reads
only the rows it selects.

What returns what:

* ``td["key"]``, ``td.get(key)``: a tensor read from the file (only the view's rows).
* ``td["group"]``, ``td[index]``, ``unbind``, ``split``, ``chunk``, ``narrow``,
  ``unsqueeze``, ``squeeze``, iteration: PersistentTensorDicts reading lazily.
* ``to``, ``clone``, ``to_tensordict``, ``apply``, arithmetic, comparisons,
  ``select``/``exclude`` and the shape ops that move data (``view``, ``reshape``,
  ``permute``, ``transpose``, ``flatten``, ``unflatten``, ``expand``, ``repeat``,
  ``flip``, ``roll``, ``gather``, ``stack``, ``cat``): dense in-memory
  :class:`~tensordict.TensorDict` results, reading what they need.
* Writes (``set``, ``set_``, ``update``, ``update_``, ``td[idx] = value``,
  ``del td[key]``, ``zero_``, ``fill_``, ``apply_leaves_``, and td-core's in-place math
  and ``apply_``) go to the file; see :mod:`tensordict.persistent._writes`.
* Entries that point outside the file (external links, datasets with external
  storage, virtual datasets of other files) are neither listed nor read: asking for
  one raises ``KeyError``; see :mod:`tensordict.persistent._links`.
"""

from __future__ import annotations

import os
import textwrap
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import h5py
import numpy as np
import torch

from tensordict import NestedKey, NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from tensordict.ext import (
    NO_DEFAULT,
    batch_mismatch_error,
    check_names,
    fields_repr,
    locked_error,
    missing_key_error,
    unravel_key,
)
from tensordict.ext import as_key_tuple as _as_tuple
from tensordict.persistent import _h5io as io
from tensordict.persistent import _links
from tensordict.persistent._filestate import FileState, infer_batch_size, validate_members
from tensordict.persistent._keysview import H5ItemsView, H5KeysView, H5ValuesView
from tensordict.persistent._lazyshape import LazyShapeMixin
from tensordict.persistent._limits import LimitsMixin
from tensordict.persistent._nodes import is_dataset, is_group
from tensordict.persistent._save import save_atomic
from tensordict.persistent._selection import FlatSel, Selection, compose, read_selected
from tensordict.persistent._writes import WriteMixin, install_inplace_writeback, is_temp_member

__all__ = ["PersistentTensorDict", "from_h5", "from_zarr"]

_CREATE_MODES = ("w", "w-", "x", "a")
_BACKENDS = ("h5", "zarr")


class _LazyItems:
    """Re-iterable ``(key, value)`` pairs, each value read when reached."""

    __slots__ = ("_td",)

    def __init__(self, td: PersistentTensorDict) -> None:
        self._td = td

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        td = self._td
        for key in td._keys_raw():
            yield key, td._get_raw(key)

    def __len__(self) -> int:
        return len(self._td._keys_raw())


class _Shown:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class PersistentTensorDict(LimitsMixin, LazyShapeMixin, WriteMixin, TensorDictBase):
    """A TensorDict stored in an HDF5 file (or a Zarr store), read lazily.

    Groups are nested PersistentTensorDicts, numeric datasets are tensors, string
    datasets and group attributes are non-tensor data. Opening reads metadata only;
    ``td[key]`` reads one dataset, ``td[index]`` is a lazy view that reads only the
    selected rows when a key is asked for. Writes go to the file when ``mode``
    allows it.

    Args:
        batch_size (torch.Size or sequence of int, optional): leading dims shared by
            every numeric dataset. Defaults to ``None``: the size stored by
            :meth:`~tensordict.TensorDictBase.to_h5`, else the longest leading shape
            every dataset shares (each nested group gets its own).
        filename (str or path, optional): the HDF5 file to open.
        group (str or h5py.Group, optional): with ``filename``, the path of the group
            to open (``"/"`` by default); without it, an open ``h5py.Group``/``h5py.File``
            to wrap (its file is then shared: :meth:`close` closes it too).
        mode (str, optional): ``"r"`` (read only), ``"r+"`` (read/write, must exist),
            ``"w"`` (create, truncate), ``"w-"``/``"x"`` (create, fail if it exists) or
            ``"a"`` (read/write, create if missing), as in ``h5py.File``. Defaults to ``"r"``.
        backend (str, optional): ``"h5"`` (default, h5py) or ``"zarr"`` (zarr>=3, the
            ``zarr`` extra): ``filename`` is then a folder or a zarr ``Store``, and
            ``group`` a path in it or an open ``zarr.Group``.
        device (torch.device, optional): device the tensors read are moved to.
            Defaults to ``None`` (CPU, as read).

    Keyword Args:
        auto_batch_size (bool): ignore a stored batch size and use the longest shared
            leading shape. Defaults to ``False``.
        batch_dims (int, optional): with ``auto_batch_size``, keep at most this many dims.
        non_tensor_as_stack (bool): read a string dataset whose shape equals the
            batch size as a :class:`~tensordict.NonTensorStack` (one str per row)
            instead of one :class:`~tensordict.NonTensorData`. Defaults to ``False``.
        allow_pickle (bool, optional): Zarr only: read pickled non-tensor entries.
            Defaults to ``None``, which refuses them (``RuntimeError`` when one is read):
            unpickling can run arbitrary code. HDF5 files are never unpickled.
        **kwargs: passed to ``h5py.File`` (``driver``, ``locking``, ``rdcc_nbytes``, ...).

    Raises:
        FileNotFoundError: ``filename`` does not exist (modes ``"r"``, ``"r+"``).
        ValueError: the file is not an HDF5 file, or ``mode``/``backend`` is invalid.
        KeyError: ``group`` does not exist in the file (modes ``"r"``, ``"r+"``).
        RuntimeError: a dataset's leading dims do not match ``batch_size``.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> from tensordict.persistent import PersistentTensorDict
        >>> td = TensorDict({"obs": torch.arange(12.).view(6, 2), "meta": {"id": torch.arange(6)}}, [6])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = td.to_h5(os.path.join(tmp, "data.h5")).close()
        ...     with PersistentTensorDict(filename=os.path.join(tmp, "data.h5")) as ptd:
        ...         view = ptd[torch.tensor([4, 1])]
        ...         print(ptd.batch_size, view["obs"].tolist(), view["meta", "id"].tolist())
        torch.Size([6]) [[8.0, 9.0], [2.0, 3.0]] [4, 1]
    """

    _sel: Selection | FlatSel | None = None
    _obs: torch.Size | None = None
    _bsv: torch.Size | None = None
    _nm: list | None = None
    _names_pending: bool = False
    _stored_checked: bool = False
    _device: torch.device | None = None
    _nts: bool = False
    _pending_lock_ops: int = 0

    def __init__(
        self,
        *,
        batch_size: Any = None,
        filename: Any = None,
        group: Any = None,
        mode: str = "r",
        backend: str = "h5",
        device: Any = None,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        non_tensor_as_stack: bool = False,
        allow_pickle: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if backend not in _BACKENDS:
            msg = f"Unknown backend {backend!r}. Supported backends are {list(_BACKENDS)}."
            raise NotImplementedError(msg)
        if allow_pickle is not None and not isinstance(allow_pickle, bool):
            msg = f"allow_pickle must be a bool or None, got {allow_pickle!r}."
            raise TypeError(msg)
        io.check_mode(mode)
        if batch_size is not None and auto_batch_size:
            msg = "auto_batch_size=True and batch_size are exclusive: pass one of them."
            raise ValueError(msg)
        if batch_dims is not None:
            auto_batch_size = batch_size is None
        owns = filename is not None
        if backend == "zarr":
            from tensordict.persistent import _zarrio

            kwargs.pop("validate_batch_size", None)
            file, grp = _zarrio.open_store(filename if filename is not None else group, mode, allow_pickle)
            if filename is not None and isinstance(group, str) and group not in ("", "/"):
                grp = self._open_zarr_group(grp, group, mode)
            filename, mode = file.filename, file.mode
        elif filename is not None:
            if group is not None and not isinstance(group, str):
                msg = f"with filename=, group must be a path in the file (str), got {type(group).__name__}."
                raise TypeError(msg)
            filename = os.fspath(filename)
            file = io.open_h5(filename, mode, **kwargs)
            try:
                grp = self._open_group(file, filename, group, mode)
            except BaseException:
                file.close()
                raise
        elif isinstance(group, h5py.Group):
            file = group.file
            grp = group
            filename = file.filename
            mode = "r" if file.mode == "r" else "r+"
        else:
            msg = "PersistentTensorDict needs filename= (a path) or group= (an open h5py.Group or h5py.File)."
            raise ValueError(msg)
        state = FileState(file, filename, mode, batch_dims if auto_batch_size else None, not auto_batch_size)
        if backend == "zarr":
            state.backend = "zarr"
            state.to_attr = lambda key, value: _zarrio.encode(key, value, file.allow_pickle, filename)
        bs = None
        if batch_size is not None:
            bs = torch.Size([batch_size]) if isinstance(batch_size, int) else torch.Size(batch_size)
            try:
                validate_members(grp, bs)
            except BaseException:
                if owns:
                    file.close()
                raise
            if backend == "zarr" and mode in ("w", "w-", "x"):
                io.write_batch_meta(grp, bs, None)  # a new store records its batch size, as to_zarr does
        # without an explicit batch_size, it is inferred from metadata on first use
        self._init(state, grp, bs, None, device, non_tensor_as_stack)
        self._names_pending = True

    @staticmethod
    def _open_zarr_group(top: Any, group: str, mode: str) -> Any:
        here = top
        for part in [p for p in group.split("/") if p]:
            sub = here.get(part)
            if sub is None:
                if mode not in _CREATE_MODES:
                    msg = f"group {group!r} not found in Zarr store {top.root.filename!r} (top-level entries: {sorted(top.keys())})."
                    raise KeyError(msg)
                sub = here.create_group(part)
            elif not is_group(sub):
                msg = f"{group!r} in Zarr store {top.root.filename!r} is an array, not a group."
                raise KeyError(msg)
            here = sub
        return here

    @staticmethod
    def _open_group(file: h5py.File, filename: str, group: str | None, mode: str) -> h5py.Group:
        if group in (None, "", "/"):
            return file
        obj = _links.resolve_path(file, group, filename)
        if obj is None:
            if mode in _CREATE_MODES:
                return file.require_group(group)
            top = sorted(file.keys())
            msg = (
                f"group {group!r} not found in HDF5 file {filename!r} (top-level entries: {top}). "
                "Check the path, or open with mode='a' to create it."
            )
            raise KeyError(msg)
        if not isinstance(obj, h5py.Group):
            msg = f"{group!r} in HDF5 file {filename!r} is a dataset, not a group."
            raise KeyError(msg)
        return obj

    def _init(self, state: FileState, group: h5py.Group, orig_bs: torch.Size | None, sel: Any, device: Any, nts: bool) -> None:
        self._state = state
        self._group = group
        self._obs = orig_bs
        self._sel = sel
        self._bsv = None
        self._device = torch.device(device) if device is not None else None
        self._nts = nts

    @property
    def _orig_bs(self) -> torch.Size:
        """Batch size of this group in the file (before any view index); inferred lazily."""
        obs = self._obs
        if obs is None:
            self._check_open()
            obs = self._obs = torch.Size(self._state.natural(self._group)[0])
        return obs

    def _stored_bs(self) -> torch.Size | None:
        """The batch size stored in the file when it is authoritative (read once), else ``None``."""
        if self._stored_checked or not self._state.use_stored:
            return self._obs
        self._stored_checked = True
        stored = io.stored_batch_size(self._group)
        if stored is not None:
            self._obs = torch.Size(stored)
        return self._obs

    @property
    def _batch_size(self) -> torch.Size:
        bs = self._bsv
        if bs is None:
            obs = self._orig_bs
            sel = self._sel
            bs = obs if sel is None else torch.Size((*sel.out_shape, *obs[len(sel.in_shape) :]))
            self._bsv = bs
        return bs

    @property
    def _names(self) -> list | None:
        if self._names_pending:
            self._names_pending = False
            self._nm = io.stored_names(self._group, len(self._orig_bs))
        return self._nm

    @_names.setter
    def _names(self, value: list | None) -> None:
        self._names_pending = False
        self._nm = value

    def _derive(self, group: h5py.Group, orig_bs: torch.Size, sel: Any) -> PersistentTensorDict:
        out = PersistentTensorDict.__new__(PersistentTensorDict)
        out._init(self._state, group, orig_bs, sel, None, self._nts)
        out._device = self._device
        out._is_locked = self._is_locked
        return out

    def _child(self, group: h5py.Group) -> PersistentTensorDict:
        """The nested PersistentTensorDict of ``group``; its leading dim names are this one's."""
        child = self._derive(group, self._state.child_bs(group, self._orig_bs), self._sel)
        if self._is_locked:  # as td-core's lock graph: a locked parent keeps its children locked
            child._lock_parents = [*self._lock_parents, weakref.ref(self)]
        names = self._names
        if names is not None:
            extra = len(child._batch_size) - len(names)
            child._names = [*names, *([None] * extra)]
        return child

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_h5(
        cls,
        filename: Any,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Any = None,
        non_tensor_as_stack: bool = False,
        **kwargs: Any,
    ) -> PersistentTensorDict:
        """Opens an HDF5 file as a PersistentTensorDict (see the class for the arguments).

        ``batch_dims`` alone turns ``auto_batch_size`` on.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> from tensordict.persistent import PersistentTensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     path = os.path.join(tmp, "d.h5")
            ...     TensorDict(a=torch.zeros(3, 4), batch_size=[3]).to_h5(path).close()
            ...     with PersistentTensorDict.from_h5(path, auto_batch_size=True) as td:
            ...         print(td.batch_size)
            torch.Size([3, 4])
        """
        return cls(
            filename=filename,
            mode=mode,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            non_tensor_as_stack=non_tensor_as_stack,
            **kwargs,
        )

    @classmethod
    def from_zarr(
        cls,
        filename: Any,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Any = None,
        non_tensor_as_stack: bool = False,
        allow_pickle: bool | None = None,
    ) -> PersistentTensorDict:
        """Opens a Zarr (v3) store as a PersistentTensorDict (see :func:`tensordict.persistent.from_zarr`)."""
        return cls(
            filename=filename,
            mode=mode,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            non_tensor_as_stack=non_tensor_as_stack,
            backend="zarr",
            allow_pickle=allow_pickle,
        )

    @classmethod
    def from_dict(  # type: ignore[override]
        cls,
        input_dict: Any,
        filename: Any,
        batch_size: Any = None,
        device: Any = None,
        *,
        auto_batch_size: bool = False,
        backend: str = "h5",
        allow_pickle: bool | None = None,
        **kwargs: Any,
    ) -> PersistentTensorDict:
        """Writes ``input_dict`` (a dict or TensorDict) to a new HDF5 file (or Zarr store) and opens it (``"r+"``).

        The file is written under a temporary name in the same folder and moved over
        ``filename`` once complete: an error (or the process being killed) leaves an
        existing ``filename`` intact, and no half-written file behind.

        Args:
            input_dict (dict or TensorDictBase): the data; nested dicts become groups.
            filename (str or path): the file to write (overwritten).
            batch_size (torch.Size, optional): batch size of a dict input (default: the
                longest shared leading shape).
            device (torch.device, optional): device of the returned PersistentTensorDict.
            auto_batch_size (bool): give the file the longest leading shape all leaves
                share as batch size (a dict input without ``batch_size`` always does).
                Exclusive with ``batch_size``.
            backend (str): ``"h5"`` (default) or ``"zarr"`` (needs ``zarr>=3``: a folder
                path or a zarr ``Store`` as ``filename``).
            allow_pickle (bool, optional): Zarr only. ``False`` refuses to store a
                non-tensor value that JSON cannot hold (it would need a pickle); the
                returned PersistentTensorDict reads pickles unless it is ``False`` (it
                wrote them).
            **kwargs: passed to ``h5py.Group.create_dataset`` (or ``zarr.Group.create_array``)
                for every tensor (``compression="gzip"``, ``chunks``, ``compressors``, ...).

        Returns:
            PersistentTensorDict: on the new file, mode ``"r+"``.

        Raises:
            TypeError: a leaf cannot be stored in HDF5 (nothing is written).
            FileNotFoundError: the folder of ``filename`` does not exist.
            OSError: the write failed (disk full, file-size limit, I/O error); the
                message names ``filename``, which is left as it was.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict.persistent import PersistentTensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     data = {"x": torch.zeros(5, 3), "y": {"z": torch.arange(5)}}
            ...     with PersistentTensorDict.from_dict(data, os.path.join(tmp, "d.h5"), compression="gzip") as td:
            ...         print(td.batch_size, td["y", "z"].tolist())
            torch.Size([5]) [0, 1, 2, 3, 4]
        """
        if auto_batch_size and batch_size is not None:
            msg = "auto_batch_size=True and batch_size are exclusive: pass one of them."
            raise ValueError(msg)
        if isinstance(input_dict, TensorDictBase):
            td = input_dict
            if type(td) is not TensorDict:
                td = td.to_tensordict()  # read files / lazy stacks once, not per pass
            if batch_size is not None and torch.Size(batch_size) != td.batch_size:
                td = td.clone(recurse=False)
                td.batch_size = batch_size
            elif auto_batch_size:
                td = td.clone(recurse=False).auto_batch_size_()
        elif isinstance(input_dict, Mapping):
            if batch_size is None:
                td = TensorDict(input_dict, auto_batch_size=True)
            else:
                td = TensorDict(input_dict, batch_size=batch_size)
        else:
            td = _tensordict_of(input_dict)
        if backend == "zarr":
            from tensordict.persistent import _zarrio

            if allow_pickle is not None and not isinstance(allow_pickle, bool):
                msg = f"allow_pickle must be a bool or None, got {allow_pickle!r}."
                raise TypeError(msg)
            target = _zarrio.save_atomic(filename, td, kwargs, allow_pickle)
            out = cls(filename=target, mode="r+", device=device, backend="zarr", allow_pickle=allow_pickle is not False)
            out._state.file.kwargs = dict(kwargs)  # arrays added later get the same chunks/compressors
            return out
        if backend != "h5":
            msg = f"Unknown backend {backend!r}. Supported backends are {list(_BACKENDS)}."
            raise NotImplementedError(msg)
        io.validate_tree(td)
        filename = os.fspath(filename)
        folder = os.path.dirname(os.path.abspath(filename))
        if not os.path.isdir(folder):
            msg = f"cannot write HDF5 file {filename!r}: folder {folder!r} does not exist."
            raise FileNotFoundError(msg)
        save_atomic(filename, td, kwargs)
        return cls(filename=filename, mode="r+", device=device)

    # ------------------------------------------------------------------ file
    @property
    def file(self) -> h5py.Group:
        """The ``h5py`` group behind this PersistentTensorDict (the ``h5py.File`` at the root)."""
        return self._group

    @property
    def filename(self) -> str:
        """Path of the HDF5 file."""
        return self._state.filename

    @property
    def mode(self) -> str:
        """The mode the file was opened with."""
        return self._state.mode

    def close(self) -> None:
        """Closes the HDF5 file. Views and nested PersistentTensorDicts of it stop working.

        Closing twice is a no-op; using a closed PersistentTensorDict (or a view of it)
        raises ``RuntimeError``. ``with PersistentTensorDict(...) as td:`` closes on exit.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     td = TensorDict(a=torch.zeros(3), batch_size=[3]).to_h5(os.path.join(tmp, "c.h5"))
            ...     view = td[1:]
            ...     td.close()
            ...     print(td.is_closed, view.is_closed)
            True True
        """
        state = self._state
        if state.closed:
            return
        state.closed = True
        try:
            state.file.close()
        except Exception:  # pragma: no cover - already closed by h5py
            pass

    @property
    def is_closed(self) -> bool:
        """``True`` once the file is closed."""
        state = self._state
        return state.closed or not state.file.id.valid

    def _check_open(self) -> None:
        state = self._state
        if state.closed or not state.file.id.valid:
            msg = (
                f"the {state.what} {state.filename!r} behind this PersistentTensorDict is closed: "
                "views and nested PersistentTensorDicts cannot be used after `close()`. Reopen it "
                "with `PersistentTensorDict.from_h5(...)`, or copy what you need with "
                "`td.to_tensordict()` before closing."
            )
            raise RuntimeError(msg)

    def _push_op(self, op: tuple) -> None:
        TensorDictBase._push_op(self, op)
        self._pending_lock_ops = self._pending_lock_ops + 1

    def __enter__(self) -> PersistentTensorDict:
        ctx = self.__dict__.setdefault("_ctx", [])
        if self._pending_lock_ops and self._lock_stack:
            ctx.append("lock")
            self._pending_lock_ops = 0
        else:
            ctx.append("close")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        ctx = self.__dict__.get("_ctx")
        kind = ctx.pop() if ctx else "close"
        if kind == "lock":
            TensorDictBase.__exit__(self, exc_type, exc, tb)
        else:
            self.close()

    # ------------------------------------------------------------------ pickling
    def __reduce__(self) -> tuple:
        self._check_open()
        state = self._state
        payload = {
            "filename": state.filename,
            "group": self._group.name,
            "mode": "r" if state.mode == "r" else "r+",
            "orig_bs": tuple(self._orig_bs),
            "sel": _sel_state(self._sel),
            "device": self._device,
            "names": self._names,
            "nts": self._nts,
            "locked": self._is_locked,
        }
        if state.backend != "h5":
            payload["backend"] = state.backend
            payload["allow_pickle"] = state.file.allow_pickle
        return (_rebuild, (payload,))

    # ------------------------------------------------------------------ metadata
    @property
    def batch_size(self) -> torch.Size:
        """Leading dims shared by every numeric dataset (the view's, once indexed).

        Raises:
            RuntimeError: (setter) a dataset's leading dims do not match, or this is
                an indexed view.
        """
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        new = torch.Size([value]) if isinstance(value, int) else torch.Size(value)
        if new == self._batch_size:
            return
        if self._sel is not None:
            msg = "cannot change the batch_size of an indexed view of a PersistentTensorDict; set it on the unindexed one."
            raise RuntimeError(msg)
        if self._is_locked:
            raise locked_error("change the batch_size")
        self._check_open()
        validate_members(self._group, new)
        if self._names is not None and len(self._names) != len(new):
            self._names = None
        self._obs = self._bsv = new

    def auto_batch_size_(self, batch_dims: int | None = None, keep_compliant_size: bool = False) -> PersistentTensorDict:
        """Sets ``batch_size`` to the longest leading shape every dataset shares (metadata only).

        ``keep_compliant_size`` is accepted for the TensorDict signature: the groups of a
        store are read with the batch size of the store, so there is nothing to keep."""
        self._check_open()
        bs, _ = infer_batch_size(self._group, batch_dims, False)
        self.batch_size = bs
        return self

    @property
    def device(self) -> torch.device | None:
        """Device tensors are moved to when read, or ``None``."""
        return self._device

    @device.setter
    def device(self, value: Any) -> None:
        msg = "device cannot be set directly; use `td.to(device)` (an in-memory copy)."
        raise RuntimeError(msg)

    def clear_device_(self) -> PersistentTensorDict:
        self._device = None
        return self

    def _has_names(self) -> bool:
        return self._names is not None

    @property
    def names(self) -> list:
        """Names of the batch dims (``None`` for unnamed dims); dropped by indexing."""
        if self._names is None:
            return [None] * len(self._batch_size)
        return list(self._names)

    @names.setter
    def names(self, value: Any) -> None:
        # the same checks as every TensorDict (length, str or None, unique)
        self._names = None if value is None else check_names(value, self._batch_size)

    def is_shared(self) -> bool:
        return False

    def _set_lock_flag(self, value: bool) -> None:
        self._is_locked = value

    # ------------------------------------------------------------------ storage primitives
    def _keys_raw(self) -> list:
        self._check_open()
        group = self._group
        names = list(group.keys())
        hidden = self._state.hidden(group, names)
        names = [n for n in names if n not in hidden and not (n.endswith("__td_tmp__") and is_temp_member(group, n))]
        attrs = group.attrs
        if len(attrs):
            members = set(names)
            names.extend(a for a in attrs.keys() if a not in io.RESERVED_ATTRS and a not in members)
        return names

    def _items_raw(self) -> _LazyItems:
        return _LazyItems(self)

    def _get_raw(self, key: str, default: Any = NO_DEFAULT) -> Any:
        self._check_open()
        group = self._group
        if "/" in key:
            obj = None
        else:
            why = self._state.refused(group, key)
            if why is not None:  # asking for it by name is an error, whatever the default
                raise _links.refused_error(key, why, self._state.filename)
            obj = group.get(key)
        if obj is None:
            attrs = group.attrs
            if key not in io.RESERVED_ATTRS and key in attrs:
                return NonTensorData(io.attr_to_python(attrs[key]), self._batch_size, self._device)
            return default
        if is_dataset(obj):
            return self._read_entry(key, obj)
        if is_group(obj):
            return self._child(obj)
        return default

    def _read_dataset(self, dset: h5py.Dataset, dtype: torch.dtype) -> torch.Tensor:
        conv = io.tensor_converter(dtype)
        sel = self._sel
        t = conv(dset[()]) if sel is None else read_selected(dset, sel, conv)
        device = self._device
        if device is not None:
            t = t.to(device)
        return t

    def _read_entry(self, key: str, dset: h5py.Dataset) -> Any:
        kind, dtype = io.dataset_kind(dset)
        if kind == "tensor":
            # an inferred batch size fits every dataset by construction: check only a known one
            bs = self._obs if self._obs is not None else self._stored_bs()
            if bs is not None and dset.shape[: len(bs)] != tuple(bs):
                raise batch_mismatch_error(key, dset.shape, bs)
            return self._read_dataset(dset, dtype)  # type: ignore[arg-type]
        bs = self._orig_bs
        if kind in ("stack", "string") and dset.ndim and tuple(dset.shape) == tuple(bs) and (kind == "stack" or self._nts):
            items = np.asarray(io.read_strings(dset), dtype=object).reshape(-1).tolist()
            stack = NonTensorStack._from_flat(items, bs, self._device)
            if self._sel is not None:
                return stack._from_index(self._positions())
            return stack
        if kind in ("string", "stack"):
            data = io.read_strings(dset)
            data = data.tolist() if isinstance(data, np.ndarray) else data
        elif dset.shape is None:  # null dataspace: no data at all
            data = None
        elif dset.dtype.names is not None:  # compound (struct) dataset: a nested TensorDict of its fields
            return self._read_compound(key, dset)
        else:
            data = dset[()]
        return NonTensorData(data, self._batch_size, self._device)

    def _read_compound(self, key: str, dset: h5py.Dataset) -> TensorDictBase:
        """A compound dataset as a TensorDict: one entry per field, batch size = the dataset's shape."""
        out = io.struct_to_tensordict(key, dset[()], tuple(dset.shape))
        if self._sel is not None:
            bs = tuple(self._orig_bs)
            if tuple(dset.shape[: len(bs)]) != bs:
                raise batch_mismatch_error(key, dset.shape, bs)
            flat = out.reshape(-1) if len(bs) == out.ndim else out.flatten(0, len(bs) - 1)
            out = flat[self._positions().reshape(-1)].reshape(*self._batch_size, *out.batch_size[len(bs):])
        if self._device is not None:
            out = out.to(self._device)
        return out

    def _locate(self, path: tuple) -> tuple | None:
        """Metadata of ``path``: ``(kind, h5py object, torch dtype)`` or ``None`` when absent.

        kind is ``"group"``, ``"tensor"``, ``"string"``, ``"stack"``, ``"other"`` or ``"attr"``.

        Raises:
            KeyError: an intermediate entry is a dataset, not a group.
        """
        self._check_open()
        group = self._group
        refused = self._state.refused
        for name in path[:-1]:
            sub = group.get(name) if "/" not in name and refused(group, name) is None else None
            if sub is None:
                return None
            if not is_group(sub):
                msg = f"key {path!r}: {name!r} holds a dataset, not a group."
                raise KeyError(msg)
            group = sub
        name = path[-1]
        obj = group.get(name) if "/" not in name and refused(group, name) is None else None
        if obj is None:
            if name not in io.RESERVED_ATTRS and name in group.attrs:
                return ("attr", None, None)
            return None
        if is_group(obj):
            return ("group", obj, None)
        kind, dtype = io.dataset_kind(obj)
        return (kind, obj, dtype)

    def _meta_class(self, found: tuple) -> type:
        kind = found[0]
        if kind == "group":
            return PersistentTensorDict
        if kind == "tensor":
            return torch.Tensor
        if kind == "stack" or (kind == "string" and self._nts and tuple(found[1].shape) == tuple(self._orig_bs) and found[1].ndim):
            return NonTensorStack
        return NonTensorData

    def _meta_items(self) -> Iterator[tuple[str, type, Any]]:
        """``(key, class, child)`` per entry, reading no data (child: nested PTD or None)."""
        for key in self._keys_raw():
            found = self._locate((key,))
            if found is None:
                continue
            child = None
            if found[0] == "group":
                child = self._child(found[1])
            yield key, self._meta_class(found), child

    def _tensor_datasets(self) -> list:
        """``(path, dataset, torch dtype)`` of every numeric dataset under this group."""
        self._check_open()
        out = []

        hidden = self._state.hidden

        def walk(group: h5py.Group, prefix: tuple) -> None:
            names = list(group.keys())
            skip = hidden(group, names)
            for name in names:
                if name in skip:
                    continue
                obj = group.get(name)
                if is_group(obj):
                    walk(obj, prefix + (name,))
                elif is_dataset(obj):
                    kind, dtype = io.dataset_kind(obj)
                    if kind == "tensor":
                        out.append((prefix + (name,), obj, dtype))

        walk(self._group, ())
        return out

    def _new_like(self, source: dict, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT) -> TensorDict:
        if batch_size is None:
            batch_size = self._batch_size
            if names is NO_DEFAULT:
                names = self._names
        elif names is NO_DEFAULT:
            names = None
        return TensorDict._new_unsafe(source, torch.Size(batch_size), self._device if device is NO_DEFAULT else device, names)

    # ------------------------------------------------------------------ dict API (metadata)
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Any = None,
        *,
        sort: bool = False,
    ) -> Any:
        """A live view of the keys, listed from the file's metadata (no data is read).

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     td = TensorDict(a=torch.zeros(2), b={"c": torch.zeros(2)}, batch_size=[2]).to_h5(os.path.join(tmp, "k.h5"))
            ...     print(sorted(td.keys(True, True), key=str))
            ...     td.close()
            [('b', 'c'), 'a']
        """
        view = H5KeysView(self, include_nested, leaves_only, is_leaf)
        if sort:
            return sorted(view, key=lambda k: k if isinstance(k, str) else ".".join(k))
        return view

    def __contains__(self, key: object) -> bool:
        return key in H5KeysView(self, True)

    def items(self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None) -> Any:  # type: ignore[override]
        """A live view of ``(key, value)`` pairs: keys listed from metadata, each value read when reached."""
        return H5ItemsView(self, include_nested, leaves_only, is_leaf)

    def values(self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None) -> Any:  # type: ignore[override]
        """A live view of the values: keys listed from metadata, each value read when reached."""
        return H5ValuesView(self, include_nested, leaves_only, is_leaf)

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """Shape of the entry ``key`` as this (view of the) TensorDict would return it, from metadata.

        Raises:
            KeyError: ``key`` is missing.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with TensorDict(a=torch.zeros(10, 4), batch_size=[10]).to_h5(os.path.join(tmp, "s.h5")) as td:
            ...         print(td[2:5].get_item_shape("a"))
            torch.Size([3, 4])
        """
        path = _as_tuple(key)
        found = self._locate(path)
        if found is None:
            raise missing_key_error(unravel_key(key), self.keys(True))
        kind, obj, _ = found
        if kind == "tensor":
            return torch.Size((*self._batch_size, *obj.shape[len(self._orig_bs) :]))
        if kind == "group":
            return self._get_any_raw(unravel_key(key)).batch_size
        return self._batch_size

    def is_empty(self) -> bool:
        for _, _cls, child in self._meta_items():
            if child is None or not child.is_empty():
                return False
        return True

    def empty(self, recurse: bool = False, *, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = None) -> TensorDict:
        """An in-memory TensorDict with the same batch size and no keys (nested ones kept with ``recurse``)."""
        source = {}
        if recurse:
            source = {k: child.empty(recurse=True) for k, _, child in self._meta_items() if child is not None}
        return TensorDict._new_unsafe(
            source,
            torch.Size(batch_size) if batch_size is not None else self._batch_size,
            self._device if device is NO_DEFAULT else (torch.device(device) if device is not None else None),
        )

    def del_(self, key: NestedKey) -> PersistentTensorDict:
        """Deletes the entry ``key`` from the file.

        An entry that is not read because it points outside the file (an external
        link, external storage, a virtual dataset of other files) can be deleted: only
        the link is removed, not what it points to.

        Raises:
            KeyError: ``key`` is missing.
            RuntimeError: the file is read-only or the TensorDict locked.
        """
        path = _as_tuple(key)
        self._check_writable(key)
        if self.is_locked:
            raise locked_error("delete a key", unravel_key(key))
        if self._locate(path) is None:
            where = self._locate(path[:-1]) if len(path) > 1 else ("group", self._group, None)
            if where is None or where[0] != "group" or not self._state.refused(where[1], path[-1]):
                raise missing_key_error(unravel_key(key), self.keys(True))
        parent = self._get_any_raw(path[:-1] if len(path) > 2 else path[0]) if len(path) > 1 else self
        parent._del_raw(path[-1])
        return self

    def get_at(self, key: NestedKey, index: Any, default: Any = NO_DEFAULT) -> Any:
        """``td.get(key)[index]``, reading only the rows ``index`` selects when it indexes batch dims."""
        try:
            view = self._index(index)
        except IndexError:
            return TensorDictBase.get_at(self, key, index, default)
        return view.get(key, default) if default is not NO_DEFAULT else view.get(key)

    # ------------------------------------------------------------------ indexing and lazy shape ops
    def _index(self, index: Any) -> PersistentTensorDict:
        self._check_open()
        norm = self._normalize_index(index)
        sel = compose(self._sel, self._orig_bs, norm)
        return self._derive(self._group, self._orig_bs, sel)

    # ------------------------------------------------------------------ copies
    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """Reads everything (the view's rows) into an in-memory :class:`~tensordict.TensorDict`.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with TensorDict(a=torch.arange(6), batch_size=[6]).to_h5(os.path.join(tmp, "t.h5")) as td:
            ...         dense = td[torch.tensor([5, 0])].to_tensordict()
            ...     print(type(dense).__name__, dense["a"])
            TensorDict tensor([5, 0])
        """
        source = {}
        for key, value in self._items_raw():
            if isinstance(value, PersistentTensorDict):
                source[key] = value.to_tensordict()
            elif isinstance(value, torch.Tensor):
                source[key] = value  # type: ignore[assignment]
            else:
                source[key] = value.clone()
        return TensorDict._new_unsafe(source, self._batch_size, self._device, self._names)

    def clone(self, recurse: bool = True, *, newfile: Any = None, **kwargs: Any) -> TensorDictBase:
        """A copy of the data, or with ``recurse=False`` a second handle on the same file.

        Args:
            recurse (bool): ``True`` (default) copies the data (the view's rows);
                ``False`` returns a new :class:`PersistentTensorDict` on the same file
                and group (writes through either reach the file; nothing is read).

        Keyword Args:
            newfile (str or path, optional): with ``recurse=True``, write the copy to
                this new HDF5 file and return a :class:`PersistentTensorDict` on it
                (mode ``"r+"``). Defaults to ``None``: an in-memory
                :class:`~tensordict.TensorDict` (:meth:`to_tensordict`).
            **kwargs: with ``newfile``, passed to ``h5py.Group.create_dataset``.

        Returns:
            TensorDictBase: same batch size, names and device as ``self``.

        Examples:
            >>> import os, tempfile, torch
            >>> from tensordict import TensorDict
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with TensorDict(a=torch.arange(4), batch_size=[4]).to_h5(os.path.join(tmp, "a.h5")) as td:
            ...         handle = td.clone(False)
            ...         with td.clone(newfile=os.path.join(tmp, "b.h5")) as copy:
            ...             print(type(handle).__name__, handle.filename == td.filename, copy["a"].tolist())
            PersistentTensorDict True [0, 1, 2, 3]
        """
        if not recurse:
            self._check_open()
            out = self._derive(self._group, self._orig_bs, self._sel)
            out._names = self._names
            return out
        if newfile is not None:
            return PersistentTensorDict.from_dict(self, newfile, device=self._device, **kwargs)
        return self.to_tensordict()

    def __repr__(self) -> str:
        self._check_open()
        items = []
        device = self._device
        for key, cls, child in self._meta_items():
            if child is not None:
                items.append((key, _Shown(repr(child))))
            elif cls is torch.Tensor:
                found = self._locate((key,))
                shape = torch.Size((*self._batch_size, *found[1].shape[len(self._orig_bs) :]))  # type: ignore[index]
                items.append(
                    (key, _Shown(f"Tensor(shape={shape}, device={device or 'cpu'}, dtype={found[2]}, is_shared=False)"))  # type: ignore[index]
                )
            else:
                items.append((key, _Shown(repr(self._get_raw(key)))))
        parts = [fields_repr(items), f"batch_size={self._batch_size}", f"device={device}", "is_shared=False"]
        body = textwrap.indent(",\n".join(parts), " " * 4)
        return f"{type(self).__name__}(\n{body})"

    __str__ = __repr__


install_inplace_writeback(PersistentTensorDict)


# ---------------------------------------------------------------------- helpers
def _tensordict_of(value: Any) -> TensorDictBase:
    from tensordict import is_tensor_collection

    if is_tensor_collection(value) and hasattr(value, "to_tensordict"):
        return value.to_tensordict()
    msg = f"expected a dict or a TensorDict, got {type(value).__name__}."
    raise TypeError(msg)


def _sel_state(sel: Any) -> Any:
    if sel is None:
        return None
    if isinstance(sel, FlatSel):
        return ("flat", tuple(sel.in_shape), sel.flat)
    return ("sel", tuple(sel.in_shape), list(sel.dims), list(sel.layout))


def _sel_from_state(state: Any) -> Any:
    if state is None:
        return None
    if state[0] == "flat":
        return FlatSel(torch.Size(state[1]), state[2])
    return Selection(torch.Size(state[1]), list(state[2]), list(state[3]))


def _rebuild(payload: dict) -> PersistentTensorDict:
    td = PersistentTensorDict(
        filename=payload["filename"],
        group=payload["group"],
        mode=payload["mode"],
        batch_size=payload["orig_bs"],
        non_tensor_as_stack=payload["nts"],
        **({"backend": payload["backend"], "allow_pickle": payload["allow_pickle"]} if "backend" in payload else {}),
    )
    sel = _sel_from_state(payload["sel"])
    if sel is not None:
        td._init(td._state, td._group, td._orig_bs, sel, payload["device"], payload["nts"])
    elif payload["device"] is not None:
        td._device = payload["device"]
    td._names = payload["names"]
    td._is_locked = payload["locked"]
    return td


def from_h5(
    filename: Any,
    mode: str = "r",
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: Any = None,
    non_tensor_as_stack: bool = False,
    **kwargs: Any,
) -> PersistentTensorDict:
    """Opens an HDF5 file as a :class:`PersistentTensorDict` (``tensordict.from_h5``).

    Args:
        filename (str or path): the HDF5 file.
        mode (str, optional): ``"r"``, ``"r+"``, ``"w"``, ``"w-"``/``"x"`` or ``"a"``.
            Defaults to ``"r"``.
        auto_batch_size (bool, optional): ignore a stored batch size and use the
            longest leading shape every dataset shares. Defaults to ``False``.
        batch_dims (int, optional): keep at most this many batch dims (turns
            ``auto_batch_size`` on).
        batch_size (torch.Size, optional): the batch size; every numeric dataset's
            leading dims must match it.
        non_tensor_as_stack (bool, optional): read string datasets shaped like the
            batch as :class:`~tensordict.NonTensorStack`. Defaults to ``False``.

    Returns:
        A :class:`PersistentTensorDict` on the file (close it, or use ``with``).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is not HDF5.
        RuntimeError: a dataset does not match ``batch_size``.

    Examples:
        >>> import os, tempfile, torch
        >>> import tensordict
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "d.h5")
        ...     TensorDict(a=torch.arange(4), batch_size=[4]).to_h5(path).close()
        ...     with tensordict.from_h5(path) as td:
        ...         print(td[1:3]["a"])
        tensor([1, 2])
    """
    return PersistentTensorDict.from_h5(
        filename,
        mode=mode,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        batch_size=batch_size,
        non_tensor_as_stack=non_tensor_as_stack,
        **kwargs,
    )


def from_zarr(
    zarr_file: Any,
    *,
    mode: str = "r",
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: Any = None,
    non_tensor_as_stack: bool = False,
    allow_pickle: bool | None = None,
) -> PersistentTensorDict:
    """Opens a Zarr (v3) store as a :class:`PersistentTensorDict` (``tensordict.from_zarr``).

    Arrays are read lazily, only the rows an index selects, as for HDF5. A store not
    written by tensordict gets the longest leading shape its arrays share as batch size
    (each nested group its own).

    Args:
        zarr_file (str, path or zarr Store): the store (a folder, or a ``LocalStore``,
            ``ZipStore``, ...).

    Keyword Args:
        mode (str): ``"r"`` (default), ``"r+"``, ``"a"``, ``"w"`` or ``"w-"``.
        auto_batch_size (bool): ignore the stored batch size. Defaults to ``False``.
        batch_dims (int, optional): keep at most this many batch dims.
        batch_size (torch.Size, optional): the batch size; every array's leading dims
            must match it.
        non_tensor_as_stack (bool): read string arrays shaped like the batch as
            :class:`~tensordict.NonTensorStack`. Defaults to ``False``.
        allow_pickle (bool, optional): read pickled non-tensor entries. Defaults to
            ``None``, which refuses them: unpickling can run arbitrary code.

    Returns:
        A :class:`PersistentTensorDict` on the store (close it, or use ``with``).

    Raises:
        ImportError: zarr>=3 is not installed (the message gives the ``pip install`` line).
        FileNotFoundError: the store does not exist.
        ValueError: the folder is not a Zarr store, or its metadata names a path outside
            it or an array whose chunks disagree with its shape (the message names the
            store and the key).
        RuntimeError: (on reading) a pickled entry without ``allow_pickle=True``.

    Examples:
        >>> import os, tempfile, torch
        >>> import tensordict
        >>> from tensordict import TensorDict
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "d.zarr")
        ...     TensorDict(a=torch.arange(4), batch_size=[4]).to_zarr(path).close()
        ...     with tensordict.from_zarr(path) as td:
        ...         print(td[1:3]["a"])
        tensor([1, 2])
    """
    return PersistentTensorDict.from_zarr(
        zarr_file,
        mode=mode,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        batch_size=batch_size,
        non_tensor_as_stack=non_tensor_as_stack,
        allow_pickle=allow_pickle,
    )
