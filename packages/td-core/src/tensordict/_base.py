"""``TensorDictBase``: the dictionary API of every container (keys, get/set, update,
locking, iteration), assembled from one mixin per concern.

Each concern lives in its own module and is mixed in here: ``_shape_context.py``
(shape ops as context managers), ``_select.py`` (select/exclude/flatten),
``_compare.py``, ``_shape.py`` (indexing and batch-dim shape ops), ``_device.py``,
``_apply.py``, ``_ops.py`` (leaf-wise math, with the generated ``_ops_gen_*.py``, and
``_reductions.py``), ``_convert.py``, ``_module_params.py``, ``_consolidate.py``,
``_seams.py`` (methods served by sibling distributions), ``_lazy_funcs.py``,
``_grad.py``, ``_cumulative.py``, ``_factories.py``, ``_entries.py``,
``_shape_aliases.py``, ``_compat_methods.py``, ``_nontensor_methods.py`` and ``_update.py``
(``update``, ``update_``, ``update_at_``). A concrete
container implements the storage primitives ``_keys_raw``, ``_items_raw``, ``_get_raw``,
``_set_raw``, ``_del_raw``, ``_index``, ``_batch_transform`` and ``_new_like``. The class
is published to the mixins through ``_classes.py``; what the mixins read from it is
declared for type checkers in ``_host.py``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from tensordict import _classes
from tensordict._apply import ApplyMixin
from tensordict._classes import is_tensor_collection
from tensordict._compare import CompareMixin
from tensordict._compat_methods import UpstreamMethodsMixin
from tensordict._consolidate import ConsolidateMixin
from tensordict._convert import ConvertMixin
from tensordict._cumulative import CumulativeMixin
from tensordict._device import DeviceMixin
from tensordict._entries import EntriesMixin
from tensordict._errors import batch_mismatch_error, locked_error, missing_key_error
from tensordict._factories import FactoryMixin
from tensordict._grad import GradMixin
from tensordict._keys import (
    _MISSING,
    NO_DEFAULT,
    NestedKey,
    _as_tuple,
    _ItemsView,
    _KeysView,
    _TopKeysView,
    _ValuesView,
    unravel_key,
)
from tensordict._lazy_funcs import LazyStackMethodsMixin
from tensordict._lock_graph import check_unlock, register_locked_root, unregister_locked_root
from tensordict._module_params import ModuleParamsMixin
from tensordict._names import refine, renamed, sync_child_names
from tensordict._nested_shape import leaf_shape
from tensordict._nontensor import (
    LinkedList,
    NonTensorData,
    NonTensorStack,
    _same,
    nested_list_items,
)
from tensordict._nontensor_methods import NonTensorMixin
from tensordict._ops import MathMixin
from tensordict._options import list_to_stack
from tensordict._pack import PackMixin
from tensordict._repr import td_repr
from tensordict._seams_generated import GeneratedSiblingMixin as SiblingMixin
from tensordict._select import SelectMixin
from tensordict._shape import ShapeMixin
from tensordict._shape_aliases import ShapeAliasMixin
from tensordict._shape_context import ShapeContextMixin
from tensordict._tabular_methods import TabularMixin
from tensordict._torch_fn import dispatch
from tensordict._unbatched import UnbatchedTensor
from tensordict._update import _ABSENT, UpdateMixin

__all__ = ["TensorDictBase", "get_defaults_to_none", "is_tensor_collection", "set_get_defaults_to_none"]

_GET_DEFAULTS_TO_NONE = [True]
_CPU = torch.device("cpu")  # where data_ptr() TensorDicts live
#: levels of plain TensorDicts that ``_map_tree`` rebuilds by recursion before it switches to
#: an explicit stack (recursion is the cheapest per node; the stack has no depth limit)
_MAP_RECURSION_DEPTH = 200
_ONLY_TENSORS = frozenset({torch.Tensor})
#: what ``get`` passes as the default to tell a missing key from a stored value
_NOT_FOUND: Any = object()


def _map_tree(node: Any, fn: Callable, keep_non_tensor: bool, new_kwargs: dict, depth: int) -> Any:
    """``node`` rebuilt with ``fn`` applied to every tensor leaf (``_map_leaves``)."""
    td_cls = _classes.TensorDict
    if node.__class__ is td_cls:
        store = node._tensordict
        values = store.values()
        if _ONLY_TENSORS >= set(map(type, values)):  # plain tensors only: the loop runs in C
            return node._new_like(dict(zip(store, map(fn, values))), **new_kwargs)
    source: dict[str, Any] = {}
    for key, value in node._items_raw():
        if isinstance(value, torch.Tensor):
            source[key] = fn(value)
        elif value.__class__ is td_cls:
            if depth < _MAP_RECURSION_DEPTH:
                source[key] = _map_tree(value, fn, keep_non_tensor, new_kwargs, depth + 1)
            else:
                source[key] = _map_tree_deep(value, fn, keep_non_tensor, new_kwargs)
        elif isinstance(value, TensorDictBase) or getattr(value, "_is_tensorclass", False):
            source[key] = value._map_leaves(fn, keep_non_tensor, **new_kwargs)
        elif keep_non_tensor:
            source[key] = value
        else:
            source[key] = value.clone()
    return node._new_like(source, **new_kwargs)


def _map_tree_deep(root: Any, fn: Callable, keep_non_tensor: bool, new_kwargs: dict) -> Any:
    """``_map_tree`` with an explicit stack of the TensorDicts being rebuilt, not one Python
    frame per level: any nesting depth works."""
    td_cls = _classes.TensorDict
    frames: list = [(root, iter(root._items_raw()), {}, None)]
    while True:
        node, items, source, node_key = frames[-1]
        for key, value in items:
            if isinstance(value, torch.Tensor):
                source[key] = fn(value)
            elif value.__class__ is td_cls:
                frames.append((value, iter(value._items_raw()), {}, key))
                break
            elif isinstance(value, TensorDictBase) or getattr(value, "_is_tensorclass", False):
                source[key] = value._map_leaves(fn, keep_non_tensor, **new_kwargs)
            elif keep_non_tensor:
                source[key] = value
            else:
                source[key] = value.clone()
        else:
            frames.pop()
            out = node._new_like(source, **new_kwargs)
            if not frames:
                return out
            frames[-1][2][node_key] = out


_tuple_item = tuple.__getitem__


def _write_at_dense(td: Any, index: Any, value: Any) -> bool:
    """``td[index] = value`` for two dense TensorDicts of plain tensors, ``index`` a slice or
    an int (its normal form is ``(index,)``; the tensors take it bare, which costs them
    less), every key of ``value`` already in ``td``: ``_write_at`` without its plan (the same
    checks, all made before the first write). ``False``, with nothing written, when anything
    else is met: the general path then handles it."""
    store = td._tensordict
    # feature shapes compared as plain tuples: slicing a torch.Size builds another Size
    features, vfeatures = slice(len(td._batch_size), None), slice(len(value._batch_size), None)
    todo = []
    for key, v in value._tensordict.items():
        dest = store.get(key)
        if (
            dest.__class__ is not torch.Tensor
            or v.__class__ is not torch.Tensor
            or _tuple_item(dest.shape, features) != _tuple_item(v.shape, vfeatures)
        ):
            return False  # missing, not a plain tensor, or a feature shape to broadcast
        todo.append((key, dest, v))
    for key, dest, v in todo:
        try:
            dest[index] = v
        except RuntimeError as err:
            td._write_at_failed((index,), value, key, err)
    return True


def get_defaults_to_none(set_to_none: bool | None = None) -> bool:
    """Returns (and optionally sets) whether ``td.get(missing_key)`` returns ``None``.

    By default a missing key makes ``get`` return ``None`` (``True`` is returned), as in
    tensordict 0.15; ``td[missing_key]`` always raises ``KeyError``. Passing
    ``set_to_none`` is the same as :func:`set_get_defaults_to_none`.

    Examples:
        >>> get_defaults_to_none()
        True
    """
    if set_to_none is not None:
        _GET_DEFAULTS_TO_NONE[0] = bool(set_to_none)
    return _GET_DEFAULTS_TO_NONE[0]


def set_get_defaults_to_none(set_to_none: bool | None = True) -> None:
    """Chooses what ``td.get(missing_key)`` does when no default is given.

    Args:
        set_to_none (bool or None): ``True`` returns ``None``; ``False`` (or ``None``)
            raises ``KeyError``. Defaults to ``True``.

    Examples:
        >>> set_get_defaults_to_none(False)
        >>> get_defaults_to_none()
        False
        >>> set_get_defaults_to_none(True)
        >>> get_defaults_to_none()
        True
    """
    _GET_DEFAULTS_TO_NONE[0] = bool(set_to_none)


def _adopt_batch_size(key: Any, value: Any, bs: torch.Size) -> Any:
    """A shallow copy of the TensorDict ``value`` with batch size ``bs`` (as tensordict
    does when a TensorDict whose batch size is shorter than the parent's is stored);
    raises the batch-mismatch error when its leaves do not start with ``bs``."""
    if value.batch_dims < len(bs) and tuple(bs[: value.batch_dims]) == tuple(value.batch_size):
        try:
            adopted = value.clone(recurse=False)
            adopted.batch_size = bs
        except (RuntimeError, ValueError, TypeError, NotImplementedError):
            pass
        else:
            return adopted
    raise batch_mismatch_error(key, value.batch_size, bs)


def _canonical(t: torch.Tensor) -> torch.Tensor:
    """``t`` if its strides are the row-major ones of its shape, else a compact copy."""
    expected = 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride())):
        if stride != expected:
            return t.clone(memory_format=torch.contiguous_format)
        expected *= size
    return t


def _is_numpy(value: Any) -> bool:
    mod = type(value).__module__
    return mod == "numpy" or mod.startswith("numpy.")


def _plan_lazy_write_at(dest: Any, index: tuple, value: Any, plan: list) -> bool:
    """Plans ``dest[index] = value`` for a lazy stack ``dest`` whose stack dim ``index``
    does not reach: each stacked TensorDict gets its part of ``value`` (so stacks of
    heterogeneous shapes are written without stacking them). ``False`` if it does not apply."""
    consumed = 0
    for idx in index:
        if idx is None:
            continue
        consumed += idx.ndim if isinstance(idx, torch.Tensor) and idx.dtype is torch.bool else 1
    sd = dest.stack_dim
    tds = dest.tensordicts
    if consumed > sd or not tds:
        return False
    vsd = value.batch_dims - (dest.batch_dims - sd)
    if vsd < 0 or value.batch_size[vsd] != len(tds):
        return False
    parts = value.unbind(vsd)
    for td, part in zip(tds, parts):
        td._plan_write_at(index, part, plan)
    return True


class TensorDictBase(
    UpdateMixin,
    ShapeContextMixin,
    SelectMixin,
    CompareMixin,
    ShapeMixin,
    DeviceMixin,
    ApplyMixin,
    MathMixin,
    ConvertMixin,
    TabularMixin,
    ModuleParamsMixin,
    ConsolidateMixin,
    SiblingMixin,
    LazyStackMethodsMixin,
    GradMixin,
    CumulativeMixin,
    FactoryMixin,
    EntriesMixin,
    ShapeAliasMixin,
    UpstreamMethodsMixin,
    NonTensorMixin,
    PackMixin,
):
    """Abstract parent of every TensorDict: a dict of tensors with a shared ``batch_size``.

    Every value's shape starts with ``batch_size``. Keys are ``str`` or nested
    tuples of ``str`` (see :func:`tensordict.unravel_key`).
    """

    _is_locked: bool = False
    _lock_parents: list = []  # weak refs to locked ancestors (``_lock_graph.py``)
    _is_tensorclass = False
    _lock_stack: list | None = None

    def __class_getitem__(cls, item: Any) -> Any:
        """``TensorDict[str, torch.Tensor]`` in annotations (a ``types.GenericAlias``)."""
        import types

        return types.GenericAlias(cls, item)

    # ------------------------------------------------------------------ primitives
    def _keys_raw(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _items_raw(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:  # pragma: no cover
        raise NotImplementedError

    def _del_raw(self, key: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def _unwrap_leaf(value: Any) -> Any:
        """What ``td[key]`` returns for a stored value: the object of non-tensor data."""
        cls = value.__class__
        if cls is NonTensorData:
            return value.data
        if cls is NonTensorStack:
            return LinkedList._of_stack(value)
        if cls is _classes.TensorDict or cls is torch.Tensor:
            return value
        if isinstance(value, NonTensorData):  # MetaData, NonTensorData[T]
            return value.data
        if isinstance(value, NonTensorStack):
            return LinkedList._of_stack(value)
        return value

    # ------------------------------------------------------------------ shape info
    @property
    def batch_dims(self) -> int:
        """Number of batch dimensions (``len(batch_size)``)."""
        return len(self.batch_size)

    @property
    def ndim(self) -> int:
        return len(self.batch_size)

    def ndimension(self) -> int:
        return len(self.batch_size)

    def dim(self) -> int:
        return len(self.batch_size)

    @property
    def shape(self) -> torch.Size:
        """Alias of ``batch_size``."""
        return self.batch_size

    def size(self, dim: int | None = None) -> torch.Size | int:
        """``batch_size``, or its ``dim``-th entry."""
        if dim is None:
            return self.batch_size
        return self.batch_size[dim]

    def numel(self) -> int:
        """Number of elements in the batch (product of ``batch_size``)."""
        return self.batch_size.numel()

    def __len__(self) -> int:
        bs = self.batch_size
        return bs[0] if bs else 0

    def __iter__(self) -> Iterator[TensorDictBase]:
        if not self.batch_size:
            msg = (
                "iteration over a 0-d TensorDict (batch_size=[]) is not possible. If it is what a "
                "TensorDictModule called with keyword tensors returned (`actor(observation=x)`, as "
                "TorchRL's actors unpack it), note that keyword calls return the TensorDict here: "
                "use `tensordict.nn.set_keyword_calls_return_tensors(True)` or set "
                "TD_NN_KEYWORD_CALLS_RETURN_TENSORS=1 to get the out_keys' tensors as tensordict 0.15 does."
            )
            raise TypeError(msg)
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        msg = (
            "Converting a tensordict to boolean value is not permitted: it is ambiguous "
            "(as for a Tensor with more than one value). Use `td.is_empty()`, `td.all()` "
            "or `td.any()` instead."
        )
        raise RuntimeError(msg)

    def _check_batch(self, key: Any, value: Any) -> None:
        bs = self.batch_size
        if bs:
            try:
                shape = value.shape
            except RuntimeError:  # a strided nested tensor has no sizes
                shape = leaf_shape(value)
            if shape[: len(bs)] != bs:
                raise batch_mismatch_error(key, shape, bs)

    # ------------------------------------------------------------------ keys
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> Any:
        """A live view of the keys.

        Args:
            include_nested (bool): also yield nested keys (as tuples). Defaults to ``False``.
            leaves_only (bool): only keys of leaves (tensors, non-tensor data). Defaults to ``False``.
            is_leaf (callable, optional): ``is_leaf(type) -> bool`` overriding what a leaf is.
            sort (bool): return a sorted list instead of a view.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
            >>> list(td.keys(include_nested=True, leaves_only=True))
            ['a', ('b', 'c')]
            >>> ("b", "c") in td.keys(True)
            True
        """
        if not include_nested and not leaves_only and is_leaf is None and not sort and self.__class__ is _classes.TensorDict:
            return _TopKeysView(self)
        view = _KeysView(self, include_nested, leaves_only, is_leaf)
        if sort:
            return sorted(view, key=lambda k: k if isinstance(k, str) else ".".join(k))
        return view

    def values(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None, *, sort: bool = False
    ) -> Any:
        """A live view of the values (non-tensor leaves come back as their objects);
        ``sort=True`` gives a list in the order of ``keys(..., sort=True)``.

        Args:
            include_nested (bool, optional): also yield the values of nested TensorDicts.
            leaves_only (bool, optional): skip the nested TensorDicts themselves.
            is_leaf (callable, optional): which value types count as leaves (a type -> bool
                function, as in tensordict).
            sort (bool, optional): return a list in sorted key order (keyword only).
        """
        if sort:
            return [v for _, v in self.items(include_nested, leaves_only, is_leaf, sort=True)]
        return _ValuesView(self, include_nested, leaves_only, is_leaf)

    def items(
        self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None, *, sort: bool = False
    ) -> Any:
        """A live view of ``(key, value)`` pairs; nested keys are flat tuples.
        ``sort=True`` gives a list sorted by key (nested keys joined with ``"."``).

        Args:
            include_nested (bool, optional): also yield the entries of nested TensorDicts
                (their keys as tuples).
            leaves_only (bool, optional): skip the nested TensorDicts themselves.
            is_leaf (callable, optional): which value types count as leaves (a type -> bool
                function, as in tensordict).
            sort (bool, optional): return a list sorted by key (keyword only).
        """
        if not include_nested and not leaves_only and is_leaf is None and not sort and self.__class__ is _classes.TensorDict:
            return self._tensordict.items()  # the store's own live view, as tensordict 0.15 returns
        view = _ItemsView(self, include_nested, leaves_only, is_leaf)
        if sort:
            return sorted(view, key=lambda kv: kv[0] if isinstance(kv[0], str) else ".".join(kv[0]))
        return view

    @property
    def sorted_keys(self) -> list[str]:
        """Top-level keys in sorted order."""
        return sorted(self._keys_raw())

    def __contains__(self, key: object) -> bool:
        if key.__class__ is not str and not isinstance(key, (str, tuple)):
            msg = f"`key in td` expects a NestedKey (a str or a tuple of str), got {type(key).__name__}."
            raise RuntimeError(msg)
        return key in _KeysView(self, True)

    # ------------------------------------------------------------------ get
    def _get_tuple_raw(self, key: tuple, default: Any = _MISSING) -> Any:
        td = self
        for sub in key[:-1]:
            parent = td
            td = td._get_raw(sub, _MISSING)
            if td is _MISSING or not isinstance(td, TensorDictBase):
                if isinstance(getattr(td, "_tensordict", None), TensorDictBase):
                    td = td._tensordict  # a tensorclass: its fields are nested keys
                    continue
                if default is not _MISSING:
                    return default
                if td is not _MISSING and not is_tensor_collection(td):
                    msg = (
                        f"Expected a TensorDictBase instance under {sub!r} to read the nested key "
                        f"{key!r}, but {sub!r} holds a {type(td).__name__} (in a TensorDict with keys "
                        f"{sorted(map(str, parent.keys()))})."
                    )
                    raise ValueError(msg)
                raise missing_key_error(key, self.keys(True))
        out = td._get_raw(key[-1], _MISSING)
        if out is _MISSING:
            if default is not _MISSING:
                return default
            raise missing_key_error(key, self.keys(True))
        return out

    def _get_any_raw(self, key: NestedKey, default: Any = _MISSING) -> Any:
        if key.__class__ is str:
            out = self._get_raw(key, _MISSING)
            if out is _MISSING:
                if default is not _MISSING:
                    return default
                raise missing_key_error(key, self._keys_raw())
            return out
        key = unravel_key(key)
        if key.__class__ is str:
            return self._get_any_raw(key, default)
        return self._get_tuple_raw(key, default)  # type: ignore[arg-type]

    def get(self, key: NestedKey, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """Returns the value stored under ``key``.

        Args:
            key (NestedKey): a str or a nested tuple key.
            default (Any, optional): returned when ``key`` is missing.

        Returns:
            the tensor (shape ``batch_size + feature_shape``), nested TensorDict, or
            the non-tensor object.

        Raises:
            KeyError: ``key`` is missing, no default is given and
                :func:`set_get_defaults_to_none` was set to ``False`` (by default a
                missing key gives ``None``).
            TypeError: ``key`` is not a str or tuple of str.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": {"b": torch.zeros(2)}}, [2])
            >>> td.get(("a", "b")).shape
            torch.Size([2])
            >>> td.get("missing", None) is None
            True
        """
        if default is NO_DEFAULT and _GET_DEFAULTS_TO_NONE[0]:
            if key.__class__ is tuple and len(key) > 1:
                # a missing key gives None, a key that runs through a leaf raises the
                # ValueError of td[key], as in tensordict 0.15
                out = self._get_any_raw(key, _NOT_FOUND)
                if out is not _NOT_FOUND:
                    return out
                node: Any = self
                for sub in _as_tuple(key)[:-1]:
                    node = node._get_raw(sub, _NOT_FOUND)
                    if node is _NOT_FOUND:
                        return None
                    if not isinstance(node, TensorDictBase):
                        if not is_tensor_collection(node):  # a tensor: td[key]'s ValueError
                            self._get_any_raw(key)
                        return None
                return None
            default = None
        return self._get_any_raw(key, default)

    def get_at(self, key: NestedKey, index: Any, default: Any = NO_DEFAULT) -> Any:
        """``td.get(key)[index]``; returns ``default`` when ``key`` is missing.

        Args:
            key (NestedKey): the key.
            index (int, slice, Tensor or tuple): a batch index.
            default (object, optional): returned when ``key`` is missing. Defaults
                to ``None``, as ``get`` (tensordict 0.15 returns None too).

        Returns:
            the indexed leaf.
        """
        value = self._get_any_raw(key, _ABSENT)
        if value is _ABSENT:
            return None if default is NO_DEFAULT else default
        return self._unwrap_leaf(value[index])

    def __getitem__(self, index: Any) -> Any:
        cls = index.__class__
        if cls is str or (cls is tuple and index and all(i.__class__ is str or i.__class__ is tuple for i in index)):
            return self._unwrap_leaf(self._get_any_raw(index))
        return self._index(index)

    # ------------------------------------------------------------------ set
    def _convert_value(self, key: Any, value: Any) -> Any:
        """Checks and converts a value for storage; raises before anything is written."""
        if isinstance(value, torch.Tensor):
            if value.__class__ is UnbatchedTensor:  # kept whole: no batch check
                device = self.device
                if device is not None and value.device != device:
                    value = value.to(device)
                return value._rebatch(self.batch_size)
            self._check_batch(key, value)
            device = self.device
            if device is not None and value.device != device:
                value = value.to(device)
            return value
        if isinstance(value, TensorDictBase):
            bs = self.batch_size
            if value.batch_size[: len(bs)] != bs:
                value = _adopt_batch_size(key, value, bs)
            device = self.device
            if device is not None and value.device != device:
                value = value.to(device)
            if self._has_names() or value._has_names():
                sync_child_names(self, value)
            return value
        if isinstance(value, (NonTensorData, NonTensorStack)):
            bs = self.batch_size
            if value.batch_size != bs:
                if isinstance(value, NonTensorData):
                    return value._rebuild(bs)
                if value.batch_size[: len(bs)] != bs:  # a stack may have more dims
                    raise batch_mismatch_error(key, value.batch_size, bs)
            return value
        if isinstance(value, Mapping) and not getattr(type(value), "_is_tensorclass", False):
            return _classes.TensorDict(
                value, batch_size=self.batch_size, device=self.device, names=self.names if self._has_names() else None
            )
        if is_tensor_collection(value):
            bs = self.batch_size
            if value.batch_size[: len(bs)] != bs:
                return _adopt_batch_size(key, value, bs)  # a shorter batch size is completed, as for TensorDicts
            return value
        if isinstance(value, (bool, numbers.Number)):
            tensor = torch.as_tensor(value, device=self.device)
            if self.batch_size:
                tensor = tensor.expand(self.batch_size).clone()
            return tensor
        if _is_numpy(value) and hasattr(value, "dtype") and value.dtype.kind not in "OUSV":
            return self._convert_value(key, torch.as_tensor(value))
        if isinstance(value, list):
            return self._convert_list(key, value)
        return NonTensorData(value, self.batch_size, self.device)

    def _convert_list(self, key: Any, value: list) -> Any:
        """Converts a list as ``list_to_stack()`` says.

        ``False``: ``torch.as_tensor(value)``, or one non-tensor object when torch cannot
        build a tensor (strings, mixed objects). Unset or ``True`` (tensordict 0.15.3's
        default): a list of tensors is stacked, a (nested) list of numbers is a tensor,
        an empty list is an empty tensor, other lists become a ``NonTensorStack`` when
        they span a one-dim batch size.
        """
        bs = self.batch_size
        if not list_to_stack():
            try:
                tensor = torch.as_tensor(value)
            except (TypeError, ValueError, RuntimeError):
                return NonTensorData(value, bs, self.device)
            return self._convert_value(key, tensor)
        if not value:
            return self._convert_value(key, torch.as_tensor(value))
        if all(isinstance(v, torch.Tensor) for v in value):
            try:
                return self._convert_value(key, torch.stack(value))
            except RuntimeError:  # tensors of different shapes: kept as objects
                pass
        elif not any(isinstance(v, (str, bytes)) for v in value):
            try:  # (nested) lists of numbers stack into one tensor
                tensor = torch.as_tensor(value)
            except (TypeError, ValueError, RuntimeError):
                tensor = None  # type: ignore[assignment]
            if tensor is not None:
                return self._convert_value(key, tensor)
        if len(bs) == 1 and len(value) == bs[0]:
            return NonTensorStack._from_flat(list(value), bs, self.device)
        if len(bs) > 1:  # nested lists spanning every batch dim: a stack of that batch size
            items = nested_list_items(value, bs)
            if items is not None:
                return NonTensorStack._from_flat(items, bs, self.device)
        return NonTensorData(value, bs, self.device)

    def _create_nested(self, key: str) -> TensorDictBase:
        out = self._get_raw(key, _MISSING)
        if out is _MISSING:
            if self.is_locked:
                raise locked_error("create a nested TensorDict", key)

            out = _classes.TensorDict._new_unsafe({}, self.batch_size, self.device)
            self._set_raw(key, out)
        elif not isinstance(out, TensorDictBase):
            msg = f"Cannot write a nested key under {key!r}: it holds a {type(out).__name__}, not a TensorDict."
            raise KeyError(msg)
        return out

    def _set_tuple(self, key: tuple, value: Any, inplace: bool, validated: bool = False) -> None:
        td = self
        depth = len(key) - 1
        for i, sub in enumerate(key[:-1]):
            nxt = td._get_raw(sub, _MISSING)
            if nxt is _MISSING:
                depth = i
                break
            if not isinstance(nxt, TensorDictBase):
                msg = f"Cannot write nested key {key!r}: {sub!r} holds a {type(nxt).__name__}, not a TensorDict."
                raise KeyError(msg)
            td = nxt
        if not validated:
            value = td._convert_value(key, value)
        for sub in key[depth:-1]:
            td = td._create_nested(sub)
        td._set_str(key[-1], value, inplace, validated=True)

    def _set_str(
        self, key: str, value: Any, inplace: bool, validated: bool = False, non_blocking: bool = False
    ) -> None:
        if not validated:
            value = self._convert_value(key, value)
        if inplace:
            existing = self._get_raw(key, _MISSING)
            if existing is not _MISSING:
                self._write_inplace(key, existing, value)
                return
        if self.is_locked:
            if self._get_raw(key, _MISSING) is value:
                return  # the same object (e.g. ``td[k] += 1`` on a tensor): nothing is replaced
            raise locked_error("set a new value", key)
        if isinstance(value, TensorDictBase):
            _refuse_cycle(self, key, value)
        self._set_raw(key, value)

    def _write_inplace(self, key: Any, existing: Any, value: Any) -> None:
        if isinstance(existing, torch.Tensor):
            if isinstance(value, torch.Tensor) and existing.shape != value.shape:
                try:
                    ok = torch.broadcast_shapes(value.shape, existing.shape) == existing.shape
                except RuntimeError:
                    ok = False
                if not ok:  # tensordict 0.15: ValueError "Failed to update ..."
                    msg = (
                        f"Failed to update {key!r} in place: expected shape "
                        f"{tuple(existing.shape)} (or one that broadcasts to it), got {tuple(value.shape)}."
                    )
                    raise ValueError(msg)
            existing.copy_(value)
        elif isinstance(existing, TensorDictBase):
            existing.update_(value)
        elif isinstance(existing, NonTensorStack):
            existing[...] = value
        elif isinstance(existing, NonTensorData):
            if existing.__class__._writes_in_place and not isinstance(value, NonTensorStack):
                existing.data = value.data if isinstance(value, NonTensorData) else value  # a shared slot
                return
            if not isinstance(value, (NonTensorData, NonTensorStack)):
                value = NonTensorData(value, existing.batch_size, existing.device)
            parent = self
            if key.__class__ is tuple and len(key) > 1:
                parent = self._get_any_raw(key[:-1])
                key = key[-1]
            elif key.__class__ is tuple:
                key = key[0]
            parent._set_raw(key, value)
        else:
            self._set_raw(key, value)

    def set(self, key: NestedKey, item: Any, inplace: bool = False, *, non_blocking: bool = False, **kwargs: Any) -> TensorDictBase:
        """Writes ``item`` under ``key``.

        Args:
            key (NestedKey): where to write; missing nested levels are created.
            item (Tensor, TensorDict, dict or any object): a tensor's shape must start
                with ``batch_size``; dicts become TensorDicts; other objects become
                non-tensor data.
            inplace (bool): copy into the existing tensor when ``key`` exists (a new key
                is created otherwise). Defaults to ``False``.

        Returns:
            ``self``.

        Raises:
            RuntimeError: the leading dims do not match ``batch_size``, or the
                TensorDict is locked and a new value would be stored.
            TypeError: the key is not a str or tuple of str.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({}, [3])
            >>> _ = td.set(("a", "b"), torch.zeros(3, 2))
            >>> td["a", "b"].shape
            torch.Size([3, 2])
        """
        if key.__class__ is str:
            self._set_str(key, item, inplace)
            return self
        key = unravel_key(key)
        if key.__class__ is str:
            self._set_str(key, item, inplace)
        else:
            self._set_tuple(key, item, inplace)  # type: ignore[arg-type]
        return self

    def set_(self, key: NestedKey, item: Any, *, non_blocking: bool = False) -> TensorDictBase:
        """Copies ``item`` into the existing value under ``key``.

        Args:
            key (NestedKey): an existing key.
            item (Tensor, Number or TensorDictBase): the value to copy; broadcast to
                the existing leaf's shape.

        Keyword Args:
            non_blocking (bool, optional): non-blocking copy. Defaults to ``False``.

        Returns:
            ``self``.

        Raises:
            KeyError: ``key`` is missing.
            RuntimeError: shapes do not broadcast.
        """
        existing = self._get_any_raw(key)
        if isinstance(item, Mapping) and not isinstance(item, TensorDictBase):
            item = self._convert_value(key, item) if not isinstance(existing, TensorDictBase) else item
        elif _is_numpy(item) and isinstance(existing, torch.Tensor):
            item = torch.as_tensor(item, device=existing.device)
        self._write_inplace(key, existing, item)
        return self

    def set_at_(self, key: NestedKey, value: Any, index: Any, *, non_blocking: bool = False) -> TensorDictBase:
        """Writes ``value`` into ``td.get(key)[index]`` in place.

        Args:
            key (NestedKey): an existing key.
            value (Tensor or Number): the values to write.
            index (int, slice, Tensor or tuple): a batch index.

        Keyword Args:
            non_blocking (bool, optional): non-blocking copy. Defaults to ``False``.

        Returns:
            ``self``.

        Raises:
            KeyError: ``key`` is missing.
        """
        existing = self._get_any_raw(key)
        if _is_numpy(value) and isinstance(existing, torch.Tensor):
            value = torch.as_tensor(value, device=existing.device)
        if isinstance(existing, NonTensorData):  # one object for the batch: becomes a stack
            if isinstance(value, NonTensorData) and value.data is existing.data:
                return self
            stack = existing.maybe_to_stack()
            stack[index] = value
            key = unravel_key(key)
            parent = self if key.__class__ is str else self._get_any_raw(key[:-1]) if len(key) > 1 else self
            parent._set_raw(key if key.__class__ is str else key[-1], stack)  # type: ignore[arg-type]
            return self
        existing[index] = value
        return self

    def setdefault(self, key: NestedKey, default: Any, inplace: bool = False) -> Any:
        """Returns ``td[key]``, first setting it to ``default`` if missing.

        Args:
            key (NestedKey): the key.
            default (object): the value stored when ``key`` is missing (checked as
                :meth:`set` checks values).
            inplace (bool, optional): passed to :meth:`set`. Defaults to ``False``.

        Returns:
            the value under ``key``.
        """
        if key not in self.keys(include_nested=True):
            self.set(key, default, inplace=inplace)
        return self.get(key)

    def __setitem__(self, index: Any, value: Any) -> None:
        cls = index.__class__
        if cls is str:
            self._set_str(index, value, False)
            return
        if cls is tuple and index and all(i.__class__ is str or i.__class__ is tuple for i in index):
            self.set(index, value)
            return
        self._setitem_index(index, value)

    def _setitem_index(self, index: Any, value: Any) -> None:
        if (
            value.__class__ is self.__class__ is _classes.TensorDict
            and (index.__class__ is slice or index.__class__ is int)
            and self._batch_size
            and _write_at_dense(self, index, value)
        ):
            return
        if isinstance(value, (TensorDictBase, Mapping)) or is_tensor_collection(value):
            if isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
                sub_bs = self._index_batch_size(index)
                value = _classes.TensorDict(value, batch_size=sub_bs)
            self._write_at(index, value)
            return
        if isinstance(value, (torch.Tensor, numbers.Number)):
            for _key, dest in list(self._items_raw()):
                if isinstance(dest, torch.Tensor):
                    dest[index] = value  # type: ignore[assignment]
                elif isinstance(dest, TensorDictBase) or getattr(dest, "_is_tensorclass", False):
                    dest[index] = value
            return
        msg = f"Cannot write a {type(value).__name__} at index {index!r}: pass a TensorDict, a dict or a tensor."
        raise TypeError(msg)

    def _index_batch_size(self, index: Any) -> torch.Size:
        probe = torch.zeros((), dtype=torch.uint8).expand(self.batch_size)
        return probe[self._normalize_index(index)].shape

    def _plan_write_at(self, index: tuple, value: Any, plan: list) -> None:
        """Appends ``(owner, key, dest, value, value batch dims)`` for each write of
        ``self[index] = value``, depth first in key order, and checks feature shapes.
        Nested pairs are walked with an explicit stack, so any depth works."""
        lazy_cls = _classes.LazyStackedTensorDict
        stack = [(self, iter(value._items_raw()), value.batch_dims, self.batch_dims)]
        while stack:
            node, items, vbd, bd = stack[-1]
            for key, v in items:
                dest = node._get_raw(key, _MISSING)
                if dest is _MISSING:
                    plan.append((node, key, None, v, vbd))
                    continue
                if isinstance(dest, TensorDictBase) and isinstance(v, TensorDictBase):
                    if isinstance(dest, lazy_cls) and _plan_lazy_write_at(dest, index, v, plan):
                        continue
                    stack.append((dest, iter(v._items_raw()), v.batch_dims, dest.batch_dims))
                    break
                if isinstance(dest, torch.Tensor) and isinstance(v, torch.Tensor):
                    df, vf = dest.shape[bd:], v.shape[vbd:]
                    while not vbd and len(vf) > len(df) and vf[0] == 1:
                        vf = vf[1:]  # torch's ``t[i] = v`` drops a value's leading unit dims too
                    if df != vf:
                        try:
                            ok = torch.broadcast_shapes(vf, df) == df
                        except RuntimeError:
                            ok = False
                        if not ok:
                            msg = (
                                f"cannot write key {key!r} at index {index!r}: expected feature shape "
                                f"{tuple(df)}, got {tuple(vf)}."
                            )
                            raise RuntimeError(msg)
                plan.append((node, key, dest, v, vbd))
            else:
                stack.pop()

    def _write_at(self, index: Any, value: Any) -> None:
        """``td[index] = value``: validates every key first, pre-allocates missing keys."""
        index = self._normalize_index(index)
        plan: list = []
        self._plan_write_at(index, value, plan)
        for owner, key, dest, _, _ in plan:
            if dest is None and owner.is_locked:
                raise locked_error("pre-allocate new keys at an index", key)
        for owner, key, dest, v, vbd in plan:
            if dest is None:
                dest = owner._preallocate(key, v, vbd, owner.batch_size)
            if isinstance(dest, (torch.Tensor, TensorDictBase, NonTensorStack)):
                try:
                    dest[index] = v
                except RuntimeError as err:
                    self._write_at_failed(index, value, key, err)
            elif isinstance(dest, NonTensorData):
                if not (isinstance(v, NonTensorData) and _same(v.data, dest.data)):
                    stack = NonTensorStack._from_flat([dest.data] * dest.numel(), dest.batch_size, dest.device)
                    stack[index] = v
                    owner._set_raw(key, stack)
            else:
                dest[index] = v

    def _write_at_failed(self, index: tuple, value: Any, key: str, err: RuntimeError) -> None:
        """Raises for a failed ``dest[index] = v`` of ``td[index] = value``: a write whose batch
        sizes do not broadcast is reported as such (checked only on failure: the write
        itself is the check on success); other errors are raised as they are."""
        target = self._index_batch_size(index)
        try:
            fits = torch.broadcast_shapes(value.batch_size, target) == target
        except RuntimeError:
            fits = False
        if fits:
            raise err
        msg = (
            f"batch dimension mismatch: the indexed destination TensorDict batch size is "
            f"{tuple(target)} at index {index!r}, and the batch size {tuple(value.batch_size)} of the "
            f"value differs from the source batch size (key {key!r}); Cannot broadcast the tensordict to it."
        )
        raise RuntimeError(msg) from err

    def _preallocate(self, key: str, v: Any, vbd: int, bs: torch.Size) -> Any:
        dest: Any
        if isinstance(v, torch.Tensor):
            dest = torch.zeros((*bs, *v.shape[vbd:]), dtype=v.dtype, device=self.device or v.device)
        elif isinstance(v, TensorDictBase):
            dest = _classes.TensorDict._new_unsafe({}, torch.Size((*bs, *v.batch_size[vbd:])), self.device)
        elif isinstance(v, NonTensorData):
            dest = NonTensorData(v.data, bs, self.device)
        elif isinstance(v, NonTensorStack):
            dest = NonTensorStack._from_flat([None] * bs.numel(), bs, self.device)
        else:
            msg = f"Cannot pre-allocate key {key!r} for a value of type {type(v).__name__}."
            raise TypeError(msg)
        self._set_raw(key, dest)
        return dest

    # ------------------------------------------------------------------ delete / pop
    def __delitem__(self, key: NestedKey) -> None:
        self.del_(key)

    def del_(self, key: NestedKey) -> TensorDictBase:
        """Removes ``key``. Raises KeyError if missing, RuntimeError if locked."""
        key = unravel_key(key)
        if key.__class__ is tuple:
            parent = self._get_tuple_raw(key[:-1]) if len(key) > 2 else self._get_any_raw(key[0])
            if not isinstance(parent, TensorDictBase):
                raise missing_key_error(key, self.keys(True))
            parent.del_(key[-1])
            return self
        if self.is_locked:
            raise locked_error("delete a key", key)
        if self._get_raw(key, _MISSING) is _MISSING:  # type: ignore[arg-type]
            raise missing_key_error(key, self._keys_raw())
        self._del_raw(key)  # type: ignore[arg-type]
        return self

    def pop(self, key: NestedKey, default: Any = NO_DEFAULT) -> Any:
        """Removes ``key`` and returns its value (or ``default`` when missing).

        Args:
            key (NestedKey): the key to remove.
            default (object, optional): returned when ``key`` is missing.

        Returns:
            the removed value (a non-tensor leaf is returned as its object).

        Raises:
            KeyError: ``key`` is missing and no default is given.
            RuntimeError: the TensorDict is locked.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2), "b": torch.ones(2)}, [2])
            >>> td.pop("a").shape, list(td.keys())
            (torch.Size([2]), ['b'])
        """
        key = unravel_key(key)
        value = self._get_any_raw(key, _ABSENT)
        if value is _ABSENT:
            if default is not NO_DEFAULT:
                return default
            msg = (
                f"You are trying to pop key {key!r} which is not in dict without providing "
                f"default value. Present keys: {sorted(map(str, self.keys(True)))}."
            )
            raise KeyError(msg)
        self.del_(key)
        return self._unwrap_leaf(value)

    def popitem(self) -> tuple[str, Any]:
        """Removes and returns the last inserted top-level ``(key, value)`` pair."""
        keys = list(self._keys_raw())
        if not keys:
            msg = "popitem(): TensorDict is empty"
            raise KeyError(msg)
        key = keys[-1]
        return key, self.pop(key)

    def clear(self) -> TensorDictBase:
        """Removes every key. Raises RuntimeError if locked."""
        if self.is_locked:
            raise locked_error("clear")
        for key in list(self._keys_raw()):
            self._del_raw(key)
        return self

    @classmethod
    def fromkeys(cls, keys: Sequence[NestedKey], value: Any = 0) -> TensorDictBase:
        """A TensorDict (``batch_size=[]``) with every key set to ``value``.

        Args:
            keys (sequence of NestedKey): the keys (nested keys create nested TensorDicts).
            value (optional): the value of every key (a number becomes a tensor; a tensor
                is stored as it is under every key, not copied). Defaults to ``0``.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict.fromkeys(["a", "b"], 0)
            >>> td["a"]
            tensor(0)
        """

        td = _classes.TensorDict({}, [])
        for key in keys:
            td.set(key, value)  # a tensor is shared by every key, as tensordict 0.15
        return td

    def copy(self) -> TensorDictBase:
        """Shallow copy: a new TensorDict holding the same tensors (``clone(recurse=False)``)."""
        return self.clone(recurse=False)

    # ------------------------------------------------------------------ locking
    @property
    def is_locked(self) -> bool:
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def _set_lock_flag(self, value: bool) -> None:
        self._is_locked = value
        for _, v in self._items_raw():
            if isinstance(v, TensorDictBase):
                try:
                    v._set_lock_flag(value)
                except RecursionError:  # nested too deep (setting a flag twice is harmless)
                    _lock_flag_walk(v, value)

    def _push_op(self, op: tuple) -> None:
        if self._lock_stack is None:
            self._lock_stack = []
        self._lock_stack.append(op)

    def lock_(self) -> TensorDictBase:
        """Locks the TensorDict (and its nested ones): new keys, deletions and renames
        raise RuntimeError; in-place writes into existing tensors stay allowed.

        Usable as a context manager: ``with td.lock_(): ...`` restores the previous
        state on exit.
        """
        self._push_op(("lock", self._is_locked))
        self._set_lock_flag(True)
        register_locked_root(self)
        return self

    def unlock_(self) -> TensorDictBase:
        """Unlocks the TensorDict; as a context manager, re-locks on exit if it was locked.

        Raises:
            RuntimeError: a locked TensorDict that is still alive holds this one.
        """
        if self._lock_parents or isinstance(self, _classes.LazyStackedTensorDict):
            check_unlock(self)
        self._push_op(("lock", self._is_locked))
        self._set_lock_flag(False)
        unregister_locked_root(self)
        return self

    def __enter__(self) -> TensorDictBase:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self._lock_stack:
            if self._shape_source is not None and exc_type is None:
                self._exit_shape_context()  # ``with td.transpose(...) as t:`` writes back
            return
        op = self._lock_stack.pop()
        if op[0] == "lock":
            self._set_lock_flag(op[1])
            (register_locked_root if op[1] else unregister_locked_root)(self)
        elif op[0] == "callback":
            op[1]()

    # ------------------------------------------------------------------ misc
    def data_ptr(self, *, storage: bool = False) -> TensorDictBase:
        """A TensorDict of the leaves' ``data_ptr()`` (int64, batch_size ``[]``, on the CPU)."""

        source: dict[str, Any] = {}
        for key, value in self._items_raw():
            if isinstance(value, torch.Tensor):
                ptr = value.untyped_storage().data_ptr() if storage else value.data_ptr()
                source[key] = torch.tensor(ptr)
            elif isinstance(value, TensorDictBase):
                source[key] = value.data_ptr(storage=storage)
        return _classes.TensorDict._new_unsafe(source, torch.Size(()), _CPU)

    def fill_(self, key: NestedKey, value: float | bool) -> TensorDictBase:
        """Fills the leaf (or every leaf of the sub-TensorDict) under ``key`` with ``value``.

        Args:
            key (NestedKey): an existing key.
            value (float or bool): the fill value.

        Returns:
            ``self``.

        Raises:
            KeyError: ``key`` is missing.
        """
        target = self._get_any_raw(key)
        if isinstance(target, TensorDictBase):
            target.apply_leaves_(lambda t: t.fill_(value))
        else:
            target.fill_(value)
        return self

    def apply_leaves_(self, fn: Callable[[torch.Tensor], Any]) -> TensorDictBase:
        """Calls ``fn`` on every tensor leaf (for in-place tensor methods), depth first in
        key order, nested tensorclasses included.

        The leaves are listed first, without recursion (so any depth works), then ``fn``
        runs on each; a nested container with its own ``apply_leaves_`` (a lazy stack, an
        HDF5-backed TensorDict) is handed ``fn`` at its place in the order.
        """
        mine = TensorDictBase.apply_leaves_
        work: list = []  # a tensor, or a (container,) whose own apply_leaves_ takes fn
        todo = [iter(self._items_raw())]
        while todo:
            for _, value in todo[-1]:
                if isinstance(value, torch.Tensor):
                    work.append(value)
                    continue
                if getattr(value, "_is_tensorclass", False) and not isinstance(value, TensorDictBase):
                    value = value._tensordict  # a nested tensorclass: its own leaves
                if isinstance(value, TensorDictBase):
                    if type(value).apply_leaves_ is mine:
                        todo.append(iter(value._items_raw()))
                        break
                    work.append((value,))
            else:
                todo.pop()
        for item in work:
            if item.__class__ is tuple:
                item[0].apply_leaves_(fn)
            else:
                fn(item)
        return self

    def zero_(self) -> TensorDictBase:
        """Zeroes every tensor leaf in place."""
        return self.apply_leaves_(torch.Tensor.zero_)

    def requires_grad_(self, requires_grad: bool = True) -> TensorDictBase:
        """Sets ``requires_grad`` on every floating-point leaf in place."""
        return self.apply_leaves_(lambda t: t.requires_grad_(requires_grad))

    def detach_(self) -> TensorDictBase:
        """Detaches every leaf in place."""
        return self.apply_leaves_(torch.Tensor.detach_)

    @property
    def data(self) -> TensorDictBase:
        """A TensorDict of the leaves' ``.data`` (same storage, no autograd history);
        locked if ``self`` is."""
        out = self._map_leaves(lambda t: t.data, keep_non_tensor=True)
        if self.is_locked and not out.is_locked:
            out.lock_()
        return out

    def detach(self) -> TensorDictBase:
        """A TensorDict of detached leaves (same storage)."""
        return self._map_leaves(torch.Tensor.detach)

    def is_contiguous(self) -> bool:
        """Whether every tensor leaf is contiguous (``torch.Tensor.is_contiguous``), nested
        TensorDicts included; non-tensor data does not count.

        A lazy stack is never contiguous (its leaves live in separate TensorDicts): its
        ``is_contiguous()`` is ``False``, and :meth:`contiguous` makes a dense copy.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4), "b": {"c": torch.zeros(4, 3).T}}, [3])
            >>> td.is_contiguous(), td.contiguous().is_contiguous()
            (False, True)
        """
        for leaf in self.values(True, True):
            if isinstance(leaf, torch.Tensor) and not leaf.is_contiguous():
                return False
        return True

    def contiguous(self, *, canonical: bool = False, inplace: bool = False) -> TensorDictBase:
        """A TensorDict of contiguous leaves (copies only what is not contiguous).

        Keyword Args:
            canonical (bool): also copy leaves that torch calls contiguous but whose
                strides are not the row-major ones of their shape (size-1 dims).
            inplace (bool): replace the leaves of ``self`` and return it.
        """
        if canonical:
            out = self._map_leaves(_canonical)
        else:
            out = self._map_leaves(torch.Tensor.contiguous)
        if inplace:
            if out is not self:
                for key, value in out.items(include_nested=True, leaves_only=True):
                    if isinstance(value, torch.Tensor) and value is not self._get_any_raw(key):
                        self._write_inplace_or_set(key, value)
            return self
        return out

    def _write_inplace_or_set(self, key: Any, value: torch.Tensor) -> None:
        parent = self if not isinstance(key, tuple) or len(key) == 1 else self._get_any_raw(key[:-1])
        parent._set_raw(key if isinstance(key, str) else key[-1], value)

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictBase:
        """A copy. ``recurse=False`` copies the structure but shares the tensors.

        Args:
            recurse (bool, optional): copy the tensors too (``False``: share them). Defaults
                to ``True``.
            **kwargs: accepted for compatibility with tensordict (ignored).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.clone()["a"].data_ptr() != td["a"].data_ptr()
            True
        """
        if not recurse:
            return self._map_leaves(lambda t: t, keep_non_tensor=True)
        return self._map_leaves(torch.Tensor.clone)

    def _map_leaves(self, fn: Callable, keep_non_tensor: bool = False, **new_kwargs: Any) -> TensorDictBase:
        return _map_tree(self, fn, keep_non_tensor, new_kwargs, 0)

    def copy_(self, tensordict: TensorDictBase, non_blocking: bool = False) -> TensorDictBase:
        """Copies ``tensordict``'s leaves into ``self`` in place (``update_``).

        Args:
            tensordict (TensorDictBase): a TensorDict with the keys of ``self``.
            non_blocking (bool, optional): non-blocking copies. Defaults to ``False``.

        Returns:
            ``self``.
        """
        return self.update_(tensordict, non_blocking=non_blocking)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDictBase:
        """A plain ``TensorDict`` copy of any TensorDict-like (lazy stacks, files, ...)."""

        source: dict[str, Any] = {}
        for key, value in self._items_raw():
            if isinstance(value, TensorDictBase):
                source[key] = value.to_tensordict()
            elif isinstance(value, torch.Tensor):
                source[key] = value.clone()
            else:
                source[key] = value.clone()
        return _classes.TensorDict._new_unsafe(source, self.batch_size, self.device, self.names if self._has_names() else None)

    def to_dict(self, *, retain_none: bool = True, convert_tensors: bool = False) -> dict:
        """A nested ``dict`` of the leaves (tensors, or Python objects for non-tensor data).

        Args:
            retain_none (bool, optional): keep the ``None`` fields of tensorclass entries
                (keyword only). Defaults to ``True``.
            convert_tensors (bool, optional): turn tensors into Python lists (keyword only).
        """
        out: dict[str, Any] = {}
        for key, value in self._items_raw():
            if isinstance(value, TensorDictBase):
                try:
                    out[key] = value.to_dict(convert_tensors=convert_tensors)
                except RecursionError:  # nested deeper than the recursion limit allows
                    out[key] = _to_dict_walk(value, convert_tensors)
            elif isinstance(value, torch.Tensor):
                out[key] = value.tolist() if convert_tensors else value
            elif getattr(value, "_is_tensorclass", False):  # a tensorclass: its fields as a dict
                out[key] = value.to_dict(retain_none=retain_none, convert_tensors=convert_tensors)
            else:
                out[key] = self._unwrap_leaf(value)
        return out

    def _has_names(self) -> bool:
        return False

    def refine_names(self, *names: Any) -> TensorDictBase:
        """Names the unnamed batch dims in place; ``...`` stands for the dims not listed.

        Args:
            *names (str, None or ...): one entry per batch dim (``None`` keeps the
                current name), or fewer with one ``...``.

        Returns:
            ``self``.

        Raises:
            RuntimeError: a name would replace a different existing name.
            ValueError: the names are not unique, or too many are given.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(batch_size=[3, 4])
            >>> td.refine_names(..., "time").names
            [None, 'time']
        """
        self.names = refine(self.names, names)
        return self

    def rename_(self, *names: Any, **rename_map: Any) -> TensorDictBase:
        """Renames the batch dims in place: every name positionally, or ``old=new`` keywords.

        Nested TensorDicts are renamed too (their first ``batch_dims`` names follow).

        Args:
            *names (str or None): the new name of every batch dim, in order.
            **rename_map (str): ``old=new`` renames of some batch dims.

        Returns:
            ``self``.

        Raises:
            ValueError: a keyword names no batch dim, or the result repeats a name.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(batch_size=[3, 4], names=["a", "b"])
            >>> td.rename_(b="c").names
            ['a', 'c']
        """
        self.names = renamed(self.names, names, rename_map)
        return self

    def rename(self, *names: Any, **rename_map: Any) -> TensorDictBase:
        """A shallow copy (leaves shared) with renamed batch dims; see :meth:`rename_`.

        Args:
            *names (str or None): the new name of every batch dim, in order.
            **rename_map (str): ``old=new`` renames of some batch dims.

        Examples:
            >>> from tensordict import TensorDict
            >>> td = TensorDict(batch_size=[3, 4], names=["a", "b"])
            >>> td.rename("x", "y").names, td.names
            (['x', 'y'], ['a', 'b'])
        """
        new = renamed(self.names, names, rename_map)
        out = self.clone(recurse=False)
        out.names = new
        return out

    def __repr__(self) -> str:
        return td_repr(self)

    __str__ = __repr__

    def __torch_function__(self_or_cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:  # noqa: N805

        return dispatch(func, types, args, kwargs or {})

    __torch_function__ = classmethod(__torch_function__)  # type: ignore[arg-type, assignment]


_classes._bind(TensorDictBase=TensorDictBase, NonTensorData=NonTensorData, NonTensorStack=NonTensorStack)

# A TensorDict is a mapping of keys to values (tensordict 0.15's TensorDictBase is a
# MutableMapping): APIs that take "a dict-like", such as nn.Module.load_state_dict,
# accept one. Registered (not inherited) so the ABC adds no method to the class.
Mapping.register(TensorDictBase)


def _refuse_cycle(parent: Any, key: str, value: Any) -> None:
    """Refuses ``parent[key] = value`` when ``value`` is ``parent`` or holds it: a TensorDict
    that contains itself makes every recursive op (repr, clone, apply, ...) recurse forever.

    Walks only the nested containers of ``value`` (dense TensorDicts and lazy stacks), never
    its leaves.

    Raises:
        ValueError: the assignment would make a cycle.
    """
    todo = [value]
    seen: set = set()
    while todo:
        node = todo.pop()
        if node is parent:
            msg = (
                f"cannot set key {key!r}: the value is, or contains, the TensorDict it is set into; a TensorDict "
                "containing itself cannot be printed, copied or saved. Set a copy (`value.clone()`) instead."
            )
            raise ValueError(msg)
        if id(node) in seen:
            continue
        seen.add(id(node))
        store = getattr(node, "_tensordict", None)
        if store.__class__ is dict:
            todo.extend(v for v in store.values() if isinstance(v, TensorDictBase))
        subs = getattr(node, "tensordicts", None)
        if subs.__class__ is list:
            todo.extend(subs)


def _to_dict_walk(td: TensorDictBase, convert_tensors: bool) -> dict:
    """``td.to_dict(convert_tensors=...)`` without recursion (nesting of any depth)."""
    root: dict[str, Any] = {}
    mine = TensorDictBase.to_dict
    todo: list[tuple[Any, dict]] = [(td, root)]
    while todo:
        node, out = todo.pop()
        for key, value in node._items_raw():
            if isinstance(value, TensorDictBase):
                if type(value).to_dict is mine:
                    sub: dict[str, Any] = {}
                    out[key] = sub
                    todo.append((value, sub))
                else:
                    out[key] = value.to_dict(convert_tensors=convert_tensors)
            elif isinstance(value, torch.Tensor):
                out[key] = value.tolist() if convert_tensors else value
            elif getattr(value, "_is_tensorclass", False):
                out[key] = value.to_dict(retain_none=True, convert_tensors=convert_tensors)
            else:
                out[key] = node._unwrap_leaf(value)
    return root


def _lock_flag_walk(td: TensorDictBase, value: bool) -> None:
    """``td._set_lock_flag(value)`` without recursion (nesting of any depth)."""
    mine = TensorDictBase._set_lock_flag
    todo: list[Any] = [td]
    while todo:
        node = todo.pop()
        node._is_locked = value
        for _, v in node._items_raw():
            if isinstance(v, TensorDictBase):
                if type(v)._set_lock_flag is mine:
                    todo.append(v)
                else:
                    v._set_lock_flag(value)
