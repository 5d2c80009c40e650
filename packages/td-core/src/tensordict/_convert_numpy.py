"""NumPy conversions: structured arrays in (zero-copy) and out, ``numpy()``, NumPy
values inside ``from_dict``/``from_any``.

NumPy is imported inside the functions that use it (and this module only by the
functions that need it), so ``import tensordict`` never loads NumPy on its own.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._convert_build import _common_batch, _Opts, _PendingList, _Scalar, _settle
from tensordict._errors import batch_mismatch_error
from tensordict._nontensor import NonTensorData, NonTensorStack

__all__ = ["from_struct_array_impl", "numpy_impl", "numpy_value", "to_struct_array_impl"]

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

_NUMERIC_KINDS = "biufc"


class _StrField:
    """A ``U``/``S`` field waiting for the batch size (one string per element)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    @property
    def batch_size(self) -> torch.Size:
        return torch.Size(self.array.shape)


def _share(name: str, array: np.ndarray) -> torch.Tensor:
    """A tensor over the array's memory, or a copy (with a warning) when torch cannot view it."""
    import numpy as np

    try:
        return torch.from_numpy(array)
    except (TypeError, ValueError, RuntimeError) as err:
        reason = str(err)
    try:
        # a fresh array: ascontiguousarray keeps odd strides on size-1 dims, which torch refuses
        native = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)
        tensor = torch.from_numpy(native)
    except (TypeError, ValueError, RuntimeError):
        msg = f"field {name!r} has dtype {array.dtype}, which torch does not support ({reason})."
        raise TypeError(msg) from None
    warnings.warn(
        f"from_struct_array: field {name!r} (dtype {array.dtype}, strides {array.strides}) cannot be "
        f"viewed by torch ({reason}); it was copied, so in-place changes to the array will not show "
        "in the TensorDict.",
        UserWarning,
        stacklevel=4,
    )
    return tensor


def _field(name: str, field: np.ndarray, opts: _Opts) -> Any:
    dtype = field.dtype
    if dtype.names is not None:
        return from_struct_array_impl(
            field, _Opts(None, opts.auto, opts.batch_dims, opts.device, False)
        )
    kind = dtype.kind
    if kind in _NUMERIC_KINDS:
        tensor = _share(name, field)
        if opts.device is not None and tensor.device != opts.device:
            tensor = tensor.to(opts.device)
        return tensor
    if kind in "US":
        return _StrField(field)
    if kind == "O":
        msg = (
            f"from_struct_array: field {name!r} has the object dtype, which has no tensor equivalent "
            "and cannot be shared without a copy. Convert it first (e.g. arr.astype([...]) with a "
            "numeric or 'U' dtype for that field), or drop the field."
        )
        raise TypeError(msg)
    msg = (
        f"from_struct_array: field {name!r} has dtype {dtype} (kind {kind!r}), which has no tensor "
        "equivalent. Only numeric, bool, string ('U'/'S') and nested structured fields are supported; "
        "cast it first (datetimes: .astype('i8'))."
    )
    raise TypeError(msg)


def _strings(field: _StrField, batch_size: torch.Size, device: Any) -> Any:
    array = field.array
    n = len(batch_size)
    if n == 0:
        return NonTensorData(array.tolist(), batch_size, device)
    flat = array.reshape(math.prod(batch_size), *array.shape[n:])
    return NonTensorStack._from_flat([x.tolist() for x in flat], batch_size, device)


def from_struct_array_impl(struct_array: Any, opts: _Opts) -> Any:
    """``TensorDict.from_struct_array`` (see there)."""
    import numpy as np


    if not isinstance(struct_array, np.ndarray) or struct_array.dtype.names is None:
        what = (
            f"an array of dtype {struct_array.dtype}"
            if isinstance(struct_array, np.ndarray)
            else type(struct_array).__name__
        )
        msg = f"from_struct_array expects a NumPy structured array (a dtype with named fields), got {what}."
        raise TypeError(msg)
    shape = torch.Size(struct_array.shape)
    source = {name: _field(name, struct_array[name], opts) for name in struct_array.dtype.names}
    if opts.batch_size is not None:
        batch_size = opts.batch_size
        if shape[: len(batch_size)] != batch_size:
            raise batch_mismatch_error("<struct array>", shape, batch_size)
    elif opts.auto:
        common = _common_batch(source, opts.batch_dims)
        batch_size = shape if common is None else common
    else:
        batch_size = shape
    for key, value in source.items():
        if isinstance(value, _StrField):
            source[key] = _strings(value, batch_size, opts.device)
    _settle(source, batch_size, opts.device, check=True)
    return _classes.TensorDict._new_unsafe(source, batch_size, opts.device)


def numpy_value(key: str, value: Any, opts: _Opts) -> Any:
    """A NumPy value inside ``from_dict``/``from_any``: arrays become tensors (shared memory)."""
    import numpy as np


    if isinstance(value, np.ndarray):
        if value.dtype.names is not None:
            return from_struct_array_impl(
                value, _Opts(None, opts.auto, opts.batch_dims, opts.device, False)
            )
        kind = value.dtype.kind
        if kind in _NUMERIC_KINDS:
            return _share(key, value)
        if kind in "US" and value.ndim == 1:
            return _PendingList(value.tolist())
        return NonTensorData(value, (), opts.device)
    if isinstance(value, np.generic):
        if value.dtype.kind in _NUMERIC_KINDS:
            return _Scalar(value)
        return NonTensorData(value.item(), (), opts.device)
    return NonTensorData(value, (), opts.device)


# ---------------------------------------------------------------------- way out
def _np_dtype(key: Any, dtype: torch.dtype) -> np.dtype:
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        msg = f"key {key!r} has dtype {dtype}, which NumPy does not support; cast it first (e.g. td.float())."
        raise TypeError(msg) from None


def _object_dtype(key: Any, items: list) -> Any:
    if all(isinstance(x, str) for x in items):
        return f"U{max([10, *map(len, items)])}"
    if all(isinstance(x, bytes) for x in items):
        return f"S{max([1, *map(len, items)])}"
    if all(isinstance(x, bool) for x in items):
        return "?"
    if all(isinstance(x, int) for x in items):
        return "i8"
    if all(isinstance(x, (int, float)) for x in items):
        return "f8"
    kinds = sorted({type(x).__name__ for x in items})
    msg = (
        f"to_struct_array: key {key!r} holds non-tensor data of type {kinds}, which has no NumPy "
        "structured dtype (only str, bytes and numbers do). Exclude it first: td.exclude(key)."
    )
    raise TypeError(msg)


def _struct_dtype(td: Any, n: int) -> np.dtype:
    import numpy as np


    fields = []
    for key, value in td._items_raw():
        if isinstance(value, torch.Tensor):
            fields.append((key, _np_dtype(key, value.dtype), tuple(value.shape[n:])))
        elif isinstance(value, _classes.TensorDictBase):
            fields.append(
                (key, _struct_dtype(value, value.batch_dims), tuple(value.batch_size[n:]))
            )
        elif isinstance(value, NonTensorData):
            fields.append((key, _object_dtype(key, [value.data])))  # type: ignore[arg-type]
        elif isinstance(value, NonTensorStack):
            fields.append((key, _object_dtype(key, list(value._items))))  # type: ignore[arg-type]
        else:
            msg = f"to_struct_array: key {key!r} holds a {type(value).__name__}, which has no NumPy structured dtype."
            raise TypeError(msg)
    return np.dtype(fields, align=True)


def _fill(out: np.ndarray, td: Any) -> None:
    import numpy as np


    for key, value in td._items_raw():
        if isinstance(value, torch.Tensor):
            out[key] = value.detach().cpu().resolve_conj().resolve_neg().numpy()
        elif isinstance(value, _classes.TensorDictBase):
            _fill(out[key], value)
        elif isinstance(value, NonTensorData):
            out[key] = value.data
        elif isinstance(value, NonTensorStack):
            out[key] = np.array(value.tolist(), dtype=out.dtype[key])


def to_struct_array_impl(td: Any) -> np.ndarray:
    """``TensorDictBase.to_struct_array`` (see there)."""
    import numpy as np

    out = np.empty(tuple(td.batch_size), dtype=_struct_dtype(td, td.batch_dims))
    _fill(out, td)
    return out


def numpy_impl(td: Any) -> dict:
    """``TensorDictBase.numpy`` (see there)."""

    out = {}
    for key, value in td._items_raw():
        if isinstance(value, torch.Tensor):
            _np_dtype(key, value.dtype)
            out[key] = value.detach().cpu().resolve_conj().resolve_neg().numpy()
        elif isinstance(value, _classes.TensorDictBase):
            out[key] = numpy_impl(value)  # type: ignore[assignment]
        elif getattr(value, "_is_tensorclass", False):  # a tensorclass: its tensor fields, as a dict
            out[key] = numpy_impl(value._tensordict)  # type: ignore[assignment]
        else:
            out[key] = td._unwrap_leaf(value)
    return out
