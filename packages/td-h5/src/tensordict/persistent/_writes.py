"""Write paths of ``PersistentTensorDict`` (``WriteMixin``).

Every write is planned and validated first (mode, lock, key names, shapes, dtypes,
non-tensor types), and only then touches the file, so a failed write leaves the file
as it was. Replacing a whole entry writes the new one under a temporary name and moves
it in place once complete.

* ``td.set(key, value)`` on an unindexed PersistentTensorDict replaces the entry.
* ``td.set(key, value, inplace=True)``, ``td.set_``, ``td.update_`` and ``td[idx] = value``
  write into the existing datasets, at the view's rows for an indexed one.
* Setting a key that does not exist on an indexed view creates the full-size dataset
  (zero-filled) and writes the view's rows.
* A non-tensor value is a group attribute and therefore shared by every row: writing
  one on a view sets it for the whole file.
"""

from __future__ import annotations

import inspect
import numbers
import re
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import h5py
import numpy as np
import torch

from tensordict import (
    NestedKey,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensor_collection,
)
from tensordict.ext import INPLACE_METHODS, locked_error, missing_key_error, unravel_key
from tensordict.ext import as_key_tuple as _as_tuple
from tensordict.persistent import _h5io as io
from tensordict.persistent._links import has_link, refused_error
from tensordict.persistent._nodes import GroupNode, is_dataset, is_group
from tensordict.persistent._selection import write_selected

__all__ = ["WriteMixin", "install_inplace_writeback"]

_TMP_SUFFIX = "__td_tmp__"
#: attribute marking a member written under a temporary name by ``set`` (removed once moved in place)
TMP_ATTR = "_td_tmp"


def is_temp_member(group: Any, name: str) -> bool:
    """``name`` is a temporary member of ours: the suffix *and* the marker attribute (other tools' names are shown)."""
    if not name.endswith(_TMP_SUFFIX):
        return False
    try:
        obj = group.get(name, getlink=False)
        return obj is not None and bool(obj.attrs.get(TMP_ATTR, False))
    except (KeyError, OSError, RuntimeError, TypeError):
        return False


def _as_td(value: Any, batch_size: torch.Size) -> TensorDictBase:
    if isinstance(value, TensorDictBase):
        return value
    if isinstance(value, Mapping):
        return TensorDict(value, batch_size=batch_size)
    if is_tensor_collection(value) and hasattr(value, "to_tensordict"):
        return value.to_tensordict()
    msg = f"cannot write a {type(value).__name__} into a PersistentTensorDict: pass a TensorDict, a dict, a tensor or a number."
    raise TypeError(msg)


def _raw_leaves(td: TensorDictBase, prefix: tuple = ()) -> list:
    """``(path, leaf)`` for every leaf of ``td``; empty nested TensorDicts count as leaves."""
    out = []  # type: ignore[var-annotated]
    for key, value in td._items_raw():
        path = prefix + (key,)
        if isinstance(value, TensorDictBase):
            sub = _raw_leaves(value, path)
            out.extend(sub if sub else [(path, value)])
        else:
            out.append((path, value))
    return out


def _key_of(path: tuple) -> NestedKey:
    return path[0] if len(path) == 1 else path


if TYPE_CHECKING:  # what the mixin reads from PersistentTensorDict (type checkers only)
    from tensordict.persistent._filestate import FileState
    from tensordict.persistent._selection import FlatSel, Selection
    from tensordict.persistent._zarrio import ZGroup

    _MixinBase = TensorDictBase
else:
    _MixinBase = object


class WriteMixin(_MixinBase):
    """Writes to the HDF5 file behind a ``PersistentTensorDict``."""

    if TYPE_CHECKING:
        _state: FileState
        _group: Any
        _sel: Selection | FlatSel | None

        @property
        def _orig_bs(self) -> torch.Size: ...
        def _tensor_datasets(self) -> list: ...
        def _check_open(self) -> None: ...
        def _locate(self, path: tuple) -> tuple | None: ...
        def _read_dataset(self, dset: h5py.Dataset, dtype: torch.dtype) -> torch.Tensor: ...

    # ------------------------------------------------------------------ checks
    def _check_writable(self, key: Any = None) -> None:
        self._check_open()
        state = self._state
        if state.mode == "r":
            where = f" key {key!r}" if key is not None else ""
            msg = (
                f"cannot write{where}: the {state.what} {state.filename!r} is open read-only (mode='r'). "
                "Reopen it with mode='r+' (or 'a') to write, or copy it to memory with `td.to_tensordict()`."
            )
            raise RuntimeError(msg)

    # ------------------------------------------------------------------ primitives
    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        self._set_str(key, value, inplace, validated=False)

    def _del_raw(self, key: str) -> None:
        self._check_writable(key)
        group = self._group
        if has_link(group, key):
            del group[key]  # a link that points outside the file: only the link is removed
        elif key in group.attrs and key not in io.RESERVED_ATTRS:
            del group.attrs[key]
        else:
            raise missing_key_error(key, self._keys_raw())
        self._state.changed()

    def _create_nested(self, key: str) -> TensorDictBase:
        self._check_refused(self._group, key)
        obj = self._group.get(key)
        if obj is None:
            io.check_key(key)
            self._check_writable(key)
            if self.is_locked:
                raise locked_error("create a nested TensorDict", key)
            group = self._group.create_group(key)
            io.write_batch_meta(group, self._orig_bs, None)
            self._state.changed()
            return self._get_raw(key)
        if not is_group(obj):
            msg = f"Cannot write a nested key under {key!r}: it holds a dataset, not a group."
            raise KeyError(msg)
        return self._get_raw(key)

    def _storage_dtype(self, key: Any, dtype: torch.dtype) -> tuple:
        """numpy storage dtype and marker of a torch dtype; the Zarr layout has no markers."""
        np_dtype, marker = io.numpy_dtype_for(dtype, key)
        if marker is not None and self._state.backend == "zarr":
            msg = f"cannot store key {key!r} of dtype {dtype} in a Zarr store: zarr has no such dtype. Cast it first (e.g. `.float()`)."
            raise TypeError(msg)
        return np_dtype, marker

    def _check_refused(self, group: h5py.Group, name: str) -> None:
        why = self._state.refused(group, name)
        if why is not None:
            raise refused_error(name, why, self._state.filename)

    def _write_inplace(self, key: Any, existing: Any, value: Any) -> None:
        # td-core's apply engine passes the key from its root (for messages) while
        # calling on the TensorDict that holds the entry: the entry is the last part
        if key.__class__ is tuple:
            key = key[-1]
        self.set(key, value, inplace=True)

    # ------------------------------------------------------------------ set
    def _set_str(self, key: str, value: Any, inplace: bool, validated: bool = False) -> None:  # type: ignore[override]
        self._check_writable(key)
        io.check_key(key)
        if isinstance(value, torch.Tensor) and value.requires_grad:
            msg = (f"Cannot set a tensor that has requires_grad=True in a PersistentTensorDict (key {key!r}): "
                   "HDF5 stores values, not the autograd graph. Write value.detach() instead.")
            raise RuntimeError(msg)
        if not validated:
            value = self._convert_value(key, value)
        exists = has_link(self._group, key) or (key in self._group.attrs and key not in io.RESERVED_ATTRS)
        if exists and (inplace or self._sel is not None):
            self._run(self._plan_value((key,), value, self.batch_dims, require_existing=False))
            return
        if self.is_locked:
            raise locked_error("set a new value", key)
        if self._sel is not None:
            self._run(self._plan_value((key,), value, self.batch_dims, require_existing=False))
            return
        self._replace(key, value)

    def set_(self, key: NestedKey, item: Any, *, non_blocking: bool = False) -> TensorDictBase:
        """Writes ``item`` into the existing entry ``key`` of the file (at the view's rows).

        Raises:
            KeyError: ``key`` does not exist.
            RuntimeError: the file is read-only, or shapes do not broadcast.
        """
        path = _as_tuple(key)
        self._check_writable(key)
        if self._locate(path) is None:
            raise missing_key_error(unravel_key(key), self.keys(True))
        if isinstance(item, Mapping) and not isinstance(item, TensorDictBase):
            item = _as_td(item, self.batch_size)
        elif isinstance(item, (numbers.Number, np.ndarray, np.generic)):
            item = torch.as_tensor(item)
        elif not isinstance(item, (torch.Tensor, TensorDictBase, NonTensorData, NonTensorStack)):
            item = self._convert_value(key, item)
        vbd = item.batch_dims if isinstance(item, TensorDictBase) else self.batch_dims
        self._run(self._plan_value(path, item, vbd, require_existing=True))
        return self

    def update(  # type: ignore[override]
        self,
        input_dict_or_td: Mapping | TensorDictBase,
        clone: bool = False,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Any = None,
        is_leaf: Any = None,
        update_batch_size: bool = False,
        ignore_lock: bool = False,
    ) -> TensorDictBase:
        """Writes every key of ``input_dict_or_td`` to the file (nested TensorDicts merge).

        Key names, dtypes and non-tensor types of every entry are checked before the
        first write.

        Raises:
            RuntimeError: the file is read-only, a shape does not match, or locked.
            TypeError, ValueError: an entry cannot be stored in HDF5.
        """
        self._check_writable()
        if input_dict_or_td is self:
            return self
        probe = input_dict_or_td
        if isinstance(probe, Mapping) and not isinstance(probe, TensorDictBase):
            probe = TensorDict(dict(probe), batch_size=[])
        probe = _as_td(probe, torch.Size(()))
        if keys_to_update is not None:
            probe = probe.select(*keys_to_update, strict=False)
        io.validate_tree(probe)
        return TensorDictBase.update(
            self,
            input_dict_or_td,
            clone=clone,
            inplace=inplace,
            non_blocking=non_blocking,
            keys_to_update=keys_to_update,
            is_leaf=is_leaf,
            update_batch_size=update_batch_size,
            ignore_lock=ignore_lock,
        )

    def update_(  # type: ignore[override]
        self,
        input_dict_or_td: Mapping | TensorDictBase,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Any = None,
    ) -> TensorDictBase:
        """Writes every leaf of ``input_dict_or_td`` into the existing datasets.

        All keys are checked before anything is written.

        Raises:
            KeyError: a key does not exist in the file.
            RuntimeError: the file is read-only, or a shape does not broadcast.
        """
        self._check_writable()
        value = input_dict_or_td
        if isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
            try:
                value = TensorDict(value, batch_size=self.batch_size)
            except RuntimeError:
                value = TensorDict(value, batch_size=[])  # type: ignore[arg-type]
        value = _as_td(value, self.batch_size)
        if keys_to_update is not None:
            value = value.select(*keys_to_update, strict=False)
        self._run(self._plan_tree(value, require_existing=True))
        return self

    def set_at_(self, key: NestedKey, value: Any, index: Any, *, non_blocking: bool = False) -> TensorDictBase:
        """Writes ``value`` into ``td[index]`` of the entry ``key``, in the file.

        Raises:
            KeyError: ``key`` does not exist.
        """
        self._index(index).set_(key, value)
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        cls = index.__class__
        if cls is str or (cls is tuple and index and all(i.__class__ in (str, tuple) for i in index)):
            if self._state.backend == "zarr":  # as tensordict 0.15: written in place when it fits
                self.set(index, value, inplace=True)
            else:
                self.set(index, value)
            return
        self._index(index)._assign(value)

    def _assign(self, value: Any) -> None:
        """``view[...] = value``: writes into every entry, creating missing ones."""
        self._check_writable()
        if isinstance(value, (torch.Tensor, numbers.Number, np.ndarray, np.generic)):
            tensor = torch.as_tensor(value)
            plan = [
                ("write", dset, self._aligned(_key_of(path), tensor, dset, dtype))
                for path, dset, dtype in self._tensor_datasets()
            ]
            self._run(plan)
            return
        value = _as_td(value, self.batch_size)
        bs = self.batch_size
        if value.batch_size != bs:
            try:
                ok = torch.broadcast_shapes(value.batch_size, bs) == bs
            except RuntimeError:
                ok = False
            if not ok:
                msg = (f"batch dimension mismatch: cannot write a TensorDict of batch_size {tuple(value.batch_size)} "
                       f"into rows of batch_size {tuple(bs)} of the {self._state.what} (it must broadcast to them).")
                raise RuntimeError(msg)
        self._run(self._plan_tree(value, require_existing=False))

    # ------------------------------------------------------------------ planning
    def _plan_tree(self, value: TensorDictBase, require_existing: bool) -> list:
        vbd = value.batch_dims
        plan: list = []
        for path, leaf in _raw_leaves(value):
            plan.extend(self._plan_value(path, leaf, vbd, require_existing))
        return plan

    def _plan_value(self, path: tuple, value: Any, vbd: int, require_existing: bool) -> list:
        """Ops writing ``value`` at ``path`` (validated, nothing written yet).

        Existing datasets receive ``value`` with torch broadcasting (as ``copy_``); a
        missing one is created with shape ``batch_size + value.shape[vbd:]``.
        """
        if isinstance(value, TensorDictBase):
            leaves = _raw_leaves(value)
            if not leaves:
                if self._locate(path) is None:
                    if require_existing:
                        raise missing_key_error(_key_of(path), self.keys(True))
                    return [("group", path, value.batch_size[vbd:])]
                return []
            plan = []
            for sub, leaf in leaves:
                plan.extend(self._plan_value(path + sub, leaf, vbd, require_existing))
            return plan
        key = _key_of(path)
        io.check_key(path[-1])
        found = self._locate(path)
        if found is None:
            if require_existing:
                raise missing_key_error(key, self.keys(True))
            if self.is_locked:
                raise locked_error("set a new value", key)
        if isinstance(value, NonTensorData):
            if found is not None and found[0] not in ("attr", "string", "stack"):
                msg = f"cannot write a non-tensor value into key {key!r}: the file holds a {found[0]} there. Delete it first."
                raise RuntimeError(msg)
            return [("attr", path, self._state.to_attr(key, value.data))]
        if isinstance(value, NonTensorStack):
            io._stack_array(key, value._items, tuple(value.batch_size))
            if tuple(value.batch_size) != tuple(self.batch_size):
                msg = (
                    f"cannot write the NonTensorStack under key {key!r}: its batch_size "
                    f"{tuple(value.batch_size)} differs from {tuple(self.batch_size)}."
                )
                raise RuntimeError(msg)
            return [("stack", path, value)]
        if not isinstance(value, torch.Tensor):
            msg = f"cannot write key {key!r}: unsupported value type {type(value).__name__}."
            raise TypeError(msg)
        if found is None:
            self._storage_dtype(key, value.dtype)
            feat = tuple(value.shape[vbd:])
            return [("create", path, self._expand(key, value, (*self.batch_size, *feat)), feat)]
        kind, dset, dtype = found
        if kind != "tensor":
            msg = f"cannot write a tensor into key {key!r}: the file holds a {kind} there. Delete it first."
            raise RuntimeError(msg)
        return [("write", dset, self._aligned(key, value, dset, dtype))]

    @staticmethod
    def _expand(key: Any, value: torch.Tensor, target: tuple) -> torch.Tensor:
        try:
            return value.expand(target)
        except RuntimeError:
            msg = (
                f"cannot write key {key!r}: a value of shape {tuple(value.shape)} does not broadcast "
                f"to the entry's shape {tuple(target)}."
            )
            raise RuntimeError(msg) from None

    def _aligned(self, key: Any, value: torch.Tensor, dset: Any, dtype: torch.dtype) -> torch.Tensor:
        target = (*self.batch_size, *dset.shape[len(self._orig_bs) :])
        return self._expand(key, value, target).to(dtype)

    # ------------------------------------------------------------------ execution
    def _parent_group(self, path: tuple) -> h5py.Group:
        group = self._group
        for name in path[:-1]:
            self._check_refused(group, name)
            sub = group.get(name)
            if sub is None:
                sub = group.create_group(name)
                io.write_batch_meta(sub, self._orig_bs, None)
            group = sub
        return group

    def _run(self, plan: list) -> None:
        if not plan:
            return
        self._check_writable()
        structural = False
        for op in plan:
            kind = op[0]
            if kind == "write":
                self._write_dataset(op[1], op[2])
            elif kind == "attr":
                _, path, attr = op
                group = self._parent_group(path)
                if has_link(group, path[-1]):
                    del group[path[-1]]
                    structural = True
                group.attrs[path[-1]] = attr
            elif kind == "group":
                _, path, extra = op
                group = self._parent_group(path)
                sub = group.create_group(path[-1])
                io.write_batch_meta(sub, torch.Size((*self._orig_bs, *extra)), None)
                structural = True
            elif kind == "create":
                _, path, value, feat = op
                group = self._parent_group(path)
                np_dtype, marker = self._storage_dtype(path[-1], value.dtype)
                if path[-1] in group.attrs:
                    del group.attrs[path[-1]]
                if has_link(group, path[-1]):  # an entry that is not read (a link out of the file)
                    del group[path[-1]]
                dset = group.create_dataset(path[-1], shape=(*self._orig_bs, *feat), dtype=np_dtype)
                if marker is not None:
                    dset.attrs[io.META_DTYPE] = marker
                structural = True
                self._write_dataset(dset, value)
            elif kind == "stack":
                self._write_stack(op[1], op[2])
                structural = True
        if structural:
            self._state.changed()

    def _write_dataset(self, dset: Any, value: torch.Tensor) -> None:
        sel = self._sel
        if sel is None:
            if dset.ndim:
                dset[...] = io.to_numpy(value.contiguous())
            else:
                dset[()] = io.to_numpy(value)
            return
        write_selected(dset, sel, value, lambda t: io.to_numpy(t.contiguous()))

    def _write_stack(self, path: tuple, value: NonTensorStack) -> None:
        group = self._parent_group(path)
        name = path[-1]
        full = tuple(self._orig_bs)
        existing = group.get(name) if self._state.refused(group, name) is None else None
        if existing is not None and io.dataset_kind(existing)[0] in ("stack", "string") and tuple(existing.shape) == full:
            items = np.asarray(io.read_strings(existing), dtype=object).reshape(-1).tolist()
        else:
            items = [""] * io.numel(full)
        if self._sel is None:
            items = list(value._items)
        else:
            positions = self._positions()
            values = _flatten_list(value.tolist(), positions.ndim) if positions.ndim else [value.tolist()]
            for p, v in zip(positions.reshape(-1).tolist(), values):
                items[p] = v
        stack = NonTensorStack._from_flat(items, torch.Size(full))
        arr = io._stack_array(name, stack._items, full)
        if isinstance(group, GroupNode):
            zgroup = cast("ZGroup", group)  # the only GroupNode is a Zarr group adapter
            if name in zgroup.attrs:
                del zgroup.attrs[name]
            zgroup.write_stack(name, arr.tolist() if arr.ndim else [arr.item()], full)
            return
        if has_link(group, name):
            del group[name]
        if name in group.attrs:
            del group.attrs[name]
        dset = group.create_dataset(name, data=arr, dtype=h5py.string_dtype())
        dset.attrs[io.META_KIND] = io.STACK_KIND

    # ------------------------------------------------------------------ replace (unindexed)
    def _replace(self, key: str, value: Any) -> None:
        group = self._group
        existing = group.get(key) if self._state.refused(group, key) is None else None
        if existing is not None and self._state.backend == "zarr" and is_dataset(existing):
            warnings.warn(
                f"Replacing an array with another one is inefficient (key {key!r} of Zarr store "
                f"{self._state.filename!r}). Consider using different names or populating in-place using `inplace=True`.",
                UserWarning,
                stacklevel=4,
            )
        if isinstance(value, torch.Tensor):
            np_dtype, marker = io.numpy_dtype_for(value.dtype, key)
            if (
                existing is not None
                and is_dataset(existing)
                and tuple(existing.shape) == tuple(value.shape)
                and existing.dtype == np_dtype
                and io.dataset_kind(existing)[1] == value.dtype
            ):
                self._write_whole(existing, value)
                return
        elif isinstance(value, NonTensorData):
            attr = self._state.to_attr(key, value.data)
            if has_link(group, key):
                del group[key]
                self._state.changed()
            group.attrs[key] = attr
            return
        elif isinstance(value, TensorDictBase):
            io.validate_tree(value)
        elif isinstance(value, NonTensorStack):
            io._stack_array(key, value._items, tuple(value.batch_size))
        else:
            value = _as_td(value, self.batch_size)
            io.validate_tree(value)
        tmp = key + _TMP_SUFFIX
        n = 0
        while tmp in group and not is_temp_member(group, tmp):  # another tool's member: never touch it
            n += 1
            tmp = f"{key}.{n}{_TMP_SUFFIX}"
        if tmp in group:
            del group[tmp]  # left by an interrupted replace of ours
        try:
            io.write_leaf(group, tmp, value, {})
            group[tmp].attrs[TMP_ATTR] = True
        except BaseException:
            if tmp in group and is_temp_member(group, tmp):
                del group[tmp]
            raise
        if TMP_ATTR in group[tmp].attrs:
            del group[tmp].attrs[TMP_ATTR]
        if has_link(group, key):
            del group[key]
        if key in group.attrs:
            del group.attrs[key]
        group.move(tmp, key)
        self._state.changed()

    @staticmethod
    def _write_whole(dset: Any, value: torch.Tensor) -> None:
        if dset.ndim:
            dset[...] = io.to_numpy(value.contiguous())
        else:
            dset[()] = io.to_numpy(value)

    # ------------------------------------------------------------------ other in-place ops
    def apply_leaves_(self, fn: Any) -> TensorDictBase:
        """Calls ``fn`` on every tensor leaf (read from the file) and writes the result back.

        Raises:
            RuntimeError: the file is read-only.
        """
        self._check_writable()
        for _path, dset, dtype in self._tensor_datasets():
            t = self._read_dataset(dset, dtype)
            fn(t)
            self._write_dataset(dset, t)
        return self

    def fill_(self, key: NestedKey, value: float | bool) -> TensorDictBase:
        """Fills the entry ``key`` (every leaf under it for a group) with ``value``, in the file."""
        path = _as_tuple(key)
        found = self._locate(path)
        if found is None:
            raise missing_key_error(unravel_key(key), self.keys(True))
        if found[0] == "group":
            self._get_any_raw(unravel_key(key))._assign(value)
        else:
            self.set_(key, torch.as_tensor(value))
        return self

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> TensorDictBase:
        """Renames an entry in the file (an HDF5 move: no data is copied).

        Raises:
            KeyError: ``old_key`` is missing, or ``safe=True`` and ``new_key`` exists.
            RuntimeError: the file is read-only or the TensorDict is locked.
        """
        old_path, new_path = _as_tuple(old_key), _as_tuple(new_key)
        self._check_writable(old_key)
        if self.is_locked:
            raise locked_error("rename a key", old_key)
        found = self._locate(old_path)
        if found is None:
            raise missing_key_error(unravel_key(old_key), self.keys(True))
        io.check_key(new_path[-1])
        if self._locate(new_path) is not None:
            if safe:
                msg = f"key {unravel_key(new_key)!r} already present in TensorDict (the {self._state.what}; safe=True)."
                raise KeyError(msg)
            self.del_(new_key)
        src = self._parent_group(old_path)
        dst = self._parent_group(new_path)
        if found[0] == "attr":
            value = src.attrs[old_path[-1]]
            dst.attrs[new_path[-1]] = value
            del src.attrs[old_path[-1]]
        else:
            dst.move(src[old_path[-1]].name, dst.name.rstrip("/") + "/" + new_path[-1])
        self._state.changed()
        return self

    def _write_back(self, dense: TensorDictBase) -> None:
        """Writes every tensor of ``dense`` (this view's shape) into the matching dataset."""
        for path, dset, dtype in self._tensor_datasets():
            value = dense.get(_key_of(path))
            self._write_dataset(dset, self._aligned(_key_of(path), value, dset, dtype))

    def _positions(self) -> torch.Tensor:
        """Flat positions into this group's batch dims, shaped like the view's batch size."""
        sel = self._sel.extend(self._orig_bs).to_flat()  # type: ignore[union-attr]
        return sel.flat


def _flatten_list(values: Any, ndim: int) -> list:
    if ndim <= 1:
        return list(values)
    out = []
    for v in values:
        out.extend(_flatten_list(v, ndim - 1))
    return out



# ---------------------------------------------------------------------- in-place math


def _inplace_writeback(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._check_writable()
        dense = self.to_tensordict()
        result = getattr(dense, name)(*args, **kwargs)
        self._write_back(dense)
        return self if result is dense else result

    method.__name__ = name
    method.__qualname__ = f"PersistentTensorDict.{name}"
    # help() shows td-core's signature and arguments
    base = getattr(TensorDictBase, name)
    try:
        method.__signature__ = inspect.signature(base)  # type: ignore[attr-defined]
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        pass
    found = re.search(r"^Args:\n(?:(?:    .*)?\n)*", (inspect.getdoc(base) or "") + "\n", re.M)
    args = found.group(0).rstrip() + "\n\n" if found else ""
    method.__doc__ = (
        f"``TensorDictBase.{name}`` on the rows this PersistentTensorDict (view) holds: "
        "reads them, applies the in-place op, and writes every tensor back to the file.\n\n"
        f"{args}Raises:\n    RuntimeError: the file is read-only."
    )
    return method


def install_inplace_writeback(cls: type) -> None:
    """Gives ``cls`` a write-back version of every in-place math/apply method of td-core."""
    for name in dir(TensorDictBase):
        if not name.endswith("_") or name.startswith("_") or name in vars(cls):
            continue
        if name in INPLACE_METHODS:
            setattr(cls, name, _inplace_writeback(name))
