"""Shape operations on a lazy stack (``LazyShapeMixin``).

Operations that keep the stack dim whole (``unsqueeze``, ``squeeze``, ``permute``,
``transpose``, ``expand``, ``flatten``/``unflatten`` of other dims, ``unbind``,
``split``, ``chunk``) are applied to each stacked TensorDict and give a new lazy
stack (views where the TensorDicts give views). Every other batch transform
(``view``/``reshape`` to a new shape, ``flip``, ``gather``, ...) works on a dense
copy (:meth:`contiguous`) and returns a dense TensorDict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from tensordict import _classes, _stack
from tensordict._factories import emptied_lazy
from tensordict._host import LazyStackHost
from tensordict._shape import BatchDimError, _infer_shape, _norm_dim, _permute_dims, _shape_arg

__all__ = ["LazyShapeMixin"]

_Size = torch.Size


def _drop(shape: Sequence[int], dim: int) -> torch.Size:
    return _Size((*shape[:dim], *shape[dim + 1 :]))


def _refuse_inplace(op: str) -> None:
    msg = (
        f"{op}(..., inplace=True) is not supported for LazyStackedTensorDict; "
        f"call {op} without inplace=True, or densify first with contiguous()."
    )
    raise NotImplementedError(msg)


class LazyShapeMixin(LazyStackHost):
    """Batch-dim shape operations for lazy stacks."""

    def _batch_transform(
        self, fn: Callable[[Any, int], Any], nd: int | None = None, names: Any = None
    ) -> Any:
        """Generic batch transform.

        When the op acts only on dims before the stack dim (``nd <= stack_dim``, e.g.
        a parent TensorDict transforming its own batch dims), it runs on each stacked
        TensorDict and the result stays lazy (stacks of heterogeneous shapes included).
        Otherwise it runs on a dense copy (see :meth:`contiguous`).
        """
        if getattr(fn, "_empty_lazy", False):
            return emptied_lazy(self, fn, nd)
        tds = self.tensordicts
        if nd is not None and nd <= self.stack_dim and tds:
            if names is None:
                new_tds = [td._batch_transform(fn, nd) for td in tds]
            else:
                new_tds = [td._batch_transform(fn, nd, names=names) for td in tds]
            shift = new_tds[0].batch_dims - tds[0].batch_dims
            return self._new_lazy(new_tds, self.stack_dim + shift)
        return self.contiguous()._batch_transform(fn, nd, names=names)

    def _regroup(self, columns: list, new_sd: int, sizes: list) -> tuple:
        """``columns[i][j]`` is part ``j`` of TensorDict ``i``; returns one lazy stack per ``j``."""
        return tuple(
            self._new_lazy(
                [col[j] for col in columns],
                new_sd,
                _Size((*sizes[j][:new_sd], len(columns), *sizes[j][new_sd:])),
            )
            for j in range(len(sizes))
        )

    def _per_td(self, fn: Callable[[Any], Any], new_sd: int) -> Any:
        return self._new_lazy([fn(td) for td in self.tensordicts], new_sd)

    # -------------------------------------------------------------- splitting
    def unbind(self, dim: int = 0) -> tuple:
        """Splits along batch dim ``dim``; along ``stack_dim`` this returns the stacked
        TensorDicts themselves.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> tds = [TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(2)]
            >>> s = lazy_stack(tds)
            >>> s.unbind(0)[1] is tds[1]
            True
            >>> s.unbind(1)[0].batch_size
            torch.Size([2])
        """
        sd = self.stack_dim
        d = _norm_dim(dim, len(self._batch_size))
        if d == sd:
            return tuple(self.tensordicts)
        td_d = d - (d > sd)
        new_sd = sd - (d < sd)
        columns = [td.unbind(td_d) for td in self.tensordicts]
        part_bs = _drop(_drop(self._batch_size, d), new_sd)
        return self._regroup(columns, new_sd, [part_bs] * self._batch_size[d])

    def _split_stack(self, sizes: list) -> tuple:
        tds = self.tensordicts
        sd = self.stack_dim
        out = []
        start = 0
        bs = self._batch_size
        for size in sizes:
            out.append(
                self._new_lazy(
                    tds[start : start + size], sd, _Size((*bs[:sd], size, *bs[sd + 1 :]))
                )
            )
            start += size
        return tuple(out)

    def _split_other(self, d: int, fn: Callable[[Any, int], Sequence[Any]]) -> tuple:
        sd = self.stack_dim
        td_d = d - (d > sd)
        columns = [fn(td, td_d) for td in self.tensordicts]
        sizes = [c.batch_size for c in columns[0]]
        return self._regroup(columns, sd, sizes)

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple:
        """Splits along batch dim ``dim`` into lazy stacks (along ``stack_dim``, groups of
        the stacked TensorDicts)."""
        d = _norm_dim(dim, len(self._batch_size))
        if d != self.stack_dim:
            return self._split_other(d, lambda td, dd: td.split(split_size, dd))
        n = len(self.tensordicts)
        if isinstance(split_size, int):
            if split_size <= 0:
                msg = f"split_size must be a positive int, got {split_size}."
                raise RuntimeError(msg)
            sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
        else:
            sizes = list(split_size)
            if sum(sizes) != n:
                msg = f"split sizes {sizes} do not add up to batch dim {d} of size {n}."
                raise RuntimeError(msg)
        return self._split_stack(sizes)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """Splits into ``chunks`` lazy stacks along batch dim ``dim``."""
        d = _norm_dim(dim, len(self._batch_size))
        if d != self.stack_dim:
            return self._split_other(d, lambda td, dd: td.chunk(chunks, dd))
        n = len(self.tensordicts)
        size = -(-n // chunks) if n else 1
        return self.split(size, d) if n else (self,)

    # -------------------------------------------------------------- reshaping
    def unsqueeze(self, dim: int) -> Any:
        """Inserts a batch dim of size 1 at ``dim`` in every stacked TensorDict."""
        if _stack._LAZY_LEGACY[0]:  # a live view of the stack (upstream's legacy lazy views)
            return _classes.CustomOpTensorDict._make(self, "unsqueeze", (dim,))
        sd = self.stack_dim
        d = _norm_dim(dim, len(self._batch_size) + 1, err=BatchDimError)
        if d <= sd:
            return self._per_td(lambda td: td.unsqueeze(d), sd + 1)
        return self._per_td(lambda td: td.unsqueeze(d - 1), sd)

    def squeeze(self, dim: int | None = None) -> Any:
        """Removes batch dims of size 1; squeezing a stack dim of size 1 returns the
        only stacked TensorDict."""
        if _stack._LAZY_LEGACY[0]:
            return _classes.CustomOpTensorDict._make(self, "squeeze", (dim,))
        bs = self._batch_size
        if dim is None:
            out: Any = self
            for d in reversed([i for i, s in enumerate(bs) if s == 1]):
                out = out.squeeze(d)
            return out
        d = _norm_dim(dim, len(bs))
        if bs[d] != 1:
            return self
        sd = self.stack_dim
        if d == sd:
            return self.tensordicts[0]
        td_d = d - (d > sd)
        return self._per_td(lambda td: td.squeeze(td_d), sd - (d < sd))

    def permute(self, *dims: Any) -> Any:
        """Permutes the batch dims; the stack dim moves with them.

        Raises:
            RuntimeError: ``dims`` is not a permutation of the batch dims.
        """
        if _stack._LAZY_LEGACY[0]:
            return _classes.CustomOpTensorDict._make(self, "permute", _shape_arg(dims))
        dims = _permute_dims(dims, self._batch_size)
        sd = self.stack_dim
        td_dims = [d - (d > sd) for d in dims if d != sd]
        if td_dims == sorted(td_dims):
            parts = list(self.tensordicts)
        else:
            parts = [td.permute(*td_dims) for td in self.tensordicts]
        out = self._new_lazy(parts, dims.index(sd))
        if self._has_names():
            out.names = [self.names[d] for d in dims]
        return out

    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swaps two batch dims (the stack dim included).

        Raises:
            ValueError: a dim is out of range for the batch dims.
        """
        if _stack._LAZY_LEGACY[0]:
            return _classes.CustomOpTensorDict._make(self, "transpose", (dim0, dim1))
        nd = len(self._batch_size)
        if not (-nd <= dim0 < nd and -nd <= dim1 < nd):
            msg = (
                f"dim0 and dim1 must be within the range of the number of dimensions: got "
                f"({dim0}, {dim1}) for batch_size {tuple(self._batch_size)}."
            )
            raise ValueError(msg)
        d0, d1 = _norm_dim(dim0, nd), _norm_dim(dim1, nd)
        order = list(range(nd))
        order[d0], order[d1] = order[d1], order[d0]
        return self.permute(*order)

    def expand(self, *shape: Any) -> Any:
        """Expands the batch dims (new leading dims allowed); the stacked TensorDicts are
        expanded, a stack dim of size 1 repeats its TensorDict."""
        shape = _shape_arg(shape)
        bs = self._batch_size
        nd = len(bs)
        if len(shape) < nd:
            msg = f"expand: shape {tuple(shape)} has fewer dims than batch_size {tuple(bs)}."
            raise RuntimeError(msg)
        extra = len(shape) - nd
        shape = tuple(bs[i - extra] if s == -1 and i >= extra else s for i, s in enumerate(shape))
        new_sd = self.stack_dim + extra
        n = len(self.tensordicts)
        m = shape[new_sd]
        tds = self.tensordicts
        if m != n:
            if n != 1:
                msg = f"expand: the stack dim {self.stack_dim} has size {n} and cannot be expanded to {m}."
                raise RuntimeError(msg)
            tds = tds * m
        td_shape = _drop(shape, new_sd)
        return self._new_lazy([td.expand(td_shape) for td in tds], new_sd, _Size(shape))

    def flatten(self, start_dim: int = 0, end_dim: int = -1, *, inplace: bool = False) -> Any:
        """Flattens batch dims ``start_dim..end_dim``; dense when they span the stack dim.

        Raises:
            NotImplementedError: ``inplace=True`` (a lazy stack cannot become one
                TensorDict of another batch size).
        """
        if inplace:
            _refuse_inplace("flatten")
        nd = len(self._batch_size)
        s, e = _norm_dim(start_dim, nd), _norm_dim(end_dim, nd)
        if e <= s:
            return self
        sd = self.stack_dim
        if s <= sd <= e:
            return self.contiguous().flatten(s, e)
        if sd < s:
            return self._per_td(lambda td: td.flatten(s - 1, e - 1), sd)
        return self._per_td(lambda td: td.flatten(s, e), sd - (e - s))

    def unflatten(self, dim: int, unflattened_size: Sequence[int], *, inplace: bool = False) -> Any:
        """Splits batch dim ``dim`` into ``unflattened_size``; dense when ``dim`` is the stack dim.

        Raises:
            NotImplementedError: ``inplace=True``.
        """
        if inplace:
            _refuse_inplace("unflatten")
        nd = len(self._batch_size)
        d = _norm_dim(dim, nd)
        sd = self.stack_dim
        if d == sd:
            sizes = list(unflattened_size)
            if sizes.count(-1) == 1:
                known = math.prod(x for x in sizes if x != -1)
                sizes[sizes.index(-1)] = len(self.tensordicts) // known if known else 0
            if math.prod(sizes) != len(self.tensordicts):
                msg = f"unflatten: sizes {tuple(unflattened_size)} do not multiply to the size {len(self.tensordicts)} of dim {d}."
                raise RuntimeError(msg)
            return self._group_stack(list(self.tensordicts), sizes)
        if d < sd:
            return self._per_td(
                lambda td: td.unflatten(d, unflattened_size), sd + len(unflattened_size) - 1
            )
        return self._per_td(lambda td: td.unflatten(d - 1, unflattened_size), sd)

    def _group_stack(self, tds: list, sizes: list) -> Any:
        """Lazy stacks of lazy stacks: the stack dim split into ``sizes`` (no copy)."""
        sd = self.stack_dim
        if len(sizes) == 1:
            return self._new_lazy(tds, sd)
        step = len(tds) // sizes[0] if sizes[0] else 0
        parts = [self._group_stack(tds[i * step : (i + 1) * step], sizes[1:]) for i in range(sizes[0])]
        bs = self._batch_size
        return self._new_lazy(parts, sd, _Size((*bs[:sd], *sizes, *bs[sd + 1 :])))

    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> Any:
        """As :meth:`TensorDictBase.view`; splitting the stack dim into several dims gives
        lazy stacks of lazy stacks of the same TensorDicts (no copy).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict(a=torch.tensor(i)) for i in range(6)])
            >>> v = s.view(2, 3)
            >>> type(v[0]).__name__, v[1, 2]["a"]
            ('LazyStackedTensorDict', tensor(5))
        """
        if size is None and batch_size is None and shape and not _stack._LAZY_LEGACY[0]:
            dims = _shape_arg(shape)
            if dims and not isinstance(dims[0], torch.dtype) and self.tensordicts:
                bs = self._batch_size
                new = _infer_shape(dims, self.numel(), bs, "view")
                sd, nd = self.stack_dim, len(bs)
                tail = nd - sd - 1
                mid = new[sd : len(new) - tail]
                if (
                    len(new) > nd
                    and new[:sd] == bs[:sd]
                    and new[len(new) - tail :] == bs[sd + 1 :]
                    and math.prod(mid) == bs[sd]
                ):
                    return self._group_stack(list(self.tensordicts), list(mid))
        return super().view(*shape, size=size, batch_size=batch_size)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`TensorDictBase.to`, without ``batch_size=``.

        Raises:
            TypeError: ``batch_size=`` is given (the stack dim cannot be removed;
                densify first with ``contiguous()``).
        """
        if kwargs.get("batch_size") is not None:
            msg = (
                "Cannot pass batch-size to a LazyStackedTensorDict.to(): the stack dim cannot change. "
                "Densify first with contiguous()."
            )
            raise TypeError(msg)
        return super().to(*args, **kwargs)

    def reshape(self, *shape: Any, size: Any = None, inplace: bool = False) -> Any:
        """Reshapes the batch dims; the result is a lazy stack (the same shape returns ``self``).

        When the new shape keeps the dims up to and including the stack dim, each stacked
        TensorDict is reshaped (views where possible). Otherwise the stack is made dense,
        reshaped, and stacked again along the new first dim (a 0-dim shape gives the
        dense TensorDict).

        Raises:
            RuntimeError: ``shape`` does not fit the number of elements.
            NotImplementedError: ``inplace=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict, lazy_stack
            >>> s = lazy_stack([TensorDict({"a": torch.zeros(2, 3)}, [2, 3]) for _ in range(4)])
            >>> out = s.reshape(-1)
            >>> type(out).__name__, out.batch_size
            ('LazyStackedTensorDict', torch.Size([24]))
            >>> s.reshape(4, 6).tensordicts[0].batch_size
            torch.Size([6])
        """
        if inplace:
            _refuse_inplace("reshape")
        if size is not None:
            shape = (size,)
        shape = _shape_arg(shape)
        bs = self._batch_size
        new = _infer_shape(shape, self.numel(), bs, "reshape")
        if new == bs:
            return self
        sd = self.stack_dim
        if len(new) > sd and new[: sd + 1] == bs[: sd + 1]:
            td_shape = (*bs[:sd], *new[sd + 1 :])
            return self._per_td(lambda td: td.reshape(td_shape), sd)
        dense = self.contiguous().reshape(new)
        if not new:
            return dense
        out = self._new_lazy(list(dense.unbind(0)), 0, new)
        if self.is_locked:
            out.lock_()
        return out
