"""Reading stores written by the ``tensordict`` package (its ``meta.json`` layout).

That layout has one ``meta.json`` per folder holding, besides ``"shape"``,
``"device"`` and ``"_type"`` (the repr of a class, e.g.
``"<class 'tensordict._td.TensorDict'>"``), one entry per key:

- a tensor: ``{"dtype": "torch.float32", "shape": [...], "device": ..., "is_nested": bool}``
  with its bytes in ``<key>.memmap`` beside the ``meta.json``;
- a nested container: ``{"type": "TensorDict"}`` (or another class name), stored in
  the sub-folder ``<key>/`` with its own ``meta.json``.

A non-tensor folder's ``meta.json`` keeps the value under ``"data"`` when it is
JSON; otherwise a pickle file sits in the folder. A lazy stack keeps its stacked
TensorDicts in the sub-folders ``0/``, ``1/``, ... and its ``"stack_dim"``.

The same rules as for our own stores apply: nothing is unpickled without
``allow_pickle=True``; the class named in ``"_type"`` is only *compared* with the
names of the classes we provide (nothing is imported): another name loads as a
plain TensorDict with a warning; file and folder names are single path
components that must resolve inside the store, without symbolic links.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from typing import Any

import torch

from tensordict.memmap._fileio import DTYPES, check_file
from tensordict.memmap._names import member_path

__all__ = ["is_upstream_meta", "load_upstream_folder", "upstream_owned"]

_CLASS_REPR = re.compile(r"<class '(?P<path>[A-Za-z_][A-Za-z0-9_.]*)'>")
_TD = "TensorDict"
_LAZY = "LazyStackedTensorDict"
_NTD = "NonTensorData"
_NTS = "NonTensorStack"
_KNOWN = (_TD, _LAZY, _NTD, _NTS)
_RESERVED = frozenset({"shape", "device", "_type", "names", "stack_dim", "data", "_metadata", "_is_batched",
                       "batch_size", "_non_tensordict", "_tensordict", "stack_dim_name", "is_nested", "type"})
_PICKLES = ("pickle.pkl", "other.pickle", "data.pkl", "data.pickle")


def is_upstream_meta(meta: Any) -> bool:
    """``meta`` (parsed JSON) looks like a ``meta.json`` written by the ``tensordict`` package."""
    return isinstance(meta, dict) and isinstance(meta.get("_type"), str) and "format" not in meta


def _class_name(meta: dict, where: str) -> str:
    """The bare class name in ``"_type"`` (never imported)."""
    m = _CLASS_REPR.fullmatch(meta.get("_type", ""))
    if m is None:
        msg = f"{where}: invalid metadata: '_type' is {meta.get('_type')!r}, not a class repr."
        raise RuntimeError(msg)
    return m.group("path").rsplit(".", 1)[-1]


def _shape(value: Any, where: str, what: str) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int and 0 <= v < (1 << 63) for v in value):
        msg = f"{where}: invalid metadata: {what} must be a list of non-negative int64 values, got {value!r}."
        raise RuntimeError(msg)
    return value


def _dtype(name: Any, where: str) -> torch.dtype:
    if isinstance(name, str) and name.startswith("torch."):
        dtype = DTYPES.get(name[len("torch."):])
        if dtype is not None:
            return dtype
    msg = f"{where}: unknown dtype {name!r} in the metadata (expected e.g. 'torch.float32')."
    raise RuntimeError(msg)


def _member(folder: str, name: Any, root: str, what: str) -> str:
    """``folder/name`` for a key read from upstream metadata: one path component, inside the store."""
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name
            or (os.altsep and os.altsep in name)):
        msg = f"{os.path.join(folder, 'meta.json')}: invalid {what} name {name!r}; refusing to read outside the store."
        raise RuntimeError(msg)
    return member_path(folder, name, root, what, strict=False)


def _tensor(folder: str, key: str, entry: dict, bs: list[int], ctx: Any, mapper: Any) -> torch.Tensor:
    where = os.path.join(folder, "meta.json")
    path = _member(folder, key + ".memmap", ctx.root, "data file")
    dtype = _dtype(entry.get("dtype"), where)
    if entry.get("is_nested"):
        sizes = entry.get("shape")
        if not isinstance(sizes, list) or not all(isinstance(s, list) for s in sizes):
            msg = f"{where}: invalid metadata: nested tensor {key!r} needs a list of shapes, got {sizes!r}."
            raise RuntimeError(msg)
        for s in sizes:
            _shape(s, where, f"a shape of key {key!r}")
        from tensordict.memmap._tensor import MemoryMappedTensor

        shape_t = torch.tensor(sizes, dtype=torch.int64).reshape(len(sizes), -1)
        if ctx.meta_device or ctx.fake:
            msg = f"{where}: nested tensor {key!r} cannot be loaded on the meta device or under FakeTensorMode."
            raise RuntimeError(msg)
        return MemoryMappedTensor.from_filename(path, dtype, shape_t)
    shape = tuple(_shape(entry.get("shape"), where, f"shape of key {key!r}"))
    if list(shape[: len(bs)]) != bs:
        msg = f"{path}: key {key!r} has shape {shape}, which does not start with the batch size {tuple(bs)}."
        raise RuntimeError(msg)
    if ctx.meta_device:
        return torch.empty(shape, dtype=dtype, device="meta")
    if ctx.fake:
        return torch.empty(shape, dtype=dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0 and not os.path.lexists(path):  # tensordict writes no file for an empty tensor
        from tensordict.memmap._tensor import MemoryMappedTensor

        return MemoryMappedTensor.empty(shape, dtype=dtype)
    check_file(path, nbytes, exact=False)
    return mapper(path, dtype, shape)


def _non_tensor_payload(folder: str, meta: dict, key: str, ctx: Any) -> Any:
    from tensordict.memmap._values import load_pickle

    if "data" in meta:
        return meta["data"]
    for name in _PICKLES:
        path = os.path.join(folder, name)
        if os.path.lexists(path):
            return load_pickle(_member(folder, name, ctx.root, "pickle file"), key, ctx.allow_pickle)
    pickles = sorted(e for e in os.listdir(folder) if e.endswith((".pkl", ".pickle")))
    if pickles:
        return load_pickle(_member(folder, pickles[0], ctx.root, "pickle file"), key, ctx.allow_pickle)
    msg = f"{os.path.join(folder, 'meta.json')}: the non-tensor value of key {key!r} has no 'data' and no pickle file."
    raise RuntimeError(msg)


def load_upstream_folder(folder: str, meta: dict, ctx: Any, load_folder: Any, mapper: Any, key: str = "") -> Any:
    """Builds the container stored in ``folder`` (whose parsed ``meta.json`` is ``meta``).

    ``load_folder(path, ctx)`` loads a sub-folder (it checks each folder is visited
    once); ``mapper(path, dtype, shape)`` maps a data file.
    """
    from tensordict import NonTensorData, NonTensorStack, TensorDict
    from tensordict.memmap._save import make_lazy_stack

    where = os.path.join(folder, "meta.json")
    cls = _class_name(meta, where)
    raw_shape = meta.get("shape", meta.get("batch_size", []))
    bs = _shape(raw_shape, where, "shape")
    if cls == _NTD:
        return NonTensorData(_non_tensor_payload(folder, meta, key or folder, ctx), batch_size=bs)
    if cls in (_LAZY, _NTS) and "data" not in meta:
        dim = meta.get("stack_dim", 0)
        if type(dim) is not int or not -len(bs) <= dim < max(len(bs), 1):
            msg = f"{where}: invalid metadata: stack_dim {dim!r} for batch size {bs}."
            raise RuntimeError(msg)
        n = bs[dim] if bs else 0
        subs = []
        for i in range(n):
            sub = _member(folder, str(i), ctx.root, "stacked sub-folder")
            if not os.path.isdir(sub):
                msg = f"the store at {ctx.root!r} is incomplete: the stacked folder {sub!r} is missing."
                raise RuntimeError(msg)
            subs.append(load_folder(sub, ctx))
        if cls == _NTS:
            return NonTensorStack(*subs, stack_dim=dim)
        return make_lazy_stack(subs, dim, where, torch.Size(bs))
    if cls == _NTS:
        data = meta["data"]
        if not isinstance(data, list) or len(data) != math.prod(bs):
            msg = f"{where}: invalid metadata: the stack must hold {math.prod(bs)} values."
            raise RuntimeError(msg)
        return NonTensorStack._from_flat(data, bs)
    if cls not in _KNOWN:
        warnings.warn(
            f"{where}: the store was written for class {cls!r} ({meta.get('_type')}); loading never imports classes "
            "named in metadata, so it loads as a plain TensorDict.",
            UserWarning,
            stacklevel=4,
        )
    source: dict = {}
    for name, entry in meta.items():
        if name in _RESERVED or not isinstance(entry, dict):
            continue
        if "dtype" in entry:
            source[name] = _tensor(folder, name, entry, bs, ctx, mapper)
        elif "type" in entry:
            sub = _member(folder, name, ctx.root, "sub-folder")
            if not os.path.isdir(sub):
                msg = f"the store at {ctx.root!r} is incomplete: the folder {sub!r} of key {name!r} is missing."
                raise RuntimeError(msg)
            value = load_folder(sub, ctx, name)
            if isinstance(value, NonTensorData) and not value.batch_size and bs:
                value = NonTensorData(value.data, batch_size=bs)  # written without a shape: one value for the batch
            sub_bs = getattr(value, "batch_size", None)
            if sub_bs is None or list(sub_bs[: len(bs)]) != bs:
                msg = f"{where}: key {name!r} has batch size {sub_bs}, which does not start with {bs}."
                raise RuntimeError(msg)
            source[name] = value
    names = meta.get("names")
    if not (isinstance(names, list) and len(names) == len(bs) and all(n is None or isinstance(n, str) for n in names)):
        names = None
    elif all(n is None for n in names):
        names = None
    device = torch.device("cpu") if meta.get("device") is not None else None
    if ctx.meta_device and device is not None:
        device = torch.device("meta")
    if getattr(ctx, "device", None) is not None:  # load_memmap(..., device=d)
        device = ctx.device
    return TensorDict._new_unsafe(source, torch.Size(bs), device, names)


def upstream_owned(folder: str, meta: dict) -> set[str]:
    """Entries of ``folder`` that an upstream save wrote (for the clean-up of replaced trees)."""
    owned = {"meta.json"}
    for name, entry in meta.items():
        if name in _RESERVED or not isinstance(entry, dict):
            continue
        owned.add(name + ".memmap" if "dtype" in entry else name)
    cls = _CLASS_REPR.fullmatch(str(meta.get("_type", "")))
    if cls is not None and cls.group("path").rsplit(".", 1)[-1] in (_LAZY, _NTS):
        owned.update(e for e in os.listdir(folder) if e.isdigit())
    if cls is not None and cls.group("path").rsplit(".", 1)[-1] == _NTD:
        owned.update(e for e in os.listdir(folder) if e.endswith((".pkl", ".pickle")))
    return owned
