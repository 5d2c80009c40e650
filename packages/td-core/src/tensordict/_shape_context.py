"""Shape ops as context managers, and the keyword forms of shape ops upstream accepts.

``with td.transpose(1, 0) as t: ...`` (and ``permute``, ``view``, ``reshape``,
``squeeze``, ``unsqueeze``, ``flatten``, ``unflatten``, ``movedim``, ``flatten_keys``,
``unflatten_keys``): on exit, the inverse op is applied to ``t`` and what it holds is
written back into ``td``: new keys are set, leaves that no longer share storage with
``td``'s are copied in. Leaves that are views of ``td``'s tensors need nothing (writes
already went through).

Each op records ``(source, inverse)`` on its result in one attribute; nothing else is
paid when the result is not used as a context manager. The ops are the ones of
``ShapeMixin``/``SelectMixin``; this mixin sits before them in ``TensorDictBase``'s
bases and only adds the record and the keywords (``inplace=``, ``batch_size=``,
``dims=``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes, _stack
from tensordict._host import TensorDictHost
from tensordict._select import SelectMixin
from tensordict._shape import ShapeMixin

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["ShapeContextMixin", "write_back"]


def write_back(source: Any, new: Any) -> None:
    """Writes the leaves of ``new`` (laid out as ``source``) into ``source``."""
    for key, value in new.items(include_nested=True, leaves_only=True):
        existing = source._get_any_raw(key, None)
        if existing is None:
            source.set(key, value.contiguous() if isinstance(value, torch.Tensor) else value)
            continue
        if isinstance(existing, torch.Tensor) and isinstance(value, torch.Tensor):
            if existing.shape == value.shape:
                try:
                    same = existing.untyped_storage().data_ptr() == value.untyped_storage().data_ptr()
                except (RuntimeError, NotImplementedError):  # meta / fake tensors
                    same = False
                if not same:
                    existing.copy_(value)
            else:
                source.set(key, value.contiguous())
        elif not isinstance(existing, torch.Tensor) and not isinstance(existing, _classes.TensorDictBase):
            source.set(key, value)


def _track(source: Any, result: Any, inverse: Callable[[Any], Any]) -> Any:
    if result is not source:
        result._shape_source = (source, inverse)
    return result


def _check_movedim(source: Any, destination: Any, nd: int) -> None:
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        msg = f"movedim: source {src} and destination {dst} must have the same number of elements."
        raise ValueError(msg)
    for name, dims in (("source", src), ("destination", dst)):
        for d in dims:
            if not -nd <= d < nd:
                msg = f"movedim: {name} dim {d} is out of range for {nd} batch dims."
                raise IndexError(msg)
        if len({d % nd for d in dims}) != len(dims):
            msg = f"movedim: repeated dim in {name} {dims}."
            raise RuntimeError(msg)


def _check_split(split_size: Any, dim: int, bs: Any) -> None:
    nd = len(bs)
    if not -nd <= dim < nd:
        msg = f"split: Incompatible dim {dim} for a TensorDict with batch_size {tuple(bs)}."
        raise IndexError(msg)
    if isinstance(split_size, bool) or not isinstance(split_size, (int, list, tuple)):
        msg = f"split(): argument 'split_size' must be int or list of ints, got {type(split_size).__name__}."
        raise TypeError(msg)
    if isinstance(split_size, int):
        if split_size <= 0:
            msg = f"split_size must be positive, got {split_size}."
            raise ValueError(msg)
        return
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in split_size):
        msg = f"split(): argument 'split_size' must be int or list of ints, got {list(split_size)!r}."
        raise TypeError(msg)
    size = bs[dim]
    if not split_size:
        msg = f"split: Insufficient number of elements in split_size {list(split_size)} for dim {dim} of size {size}."
        raise RuntimeError(msg)
    if sum(split_size) != size:
        msg = (
            f"split expects split_size to sum exactly to {size} (the size of dim {dim}), "
            f"got {list(split_size)} (sum {sum(split_size)})."
        )
        raise RuntimeError(msg)


def _inverse_permutation(dims: Sequence[int]) -> list[int]:
    nd = len(dims)
    order = [int(d) % nd for d in dims]
    return [order.index(i) for i in range(nd)]


def _become(td: Any, other: Any) -> Any:
    """Makes ``td`` hold ``other``'s entries and batch size (the ``inplace=True`` form)."""
    if td is other:
        return td
    if td.is_locked:
        msg = "Cannot modify a locked TensorDict in place (inplace=True); unlock it first."
        raise RuntimeError(msg)
    for key in list(td.keys()):
        td.del_(key)
    td.batch_size = other.batch_size
    td.update(other)
    return td


def _inplace(td: Any, result: Any, inplace: bool) -> Any:
    return _become(td, result) if inplace else result


def _refuse_lazy_inplace(td: Any, op: str) -> None:
    """``op(..., inplace=True)`` on a lazy stack: NotImplementedError, as tensordict 0.15
    (a stack of TensorDicts has no storage of its own to replace)."""
    if isinstance(td, _classes.LazyStackedTensorDict):
        msg = (
            f"{op}(..., inplace=True) is not supported for LazyStackedTensorDict; "
            f"call {op} without inplace=True, or densify first with contiguous()."
        )
        raise NotImplementedError(msg)


class ShapeContextMixin(TensorDictHost):
    """Mixed into TensorDictBase before the shape and key mixins (see module docstring)."""

    _shape_source: Any = None

    def _exit_shape_context(self) -> bool:
        """Writes a tracked shape op's result back into its source; ``True`` if one was."""
        record = self._shape_source
        if record is None:
            return False
        self._shape_source = None
        source, inverse = record
        if source.__class__ is weakref.ref:  # ``to(device)`` keeps its source weakly
            source = source()
            if source is None:
                return True
        write_back(source, inverse(self))
        return True

    # ------------------------------------------------------------------ batch-dim ops
    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> TensorDictBase:  # noqa: D102
        if shape and isinstance(shape[0], torch.dtype):  # view(dtype[, batch_size=])
            out = super().view(*shape)
            if batch_size is not None:
                if isinstance(out, _classes.LazyStackedTensorDict):  # its stack dim cannot go
                    out = out.contiguous()
                out.batch_size = batch_size
            return out
        if batch_size is not None:
            shape = (batch_size,)
        if _stack._LAZY_LEGACY[0]:  # a live view (upstream's legacy lazy views)
            if size is not None:
                shape = (size,)
            if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
                shape = tuple(shape[0])
            return _classes.CustomOpTensorDict._make(self, "view", shape)
        out = super().view(*shape, size=size)
        bs = self.batch_size
        return _track(self, out, lambda r: r.view(bs))


    def reshape(self, *shape: Any, size: Any = None, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        out = super().reshape(*shape, size=size)
        if inplace:
            return _become(self, out)
        if self._is_locked and out is not self and not out._is_locked:
            out._set_lock_flag(True)  # as view: a locked TensorDict reshapes into a locked one
        bs = self.batch_size
        return _track(self, out, lambda r: r.reshape(bs))


    def permute(self, *dims_list: Any, dims: Sequence[int] | None = None) -> TensorDictBase:  # noqa: D102
        if dims is not None:
            dims_list = tuple(dims)
        if len(dims_list) == 1 and not isinstance(dims_list[0], int):
            dims_list = tuple(dims_list[0])
        if _stack._LAZY_LEGACY[0]:
            return _classes.CustomOpTensorDict._make(self, "permute", dims_list)
        try:
            out = super().permute(*dims_list)
        except RuntimeError as err:  # tensordict 0.15 raises ValueError for a bad permutation
            raise ValueError(str(err)) from None
        return _track(self, out, lambda r: r.permute(*_inverse_permutation(dims_list)))


    def transpose(self, dim0: int, dim1: int) -> TensorDictBase:  # noqa: D102
        if _stack._LAZY_LEGACY[0]:
            return _classes.CustomOpTensorDict._make(self, "transpose", (dim0, dim1))
        nd = self.batch_dims
        if not (-nd <= dim0 < nd and -nd <= dim1 < nd):
            msg = (
                f"dim0 and dim1 must be within the range of the number of dimensions: got "
                f"({dim0}, {dim1}) for batch_size {tuple(self.batch_size)}."
            )
            raise ValueError(msg)
        out = super().transpose(dim0, dim1)
        return _track(self, out, lambda r: r.transpose(dim0, dim1))


    def squeeze(self, dim: int | None = None) -> TensorDictBase:  # noqa: D102
        if _stack._LAZY_LEGACY[0]:
            return _classes.CustomOpTensorDict._make(self, "squeeze", (dim,))
        out = super().squeeze(dim)
        bs = self.batch_size
        return _track(self, out, lambda r: r.reshape(bs))


    def unsqueeze(self, dim: int) -> TensorDictBase:  # noqa: D102
        if _stack._LAZY_LEGACY[0]:
            return _classes.CustomOpTensorDict._make(self, "unsqueeze", (dim,))
        out = super().unsqueeze(dim)
        return _track(self, out, lambda r: r.squeeze(dim))  # same index in the result


    def flatten(self, start_dim: int | None = 0, end_dim: int | None = -1, *, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        start_dim = 0 if start_dim is None else start_dim
        end_dim = -1 if end_dim is None else end_dim
        if not self.batch_dims:  # as torch.flatten of a 0-d tensor: one dim of size 1
            if start_dim not in (0, -1) or end_dim not in (0, -1):
                msg = f"flatten: dims ({start_dim}, {end_dim}) are out of range for a TensorDict with 0 batch dims."
                raise IndexError(msg)
            out = self.unsqueeze(0)
            return _become(self, out) if inplace else out
        out = super().flatten(start_dim, end_dim)
        if inplace:
            return _become(self, out)
        bs = self.batch_size
        nd = len(bs)
        s, e = start_dim % max(nd, 1), end_dim % max(nd, 1)
        return _track(self, out, lambda r: r.unflatten(s, bs[s : e + 1]) if e > s else r)


    def unflatten(self, dim: int, unflattened_size: Sequence[int], *, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        out = super().unflatten(dim, unflattened_size)
        if inplace:
            return _become(self, out)
        d = dim % self.batch_dims
        k = len(unflattened_size)
        return _track(self, out, lambda r: r.flatten(d, d + k - 1))


    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> TensorDictBase:  # noqa: D102
        _check_movedim(source, destination, self.batch_dims)
        out = super().movedim(source, destination)
        return _track(self, out, lambda r: r.movedim(destination, source))

    moveaxis = movedim

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple:  # noqa: D102
        _check_split(split_size, dim, self.batch_size)
        return super().split(split_size, dim)

    def expand_as(self, other: Any) -> TensorDictBase:
        """Expands to ``other``: a tensor gives its shape as the new batch size; a
        TensorDict with the same keys expands each leaf to the shape of its counterpart
        (its batch size for the batch dims), as ``Tensor.expand_as`` leaf by leaf.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, 1)}, [3])
            >>> other = TensorDict({"a": torch.zeros(2, 3, 5)}, [2, 3])
            >>> td.expand_as(other)["a"].shape
            torch.Size([2, 3, 5])
        """
        if isinstance(other, _classes.TensorDictBase):
            return self.apply(lambda x, y: x.expand_as(y), other, batch_size=other.batch_size)
        return super().expand_as(other)

    def repeat(self, *repeats: Any, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        if inplace:
            _refuse_lazy_inplace(self, "repeat")
        return _inplace(self, super().repeat(*repeats), inplace)


    def repeat_interleave(self, repeats: Any, dim: int | None = None, *, output_size: int | None = None, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        if inplace:
            _refuse_lazy_inplace(self, "repeat_interleave")
        return _inplace(self, super().repeat_interleave(repeats, dim, output_size=output_size), inplace)


    def roll(self, shifts: Any, dims: Any, *, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        return _inplace(self, super().roll(shifts, dims), inplace)


    def gather(self, dim: int, index: torch.Tensor, out: Any = None, *, inplace: bool = False) -> TensorDictBase:  # noqa: D102
        if inplace:
            if out is not None:
                msg = "gather: `out` and `inplace=True` are mutually exclusive (inplace=True writes into self)."
                raise ValueError(msg)
            _refuse_lazy_inplace(self, "gather")
            if index.ndim != self.batch_dims:
                msg = (
                    f"gather(..., inplace=True) needs index.ndim == batch_dims: got index.ndim="
                    f"{index.ndim} for batch_size {tuple(self.batch_size)}."
                )
                raise NotImplementedError(msg)
        return _inplace(self, super().gather(dim, index, out=out), inplace)


    # ------------------------------------------------------------------ key ops
    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> TensorDictBase:  # noqa: D102
        out = super().flatten_keys(separator, inplace, is_leaf)
        if inplace:
            return out
        return _track(self, out, lambda r: r.unflatten_keys(separator))


    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDictBase:  # noqa: D102
        out = super().unflatten_keys(separator, inplace)
        if inplace:
            return out
        return _track(self, out, lambda r: r.flatten_keys(separator))



_NOTE_CONTEXT = """
        Used as a context manager (``with td.{name}(...) as out:``), what ``out`` holds on
        exit is written back into ``td`` through the inverse op (new keys included).
"""
_NOTE_INPLACE = """
        ``inplace=True`` makes ``td`` itself hold the result (and returns ``td``).
"""


def _document() -> None:
    context = ("view", "reshape", "permute", "transpose", "squeeze", "unsqueeze", "flatten",
               "unflatten", "movedim", "flatten_keys", "unflatten_keys")
    inplace = ("reshape", "flatten", "unflatten", "repeat", "repeat_interleave", "roll", "gather")
    for name in set(context) | set(inplace):
        parent = getattr(ShapeMixin, name, None) or getattr(SelectMixin, name)
        doc = (parent.__doc__ or "").rstrip() + "\n"
        if name in context:
            doc += _NOTE_CONTEXT.format(name=name)
        if name in inplace:
            doc += _NOTE_INPLACE
        getattr(ShapeContextMixin, name).__doc__ = doc
    ShapeContextMixin.split.__doc__ = ShapeMixin.split.__doc__


_document()
