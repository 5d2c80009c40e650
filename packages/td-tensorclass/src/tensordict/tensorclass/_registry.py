"""The registry of tensorclass types, by name.

Every class built by ``@tensorclass`` or derived from ``TensorClass`` registers
itself under ``"<module>.<qualname>"``. Loaders that read a class name from
untrusted metadata (td-memmap's ``load_memmap``, for instance) resolve it here and
nowhere else: they never import a module or look a class up by its dotted path.

Contract for loaders:

- ``tensorclass_name(cls)`` gives the name to write in metadata;
- ``get_tensorclass(name)`` gives the registered class back, or raises ``KeyError``;
- ``cls.from_tensordict(td, non_tensordict)`` rebuilds an instance from the
  TensorDict that holds its fields (non-tensor fields may be ``NonTensorData``
  leaves of ``td``), and ``obj._tensordict`` / ``obj._non_tensordict`` are what to
  save.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "get_tensorclass",
    "is_tensorclass",
    "register_tensorclass",
    "registered_tensorclasses",
    "tensorclass_name",
]

_REGISTRY: dict[str, type] = {}


def tensorclass_name(cls: type) -> str:
    """The registry name of a tensorclass type: ``"<module>.<qualname>"``.

    Examples:
        >>> import torch
        >>> from tensordict.tensorclass import TensorClass, tensorclass_name
        >>> class Sample(TensorClass):
        ...     x: torch.Tensor
        >>> tensorclass_name(Sample).endswith("Sample")
        True
    """
    return f"{cls.__module__}.{cls.__qualname__}"


def register_tensorclass(cls: type, name: str | None = None) -> type:
    """Registers ``cls`` so that loaders can resolve it by name (done automatically).

    A later class with the same name replaces the earlier one (a class redefined in
    a notebook or in a test, for instance).

    Args:
        cls (type): a tensorclass type.
        name (str, optional): the name to register; defaults to
            :func:`tensorclass_name` of ``cls``.

    Returns:
        ``cls``.

    Raises:
        TypeError: ``cls`` is not a tensorclass type.
    """
    if not is_declared_tensorclass(cls):
        msg = f"register_tensorclass expects a tensorclass type, got {cls!r}."
        raise TypeError(msg)
    _REGISTRY[name or tensorclass_name(cls)] = cls
    return cls


def get_tensorclass(name: str) -> type:
    """The tensorclass type registered under ``name``.

    Raises:
        KeyError: nothing is registered under ``name`` (the message lists what is).

    Examples:
        >>> import torch
        >>> from tensordict.tensorclass import TensorClass, get_tensorclass, tensorclass_name
        >>> class Sample(TensorClass):
        ...     x: torch.Tensor
        >>> get_tensorclass(tensorclass_name(Sample)) is Sample
        True
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        known = sorted(_REGISTRY)
        if len(known) > 20:
            known = known[:20] + ["..."]
        msg = (
            f"no tensorclass is registered under {name!r}. Define (import) the class before "
            f"loading data that uses it. Registered: {known}."
        )
        raise KeyError(msg) from None


def registered_tensorclasses() -> dict[str, type]:
    """A copy of the registry: name -> tensorclass type."""
    return dict(_REGISTRY)


def is_tensorclass(obj: Any) -> bool:
    """``True`` for a tensorclass type or instance (not for TensorDicts).

    ``NonTensorData`` (and its subclasses, ``MetaData`` included) counts as a
    tensorclass, as in tensordict 0.15, where it is one.

    Examples:
        >>> import torch
        >>> from tensordict import NonTensorData, TensorDict
        >>> from tensordict.tensorclass import TensorClass, is_tensorclass
        >>> class Sample(TensorClass):
        ...     x: torch.Tensor
        >>> is_tensorclass(Sample), is_tensorclass(Sample(x=torch.zeros(2))), is_tensorclass(TensorDict())
        (True, True, False)
        >>> is_tensorclass(NonTensorData)
        True
    """
    cls = obj if isinstance(obj, type) else type(obj)
    from tensordict.ext import NonTensorData
    from tensordict.tensorclass._storage import _Slots

    return issubclass(cls, (_Slots, NonTensorData))


def is_declared_tensorclass(obj: Any) -> bool:
    """``True`` for a class made by ``@tensorclass`` / ``TensorClass`` (or an instance):
    the ones with fields, a ``_tensordict`` and a ``_non_tensordict``, which the
    registry, the loaders and the field annotations deal with."""
    cls = obj if isinstance(obj, type) else type(obj)
    from tensordict.tensorclass._storage import _Slots

    return issubclass(cls, _Slots)
