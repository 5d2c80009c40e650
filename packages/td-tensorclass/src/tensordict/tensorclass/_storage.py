"""Where a tensorclass instance keeps its fields, and the fast paths that bind them.

An instance has two slots and an instance ``__dict__``:

- ``_tensordict``: a TensorDict holding the tensor-like fields (tensors, nested
  TensorDicts and tensorclasses, ``NonTensorStack`` of per-element objects). Every
  batch operation runs on it;
- ``_non_tensordict``: a ``dict`` with the other fields (``None``, strings, any
  object), shared by every element of the batch;
- ``__dict__``: every field's current value (the tensor from the TensorDict, the
  object from ``_non_tensordict``), plus private attributes (names starting with
  ``_``).

The instance dict is what makes ``data.image`` as fast as a dataclass attribute:
the class defines no attribute under a field's name and no ``__getattr__``, so
Python finds the value with one lookup in the instance dict, on its specialised
fast path. The price is keeping it in step with the TensorDict: every write goes
through ``__setattr__``/``set``/``_store_field``, every in-place TensorDict method
is followed by ``_resync``, and every new instance is built by ``_bind``.

Invariant: a field name is a key of the TensorDict or of ``_non_tensordict``, never
of both, and ``__dict__[name]`` is its value (``None`` when it is in neither).
Operations that may leave ``NonTensorData`` leaves in the TensorDict go through
``_pull_non_tensor``, which moves them back to ``_non_tensordict``.
"""

from __future__ import annotations

import numbers
import types
import typing
from collections.abc import Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

from tensordict import UnbatchedTensor
from tensordict.ext import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensor_collection,
)
from tensordict.ext import same_value as _same

__all__: list[str] = []

_Tensor = torch.Tensor
_Size = torch.Size
_EMPTY_SIZE = torch.Size(())
#: marks a missing entry (``None`` is a valid field value)
_ABSENT: Any = object()


class _Slots:
    """Instance layout shared by every tensorclass (see the module docstring)."""

    __slots__ = ("_tensordict", "_non_tensordict")

    if TYPE_CHECKING:  # pragma: no cover - set per instance and per class (type checkers only)
        _tensordict: TensorDictBase
        _non_tensordict: dict[str, Any]
        _tc_fields: tuple[str, ...]
        _tc_field_descriptors: bool
        _tc_field_set: frozenset[str]
        _tc_autocast: bool
        _tc_nocast: bool
        _tc_frozen: bool
        _tc_shadow: bool
        _tc_tensor_only: bool

        @classmethod
        def from_tensordict(cls, *args: Any, **kwargs: Any) -> Any: ...
        def copy(self) -> Any: ...
        def get(self, *args: Any, **kwargs: Any) -> Any: ...
        def to_tensordict(self, *args: Any, **kwargs: Any) -> Any: ...
        def to_dict(self, *args: Any, **kwargs: Any) -> Any: ...


_obj_new = object.__new__
# Slots and instance-dict entries are written with ``object.__setattr__(obj, name, value)``,
# spelled out or bound to a local in the function: torch.compile (Dynamo) traces that as a
# plain attribute store (a module-level alias of it, or a slot descriptor's ``__set__``,
# breaks the graph or runs the class's own ``__setattr__``), so tensorclasses can be
# built inside a compiled function.


def _batch_error(cls: type, name: str, shape: Any, batch_size: Any) -> RuntimeError:
    msg = (
        f"batch dimension mismatch: {cls.__name__}.{name}: the value's leading dims must match "
        f"batch_size={tuple(batch_size)}, got shape {tuple(shape)}. Make the leading dims "
        f"match, or build the {cls.__name__} with a different batch_size."
    )
    return RuntimeError(msg)


def _locked_error(cls: type, name: str) -> RuntimeError:
    msg = (
        f"Cannot set {cls.__name__}.{name}: the instance is locked (for instance after "
        "memmap()). Unlock it with `obj.unlock_()`, or write in place with "
        f"`obj.{name}.copy_(value)` / `obj[index] = value`."
    )
    return RuntimeError(msg)


# batch-size and device normalisation are td-core's own (one definition)
from tensordict.ext import to_batch_size as _to_size  # noqa: E402, F401 (used by the tests)
from tensordict.ext import to_device as _to_device  # noqa: E402, F401


# ---------------------------------------------------------------------- binding
def _pull_non_tensor(store: dict, nt: dict) -> None:
    """Moves ``NonTensorData`` leaves of ``store`` into ``nt`` (as their objects), and
    ``NonTensorStack`` leaves whose objects are all equal (one object then stands for
    the whole batch again)."""
    for key, value in list(store.items()):
        cls = value.__class__
        if cls is NonTensorData:
            nt[key] = value.data
            del store[key]
        elif cls is NonTensorStack:
            items = value._items
            if items and all(_same(items[0], item) for item in items[1:]):
                nt[key] = items[0]
                del store[key]


def _member_view(td: Any) -> Any:
    """``td`` (a TensorDict read out of a lazy stack, shared with it) made safe to bind:
    binding pulls ``NonTensorData`` entries out of the store, which must not empty the
    stack's own member (the MCTS ``Tree`` keeps its ids there), so such a member is
    bound through a shallow copy; the tensors stay shared."""
    if td.__class__ is TensorDict:
        for value in td._tensordict.values():
            cls = value.__class__
            if cls is NonTensorData or cls is NonTensorStack:
                return td.copy()
    return td


def _read(value: Any) -> Any:
    """The attribute value of a TensorDict entry."""
    cls = value.__class__
    if cls is NonTensorData:
        return value.data
    if cls is NonTensorStack:
        return value.tolist()
    return value


def _field_values(obj: Any, td: TensorDictBase, nt: dict) -> dict:
    """``{field: value}`` for ``td`` and ``nt`` (after pulling NonTensorData into ``nt``)."""
    fields = type(obj)._tc_fields
    if td.__class__ is TensorDict:
        store = td._tensordict
        for value in store.values():
            cls = value.__class__
            if cls is NonTensorData or cls is NonTensorStack:
                _pull_non_tensor(store, nt)
                values = {k: _read(v) for k, v in store.items()}
                break
        else:
            values = dict(store)
    else:
        values = {}
        unreadable = []
        for key in td._keys_raw():
            try:
                value = td._get_raw(key)
            except RuntimeError:
                # a lazy stack whose members differ in shape: no single value; read it
                # with obj.get(key, as_list=True) / as_padded_tensor=True
                unreadable.append(key)
                continue
            if value.__class__ is NonTensorData:
                nt[key] = value.data
            else:
                values[key] = _read(value)
        if unreadable:
            for name in fields:
                if name not in values and name not in unreadable and name not in nt:
                    values[name] = None
            values.update(nt)
            return values
    if nt:
        for key in list(nt):
            if key in values:
                del nt[key]
        values.update(nt)
    if len(values) < len(fields):
        for name in fields:
            if name not in values:
                values[name] = None
    return values


def _bind(obj: Any, td: TensorDictBase, nt: dict) -> None:
    """Attaches ``td`` and ``nt`` to ``obj`` (a fresh instance) and fills its dict."""
    object.__setattr__(obj, "_tensordict", td)
    object.__setattr__(obj, "__dict__", _field_values(obj, td, nt))
    object.__setattr__(obj, "_non_tensordict", nt)


def _new(cls: type[_Slots], td: TensorDictBase, nt: dict | None) -> Any:
    """A new ``cls`` instance over ``td``; ``nt`` is copied (it is per instance)."""
    obj = _obj_new(cls)
    if td.__class__ is TensorDict and not nt and not cls._tc_field_descriptors:
        # the hot path (indexing, shape ops): tensors only, nothing to move around
        store = td._tensordict
        for value in store.values():
            kind = value.__class__
            if kind is NonTensorData or kind is NonTensorStack:
                break
        else:
            # attribute by attribute (not a new __dict__): the instance keeps CPython's
            # compact attribute storage, the fastest to read
            setattr_ = object.__setattr__  # a local: Dynamo still traces it as a plain store
            for key, value in store.items():
                setattr_(obj, key, value)
            if len(store) < len(cls._tc_fields):
                for name in cls._tc_fields:
                    if name not in store:
                        setattr_(obj, name, None)
            setattr_(obj, "_tensordict", td)
            setattr_(obj, "_non_tensordict", {})
            return obj
    _bind(obj, td, dict(nt) if nt else {})
    return obj


def _resync(obj: Any) -> None:
    """Restores the invariant after an in-place TensorDict operation on ``obj``
    (private attributes in the instance dict are kept)."""
    nt = obj._non_tensordict
    values = _field_values(obj, obj._tensordict, nt)
    d = obj.__dict__
    for key in [k for k in d if k[:1] != "_"]:
        if key not in values:
            del d[key]
    d.update(values)


def _full_td(obj: Any) -> TensorDictBase:
    """``obj``'s TensorDict plus its non-tensor fields as ``NonTensorData`` (a shallow copy
    when there are any; the TensorDict itself otherwise)."""
    td = obj._tensordict
    nt = obj._non_tensordict
    if not nt:
        return td
    bs, device = td.batch_size, td.device
    if td.__class__ is TensorDict:
        source = dict(td._tensordict)
        for key, value in nt.items():
            source[key] = NonTensorData(value, bs, device)
        return TensorDict._new_unsafe(source, bs, device, td.names if td._has_names() else None)
    out = td.clone(recurse=False)
    for key, value in nt.items():
        out._set_raw(key, NonTensorData(value, bs, device))
    return out


@contextmanager
def _non_tensor_in_td(obj: Any) -> Any:
    """Within the block, ``obj``'s non-tensor fields are ``NonTensorData`` leaves of its
    own TensorDict, so that a TensorDict method sees (and may save, load or rewrite)
    every field. On exit the invariant is restored. Yields the TensorDict."""
    td = obj._tensordict
    nt = obj._non_tensordict
    if nt and td.__class__ is TensorDict:
        bs, device = td._batch_size, td._device
        store = td._tensordict
        for key, value in nt.items():
            store[key] = NonTensorData(value, bs, device)
        nt.clear()
    try:
        yield td
    finally:
        if obj._tensordict is not td and td.__class__ is TensorDict:
            _pull_non_tensor(td._tensordict, nt)
        _resync(obj)


# ---------------------------------------------------------------------- type hints
_HINTS_ATTR = "_tc_hints_cache"


def _type_hints(cls: type) -> dict[str, Any]:
    """Resolved type hints of ``cls``'s fields (best effort; unresolvable ones are absent)."""
    cached = cls.__dict__.get(_HINTS_ATTR)
    if cached is not None:
        return cached
    hints: dict[str, Any] = {}
    try:
        hints = typing.get_type_hints(cls, localns={cls.__name__: cls})
    except Exception:
        import sys

        for klass in reversed(cls.__mro__):
            module = sys.modules.get(klass.__module__)
            glob = dict(vars(module)) if module is not None else {}
            for name, ann in klass.__dict__.get("__annotations__", {}).items():
                if isinstance(ann, str):
                    try:
                        ann = eval(ann, glob, {cls.__name__: cls})  # noqa: S307 - class's own annotation
                    except Exception:
                        continue
                hints[name] = ann
    fields = set(getattr(cls, "_tc_fields", ()))
    hints = {k: v for k, v in hints.items() if k in fields}
    type.__setattr__(cls, _HINTS_ATTR, hints)
    return hints


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    """``(inner, allows_none)`` for ``X | None`` / ``Optional[X]``; ``(None, ...)`` when
    the hint is a union of several types."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        allows_none = len(args) != len(typing.get_args(hint))
        return (args[0] if len(args) == 1 else None), allows_none
    return hint, False


def _tensorclass_hint(cls: type, name: str) -> type | None:
    """The tensorclass type a field is annotated with, if any."""
    from tensordict.tensorclass._registry import is_declared_tensorclass as is_tensorclass

    hint = _type_hints(cls).get(name)
    if hint is None:
        return None
    hint, _ = _strip_optional(hint)
    if isinstance(hint, type) and is_tensorclass(hint):
        return hint
    return None


def _autocast(cls: type[_Slots], name: str, value: Any, batch_size: torch.Size) -> tuple[Any, bool]:
    """Casts ``value`` to the type ``name`` is annotated with. Returns
    ``(value, keep_as_object)``; the flag is set for Python scalar/str annotations."""
    from tensordict.tensorclass._registry import is_declared_tensorclass as is_tensorclass

    hint = _type_hints(cls).get(name)
    if hint is None or hint is Any or value is None:
        return value, False
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        # unions (``X | None`` too) are not cast, as upstream: tensors and tensor
        # collections are stored as such, anything else (a dict too) as an object
        if isinstance(value, (_Tensor, TensorDictBase)) or is_tensor_collection(value):
            return value, False
        return value, True
    if hint is None or not isinstance(hint, type):
        return value, False
    if hint.__name__ == "ndarray" and hint.__module__ == "numpy":
        import numpy

        if isinstance(value, _Tensor):
            value = value.detach().cpu().numpy()
        return numpy.asarray(value), True
    if issubclass(hint, _Tensor):
        if not isinstance(value, _Tensor) and not is_tensor_collection(value):
            value = torch.as_tensor(value)
        return value, False
    if is_tensorclass(hint):
        if isinstance(value, hint):
            return value, False
        if isinstance(value, TensorDictBase):
            return hint.from_tensordict(value), False  # type: ignore[attr-defined]
        if isinstance(value, Mapping):
            return hint.from_tensordict(TensorDict(dict(value), batch_size=batch_size)), False  # type: ignore[attr-defined]
        return value, False
    if issubclass(hint, TensorDictBase):
        if isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
            return TensorDict(dict(value), batch_size=batch_size), False
        return value, False
    if hint in (int, float, bool, complex):
        if isinstance(value, _Tensor):
            value = hint(value.item()) if value.numel() == 1 else value.tolist()
        elif isinstance(value, NonTensorData):
            value = hint(value.data)
        else:
            value = hint(value)
        return value, True
    if hint is str:
        if isinstance(value, NonTensorData):
            value = value.data
        if not isinstance(value, str):
            value = str(value)
        return value, True
    return value, False


def _is_numpy_numeric(value: Any) -> bool:
    if isinstance(value, (str, bytes)):  # the common case, answered without the module name
        return False  # (which torch.compile cannot read off a builtin type)
    mod = type(value).__module__
    if mod != "numpy" and not mod.startswith("numpy."):
        return False
    kind = getattr(getattr(value, "dtype", None), "kind", "O")
    return kind not in "OUSV"


# ---------------------------------------------------------------------- tensor_only
_TENSOR_ONLY_MSG = "tensor_only requires types to be Tensor, Tensor-subtrypes or None"


def _tensor_only_kind(hint: Any) -> str | None:
    """What a ``tensor_only`` field holds: ``"tensor"``, ``"td"`` (a TensorDict type),
    ``"tc"`` (a tensorclass), ``"nontensor"`` (``NonTensorData``), ``"none"``; ``None``
    when the annotation is none of these."""
    from tensordict.tensorclass._registry import is_declared_tensorclass as is_tensorclass

    if hint is None or hint is type(None):
        return "none"
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        kinds = {_tensor_only_kind(a) for a in typing.get_args(hint)}
        kinds.discard("none")
        if None in kinds or not kinds:
            return None if None in kinds else "none"
        for kind in ("tc", "td", "nontensor", "tensor"):
            if kind in kinds:
                return kind
    if origin is not None:  # TensorDict[str, Tensor] and other parameterised generics
        hint = origin
    if not isinstance(hint, type):
        return None
    if issubclass(hint, _Tensor):
        return "tensor"
    if is_tensorclass(hint):
        return "tc"
    if issubclass(hint, NonTensorData):
        return "nontensor"
    if issubclass(hint, TensorDictBase):
        return "td"
    return None


def check_tensor_only_hints(cls: type[_Slots]) -> None:
    """Raises ``TypeError`` when a field of a ``tensor_only`` class is annotated with
    something other than a tensor type, a TensorDict type, a tensorclass,
    ``NonTensorData`` or ``None`` (unions of these are fine)."""
    hints = _type_hints(cls)
    kinds = {}
    for name in cls._tc_fields:
        if name not in hints:
            continue  # unresolvable annotation (forward reference): checked at set time
        kind = _tensor_only_kind(hints[name])
        if kind is None:
            msg = f"{_TENSOR_ONLY_MSG}; {cls.__name__}.{name} is annotated {hints[name]!r}."
            raise TypeError(msg)
        kinds[name] = kind
    type.__setattr__(cls, "_tc_tensor_only_kinds", kinds)


def _mapping_to_td(value: Mapping, batch_size: torch.Size, device: Any) -> TensorDict:
    """A TensorDict of a (possibly nested) mapping; TensorDicts inside are kept as they are."""
    source = {}
    for key, item in value.items():
        if isinstance(item, Mapping) and not isinstance(item, TensorDictBase):
            item = _mapping_to_td(item, batch_size, device)
        source[key] = item
    return TensorDict(source, batch_size=batch_size, device=device)


def _tensor_only_cast(cls: type, name: str, value: Any, bs: torch.Size, device: Any) -> Any:
    """Casts a value assigned to a field of a ``tensor_only`` class."""
    kind = cls.__dict__.get("_tc_tensor_only_kinds", {}).get(name, "tensor")
    if kind == "nontensor":
        if value.__class__ is NonTensorData:
            return value
        return NonTensorData(value, batch_size=bs, device=device)
    if isinstance(value, (_Tensor, TensorDictBase)) or is_tensor_collection(value):
        return value
    if isinstance(value, Mapping):
        td = _mapping_to_td(value, bs, device)
        if kind == "tc":
            hint, _ = _strip_optional(_type_hints(cls)[name])
            return hint.from_tensordict(td)
        return td
    return torch.as_tensor(value, device=device)


# ---------------------------------------------------------------------- conversion
def _with_batch_size(cls: type, name: str, value: TensorDictBase, bs: torch.Size) -> TensorDictBase:
    """A shallow copy of ``value`` with batch size ``bs``; a ``RuntimeError`` in upstream's
    wording (naming the first leaf that does not fit) when its leaves do not allow it."""
    n = len(bs)
    for key, leaf in value.items(include_nested=True, leaves_only=True):
        shape = getattr(leaf, "shape", None)
        if isinstance(leaf, _Tensor) and shape is not None and shape[:n] != bs:
            key_name = key if isinstance(key, str) else ".".join(key)
            msg = (
                f"the Tensor {key_name} has shape {shape} which is incompatible with the batch-size {bs} "
                f"({cls.__name__}.{name}: a TensorDict with batch_size={tuple(value.batch_size)} takes the "
                "instance's batch size only if its leaves start with it)."
            )
            raise RuntimeError(msg)
    out = value.clone(recurse=False)
    out.batch_size = bs
    return out


def _convert_field(cls: type[_Slots], name: str, value: Any, td: TensorDictBase, non_blocking: bool = False) -> tuple[bool, Any]:
    """Validates and converts one field value for ``td`` (whose batch_size and device
    apply). Returns ``(goes_in_td, value)``. Raises before anything is written."""
    keep_object = False
    if cls._tc_autocast:
        value, keep_object = _autocast(cls, name, value, td.batch_size)
    elif cls._tc_tensor_only and value is not None:
        value = _tensor_only_cast(cls, name, value, td.batch_size, td.device)
        if value.__class__ is NonTensorData:
            return False, value
    if keep_object or value is None:
        return False, value
    bs = td.batch_size
    device = td.device
    if isinstance(value, _Tensor):
        n = len(bs)
        if n and value.shape[:n] != bs and not isinstance(value, UnbatchedTensor):
            raise _batch_error(cls, name, value.shape, bs)
        if device is not None and value.device != device:
            value = value.to(device, non_blocking=non_blocking)
        return True, value
    if value.__class__ is NonTensorData:
        return False, value.data
    if isinstance(value, NonTensorStack):
        if value.batch_size != bs:
            raise _batch_error(cls, name, value.batch_size, bs)
        return True, value
    if is_tensor_collection(value):
        vbs = value.batch_size
        if vbs[: len(bs)] != bs:
            if isinstance(value, TensorDictBase) and len(vbs) < len(bs) and vbs == bs[: len(vbs)]:
                # fewer batch dims than the instance (``TensorDict({...}, [])``): takes the
                # instance's batch size when its leaves allow it, as TensorDict.set does
                value = _with_batch_size(cls, name, value, bs)
            else:
                raise _batch_error(cls, name, vbs, bs)
        if device is not None and value.device != device:
            value = value.to(device)
        if isinstance(value, TensorDictBase):
            target = _tensorclass_hint(cls, name)
            if target is not None:
                value = target.from_tensordict(value)  # type: ignore[attr-defined]
        return True, value
    if value.__class__ is list and value and bs and _lists_stack():  # an empty list stays an object
        return _stack_list(cls, name, value, bs, device)
    # a plain dict becomes a TensorDict (or the annotated tensorclass); other mappings
    # (UserDict, ...) are kept as objects unless the annotation asks for a tensorclass
    if (isinstance(value, dict) and _dict_becomes_td(cls, name)) or (
        isinstance(value, Mapping) and _tensorclass_hint(cls, name) is not None
    ):
        target = _tensorclass_hint(cls, name)
        try:
            sub = TensorDict(dict(value), batch_size=bs, device=device)
        except RuntimeError as err:
            msg = f"{cls.__name__}.{name}: {err}"
            raise RuntimeError(msg) from None
        return True, (target.from_tensordict(sub) if target is not None else sub)  # type: ignore[attr-defined]
    if not cls._tc_nocast and (
        isinstance(value, (bool, numbers.Number)) and not isinstance(value, complex) or _is_numpy_numeric(value)
    ):
        tensor = torch.as_tensor(value, device=device)
        if tensor.ndim == 0 and bs:
            tensor = tensor.expand(bs).clone()
        n = len(bs)
        if n and tensor.shape[:n] != bs:
            raise _batch_error(cls, name, tensor.shape, bs)
        return True, tensor
    return False, value


def _lists_stack() -> bool:
    """td-core's ``list_to_stack()`` switch (lists become stacks along the first batch dim)."""
    try:
        from tensordict import list_to_stack
    except ImportError:  # pragma: no cover - older td-core
        return False
    return bool(list_to_stack())


def _stack_list(cls: type, name: str, value: list, bs: torch.Size, device: Any) -> tuple[bool, Any]:
    """Under ``set_list_to_stack(True)``: a list holds one element per index of the first
    batch dim; tensors are stacked, other objects become a ``NonTensorStack``."""
    if len(value) != bs[0]:
        raise _batch_error(cls, name, (len(value),), bs)
    if value and all(isinstance(v, _Tensor) for v in value):
        stacked = torch.stack(value)
        if stacked.shape[: len(bs)] != bs:
            raise _batch_error(cls, name, stacked.shape, bs)
        if device is not None and stacked.device != device:
            stacked = stacked.to(device)
        return True, stacked
    if len(bs) != 1:
        # each element would have to fill the remaining batch dims bs[1:]
        raise _batch_error(cls, name, (len(value),), bs)
    return True, NonTensorStack(*value, batch_size=bs, device=device)


def _dict_becomes_td(cls: type, name: str) -> bool:
    """A ``dict`` value becomes a TensorDict unless the field is annotated with a
    mapping type that is not a TensorDict (``dict``, ``Dict[str, int]``, ``Mapping``):
    such a field keeps the dict object, as upstream does."""
    hint = _type_hints(cls).get(name)
    if hint is None or hint is Any:
        return True
    hint, _ = _strip_optional(hint)
    origin = typing.get_origin(hint) or hint
    if isinstance(origin, type) and issubclass(origin, Mapping) and not issubclass(origin, TensorDictBase):
        return False
    return True


def _store_field(obj: Any, name: str, value: Any, non_blocking: bool = False) -> None:
    """Writes one field (validated) into ``obj``: the TensorDict or ``_non_tensordict``,
    and the instance dict."""
    cls = type(obj)
    td = obj._tensordict
    if td._is_locked:
        raise _locked_error(cls, name)
    in_td, value = _convert_field(cls, name, value, td, non_blocking)
    nt = obj._non_tensordict
    if in_td:
        if td.__class__ is TensorDict:
            td._tensordict[name] = value
        else:
            td._set_raw(name, value)
        nt.pop(name, None)
        obj.__dict__[name] = _read(value)
    else:
        if td._get_raw(name, _ABSENT) is not _ABSENT:
            td._del_raw(name)
        nt[name] = value
        obj.__dict__[name] = value
