"""Element-wise math on a lazy stack (``LazyMathMixin``).

Every element-wise method of :class:`~tensordict._ops.MathMixin` (``add``,
``exp``, ``clamp``, ``masked_fill``, the arithmetic operators, ...) and its
in-place variant (``add_``, ``+=``, ...) runs on each stacked TensorDict. The
in-place variants therefore change the stacked TensorDicts themselves, and the
out-of-place ones return a lazy stack (so stacks of leaves with different shapes
work too). Operands shaped like the stack (TensorDicts, tensors whose leading dims
reach the stack dim) are split along ``stack_dim``; anything else (numbers, tensors
covering only the dims before the stack dim) goes to every stacked TensorDict.

The methods are generated from ``MathMixin`` so that new math methods are
covered without being listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from tensordict import _classes
from tensordict._host import LazyStackHost
from tensordict._ops import MathMixin
from tensordict._ops_generated import GeneratedOpsMixin

__all__ = ["LazyMathMixin"]

_Tensor = torch.Tensor

#: out-of-place operator dunders that map leaf by leaf
_OPERATORS = (
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__pow__",
    "__rpow__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
    "__neg__",
    "__abs__",
    "__pos__",
    "__invert__",
)


def _split_operand(stack: Any, arg: Any) -> list | None:
    """``arg`` split into one part per stacked TensorDict, or ``None`` to pass it whole."""

    bs = stack._batch_size
    sd = stack.stack_dim
    if isinstance(arg, _classes.TensorDictBase) or (
        _classes.is_tensor_collection(arg) and hasattr(arg, "batch_size")
    ):
        if len(arg.batch_size) > sd and arg.batch_size[: sd + 1] == bs[: sd + 1]:
            return (
                stack._parts_of(arg, "math")
                if arg.batch_size[: len(bs)] == bs
                else list(arg.unbind(sd))
            )
        return None
    if isinstance(arg, _Tensor):
        if arg.ndim > sd and arg.shape[: sd + 1] == bs[: sd + 1]:
            return list(arg.unbind(sd))
        return None
    if isinstance(arg, Mapping):
        try:
            return _split_operand(stack, _classes.TensorDict(dict(arg), batch_size=bs))
        except RuntimeError:
            return None
    return None


def _per_td_call(stack: Any, name: str, args: tuple, kwargs: dict) -> list:
    tds = stack.tensordicts
    split_args = [_split_operand(stack, a) for a in args]
    split_kwargs = {k: _split_operand(stack, v) for k, v in kwargs.items()}
    out = []
    for i, td in enumerate(tds):
        a = [a if s is None else s[i] for a, s in zip(args, split_args)]
        kw = {k: v if split_kwargs[k] is None else split_kwargs[k][i] for k, v in kwargs.items()}  # type: ignore[index]
        out.append(getattr(td, name)(*a, **kw))
    return out


def _make_inplace(name: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        _per_td_call(self, name, args, kwargs)
        return self

    method.__name__ = name
    method.__qualname__ = f"LazyStackedTensorDict.{name}"
    method.__doc__ = f"``{name}`` on every stacked TensorDict, in place; returns the lazy stack."
    return method


def _make_out_of_place(name: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.tensordicts:
            return getattr(self.contiguous(), name)(*args, **kwargs)
        results = _per_td_call(self, name, args, kwargs)
        if any(r is NotImplemented for r in results):
            return NotImplemented
        return self._new_lazy(results)

    method.__name__ = name
    method.__qualname__ = f"LazyStackedTensorDict.{name}"
    method.__doc__ = f"``{name}`` on every stacked TensorDict; returns a lazy stack of the results."
    return method


def _math_names() -> tuple[list[str], list[str]]:
    # the leaf-wise ops live in the generated mixin (one base class per op family, the
    # aliases in the mixin itself), the hand-written ones in MathMixin
    generated = (*GeneratedOpsMixin.__mro__[-2:0:-1], GeneratedOpsMixin)
    members = {name: attr for cls in (*generated, MathMixin) for name, attr in vars(cls).items()}
    inplace = []
    out_of_place = []
    for name, attr in members.items():
        if not callable(attr):
            continue
        if name.startswith("__i") and ("__" + name[3:]) in members:
            inplace.append(name)
        elif name.endswith("_") and not name.startswith("_"):
            inplace.append(name)
            if callable(members.get(name[:-1])):
                out_of_place.append(name[:-1])
    out_of_place.extend(n for n in _OPERATORS if callable(members.get(n)))
    return inplace, out_of_place


class LazyMathMixin(LazyStackHost):
    """Element-wise math of a lazy stack, one stacked TensorDict at a time."""


def _install() -> None:
    inplace, out_of_place = _math_names()
    for name in inplace:
        setattr(LazyMathMixin, name, _make_inplace(name))
    for name in out_of_place:
        setattr(LazyMathMixin, name, _make_out_of_place(name))


_install()
