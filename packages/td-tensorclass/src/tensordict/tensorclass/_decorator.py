"""The two front doors: the ``@tensorclass`` decorator and the ``TensorClass`` base."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from tensordict.tensorclass._base import _TensorClassCore
from tensordict.tensorclass._build import OPTION_NAMES, build_tensorclass
from tensordict.tensorclass._io import _IOMixin
from tensordict.tensorclass._ops import _UPSTREAM_CLASSMETHODS, _OpsMixin
from tensordict.tensorclass._state import _StateMixin
from tensordict.tensorclass._wrap import _forward_classmethod, install_td_forwarders

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10
    from typing_extensions import dataclass_transform

__all__ = ["tensorclass", "TensorClass"]

T = TypeVar("T", bound=type)


def _no_such_attribute(*args: Any) -> Any:
    """``SomeTensorClass.__getattr__``: the fallback that finds nothing.

    Called as ``(instance, name)`` by code that chains onto a tensorclass's
    ``__getattr__``, and as ``(name,)`` by the metaclass hook when a class attribute
    is missing; both raise ``AttributeError``.
    """
    if len(args) == 2:
        obj, name = args
        msg = f"{type(obj).__name__!r} object has no attribute {name!r}"
    else:
        (name,) = args
        msg = f"tensorclass type object has no attribute {name!r}"
    raise AttributeError(msg)


class _TensorClassType(type):
    """Metaclass of tensorclasses: ``SomeTensorClass.__getattr__`` exists, as upstream's does.

    Downstream code chains onto it (TorchRL's ``Trajectory`` reads
    ``Trajectory.__getattr__`` and installs its own fallback that calls it). It lives
    on the metaclass, not in the class: a ``__getattr__`` in the class would take every
    instance attribute read off CPython's fast path. A class that sets its own
    ``__getattr__`` gets it as usual.
    """

    __getattr__ = staticmethod(_no_such_attribute)

    def __setattr__(cls, name: str, value: Any) -> None:
        type.__setattr__(cls, name, value)
        if hasattr(type(value), "__set__") and name in getattr(cls, "_tc_field_set", ()):
            # a property installed over a field after the class was built (TorchRL's
            # ``VLAAction.chunk``): instances are then bound without calling it
            type.__setattr__(cls, "_tc_field_descriptors", True)


class _TensorClassBase(_TensorClassCore, _OpsMixin, _StateMixin, _IOMixin, metaclass=_TensorClassType):
    """Behaviour shared by every tensorclass instance (decorated or subclassed)."""

    __slots__ = ()


install_td_forwarders(_TensorClassBase)
for _name in _UPSTREAM_CLASSMETHODS:  # upstream's constructors, served by td-core when it has them
    if not hasattr(_TensorClassBase, _name):
        setattr(_TensorClassBase, _name, _forward_classmethod(_name))
del _name


@overload
def tensorclass(cls: T, /) -> T: ...


@overload
def tensorclass(
    cls: None = None, /, *, autocast: bool = False, frozen: bool = False, nocast: bool = False, shadow: bool = False,
    tensor_only: bool = False, skip_post_init_on_rebuild: bool = False,
) -> Callable[[T], T]: ...


@dataclass_transform(field_specifiers=(dataclasses.field,))
def tensorclass(
    cls: Any = None,
    /,
    *,
    autocast: bool = False,
    frozen: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    skip_post_init_on_rebuild: bool = False,
) -> Any:
    """Makes a dataclass-like class whose instances have every TensorDict operation.

    Fields are declared with annotations, as for :func:`dataclasses.dataclass`. The
    constructor takes the fields (positionally or by keyword) plus ``batch_size``,
    ``device``, ``names`` and ``lock`` keywords. Tensor fields (and nested
    TensorDicts or tensorclasses) must start with ``batch_size`` and follow every
    batch operation (indexing, reshaping, stacking, ``to``, saving); other fields
    (strings, objects, ``None``) are kept as they are.

    Args:
        cls (type, optional): the class to decorate (when used without arguments).

    Keyword Args:
        autocast (bool): cast values to the annotated type when set (``int``
            annotations give ints, ``torch.Tensor`` annotations give tensors, a nested
            tensorclass annotation turns a dict or TensorDict into it). Exclusive with
            ``nocast``. Defaults to ``False``.
        frozen (bool): fields cannot be reassigned and the data is locked (in-place
            writes into tensors stay allowed). Defaults to ``False``.
        nocast (bool): keep numbers and numpy arrays as they are instead of casting
            them to tensors. Defaults to ``False``.
        shadow (bool): allow field names that shadow TensorDict attributes.
            Defaults to ``False``.
        tensor_only (bool): every field is a tensor, a TensorDict, a tensorclass or
            ``NonTensorData`` (``None`` allowed), as its annotation says (checked when
            the class is made); values are cast to it (numbers to tensors, mappings to
            TensorDicts). Exclusive with ``autocast`` and ``nocast``. Defaults to ``False``.
        skip_post_init_on_rebuild (bool): ``__post_init__`` runs in the generated
            ``__init__`` and in ``from_tensordict`` but not when an op rebuilds an
            instance from an existing one's data (indexing, ``clone``, ``to``, ...).
            Accepted for tensordict 0.15; here rebuilds never run ``__post_init__``
            whatever the value (0.15.3 runs it on rebuilds by default: docs/design.md).

    Returns:
        the tensorclass (or a decorator when called with keywords only).

    Raises:
        AttributeError: a field name is reserved (``batch_size``, ``device``, ...) or
            shadows a TensorDict attribute without ``shadow=True``.
        ValueError: ``autocast`` and ``nocast`` are both ``True``.
        TypeError: ``tensor_only`` with ``autocast`` or ``nocast``, or a
            ``tensor_only`` field annotated with a non-tensor type.

    Examples:
        >>> import torch
        >>> from tensordict import tensorclass
        >>> @tensorclass
        ... class MyData:
        ...     image: torch.Tensor
        ...     label: torch.Tensor
        ...
        ...     def select_label(self, label):
        ...         return self[self.label == label]
        >>> data = MyData(torch.zeros(4, 3), label=torch.tensor([0, 1, 1, 2]), batch_size=[4])
        >>> sub = data.select_label(1)
        >>> type(sub).__name__, sub.batch_size
        ('MyData', torch.Size([2]))
        >>> data.reshape(2, 2).image.shape
        torch.Size([2, 2, 3])
    """
    options = {"autocast": autocast, "frozen": frozen, "nocast": nocast, "shadow": shadow}
    if tensor_only:
        options["tensor_only"] = True
    if skip_post_init_on_rebuild:
        options["skip_post_init_on_rebuild"] = True

    def wrap(klass: Any) -> Any:
        if not isinstance(klass, type):
            msg = f"@tensorclass expects a class, got {klass!r}."
            raise TypeError(msg)
        return build_tensorclass(klass, _TensorClassBase, options)

    if cls is None:
        return wrap
    return wrap(cls)


if TYPE_CHECKING:  # pragma: no cover

    @dataclass_transform(field_specifiers=(dataclasses.field,))
    class _DataclassLike(_TensorClassBase):
        """Seen by type checkers only: subclasses are dataclass-like."""

else:
    _DataclassLike = _TensorClassBase


class TensorClass(_DataclassLike):
    """Base class form of :func:`tensorclass`: ``class MyData(TensorClass): ...``.

    Subclasses are tensorclasses (their annotations are fields). Options are given as
    class keywords (``class MyData(TensorClass, autocast=True)``) or by subscription
    (``class MyData(TensorClass["autocast", "frozen"])``). Static type checkers see
    the constructor (fields plus ``batch_size``, ``device``, ``names``) and the
    TensorDict methods, typed to return the subclass.

    Examples:
        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Particles(TensorClass):
        ...     pos: torch.Tensor
        ...     mass: torch.Tensor
        ...     tag: str = "gas"
        >>> p = Particles(pos=torch.zeros(5, 3), mass=torch.ones(5), batch_size=[5])
        >>> p[:2].pos.shape, p.tag
        (torch.Size([2, 3]), 'gas')
        >>> class Frozen(TensorClass["frozen"]):
        ...     x: torch.Tensor
        >>> Frozen(x=torch.zeros(2), batch_size=[2]).x.shape
        torch.Size([2])
    """

    __slots__ = ()

    if TYPE_CHECKING:  # pragma: no cover
        # Seen by type checkers only: the keywords every constructor takes, declared as
        # keyword-only fields, which every subclass inherits.
        batch_size: Any = dataclasses.field(default=None, kw_only=True)
        device: Any = dataclasses.field(default=None, kw_only=True)
        names: Any = dataclasses.field(default=None, kw_only=True)

    if not TYPE_CHECKING:

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            msg = "TensorClass is a base class: subclass it with annotated fields (class MyData(TensorClass): ...)."
            raise TypeError(msg)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in OPTION_NAMES}
        try:
            super().__init_subclass__(**kwargs)
        except TypeError as err:
            if not kwargs:
                raise
            msg = f"{cls.__name__}: unknown tensorclass option(s) {sorted(kwargs)}; expected {list(OPTION_NAMES)}."
            raise TypeError(msg) from err
        if cls.__dict__.get("_tc_options_carrier"):
            return
        inherited = dict(getattr(cls, "_tc_options", {}))
        build_tensorclass(cls, _TensorClassBase, {**inherited, **options})

    def __class_getitem__(cls, item: Any) -> type:
        items = item if isinstance(item, tuple) else (item,)
        unknown = [i for i in items if i not in OPTION_NAMES]
        if unknown:
            msg = f"TensorClass[...] accepts {list(OPTION_NAMES)}, got {unknown}."
            raise TypeError(msg)
        key = tuple(sorted(set(items)))
        cached = _OPTION_BASES.get((cls, key))
        if cached is None:
            cached = type(cls)(  # type: ignore[misc]
                f"{cls.__name__}[{', '.join(repr(k) for k in key)}]",
                (cls,),
                {
                    "__slots__": (),
                    "_tc_options_carrier": True,
                    "_tc_options": {**getattr(cls, "_tc_options", {}), **dict.fromkeys(key, True)},
                    "__module__": cls.__module__,
                },
            )
            _OPTION_BASES[(cls, key)] = cached
        return cached


_OPTION_BASES: dict[tuple, type] = {}
