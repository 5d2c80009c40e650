"""``UnbatchedTensor``: a tensor leaf that ignores the batch dims of its TensorDict.

Its shape is free (it need not start with ``batch_size``). Batch-dim operations of
the TensorDict (indexing, reshape, permute, stack, cat, split, ...) keep it whole (the
same storage) and only update its ``batch_size`` attribute; operations that act on the
values of every leaf (``apply``, casts, ``to``, math) act on it as on any tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["UnbatchedTensor"]

_Size = torch.Size


class UnbatchedTensor(torch.Tensor):
    """A tensor stored whole in a TensorDict, outside its batch dims.

    Args:
        data (torch.Tensor or array-like): the values; any shape.
        batch_size (sequence of int, optional): the batch size it reports; a
            TensorDict sets it to its own ``batch_size`` on write. Defaults to ``[]``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, UnbatchedTensor
        >>> td = TensorDict(a=UnbatchedTensor(torch.zeros(7)), b=torch.zeros(3, 2), batch_size=[3])
        >>> td[0]["a"].shape, td[0].get("a").batch_size
        (torch.Size([7]), torch.Size([]))
    """

    _pass_through = True
    #: the batch size; an instance attribute once set (a plain attribute read, which
    #: torch.compile can trace, unlike a read of the instance ``__dict__``)
    _batch_size = _Size(())

    @staticmethod
    def __new__(cls, data: Any, batch_size: Any = None) -> UnbatchedTensor:
        if not isinstance(data, torch.Tensor):
            data = torch.as_tensor(data)
        elif isinstance(data, UnbatchedTensor):
            data = data.as_subclass(torch.Tensor)
        out = torch.Tensor._make_subclass(cls, data, data.requires_grad)
        out._batch_size = _Size(()) if batch_size is None else _Size(batch_size)
        return out

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: D107 - set in __new__
        # (any arguments: under torch.compile, Dynamo calls it with its own)
        pass

    @property
    def batch_size(self) -> torch.Size:
        """The batch size of the TensorDict that holds it (``[]`` when alone)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        self._batch_size = _Size(value)

    @property
    def data(self) -> torch.Tensor:  # type: ignore[override]
        """The values as a plain tensor (same storage)."""
        return self.as_subclass(torch.Tensor)

    def _rebatch(self, batch_size: Any) -> UnbatchedTensor:
        """The same storage, reporting ``batch_size``."""
        return UnbatchedTensor(self.as_subclass(torch.Tensor), batch_size)

    def _batch_transform(self, fn: Callable[[torch.Tensor, int], torch.Tensor], nd: int) -> UnbatchedTensor:
        shape = fn(torch.zeros((), dtype=torch.uint8).expand(self.batch_size), nd).shape
        return self._rebatch(shape)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        batch_size = None
        for a in args:
            if isinstance(a, UnbatchedTensor):
                batch_size = a.batch_size
                break
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if batch_size is None:
            return out
        return _wrap(out, batch_size)

    # Python conversions give what the plain tensor gives
    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        return f"UnbatchedTensor({self.as_subclass(torch.Tensor)!r})"

    def __str__(self) -> str:
        return str(self.as_subclass(torch.Tensor))

    def __format__(self, spec: str) -> str:
        return format(self.as_subclass(torch.Tensor), spec)

    def __bool__(self) -> bool:
        return bool(self.as_subclass(torch.Tensor))

    def __int__(self) -> int:
        return int(self.as_subclass(torch.Tensor))

    def __float__(self) -> float:
        return float(self.as_subclass(torch.Tensor))

    def __complex__(self) -> complex:
        return complex(self.as_subclass(torch.Tensor))

    def __index__(self) -> int:
        return self.as_subclass(torch.Tensor).__index__()

    def __round__(self, ndigits: Any = None) -> Any:
        plain = self.as_subclass(torch.Tensor)
        return round(plain) if ndigits is None else round(plain, ndigits)  # type: ignore[call-overload]

    def __trunc__(self) -> Any:
        import math

        return math.trunc(self.as_subclass(torch.Tensor))  # type: ignore[arg-type]

    def __floor__(self) -> Any:
        import math

        return math.floor(self.as_subclass(torch.Tensor))

    def __ceil__(self) -> Any:
        import math

        return math.ceil(self.as_subclass(torch.Tensor))

    def item(self) -> Any:
        return self.as_subclass(torch.Tensor).item()

    def tolist(self) -> Any:
        return self.as_subclass(torch.Tensor).tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        plain = self.as_subclass(torch.Tensor)
        return plain.__array__(dtype) if dtype is not None else plain.__array__()

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return (UnbatchedTensor, (self.as_subclass(torch.Tensor), tuple(self.batch_size)))


def _wrap(out: Any, batch_size: torch.Size) -> Any:
    if isinstance(out, torch.Tensor) and not isinstance(out, UnbatchedTensor):
        return UnbatchedTensor(out, batch_size)
    if isinstance(out, (tuple, list)):
        return type(out)(_wrap(o, batch_size) for o in out)
    return out
