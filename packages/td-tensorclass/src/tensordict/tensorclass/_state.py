"""Tensorclass ``state_dict``/``load_state_dict``, autograd helpers, ``replace`` and
``is_non_tensor``.

State-dict layout (the one PyTorch users know from ``nn.Module``): a flat
``OrderedDict`` of the tensor leaves keyed ``"a.b"``, whose ``_metadata`` attribute
maps each instance's prefix (``""`` for the root, ``"y"`` for a nested instance under
field ``y``) to ``{"_type": <class qualname>, "_non_tensor": {field: value}}``. With
``flatten=False`` the tensors are nested ``dict`` s instead (``{"x": ..., "y": {...}}``)
with the same ``_metadata``.
``load_state_dict`` also reads the layout older tensorclass versions wrote
(``{"_tensordict": {...}, "_non_tensordict": {...}}``).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import torch

from tensordict.ext import NonTensorData, NonTensorStack, TensorDictBase
from tensordict.tensorclass._storage import _resync, _Slots, _store_field
from tensordict.tensorclass._wrap import VIEW_SOURCE

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

__all__: list[str] = []

_NT_KEY = "_non_tensor"
_LEGACY_TD = "_tensordict"
_LEGACY_NT = "_non_tensordict"
_LEGACY_META = ("__batch_size", "__device")


def _type_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _tensor_items(obj: Any) -> list:
    """``(field, value)`` for the tensor-like fields of a tensorclass instance."""
    return [(k, v) for k, v in obj._tensordict._items_raw() if not isinstance(v, (NonTensorData, NonTensorStack))]


def _flat_state(obj: Any, prefix: str, out: dict, meta: dict, keep_vars: bool) -> None:
    meta[prefix[:-1] if prefix else ""] = {"_type": _type_name(obj), _NT_KEY: dict(obj._non_tensordict)}
    for key, value in _tensor_items(obj):
        if isinstance(value, _Slots):
            _flat_state(value, f"{prefix}{key}.", out, meta, keep_vars)
        elif isinstance(value, TensorDictBase):
            for sub_key, leaf in value.items(include_nested=True, leaves_only=True):
                path = sub_key if isinstance(sub_key, str) else ".".join(sub_key)
                if isinstance(leaf, torch.Tensor):
                    out[f"{prefix}{key}.{path}"] = leaf if keep_vars else leaf.detach()
        elif isinstance(value, torch.Tensor):
            out[f"{prefix}{key}"] = value if keep_vars else value.detach()


def _nested_state(obj: Any, keep_vars: bool) -> dict:
    out: dict = collections.OrderedDict()
    for key, value in _tensor_items(obj):
        if isinstance(value, _Slots):
            out[key] = _nested_state(value, keep_vars)
        elif isinstance(value, TensorDictBase):
            out[key] = value.state_dict(keep_vars=keep_vars)
        elif isinstance(value, torch.Tensor):
            out[key] = value if keep_vars else value.detach()
    return out


def _unexpected(key: str) -> KeyError:
    return KeyError(f"Key '{key}' wasn't expected in the state-dict.")


def _load_nested(obj: Any, sd: dict, strict: bool, path: str) -> None:
    """Writes a nested state dict into ``obj`` (validated level by level)."""
    cls = type(obj)
    for key, value in sd.items():
        if key == _NT_KEY:
            for name, item in value.items():
                if name not in cls._tc_field_set:
                    raise _unexpected(f"{path}{name}")
                _store_field(obj, name, item)
            continue
        if key in _LEGACY_META:
            continue
        if key not in cls._tc_field_set:
            if strict:
                raise _unexpected(f"{path}{key}")
            continue
        current = obj._tensordict._get_raw(key, None)
        if isinstance(current, _Slots):
            if not isinstance(value, dict):
                msg = f"state-dict entry '{path}{key}' must be a dict for the nested {type(current).__name__}."
                raise RuntimeError(msg)
            _load_nested(current, value, strict, f"{path}{key}.")
        elif isinstance(current, TensorDictBase):
            current.load_state_dict(value, strict=strict)
        elif isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor):
            if current.shape != value.shape:
                msg = (
                    f"state-dict entry '{path}{key}' has shape {tuple(value.shape)}, the field has "
                    f"{tuple(current.shape)}."
                )
                raise RuntimeError(msg)
            current.copy_(value)
        else:
            _store_field(obj, key, value)
    _resync(obj)


def _unflatten(sd: dict, meta: dict | None) -> dict:
    """A flat ``{"a.b": tensor}`` state dict (plus its ``_metadata``) as nested dicts."""
    nested: dict = {}
    for key, value in sd.items():
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise _unexpected(key)
        node[parts[-1]] = value
    for prefix, info in (meta or {}).items():
        if not isinstance(info, dict) or _NT_KEY not in info:
            continue
        node = nested
        if prefix:
            for part in prefix.split("."):
                node = node.setdefault(part, {})
        node[_NT_KEY] = dict(info[_NT_KEY])
    return nested


def _with_non_tensor(nested: dict, meta: dict | None) -> dict:
    """A nested state dict with each level's non-tensor fields (from ``_metadata``) added."""
    for prefix, info in (meta or {}).items():
        if not isinstance(info, dict) or _NT_KEY not in info:
            continue
        node = nested
        for part in prefix.split(".") if prefix else ():
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[_NT_KEY] = dict(info[_NT_KEY])
    return nested


if TYPE_CHECKING:  # pragma: no cover - the instance layout the mixin reads (type checkers only)
    _MixinBase = _Slots
else:
    _MixinBase = object


class _StateMixin(_MixinBase):
    """``state_dict``/``load_state_dict``, autograd helpers and ``replace``."""

    __slots__ = ()

    def state_dict(
        self, destination: Any = None, prefix: str = "", keep_vars: bool = False, flatten: bool = True
    ) -> dict:
        """The fields as a state dict (see the module docstring for the layout).

        Args:
            destination (dict, optional): a dict to fill (flat layout only).
            prefix (str): prepended to every flat key. Defaults to ``""``.
            keep_vars (bool): keep the tensors attached to autograd. Defaults to ``False``.
            flatten (bool): flat ``"a.b"`` keys (default) or nested dicts.

        Returns:
            an ``OrderedDict`` of tensors; non-tensor fields are in ``_metadata``
            (flat) or under ``"_non_tensor"`` (nested).

        Examples:
            >>> import torch
            >>> from tensordict import tensorclass
            >>> @tensorclass
            ... class P:
            ...     x: torch.Tensor
            ...     tag: str
            >>> sd = P(x=torch.zeros(2), tag="a", batch_size=[2]).state_dict()
            >>> list(sd), sd._metadata[""]["_non_tensor"]
            (['x'], {'tag': 'a'})
        """
        meta: dict = collections.OrderedDict()
        if not flatten:
            nested = _nested_state(self, keep_vars)
            _flat_state(self, "", collections.OrderedDict(), meta, keep_vars)
            nested._metadata = meta  # type: ignore[attr-defined]
            return nested
        out: dict = collections.OrderedDict() if destination is None else destination
        body: dict = collections.OrderedDict()
        _flat_state(self, "", body, meta, keep_vars)
        for key, value in body.items():
            out[prefix + key] = value
        out._metadata = meta  # type: ignore[attr-defined]
        return out

    def load_state_dict(
        self, state_dict: dict, strict: bool = True, assign: bool = False, from_flatten: bool = False
    ) -> Self:
        """Loads a :meth:`state_dict` (flat, nested, or the legacy
        ``{"_tensordict": ..., "_non_tensordict": ...}`` layout) in place; returns ``self``.

        Raises:
            KeyError: ``strict`` and the state dict has a key that is not a field
                ("Key 'a' wasn't expected in the state-dict").
            RuntimeError: a tensor's shape differs from the field's.
        """
        del assign, from_flatten
        if _LEGACY_TD in state_dict and set(state_dict) <= {_LEGACY_TD, _LEGACY_NT}:
            nested = dict(state_dict[_LEGACY_TD])
            nt = state_dict.get(_LEGACY_NT) or {}
            if nt:
                nested[_NT_KEY] = dict(nt)
        elif any(isinstance(v, dict) and k != _NT_KEY for k, v in state_dict.items()):
            nested = _with_non_tensor(dict(state_dict), getattr(state_dict, "_metadata", None))
        else:
            nested = _unflatten(state_dict, getattr(state_dict, "_metadata", None))
        _load_nested(self, nested, strict, "")
        return self

    # ------------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        """``True`` if any tensor field requires grad."""
        return any(
            isinstance(v, torch.Tensor) and v.requires_grad
            for v in self._tensordict.values(include_nested=True, leaves_only=True)
        )

    def backward(
        self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False, inputs: Any = None
    ) -> None:
        """Back-propagates from every tensor field (as ``torch.autograd.backward`` on the
        list of leaves: scalar leaves get an implicit gradient of one, so the result
        is that of ``sum(leaves).backward()``).

        Args:
            gradient (tensorclass or TensorDict, optional): the gradient of each leaf
                (same keys); required for non-scalar leaves.
            retain_graph, create_graph, inputs: as for ``torch.autograd.backward``.

        Raises:
            RuntimeError: no field requires grad, or a non-scalar leaf has no gradient.
        """
        keys, leaves = [], []
        for key, value in self._tensordict.items(include_nested=True, leaves_only=True):
            if isinstance(value, torch.Tensor) and value.requires_grad:
                keys.append(key)
                leaves.append(value)
        if not leaves:
            msg = f"{type(self).__name__}.backward(): no tensor field requires grad."
            raise RuntimeError(msg)
        grads = None
        if gradient is not None:
            source = gradient._tensordict if isinstance(gradient, _Slots) else gradient
            grads = [source.get(k) for k in keys]
        torch.autograd.backward(leaves, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    # ------------------------------------------------------------------ fields
    def is_non_tensor(self, key: Any) -> bool:
        """``True`` if field (or nested key) ``key`` holds a non-tensor value."""
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        if isinstance(key, str):
            if key in self._non_tensordict:
                return True
            value = self._tensordict._get_raw(key, None)
            return isinstance(value, (NonTensorData, NonTensorStack))
        head = self._tensordict._get_raw(key[0], None)
        if head is None:
            raise KeyError(f"key {key!r} not found in {type(self).__name__}.")
        if hasattr(head, "is_non_tensor"):
            return head.is_non_tensor(key[1:])
        return isinstance(head.get(key[1:]), (NonTensorData, NonTensorStack))

    def replace(self, mapping: Any = None, **kwargs: Any) -> Self:
        """A shallow copy with some fields replaced (as :func:`dataclasses.replace`):
        ``obj.replace(other)`` takes every field ``other`` (an instance, a TensorDict or
        a dict) has, ``obj.replace(x=...)`` one field. ``obj`` is not modified.

        Raises:
            KeyError: a key is not a field of the class.
        """
        out = self.copy()
        values: dict = {}
        if mapping is not None:
            if isinstance(mapping, _Slots):
                values.update({k: getattr(mapping, k) for k in type(mapping)._tc_fields})
            else:
                values.update(dict(mapping.items()))
        values.update(kwargs)
        cls = type(self)
        for key, value in values.items():
            if key not in cls._tc_field_set:
                msg = f"{cls.__name__}.replace: {key!r} is not a field (fields: {list(cls._tc_fields)})."
                raise KeyError(msg)
            _store_field(out, key, value)
        return out

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> Self:
        self._tensordict.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        td = self._tensordict
        td.__exit__(exc_type, exc, tb)
        _resync(self)
        source = self.__dict__.get(VIEW_SOURCE)
        if source is not None and getattr(td, "_shape_source", None) is None:
            # the shape op's result was written back into source's TensorDict
            del self.__dict__[VIEW_SOURCE]
            _resync(source)
