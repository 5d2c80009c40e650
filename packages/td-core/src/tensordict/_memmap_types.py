"""The memmap type registry: types other than TensorDict and LazyStackedTensorDict
that a td-memmap store may hold.

It lives in td-core (published as :mod:`tensordict.ext`) so that a distribution can
register its types without importing td-memmap; td-memmap reads it when saving and
loading.

Loading never imports a module or resolves a class named in metadata: a stored
``"registered": {"name": ...}`` is looked up here and nowhere else. Tensorclasses
(td-tensorclass) register each class when it is defined; any other tensor
collection may do the same.

Protocol:

- ``save_fn(obj) -> (td, extra)``: ``td`` is a TensorDictBase holding the object's
  content (saved like any TensorDict, in the same folder), ``extra`` a
  JSON-serialisable dict of whatever else is needed to rebuild it. For in-place
  ``memmap_`` to update ``obj``, ``td`` must be the object's own backing TensorDict.
- ``load_fn(td, extra) -> obj``: rebuilds the object from the loaded ``td``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["register_memmap_type", "registered_types", "lookup_object", "lookup_name"]


class MemmapType(NamedTuple):
    name: str
    save_fn: Callable[[Any], tuple[Any, dict]]
    load_fn: Callable[[Any, dict], Any]
    cls: type | None


_BY_NAME: dict[str, MemmapType] = {}
_BY_CLS: dict[type, MemmapType] = {}
_RESERVED = {"TensorDict", "LazyStackedTensorDict"}


def register_memmap_type(
    name: str,
    save_fn: Callable[[Any], tuple[Any, dict]],
    load_fn: Callable[[Any, dict], Any],
    cls: type | None = None,
) -> None:
    """Lets ``memmap``/``load_memmap`` store and rebuild objects of another type.

    Args:
        name (str): the identifier written in ``meta.json`` (e.g. the tensorclass's
            ``"module.QualName"``). Registering a name again replaces the entry.
        save_fn (callable): ``save_fn(obj) -> (tensordict, extra_json_dict)``.
        load_fn (callable): ``load_fn(tensordict, extra_json_dict) -> obj``.
        cls (type, optional): the class whose instances (and subclasses') are saved
            with ``save_fn``. Without it, the name can only be loaded.

    Raises:
        ValueError: ``name`` is empty or reserved (``"TensorDict"``,
            ``"LazyStackedTensorDict"``).
        TypeError: ``save_fn``/``load_fn`` are not callable.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Pair:
        ...     def __init__(self, td):
        ...         self.td = td
        >>> from tensordict.ext import register_memmap_type, registered_types
        >>> register_memmap_type("doc.Pair", lambda p: (p.td, {}), lambda td, extra: Pair(td), cls=Pair)
        >>> "doc.Pair" in registered_types()
        True
    """
    if not isinstance(name, str) or not name or name in _RESERVED:
        msg = f"register_memmap_type: invalid or reserved name {name!r}."
        raise ValueError(msg)
    if not callable(save_fn) or not callable(load_fn):
        msg = "register_memmap_type: save_fn and load_fn must be callable."
        raise TypeError(msg)
    old = _BY_NAME.get(name)
    if old is not None and old.cls is not None:
        _BY_CLS.pop(old.cls, None)
    entry = MemmapType(name, save_fn, load_fn, cls)
    _BY_NAME[name] = entry
    if cls is not None:
        _BY_CLS[cls] = entry


def registered_types() -> list[str]:
    """Names of the registered types."""
    return sorted(_BY_NAME)


def lookup_object(obj: Any) -> MemmapType | None:
    """The registration that saves ``obj`` (searching its class's MRO), if any."""
    if not _BY_CLS:
        return None
    for klass in type(obj).__mro__:
        entry = _BY_CLS.get(klass)
        if entry is not None:
            return entry
    return None


def lookup_name(name: Any, where: str) -> MemmapType:
    """The registration called ``name``.

    Raises:
        RuntimeError: ``name`` is not registered (nothing is imported to find it).
    """
    entry = _BY_NAME.get(name) if isinstance(name, str) else None
    if entry is None:
        known = ", ".join(sorted(_BY_NAME)) or "none"
        msg = (
            f"{where}: the store holds an object of type {name!r}, which is not registered "
            f"(registered: {known}). Loading never imports modules named in metadata: import the "
            "module that defines the type (tensorclasses register themselves when defined) and load again."
        )
        raise RuntimeError(msg)
    return entry
