"""Device, dtype and memory placement (``DeviceMixin``): ``to``, ``cpu``, ``cuda``,
dtype casts, ``pin_memory``, ``share_memory_``, ``clear_device_``."""

from __future__ import annotations

import builtins
import warnings
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from tensordict import _classes
from tensordict._attrs import attrs_of, is_attrs_spec, to_attrs
from tensordict._casts_generated import DtypeCastsMixin
from tensordict._host import TensorDictHost

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing_extensions import Self

    from tensordict._base import TensorDictBase

__all__ = ["DTYPE_CASTS", "DeviceMixin"]

#: the dtype cast methods (name -> ``torch`` dtype attribute), generated into
#: ``_casts_generated.py`` by ``tools/gen_ops.py``
DTYPE_CASTS = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int": "int32",
    "long": "int64",
    "short": "int16",
    "byte": "uint8",
    "char": "int8",
    "bool": "bool",
    **{
        name: name
        for name in (
            "float16", "float32", "float64", "int8", "int16", "int32", "int64",
            "uint8", "uint16", "uint32", "uint64", "complex32", "complex64", "complex128",
            "qint8", "quint8", "qint32", "quint4x2",
        )
    },
}


def _share_non_tensor_stacks(td: Any) -> None:
    """Puts the objects of every ``NonTensorStack`` in ``td`` in shared memory, so that
    workers' writes reach the parent (as for the tensors)."""
    todo = [td]  # an explicit stack: any depth
    while todo:
        for _, value in todo.pop()._items_raw():
            if value.__class__ is _classes.NonTensorStack:
                value.share_memory_()
            elif value.__class__ is _classes.TensorDict:
                todo.append(value)


#: ``to(dtype)`` of one tensor through its dtype method (same result, less parsing)
_CAST_METHODS = {
    torch.float64: torch.Tensor.double,
    torch.float32: torch.Tensor.float,
    torch.float16: torch.Tensor.half,
    torch.bfloat16: torch.Tensor.bfloat16,
    torch.int64: torch.Tensor.long,
    torch.int32: torch.Tensor.int,
    torch.int16: torch.Tensor.short,
    torch.int8: torch.Tensor.char,
    torch.uint8: torch.Tensor.byte,
    torch.bool: torch.Tensor.bool,
}


def _to_device(device: Any) -> torch.device | None:
    """``device`` as a ``torch.device`` (an int is a CUDA index; bare ``cuda`` gets the current index)."""
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device("cuda", device)
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _parse_to(args: tuple, kwargs: dict) -> tuple[Any, Any, bool, Any]:
    batch_size = kwargs.pop("batch_size", None)
    other = kwargs.pop("other", None) if not args else None
    if args and isinstance(args[0], _classes.TensorDictBase):
        other = args[0]
    if isinstance(other, _classes.TensorDictBase):  # its device, and its dtype when all leaves share one
        return other.device, other.dtype, bool(kwargs.get("non_blocking", False)), batch_size
    if other is not None:
        args = (other,)
    if args and isinstance(args[0], int) and not isinstance(args[0], bool):
        args = (torch.device("cuda", args[0]), *args[1:])
    device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
    return device, dtype, non_blocking, batch_size


class DeviceMixin(DtypeCastsMixin, TensorDictHost):
    """Moves and casts every leaf at once."""

    def to(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        """Moves and/or casts every leaf; returns a new TensorDict (``self`` if nothing changes).

        Accepts the forms of ``torch.Tensor.to``: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)``, ``to(other_tensordict)`` (its device), plus
        ``non_blocking=``. After a non-blocking copy to the CPU the stream is
        synchronised before returning, so values read right after are correct.

        Args:
            *args: a device, a dtype, both, or a tensor or TensorDict to match, as for
                ``torch.Tensor.to``.
            **kwargs: ``device=``, ``dtype=``, ``non_blocking=``, ``batch_size=`` (the
                result's batch size), and tensordict's ``non_blocking_pin=`` and
                ``num_threads=``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.to(torch.float64)["a"].dtype
            torch.float64
            >>> td.to("cpu").device
            device(type='cpu')
        """
        if args and isinstance(args[0], _classes.TensorDictBase) and is_attrs_spec(args[0]):
            return to_attrs(self, args[0], args[1:], kwargs)
        if kwargs:
            kwargs = dict(kwargs)
            inplace = kwargs.pop("inplace", False)
            kwargs.pop("num_threads", None)  # leaves are moved by torch's own copy engine
            pin = kwargs.pop("non_blocking_pin", False)
            cast_filter = kwargs.pop("cast_filter", None)
            if cast_filter is not None:
                return self._to_filtered(args, kwargs, cast_filter)
            if inplace or pin:
                return self._to_with_options(args, kwargs, inplace, pin)
        device, dtype, non_blocking, batch_size = _parse_to(args, dict(kwargs))
        if device is not None:
            device = torch.device(device)
            if device.type == "cuda" and device.index is None and torch.cuda.is_available():
                device = torch.device("cuda", torch.cuda.current_device())
        if device is None and dtype is None:
            if batch_size is not None:
                out = self.clone(recurse=False)
                out.batch_size = batch_size
                return out
            return self  # type: ignore[return-value]
        fn: Callable[[Any], Any] | None
        if dtype is None:
            if device == self.device:
                return self  # type: ignore[return-value]
            if batch_size is None and getattr(self, "_consolidated", None) is not None:
                out = self._to_consolidated(device, non_blocking)  # one copy of one buffer
                if out is not None:
                    return _track_move(self, out)
            fn = lambda t: t.to(device, non_blocking=non_blocking)  # noqa: E731
        elif device is None:
            # ``Tensor.double()`` & co. skip the argument parsing of ``Tensor.to``
            fn = _CAST_METHODS.get(dtype) if not non_blocking else None
            if fn is None:
                fn = lambda t: t.to(dtype, non_blocking=non_blocking)  # noqa: E731
        else:
            fn = lambda t: t.to(device, dtype, non_blocking=non_blocking)  # noqa: E731
        new_device = device if device is not None else self.device
        out = self._map_leaves(fn, keep_non_tensor=True, device=new_device)
        if device is not None:
            out._set_device_tree(device)
        if non_blocking and device is not None and device.type == "cpu" and torch.cuda.is_available():
            torch.cuda.synchronize()
        if batch_size is not None:
            out.batch_size = batch_size
        else:
            _track_move(self, out)  # ``with td.to(...) as moved:`` writes back on exit
        return out

    def attrs(self, *, fields: Sequence[str] = ("device", "dtype", "shape"), num_threads: int | None = None) -> Any:
        """A TensorDict (batch size ``[]``, no device) describing each tensor leaf with a
        :class:`~tensordict.TensorAttrs`; pass it to :meth:`to` to cast another
        TensorDict leaf by leaf.

        Keyword Args:
            fields (sequence of str): what to record, among ``"device"``, ``"dtype"``
                and ``"shape"`` (the others stay ``None``).
            num_threads (int, optional): accepted for compatibility (one thread).

        Raises:
            ValueError: an unknown field.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(3), b=torch.zeros(3, dtype=torch.int32), batch_size=[3])
            >>> target = TensorDict(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])
            >>> target.to(td.attrs(fields=("dtype",)))["b"].dtype
            torch.int32
        """
        return attrs_of(self, fields)

    def _to_filtered(self, args: tuple, kwargs: dict, cast_filter: Any) -> Any:
        """``to(..., cast_filter=fn)``: the dtype goes only to the tensor leaves for which
        ``fn(key as a tuple of str, value)`` is true; a device change moves every leaf."""
        device, dtype, non_blocking, batch_size = _parse_to(args, dict(kwargs))
        out: TensorDictBase = (
            self.to(device, non_blocking=non_blocking) if device is not None else cast("TensorDictBase", self)
        )
        if dtype is not None:

            def cast_leaf(key: Any, value: torch.Tensor) -> torch.Tensor:
                path = key if isinstance(key, tuple) else (key,)
                return value.to(dtype, non_blocking=non_blocking) if cast_filter(path, value) else value

            # ``cast_leaf`` gives every leaf a tensor: ``named_apply`` returns a TensorDict
            out = cast("TensorDictBase", out.named_apply(cast_leaf, nested_keys=True))
        if batch_size is not None:
            out = out.to(batch_size=batch_size)
        return out

    def _to_with_options(self, args: tuple, kwargs: dict, inplace: bool, pin: bool) -> Any:
        """``to`` with ``inplace=True`` (leaves replaced in ``self``) or ``non_blocking_pin=True``
        (leaves pinned, then copied without blocking)."""
        if pin:
            device, dtype, _, batch_size = _parse_to(args, dict(kwargs))
            device = _to_device(device)
            if batch_size is not None or dtype is not None or device is None:
                msg = "to(non_blocking_pin=True) takes a device only (no dtype or batch_size)."
                raise ValueError(msg)
            if device.type == "cpu":
                out = self.to(device)
            else:
                out = self._map_leaves(
                    lambda t: t.pin_memory().to(device, non_blocking=True), keep_non_tensor=True, device=device
                )
                out._set_device_tree(device)
        else:
            out = self.to(*args, **kwargs)
        if not inplace or out is self:
            return out
        if out.batch_size != self.batch_size:
            msg = "to(inplace=True) cannot change the batch_size; call it without inplace=True."
            raise RuntimeError(msg)
        for key, value in out._items_raw():
            self._set_raw(key, value)
        self._set_device_tree(out.device)
        return self

    def _set_device_tree(self, device: Any) -> None:
        self._device = device
        for key, value in list(self._items_raw()):
            if isinstance(value, _classes.TensorDictBase):
                try:
                    value._set_device_tree(device)
                except RecursionError:  # nested too deep (setting a device twice is harmless)
                    _device_tree_walk(value, device)
            elif not isinstance(value, torch.Tensor) and hasattr(value, "to"):
                self._set_raw(key, value.to(device))

    def cpu(self, **kwargs: Any) -> TensorDictBase:
        """``to("cpu")``."""
        return self.to("cpu", **kwargs)

    def cuda(self, device: Any = None, **kwargs: Any) -> TensorDictBase:
        """``to("cuda")`` (or ``cuda:<device>``).

        Args:
            device (int or torch.device, optional): the CUDA device (``None``: the current one).
            **kwargs: passed on to :meth:`to` (e.g. ``non_blocking``).
        """
        if device is None:
            return self.to("cuda", **kwargs)
        if isinstance(device, int):
            device = torch.device("cuda", device)
        return self.to(device, **kwargs)

    def type(self, dst_type: torch.dtype) -> TensorDictBase:
        return self.to(dst_type)

    def pin_memory(self, num_threads: builtins.int | None = None, inplace: builtins.bool = False) -> TensorDictBase:
        """Copies every leaf to page-locked memory (CPU TensorDicts, needs CUDA).

        Args:
            num_threads (int, optional): accepted for compatibility (torch copies the
                leaves).
            inplace (bool, optional): accepted for compatibility; a new TensorDict is
                returned.

        Returns:
            a TensorDict whose tensor leaves are pinned (same keys and batch size);
            ``self``, holding the pinned leaves, with ``inplace=True``.
        """
        out = self._map_leaves(torch.Tensor.pin_memory, keep_non_tensor=True)
        if not inplace:
            return out
        for key, value in out._items_raw():
            self._set_raw(key, value)
        return cast("TensorDictBase", self)

    def pin_memory_(self, num_threads: builtins.int = 0) -> Self:
        """Pins the tensor leaves in place and returns ``self`` (needs an accelerator).

        .. deprecated:: 0.15
            Use ``pin_memory(inplace=True)``.
        """
        warnings.warn(
            "TensorDictBase.pin_memory_() is deprecated and will be removed in TensorDict 0.17. "
            "Use pin_memory(inplace=True) instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return cast("Self", self.pin_memory(num_threads, inplace=True))

    def record_stream(self, stream: Any) -> Self:
        """Calls ``Tensor.record_stream(stream)`` on every tensor leaf; returns ``self``.

        A freed leaf's memory is then not reused before the work queued on ``stream``
        is done. A TensorDict is marked with one stream only.

        Raises:
            RuntimeError: the TensorDict is already marked with another stream.
        """
        current = self.__dict__.get("_recorded_stream")
        if current is not None and current != stream:
            msg = f"This TensorDict is already marked with the stream {current}; it cannot be marked with {stream} too."
            raise RuntimeError(msg)
        for leaf in self._tensor_leaves():
            leaf.record_stream(stream)
        self.__dict__["_recorded_stream"] = stream
        return self

    def is_pinned(self) -> builtins.bool:
        return all(t.is_pinned() for t in self._tensor_leaves())

    def is_floating_point(self) -> builtins.bool:
        """``True`` if every tensor leaf (nested ones too) is floating point; ``True`` when
        there is none. Non-tensor data is not checked.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict(a=torch.zeros(3), n={"b": torch.zeros(2, dtype=torch.long)}).is_floating_point()
            False
        """
        return all(t.is_floating_point() for t in self._tensor_leaves())

    @property
    def is_cpu(self) -> builtins.bool:
        """Whether the TensorDict's device is a CPU (``False`` without a device)."""
        return self.device is not None and self.device.type == "cpu"

    @property
    def is_cuda(self) -> builtins.bool:
        """Whether the TensorDict's device is a CUDA device (``False`` without a device)."""
        return self.device is not None and self.device.type == "cuda"

    @property
    def is_meta(self) -> builtins.bool:
        """Whether the TensorDict's device is ``meta`` (``False`` without a device)."""
        return self.device is not None and self.device.type == "meta"

    def clear_device_(self) -> Self:
        """Sets ``device`` to ``None`` here and in every nested TensorDict (leaves stay put)."""
        mine = DeviceMixin.clear_device_
        todo: list[Any] = [self]  # without recursion: nesting of any depth
        while todo:
            td = todo.pop()
            td._device = None
            for _, value in td._items_raw():
                if isinstance(value, _classes.TensorDictBase):
                    if type(value).clear_device_ is mine:
                        todo.append(value)
                    else:
                        value.clear_device_()
        return self

    def auto_device_(self) -> Self:
        """Sets ``device`` to the device of the tensor leaves, if they all share one.

        The nested TensorDicts get the same device; leaves on several devices (or no
        tensor leaf at all) give ``None``. No leaf is moved.

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(3), batch_size=[3])
            >>> print(td.device)
            None
            >>> td.auto_device_().device
            device(type='cpu')
        """
        devices = {leaf.device for leaf in self._tensor_leaves()}
        if len(devices) != 1:
            return self.clear_device_()
        self._set_device_tree(devices.pop())
        return self

    def _tensor_leaves(self) -> list[torch.Tensor]:
        out = []
        for _, value in self._items_raw():
            if isinstance(value, torch.Tensor):
                out.append(value)
            elif isinstance(value, _classes.TensorDictBase):
                try:
                    out.extend(value._tensor_leaves())
                except RecursionError:  # nested too deep: the rest without recursion
                    out.extend(_tensor_leaves_walk(value))
        return out

    def share_memory_(self) -> Self:
        """Moves every CPU leaf to shared memory in place (for ``torch.multiprocessing``).

        The TensorDict is locked afterwards, as its storage is now shared.
        """
        for t in self._tensor_leaves():
            t.share_memory_()
        _share_non_tensor_stacks(self)
        self._is_shared = True
        self.lock_()
        return self

    def is_shared(self) -> builtins.bool:
        """``True`` if the leaves live in shared memory (or on CUDA). Memory-mapped leaves
        (``MemoryMappedTensor``) do not count: a memory-mapped TensorDict reports ``False``,
        as in tensordict 0.15, and ``is_memmap()`` tells it apart."""
        leaves = self._tensor_leaves()
        if not leaves:
            return bool(getattr(self, "_is_shared", False))
        return all((t.is_shared() and not getattr(t, "_memory_mapped", False)) or t.is_cuda for t in leaves)


def _device_tree_walk(td: Any, device: Any) -> None:
    """``td._set_device_tree(device)`` without recursion (nesting of any depth)."""
    mine = DeviceMixin._set_device_tree
    todo: list[Any] = [td]
    while todo:
        node = todo.pop()
        node._device = device
        for key, value in list(node._items_raw()):
            if isinstance(value, _classes.TensorDictBase):
                if type(value)._set_device_tree is mine:
                    todo.append(value)
                else:
                    value._set_device_tree(device)
            elif not isinstance(value, torch.Tensor) and hasattr(value, "to"):
                node._set_raw(key, value.to(device))


def _track_move(source: Any, moved: Any) -> Any:
    """``with td.to(device) as moved: ...`` writes back on exit, as upstream: new keys are
    set in ``source`` and changed values copied into its leaves, moved back to ``source``'s
    device (a ``source`` without device keeps the new leaves where they are). The record
    is the one the shape ops keep (``_shape_context.py``); nothing else is paid when the
    result is not used as a context manager; ``source`` is held weakly, and a ``source``
    gone by the exit gets nothing."""
    device = source.device
    # a weak reference: ``td = td.to("cuda")`` must not keep the old copy alive
    moved._shape_source = (weakref.ref(source), (lambda r: r) if device is None else (lambda r: r.to(device)))
    return moved


def _tensor_leaves_walk(td: Any) -> list:
    """``td._tensor_leaves()`` without recursion: every tensor leaf, depth first in key order."""
    mine = DeviceMixin._tensor_leaves
    tdb = _classes.TensorDictBase
    out: list = []
    todo = [iter(td._items_raw())]
    while todo:
        for _, value in todo[-1]:
            if isinstance(value, torch.Tensor):
                out.append(value)
            elif isinstance(value, tdb):
                if type(value)._tensor_leaves is mine:
                    todo.append(iter(value._items_raw()))
                    break
                out.extend(value._tensor_leaves())
        else:
            todo.pop()
    return out
