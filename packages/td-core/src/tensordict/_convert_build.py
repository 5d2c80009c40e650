"""The builder behind every constructor (``from_dict``, ``from_any``,
``from_namedtuple``, ``from_tuple``, ``from_dataclass``, ``from_pytree``,
``from_struct_array``).

Values are converted first (``_value``): nested containers become nested
TensorDicts, Python numbers wait for the batch size (``_Scalar``, broadcast over it),
lists that are not numeric wait too (``_PendingList``: a ``NonTensorStack`` when they
span a one-dim batch size). The batch size is settled last (``_settle``): the one
given (every value is checked against it), the largest one the values share
(``auto_batch_size``) or ``[]``. A nested level holding only scalars and non-tensor
data follows its parent's batch size.
"""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import torch

from tensordict import _classes, tabular
from tensordict._deep import trampoline
from tensordict._device import _to_device as _parse_device
from tensordict._errors import batch_mismatch_error
from tensordict._keys import unravel_key
from tensordict._nested_shape import leaf_shape
from tensordict._nontensor import NonTensorData, NonTensorStack, nested_list_items
from tensordict._seams import import_sibling

_Tensor = torch.Tensor
_Size = torch.Size


# ---------------------------------------------------------------------- value kinds
class _Scalar:
    """A Python number waiting for the batch size (it is broadcast over it)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _PendingList:
    """A list that is not a tensor: a ``NonTensorStack`` if it spans the batch, else data."""

    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items


class _Opts:
    """Options shared by every level of one conversion."""

    __slots__ = ("batch_size", "auto", "batch_dims", "device", "any_mode", "free")

    def __init__(
        self, batch_size: Any, auto: bool, batch_dims: int | None, device: Any, any_mode: bool
    ) -> None:
        self.batch_size = None if batch_size is None else _as_size(batch_size)
        self.auto = auto
        self.batch_dims = batch_dims
        self.device = None if device is None else _as_device(device)
        self.any_mode = any_mode
        #: ids of the TensorDicts built here with nothing that fixes a batch size (only
        #: scalars and non-tensor data): they follow their parent's batch size
        self.free: set[int] = set()


def _as_size(batch_size: Any) -> torch.Size:
    if isinstance(batch_size, int):
        return _Size((batch_size,))
    try:
        return _Size(batch_size)
    except TypeError:
        msg = f"batch_size must be an int, a sequence of int or a torch.Size, got {batch_size!r}."
        raise TypeError(msg) from None


def _as_device(device: Any) -> torch.device | None:
    return _parse_device(device)


def _is_numpy(value: Any) -> bool:
    mod = type(value).__module__
    return mod == "numpy" or mod.startswith("numpy.")


def _tuple_fields(value: Any) -> tuple | None:
    """The field names of a named tuple or a struct sequence (``torch.return_types.max``)."""
    cls = type(value)
    fields = getattr(cls, "_fields", None)
    if isinstance(fields, tuple):
        return fields
    if getattr(cls, "n_fields", None) is not None:  # struct sequence: fields in __match_args__
        fields = getattr(cls, "__match_args__", None)
        if isinstance(fields, tuple) and len(fields) == len(value):
            return fields
    return None


def _is_namedtuple(value: Any) -> bool:
    """A ``collections.namedtuple`` (struct sequences such as ``torch.return_types``
    count as plain tuples here, as upstream's ``from_any`` does)."""
    return isinstance(value, tuple) and isinstance(getattr(type(value), "_fields", None), tuple)


def _is_dataclass_instance(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _is_collection(value: Any) -> bool:
    return _classes.is_tensor_collection(value)


def _numeric_list(value: list) -> torch.Tensor | None:
    """``torch.tensor(value)`` when the list holds numbers (nested lists of them) only."""

    def numeric(x: Any) -> bool:
        if isinstance(x, (list, tuple)):
            return all(numeric(y) for y in x)
        return isinstance(x, (bool, numbers.Number)) or (isinstance(x, _Tensor) and x.ndim == 0)

    if not value or not numeric(value):
        return None
    try:
        return torch.tensor(value)
    except (TypeError, ValueError, RuntimeError):
        return None


def _check_options(
    batch_size: Any, auto_batch_size: bool, batch_dims: int | None, name: str
) -> bool:
    """Validates the keyword combination of every constructor but ``from_dict``."""
    if auto_batch_size and batch_size is not None:
        msg = f"{name}: auto_batch_size=True and batch_size={batch_size!r} are exclusive; pass one of them."
        raise TypeError(msg)
    if batch_dims is not None and not auto_batch_size:
        warnings.warn(
            f"{name}: batch_dims={batch_dims} is ignored without auto_batch_size=True. "
            "Pass auto_batch_size=True to compute a batch size of at most batch_dims dims.",
            FutureWarning,
            stacklevel=3,
        )
    return bool(auto_batch_size)


# ---------------------------------------------------------------------- the builder
def _to_device(value: Any, device: torch.device | None) -> Any:
    if device is not None and value.device != device:
        return value.to(device)
    return value


class _Nest:
    """What :func:`_value` returns for a value that becomes a nested TensorDict: its
    ``(str, value)`` pairs, which :func:`_build_node` hands to :func:`trampoline`."""

    __slots__ = ("items",)

    def __init__(self, items: Any, opts: Any = None) -> None:
        self.items = items


def _value(key: str, value: Any, opts: _Opts, nest: Any = None) -> Any:
    """Converts one input value to a storage value (or a pending placeholder); a value that
    becomes a nested TensorDict gives ``nest(items, opts)``: by default the TensorDict built
    by :func:`_build_rec`, with ``nest=_Nest`` the :class:`_Nest` of its pairs."""

    if isinstance(value, _Tensor):
        return _to_device(value, opts.device)
    if isinstance(value, (NonTensorData, NonTensorStack)):
        return value
    if _is_collection(value):
        return _to_device(value, opts.device)
    if opts.any_mode and type(value).__module__.startswith("h5py") and isinstance(value, Mapping):
        # an open h5py file or group (a Mapping of datasets): read lazily through td-h5,
        # as from_any does at the top level, instead of wrapping each dataset object
        return import_sibling("persistent").PersistentTensorDict(group=value, device=opts.device)
    if isinstance(value, Mapping):
        return (nest or _build_rec)(_normalize_items(value), opts)
    if isinstance(value, (bool, numbers.Number)):
        return _Scalar(value)
    if opts.any_mode:
        if _is_namedtuple(value):
            return (nest or _build_rec)(zip(type(value)._fields, value), opts)
        if isinstance(value, tuple):
            return (nest or _build_rec)(((str(i), v) for i, v in enumerate(value)), opts)
        if _is_dataclass_instance(value):
            return (nest or _build_rec)(((f.name, getattr(value, f.name)) for f in dataclasses.fields(value)), opts)
    if _is_numpy(value):
        from tensordict._convert_numpy import numpy_value

        out = numpy_value(key, value, opts)
        if isinstance(out, _Tensor):
            return _to_device(out, opts.device)
        return out
    if isinstance(value, list):
        tensor = _numeric_list(value)
        if tensor is not None:
            return _to_device(tensor, opts.device)
        return _PendingList(value)
    return NonTensorData(value, (), opts.device)


def _normalize_items(mapping: Mapping) -> list[tuple[str, Any]]:
    """Top-level ``(str, value)`` pairs; tuple keys become nested dicts."""

    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key.__class__ is str:
            if key in out and isinstance(out[key], dict) and isinstance(value, Mapping):
                out[key] = {**out[key], **value}
            else:
                out[key] = value
            continue
        if not isinstance(key, tuple):
            msg = (
                f"from_dict: key {key!r} of type {type(key).__name__} is not a str or a tuple of str. "
                "Use TensorDict.from_pytree to keep keys of any type."
            )
            raise TypeError(msg)
        key = unravel_key(key)
        if key.__class__ is str:
            out[key] = value
            continue
        node = out
        for sub in key[:-1]:
            nxt = node.get(sub)  # type: ignore[arg-type]
            if not isinstance(nxt, dict):
                nxt = dict(nxt.items()) if isinstance(nxt, Mapping) else {}
                node[sub] = nxt  # type: ignore[index]
            node = nxt
        node[key[-1]] = value  # type: ignore[index]
    return list(out.items())


def _build(items: Any, opts: _Opts) -> Any:
    """Builds a ``TensorDict`` from ``(str, value)`` pairs with the options of ``opts``.

    Nested mappings are built by recursion (the fastest for the usual few levels); a nest
    deeper than the recursion limit allows is built again level by level without
    recursion (nothing but new objects and ``opts.free`` is written, which is restored)."""
    if items.__class__ is not list:
        items = list(items)  # read again if the recursive walk gives up
    free = set(opts.free) if opts.free else None
    try:
        return _build_rec(items, opts)
    except RecursionError:
        opts.free.clear()
        opts.free.update(free or ())
        return trampoline(_build_node, items, opts)


def _build_rec(items: Any, opts: _Opts) -> Any:
    """:func:`_build` by recursion."""
    source = {}
    for key, value in items:
        if key.__class__ is not str:
            _str_key(key)
        source[key] = _value(key, value, opts)
    return _build_level(source, opts)


def _build_node(items: Any, opts: _Opts) -> Generator[tuple, Any, Any]:
    """One level of :func:`_build` without recursion: a nested TensorDict's pairs are
    yielded to :func:`trampoline`, which sends the built TensorDict back."""
    source = {}
    for key, value in items:
        out = _value(_str_key(key), value, opts, _Nest)
        if out.__class__ is _Nest:
            out = yield (out.items, opts)
        source[key] = out
    return _build_level(source, opts)


def _str_key(key: Any) -> str:
    if key.__class__ is not str:
        msg = f"key {key!r} of type {type(key).__name__} is not a str."
        raise TypeError(msg)
    return key


def _build_level(source: dict, opts: _Opts) -> Any:
    """The TensorDict of one level, its values converted (nested ones already built)."""
    free = False
    if opts.batch_size is not None:
        batch_size = opts.batch_size
        check = True
    elif opts.auto:
        common = _common_batch(source, opts.batch_dims, opts.free)
        free = common is None
        batch_size = _Size(()) if free else common  # type: ignore[assignment]
        check = False
    else:
        batch_size = _Size(())
        check = False
    _settle(source, batch_size, opts.device, check, opts.free)
    td = _classes.TensorDict._new_unsafe(source, batch_size, opts.device)
    if free:
        opts.free.add(id(td))
    return td


def _prefix(common: list | None, shape: Sequence[int]) -> list:
    if common is None:
        return list(shape)
    n = 0
    for a, b in zip(common, shape):
        if a != b:
            break
        n += 1
    return common[:n]


def _common_batch(
    source: dict, batch_dims: int | None, free: set | None = None
) -> torch.Size | None:
    """The longest leading shape shared by the values (non-tensor data and scalars
    broadcast); ``None`` if no value fixes one."""

    common: list | None = None
    for value in source.values():
        if isinstance(value, _Tensor):
            shape = value.shape
        elif isinstance(value, (_Scalar, NonTensorData)) or (free and id(value) in free):
            continue
        elif isinstance(value, _PendingList):
            shape = (len(value.items),)  # type: ignore[assignment]
        else:
            shape = value.batch_size
        common = _prefix(common, shape)
        if not common:
            break
    if common is None:
        return None
    if batch_dims is not None:
        common = common[:batch_dims]
    return _Size(common)


def _broadcast_free(td: Any, batch_size: torch.Size) -> Any:
    """A TensorDict of scalars and non-tensor data, expanded to ``batch_size``."""

    source = {}
    for key, value in td._items_raw():
        if isinstance(value, _Tensor):
            source[key] = value.expand(*batch_size, *value.shape).clone()
        elif isinstance(value, _classes.TensorDictBase):
            source[key] = _broadcast_free(value, batch_size)
        else:
            source[key] = NonTensorData(value.data, batch_size, value.device)  # type: ignore[assignment]
    return _classes.TensorDict._new_unsafe(source, batch_size, td.device)


def _settle(
    source: dict,
    batch_size: torch.Size,
    device: torch.device | None,
    check: bool,
    free: set | None = None,
) -> None:
    """Gives every value its final form for ``batch_size``; raises if one does not fit."""

    n = len(batch_size)
    for key, value in source.items():
        if free and id(value) in free:
            if n:
                source[key] = _broadcast_free(value, batch_size)
        elif isinstance(value, _Tensor):
            if check and leaf_shape(value)[:n] != batch_size:
                raise batch_mismatch_error(key, leaf_shape(value), batch_size)
        elif isinstance(value, _Scalar):
            tensor = torch.as_tensor(value.value, device=device)
            source[key] = tensor.expand(batch_size).clone() if n else tensor
        elif isinstance(value, NonTensorData):
            if value.batch_size != batch_size:
                source[key] = NonTensorData(value.data, batch_size, device)
        elif isinstance(value, _PendingList):
            items = value.items
            nested = nested_list_items(list(items), batch_size) if n > 1 else None
            if n == 1 and batch_size[0] == len(items):
                source[key] = NonTensorStack._from_flat(list(items), batch_size, device)
            elif nested is not None:  # nested lists spanning every batch dim
                source[key] = NonTensorStack._from_flat(nested, batch_size, device)
            else:
                source[key] = NonTensorData(items, batch_size, device)
        elif isinstance(value, NonTensorStack):
            if value.batch_size != batch_size:
                if check:
                    raise batch_mismatch_error(key, value.batch_size, batch_size)
                source[key] = NonTensorData(value.tolist(), batch_size, device)
        elif check and value.batch_size[:n] != batch_size:
            raise batch_mismatch_error(key, value.batch_size, batch_size)


def _finish(td: Any, names: Any) -> Any:
    if names is not None:
        td.names = names
    return td


# ---------------------------------------------------------------------- constructors
def _from_dict(
    input_dict: Any,
    batch_size: Any = None,
    device: Any = None,
    batch_dims: int | None = None,
    *,
    auto_batch_size: bool | None = None,
    names: Sequence[str] | None = None,
) -> Any:
    if isinstance(input_dict, _classes.TensorDictBase):
        return input_dict
    if not isinstance(input_dict, Mapping):
        msg = f"from_dict expects a dict (or any Mapping), got {type(input_dict).__name__}. Use from_any for other types."
        raise TypeError(msg)
    if batch_size is not None and batch_dims is not None:
        msg = (
            f"from_dict: cannot pass both batch_size={batch_size!r} and batch_dims={batch_dims}; "
            "they are exclusive, pass one of them."
        )
        raise ValueError(msg)
    auto = (batch_dims is not None) if auto_batch_size is None else bool(auto_batch_size)
    opts = _Opts(batch_size, auto and batch_size is None, batch_dims, device, any_mode=False)
    return _finish(_build(_normalize_items(input_dict), opts), names)


def _from_any(
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    if isinstance(obj, _Tensor) or _is_collection(obj):
        return obj
    if isinstance(obj, Mapping):
        # as from_dict (batch_size wins over auto_batch_size), with from_any's rules inside
        auto = bool(auto_batch_size) and batch_size is None
        opts = _Opts(batch_size, auto, batch_dims if auto else None, device, any_mode=True)
        return _build(_normalize_items(obj), opts)
    auto = _check_options(batch_size, auto_batch_size, batch_dims, "from_any")
    opts = _Opts(batch_size, auto, batch_dims, device, any_mode=True)
    if _is_namedtuple(obj):
        return _build(zip(type(obj)._fields, obj), opts)
    if isinstance(obj, tuple):
        return _build(((str(i), v) for i, v in enumerate(obj)), opts)
    if _is_dataclass_instance(obj):
        return _build(((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)), opts)
    if _is_numpy(obj):
        from tensordict._convert_numpy import from_struct_array_impl

        if getattr(getattr(obj, "dtype", None), "names", None):
            return from_struct_array_impl(obj, opts)
        return torch.as_tensor(obj, device=opts.device)
    if type(obj).__module__.startswith("h5py"):
        persistent = import_sibling("persistent")
        return persistent.PersistentTensorDict.from_h5(
            obj.file.filename,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            batch_size=batch_size,
        )
    kind = tabular.is_table(obj)
    if kind is not None:  # a pandas DataFrame, an Arrow table, a polars DataFrame
        if kind == "pandas":
            return tabular.from_pandas(
                obj, auto_batch_size=auto_batch_size, batch_dims=batch_dims, device=device, batch_size=batch_size,
            )
        td = tabular.from_arrow(obj, device=device)
        if batch_size is not None:
            td.batch_size = batch_size
        elif auto_batch_size:
            td.auto_batch_size_(batch_dims)
        return td
    if isinstance(obj, list):
        tensor = _numeric_list(obj)
        if tensor is not None:
            return _to_device(tensor, opts.device)

        return NonTensorStack._from_flat(list(obj), (len(obj),), opts.device)
    return obj


def _from_namedtuple(
    named_tuple: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    if not isinstance(named_tuple, tuple) or _tuple_fields(named_tuple) is None:
        msg = f"from_namedtuple expects a named tuple, got {type(named_tuple).__name__}."
        raise TypeError(msg)
    auto = _check_options(batch_size, auto_batch_size, batch_dims, "from_namedtuple")
    opts = _Opts(batch_size, auto, batch_dims, device, any_mode=True)
    return _build(zip(_tuple_fields(named_tuple), named_tuple), opts)  # type: ignore[arg-type]


def _from_tuple(
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    if not isinstance(obj, tuple):
        msg = f"from_tuple expects a tuple, got {type(obj).__name__}."
        raise TypeError(msg)
    auto = _check_options(batch_size, auto_batch_size, batch_dims, "from_tuple")
    opts = _Opts(batch_size, auto, batch_dims, device, any_mode=True)
    return _build(((str(i), v) for i, v in enumerate(obj)), opts)


def _from_dataclass(
    dataclass: Any,
    *,
    dest_cls: type | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    as_tensorclass: bool = False,
    device: Any = None,
    batch_size: Any = None,
) -> Any:
    if as_tensorclass:
        return import_sibling("tensorclass").from_dataclass(
            dataclass,
            dest_cls=dest_cls,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
    if not _is_dataclass_instance(dataclass):
        what = "a dataclass type" if isinstance(dataclass, type) else type(dataclass).__name__
        msg = (
            f"from_dataclass expects a dataclass instance, got {what}. "
            "Instantiate the dataclass first, or pass as_tensorclass=True to convert the type."
        )
        raise TypeError(msg)
    auto = _check_options(batch_size, auto_batch_size, batch_dims, "from_dataclass")
    opts = _Opts(batch_size, auto, batch_dims, device, any_mode=True)
    return _build(
        ((f.name, getattr(dataclass, f.name)) for f in dataclasses.fields(dataclass)), opts
    )
