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

from tensordict.ext import TensorDict, TensorDictBase
from tensordict.tensorclass._storage import _new, _resync, _Slots

__all__: list[str] = []


#: private instance attribute of a shape op's result: the instance it came from
VIEW_SOURCE = "_tc_view_source"


def _wrap_out(obj: Any, out: Any) -> Any:
    if out is obj._tensordict:
        _resync(obj)
        return obj
    if isinstance(out, TensorDictBase):
        cls = type(obj)
        if cls._tc_field_set.issuperset(out._keys_raw()):
            new = _new(cls, out, obj._non_tensordict)
            if getattr(out, "_shape_source", None) is not None:
                # a shape op td-core can undo (``with obj.view(-1) as v: ...`` writes back
                # into obj's TensorDict on exit): remember obj, to re-sync its fields then
                new.__dict__[VIEW_SOURCE] = obj
            return new
        return out
    kind = out.__class__
    if (kind is tuple or kind is list) and out and isinstance(out[0], TensorDictBase):
        return kind(_wrap_out(obj, o) for o in out)
    return out


# ---------------------------------------------------------------------- nested instances
# td-core walks nested TensorDicts itself, but not every TensorDict method knows about
# tensorclasses stored as values. Methods that compute on the leaves (apply, math,
# reductions, masked_fill, ...) therefore run on a "deep" TensorDict, in which nested
# instances are replaced by their TensorDicts, and the results are re-wrapped.
def _deepen(td: Any, prefix: tuple = ()) -> tuple[Any, list]:
    """``(deep_td, nested)``: ``td`` with every nested instance replaced by its
    TensorDict (``td`` itself when there is none), and ``(path, cls, non_tensordict)``
    for each instance replaced, deepest first."""
    if td.__class__ is not TensorDict:
        return td, []
    nested: list = []
    source = None
    for key, value in td._tensordict.items():
        if isinstance(value, _Slots):
            sub, below = _deepen(value._tensordict, (*prefix, key))
            nested.extend(below)
            nested.append(((*prefix, key), type(value), value._non_tensordict))
        elif value.__class__ is TensorDict:
            sub, below = _deepen(value, (*prefix, key))
            if not below:
                continue
            nested.extend(below)
        else:
            continue
        if source is None:
            source = dict(td._tensordict)
        source[key] = sub
    if source is None:
        return td, []
    deep = TensorDict._new_unsafe(source, td._batch_size, td._device, td._names)
    if td._is_locked:  # ops whose result follows the operand's lock (td + 1) see it
        deep._is_locked = True
    return deep, nested


def _rewrap(out: Any, nested: list) -> Any:
    """Puts the instances recorded by ``_deepen`` back into a result."""
    if isinstance(out, TensorDict):
        for path, cls, nt in nested:
            parent = out
            for key in path[:-1]:
                parent = parent._get_raw(key, None)
                if parent is None:
                    break
                if isinstance(parent, _Slots):
                    parent = parent._tensordict  # type: ignore[assignment]
            if parent is None or not isinstance(parent, TensorDictBase):
                continue
            sub = parent._get_raw(path[-1], None)
            if isinstance(sub, TensorDictBase) and cls._tc_field_set.issuperset(sub._keys_raw()):
                parent._set_raw(path[-1], _new(cls, sub, nt))
        return out
    kind = out.__class__
    if (kind is tuple or kind is list) and out and isinstance(out[0], TensorDict):
        return kind(_rewrap(o, nested) for o in out)
    return out


def _write_back(obj: Any, deep: Any) -> None:
    """After an in-place method ran on ``_deepen(obj._tensordict)``: rebinds what it
    rebound at the top level and re-syncs the nested instances."""
    td = obj._tensordict
    store = td._tensordict
    for key, value in deep._tensordict.items():
        current = store.get(key)
        if isinstance(current, _Slots):
            if value is not current._tensordict and isinstance(value, TensorDictBase):
                rebinding = _new(type(current), value, current._non_tensordict)
                store[key] = rebinding
            else:
                _resync_deep(current)
        elif current is not value:
            store[key] = value
    _resync(obj)


def _resync_deep(obj: Any) -> None:
    for value in obj._tensordict._items_raw():
        if isinstance(value[1], _Slots):
            _resync_deep(value[1])
    _resync(obj)


def _call_deep(obj: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """Runs ``TensorDict.<name>`` on ``obj``'s (deep) TensorDict and wraps the result."""
    args, kwargs = _unwrap_args(args, kwargs, deep=True)
    td = obj._tensordict
    deep, nested = _deepen(td)
    if not nested:
        return _wrap_out(obj, _td_method(obj, name)(*args, **kwargs))
    try:
        fn = getattr(deep, name)
    except AttributeError:
        _td_method(obj, name)
        raise
    out = fn(*args, **kwargs)
    if out is deep:
        _write_back(obj, deep)
        return obj
    return _wrap_out(obj, _rewrap(out, nested))


def _unwrap(value: Any, deep: bool = False) -> Any:
    """A tensorclass becomes its TensorDict (with nested instances unwrapped too when
    ``deep``); lists and tuples are mapped; the rest is kept."""
    if isinstance(value, _Slots):
        return _deepen(value._tensordict)[0] if deep else value._tensordict
    kind = value.__class__
    if (kind is list or kind is tuple) and any(isinstance(v, _Slots) for v in value):
        return kind(_unwrap(v, deep) for v in value)
    return value


def _unwrap_args(args: tuple, kwargs: dict, deep: bool = False) -> tuple[tuple, dict]:
    args = tuple(_unwrap(a, deep) for a in args)
    if kwargs:
        kwargs = {k: _unwrap(v, deep) for k, v in kwargs.items()}
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
            return _call_deep(self, name, args, kwargs)

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
        if getattr(self._tensordict, name, None) is None:
            return NotImplemented
        return _call_deep(self, name, (other,), {})

    method.__name__ = name
    method.__qualname__ = f"TensorClass.{name}"
    return method


def unary_dunder(name: str) -> Callable:
    def method(self: Any) -> Any:
        if getattr(self._tensordict, name, None) is None:
            msg = f"bad operand type for {name}: {type(self).__name__} (TensorDict.{name} is not available)"
            raise TypeError(msg)
        return _call_deep(self, name, (), {})

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
        from tensordict.ext import TensorDict

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
