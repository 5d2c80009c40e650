"""``TensorAttrs`` and per-leaf casting: ``td.attrs()`` and ``td.to(attrs_td)``.

``td.attrs()`` describes every tensor leaf with a :class:`TensorAttrs` (its device,
dtype and shape) in a TensorDict of batch size ``[]`` and no device. Passing such a
TensorDict to ``other.to(spec)`` casts each leaf of ``other`` to the device and
dtype recorded under the same key: one call for TensorDicts whose leaves live on
different devices or have different dtypes. Keys the spec lacks pass through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict import _classes
from tensordict._nontensor import NonTensorData

__all__ = ["TensorAttrs", "attrs_of", "is_attrs_spec", "to_attrs"]

_FIELDS = ("device", "dtype", "shape")


class TensorAttrs(NonTensorData):
    """The device, dtype and shape a tensor leaf should have (``None``: keep as is).

    A non-tensor leaf that, like :class:`~tensordict.MetaData`, indexing and shape
    ops keep whole.

    Args:
        tgt_device (torch.device, optional): the target device.
        tgt_dtype (torch.dtype, optional): the target dtype.
        tgt_shape (torch.Size, optional): the recorded shape (informative).

    Keyword Args:
        batch_size (torch.Size or sequence of int): the batch size of the leaf.
        device (torch.device, optional): informative only.
        names (list of str, optional): ignored (accepted as for every leaf).

    Examples:
        >>> import torch
        >>> from tensordict import TensorAttrs, TensorDict
        >>> spec = TensorDict({"a": TensorAttrs(tgt_dtype=torch.int32, batch_size=())}, [])
        >>> TensorDict(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3]).to(spec)["a"].dtype
        torch.int32
    """

    __slots__ = ("tgt_device", "tgt_dtype", "tgt_shape")
    _keeps_whole = True

    def __init__(
        self,
        tgt_device: Any = None,
        tgt_dtype: Any = None,
        tgt_shape: Any = None,
        *,
        batch_size: Sequence[int] | None = None,
        device: Any = None,
        names: Any = None,
    ) -> None:
        super().__init__(None, batch_size, device)
        self.data = self  # td[key] gives the TensorAttrs itself
        self.tgt_device = torch.device(tgt_device) if tgt_device is not None else None
        self.tgt_dtype = tgt_dtype
        self.tgt_shape = torch.Size(tgt_shape) if tgt_shape is not None else None

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, *, fields: Sequence[str] = _FIELDS) -> TensorAttrs:
        """The attributes of ``tensor`` named in ``fields`` (the others are ``None``).

        Args:
            tensor (torch.Tensor): the tensor described.

        Keyword Args:
            fields (sequence of str): among ``"device"``, ``"dtype"`` and ``"shape"``;
                other names are ignored, as in tensordict 0.15. Defaults to all three.

        Returns:
            a :class:`TensorAttrs` of batch size ``[]``.

        Examples:
            >>> import torch
            >>> attrs = TensorAttrs.from_tensor(torch.zeros(2, 3), fields=("dtype",))
            >>> attrs.tgt_dtype, attrs.tgt_shape
            (torch.float32, None)
        """
        return cls(
            tensor.device if "device" in fields else None,
            tensor.dtype if "dtype" in fields else None,
            tensor.shape if "shape" in fields else None,
            batch_size=(),
        )

    def _rebuild(self, batch_size: Sequence[int]) -> TensorAttrs:
        return TensorAttrs(
            self.tgt_device, self.tgt_dtype, self.tgt_shape, batch_size=batch_size, device=self._device
        )

    def clone(self, recurse: bool = True) -> TensorAttrs:
        """A copy (the recorded attributes are immutable values)."""
        return self._rebuild(self._batch_size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorAttrs):
            return NotImplemented
        return (self.tgt_device, self.tgt_dtype, self.tgt_shape) == (
            other.tgt_device,
            other.tgt_dtype,
            other.tgt_shape,
        )

    __hash__ = object.__hash__  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"TensorAttrs(tgt_device={self.tgt_device}, tgt_dtype={self.tgt_dtype}, "
            f"tgt_shape={self.tgt_shape}, batch_size={self._batch_size})"
        )

    def __reduce__(self) -> tuple:
        return (_rebuild_attrs, (self.tgt_device, self.tgt_dtype, self.tgt_shape, tuple(self._batch_size), self._device))

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return self.__reduce__()


def _rebuild_attrs(tgt_device: Any, tgt_dtype: Any, tgt_shape: Any, batch_size: tuple, device: Any) -> TensorAttrs:
    return TensorAttrs(tgt_device, tgt_dtype, tgt_shape, batch_size=batch_size, device=device)


def attrs_of(td: Any, fields: Sequence[str] = _FIELDS) -> Any:
    """The TensorDict of :class:`TensorAttrs` describing the tensor leaves of ``td``.

    Raises:
        ValueError: a field is not one of ``"device"``, ``"dtype"``, ``"shape"``.
    """
    fields = tuple(fields)
    bad = [f for f in fields if f not in _FIELDS]
    if bad:
        msg = f"attrs: unknown field(s) {bad}; choose among {list(_FIELDS)}."
        raise ValueError(msg)
    want_device, want_dtype, want_shape = ("device" in fields), ("dtype" in fields), ("shape" in fields)
    source = {}
    for key, value in td._items_raw():
        if isinstance(value, torch.Tensor):
            source[key] = TensorAttrs(
                value.device if want_device else None,
                value.dtype if want_dtype else None,
                value.shape if want_shape else None,
                batch_size=(),
            )
        elif isinstance(value, _classes.TensorDictBase):
            source[key] = attrs_of(value, fields)
    return _classes.TensorDict._new_unsafe(source, torch.Size(()), None)


def is_attrs_spec(value: Any) -> bool:
    """``True`` if ``value`` is a TensorDict holding :class:`TensorAttrs` leaves."""
    if not isinstance(value, _classes.TensorDictBase):
        return False
    for _, v in value._items_raw():
        if isinstance(v, TensorAttrs):
            return True
        if isinstance(v, _classes.TensorDictBase) and is_attrs_spec(v):
            return True
    return False


def to_attrs(td: Any, spec: Any, extra_args: tuple, kwargs: dict) -> Any:
    """``td.to(spec)``: each tensor leaf cast to the device/dtype recorded under its key.

    Raises:
        TypeError: positional arguments after the spec.
        NotImplementedError: ``non_blocking_pin=True``.
    """
    if extra_args:
        msg = f"to(attrs) does not accept additional positional arguments, got {extra_args!r}."
        raise TypeError(msg)
    if kwargs.get("non_blocking_pin"):
        msg = "to(attrs) does not support non_blocking_pin=True; pin the leaves first."
        raise NotImplementedError(msg)
    non_blocking = bool(kwargs.get("non_blocking", False))
    return _cast(td, spec, non_blocking)


def _cast(td: Any, spec: Any, non_blocking: bool) -> Any:
    source = {}
    for key, value in td._items_raw():
        target = spec._get_raw(key, None)
        if isinstance(value, torch.Tensor) and isinstance(target, TensorAttrs):
            if target.tgt_device is not None or target.tgt_dtype is not None:
                value = value.to(device=target.tgt_device, dtype=target.tgt_dtype, non_blocking=non_blocking)
        elif isinstance(value, _classes.TensorDictBase) and isinstance(target, _classes.TensorDictBase):
            value = _cast(value, target, non_blocking)
        source[key] = value
    devices = {v.device for v in source.values() if isinstance(v, torch.Tensor)}
    device = td.device if td.device is not None and devices <= {td.device} else None
    names = td.names if td._has_names() else None
    return _classes.TensorDict._new_unsafe(source, td.batch_size, device, names)
