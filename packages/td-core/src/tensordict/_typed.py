"""``TypedTensorDict``: a TensorDict subclass whose fields are declared as annotations.

A subclass lists its fields as class annotations (``eta: Tensor``); construction
checks that every required field is given and no undeclared one is, and each field
reads and writes as an attribute (``state.eta``). Fields annotated
``NotRequired[...]`` may be left out. Subclasses inherit their parents' fields.

Class options are given by subscripting the base: ``TypedTensorDict["shadow"]`` lets
fields take the names of TensorDict attributes (``data``, ``clone``, ...), and
``TypedTensorDict["frozen"]`` locks every instance after construction. Options are
inherited.

Batch operations (indexing, ``clone``, ``expand``, ``to``, ``stack``...) return an
instance of the same class, without re-checking the fields.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from tensordict._base import TensorDictBase
from tensordict._keys import NO_DEFAULT
from tensordict._td import TensorDict

__all__ = ["TypedTensorDict"]

_OPTIONS = ("shadow", "frozen")
_NOT_REQUIRED = re.compile(r"^\s*(typing\.|typing_extensions\.|te\.)?NotRequired\[")
# names a field may not take without the "shadow" option: the TensorDict API
_RESERVED = frozenset(name for name in dir(TensorDict) if not name.startswith("__"))


def _is_optional(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return bool(_NOT_REQUIRED.match(annotation))
    origin = typing.get_origin(annotation)
    return getattr(origin, "_name", None) == "NotRequired" or repr(origin).endswith("NotRequired")


def _field_property(name: str) -> property:
    def fget(self: TypedTensorDict) -> Any:
        try:
            return TensorDict.__getitem__(self, name)
        except KeyError:
            msg = f"{type(self).__name__}: field {name!r} is declared but not set."
            raise AttributeError(msg) from None

    def fset(self: TypedTensorDict, value: Any) -> None:
        TensorDict.__setitem__(self, name, value)
        source = self.__dict__.get("_source")
        if source is not None and not isinstance(source, TensorDict):
            # a dense copy of a lazy stack (or other container): the field write reaches it too
            source.set(name, TensorDict.__getitem__(self, name))

    def fdel(self: TypedTensorDict) -> None:
        TensorDict.__delitem__(self, name)

    return property(fget, fset, fdel, doc=f"The {name!r} field.")


class TypedTensorDict(TensorDict):
    """A :class:`~tensordict.TensorDict` with declared, checked fields.

    Subclass it and annotate the fields; build instances with the fields as keyword
    arguments plus the usual ``batch_size``, ``device``, ``names``.

    Args:
        source (Mapping, optional): fields given as a mapping.
        batch_size, device, names, non_blocking, lock: as for ``TensorDict``.
        **fields: the field values (tensors, TensorDicts, other objects).

    Raises:
        TypeError: a required field is missing, or an undeclared one is given.
        AttributeError: (at class creation) a field shadows a TensorDict attribute
            and the class was not created with the ``"shadow"`` option.

    Examples:
        >>> import torch
        >>> from torch import Tensor
        >>> from tensordict import TypedTensorDict
        >>> class State(TypedTensorDict):
        ...     x: Tensor
        ...     y: Tensor
        >>> s = State(x=torch.zeros(3, 2), y=torch.ones(3), batch_size=[3])
        >>> s.x.shape, s[0].y.item()
        (torch.Size([3, 2]), 1.0)
        >>> type(s[:2]).__name__
        'State'
    """

    _shadow: bool = False
    _frozen: bool = False
    __expected_keys__: frozenset = frozenset()
    __required_keys__: frozenset = frozenset()
    __optional_keys__: frozenset = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        required: set[str] = set()
        optional: set[str] = set()
        for base in cls.__mro__[1:]:
            if issubclass(base, TypedTensorDict):
                required |= base.__required_keys__
                optional |= base.__optional_keys__
        for name, annotation in own.items():
            if name.startswith("_"):
                continue
            if not cls._shadow and name in _RESERVED:
                msg = (
                    f"{cls.__name__}: field {name!r} shadows a TensorDictBase attribute. Rename the "
                    f"field, or derive from TypedTensorDict['shadow'] to allow it."
                )
                raise AttributeError(msg)
            if _is_optional(annotation):
                optional.add(name)
                required.discard(name)
            else:
                required.add(name)
                optional.discard(name)
            setattr(cls, name, _field_property(name))
        cls.__required_keys__ = frozenset(required)
        cls.__optional_keys__ = frozenset(optional)
        cls.__expected_keys__ = frozenset(required | optional)

    def __class_getitem__(cls, options: Any) -> Any:
        """``TypedTensorDict["shadow"]``, ``["frozen"]`` or ``["shadow", "frozen"]``: a base
        class with those options.

        Raises:
            ValueError: an option other than ``"shadow"`` and ``"frozen"``.
        """
        opts = options if isinstance(options, tuple) else (options,)
        if not all(isinstance(o, str) for o in opts):
            return TensorDictBase.__class_getitem__.__func__(cls, options)  # type: ignore[attr-defined]
        bad = [o for o in opts if o not in _OPTIONS]
        if bad:
            msg = f"Unknown TypedTensorDict option(s) {bad}; expected any of {list(_OPTIONS)}."
            raise ValueError(msg)
        key = (cls, frozenset(opts))
        base = _OPTION_BASES.get(key)
        if base is None:
            attrs = {"_shadow": cls._shadow or "shadow" in opts, "_frozen": cls._frozen or "frozen" in opts}
            attrs["__module__"] = cls.__module__  # type: ignore[assignment]
            base = type(cls)(f"{cls.__name__}[{', '.join(repr(o) for o in opts)}]", (cls,), attrs)  # type: ignore[misc]
            _OPTION_BASES[key] = base
        return base

    def __init__(
        self,
        source: Mapping | None = None,
        batch_size: Any = None,
        device: Any = None,
        names: Sequence[str] | None = None,
        non_blocking: bool | None = None,
        lock: bool = False,
        **fields: Any,
    ) -> None:
        given = set(fields)
        if source is not None:
            given |= set(source.keys())
        self._check_fields(given, strict=True)
        super().__init__(source, batch_size, device, names, non_blocking, lock, **fields)
        if self._frozen:
            self.lock_()

    @classmethod
    def _check_fields(cls, given: set, strict: bool) -> None:
        missing = cls.__required_keys__ - given
        if missing:
            msg = f"{cls.__name__}: missing required field(s) {sorted(missing)}."
            raise TypeError(msg)
        if strict:
            extra = {k for k in given if isinstance(k, str)} - cls.__expected_keys__
            if extra:
                msg = f"{cls.__name__}: unexpected field(s) {sorted(extra)}; declared fields are {sorted(cls.__expected_keys__)}."
                raise TypeError(msg)

    @classmethod
    def from_tensordict(cls, tensordict: TensorDictBase, check: bool = True) -> TypedTensorDict:
        """Views ``tensordict`` as this class, without copying.

        A ``TensorDict`` is shared: writes through the result (``state.x = ...``) reach
        it. Other containers (lazy stacks, ...) are made dense first; field writes
        (``state.x = ...``) reach them too, other writes stay in the dense copy.

        Args:
            tensordict (TensorDictBase): the source.
            check (bool): check that every required field is present (extra keys are
                allowed). Defaults to ``True``.

        Raises:
            TypeError: a required field is missing and ``check`` is ``True``.

        Examples:
            >>> import torch
            >>> from torch import Tensor
            >>> from tensordict import TensorDict, TypedTensorDict
            >>> class P(TypedTensorDict):
            ...     x: Tensor
            >>> td = TensorDict(x=torch.zeros(2), batch_size=[2])
            >>> p = P.from_tensordict(td)
            >>> p.x = torch.ones(2)
            >>> td["x"].tolist()
            [1.0, 1.0]
        """
        if check:
            cls._check_fields(set(tensordict.keys()), strict=False)
        src = tensordict if isinstance(tensordict, TensorDict) else tensordict.to_tensordict()
        obj = cls._wrap(src)  # type: ignore[arg-type]
        obj._source = tensordict  # type: ignore[attr-defined]
        if cls._frozen:
            obj.lock_()
        return obj

    @classmethod
    def _wrap(cls, td: TensorDict) -> TypedTensorDict:
        obj = cls.__new__(cls)
        obj.__dict__.update(td.__dict__)
        obj.__dict__.pop("_source", None)
        return obj

    def _new_like(self, source: dict, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT) -> Any:
        return type(self)._wrap(TensorDict._new_like(self, source, batch_size, device, names))

    @staticmethod
    def _typed_restack(tds: Sequence[Any], result: TensorDict) -> Any:
        cls = tds[0].__class__
        if all(td.__class__ is cls for td in tds):
            return cls._wrap(result)
        return result


_OPTION_BASES: dict = {}
