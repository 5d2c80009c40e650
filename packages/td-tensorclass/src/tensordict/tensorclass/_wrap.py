"""Wrapping TensorDict results back into the tensorclass that produced them.

A TensorDict method called on a tensorclass runs on its ``_tensordict``. What it
returns is mapped back by ``_wrap_out``:

- the TensorDict itself (an in-place method) -> the same instance, re-synced;
- a TensorDict whose top-level keys are all fields of the class -> a new instance of
  the class over it, with a copy of the non-tensor fields;
- a tuple or list of such TensorDicts (``unbind``, ``split``, ...) -> the same
  container of instances;
- anything else (a tensor, a bool, a TensorDict with other keys) -> unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensordict._base import TensorDictBase
from tensordict.tensorclass._storage import _new, _resync, _Slots

__all__: list[str] = []


def _wrap_out(obj: Any, out: Any) -> Any:
    if out is obj._tensordict:
        _resync(obj)
        return obj
    if isinstance(out, TensorDictBase):
        cls = type(obj)
        if cls._tc_field_set.issuperset(out._keys_raw()):
            return _new(cls, out, obj._non_tensordict)
        return out
    kind = out.__class__
    if (kind is tuple or kind is list) and out and isinstance(out[0], TensorDictBase):
        return kind(_wrap_out(obj, o) for o in out)
    return out


def _unwrap(value: Any) -> Any:
    """A tensorclass becomes its TensorDict; lists and tuples are mapped; the rest is kept."""
    if isinstance(value, _Slots):
        return value._tensordict
    kind = value.__class__
    if (kind is list or kind is tuple) and any(isinstance(v, _Slots) for v in value):
        return kind(_unwrap(v) for v in value)
    return value


def _unwrap_args(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    args = tuple(_unwrap(a) for a in args)
    if kwargs:
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    return args, kwargs


def _td_method(obj: Any, name: str) -> Callable:
    try:
        return getattr(obj._tensordict, name)
    except AttributeError:
        msg = (
            f"{type(obj).__name__}.{name}() runs TensorDict.{name}(), which the installed "
            f"td-core ({type(obj._tensordict).__name__}) does not provide."
        )
        raise AttributeError(msg) from None


def forward(name: str, *, unwrap: bool = False, doc: str | None = None) -> Callable:
    """A method that runs ``TensorDict.<name>`` on the instance's TensorDict and wraps
    the result (see ``_wrap_out``). With ``unwrap=True`` tensorclass arguments are
    replaced by their TensorDicts first."""
    if unwrap:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = _unwrap_args(args, kwargs)
            return _wrap_out(self, _td_method(self, name)(*args, **kwargs))

    else:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _wrap_out(self, _td_method(self, name)(*args, **kwargs))

    method.__name__ = name
    method.__qualname__ = f"TensorClass.{name}"
    method.__doc__ = doc or (
        f"Runs :meth:`TensorDict.{name}` on every field; a TensorDict result with the same "
        "fields comes back as an instance of this class (``self`` for in-place methods)."
    )
    return method


def binary_dunder(name: str) -> Callable:
    """An operator (``__add__``, ``__lt__``, ...) forwarded to the TensorDict; returns
    ``NotImplemented`` when the TensorDict does not define it."""

    def method(self: Any, other: Any) -> Any:
        fn = getattr(self._tensordict, name, None)
        if fn is None:
            return NotImplemented
        out = fn(_unwrap(other))
        if out is NotImplemented:
            return out
        return _wrap_out(self, out)

    method.__name__ = name
    method.__qualname__ = f"TensorClass.{name}"
    return method


def unary_dunder(name: str) -> Callable:
    def method(self: Any) -> Any:
        fn = getattr(self._tensordict, name, None)
        if fn is None:
            msg = f"bad operand type for {name}: {type(self).__name__} (TensorDict.{name} is not available)"
            raise TypeError(msg)
        return _wrap_out(self, fn())

    method.__name__ = name
    method.__qualname__ = f"TensorClass.{name}"
    return method


def _forward_property(name: str, prop: property) -> property:
    def fget(self: Any) -> Any:
        return _wrap_out(self, getattr(self._tensordict, name))

    fset = None
    if prop.fset is not None:

        def fset(self: Any, value: Any) -> None:
            setattr(self._tensordict, name, _unwrap(value))
            _resync(self)

    return property(fget, fset, doc=prop.__doc__)


def _forward_classmethod(name: str) -> classmethod:
    def method(cls: Any, *args: Any, **kwargs: Any) -> Any:
        from tensordict._td import TensorDict

        args, kwargs = _unwrap_args(args, kwargs)
        out = getattr(TensorDict, name)(*args, **kwargs)
        if isinstance(out, TensorDictBase) and cls._tc_field_set.issuperset(out._keys_raw()):
            return cls.from_tensordict(out)
        return out

    method.__name__ = name
    method.__qualname__ = f"TensorClass.{name}"
    method.__doc__ = f"Runs ``TensorDict.{name}`` and wraps a result made of this class's fields."
    return classmethod(method)


def install_td_forwarders(target: type) -> list[str]:
    """Adds to ``target`` a forwarding attribute for every public TensorDictBase
    attribute it does not define yet (methods, class methods, properties). This
    replaces a ``__getattr__``, which would slow every attribute read down."""
    import inspect

    added = []
    for name in dir(TensorDictBase):
        if name.startswith("_") or hasattr(target, name):
            continue
        attr = inspect.getattr_static(TensorDictBase, name)
        if isinstance(attr, classmethod):
            setattr(target, name, _forward_classmethod(name))
        elif isinstance(attr, staticmethod):
            setattr(target, name, attr)
        elif isinstance(attr, property):
            setattr(target, name, _forward_property(name, attr))
        elif callable(attr):
            setattr(target, name, forward(name, unwrap=True))
        else:
            continue
        added.append(name)
    return added
