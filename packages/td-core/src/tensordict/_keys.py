"""Nested keys: normalisation (``unravel_key``) and the keys/values/items views.

A ``NestedKey`` is a ``str`` or a (possibly nested) tuple of ``str``. Every public
entry point accepts either; internally a nested key is a flat tuple of at least two
strings, and a one-element tuple collapses to its string.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

import torch

from tensordict import _classes

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

if TYPE_CHECKING:
    NestedKey = Union[str, tuple["NestedKey", ...]]
else:

    class _NestedKeyMeta(type):
        def __instancecheck__(cls, obj: Any) -> bool:
            if isinstance(obj, str):
                return True
            return isinstance(obj, tuple) and len(obj) > 0 and all(isinstance(k, NestedKey) for k in obj)

    class NestedKey(metaclass=_NestedKeyMeta):
        """A key of a TensorDict: a ``str`` or a (possibly nested) non-empty tuple of ``str``.

        For annotations (type checkers read it as ``Union[str, tuple[NestedKey, ...]]``)
        and for ``isinstance(key, NestedKey)``, as downstream code (TorchRL) writes it.

        Examples:
            >>> isinstance(("a", ("b", "c")), NestedKey), isinstance(("a", 1), NestedKey)
            (True, False)
        """


__all__ = ["NestedKey", "unravel_key", "unravel_key_list", "unravel_keys"]


def _flatten_into(key: tuple, out: list) -> None:
    for sub in key:
        cls = sub.__class__
        if cls is str:
            out.append(sub)
        elif cls is tuple:
            _flatten_into(sub, out)
        else:
            msg = (
                f"Nested key {key!r} holds {sub!r} of type {type(sub).__name__}; "
                "a key must be a str or a (nested) tuple of str."
            )
            raise TypeError(msg)


def unravel_key(key: NestedKey) -> NestedKey:
    """Flattens a nested key into a ``str`` or a flat tuple of ``str``.

    Args:
        key (NestedKey): a ``str`` or a nested tuple of ``str``.

    Returns:
        ``key`` itself for a ``str``; the flat tuple otherwise, or its only element
        when it has one.

    Raises:
        TypeError: if ``key`` (or any element of it) is not a ``str`` or tuple.
        ValueError: if ``key`` is an empty tuple.

    Examples:
        >>> unravel_key(("a", ("b", ("c",))))
        ('a', 'b', 'c')
        >>> unravel_key(("a",))
        'a'
    """
    cls = key.__class__
    if cls is str:
        return key
    if cls is tuple:
        out: list[str] = []
        _flatten_into(key, out)  # type: ignore[arg-type]
        if not out:
            msg = f"Got an empty nested key {key!r}: a key needs at least one str."
            raise ValueError(msg)
        if len(out) == 1:
            return out[0]
        return tuple(out)
    msg = f"Key {key!r} of type {type(key).__name__} is not a str or a tuple of str."
    raise TypeError(msg)


def _flat_or_none(key: tuple, out: list) -> bool:
    for sub in key:
        cls = sub.__class__
        if cls is str:
            out.append(sub)
        elif cls is not tuple or not sub or not _flat_or_none(sub, out):
            return False
    return True


def public_unravel_key(key: NestedKey) -> NestedKey | tuple[()]:
    """Unravels a nested key into a ``str`` or a flat tuple of ``str`` (``tensordict.unravel_key``).

    Nested tuples are flattened and a tuple holding one str gives that str, so equal
    keys compare equal. A tuple that is not a key (it holds an int, a slice, an empty
    tuple, or is empty itself) unravels to ``()``, which is how downstream code such as
    TorchRL's ``Composite.__getitem__`` tells an index from a key. The internal
    helpers use :func:`unravel_key`, which raises on such tuples instead.

    Args:
        key (NestedKey): the key to unravel.

    Returns:
        ``key`` itself for a ``str``; the flat tuple, or its only element when it has one;
        ``()`` for a tuple that is not a nested key.

    Raises:
        RuntimeError: if ``key`` is neither a ``str`` nor a ``tuple``.

    Examples:
        >>> from tensordict import unravel_key
        >>> unravel_key(("a", ("b", ("c",))))
        ('a', 'b', 'c')
        >>> unravel_key(("a",))
        'a'
        >>> unravel_key((0, slice(3, 4)))
        ()
    """
    cls = key.__class__
    if cls is str:
        return key
    if cls is tuple:
        out: list[str] = []
        if not _flat_or_none(key, out) or not out:  # type: ignore[arg-type]
            return ()
        return out[0] if len(out) == 1 else tuple(out)
    msg = (
        f"key should be a Sequence<NestedKey>: got {key!r} of type {type(key).__name__}, "
        "expected a str or a (nested) tuple of str."
    )
    raise RuntimeError(msg)


def public_unravel_key_list(keys: Sequence[NestedKey]) -> list[NestedKey]:
    """Unravels every key of a list or tuple, as :func:`tensordict.unravel_key` does.

    Args:
        keys (list or tuple of NestedKey): the keys to unravel.

    Returns:
        a list of unravelled keys.

    Raises:
        TypeError: ``keys`` is not a list or a tuple (a str is refused: TorchRL's
            ``LSTMModule(in_keys="abc")`` relies on it), as tensordict 0.15.3.
        RuntimeError: an entry is not a nested key.

    Examples:
        >>> from tensordict import unravel_key_list
        >>> unravel_key_list(["a", ("b",), ("c", ("d",))])
        ['a', 'b', ('c', 'd')]
    """
    if not isinstance(keys, (list, tuple)):
        msg = (
            "unravel_key_list(): incompatible function arguments. Expected a list or a tuple of keys, "
            f"got {type(keys)}."
        )
        raise TypeError(msg)
    out = []
    for key in keys:
        unravelled = public_unravel_key(key)
        if unravelled == ():
            msg = f"key should be a Sequence<NestedKey>: {key!r} is not a str or a (nested) tuple of str."
            raise RuntimeError(msg)
        out.append(unravelled)
    return out


def unravel_key_list(keys: Sequence[NestedKey]) -> list[NestedKey]:
    """Unravels every key of a list (see :func:`unravel_key`).

    Examples:
        >>> unravel_key_list(["a", ("b",), ("c", ("d",))])
        ['a', 'b', ('c', 'd')]
    """
    return [unravel_key(k) for k in keys]


def unravel_keys(*keys: NestedKey) -> tuple[NestedKey, ...]:
    """Unravels several keys at once; returns a tuple of unravelled keys."""
    return tuple(unravel_key(k) for k in keys)


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    """Unravelled key as a tuple (a str becomes a 1-tuple)."""
    key = unravel_key(key)
    return (key,) if key.__class__ is str else key  # type: ignore[return-value]


_Tensor = torch.Tensor


def _is_nt(value: Any) -> bool:
    return isinstance(value, (_classes.NonTensorData, _classes.NonTensorStack))


def _default_is_leaf(cls: type) -> bool:
    """Tensors (and other objects) are leaves; TensorDicts and non-tensor data are not
    (``is_leaf_nontensor`` counts non-tensor data as leaves)."""
    return not issubclass(cls, (_classes.TensorDictBase, _classes.NonTensorData, _classes.NonTensorStack))


_TENSOR_ONLY = frozenset((_Tensor,))


class _Never:
    """A class no value has: what a class check compares with to never match."""


def _all_tensors(td: Any) -> bool:
    """Whether ``td`` is a dense TensorDict holding plain tensors only (checked at C speed)."""
    return td.__class__ is _classes.TensorDict and _TENSOR_ONLY.issuperset(map(type, td._tensordict.values()))


def _extend_tensors(td: Any, prefix: tuple, out: list, keys_only: bool = False) -> None:
    """Appends ``(key, tensor)`` (or the key alone) for every entry of ``td`` (all plain
    tensors) under ``prefix``, in C-speed passes (``zip(keys)`` gives the 1-tuples that
    ``prefix.__add__`` extends)."""
    store = td._tensordict
    if prefix:
        keys = map(prefix.__add__, zip(store))
        out.extend(keys if keys_only else zip(keys, store.values()))
    else:
        out.extend(store if keys_only else store.items())


class _KeysView:
    """Live view over a TensorDict's keys (see :meth:`TensorDictBase.keys`).

    Iterating yields ``str`` for top-level keys and flat tuples for nested ones.
    ``in`` accepts any nested key form.
    """

    __slots__ = ("_td", "include_nested", "leaves_only", "is_leaf")

    def __init__(
        self,
        td: TensorDictBase,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> None:
        self._td = td
        self.include_nested = include_nested
        self.leaves_only = leaves_only
        self.is_leaf = is_leaf

    def _walk(self, td: TensorDictBase, prefix: tuple) -> Iterator[tuple[NestedKey, Any]]:
        out: list = []
        self._collect(td, prefix, out)
        return iter(out)

    def _collect(self, td: TensorDictBase, prefix: tuple, out: list, keys_only: bool = False) -> None:
        is_leaf = self.is_leaf
        leaves_only = self.leaves_only
        nested = self.include_nested
        append = out.append
        tdb = _classes.TensorDictBase
        # nodes of many plain tensors are taken in C-speed passes (checked inline: small
        # nodes, such as the links of a deep chain, must not pay for the check)
        td_cls = _classes.TensorDict if is_leaf is None else None
        only_tensors = _TENSOR_ONLY.issuperset
        # depth-first, parents before children, with an explicit stack: no recursion limit
        # on the nesting depth
        if td.__class__ is td_cls and len(td._tensordict) > 8 and _all_tensors(td):
            _extend_tensors(td, prefix, out, keys_only)
            return
        # a plain tensor is a leaf under the default ``is_leaf``: one class check, no more
        tensor_cls = _Tensor if is_leaf is None else _Never
        # keys (not items) list a nested TensorDict's key after its own keys, as tensordict
        # 0.15 does: the node's key waits in its stack frame until the frame is done
        post = keys_only and nested
        stack: list = [(prefix, iter(td._items_raw()), None)]
        while stack:
            pre, items, pending = stack[-1]
            for key, value in items:
                full = pre + (key,) if pre else key
                cls = value.__class__
                if cls is tensor_cls:
                    append(full if keys_only else (full, value))
                    continue
                if cls is td_cls:  # a dense TensorDict (a node under the default is_leaf)
                    if not nested:
                        if not leaves_only:
                            append(full if keys_only else (full, value))
                        continue
                    if not leaves_only and not post:
                        append(full if keys_only else (full, value))
                    node = full if post and not leaves_only else None
                    sub = full if pre else (key,)
                    store = value._tensordict
                    if len(store) > 8 and only_tensors(map(type, store.values())):
                        _extend_tensors(value, sub, out, keys_only)
                        if node is not None:
                            append(node)
                        continue
                    stack.append((sub, iter(store.items()), node))
                    break
                is_coll = isinstance(value, tdb)
                if is_leaf is None:  # default: not TensorDicts, not non-tensor data
                    leaf = not is_coll and (value.__class__ is _Tensor or not _is_nt(value))
                else:
                    leaf = is_leaf(type(value))
                if not (nested and is_coll):
                    if not leaves_only or leaf:
                        append(full if keys_only else (full, value))
                    continue
                listed = not leaves_only or leaf
                if listed and not post:
                    append(full if keys_only else (full, value))
                node = full if post and listed else None
                # the key tuple is built once per node (keys at depth d cost O(d) each)
                sub = full if pre else (key,)
                if keys_only:
                    inner = value._tensordict if getattr(value, "_is_tensorclass", False) else value
                    if inner.__class__ is _classes.LazyStackedTensorDict:
                        # its keys, without stacking a leaf (they may be heterogeneous)
                        for k in inner.keys(True, leaves_only, is_leaf=is_leaf):
                            append(sub + k if k.__class__ is tuple else (*sub, k))
                        if node is not None:
                            append(node)
                        continue
                stack.append((sub, iter(value._items_raw()), node))
                break
            else:
                stack.pop()
                if pending is not None:
                    append(pending)

    def _pairs(self) -> Iterator[tuple[NestedKey, Any]]:
        if not self.include_nested and not self.leaves_only:
            return iter(self._td._items_raw())
        return self._walk(self._td, ())

    def __iter__(self) -> Iterator[NestedKey]:
        if not self.include_nested and not self.leaves_only:
            return iter(self._td._keys_raw())
        out: list = []
        self._collect(self._td, (), out, keys_only=True)
        return iter(out)

    def __len__(self) -> int:
        if not self.include_nested and not self.leaves_only:
            return len(self._td._keys_raw())
        return self._count(self._td)

    def _count(self, td: TensorDictBase) -> int:
        leaves_only = self.leaves_only
        nested = self.include_nested
        n = 0
        todo = [td]  # an explicit stack: no recursion limit on the nesting depth
        td_cls = _classes.TensorDict if self.is_leaf is None else None
        while todo:
            node = todo.pop()
            if node.__class__ is td_cls:  # a dense TensorDict: its store directly
                store = node._tensordict
                # every entry counts once, but what is not a plain tensor is looked at
                n += len(store)
                for value in store.values():
                    if value.__class__ is _Tensor:
                        continue
                    if value.__class__ is td_cls:  # dense: no tensorclass / lazy-stack lookups
                        if leaves_only:
                            n -= 1
                        if nested:
                            todo.append(value)
                        continue
                    n += self._count_one(value, todo) - 1
                continue
            for _, value in node._items_raw():
                n += self._count_one(value, todo)
        return n

    def _count_one(self, value: Any, todo: list) -> int:
        """How many keys ``value`` itself gives (1 or 0), plus all of a lazy stack's nested
        keys under ``include_nested``; a nested TensorDict to walk goes onto ``todo``."""
        is_leaf = self.is_leaf
        is_coll = isinstance(value, _classes.TensorDictBase)
        if is_leaf is None:  # default: not TensorDicts, not non-tensor data
            leaf = not is_coll and (value.__class__ is _Tensor or not _is_nt(value))
        else:
            leaf = is_leaf(type(value))
        n = 1 if not self.leaves_only or leaf else 0
        if self.include_nested and is_coll:
            inner = value._tensordict if getattr(value, "_is_tensorclass", False) else value
            if inner.__class__ is _classes.LazyStackedTensorDict:
                # counted without stacking a leaf (they may be heterogeneous)
                n += len(inner.keys(True, self.leaves_only, is_leaf=is_leaf))
            else:
                todo.append(value)
        return n

    def __contains__(self, key: object) -> bool:
        # as tensordict 0.15: whether the key exists, whatever ``leaves_only`` says; a nested
        # key is never in a view without ``include_nested``
        if key.__class__ is str:
            return key in self._td._keys_raw()
        if key.__class__ is tuple:
            try:
                key = _as_tuple(key)
            except (TypeError, ValueError):
                msg = f"TensorDict keys are always strings (or tuples of strings); got {key!r}."
                raise TypeError(msg) from None
        else:
            msg = f"TensorDict keys are always strings (or tuples of strings); got a {type(key).__name__}."
            raise TypeError(msg)
        if len(key) > 1 and not self.include_nested:
            return False
        td = self._td
        for sub in key[:-1]:
            td = td._get_raw(sub, None)
            if not isinstance(td, _classes.TensorDictBase):
                return False
        return td._get_raw(key[-1], _MISSING) is not _MISSING

    def __eq__(self, other: object) -> bool:
        try:
            return set(self) == set(other)  # type: ignore[call-overload]
        except TypeError:
            return NotImplemented

    def __repr__(self) -> str:
        return f"_KeysView({list(self)!r}, include_nested={self.include_nested}, leaves_only={self.leaves_only})"


class _ValuesView(_KeysView):
    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return (v for _, v in self._pairs())

    def __contains__(self, value: object) -> bool:
        return any(v is value for v in self)

    def __repr__(self) -> str:
        return f"_ValuesView(keys={list(_KeysView.__iter__(self))!r})"


class _ItemsView(_KeysView):
    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[NestedKey, Any]]:
        return iter(self._pairs())

    def __contains__(self, item: object) -> bool:
        return any(k == item[0] and v is item[1] for k, v in self)  # type: ignore[index]

    def __repr__(self) -> str:
        return f"_ItemsView(keys={list(_KeysView.__iter__(self))!r})"


class _TopKeysView(_KeysView):
    """``keys()`` of a dense TensorDict without options: its store's keys, live (the
    view object and its iteration skip the option checks)."""

    __slots__ = ()
    include_nested = False
    leaves_only = False
    is_leaf = None

    def __init__(self, td: TensorDictBase) -> None:
        self._td = td

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self._td._tensordict)

    def __len__(self) -> int:
        return len(self._td._tensordict)


class _Missing(enum.Enum):
    """The "no value given" sentinel (``_MISSING``, alias ``NO_DEFAULT``).

    An enum member rather than an instance of a plain class: ``torch.compile``
    (Dynamo) wraps an enum member as a constant wherever it meets one, including a
    default argument of a method of a TensorDict built inside the compiled function,
    where the value has no source to guard on; a plain object there breaks the graph.
    """

    MISSING = "missing"
    #: the same "not given" for a second parameter of one signature (``apply(names=)``):
    #: two keyword defaults holding one object make Dynamo guard that they stay one
    #: object, a check in Python on every call of the compiled function
    MISSING_NAMES = "missing names"

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False


_MISSING: Any = _Missing.MISSING
NO_DEFAULT: Any = _MISSING
_NO_NAMES: Any = _Missing.MISSING_NAMES
