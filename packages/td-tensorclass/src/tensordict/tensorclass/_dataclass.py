"""``from_dataclass``: dataclass types become tensorclass types, dataclass instances
become tensorclass instances."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

__all__ = ["from_dataclass"]

#: dataclass type -> the tensorclass made from it, so that repeated conversions of
#: instances of one dataclass give instances of one tensorclass (they can be stacked)
_CONVERTED: dict[type, type] = {}


def _tensorclass_type(dc: type, options: dict) -> type:
    from tensordict.tensorclass._decorator import tensorclass

    key = dc
    cached = _CONVERTED.get(key)
    if cached is not None and not options:
        return cached
    namespace: dict[str, Any] = {
        "__module__": dc.__module__,
        "__qualname__": f"{dc.__qualname__}_tc",  # tensordict 0.15 names it X_tc
        "__doc__": dc.__doc__,
        "__annotations__": {},
    }
    for f in dataclasses.fields(dc):
        namespace["__annotations__"][f.name] = f.type
        if f.default is not dataclasses.MISSING:
            namespace[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f.name] = dataclasses.field(default_factory=f.default_factory)
    generated = {"__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__match_args__"}
    for name, value in vars(dc).items():
        if name.startswith("__") or name in generated or name in namespace["__annotations__"]:
            continue
        if callable(value) or isinstance(value, (property, classmethod, staticmethod)):
            namespace[name] = value
    klass = type(f"{dc.__name__}_tc", (), namespace)
    out = tensorclass(klass, **options)
    if not options:
        _CONVERTED[key] = out
    return out


def from_dataclass(
    obj: Any,
    *,
    dest_cls: type | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    as_tensorclass: bool = False,
    device: torch.device | None = None,
    batch_size: torch.Size | None = None,
    frozen: bool = False,
    autocast: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
) -> Any:
    """Converts a dataclass type into a tensorclass type, or a dataclass instance into a
    tensorclass instance.

    Args:
        obj: a dataclass type or instance.

    Keyword Args:
        dest_cls (type, optional): the tensorclass to build (instances only); defaults
            to a tensorclass made from ``type(obj)`` (the same one for every instance
            of that dataclass).
        auto_batch_size (bool): compute ``batch_size`` as the longest leading shape
            the tensor fields share. Defaults to ``False``.
        batch_dims (int, optional): with ``auto_batch_size``, keep at most this many
            dims.
        as_tensorclass (bool): accepted for signature compatibility with
            ``TensorDict.from_dataclass``; this function always returns a tensorclass.
        device (torch.device, optional): device of the instance.
        batch_size (torch.Size, optional): batch size of the instance (exclusive with
            ``auto_batch_size``).
        frozen, autocast, nocast, shadow, tensor_only (bool): options of the tensorclass made from
            a dataclass type (see :func:`tensorclass`).

    Returns:
        a tensorclass type (for a type) or an instance (for an instance). Nested
        dataclass instances become nested tensorclass instances.

    Raises:
        TypeError: ``obj`` is not a dataclass type or instance.
        ValueError: both ``batch_size`` and ``auto_batch_size`` are given.

    Examples:
        >>> import dataclasses, torch
        >>> from tensordict.tensorclass import from_dataclass
        >>> @dataclasses.dataclass
        ... class Obs:
        ...     x: torch.Tensor
        ...     tag: str = "a"
        >>> obs = from_dataclass(Obs(torch.zeros(3, 2)), auto_batch_size=True)
        >>> type(obs).__name__, obs.batch_size, obs.tag
        ('Obs_tc', torch.Size([3, 2]), 'a')
        >>> from_dataclass(Obs)(x=torch.zeros(4), batch_size=[4]).x.shape
        torch.Size([4])
    """
    from tensordict.tensorclass._registry import is_declared_tensorclass as is_tensorclass

    options = {
        k: v for k, v in {"frozen": frozen, "autocast": autocast, "nocast": nocast, "shadow": shadow, "tensor_only": tensor_only}.items() if v
    }
    if isinstance(obj, type):
        if not dataclasses.is_dataclass(obj):
            msg = f"from_dataclass expects a dataclass type or instance, got the class {obj.__name__}."
            raise TypeError(msg)
        if is_tensorclass(obj):
            return obj
        return _tensorclass_type(obj, options)
    if is_tensorclass(obj):
        return obj
    if not dataclasses.is_dataclass(obj):
        msg = f"from_dataclass expects a dataclass type or instance, got a {type(obj).__name__}."
        raise TypeError(msg)
    if batch_size is not None and auto_batch_size:
        msg = "from_dataclass: pass either batch_size or auto_batch_size=True, not both."
        raise ValueError(msg)
    cls = dest_cls if dest_cls is not None else _tensorclass_type(type(obj), options)
    values = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type) and not is_tensorclass(value):
            value = from_dataclass(value, auto_batch_size=auto_batch_size, batch_dims=batch_dims, device=device)
        values[f.name] = value
    if not auto_batch_size:
        return cls(**values, batch_size=batch_size, device=device)
    out = cls(**values, device=device)
    out._tensordict.auto_batch_size_(batch_dims)
    return out
