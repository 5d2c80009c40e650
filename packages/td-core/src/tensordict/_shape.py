"""Indexing and shape operations over the batch dims (``ShapeMixin``).

Every op is a function ``fn(value, nd)`` acting on the first ``nd`` dims of a leaf
(feature dims stay trailing), applied to each leaf by ``_batch_transform``. The new
``batch_size`` is read off the first transformed leaf, so no shape is computed twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes, _stack
from tensordict._deep import trampoline
from tensordict._errors import locked_error
from tensordict._host import TensorDictHost
from tensordict._names import derive_names, drop_dims, index_names, insert_dim
from tensordict._nested_shape import leaf_shape
from tensordict._unbatched import UnbatchedTensor

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

_Tensor = torch.Tensor
_Size = torch.Size

__all__ = ["ShapeMixin"]


def _keep_names(names: list) -> list:
    return names


def _permute_dims(dims: tuple, batch_size: torch.Size) -> tuple[int, ...]:
    """``permute``'s ``dims`` (ints or one sequence) as non-negative batch dims.

    Raises:
        RuntimeError: ``dims`` is not a permutation of the batch dims.
    """
    dims = _shape_arg(dims)
    nd = len(batch_size)
    if len(dims) != nd:
        msg = f"permute: expected {nd} dims for batch_size {tuple(batch_size)}, got {tuple(dims)}."
        raise RuntimeError(msg)
    try:
        out = tuple(_norm_dim(d, nd) for d in dims)
    except IndexError as err:
        raise RuntimeError(f"permute: {err}") from None
    if sorted(out) != list(range(nd)):
        msg = f"permute: {out} is not a permutation of the {nd} batch dims."
        raise RuntimeError(msg)
    return out


def _legacy_view(td: Any, out: Any) -> Any:
    """``_keep_lock``; under ``set_lazy_legacy(True)`` the result also refuses new names,
    as upstream's lazy squeezed/unsqueezed views do."""
    out = _keep_lock(td, out)
    if _stack._LAZY_LEGACY[0] and out is not td and out.__class__ is _classes.TensorDict:
        out._frozen_names = True
    return out


def _keep_lock(td: Any, out: Any) -> Any:
    """Locks ``out`` (a view-like result of a shape op) when ``td`` is locked."""
    if td._is_locked and out is not td and not out._is_locked:
        out.lock_()
    return out


class BatchDimError(IndexError, RuntimeError):
    """A batch dim out of range where tensordict 0.15 raises ``RuntimeError``: also the
    ``IndexError`` torch raises for a tensor."""


def _norm_dim(dim: int, nd: int, what: str = "dim", err: type[Exception] = IndexError) -> int:
    if not -nd <= dim < nd if nd else dim not in (0, -1):
        msg = f"{what}={dim} is out of range for a TensorDict with {nd} batch dims."
        raise err(msg)
    return dim + nd if dim < 0 else dim


def _shape_arg(shape: tuple) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        return tuple(shape[0])
    return shape


#: ``(shape, numel) -> torch.Size`` for the int shapes ``_infer_shape`` resolved (bounded):
#: a ``reshape``/``view`` of the same batch size again skips the inference and the checks
_INFERRED: dict = {}


def _infer_shape(shape: Sequence[int], numel: int, batch_size: torch.Size, op: str) -> torch.Size:
    ints = shape.__class__ is tuple
    if ints:
        for s in shape:
            if s.__class__ is not int:  # (a float equal to an int would hit its entry)
                ints = False
                break
        else:
            out = _INFERRED.get((shape, numel))
            if out is not None:
                return out
    out = _infer_shape_checked(shape, numel, batch_size, op)
    if ints and len(_INFERRED) < 512:
        _INFERRED[(shape, numel)] = out
    return out


def _infer_shape_checked(shape: Sequence[int], numel: int, batch_size: torch.Size, op: str) -> torch.Size:
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    known = math.prod(s for s in shape if s != -1)
    if len(neg) > 1:
        msg = f"{op}: only one dimension can be inferred, got shape {tuple(shape)}."
        raise RuntimeError(msg)
    if neg:
        if known == 0 or numel % known:
            msg = f"{op}: shape {tuple(shape)} is invalid for a TensorDict of batch_size {tuple(batch_size)} ({numel} elements)."
            raise RuntimeError(msg)
        shape[neg[0]] = numel // known
    elif known != numel:
        msg = f"{op}: shape {tuple(shape)} is invalid for a TensorDict of batch_size {tuple(batch_size)} ({numel} elements)."
        raise RuntimeError(msg)
    return torch.Size(shape)


def _to_index_part(idx: Any) -> Any:
    if isinstance(idx, (set, frozenset, dict)):
        msg = f"Invalid index {idx!r} of type {type(idx).__name__}: index with ints, slices, lists, tensors, None or '...'."
        raise TypeError(msg)
    if isinstance(idx, (list, range)):
        idx = list(idx)  # an empty list indexes nothing, as in torch (not a float tensor)
        return torch.as_tensor(idx) if idx else torch.empty(0, dtype=torch.long)
    mod = type(idx).__module__
    if mod == "numpy" or mod.startswith("numpy."):
        if hasattr(idx, "shape") and idx.shape == ():
            return idx.item()
        return torch.as_tensor(idx)
    return idx


class ShapeMixin(TensorDictHost):
    """Indexing and batch-dim shape operations shared by every TensorDict."""

    # -------------------------------------------------------------- batch size inference
    def auto_batch_size_(self, batch_dims: int | None = None, keep_compliant_size: bool = False) -> Any:
        """Sets ``batch_size`` to the longest leading shape shared by every leaf.

        The nested TensorDicts get their own longest batch size first.

        Args:
            batch_dims (int, optional): keep at most this many dims, here and in every
                nested TensorDict. Defaults to ``None``.
            keep_compliant_size (bool, optional): with ``batch_dims``, a nested TensorDict
                that already has ``batch_dims`` batch dims or more keeps its batch size (and
                its own nested TensorDicts theirs). Defaults to ``False``.

        Returns:
            ``self``.

        Raises:
            RuntimeError: the TensorDict is locked (as setting ``batch_size`` is).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4, 5), "b": {"c": torch.zeros(3, 4)}})
            >>> td.auto_batch_size_().batch_size
            torch.Size([3, 4])
            >>> nested = TensorDict({"c": torch.zeros(3, 4, 6)}, [3, 4])
            >>> td = TensorDict({"a": torch.zeros(3, 4, 5), "b": nested})
            >>> _ = td.auto_batch_size_(batch_dims=1, keep_compliant_size=True)
            >>> td.batch_size, td["b"].batch_size
            (torch.Size([3]), torch.Size([3, 4]))
        """
        if self.is_locked:
            raise locked_error("auto_batch_size_")
        base = _classes.TensorDictBase
        keep = keep_compliant_size and batch_dims is not None
        for _, v in self._items_raw():
            if isinstance(v, base) and not (keep and v.batch_dims >= batch_dims):  # type: ignore[operator]
                v.auto_batch_size_(batch_dims, keep_compliant_size)
        common: list[int] | None = None
        for _, v in self._items_raw():
            if isinstance(v, (_classes.NonTensorData, UnbatchedTensor)):
                continue  # a single object (or an unbatched tensor) fits any batch size
            if isinstance(v, base) and not v.batch_dims and not any(True for _ in v.keys(True, True)):
                continue  # a nested TensorDict without tensors (only non-tensor data) fits too
            shape = list(v.batch_size if _classes.is_tensor_collection(v) else v.shape)
            if common is None:
                common = shape
            else:
                n = 0
                for a, b in zip(common, shape):
                    if a != b:
                        break
                    n += 1
                common = common[:n]
        common = common or []
        if batch_dims is not None:
            common = common[:batch_dims]
        self.batch_size = torch.Size(common)
        return self

    # -------------------------------------------------------------- core engines
    def _normalize_index(self, index: Any) -> tuple:
        if index.__class__ is not tuple:
            index = (index,)
        index = tuple(_to_index_part(i) for i in index)
        nd = len(self.batch_size)
        consumed = 0
        n_ellipsis = 0
        for idx in index:
            if idx is None:
                continue
            if idx is Ellipsis:
                n_ellipsis += 1
                continue
            if isinstance(idx, torch.Tensor) and idx.dtype is torch.bool:
                consumed += max(idx.ndim, 1) if idx.ndim else 0
            elif isinstance(idx, (str,)):
                msg = f"Cannot index a TensorDict with a mix of keys and indices: {index!r}."
                raise IndexError(msg)
            else:
                consumed += 1
        if n_ellipsis > 1:
            msg = "an index can only have a single ellipsis ('...')"
            raise IndexError(msg)
        if consumed > nd:
            msg = (
                f"too many indices for TensorDict: batch_size {tuple(self.batch_size)} has {nd} dims "
                f"but {consumed} were indexed by {index!r}."
            )
            raise IndexError(msg)
        if n_ellipsis:
            out = []
            for idx in index:
                if idx is Ellipsis:
                    out.extend([slice(None)] * (nd - consumed))
                else:
                    out.append(idx)
            index = tuple(out)
        return index

    def _batch_transform(self, fn: Callable[[Any, int], Any], nd: int | None = None, names: Any = None) -> Any:
        bd = len(self.batch_size)
        if nd is None:
            nd = bd
        source = {}
        new_bs = None
        for key, value in self._items_raw():
            if value.__class__ is _Tensor or (isinstance(value, _Tensor) and value.__class__ is not UnbatchedTensor):
                out = fn(value, nd)
                if new_bs is None:
                    new_bs = leaf_shape(out)[: out.ndim - (value.ndim - bd)]
            elif isinstance(value, _classes.TensorDictBase):
                try:
                    out = value._batch_transform(fn, nd) if names is None else value._batch_transform(fn, nd, names=names)
                except RecursionError:  # nested too deep (out of place: redo this subtree without recursion)
                    if type(value)._batch_transform is not ShapeMixin._batch_transform:
                        raise
                    out = trampoline(_batch_transform_node, value, fn, nd, names)
                if new_bs is None:
                    new_bs = out.batch_size[: out.batch_dims - (value.batch_dims - bd)]
            else:
                out = value._batch_transform(fn, nd)
            source[key] = out
        if new_bs is None:
            new_bs = fn(torch.zeros((), dtype=torch.uint8).expand(self.batch_size), nd).shape
        if new_bs.__class__ is not _Size:
            new_bs = _Size(new_bs)
        if names is not None:
            names = derive_names(self, names, nd) if self._has_names() or not callable(names) else None
        td_cls = _classes.TensorDict
        if self.__class__ is td_cls:  # what ``_new_like`` does for a TensorDict, without the call
            return td_cls._new_unsafe(source, new_bs, self._device, names)
        return self._new_like(source, batch_size=new_bs, names=names)

    def _index(self, index: Any) -> Any:
        """``self[index]`` for a batch index: every leaf indexed, nested TensorDicts too, by
        recursion (the fastest for the usual few levels); a subtree nested deeper than the
        recursion limit allows is indexed by :func:`_index_deep` instead."""
        bs = self.batch_size
        index, new_bs, names = _index_plan(self, bs, index)
        source = {}
        if new_bs is not None:
            for key, value in self._items_raw():
                if value.__class__ is _Tensor:
                    source[key] = value[index]
                elif isinstance(value, _classes.TensorDictBase):
                    try:
                        source[key] = value._index(index)
                    except RecursionError:  # nested too deep: index it without recursion
                        source[key] = _index_deep(value, index)
                elif value.__class__ is UnbatchedTensor:
                    source[key] = value._rebatch(new_bs)
                else:
                    source[key] = value[index]
            return self._new_like(source, batch_size=new_bs, names=names)
        bd = len(bs)
        unbatched = []
        for key, value in self._items_raw():
            if value.__class__ is UnbatchedTensor:
                unbatched.append(key)
                source[key] = value
                continue
            if not isinstance(value, _classes.TensorDictBase):
                out = value[index]
            else:
                try:
                    out = value._index(index)
                except RecursionError:  # nested too deep: index it without recursion
                    out = _index_deep(value, index)
            if new_bs is None and isinstance(out, torch.Tensor):
                new_bs = out.shape[: out.ndim - (value.ndim - bd)]
            source[key] = out
        if new_bs is None:
            new_bs = torch.zeros((), dtype=torch.uint8).expand(bs)[index].shape
        for key in unbatched:
            source[key] = source[key]._rebatch(new_bs)  # type: ignore[attr-defined]
        if new_bs.__class__ is not _Size:
            new_bs = _Size(new_bs)
        return self._new_like(source, batch_size=new_bs, names=names)

    # -------------------------------------------------------------- reshaping
    def view(self, *shape: Any, size: Any = None) -> Any:
        """A TensorDict whose leaves are viewed to ``shape + feature_shape``.

        Args:
            *shape (int or torch.dtype): the new batch size (or one sequence of ints,
                ``-1`` inferred), or a dtype to view every leaf as.
            size (sequence of int, optional): the new batch size, as a keyword.
            batch_size (sequence of int, optional): with a dtype, the batch size of
                the result (keyword only).

        Raises:
            RuntimeError: ``shape`` does not fit ``batch_size`` (or a leaf is not viewable).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3, 4, 5)}, [3, 4])
            >>> td.view(-1)["a"].shape
            torch.Size([12, 5])
        """
        if size is not None:
            shape = (size,)
        shape = _shape_arg(shape)
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            dtype = shape[0]
            return self._map_leaves(lambda t: t.view(dtype))
        new = _infer_shape(shape, self.numel(), self.batch_size, "view")
        if new == self.batch_size:
            return self
        nd = len(self.batch_size)
        return _keep_lock(self, self._batch_transform(lambda t, n: t.view(*new, *t.shape[n:]), nd))

    def reshape(self, *shape: Any, size: Any = None) -> Any:
        """Like :meth:`view` but copies when a view is impossible.

        Args:
            *shape (int): the new batch size (or one sequence of ints, ``-1`` inferred).
            size (sequence of int, optional): the new batch size, as a keyword.
            inplace (bool, optional): make ``self`` hold the result (keyword only).
        """
        if size is not None:
            shape = (size,)
        shape = _shape_arg(shape)
        new = _infer_shape(shape, self.numel(), self.batch_size, "reshape")
        nd = len(self.batch_size)
        return self._batch_transform(lambda t, n: t.reshape(*new, *t.shape[n:]), nd)

    def permute(self, *dims: Any) -> Any:
        """Permutes the batch dims (feature dims stay in place).

        Args:
            *dims_list (int): the new order of the batch dims (or one sequence of them).
            dims (sequence of int, optional): the same, as a keyword.

        Raises:
            RuntimeError: ``dims`` is not a permutation of the batch dims.
        """
        dims = _permute_dims(dims, self.batch_size)
        nd = len(dims)
        return _keep_lock(
            self,
            self._batch_transform(
                lambda t, n: t.permute(*dims, *range(n, t.ndim)), nd, names=lambda ns: [ns[d] for d in dims]
            ),
        )

    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swaps two batch dims (feature dims stay in place).

        Args:
            dim0 (int): a batch dim (negative counts from the end of the batch dims).
            dim1 (int): the other batch dim.

        Returns:
            a TensorDict of the swapped views; names follow their dims.

        Raises:
            IndexError: a dim is out of range for the batch dims.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3]).transpose(0, 1)["a"].shape
            torch.Size([3, 2, 4])
        """
        nd = len(self.batch_size)
        d0, d1 = _norm_dim(dim0, nd), _norm_dim(dim1, nd)
        order = list(range(nd))
        order[d0], order[d1] = d1, d0
        return _keep_lock(
            self, self._batch_transform(lambda t, n: t.transpose(d0, d1), nd, names=lambda ns: [ns[d] for d in order])
        )

    def squeeze(self, dim: int | None = None) -> Any:
        """Removes batch dims of size 1 (only ``dim`` when given)."""
        nd = len(self.batch_size)
        if dim is None:
            dims = tuple(i for i, s in enumerate(self.batch_size) if s == 1)
        else:
            d = _norm_dim(dim, nd)
            dims = (d,) if self.batch_size[d] == 1 else ()
        if not dims:
            return self
        return _legacy_view(self, self._batch_transform(_squeezer(dims), nd, names=drop_dims(dims)))

    def unsqueeze(self, dim: int) -> Any:
        """Inserts a batch dim of size 1 at ``dim`` (``-1`` is after the last batch dim)."""
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd + 1, err=BatchDimError)
        return _legacy_view(self, self._batch_transform(_unsqueezer(d), nd, names=insert_dim(d)))

    def expand(self, *shape: Any) -> TensorDictBase:
        """Expands the batch dims to ``shape`` (new leading dims allowed); no copy."""
        shape = _shape_arg(shape)
        nd = len(self.batch_size)
        if len(shape) < nd:
            msg = f"expand: shape {tuple(shape)} has fewer dims than batch_size {tuple(self.batch_size)}."
            raise RuntimeError(msg)
        shape = tuple(
            self.batch_size[i - (len(shape) - nd)] if s == -1 else s for i, s in enumerate(shape)
        )
        return self._batch_transform(
            lambda t, n: t.expand(*shape, *t.shape[n:]), nd, names=insert_dim(0, len(shape) - nd)
        )

    def expand_as(self, other: Any) -> Any:
        """Expands to ``other.batch_size`` (a TensorDict) or ``other.shape`` (a tensor)."""
        shape = other.batch_size if hasattr(other, "batch_size") else other.shape
        return self.expand(shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        """Flattens batch dims ``start_dim..end_dim`` into one.

        Args:
            start_dim (int, optional): the first batch dim to flatten. Defaults to ``0``.
            end_dim (int, optional): the last one (inclusive). Defaults to ``-1``, the
                last batch dim.

        Returns:
            a TensorDict whose batch size has those dims multiplied into one.

        Raises:
            IndexError: a dim is out of range for the batch dims.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3]).flatten(0, 1).batch_size
            torch.Size([6])
        """
        nd = len(self.batch_size)
        s, e = _norm_dim(start_dim, nd), _norm_dim(end_dim, nd)
        if e <= s:
            return self
        return self._batch_transform(
            lambda t, n: t.flatten(s, e), nd, names=lambda ns: [*ns[:s], None, *ns[e + 1 :]]
        )

    def unflatten(self, dim: int, unflattened_size: Sequence[int]) -> Any:
        """Splits batch dim ``dim`` into ``unflattened_size``.

        Args:
            dim (int): the batch dim to split.
            unflattened_size (sequence of int): the new dims; their product is the
                size of ``dim`` (one entry may be ``-1``).

        Returns:
            a TensorDict with the new batch dims in place of ``dim``.

        Raises:
            IndexError: ``dim`` is out of range for the batch dims.
            RuntimeError: the sizes do not multiply to the size of ``dim``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(6, 4)}, [6]).unflatten(0, (2, 3))["a"].shape
            torch.Size([2, 3, 4])
        """
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        k = len(unflattened_size)
        return self._batch_transform(
            lambda t, n: t.unflatten(d, unflattened_size), nd, names=lambda ns: [*ns[:d], *([None] * k), *ns[d + 1 :]]
        )

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
        """Moves batch dims (``torch.movedim`` restricted to the batch dims).

        Args:
            source (int or sequence of int): the batch dims to move.
            destination (int or sequence of int): where they go, in the same order.

        Returns:
            a TensorDict of the permuted views.

        Raises:
            IndexError: a dim is out of range for the batch dims.
        """
        nd = len(self.batch_size)
        src = tuple(_norm_dim(s, nd) for s in ((source,) if isinstance(source, int) else source))
        dst = tuple(_norm_dim(s, nd) for s in ((destination,) if isinstance(destination, int) else destination))
        order = [d for d in range(nd) if d not in src]
        for d, s in sorted(zip(dst, src)):
            order.insert(d, s)
        if order == list(range(nd)):
            return self
        return self.permute(*order)

    moveaxis = movedim

    def repeat(self, *repeats: Any) -> Any:
        """Repeats along the batch dims (``torch.Tensor.repeat`` on the batch dims).

        Args:
            *repeats (int): how many times to repeat each batch dim (or one sequence).
            inplace (bool, optional): make ``self`` hold the result (keyword only).
        """
        repeats = _shape_arg(repeats)
        nd = len(self.batch_size)
        if len(repeats) < nd:
            msg = f"repeat: {len(repeats)} repeats for {nd} batch dims."
            raise RuntimeError(msg)
        return self._batch_transform(
            lambda t, n: t.repeat(*repeats, *([1] * (t.ndim - n))),
            nd,
            names=_keep_names if len(repeats) == nd else None,  # same dims: same names
        )

    def repeat_interleave(self, repeats: Any, dim: int | None = None, *, output_size: int | None = None) -> Any:
        """Repeats each element along batch dim ``dim`` (``None``: the batch is flattened
        first, as ``Tensor.repeat_interleave`` flattens a tensor).

        Args:
            repeats (int or Tensor): the number of repeats, one for all or one per
                element of ``dim``.
            dim (int, optional): the batch dim. Defaults to ``None``.

        Keyword Args:
            output_size (int, optional): the size of ``dim`` in the result (saves a
                sync for a tensor ``repeats``).

        Returns:
            a new TensorDict.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.arange(2)}, [2]).repeat_interleave(2, 0)["a"]
            tensor([0, 0, 1, 1])
        """
        if dim is None:
            flat = self.reshape(-1) if self.batch_dims != 1 else self
            return flat.repeat_interleave(repeats, 0, output_size=output_size)
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        return self._batch_transform(
            lambda t, n: t.repeat_interleave(repeats, d, output_size=output_size), nd, names=_keep_names
        )

    def flip(self, dims: Any) -> TensorDictBase:
        """Reverses the order along the given batch dims."""
        nd = len(self.batch_size)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        dims = tuple(_norm_dim(d, nd) for d in dims)
        return self._batch_transform(lambda t, n: t.flip(dims), nd, names=_keep_names)

    def roll(self, shifts: Any, dims: Any) -> Any:
        """Rolls along the given batch dims (``torch.roll`` on every leaf).

        Args:
            shifts (int or tuple of int): the shift, per dim.
            dims (int or tuple of int): the batch dims to roll along.

        Returns:
            a new TensorDict.

        Raises:
            IndexError: a dim is out of range for the batch dims.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.arange(3)}, [3]).roll(1, 0)["a"]
            tensor([2, 0, 1])
        """
        nd = len(self.batch_size)
        if isinstance(dims, int):
            dims = _norm_dim(dims, nd)
        else:
            dims = tuple(_norm_dim(d, nd) for d in dims)
        return self._batch_transform(lambda t, n: t.roll(shifts, dims), nd, names=_keep_names)

    def narrow(self, dim: int, start: int, length: int) -> TensorDictBase:
        """A view of ``length`` elements from ``start`` along batch dim ``dim``.

        Args:
            dim (int): the batch dim.
            start (int): the first element.
            length (int): the number of elements.

        Returns:
            a TensorDict of views; batch dim ``dim`` has size ``length``.

        Raises:
            IndexError: a dim is out of range for the batch dims.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.arange(5)}, [5]).narrow(0, 1, 2)["a"]
            tensor([1, 2])
        """
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        return self._batch_transform(lambda t, n: t.narrow(d, start, length), nd, names=_keep_names)

    def gather(self, dim: int, index: torch.Tensor, out: Any = None) -> Any:
        """Gathers along batch dim ``dim`` with ``index`` (shape = new batch shape).

        Args:
            dim (int): the batch dim to gather along.
            index (torch.Tensor): an integer tensor with one dim per batch dim; its
                shape is the batch size of the result.
            out (TensorDictBase, optional): a TensorDict to write the result into.

        Returns:
            a TensorDict of batch size ``index.shape``.

        Raises:
            RuntimeError: ``index`` does not have one dim per batch dim; ``out`` is given
                while a leaf requires grad (as ``torch.gather(..., out=)``).
        """
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        if index.ndim != nd:
            msg = f"gather: index has {index.ndim} dims, expected {nd} (the batch dims)."
            raise RuntimeError(msg)

        def fn(t: torch.Tensor, n: int) -> torch.Tensor:
            idx = index.reshape(*index.shape, *([1] * (t.ndim - n))).expand(*index.shape, *t.shape[n:])
            return torch.gather(t, d, idx)

        if out is not None and torch.is_grad_enabled() and self.requires_grad:
            # as torch.gather(..., out=): an out= write cannot be differentiated
            msg = (
                "gather(): functions with out=... arguments don't support automatic differentiation, "
                "but one of the arguments requires grad. Call it under torch.no_grad() or without out=."
            )
            raise RuntimeError(msg)
        res = self._batch_transform(fn, nd, names=_keep_names)
        if out is not None:
            out.update_(res)
            return out
        return res

    # -------------------------------------------------------------- splitting
    def _split_leaves(self, fn: Callable[[Any, int], Sequence[Any]], nd: int, names: Any = None) -> list:
        bd = len(self.batch_size)
        keys = []
        columns = []
        shapes = None
        for key, value in self._items_raw():
            if value.__class__ is _Tensor:  # the common leaf first: one class check
                parts = fn(value, nd)
                if shapes is None:
                    feat = value.ndim - bd
                    shapes = [p.shape[: p.ndim - feat] if feat else p.shape for p in parts]
            elif isinstance(value, _classes.TensorDictBase):
                parts = value._split_leaves(fn, nd) if names is None else value._split_leaves(fn, nd, names)
                if shapes is None and parts:
                    shapes = [p.batch_size[: p.batch_dims - (value.batch_dims - bd)] for p in parts]
            elif value.__class__ is UnbatchedTensor:
                probe = fn(torch.zeros((), dtype=torch.uint8).expand(value.batch_size), nd)
                parts = [value._rebatch(p.shape) for p in probe]
            elif isinstance(value, torch.Tensor):
                parts = fn(value, nd)
                if shapes is None:
                    feat = value.ndim - bd
                    shapes = [p.shape[: p.ndim - feat] if feat else p.shape for p in parts]
            elif hasattr(value, "_split_leaves"):
                parts = value._split_leaves(fn, nd)
            else:
                idx_parts = fn(torch.arange(value.numel()).view(value.batch_size), nd)
                if hasattr(value, "_from_index"):
                    parts = [value._from_index(ip) for ip in idx_parts]
                else:
                    parts = [value._with_batch(ip.shape) for ip in idx_parts]
            keys.append(key)
            columns.append(parts)
        if shapes is None:
            probe = fn(torch.zeros((), dtype=torch.uint8).expand(self.batch_size), nd)
            shapes = [p.shape for p in probe]
        new_like = self._new_like
        if names is not None:
            names = derive_names(self, names, nd) if self._has_names() or not callable(names) else None
        size = torch.Size
        # one row of leaves per part (``zip(*columns)`` transposes at C speed); shapes taken
        # from a leaf are torch.Size already
        rows = zip(*columns) if columns else [()] * len(shapes)
        return [
            new_like(dict(zip(keys, row)), batch_size=shape if shape.__class__ is size else size(shape), names=names)
            for row, shape in zip(rows, shapes)
        ]

    def _split_at(self, fn: Callable[[Any, int], Sequence[Any]], nd: int, names: Any, d: int) -> tuple:
        """``_split_leaves`` for a split along batch dim ``d``; a tree nested deeper than
        the recursion limit is split by indexing instead (the same views: indexing walks
        without recursion, and nothing was written before the walk gave up)."""
        try:
            return tuple(self._split_leaves(fn, nd, names))
        except RecursionError:
            pass
        size = self.batch_size[d]
        probe = torch.zeros((1,) * d + (size,) + (1,) * (nd - d - 1), dtype=torch.uint8)
        lead = (slice(None),) * d
        out = []
        start = 0
        for part in fn(probe, nd):
            if part.dim() < nd:  # the dim is gone (unbind): one position
                out.append(self[lead + (start,)])
                start += 1
            else:
                length = part.shape[d]
                out.append(self[lead + (slice(start, start + length),)])
                start += length
        return tuple(out)

    def unbind(self, dim: int = 0) -> tuple:
        """Splits along batch dim ``dim`` into a tuple of TensorDicts (views).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> a, b = TensorDict({"x": torch.arange(2)}, [2]).unbind(0)
            >>> a["x"], b["x"]
            (tensor(0), tensor(1))
        """
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        return self._split_at(lambda t, n: t.unbind(d), nd, drop_dims((d,)), d)

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple:
        """Splits along batch dim ``dim`` into chunks of ``split_size`` (or the given sizes).

        Args:
            split_size (int or sequence of int): the size of each chunk (the last may
                be smaller), or the sizes of all chunks.
            dim (int, optional): the batch dim. Defaults to ``0``.

        Returns:
            a tuple of TensorDicts (views).

        Raises:
            RuntimeError: the sizes do not add up to the size of ``dim``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> [t.batch_size[0] for t in TensorDict({"a": torch.zeros(5)}, [5]).split(2)]
            [2, 2, 1]
        """
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        if not isinstance(split_size, int):
            split_size = list(split_size)
            if sum(split_size) != self.batch_size[d]:
                msg = f"split sizes {split_size} do not add up to batch dim {d} of size {self.batch_size[d]}."
                raise RuntimeError(msg)
        return self._split_at(lambda t, n: t.split(split_size, d), nd, _keep_names, d)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """Splits into ``chunks`` pieces along batch dim ``dim``.

        Args:
            chunks (int): the number of pieces (the last may be smaller, as in torch).
            dim (int, optional): the batch dim to split. Defaults to ``0``.
        """
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        return self._split_at(lambda t, n: t.chunk(chunks, d), nd, _keep_names, d)

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple:
        """``torch.tensor_split`` along batch dim ``dim``.

        Args:
            indices_or_sections (int or sequence of int): a number of (near-)equal sections, or
                the batch indices to split at (as in ``torch.tensor_split``).
            dim (int, optional): the batch dim to split. Defaults to ``0``.
        """
        nd = len(self.batch_size)
        d = _norm_dim(dim, nd)
        return self._split_at(lambda t, n: t.tensor_split(indices_or_sections, d), nd, _keep_names, d)


def _batch_transform_node(td: Any, fn: Callable, nd: int, names: Any) -> Generator[tuple, Any, Any]:
    """``td._batch_transform(fn, nd, names=names)`` as a node generator for
    :func:`~tensordict._deep.trampoline`: a nested TensorDict that keeps
    :meth:`ShapeMixin._batch_transform` is yielded, others transform themselves."""
    bd = len(td.batch_size)
    source = {}
    new_bs = None
    for key, value in td._items_raw():
        if value.__class__ is _Tensor or (isinstance(value, _Tensor) and value.__class__ is not UnbatchedTensor):
            out = fn(value, nd)
            if new_bs is None:
                new_bs = out.shape[: out.ndim - (value.ndim - bd)]
            source[key] = out
            continue
        if isinstance(value, _classes.TensorDictBase):
            if type(value)._batch_transform is ShapeMixin._batch_transform:
                out = yield (value, fn, nd, names)
            else:
                out = value._batch_transform(fn, nd) if names is None else value._batch_transform(fn, nd, names=names)
            if new_bs is None:
                new_bs = out.batch_size[: out.batch_dims - (value.batch_dims - bd)]
        else:
            out = value._batch_transform(fn, nd)
        source[key] = out
    if new_bs is None:
        new_bs = fn(torch.zeros((), dtype=torch.uint8).expand(td.batch_size), nd).shape
    if names is not None:
        names = derive_names(td, names, nd) if td._has_names() or not callable(names) else None
    return td._new_like(source, batch_size=torch.Size(new_bs), names=names)


def _index_plan(td: Any, bs: torch.Size, index: Any) -> tuple:
    """``(index, new_batch_size, names)`` of ``td[index]``: the new batch size when it follows
    from the index alone (an int or a slice), else ``None`` (read from the results) and the
    index normalised.

    Raises:
        IndexError: an int index out of range of the first batch dim.
    """
    cls = index.__class__
    if cls is int and bs:
        n = bs[0]
        if not -n <= index < n:
            msg = f"index {index} is out of bounds for dimension 0 with size {n} (batch_size {tuple(bs)})."
            raise IndexError(msg)
        return index, bs[1:], td.names[1:] if td._has_names() else None
    if cls is slice and bs:
        return index, _Size((len(range(*index.indices(bs[0]))), *bs[1:])), td.names if td._has_names() else None
    index = td._normalize_index(index)
    names = None if not td._has_names() else index_names(td.names, index, len(bs))
    if len(index) == 1:
        index = index[0]
    return index, None, names


def _index_deep(self: Any, index: Any) -> Any:
    """``self._index(index)`` without recursion: the nested dense TensorDicts are walked
    with ``parents`` holding the nodes being built above the current one, so a chain of
    any depth works under the default recursion limit (other nested containers use their
    own ``_index``)."""
    td_cls = _classes.TensorDict
    tdb = _classes.TensorDictBase
    parents: list | None = None
    node = self
    opening = True
    while True:
        if opening:
            bs = node.batch_size
            index, new_bs, names = _index_plan(node, bs, index)
            fixed = new_bs is not None
            unbatched: list | None = None
            source: dict = {}
            items = iter(node._items_raw())
        for key, value in items:
            vcls = value.__class__
            if vcls is _Tensor:
                source[key] = value[index]
                continue
            if vcls is td_cls:
                if parents is None:
                    parents = []
                parents.append((node, index, bs, new_bs, names, fixed, unbatched, source, items, key))
                node = value
                break
            if vcls is UnbatchedTensor:
                if fixed:
                    source[key] = value._rebatch(new_bs)
                else:
                    if unbatched is None:
                        unbatched = []
                    unbatched.append(key)
                    source[key] = value
            elif isinstance(value, tdb):
                source[key] = value._index(index)
            else:
                source[key] = value[index]
        else:
            if new_bs is None:
                # the new batch dims, from the first tensor result (in key order)
                for key, value in node._items_raw():
                    if value.__class__ is UnbatchedTensor or isinstance(value, tdb):
                        continue
                    out = source[key]
                    if isinstance(out, _Tensor):
                        new_bs = out.shape[: out.ndim - (value.ndim - len(bs))]
                        break
                else:
                    new_bs = torch.zeros((), dtype=torch.uint8).expand(bs)[index].shape
            for key in unbatched or ():
                source[key] = source[key]._rebatch(new_bs)
            if new_bs.__class__ is not _Size:
                new_bs = _Size(new_bs)
            res = node._new_like(source, batch_size=new_bs, names=names)
            if not parents:
                return res
            node, index, bs, new_bs, names, fixed, unbatched, source, items, key = parents.pop()
            source[key] = res
            opening = False
            continue
        opening = True


def _squeezer(dims: tuple) -> Any:
    """``t.squeeze(dims)`` for the batch-transform engine, marked as a squeeze (``_squeezes``):
    a non-tensor stack squeezed back to one object throughout becomes that object's
    ``NonTensorData`` (see ``NonTensorStack._from_index``)."""

    def squeeze(t: torch.Tensor, n: int) -> torch.Tensor:
        return t.squeeze(dims)

    squeeze._squeezes = True  # type: ignore[attr-defined]
    return squeeze


def _unsqueezer(dim: int) -> Any:
    """``t.unsqueeze(dim)`` for the batch-transform engine, marked ``_unsqueezes``: a
    ``NonTensorData`` unsqueezed becomes a stack, as in tensordict 0.15 (a ``reshape`` that
    adds the same size-1 dim keeps it one object)."""

    def unsqueeze(t: torch.Tensor, n: int) -> torch.Tensor:
        return t.unsqueeze(dim)

    unsqueeze._unsqueezes = True  # type: ignore[attr-defined]
    return unsqueeze
