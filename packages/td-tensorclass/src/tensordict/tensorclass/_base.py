"""The instance behaviour every tensorclass shares: field access, indexing, repr,
pickling, ``get``/``set`` and the conversions to and from TensorDicts.

Storage layout and the fast paths are described in ``_storage.py``; how TensorDict
results become instances again in ``_wrap.py``. Shape, device and math methods are in
``_ops.py``; constructors and saving in ``_io.py``.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import NestedKey
from tensordict.ext import (
    NO_DEFAULT,
    NonTensorData,
    TensorDict,
    TensorDictBase,
    leaf_repr,
    unravel_key,
)
from tensordict.tensorclass._storage import (
    _ABSENT,
    _EMPTY_SIZE,
    _batch_error,
    _bind,
    _convert_field,
    _full_td,
    _locked_error,
    _member_view,
    _new,
    _obj_new,
    _read,
    _resync,
    _Slots,
    _store_field,
    _tensorclass_hint,
    _to_device,
    _to_size,
)
from tensordict.tensorclass._wrap import VIEW_SOURCE, _unwrap, _wrap_out
from tensordict.utils import get_printoptions

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

__all__: list[str] = []

_Tensor = torch.Tensor
_Size = torch.Size
_new_td = TensorDict._new_unsafe
_SLOT_NAMES = frozenset(_Slots.__slots__)


class _NoFieldError(KeyError, AttributeError):
    """``set()`` of a name that is no field: an ``AttributeError`` as in tensordict 0.15,
    and a ``KeyError`` as for a missing key of a TensorDict."""


def _type_attr(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _ABSENT


def _rebuild(cls: type, td: TensorDictBase, nt: dict, extra: dict | None = None) -> Any:
    """Unpickling entry point (kept importable under this name)."""
    obj = _obj_new(cls)  # type: ignore[var-annotated]
    _bind(obj, td, dict(nt))
    if extra:
        obj.__dict__.update(extra)
    return obj


class _TensorClassCore(_Slots):
    """Field access, indexing, repr and conversions (see the module docstring)."""

    __slots__ = ()

    _is_tensorclass = True
    #: field names in declaration order, and as a set (set per class by the builder)
    _tc_fields: tuple[str, ...] = ()
    _tc_field_set: frozenset[str] = frozenset()
    _tc_autocast = False
    _tc_nocast = False
    _tc_frozen = False
    _tc_shadow = False
    _tc_tensor_only = False
    #: the same flags under upstream's names (set per class with the ``_tc_*`` ones)
    _autocast = False
    _nocast = False
    _frozen = False
    _shadow = False
    _tensor_only = False
    #: the class (or a base below the tensorclass machinery) defines ``__setattr__``
    _tc_user_setattr = False
    #: a data descriptor (a property) was installed over a field name after the build
    _tc_field_descriptors = False
    #: dataclass-style hook, called at the end of the generated ``__init__``
    __post_init__: Callable[[Any], None] | None = None

    if TYPE_CHECKING:  # pragma: no cover
        _tensordict: TensorDictBase
        _non_tensordict: dict[str, Any]

    # ------------------------------------------------------------------ attributes
    # There is deliberately no ``__getattr__``: it would take attribute reads off
    # Python's fast path. Fields live in the instance dict (``_storage.py``) and
    # TensorDict methods are class attributes (``_ops.py``).
    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        if name in cls._tc_field_set:
            if cls._tc_frozen:
                msg = f"cannot assign to field {name!r}: {cls.__name__} is frozen."
                raise dataclasses.FrozenInstanceError(msg)
            td = self._tensordict
            if value.__class__ is _Tensor and td.__class__ is TensorDict and not cls._tc_autocast:
                if td._is_locked:
                    raise _locked_error(cls, name)
                bs = td._batch_size
                if bs and value.shape[: len(bs)] != bs:
                    raise _batch_error(cls, name, value.shape, bs)
                device = td._device
                if device is not None and value.device != device:
                    value = value.to(device)
                td._tensordict[name] = value
                nt = self._non_tensordict
                if nt:
                    nt.pop(name, None)
                self.__dict__[name] = value
                return
            _store_field(self, name, value)
            return
        if name in _SLOT_NAMES:
            object.__setattr__(self, name, value)
            return
        attr = _type_attr(cls, name)
        if attr is not _ABSENT and hasattr(type(attr), "__set__"):
            object.__setattr__(self, name, value)
            return
        if name[:1] == "_":
            self.__dict__[name] = value
            return
        msg = (
            f"Cannot set the attribute {name!r}: "
            f"{cls.__name__} has no field {name!r}; its fields are {list(cls._tc_fields)}. "
            f"Declare {name!r} as a field (an annotation in the class body) or as a property, "
            "or use a name starting with '_' for private state."
        )
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        cls = type(self)
        if name in cls._tc_field_set:
            if cls._tc_frozen:
                msg = f"cannot delete field {name!r}: {cls.__name__} is frozen."
                raise dataclasses.FrozenInstanceError(msg)
            td = self._tensordict
            if td._get_raw(name, _ABSENT) is not _ABSENT:
                if td._is_locked:
                    raise _locked_error(cls, name)
                td._del_raw(name)
            self._non_tensordict[name] = None
            self.__dict__[name] = None
            return
        object.__delattr__(self, name)

    # ------------------------------------------------------------------ shape info
    @property
    def batch_size(self) -> torch.Size:
        """Leading dims shared by every tensor field (settable, like a TensorDict's)."""
        return self._tensordict.batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        self._tensordict.batch_size = value

    @property
    def shape(self) -> torch.Size:
        """Alias of ``batch_size``."""
        return self._tensordict.batch_size

    @property
    def device(self) -> torch.device | None:
        """Device of every tensor field, or ``None`` if not fixed."""
        return self._tensordict.device

    @device.setter
    def device(self, value: Any) -> None:
        msg = (
            f"device cannot be set using tensorclass.device = device ({type(self).__name__}); "
            "use `obj = obj.to(device)`."
        )
        raise RuntimeError(msg)

    @property
    def names(self) -> list:
        """Names of the batch dims (``None`` for unnamed dims)."""
        return self._tensordict.names

    @names.setter
    def names(self, value: Any) -> None:
        self._tensordict.names = value

    @property
    def batch_dims(self) -> int:
        """``len(batch_size)``."""
        return len(self._tensordict.batch_size)

    @property
    def ndim(self) -> int:
        """``len(batch_size)``."""
        return len(self._tensordict.batch_size)

    def dim(self) -> int:
        """``len(batch_size)``."""
        return len(self._tensordict.batch_size)

    def ndimension(self) -> int:
        """``len(batch_size)``."""
        return len(self._tensordict.batch_size)

    def numel(self) -> int:
        """Number of elements of the batch (product of ``batch_size``)."""
        return self._tensordict.batch_size.numel()

    def size(self, dim: int | None = None) -> Any:
        """``batch_size``, or its ``dim``-th entry."""
        bs = self._tensordict.batch_size
        return bs if dim is None else bs[dim]

    def __len__(self) -> int:
        bs = self._tensordict.batch_size
        return bs[0] if bs else 0

    def __iter__(self) -> Iterator[Self]:
        if not self._tensordict.batch_size:
            msg = f"iteration over a 0-d {type(self).__name__} (batch_size=[]) is not possible."
            raise TypeError(msg)
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        msg = (
            f"Boolean value of {type(self).__name__} is ambiguous (as for a Tensor with more "
            "than one value). Use `obj.all()` or `obj.any()` instead."
        )
        raise RuntimeError(msg)

    __hash__ = object.__hash__

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, index: Any) -> Self:
        """Indexes every field along the batch dims; a str (or tuple of str) reads a key.

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class Pair(TensorClass):
            ...     a: torch.Tensor
            ...     b: torch.Tensor
            >>> p = Pair(a=torch.arange(4), b=torch.zeros(4, 2), batch_size=[4])
            >>> p[1:3].b.shape
            torch.Size([2, 2])
            >>> type(p[p.a > 1]).__name__
            'Pair'
        """
        kind = index.__class__
        if kind is str or (kind is tuple and index and all(i.__class__ in (str, tuple) for i in index)):
            return self.get(index)
        td = self._tensordict
        if td.__class__ is TensorDict:
            out = _index_tensors(td, index, kind)
            if out is None:
                out = td._index(index)
        else:
            out = _member_view(td[index])
        return _new(type(self), out, self._non_tensordict)

    def __getitems__(self, indices: Any) -> Self:
        """``self[indices]`` for a list of indices, as one instance of batch ``[len(indices), ...]``.

        ``torch.utils.data.DataLoader`` calls it to read a whole batch of a map-style
        dataset in one indexing operation (then ``collate_fn=lambda x: x`` keeps it).
        """
        if isinstance(indices, (list, tuple)):
            indices = torch.as_tensor(indices, dtype=torch.long)
        return self[indices]

    def __setitem__(self, index: Any, value: Any) -> None:
        """Writes ``value`` (an instance, a TensorDict, a dict or a tensor) at ``index``."""
        kind = index.__class__
        if kind is str or (kind is tuple and index and all(i.__class__ in (str, tuple) for i in index)):
            self.set(index, value)
            return
        from tensordict.tensorclass._storage import _non_tensor_in_td

        if isinstance(value, _Slots):
            mine, theirs = type(self), type(value)
            if theirs is not mine and set(theirs._tc_fields) != set(mine._tc_fields):
                msg = (
                    f"__setitem__ is only allowed for same-class or compatible class (same fields) "
                    f"assignment: {mine.__name__} has fields {sorted(mine._tc_fields)}, {theirs.__name__} has "
                    f"{sorted(theirs._tc_fields)}."
                )
                raise ValueError(msg)
            if not value._non_tensordict and not self._non_tensordict:
                td = self._tensordict
                td[index] = value._tensordict
                if td.__class__ is not TensorDict:
                    _resync(self)  # leaves read from a file or a lazy stack are copies
                return
            source = _full_td(value)
            with _non_tensor_in_td(self) as td:
                td[index] = source
            return
        with _non_tensor_in_td(self) as td:
            td[index] = _unwrap(value)

    # ------------------------------------------------------------------ get / set
    def get(self, key: NestedKey, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """The value of a field (or of a nested key such as ``("nested", "x")``).

        Args:
            key (str or tuple of str): a field name, or a path through nested
                tensorclasses and TensorDicts.
            default (Any, optional): returned when ``key`` is missing.

        Keyword Args:
            as_list, as_nested_tensor, as_padded_tensor, ...: read options of
                ``TensorDict.get`` for fields stored in a lazy stack whose members
                differ in shape (the call goes to the TensorDict).

        Returns:
            the tensor, nested instance or object stored; ``None`` for a field that
            holds no value.

        Raises:
            KeyError: ``key`` is not a field (and no default is given).

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class Pair(TensorClass):
            ...     a: torch.Tensor
            ...     name: str = "p"
            >>> p = Pair(a=torch.zeros(2), batch_size=[2])
            >>> p.get("a").shape, p.get("name")
            (torch.Size([2]), 'p')
        """
        if kwargs:
            args = () if default is NO_DEFAULT else (default,)
            return _read(self._tensordict.get(key, *args, **kwargs))
        if key.__class__ is not str:
            key = unravel_key(key)
            if key.__class__ is tuple:
                parent = self.get(key[0], _ABSENT)
                if parent is _ABSENT or parent is None:
                    if default is not NO_DEFAULT:
                        return default
                    msg = f"{type(self).__name__} has no nested key {key!r}."
                    raise KeyError(msg)
                rest = key[1:] if len(key) > 2 else key[1]
                return parent.get(rest, default) if default is not NO_DEFAULT else parent.get(rest)
        if key in type(self)._tc_field_set:
            value = self.__dict__.get(key)
            if value is None and default is not NO_DEFAULT:
                return default
            return value
        value = self._tensordict._get_raw(key, _ABSENT)  # type: ignore[arg-type]
        if value is not _ABSENT:
            return _read(value)
        if default is not NO_DEFAULT:
            return default
        msg = f"{type(self).__name__} has no field {key!r}; its fields are {list(type(self)._tc_fields)}."
        raise KeyError(msg)

    def set(self, key: NestedKey, value: Any, inplace: bool = False, non_blocking: bool = False, **kwargs: Any) -> Self:
        """Sets a field (or a nested key), with the same checks as attribute assignment.

        Args:
            key (str or tuple of str): a field name or a nested path.
            value (Any): the value; tensors must start with ``batch_size``.
            inplace (bool, optional): copy into the existing tensor when there is one.
                Defaults to ``False``.

        Returns:
            ``self``.

        Raises:
            KeyError: ``key`` is not a field.
            RuntimeError: the leading dims of ``value`` do not match ``batch_size``.
            dataclasses.FrozenInstanceError: the class is frozen.
        """
        cls = type(self)
        if key.__class__ is not str:
            key = unravel_key(key)
        if key.__class__ is tuple:
            parent = self.get(key[0], None)
            if parent is None:
                msg = f"{cls.__name__}.set({key!r}): {key[0]!r} holds no nested container."
                raise KeyError(msg)
            rest = key[1:] if len(key) > 2 else key[1]
            parent.set(rest, value, inplace=inplace)
            return self
        if key not in cls._tc_field_set:
            msg = f"Cannot set the attribute {key!r}: {cls.__name__} has no such field. Its fields are {list(cls._tc_fields)}."
            raise _NoFieldError(msg)
        if inplace:
            existing = self._tensordict._get_raw(key, _ABSENT)
            if isinstance(existing, _Tensor) and isinstance(value, _Tensor):
                existing.copy_(value, non_blocking=non_blocking)
                return self
        if cls._tc_frozen:
            msg = f"cannot assign to field {key!r}: {cls.__name__} is frozen."
            raise dataclasses.FrozenInstanceError(msg)
        _store_field(self, key, value, non_blocking)
        return self

    # ------------------------------------------------------------------ copies
    def clone(self, recurse: bool = True, **kwargs: Any) -> Self:
        """A copy (``recurse=False`` copies the structure but shares the tensors)."""
        return _new(type(self), self._tensordict.clone(recurse=recurse), self._non_tensordict)

    def copy(self) -> Self:
        """Shallow copy: ``clone(recurse=False)``."""
        return self.clone(recurse=False)

    def __copy__(self) -> Self:
        return self.clone(recurse=False)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """A ``TensorDict`` copy of every field.

        Tensors are cloned; nested tensorclasses become nested TensorDicts; non-tensor
        fields become ``NonTensorData`` leaves; ``None`` fields are left out unless
        ``retain_none=True`` (then kept as ``NonTensorData(None)``), as in tensordict 0.15.

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class Pair(TensorClass):
            ...     a: torch.Tensor
            ...     tag: str = "x"
            >>> td = Pair(a=torch.zeros(3), batch_size=[3]).to_tensordict()
            >>> sorted(td.keys()), td["tag"]
            (['a', 'tag'], 'x')
        """
        td = self._tensordict
        source: dict = {}
        for key, value in td._items_raw():
            if isinstance(value, _Tensor):
                source[key] = value.clone()
            elif isinstance(value, (TensorDictBase, _Slots)):
                source[key] = value.to_tensordict(retain_none=retain_none)
            else:
                source[key] = value.clone()
        bs, device = td.batch_size, td.device
        keep_none = bool(retain_none)
        for key, value in self._non_tensordict.items():
            if value is None and not keep_none:
                continue
            source[key] = NonTensorData(value, bs, device)
        return TensorDict._new_unsafe(source, bs, device, td.names if td._has_names() else None)

    def to_dict(self, *, retain_none: bool = True, convert_tensors: bool = False) -> dict:
        """A ``dict`` of the fields (nested instances become dicts)."""
        out: dict = {}
        for name in type(self)._tc_fields:
            value = self.get(name)
            if value is None and not retain_none:
                continue
            if isinstance(value, (TensorDictBase, _Slots)):
                value = value.to_dict(convert_tensors=convert_tensors)
            elif isinstance(value, _Tensor) and convert_tensors:
                value = value.tolist()
            out[name] = value
        return out

    @classmethod
    def from_tensordict(
        cls, tensordict: TensorDictBase, non_tensordict: dict | None = None, safe: bool = True
    ) -> Self:
        """An instance whose fields are the entries of ``tensordict``.

        ``tensordict`` becomes the instance's storage (nothing is copied): keep using
        the instance afterwards rather than writing keys into ``tensordict``.

        Args:
            tensordict (TensorDictBase): the tensor fields. ``NonTensorData`` entries
                become non-tensor fields; a nested TensorDict under a field annotated
                with a tensorclass becomes an instance of it.
            non_tensordict (dict, optional): non-tensor (and ``None``) fields.
            safe (bool, optional): raise if ``tensordict`` is not a TensorDictBase.
                Defaults to ``True``; with ``False`` a mapping is converted.

        Returns:
            an instance of this class; fields given nowhere are ``None``.

        Raises:
            TypeError: ``tensordict`` is not a TensorDict (and ``safe=True``).
            KeyError: a key is not a field of the class.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from tensordict.tensorclass import TensorClass
            >>> class Pair(TensorClass):
            ...     a: torch.Tensor
            ...     tag: str
            >>> p = Pair.from_tensordict(TensorDict({"a": torch.zeros(2)}, [2]), {"tag": "t"})
            >>> p.tag, p.batch_size
            ('t', torch.Size([2]))
        """
        if not isinstance(tensordict, TensorDictBase):
            if isinstance(tensordict, _Slots):
                tensordict = tensordict._tensordict
            elif safe or not isinstance(tensordict, Mapping):
                msg = f"{cls.__name__}.from_tensordict expects a TensorDictBase, got {type(tensordict).__name__}."
                raise TypeError(msg)
            else:
                tensordict = TensorDict(dict(tensordict))
        fields = cls._tc_field_set
        nt = dict(non_tensordict) if non_tensordict else {}
        keys = list(tensordict._keys_raw())
        extra = [k for k in keys if k not in fields] + [k for k in nt if k not in fields]
        if extra:
            msg = (
                f"{cls.__name__}.from_tensordict: {sorted(extra)} are not fields of {cls.__name__} "
                f"(fields: {list(cls._tc_fields)}). Select the fields first, e.g. td.select(*fields)."
            )
            raise KeyError(msg)
        td = tensordict
        if td.__class__ is TensorDict:
            _convert_nested(cls, td)
        present = set(keys)
        for name in cls._tc_fields:
            if name not in nt and name not in present:
                nt[name] = None
        obj = _obj_new(cls)
        _bind(obj, td, nt)
        if cls.__post_init__ is not None:  # as tensordict 0.15, with or without skip_post_init_on_rebuild
            cls.__post_init__(obj)
        return obj

    @classmethod
    def _from_tensordict(cls, tensordict: TensorDictBase, non_tensordict: dict | None = None, safe: bool = True) -> Self:
        """:meth:`from_tensordict` that leaves ``tensordict`` intact (upstream's private name).

        ``from_tensordict`` moves ``NonTensorData`` entries out of the TensorDict it binds;
        TorchRL calls this one on TensorDicts it shares (the MCTS ``Tree.parent`` rebuilds a
        node from a lazy stack's member), so an unlocked TensorDict holding non-tensor
        entries is bound through a shallow copy (the tensors stay shared).
        """
        if isinstance(tensordict, TensorDictBase) and not tensordict.is_locked:
            tensordict = _member_view(tensordict)
        return cls.from_tensordict(tensordict, non_tensordict, safe)

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field, ...]:
        """The class's ``dataclasses.Field`` objects, in declaration order."""
        return dataclasses.fields(cls)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ leaf protocol
    # td-core calls these when a tensorclass is stored inside a TensorDict.
    def _batch_transform(self, fn: Callable[[Any, int], Any], nd: int | None = None, names: Any = None) -> Self:
        return _new(type(self), self._tensordict._batch_transform(fn, nd), self._non_tensordict)

    def _split_leaves(self, fn: Callable[[Any, int], Sequence[Any]], nd: int) -> list:
        cls, nt = type(self), self._non_tensordict
        return [_new(cls, td, nt) for td in self._tensordict._split_leaves(fn, nd)]

    def _index(self, index: Any) -> Self:
        return self[index]

    def _map_leaves(self, fn: Callable, keep_non_tensor: bool = False, **new_kwargs: Any) -> Self:
        td = self._tensordict._map_leaves(fn, keep_non_tensor, **new_kwargs)
        return _new(type(self), td, self._non_tensordict)

    def _set_device_tree(self, device: Any) -> None:
        self._tensordict._set_device_tree(device)
        _resync(self)

    def unbind(self, dim: int = 0) -> tuple[Self, ...]:
        """Splits along batch dim ``dim`` into a tuple of instances (views of the fields)."""
        cls, nt = type(self), self._non_tensordict
        if self._tensordict.__class__ is TensorDict:
            return tuple(_new(cls, td, nt) for td in self._tensordict.unbind(dim))
        return tuple(_new(cls, _member_view(td), nt) for td in self._tensordict.unbind(dim))

    # ------------------------------------------------------------------ comparisons
    def _compare(self, other: Any, op: str) -> Any:
        if isinstance(other, _Slots):
            if self._non_tensordict or other._non_tensordict:
                out = getattr(_full_td(self), op)(_full_td(other))
                return _new(type(self), out, None)
            other = other._tensordict
        out = getattr(self._tensordict, op)(other)
        return _wrap_out(self, out)

    def __eq__(self, other: Any) -> Any:
        return self._compare(other, "__eq__")

    def __ne__(self, other: Any) -> Any:
        return self._compare(other, "__ne__")

    # ------------------------------------------------------------------ repr, pickling
    def __repr__(self) -> str:
        cls = type(self)
        td = self._tensordict
        bs, device = td.batch_size, td.device
        opts = get_printoptions()
        entries = [(key, leaf_repr(value)) for key, value in td._items_raw()]
        nones = []
        field_device = f", device={device}" if opts.get("show_field_device", True) else ""
        for key, value in self._non_tensordict.items():
            if value is None:
                nones.append(key)
            else:
                entries.append((key, f"NonTensorData(data={value}, batch_size={bs}{field_device})"))
        entries.sort(key=lambda kv: kv[0])
        present = {k for k, _ in entries} | set(nones)
        nones.extend(f for f in cls._tc_fields if f not in present)
        order = {f: i for i, f in enumerate(cls._tc_fields)}
        nones.sort(key=lambda k: order.get(k, len(order)))
        parts = [f"{key}={text}" for key, text in entries] + [f"{key}=None" for key in nones]
        if opts.get("show_batch_size", True):
            parts.append(f"batch_size={bs}")
        if opts.get("show_device", True):
            parts.append(f"device={device}")
        if opts.get("show_is_shared", True):
            shared = td.is_shared() if list(td._keys_raw()) else False
            parts.append(f"is_shared={shared}")
        body = textwrap.indent(",\n".join(parts), " " * 4)
        return f"{cls.__name__}(\n{body})"

    __str__ = __repr__

    def __reduce__(self) -> tuple:
        extra = {k: v for k, v in self.__dict__.items() if k[:1] == "_" and k != VIEW_SOURCE}
        return (_rebuild, (type(self), self._tensordict, dict(self._non_tensordict), extra or None))

    # ------------------------------------------------------------------ torch functions
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        from tensordict.tensorclass._torch_fn import dispatch

        return dispatch(func, types, args, kwargs or {})


def _index_tensors(td: TensorDict, index: Any, kind: type) -> TensorDict | None:
    """``td[index]`` for the common case, a slice, an int or a 1-d tensor along the first
    batch dim of a TensorDict of plain tensors: every leaf indexed once, nothing else
    checked that torch does not check. ``None`` when the case does not apply."""
    bs = td._batch_size
    if not bs:
        return None
    if kind is _Tensor:
        if index.ndim != 1 or (index.dtype is torch.bool and len(bs) < 1):
            return None
    elif kind is not slice and kind is not int:
        return None
    source = {}
    leaf = None
    for key, value in td._tensordict.items():
        if value.__class__ is not _Tensor:
            return None
        source[key] = leaf = value[index]
    if leaf is None:
        return None
    nd = len(bs)
    new_bs = leaf.shape[: leaf.ndim - (value.ndim - nd)]
    return _new_td(source, new_bs, td._device)


def _convert_nested(cls: type[_Slots], td: TensorDict) -> None:
    """Nested TensorDicts of ``td`` under fields annotated with a tensorclass become
    instances of it (in place)."""
    store = td._tensordict
    for key, value in list(store.items()):
        if isinstance(value, TensorDictBase):
            target = _tensorclass_hint(cls, key)
            if target is not None:
                store[key] = target.from_tensordict(value)  # type: ignore[attr-defined]


def _init_instance(
    self: Any,
    values: tuple,
    batch_size: Any,
    device: Any,
    names: Any,
    non_blocking: bool,
    lock: bool,
) -> None:
    """The body of every generated ``__init__``: validates the fields and binds them."""
    cls = type(self)
    if cls._tc_user_setattr or cls._tc_field_descriptors:
        # the class defines __setattr__ (or a property over a field): every field goes
        # through __setattr__, as for a dataclass
        _init_empty(self, batch_size, device, names)
        for name, value in zip(cls._tc_fields, values):
            setattr(self, name, value)
        if cls.__post_init__ is not None:
            cls.__post_init__(self)
        if lock or cls._tc_frozen:
            self._tensordict.lock_()
        return
    if batch_size is None:
        bs = _EMPTY_SIZE
    elif batch_size.__class__ is _Size:
        bs = batch_size
    else:
        bs = _to_size(batch_size)
    dev = _to_device(device) if device is not None else None
    n = len(bs)
    b0 = bs[0] if n == 1 else -1
    store: dict = {}
    nt: dict = {}
    td = _new_td(store, bs, dev)
    fast = not cls._tc_autocast
    setattr_ = object.__setattr__  # a local: Dynamo still traces it as a plain store
    for name, value in zip(cls._tc_fields, values):
        if value.__class__ is _Tensor and fast:
            if n:
                if b0 >= 0:  # one batch dim: compare one int rather than a slice of the shape
                    try:
                        bad = value.shape[0] != b0
                    except IndexError:
                        bad = True
                else:
                    bad = value.shape[:n] != bs
                if bad:
                    raise _batch_error(cls, name, value.shape, bs)
            if dev is not None and value.device != dev:
                value = value.to(dev, non_blocking=non_blocking)
            store[name] = value
            setattr_(self, name, value)
        elif value is None:
            nt[name] = None
            setattr_(self, name, None)
        else:
            in_td, value = _convert_field(cls, name, value, td, non_blocking)
            if in_td:
                store[name] = value
                setattr_(self, name, _read(value))
            else:
                nt[name] = value
                setattr_(self, name, value)
    if names is not None:
        td.names = names
    setattr_(self, "_tensordict", td)
    setattr_(self, "_non_tensordict", nt)
    post_init = cls.__post_init__
    if post_init is not None:
        post_init(self)
    if lock or cls._tc_frozen:
        td.lock_()


def _init_empty(self: Any, batch_size: Any, device: Any, names: Any) -> None:
    """Prepares an instance whose class defines its own ``__init__``: every field ``None``."""
    td = TensorDict._new_unsafe({}, _to_size(batch_size), _to_device(device))
    if names is not None:
        td.names = names
    _bind(self, td, dict.fromkeys(type(self)._tc_fields))
