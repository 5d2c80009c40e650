"""Saving tensorclasses with td-memmap.

td-memmap stores "registered types" (td-core's registry, ``tensordict.ext``): it asks
``save_fn(obj)`` for a TensorDict to write and a JSON dict of extra metadata, and on
load calls ``load_fn(td, extra)``. Every tensorclass is saved under one registration,
``"tensordict.tensorclass"``, with its class name (``tensorclass_name``) in the extra
metadata; loading resolves that name in this package's registry only, so a store
never makes the loader import anything.

``save_fn`` hands td-memmap a ``_MemmapView``: a TensorDict over the instance's
fields (non-tensor fields as ``NonTensorData``). An in-place save (``memmap_`` of the
instance or of a TensorDict holding it) writes the memory-mapped tensors into that
view, and the view writes them through to the instance (its TensorDict and its
attribute dict), so that ``obj.x`` is the memory-mapped tensor afterwards.

The registration happens when td-tensorclass is imported, if td-memmap is installed.
"""

from __future__ import annotations

from typing import Any

from tensordict.ext import NonTensorData, TensorDict
from tensordict.tensorclass._registry import get_tensorclass, tensorclass_name
from tensordict.tensorclass._storage import _full_td, _non_tensor_in_td, _read, _resync, _Slots

__all__ = ["REGISTERED_NAME", "register_with_memmap"]

REGISTERED_NAME = "tensordict.tensorclass"
#: TensorDict attributes td-memmap sets on the view that belong to the instance's TensorDict
_SHARED_ATTRS = frozenset({"_saved_path", "_is_memmap", "_device", "_is_locked"})


def _write_through(owner: Any, key: str, value: Any) -> None:
    td = owner._tensordict
    nt = owner._non_tensordict
    if value.__class__ is NonTensorData:
        td._tensordict.pop(key, None)
        nt[key] = owner.__dict__[key] = value.data
    else:
        td._tensordict[key] = value
        nt.pop(key, None)
        owner.__dict__[key] = _read(value)


class _MemmapView(TensorDict):
    """The fields of a tensorclass as a TensorDict whose writes reach the instance."""

    @classmethod
    def of(cls, owner: Any) -> Any:
        td = owner._tensordict
        if td.__class__ is not TensorDict:
            return _full_td(owner)
        view = cls.__new__(cls)
        source = dict(td._tensordict)
        bs, device = td._batch_size, td._device
        for key, value in owner._non_tensordict.items():
            source[key] = NonTensorData(value, bs, device)
        object.__setattr__(view, "_tensordict", source)
        object.__setattr__(view, "_batch_size", bs)
        object.__setattr__(view, "_device", device)
        object.__setattr__(view, "_names", td._names)
        object.__setattr__(view, "_owner", owner)
        return view

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        self._tensordict[key] = value
        _write_through(self._owner, key, value)  # type: ignore[attr-defined]

    def _del_raw(self, key: str) -> None:
        del self._tensordict[key]
        owner = self._owner  # type: ignore[attr-defined]
        owner._tensordict._tensordict.pop(key, None)
        owner._non_tensordict[key] = owner.__dict__[key] = None

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _SHARED_ATTRS:
            setattr(self._owner._tensordict, name, value)  # type: ignore[attr-defined]



def _save_fn(obj: Any) -> tuple[Any, dict]:
    return _MemmapView.of(obj), {"class": tensorclass_name(type(obj))}


def _load_fn(td: Any, extra: dict) -> Any:
    name = extra.get("class")
    try:
        cls = get_tensorclass(name)  # type: ignore[arg-type]
    except KeyError as err:
        raise RuntimeError(str(err.args[0])) from None
    return cls.from_tensordict(td)  # type: ignore[attr-defined]


_REGISTERED = [False]


def register_with_memmap() -> bool:
    """Registers tensorclasses in td-core's memmap type registry (td-memmap reads it); ``True``."""
    if _REGISTERED[0]:
        return True
    from tensordict.ext import register_memmap_type  # td-core's registry: no td-memmap import
    from tensordict.tensorclass._decorator import _TensorClassBase

    register_memmap_type(REGISTERED_NAME, _save_fn, _load_fn, cls=_TensorClassBase)
    _REGISTERED[0] = True
    return True


def _memmap_methods() -> Any:
    from tensordict.ext import import_sibling

    return import_sibling("memmap", "_td_methods")


def save_instance(obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``memmap``/``memmap_``/``memmap_like``/``save``/``dumps`` of a tensorclass: td-memmap
    saves the instance itself, so the store records its class."""
    methods = _memmap_methods()
    register_with_memmap()
    out = getattr(methods, name)(obj, *args, **kwargs)
    if out is obj:
        _resync(obj)
    return out


def load_instance(cls: type[_Slots], name: str, prefix: Any, *args: Any, out: Any = None, **kwargs: Any) -> Any:
    """``load_memmap``/``load`` as ``cls``: the stored instance, or a stored TensorDict
    turned into ``cls``."""
    methods = _memmap_methods()
    register_with_memmap()
    result = getattr(methods, name)(TensorDict, prefix, *args, **kwargs)
    if isinstance(result, cls):
        loaded = result
    elif isinstance(result, TensorDict) or hasattr(result, "_items_raw"):
        loaded = cls.from_tensordict(result)
    else:
        msg = f"{cls.__name__}.{name}: {prefix!s} holds a {type(result).__name__}, not a {cls.__name__}."
        raise TypeError(msg)
    if out is not None:
        rebind(out, loaded)
        return out
    return loaded


def rebind(obj: Any, source: Any) -> None:
    """Makes ``obj`` hold ``source``'s fields (same class), in place."""
    src = _full_td(source)
    with _non_tensor_in_td(obj) as td:
        store = td._tensordict if td.__class__ is TensorDict else None
        keys = set(src._keys_raw())
        for key in list(td._keys_raw()):
            if key not in keys:
                td._del_raw(key)
        for key, value in src._items_raw():
            if store is not None:
                store[key] = value
            else:
                td._set_raw(key, value)
        path = getattr(source._tensordict, "_saved_path", None)
        td._saved_path = path
        td._is_memmap = getattr(source._tensordict, "_is_memmap", False)


def refresh_instance(obj: Any) -> Any:
    """``memmap_refresh_``: re-reads the instance's folder into it."""
    path = getattr(obj._tensordict, "_saved_path", None)
    if path is None:
        msg = f"{type(obj).__name__}.memmap_refresh_: the instance has no saved_path (it was not memory-mapped to a folder)."
        raise RuntimeError(msg)
    rebind(obj, load_instance(type(obj), "load_memmap", path))
    return obj
