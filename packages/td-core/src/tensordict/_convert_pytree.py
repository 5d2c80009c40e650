"""``from_pytree`` / ``to_pytree``: a bijective map between pytrees (lists, tuples,
named tuples, dicts, nested to any depth) and TensorDicts.

Layout of a converted node (a nested TensorDict):

- ``"_pytree_type"``: the node's class (``list``, ``tuple``, a named tuple class,
  ``dict``, ``OrderedDict``, ``defaultdict``, ...), as non-tensor data;
- list / tuple elements under ``"0"``, ``"1"``, ...; named tuple fields under their names;
- dict entries under their key when it is a plain ``str``; when some key is not
  (an int, a tuple, an object, or a str starting with ``"_pytree"``), the ordered keys
  are kept in ``"_pytree_keys"`` and such a key's value goes under ``"_pytree_<i>"``
  (``i`` its position);
- a ``defaultdict`` also keeps its ``default_factory`` in ``"_pytree_factory"``.

Leaves: tensors and tensor collections are kept; Python numbers and NumPy arrays
become tensors (they come back as tensors); ``str`` and ``None`` become non-tensor
data. Any other leaf raises ``_UnsupportedLeafError`` (a ``TypeError`` and a
``NotImplementedError``).

This pytree *conversion* is distinct from the pytree *registration* of TensorDicts
in ``_pytree.py`` (which makes ``tree_map``/``vmap`` see through TensorDicts).
"""

from __future__ import annotations

import collections
import numbers
from typing import Any

import torch

from tensordict import _classes
from tensordict._convert_build import _build, _is_collection, _is_namedtuple, _is_numpy, _Opts
from tensordict._keys import _MISSING
from tensordict._nontensor import NonTensorData

__all__ = ["from_pytree_impl", "to_pytree_impl"]

TYPE_KEY = "_pytree_type"
KEYS_KEY = "_pytree_keys"
FACTORY_KEY = "_pytree_factory"
_PREFIX = "_pytree"


class _UnsupportedLeafError(TypeError, NotImplementedError):
    """A pytree leaf that a TensorDict cannot store (both a TypeError and a NotImplementedError)."""


def _path_str(path: tuple) -> str:
    return "".join(f"[{p!r}]" for p in path) or "<root>"


def _leaf(value: Any, path: tuple) -> Any:
    if isinstance(value, torch.Tensor) or _is_collection(value):
        return value
    if isinstance(value, (bool, numbers.Number)) or _is_numpy(value):
        return value
    if value is None or isinstance(value, str):
        return NonTensorData(value)
    msg = (
        f"from_pytree: unsupported leaf of type {type(value).__module__}.{type(value).__qualname__} at "
        f"{_path_str(path)}. Supported nodes: list, tuple, named tuple, dict (and their subclasses); "
        "supported leaves: tensors, TensorDicts, Python numbers, NumPy arrays, str and None. "
        "Convert the leaf first (e.g. to a tensor)."
    )
    raise _UnsupportedLeafError(msg)


def _is_node(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict)) and not _is_collection(value)


def _node(tree: Any, opts: _Opts, path: tuple) -> Any:
    items: list[tuple[str, Any]] = [(TYPE_KEY, NonTensorData(type(tree)))]
    if isinstance(tree, dict):
        keys = list(tree.keys())
        plain = all(k.__class__ is str and not k.startswith(_PREFIX) for k in keys)
        if not plain:
            items.append((KEYS_KEY, NonTensorData(tuple(keys))))
        if isinstance(tree, collections.defaultdict):
            items.append((FACTORY_KEY, NonTensorData(tree.default_factory)))
        for i, (key, value) in enumerate(tree.items()):
            name = key if key.__class__ is str and not key.startswith(_PREFIX) else f"{_PREFIX}_{i}"
            items.append((name, _convert(value, opts, (*path, key))))
    elif _is_namedtuple(tree):
        for field, value in zip(type(tree)._fields, tree):
            items.append((field, _convert(value, opts, (*path, field))))
    else:
        for i, value in enumerate(tree):
            items.append((str(i), _convert(value, opts, (*path, i))))
    return _build(items, opts)


def _convert(value: Any, opts: _Opts, path: tuple) -> Any:
    if _is_node(value):
        return _node(value, opts, path)
    return _leaf(value, path)


def from_pytree_impl(pytree: Any, opts: _Opts) -> Any:
    """``TensorDict.from_pytree`` (see there)."""
    if not _is_node(pytree):
        if isinstance(pytree, torch.Tensor) or _is_collection(pytree):
            return pytree
        _leaf(pytree, ())
        msg = (
            f"from_pytree expects a list, tuple, named tuple or dict at the top, got {type(pytree).__name__}. "
            "Wrap a single leaf in a list or a dict."
        )
        raise TypeError(msg)
    return _node(pytree, opts, ())


# ---------------------------------------------------------------------- way back
def _back(td: Any, value: Any) -> Any:
    if isinstance(value, _classes.TensorDictBase):
        return to_pytree_impl(value)
    if isinstance(value, torch.Tensor):
        return value
    return td._unwrap_leaf(value)


def _meta(td: Any, key: str) -> Any:
    value = td._get_raw(key, _MISSING)
    if value is _MISSING:
        return _MISSING
    return td._unwrap_leaf(value)


def to_pytree_impl(td: Any) -> Any:
    """``TensorDictBase.to_pytree`` (see there)."""

    cls = _meta(td, TYPE_KEY)
    if cls is _MISSING:
        return td
    if issubclass(cls, dict):
        keys = _meta(td, KEYS_KEY)
        if keys is _MISSING:
            pairs = [(k, _back(td, v)) for k, v in td._items_raw() if not k.startswith(_PREFIX)]
        else:
            pairs = []
            for i, key in enumerate(keys):
                name = (
                    key
                    if key.__class__ is str and not key.startswith(_PREFIX)
                    else f"{_PREFIX}_{i}"
                )
                pairs.append((key, _back(td, td._get_raw(name))))
        if issubclass(cls, collections.defaultdict):
            factory = _meta(td, FACTORY_KEY)
            return cls(None if factory is _MISSING else factory, pairs)
        return cls(pairs)
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return cls(*(_back(td, td._get_raw(field)) for field in cls._fields))
    n = sum(1 for k in td._keys_raw() if not k.startswith(_PREFIX))
    values = [_back(td, td._get_raw(str(i))) for i in range(n)]
    return cls(values)
