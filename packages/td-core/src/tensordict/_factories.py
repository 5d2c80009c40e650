"""TensorDicts made after another one: ``new_zeros``, ``new_ones``, ``new_empty``,
``new_full``, ``new_tensor`` and ``as_tensor``.

The ``new_*`` factories replace the batch dims of every leaf with a new size and keep
its feature dims, dtype and device, through the shape engine (``_batch_transform``):
each leaf's ``fn(value, nd)`` builds the new tensor, and the new batch size is read off
the first result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._host import TensorDictHost

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["FactoryMixin"]


def _size_arg(size: tuple) -> torch.Size:
    if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)):
        size = tuple(size[0])
    return torch.Size(size)


def _factory(
    td: Any,
    make: Callable[..., torch.Tensor],
    size: torch.Size,
    dtype: Any,
    device: Any,
    requires_grad: bool,
    pin_memory: bool | None,
    empty_lazy: bool = False,
) -> Any:
    def fn(value: torch.Tensor, nd: int) -> torch.Tensor:
        shape = (*size, *value.shape[nd:])
        out = make(
            value,
            shape,
            dtype=value.dtype if dtype is None else dtype,
            device=value.device if device is None else device,
        )
        if pin_memory:
            out = out.pin_memory()
        if requires_grad:
            out.requires_grad_()
        return out

    # read by the non-tensor stacks (which repeat their first item instead of reading
    # a made-up index) and, with ``empty_lazy``, by the lazy stacks (see ``emptied_lazy``)
    fn._factory_size = size  # type: ignore[attr-defined]
    fn._empty_lazy = empty_lazy  # type: ignore[attr-defined]
    out = td._batch_transform(fn)
    if device is not None:
        out = out.to(device)
    return out


def _without_tensors(td: Any) -> Any:
    """``td``'s structure with its tensor leaves left out (nested lazy stacks kept as they
    are: the factory empties them in turn)."""
    if td.__class__ is _classes.LazyStackedTensorDict:
        return td
    drop = [key for key, value in td._items_raw() if isinstance(value, torch.Tensor)]
    out = td.exclude(*drop)
    for key, value in list(out._items_raw()):
        if isinstance(value, _classes.TensorDictBase):
            out._set_raw(key, _without_tensors(value))
    return out


def emptied_lazy(stack: Any, fn: Callable[..., Any], nd: int | None) -> Any:
    """The ``empty_lazy=True`` result of a ``new_*`` factory for the lazy stack ``stack``.

    ``fn`` is the factory's per-leaf function (its ``_factory_size`` is the new size of
    the dims it replaces, the first ``nd``). The result is a lazy stack of the new batch
    size, along the same stack dim where it still exists (the last dim otherwise), of
    TensorDicts holding the first stacked TensorDict's structure and non-tensor data
    but no tensor leaves.
    """
    bs = stack.batch_size
    if nd is None:
        nd = len(bs)
    new_bs = torch.Size((*fn._factory_size, *bs[nd:]))  # type: ignore[attr-defined]
    if not new_bs:
        return stack.contiguous()._batch_transform(fn, nd)
    sd = min(stack.stack_dim, len(new_bs) - 1)
    inner = torch.Size((*new_bs[:sd], *new_bs[sd + 1 :]))
    n = new_bs[sd]
    tds = stack.tensordicts
    if tds:
        template = _without_tensors(tds[0])

        def inner_fn(value: torch.Tensor, k: int) -> torch.Tensor:
            return value.new_zeros((*inner, *value.shape[k:]))

        inner_fn._factory_size = inner  # type: ignore[attr-defined]
        inner_fn._empty_lazy = True  # type: ignore[attr-defined]
        elems = [template._batch_transform(inner_fn, template.batch_dims) for _ in range(n)]
    else:
        elems = [_classes.TensorDict(batch_size=inner, device=stack.device) for _ in range(n)]
    if not elems:
        return _classes.LazyStackedTensorDict(stack_dim=sd, batch_size=inner, device=stack.device)
    return _classes.LazyStackedTensorDict._new_unsafe(elems, sd, new_bs)


_FACTORY_DOC = """A TensorDict of the same structure whose every leaf is ``{what}``; the batch
        dims are replaced by ``size`` and the feature dims kept.

        Args:
            *size (int or sequence of int): the new batch size.{extra_args}

        Keyword Args:
            dtype (torch.dtype, optional): the leaves' dtype (each leaf's own by default).
            device (torch.device, optional): the device (each leaf's own by default).
            requires_grad (bool): leaves that require gradients. Defaults to ``False``.
            pin_memory (bool): leaves in pinned memory. Defaults to ``False``.
            empty_lazy (bool): lazy stacks in the tree (``NonTensorStack`` included)
                become lazy stacks of the new size whose TensorDicts hold no tensor
                leaves, only the nested structure and the non-tensor data of the first
                stacked TensorDict (ready to be filled by indexed writes). Defaults to
                ``False`` (lazy stacks give dense leaves).

        Returns:
            a TensorDict with ``batch_size=size``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({{"a": torch.ones(3, 2)}}, [3])
            >>> {example}
        """


class FactoryMixin(TensorDictHost):
    """Mixed into TensorDictBase: the ``new_*`` factories and ``as_tensor``."""

    if TYPE_CHECKING:  # what the factories read from NonTensorMixin (_nontensor_methods.py)
        def non_tensor_items(self, include_nested: bool = False) -> tuple: ...

    def new_zeros(
        self,
        *size: Any,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool | None = None,
        empty_lazy: bool = False,
    ) -> TensorDictBase:
        return _factory(
            self,
            lambda v, s, **kw: v.new_zeros(s, **kw),
            _size_arg(size),
            dtype,
            device,
            requires_grad,
            pin_memory,
            empty_lazy,
        )

    new_zeros.__doc__ = _FACTORY_DOC.format(
        what="zeros", extra_args="", example='td.new_zeros(2, 5)["a"].shape\n            torch.Size([2, 5, 2])'
    )

    def new_ones(
        self,
        *size: Any,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool | None = None,
        empty_lazy: bool = False,
    ) -> TensorDictBase:
        return _factory(
            self,
            lambda v, s, **kw: v.new_ones(s, **kw),
            _size_arg(size),
            dtype,
            device,
            requires_grad,
            pin_memory,
            empty_lazy,
        )

    new_ones.__doc__ = _FACTORY_DOC.format(
        what="ones", extra_args="", example='td.new_ones([4])["a"].sum()\n            tensor(8.)'
    )

    def new_empty(
        self,
        *size: Any,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool | None = None,
        empty_lazy: bool = False,
    ) -> TensorDictBase:
        return _factory(
            self,
            lambda v, s, **kw: v.new_empty(s, **kw),
            _size_arg(size),
            dtype,
            device,
            requires_grad,
            pin_memory,
            empty_lazy,
        )

    new_empty.__doc__ = _FACTORY_DOC.format(
        what="uninitialised", extra_args="", example="td.new_empty(0).batch_size\n            torch.Size([0])"
    )

    def new_full(
        self,
        size: Any,
        fill_value: Any,
        *,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool | None = None,
        empty_lazy: bool = False,
    ) -> TensorDictBase:
        return _factory(
            self,
            lambda v, s, **kw: v.new_full(s, fill_value, **kw),
            _size_arg((size,)),
            dtype,
            device,
            requires_grad,
            pin_memory,
            empty_lazy,
        )

    new_full.__doc__ = _FACTORY_DOC.format(
        what="``fill_value``",
        extra_args="\n            fill_value (number): the value of every element.",
        example='td.new_full((2,), 7.0)["a"][0]\n            tensor([7., 7.])',
    )

    def new_tensor(
        self,
        data: Any,
        *,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        pin_memory: bool | None = None,
    ) -> TensorDictBase | torch.Tensor:
        """A copy of ``data`` built like ``Tensor.new_tensor``.

        Args:
            data (TensorDictBase or tensor-like): with a TensorDict, every leaf is copied
                (``leaf.new_tensor(leaf)``) onto ``device`` (``self.device`` when it
                has one); anything else is copied once per leaf of ``self`` (with that
                leaf's dtype) into a TensorDict of batch size ``data``'s shape.

        Keyword Args:
            dtype (torch.dtype, optional): the dtype of the copy.
            device (torch.device, optional): its device.
            requires_grad (bool): leaves that require gradients.
            pin_memory (bool): leaves in pinned memory.

        Returns:
            a TensorDict with ``data``'s batch size (or shape).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3)}, [3])
            >>> import warnings
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore")
            ...     td.new_tensor(td[0] * 2)["a"]
            tensor(2.)
        """
        if device is None:
            device = self.device
        if _classes.is_tensor_collection(data):

            def copy(t: torch.Tensor) -> torch.Tensor:
                out = t.new_tensor(t, dtype=dtype, device=t.device if device is None else device)
                if pin_memory:
                    out = out.pin_memory()
                if requires_grad:
                    out.requires_grad_()
                return out

            out = data.apply(copy)
            if device is not None and out.device != device:
                out = out.to(device)
            return out
        # tensor-like data: one copy per leaf, with the leaf's dtype (tensordict 0.15), in a
        # TensorDict whose batch size is the data's shape
        as_tensor = torch.as_tensor(data)
        shape = as_tensor.shape
        target = as_tensor.device if device is None else torch.device(device)  # the data's device, as 0.15.3

        def fill(t: torch.Tensor) -> torch.Tensor:
            out = t.new_tensor(data, dtype=dtype, device=target, requires_grad=requires_grad)
            return out.pin_memory() if pin_memory else out

        out = self._map_leaves(fill, keep_non_tensor=True, batch_size=shape, device=target)  # nested levels too
        for key, value in self.non_tensor_items(include_nested=True):  # their objects, at the new size
            out.set_non_tensor(key, value.data if isinstance(value, _classes.NonTensorData) else value.tolist())
        return out

    def as_tensor(self) -> TensorDictBase:
        """A TensorDict whose leaves are plain ``torch.Tensor`` objects.

        Tensor subclasses (``MemoryMappedTensor``, ``Parameter``, ...) are given back as
        plain tensors on the same storage; plain tensors are kept as they are.

        Returns:
            a TensorDict with the batch size and device of ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.nn.Parameter(torch.zeros(3))}, [3])
            >>> type(td.as_tensor()["a"]) is torch.Tensor
            True
        """

        def plain(t: torch.Tensor) -> torch.Tensor:
            if t.__class__ is torch.Tensor:
                return t
            method = getattr(t, "as_tensor", None)
            if callable(method):
                return method()
            return t.as_subclass(torch.Tensor)

        return self._map_leaves(plain, keep_non_tensor=True)
