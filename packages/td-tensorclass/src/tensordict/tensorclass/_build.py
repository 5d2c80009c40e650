"""Turning a class body into a tensorclass: fields, the generated ``__init__``,
reserved names, options, registration.

Used by both front doors, the ``@tensorclass`` decorator and ``TensorClass``
subclassing (``_decorator.py``). Fields are parsed with :mod:`dataclasses` (so
``field(default_factory=...)``, ``KW_ONLY``, ``ClassVar`` and inheritance behave as
for dataclasses); the ``__init__`` is generated here, and the class attributes that
dataclasses leave for defaults are removed so that reading a field finds the
instance dict first (see ``_storage.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tensordict.ext import TensorDictBase
from tensordict.tensorclass._base import _init_empty, _init_instance
from tensordict.tensorclass._pytree import register_pytree
from tensordict.tensorclass._registry import register_tensorclass
from tensordict.tensorclass._storage import _Slots, check_tensor_only_hints

__all__: list[str] = []

OPTION_NAMES = ("autocast", "nocast", "frozen", "shadow", "tensor_only", "skip_post_init_on_rebuild")
#: names a field can never take: constructor keywords and the instance layout
_ALWAYS_RESERVED = frozenset(
    {"batch_size", "device", "names", "shape", "non_blocking", "lock", "self"} | set(_Slots.__slots__)
)
#: constructor keywords that ``shadow=True`` lets a field take (the field then replaces the keyword)
_SHADOWABLE = frozenset({"batch_size", "device", "names"})
#: TensorDict attributes a field may take without ``shadow=True``, as upstream allows
_FREE_NAMES = frozenset({"data"})
_FACTORY = object()
#: default of a parameter whose field default is an object (a tensor, ...): the generated
#: __init__ reads the object from its globals instead of its ``__defaults__``, because
#: torch.compile cannot wrap a tensor found in the defaults of a method it reaches
#: without a source (``Cls()`` inside a compiled function)
_DEFAULT = object()
_LITERALS = (bool, int, float, complex, str, bytes)


class _FieldReader:
    """Class attribute for a field whose name a base class also defines as a class
    attribute: makes the lookup fall through to the instance's storage."""

    __slots__ = ("name", "default")

    def __init__(self, name: str, default: Any) -> None:
        self.name = name
        self.default = default

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self.default
        return obj.get(self.name)


def _reserved_names(base: type) -> set[str]:
    names = {n for n in dir(TensorDictBase) if not n.startswith("__")}
    names |= {n for n in dir(base) if not n.startswith("__")}
    return names


def _check_names(cls: type, names: list[str], shadow: bool, base: type) -> None:
    for name in names:
        if name in _ALWAYS_RESERVED and not (shadow and name in _SHADOWABLE):
            msg = (
                f"{cls.__name__}: a field cannot be named {name!r} (reserved for the tensorclass "
                "constructor or layout); rename the field."
            )
            raise AttributeError(msg)
    if shadow:
        return
    reserved = _reserved_names(base) - _FREE_NAMES
    for name in names:
        if name in reserved:
            msg = (
                f"Attribute name {name} can't be used with @tensorclass ({cls.__name__}): it shadows "
                f"the TensorDict attribute of the same name; rename the field, or pass shadow=True to allow it (then "
                f"`obj.{name}` is the field, not the method)."
            )
            raise AttributeError(msg)


def _make_init(target: type, fields: list[dataclasses.Field]) -> Any:
    """Generates ``__init__(self, <fields>, *, batch_size=None, device=None, names=None,
    non_blocking=False, lock=False)``."""
    globs: dict[str, Any] = {
        "_init": _init_instance,
        "_FACTORY": _FACTORY,
        "_DEFAULT": _DEFAULT,
        "_MISSING": dataclasses.MISSING,
    }
    positional, keyword = [], []
    seen_default = None
    object_defaults = {}
    for f in fields:
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if f.default is not dataclasses.MISSING:
            globs[f"_d_{f.name}"] = f.default
            if f.default is None or type(f.default) in _LITERALS:
                param = f"{f.name}=_d_{f.name}"
            else:
                object_defaults[f.name] = f.default
                param = f"{f.name}=_DEFAULT"
        elif f.default_factory is not dataclasses.MISSING:
            globs[f"_f_{f.name}"] = f.default_factory
            param = f"{f.name}=_FACTORY"
        else:
            param = f.name
        if f.kw_only:
            keyword.append(param)
            continue
        if has_default:
            seen_default = f.name
        elif seen_default is not None:
            msg = (
                f"{target.__name__}: field {f.name!r} has no default but follows field "
                f"{seen_default!r}, which has one; give {f.name!r} a default or make it keyword-only."
            )
            raise TypeError(msg)
        positional.append(param)
    values = []
    for f in fields:
        if f.default_factory is not dataclasses.MISSING and f.default is dataclasses.MISSING:
            values.append(f"(_f_{f.name}() if {f.name} is _FACTORY else {f.name})")
        elif f.name in object_defaults:
            values.append(f"(_d_{f.name} if {f.name} is _DEFAULT else {f.name})")
        else:
            values.append(f.name)
    # surplus positional arguments land in ``_extra`` and are refused with Python's own
    # wording for a plain function ("takes 3 positional arguments but 5 were given"),
    # which would otherwise also count the keyword-only arguments given
    params = ["self", *positional, "*_extra", *keyword]
    field_names = {f.name for f in fields}
    # a field named batch_size/device/names (shadow=True) replaces the constructor keyword
    ctor = [k for k in ("batch_size", "device", "names") if k not in field_names]
    params += [f"{k}=None" for k in ctor] + ["non_blocking=False", "lock=False"]
    ctor_args = ", ".join(k if k in ctor else "None" for k in ("batch_size", "device", "names"))
    tuple_src = "(" + "".join(f"{v}, " for v in values) + ")"
    n_min = 1 + sum(1 for p in positional if "=" not in p)
    n_max = 1 + len(positional)
    takes = f"{n_max}" if n_min == n_max else f"from {n_min} to {n_max}"
    globs["_too_many"] = _too_many_positional
    src = (
        f"def __init__({', '.join(params)}):\n"
        f"    if _extra:\n"
        f"        _too_many(self, {takes!r}, {n_max} + len(_extra))\n"
        f"    _init(self, {tuple_src}, {ctor_args}, non_blocking, lock)\n"
    )
    exec(src, globs)  # noqa: S102 - generated from field names that are identifiers
    init = globs["__init__"]
    # the signature users see (and inspect.signature reports): the fields, then
    # batch_size, device and names; non_blocking and lock stay accepted as keywords
    import inspect

    sig = inspect.signature(init)
    init.__signature__ = sig.replace(
        parameters=[
            p.replace(default=object_defaults[p.name]) if p.name in object_defaults else p
            for p in sig.parameters.values()
            if p.name not in ("non_blocking", "lock", "_extra")
        ]
    )
    init.__qualname__ = f"{target.__qualname__}.__init__"
    init.__module__ = target.__module__
    init.__doc__ = (
        f"Builds a {target.__name__} from its fields plus ``batch_size`` (leading dims every "
        "tensor field shares; defaults to ``[]``), ``device``, ``names`` and ``lock``."
    )
    return init


def _too_many_positional(obj: Any, takes: str, given: int) -> None:
    plural = "" if takes == "1" else "s"
    msg = (
        f"{type(obj).__qualname__}.__init__() takes {takes} positional argument{plural} but {given} were given "
        f"(fields {list(type(obj)._tc_fields)}; batch_size, device and names are keyword-only)"
    )
    raise TypeError(msg)


def _wrap_user_init(user_init: Any) -> Any:
    def __init__(self: Any, *args: Any, batch_size: Any = None, device: Any = None, names: Any = None, **kwargs: Any) -> None:
        _init_empty(self, batch_size, device, names)
        user_init(self, *args, **kwargs)

    __init__.__qualname__ = getattr(user_init, "__qualname__", "__init__")
    __init__.__doc__ = user_init.__doc__
    __init__.__wrapped__ = user_init  # type: ignore[attr-defined]
    return __init__


def _set_options(cls: type, options: dict[str, bool]) -> None:
    if options.get("autocast") and options.get("nocast"):
        msg = f"{cls.__name__}: autocast and nocast cannot both be True."
        raise ValueError(msg)
    if options.get("tensor_only") and (options.get("autocast") or options.get("nocast")):
        msg = (
            f"{cls.__name__}: tensor_only=True cannot be combined with autocast=True or nocast=True "
            "(tensor_only casts every value to the annotated tensor type itself)."
        )
        raise TypeError(msg)
    cls._tc_options = dict(options)  # type: ignore[attr-defined]
    cls._tc_autocast = bool(options.get("autocast", False))  # type: ignore[attr-defined]
    cls._tc_nocast = bool(options.get("nocast", False))  # type: ignore[attr-defined]
    cls._tc_frozen = bool(options.get("frozen", False))  # type: ignore[attr-defined]
    cls._tc_shadow = bool(options.get("shadow", False))  # type: ignore[attr-defined]
    cls._tc_tensor_only = bool(options.get("tensor_only", False))  # type: ignore[attr-defined]
    # False: ``__post_init__`` also runs when an op rebuilds an instance (tensordict 0.15)
    cls._tc_skip_post_init_on_rebuild = bool(options.get("skip_post_init_on_rebuild", False))  # type: ignore[attr-defined]
    # upstream's names for the same flags (``cls._autocast``, ...), read by downstream code
    for name in ("autocast", "nocast", "frozen", "shadow", "tensor_only", "skip_post_init_on_rebuild"):
        setattr(cls, f"_{name}", getattr(cls, f"_tc_{name}"))


def build_tensorclass(cls: type, base: type, options: dict[str, bool]) -> type:
    """Makes ``cls`` a tensorclass deriving from ``base`` (the shared instance
    behaviour). Returns the class to bind under the user's name: ``cls`` itself when it
    already derives from ``base``, otherwise a subclass of ``cls`` and ``base`` with the
    same name (a class body cannot gain the slots ``base`` needs after the fact)."""
    unknown = set(options) - set(OPTION_NAMES)
    if unknown:
        msg = f"{cls.__name__}: unknown tensorclass option(s) {sorted(unknown)}; expected {list(OPTION_NAMES)}."
        raise TypeError(msg)
    if "_tc_fields" in cls.__dict__:
        # processed already (a TensorClass subclass that is also decorated): options only
        _set_options(cls, {**cls.__dict__.get("_tc_options", {}), **options})
        return cls
    for name, value in cls.__dict__.get("__dataclass_fields__", {}).items():
        if getattr(value, "_field_type", None) is dataclasses._FIELD_INITVAR:  # type: ignore[attr-defined]
            msg = f"{cls.__name__}: InitVar field {name!r} is not supported by tensorclasses."
            raise TypeError(msg)
    user_init = cls.__dict__.get("__init__")
    dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = list(dataclasses.fields(cls))
    if any(isinstance(getattr(f, "type", None), dataclasses.InitVar) for f in fields):
        msg = f"{cls.__name__}: InitVar fields are not supported by tensorclasses."
        raise TypeError(msg)
    names = [f.name for f in fields]
    _check_names(cls, names, bool(options.get("shadow")), base)

    if issubclass(cls, base):
        target = cls
    else:
        try:
            target = type(cls)(  # type: ignore[misc]
                cls.__name__,
                (cls, base),
                {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__},
            )
        except TypeError as err:
            msg = f"@tensorclass cannot extend {cls.__name__} ({err}); remove __slots__ from the class."
            raise TypeError(msg) from None
    # defaults live in the Field objects; class attributes would shadow the instance dict
    for name in names:
        if name in cls.__dict__ and not isinstance(cls.__dict__[name], (property, classmethod, staticmethod)):
            delattr(cls, name)
    for f in fields:
        for klass in target.__mro__[1:]:
            if f.name in klass.__dict__:
                default = f.default if f.default is not dataclasses.MISSING else None
                setattr(target, f.name, _FieldReader(f.name, default))
                break
    target._tc_fields = tuple(names)  # type: ignore[attr-defined]
    target._tc_field_set = frozenset(names)  # type: ignore[attr-defined]
    target.__expected_keys__ = frozenset(names)  # type: ignore[attr-defined]  # upstream's name for the field set
    target._tc_user_setattr = any(  # type: ignore[attr-defined]
        "__setattr__" in klass.__dict__ for klass in target.__mro__ if not issubclass(base, klass) and klass is not object
    )
    _set_options(target, {**getattr(cls, "_tc_options", {}), **options})
    if user_init is not None:
        target.__init__ = _wrap_user_init(user_init)  # type: ignore[method-assign]
    else:
        target.__init__ = _make_init(target, fields)  # type: ignore[method-assign]
    if cls.__doc__ is None or cls.__doc__.startswith(f"{cls.__name__}("):
        target.__doc__ = f"{cls.__name__}({', '.join(names)}, *, batch_size=None, device=None, names=None)"
    if target._tc_tensor_only:  # type: ignore[attr-defined]
        check_tensor_only_hints(target)  # type: ignore[arg-type]
    register_tensorclass(target)
    register_pytree(target)
    return target
