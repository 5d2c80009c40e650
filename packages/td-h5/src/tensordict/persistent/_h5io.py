"""HDF5 plumbing for ``PersistentTensorDict``: opening files with clear errors, dtype
conversions between h5py/numpy and torch, non-tensor values, batch-size inference from
metadata, and writing a whole TensorDict into a group.

Layout written by :meth:`~tensordict.TensorDictBase.to_h5` (readable by plain h5py):

* each tensor leaf is a dataset, each nested TensorDict a group;
* a :class:`~tensordict.NonTensorData` leaf is an attribute of its group (str, bytes,
  numbers, bools, ``None`` and arrays or lists of them);
* a :class:`~tensordict.NonTensorStack` of strings is a string dataset whose
  attribute ``_td_type`` is ``"non_tensor_stack"``;
* every group carries ``_td_batch_size`` (int64 array) and, when named, ``_td_names``;
* a tensor whose dtype numpy lacks (``bfloat16``, ``float8_*``) is stored as integers
  of the same width with the dtype name in the dataset attribute ``_td_dtype``.

Nothing read from a file is trusted: attribute values are never unpickled, and a dtype
name is looked up in a fixed table.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from typing import Any

import h5py
import numpy as np
import torch

from tensordict.persistent._nodes import ArrayNode, GroupNode, ValueNode

__all__ = [
    "META_BATCH_SIZE",
    "META_NAMES",
    "META_DTYPE",
    "META_KIND",
    "RESERVED_ATTRS",
    "open_h5",
    "dataset_kind",
    "tensor_converter",
    "to_numpy",
    "numpy_dtype_for",
    "attr_to_python",
    "python_to_attr",
    "read_strings",
    "validate_tree",
    "write_tree",
    "write_leaf",
    "common_prefix",
    "check_key",
]

META_BATCH_SIZE = "_td_batch_size"
META_NAMES = "_td_names"
META_DTYPE = "_td_dtype"
META_KIND = "_td_type"
RESERVED_ATTRS = frozenset({META_BATCH_SIZE, META_NAMES})
STACK_KIND = "non_tensor_stack"

_MODES = ("r", "r+", "w", "w-", "x", "a")
_FILTER_KWARGS = ("chunks", "compression", "compression_opts", "shuffle", "fletcher32", "scaleoffset", "maxshape")

#: torch dtypes numpy cannot hold -> (storage dtype of the same width)
_SPECIAL_DTYPES: dict[str, tuple[torch.dtype, torch.dtype]] = {}
for _name, _storage in (
    ("bfloat16", torch.int16),
    ("float8_e4m3fn", torch.uint8),
    ("float8_e5m2", torch.uint8),
    ("float8_e4m3fnuz", torch.uint8),
    ("float8_e5m2fnuz", torch.uint8),
):
    if hasattr(torch, _name):
        _SPECIAL_DTYPES[_name] = (getattr(torch, _name), _storage)
_SPECIAL_BY_DTYPE = {dt: (name, storage) for name, (dt, storage) in _SPECIAL_DTYPES.items()}
_TORCH_OF_NUMPY: dict[np.dtype, torch.dtype | None] = {}


def check_mode(mode: str) -> None:
    if mode not in _MODES:
        msg = f"mode must be one of {_MODES} (as in h5py.File), got {mode!r}."
        raise ValueError(msg)


def open_h5(filename: str, mode: str, **kwargs: Any) -> h5py.File:
    """Opens ``filename`` with h5py, turning its OSErrors into errors that say what is wrong.

    Raises:
        FileNotFoundError: the file (mode ``"r"``/``"r+"``) or its folder does not exist.
        ValueError: ``mode`` is invalid, or the file exists but is not an HDF5 file.
        FileExistsError: mode ``"w-"``/``"x"`` and the file exists.
    """
    check_mode(mode)
    filename = os.fspath(filename)
    try:
        return h5py.File(filename, mode, **kwargs)
    except (OSError, ValueError) as err:
        if mode in ("r", "r+") and not os.path.exists(filename):
            msg = (
                f"HDF5 file {filename!r} does not exist (mode={mode!r}). Check the path, or open "
                "it with mode='w' or 'a' to create it."
            )
            raise FileNotFoundError(msg) from None
        folder = os.path.dirname(os.path.abspath(filename))
        if not os.path.isdir(folder):
            msg = f"cannot create HDF5 file {filename!r}: folder {folder!r} does not exist."
            raise FileNotFoundError(msg) from None
        if mode in ("w-", "x") and os.path.exists(filename):
            msg = f"HDF5 file {filename!r} already exists and mode={mode!r} refuses to overwrite it."
            raise FileExistsError(msg) from None
        if os.path.isfile(filename) and os.path.getsize(filename) and not h5py.is_hdf5(filename):
            msg = (
                f"{filename!r} is not an HDF5 file (no HDF5 signature found). "
                "PersistentTensorDict reads files written by h5py or any HDF5 library."
            )
            raise ValueError(msg) from None
        msg = f"h5py could not open {filename!r} with mode={mode!r}: {err}"
        if os.path.isfile(filename) and not re.search(r"\block", str(err), re.IGNORECASE):
            msg += (
                ". The file has an HDF5 signature but cannot be read: it is damaged or incomplete "
                "(truncated, or its writer was interrupted). Restore it from a copy or write it again."
            )
        raise OSError(msg) from err


def check_key(key: Any) -> None:
    """Keys become HDF5 link names: a non-empty str without ``/``, not a reserved name."""
    if key.__class__ is not str:
        msg = f"keys of a PersistentTensorDict must be str, got {key!r} of type {type(key).__name__}."
        raise TypeError(msg)
    if not key or "/" in key or key in (".", ".."):
        msg = f"key {key!r} cannot be stored in an HDF5 file: names must be non-empty, without '/', and not '.' or '..'."
        raise ValueError(msg)
    if key in RESERVED_ATTRS:
        msg = f"key {key!r} is reserved for TensorDict metadata in HDF5 files; use another name."
        raise ValueError(msg)


def meta_attr(obj: Any, name: str, h5_class: int) -> Any:
    """Metadata attribute ``name`` of ``obj``; ``None`` when absent or not of HDF5 class ``h5_class``.

    Its HDF5 type is checked before its value is read: a damaged or hostile file can
    give a metadata attribute a type (a variable-length sequence, a reference) whose
    conversion crashes the HDF5 library, and such a value would be ignored anyway.
    """
    attrs = obj.attrs
    if name not in attrs:
        return None
    if attrs.get_id(name).get_type().get_class() != h5_class:
        return None
    return attrs[name]


# ---------------------------------------------------------------------- dtypes
def _torch_dtype_of(np_dtype: np.dtype) -> torch.dtype | None:
    try:
        return _TORCH_OF_NUMPY[np_dtype]
    except KeyError:
        pass
    native = np_dtype.newbyteorder("=") if not np_dtype.isnative else np_dtype
    try:
        out = torch.from_numpy(np.empty(0, dtype=native)).dtype
    except TypeError:
        out = None
    _TORCH_OF_NUMPY[np_dtype] = out
    return out


def dataset_kind(dset: h5py.Dataset) -> tuple[str, torch.dtype | None]:
    """``(kind, torch dtype)``; kind is ``"tensor"``, ``"stack"``, ``"string"`` or ``"other"``.

    A dataset with a null dataspace (no shape, no data: ``h5py.Empty``) is ``"other"``
    and reads as ``None``.
    """
    if isinstance(dset, ArrayNode):
        return dset.kind()  # type: ignore[attr-defined]
    if dset.shape is None:
        return "other", None
    dt = dset.dtype
    if dt.kind in "biufc":
        tdt = _torch_dtype_of(dt)
        if tdt is None:
            return "other", None
        if dt.itemsize <= 2 and dt.kind in "iu":
            name = meta_attr(dset, META_DTYPE, h5py.h5t.STRING)
            if name is not None:
                special = _SPECIAL_DTYPES.get(attr_text(name))
                if special is not None and special[1].itemsize == dt.itemsize:
                    return "tensor", special[0]
        return "tensor", tdt
    if h5py.check_string_dtype(dt) is not None:
        kind = meta_attr(dset, META_KIND, h5py.h5t.STRING)
        if kind is not None and attr_text(kind) == STACK_KIND:
            return "stack", None
        return "string", None
    return "other", None


def _plain_to_tensor(arr: Any) -> torch.Tensor:
    if arr.__class__ is not np.ndarray:
        arr = np.asarray(arr)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    elif not arr.flags.writeable:
        arr = arr.copy()
    return torch.from_numpy(arr)


def tensor_converter(dtype: torch.dtype | None) -> Any:
    """``fn(numpy array) -> tensor`` for a dataset whose torch dtype is ``dtype``."""
    if dtype in _SPECIAL_BY_DTYPE:
        return lambda arr: _plain_to_tensor(arr).view(dtype)
    return _plain_to_tensor


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A CPU numpy array holding ``t``'s values (no copy when already CPU and contiguous)."""
    if t.requires_grad:
        t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    special = _SPECIAL_BY_DTYPE.get(t.dtype)
    if special is not None:
        t = t.contiguous().view(special[1])
    return t.numpy()


def numpy_dtype_for(dtype: torch.dtype, key: Any = None) -> tuple[np.dtype, str | None]:
    """numpy storage dtype for a torch dtype, and the ``_td_dtype`` marker (or ``None``).

    Raises:
        TypeError: the dtype cannot be stored in HDF5.
    """
    special = _SPECIAL_BY_DTYPE.get(dtype)
    if special is not None:
        return torch.empty(0, dtype=special[1]).numpy().dtype, special[0]
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype, None
    except TypeError:
        msg = f"cannot store key {key!r} of dtype {dtype} in an HDF5 file: numpy has no such dtype. Cast it first (e.g. `.float()`)."
        raise TypeError(msg) from None


# ---------------------------------------------------------------------- non-tensor values
def attr_to_python(value: Any) -> Any:
    """An attribute value as a Python object: str, bytes, number, bool, ``None`` or nested lists.

    Strings come back as h5py gives them, as tensordict does: a byte string
    (fixed-length, or opaque when it holds NUL bytes; what ``to_h5`` writes for a
    ``str`` or ``bytes`` value) is ``bytes``, a variable-length string attribute
    (what other tools usually write) is ``str``.
    """
    if isinstance(value, ValueNode):
        return value.decode()
    if isinstance(value, h5py.Empty):
        return None
    if isinstance(value, np.void):
        return bytes(value)  # type: ignore[call-overload]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def attr_text(value: Any) -> Any:
    """An attribute of ours (dtype marker, kind, names) with byte strings decoded to ``str``."""
    out = attr_to_python(value)
    if isinstance(out, bytes):
        return out.decode("utf-8", errors="surrogateescape")
    if isinstance(out, list):
        return [x.decode("utf-8", errors="surrogateescape") if isinstance(x, bytes) else x for x in out]
    return out


def _byte_string(data: bytes) -> Any:
    """``data`` as an attribute h5py reads back as ``bytes`` (NUL bytes kept)."""
    if b"\0" in data or not data:
        return np.void(data) if data else np.bytes_(b"")
    return np.bytes_(data)


def python_to_attr(key: Any, value: Any) -> Any:
    """Validates and converts a non-tensor value for ``group.attrs``.

    Raises:
        TypeError: the value has no faithful HDF5 attribute form.
    """
    if value is None:
        return h5py.Empty("f8")
    if isinstance(value, str):  # stored as UTF-8 bytes, read back as bytes (as tensordict does)
        return _byte_string(value.encode("utf-8", errors="surrogateescape"))
    if isinstance(value, bytes):
        return _byte_string(value)
    if isinstance(value, (bool, np.generic)) and not isinstance(value, np.object_):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            msg = f"cannot store the int under key {key!r} in an HDF5 attribute: it does not fit in 64 bits."
            raise TypeError(msg)
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        try:
            arr = np.asarray(value)
        except ValueError:
            arr = np.asarray([None])  # ragged -> rejected below
        if arr.dtype.kind == "U":
            return arr.astype(h5py.string_dtype())
        if arr.dtype.kind in "biufcS":
            return arr
        if arr.dtype.kind == "O" and arr.size and all(isinstance(x, str) for x in arr.reshape(-1)):
            return arr.astype(h5py.string_dtype())
    msg = (
        f"cannot store the non-tensor value under key {key!r} (a {type(value).__name__}) in an HDF5 "
        "file: attributes hold str, bytes, numbers, bools, None and arrays or lists of them. "
        "Convert it first (for instance to a str with json.dumps)."
    )
    raise TypeError(msg)


def struct_to_tensordict(key: Any, arr: np.ndarray, shape: tuple) -> Any:
    """A numpy structured array as a TensorDict of batch size ``shape``: numeric fields are
    tensors (sub-array fields add feature dims), nested structs are nested TensorDicts,
    string fields are lists of str (``NonTensorStack``) and anything else is refused."""
    from tensordict import NonTensorStack, TensorDict

    arr = np.asarray(arr).reshape(shape)
    fields: dict = {}
    for name in arr.dtype.names:  # type: ignore[union-attr]
        col = arr[name]
        sub = col.dtype
        if sub.names is not None:
            fields[name] = struct_to_tensordict((key, name), col, shape)
        elif sub.kind in "biufc" and sub.kind != "O":
            fields[name] = _plain_to_tensor(np.ascontiguousarray(col))
        elif sub.kind in "SUO" or h5py.check_string_dtype(sub) is not None:
            items = [x.decode("utf-8", errors="surrogateescape") if isinstance(x, bytes) else str(x)
                     for x in col.reshape(-1).tolist()]
            fields[name] = NonTensorStack._from_flat(items, torch.Size(shape)) if shape else items[0]
        else:
            msg = f"key {key!r}: field {name!r} of the compound dataset has dtype {sub}, which has no tensor form."
            raise TypeError(msg)
    return TensorDict(fields, batch_size=torch.Size(shape))


def read_strings(dset: h5py.Dataset) -> Any:
    """A string dataset as a str (scalar) or a numpy object array of str."""
    if isinstance(dset, ArrayNode):
        return dset.read_strings()  # type: ignore[attr-defined]
    return dset.asstr(errors="surrogateescape")[()]


def _stack_array(key: Any, items: list, shape: tuple) -> np.ndarray:
    if not all(isinstance(x, str) for x in items):
        kinds = sorted({type(x).__name__ for x in items})
        msg = (
            f"cannot store the NonTensorStack under key {key!r} in an HDF5 file: only stacks of str "
            f"are supported, got {kinds}."
        )
        raise TypeError(msg)
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr.reshape(shape)


# ---------------------------------------------------------------------- writing a tree
def _leaves(td: Any, prefix: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    from tensordict import TensorDictBase

    for key, value in td._items_raw():
        if isinstance(value, TensorDictBase):
            yield prefix + (key,), value
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def validate_tree(td: Any) -> None:
    """Checks that every key and leaf of ``td`` can be written, before anything is written.

    Raises:
        TypeError: a leaf has no HDF5 form (dtype, object type).
        ValueError: a key is not a valid HDF5 name.
    """
    from tensordict import NonTensorData, NonTensorStack, TensorDictBase

    for path, value in _leaves(td):
        check_key(path[-1])
        key = path if len(path) > 1 else path[0]
        if isinstance(value, torch.Tensor):
            if value.device.type == "meta":
                msg = f"cannot store key {key!r}: it is a meta tensor without data."
                raise TypeError(msg)
            numpy_dtype_for(value.dtype, key)
        elif isinstance(value, NonTensorData):
            python_to_attr(key, value.data)
        elif isinstance(value, NonTensorStack):
            _stack_array(key, value._items, tuple(value.batch_size))
        elif not isinstance(value, TensorDictBase):
            msg = f"cannot store key {key!r} of type {type(value).__name__} in an HDF5 file."
            raise TypeError(msg)


def _dataset_kwargs(arr: np.ndarray, h5_kwargs: dict) -> dict:
    if not h5_kwargs:
        return h5_kwargs
    if arr.ndim == 0 or arr.size == 0:
        return {k: v for k, v in h5_kwargs.items() if k not in _FILTER_KWARGS}
    return h5_kwargs


def write_leaf(group: h5py.Group, name: str, value: Any, h5_kwargs: dict) -> None:
    """Writes one validated leaf (tensor, TensorDict, non-tensor) under ``name``."""
    from tensordict import NonTensorData, NonTensorStack, TensorDictBase

    if isinstance(group, GroupNode):
        group.write_leaf(name, value, h5_kwargs)  # type: ignore[attr-defined]
        return
    if isinstance(value, torch.Tensor):
        arr = to_numpy(value)
        dset = group.create_dataset(name, data=arr, **_dataset_kwargs(arr, h5_kwargs))
        special = _SPECIAL_BY_DTYPE.get(value.dtype)
        if special is not None:
            dset.attrs[META_DTYPE] = special[0]
    elif isinstance(value, TensorDictBase):
        write_tree(group.create_group(name), value, h5_kwargs)
    elif isinstance(value, NonTensorData):
        group.attrs[name] = python_to_attr(name, value.data)
    elif isinstance(value, NonTensorStack) and _all_same(value._items):
        # one value for the whole batch (e.g. an expanded NonTensorData): one attribute, as tensordict does
        group.attrs[name] = python_to_attr(name, value._items[0])
    elif isinstance(value, NonTensorStack):
        arr = _stack_array(name, value._items, tuple(value.batch_size))
        dset = group.create_dataset(name, data=arr, dtype=h5py.string_dtype())
        dset.attrs[META_KIND] = STACK_KIND
    else:  # pragma: no cover - validate_tree rejects it first
        msg = f"cannot store key {name!r} of type {type(value).__name__}."
        raise TypeError(msg)


def _all_same(items: list) -> bool:
    if not items:
        return False
    first = items[0]
    return all(type(x) is type(first) and x == first for x in items[1:]) and isinstance(first, (str, bytes))


def write_batch_meta(group: h5py.Group, batch_size: torch.Size, names: list | None) -> None:
    if isinstance(group, GroupNode):
        group.write_batch_meta(batch_size, names)  # type: ignore[attr-defined]
        return
    group.attrs[META_BATCH_SIZE] = np.asarray(list(batch_size), dtype=np.int64)
    if names is not None and any(n is not None for n in names):
        group.attrs[META_NAMES] = np.asarray(["" if n is None else n for n in names], dtype=h5py.string_dtype())
    elif META_NAMES in group.attrs:
        del group.attrs[META_NAMES]


def write_tree(group: h5py.Group, td: Any, h5_kwargs: dict) -> None:
    """Writes a validated TensorDict into an empty ``group`` (datasets, groups, attributes)."""
    names = td.names if td._has_names() else None
    write_batch_meta(group, td.batch_size, names)
    for key, value in td._items_raw():
        write_leaf(group, key, value, h5_kwargs)


# ---------------------------------------------------------------------- batch sizes
def common_prefix(shapes: list) -> tuple:
    """Longest leading shape shared by every shape in ``shapes`` (``()`` for none)."""
    if not shapes:
        return ()
    common = list(shapes[0])
    for shape in shapes[1:]:
        n = 0
        for a, b in zip(common, shape):
            if a != b:
                break
            n += 1
        del common[n:]
        if not common:
            break
    return tuple(common)


def stored_batch_size(group: h5py.Group) -> tuple | None:
    """The ``_td_batch_size`` attribute as a tuple of non-negative ints, or ``None``."""
    if isinstance(group, GroupNode):
        return group.stored_batch_size()  # type: ignore[attr-defined]
    value = meta_attr(group, META_BATCH_SIZE, h5py.h5t.INTEGER)
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or (arr < 0).any():
        return None
    out = tuple(int(x) for x in arr)
    if any(x > (1 << 63) - 1 for x in out):
        msg = (f"{group.file.filename}:{group.name}: the _td_batch_size attribute {list(out)} has a dimension "
               "beyond int64; the file is damaged or was not written by to_h5.")
        raise ValueError(msg)
    return out


def stored_names(group: h5py.Group, ndim: int) -> list | None:
    if isinstance(group, GroupNode):
        return group.stored_names(ndim)  # type: ignore[attr-defined]
    value = meta_attr(group, META_NAMES, h5py.h5t.STRING)
    if value is None:
        return None
    names = attr_text(value)
    if not isinstance(names, list) or len(names) != ndim or not all(isinstance(n, str) for n in names):
        return None
    return [n or None for n in names]


def numel(shape: tuple) -> int:
    return math.prod(shape)
