"""Reductions over the leaves of a TensorDict (``ReductionMixin``, a base of ``MathMixin``).

Every reduction takes the same ``dim`` forms:

* ``dim`` not given (or ``None``): each leaf is reduced over all its elements; the
  result has ``batch_size=[]`` and scalar leaves (as ``tensor.sum()``).
* an int or a tuple of ints: batch dims (negative ones count from the end of the
  batch dims), reduced in every leaf; they leave the batch size (or stay with size 1
  under ``keepdim=True``). Nested TensorDicts keep their extra batch dims.
* ``"feature"``: each leaf is reduced over its feature dims (those after the batch
  dims of the TensorDict holding it); the batch size is kept.

With ``reduce=True`` all the leaves are reduced together into one tensor: a scalar
without ``dim``; the batch shape with ``dim="feature"``; and, with batch dims, the
leaves (same number of dims) are concatenated along the first of them and reduced
over them, as ``torch.<op>`` would on the concatenation.

Non-tensor entries: ``NonTensorData`` follows the new batch size; a ``NonTensorStack``
(one object per element) cannot be reduced and is left out of the result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._apply import (
    _NESTED,
    _TC,
    _flatten_tensors,
    _is_tensorclass,
    _refuse_exclusive,
    _rewrap,
    _unflatten_tensors,
)
from tensordict._host import TensorDictHost
from tensordict._keys import NO_DEFAULT
from tensordict._nontensor import NonTensorData

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["ReductionMixin"]

_Tensor = torch.Tensor
_Size = torch.Size

_ALL = "all"
_FEATURE = "feature"
_BATCH = "batch"


def _norm_dims(td: Any, dim: Any, name: str) -> tuple[str, tuple]:
    """``(mode, dims)`` for a ``dim`` argument; ``dims`` are sorted non-negative batch dims."""
    if dim is NO_DEFAULT or dim is None:
        return _ALL, ()
    if isinstance(dim, str):
        if dim != "feature":
            msg = f"{name}: dim must be an int, a tuple of int, None or 'feature', got {dim!r}."
            raise ValueError(msg)
        return _FEATURE, ()
    nd = len(td.batch_size)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not isinstance(d, int):
            msg = f"{name}: dim must be an int or a tuple of int, got {dim!r}."
            raise TypeError(msg)
        if not -nd <= d < nd:
            msg = (
                f"{name}: dim {d} is out of range for a TensorDict with {nd} batch dims "
                f"(batch_size {tuple(td.batch_size)}); reductions act on batch dims, use "
                "dim='feature' for the feature dims."
            )
            raise IndexError(msg)
        out.append(d + nd if d < 0 else d)
    if len(set(out)) != len(out):
        msg = f"{name}: dim {dim!r} repeats a dimension."
        raise RuntimeError(msg)
    return _BATCH, tuple(sorted(out))


def _new_batch(bs: torch.Size, mode: str, dims: tuple, keepdim: bool) -> torch.Size:
    if mode == _FEATURE:
        return bs
    if mode == _ALL:
        return _Size([1] * len(bs)) if keepdim else _Size(())
    if keepdim:
        return _Size(1 if i in dims else s for i, s in enumerate(bs))
    return _Size(s for i, s in enumerate(bs) if i not in dims)


def _leaf_dims(x: _Tensor, mode: str, dims: tuple, nd: int) -> tuple | None:
    """The dims of leaf ``x`` to reduce (``None``: every element)."""
    if mode == _BATCH:
        return dims
    if mode == _FEATURE:
        return tuple(range(nd, x.ndim))
    return None


def _reduce_tree(
    td: Any, leaf_fn: Callable, mode: str, dims: tuple, keepdim: bool, nout: int
) -> list:
    """Builds ``nout`` TensorDicts from ``leaf_fn(leaf, node_nd)`` (a tensor, or a
    tuple of ``nout`` tensors). The nested TensorDicts are walked with an explicit stack
    of frames ``(td, items, sources, key, tensorclass instance, nd, new batch size)``
    (any depth); a node's results go into its parent's sources when its last entry is
    done."""
    TensorDictBase = _classes.TensorDictBase  # noqa: N806
    lazy_cls = _classes.LazyStackedTensorDict
    td_cls = _classes.TensorDict
    single = nout == 1
    stack: list = []
    node: Any = td
    key: Any = None
    wrapper: Any = None
    frame: tuple
    while True:
        if node is not None:  # open a node: its frame goes on the stack
            if node.__class__ is not td_cls and isinstance(node, lazy_cls):
                _refuse_exclusive(node)  # the stacked walk would drop a key held by some only
            bs = node.batch_size
            frame = (node, iter(node._items_raw()), [{} for _ in range(nout)], key, wrapper, len(bs),
                     _new_batch(bs, mode, dims, keepdim))
            stack.append(frame)
            node = None
        else:
            frame = stack[-1]
        _, items, sources, _, _, nd, new_bs = frame
        for key, value in items:
            if value.__class__ is not _Tensor and getattr(value.__class__, "_pass_through", False):  # UnbatchedTensor
                for src in sources:
                    src[key] = value._rebatch(new_bs)
            elif isinstance(value, _Tensor):
                res = leaf_fn(value, nd)
                if single:
                    sources[0][key] = res
                else:
                    for src, r in zip(sources, res):
                        src[key] = r
            elif isinstance(value, TensorDictBase):
                node, wrapper = value, None
                break
            elif _is_tensorclass(value, TensorDictBase):
                node, wrapper = value._tensordict, value
                break
            elif isinstance(value, NonTensorData):
                sources[0][key] = value._with_batch(new_bs)
        else:
            stack.pop()
            owner = frame[0]
            if new_bs == owner.batch_size:
                built = [owner._new_like(src) for src in sources]
            else:
                built = [owner._new_like(src, batch_size=new_bs) for src in sources]
            if not stack:
                return built
            key, wrapper = frame[3], frame[4]
            for src, r in zip(stack[-1][2], built):
                src[key] = r if wrapper is None else _rewrap(wrapper, r)


def _finish_names(td: Any, out: Any, mode: str, dims: tuple, keepdim: bool) -> Any:
    if mode == _BATCH and td._has_names():
        names = td.names
        if keepdim:
            out.names = names
        else:
            out.names = [n for i, n in enumerate(names) if i not in dims]
    return out


def _feature_safe(op: Callable) -> Callable:
    """Wraps ``op(x, dims, keepdim)`` so that an empty ``dims`` tuple (a leaf without
    feature dims) reduces nothing instead of everything (torch's meaning of ``()``)."""

    def wrapped(x: _Tensor, dims: tuple | None, keepdim: bool) -> Any:
        if dims is not None and not dims:
            return op(x.unsqueeze(-1), (x.ndim,), False)
        return op(x, dims, keepdim)

    return wrapped


def _reduce(
    td: Any,
    name: str,
    op: Callable,
    dim: Any,
    keepdim: Any,
    reduce: Any,
    combine: Callable | None = None,
    nout: int = 1,
) -> Any:
    """Runs ``op(x, dims_or_None, keepdim)`` on every leaf (or on all leaves together).

    ``combine`` (for ``reduce=True`` without ``dim``) merges per-leaf results, for ops
    where that is exact (sum of sums, max of maxes); otherwise the flattened leaves
    are concatenated first.
    """
    keepdim = False if keepdim is NO_DEFAULT or keepdim is None else bool(keepdim)
    mode, dims = _norm_dims(td, dim, name)
    if mode == _FEATURE and keepdim:
        msg = f"{name}: keepdim=True is not allowed with dim='feature'."
        raise ValueError(msg)
    op = _feature_safe(op)
    if reduce:
        return _reduce_all(td, name, op, mode, dims, keepdim, combine)
    if mode == _ALL and keepdim:

        def leaf_fn(x: _Tensor, nd: int) -> Any:
            return op(x, tuple(range(x.ndim)), True)

    else:

        def leaf_fn(x: _Tensor, nd: int) -> Any:
            return op(x, _leaf_dims(x, mode, dims, nd), keepdim)

    outs = _reduce_tree(td, leaf_fn, mode, dims, keepdim, nout)
    outs = [_finish_names(td, o, mode, dims, keepdim) for o in outs]
    return outs[0] if nout == 1 else outs


def _reduce_all(
    td: Any,
    name: str,
    op: Callable,
    mode: str,
    dims: tuple,
    keepdim: bool,
    combine: Callable | None,
) -> Any:
    leaves: list = []
    _flatten_tensors(td, leaves)
    if not leaves:
        msg = f"{name}(reduce=True): the TensorDict has no tensor leaf to reduce."
        raise RuntimeError(msg)
    if mode == _ALL:
        if combine is not None:
            return combine(torch.stack([op(x, None, False) for x in leaves]))
        return op(torch.cat([x.reshape(-1) for x in leaves]), None, False)
    bs = td.batch_size
    nd = len(bs)
    if mode == _FEATURE:
        flat = torch.cat([x.reshape(*bs, -1) for x in leaves], dim=nd)
        return op(flat, (nd,), False)
    return op(_cat_along(leaves, dims[0], name), dims, keepdim)


def _cat_along(leaves: list, dim: int, name: str) -> _Tensor:
    """The leaves concatenated along batch dim ``dim`` (for ``reduce=True`` with a dim)."""
    shapes = {tuple(x.shape[:dim]) + tuple(x.shape[dim + 1 :]) for x in leaves}
    if len(shapes) != 1:
        msg = (
            f"{name}(reduce=True, dim={dim}): the leaves are concatenated along dim {dim} before "
            f"the reduction, so their other dims must match; got shapes "
            f"{sorted({tuple(x.shape) for x in leaves})}. Reduce without `dim`, with "
            "dim='feature', or without reduce=True."
        )
        raise RuntimeError(msg)
    return torch.cat(leaves, dim=dim)


# ---------------------------------------------------------------------- per-op kernels
def _sum_op(fn: Callable, dtype: Any) -> Callable:
    def op(x: _Tensor, dims: tuple | None, keepdim: bool) -> _Tensor:
        if dims is None:
            return fn(x, dtype=dtype)
        return fn(x, dim=dims, keepdim=keepdim, dtype=dtype)

    return op


def _prod_op(dtype: Any) -> Callable:
    def op(x: _Tensor, dims: tuple | None, keepdim: bool) -> _Tensor:
        if dims is None:
            return torch.prod(x, dtype=dtype)
        if len(dims) == 1:
            return torch.prod(x, dims[0], keepdim=keepdim, dtype=dtype)
        out = x if dtype is None else x.to(dtype)
        for d in sorted(dims, reverse=True):
            out = torch.prod(out, d, keepdim=keepdim)
        return out

    return op


def _stat_op(fn: Callable, correction: Any) -> Callable:
    def op(x: _Tensor, dims: tuple | None, keepdim: bool) -> _Tensor:
        return fn(x, dim=dims, correction=correction, keepdim=keepdim)

    return op


def _dims_op(fn: Callable, **kw: Any) -> Callable:
    """For ops whose ``dim`` must be given (amax, logsumexp): ``None`` means every dim."""

    def op(x: _Tensor, dims: tuple | None, keepdim: bool) -> _Tensor:
        return fn(x, dim=tuple(range(x.ndim)) if dims is None else dims, keepdim=keepdim, **kw)

    return op


def _minmax_op(fn: Callable, afn: Callable) -> Callable:
    """``max``/``min``: ``(values, indices)`` over one dim, plain values otherwise."""

    def op(x: _Tensor, dims: tuple | None, keepdim: bool) -> Any:
        if dims is None:
            return fn(x)
        if len(dims) == 1:
            return tuple(fn(x, dims[0], keepdim=keepdim))
        return afn(x, dim=dims, keepdim=keepdim)

    return op


def _write_out(out: Any, result: Any) -> Any:
    """Copies ``result`` into ``out`` (tensor leaves already in ``out`` are written in
    place, the others are set) and returns ``out``."""
    if isinstance(result, _Tensor):
        if not isinstance(out, _Tensor):
            msg = f"out must be a Tensor for a reduction with reduce=True, got {type(out).__name__}."
            raise TypeError(msg)
        out.resize_(result.shape).copy_(result)
        return out
    if isinstance(result, tuple):  # (values, indices) return types
        if len(out) != len(result):
            msg = f"out must hold {len(result)} TensorDicts (values, indices), got {len(out)}."
            raise ValueError(msg)
        for o, r in zip(out, result):
            _write_out(o, r)
        return out
    if not isinstance(out, _classes.TensorDictBase):
        msg = f"out must be a TensorDict, got {type(out).__name__}."
        raise TypeError(msg)
    if out.batch_size != result.batch_size:
        if out.is_empty():
            out.batch_size = result.batch_size
        else:
            msg = f"out has batch_size {tuple(out.batch_size)}, the result has {tuple(result.batch_size)}."
            raise RuntimeError(msg)
    for key, value in result.items(include_nested=True, leaves_only=True):
        existing = out._get_any_raw(key, None)
        if isinstance(existing, _Tensor) and isinstance(value, _Tensor) and existing.shape == value.shape:
            existing.copy_(value)
        else:
            out.set(key, value)
    return out


def _with_out(method: Callable) -> Callable:
    """Adds the ``out=`` keyword to a reduction: the result is written into ``out``
    (see :func:`_write_out`), which is returned."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        if out is None:
            return result
        return _write_out(out, result)

    return wrapper


def _with_key_transform(method: Callable) -> Callable:
    """Adds ``key_transform=`` (tensordict 0.15): a function applied to the name of every
    entry of the resulting TensorDict, at every level (ignored for a tensor result)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, key_transform: Callable | None = None, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        if key_transform is None or not isinstance(result, _classes.TensorDictBase):
            return result
        return _transform_keys(result, key_transform)

    wrapper.__doc__ = (method.__doc__ or "").rstrip() + (
        "\n\n        ``key_transform`` (Callable, keyword, optional): a function applied to the name of"
        "\n        every entry of the result, at every level (``lambda key: f\"avg_{key}\"``); ignored"
        "\n        when the result is a tensor (``reduce=True``).\n"
    )
    return wrapper


def _transform_keys(td: Any, fn: Callable) -> Any:
    out = _classes.TensorDict(batch_size=td.batch_size, device=td.device)
    for key, value in td._items_raw():
        if type(value) is _classes.TensorDict:
            value = _transform_keys(value, fn)
        out.set(fn(key), value)
    return out


def _quantile_op(q: Any, interpolation: str) -> Callable:
    def op(x: _Tensor, dims: tuple | None, keepdim: bool) -> _Tensor:
        if not x.is_floating_point():
            x = x.float()
        qq = q.to(device=x.device, dtype=x.dtype) if isinstance(q, _Tensor) else q
        if dims is None:
            return torch.quantile(x.reshape(-1), qq, interpolation=interpolation)
        if len(dims) == 1:
            return torch.quantile(x, qq, dim=dims[0], keepdim=keepdim, interpolation=interpolation)
        rest = [d for d in range(x.ndim) if d not in dims]
        moved = x.permute(*rest, *dims).reshape(*[x.shape[d] for d in rest], -1)
        res = torch.quantile(moved, qq, dim=-1, interpolation=interpolation)
        if keepdim:
            lead = res.shape[: res.ndim - len(rest)]
            shape = [1 if d in dims else x.shape[d] for d in range(x.ndim)]
            res = res.reshape(*lead, *shape)
        return res

    return op


def _return_type(name: str, values: Any, indices: Any) -> Any:
    return getattr(torch.return_types, name)((values, indices))


def _check_single_dim(td: Any, dim: Any, name: str) -> int:
    if isinstance(dim, (tuple, list)):
        if len(dim) != 1:
            msg = f"{name}: dim must be a single batch dim, got {dim!r}."
            raise ValueError(msg)
        dim = dim[0]
    if not isinstance(dim, int):
        msg = f"{name}: dim must be an int (a batch dim), got {dim!r}."
        raise TypeError(msg)
    return _norm_dims(td, dim, name)[1][0]


def _shape_preserving(td: Any, fn: Callable) -> Any:
    leaves: list = []
    spec = _flatten_tensors(td, leaves)
    return _unflatten_tensors(spec, [fn(x) for x in leaves])[0]


class ReductionMixin(TensorDictHost):
    """Reductions over batch dims, feature dims or all elements (see module docs)."""

    @_with_key_transform
    @_with_out
    def sum(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: Any = NO_DEFAULT,
        *,
        dtype: Any = None,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Sum of every leaf, over all its elements, batch dims or feature dims.

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce
                (negative counts from the end of the batch dims); ``"feature"`` reduces
                each leaf's feature dims and keeps the batch size. Without it every
                element of each leaf is reduced and the batch size becomes ``[]``.
            keepdim (bool): keep the reduced batch dims with size 1. Defaults to ``False``.

        Keyword Args:
            dtype (torch.dtype, optional): leaves are cast to it before summing.
            reduce (bool, optional): sum all leaves together into one tensor.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Raises:
            IndexError: ``dim`` is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, 4), "b": {"c": torch.ones(3, 4, 2)}}, [3, 4])
            >>> td.sum(dim=0)["b", "c"].shape
            torch.Size([4, 2])
            >>> td.sum()["a"]
            tensor(12.)
            >>> td.sum(reduce=True)
            tensor(36.)
            >>> td.sum(dim="feature")["b", "c"].shape
            torch.Size([3, 4])
        """
        return _reduce(
            self, "sum", _sum_op(torch.sum, dtype), dim, keepdim, reduce, combine=torch.sum
        )

    @_with_out
    def nansum(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: Any = NO_DEFAULT,
        *,
        dtype: Any = None,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Like :meth:`sum`, treating NaN as zero.

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims; without it every element of
                each leaf is reduced (see :meth:`sum`).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            dtype (torch.dtype, optional): leaves are cast to it first.
            reduce (bool, optional): combine all leaves into one tensor.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1.0, float("nan")])}, [2])
            >>> td.nansum(dim=0)["a"]
            tensor(1.)
        """
        return _reduce(
            self, "nansum", _sum_op(torch.nansum, dtype), dim, keepdim, reduce, combine=torch.nansum
        )

    @_with_key_transform
    @_with_out
    def mean(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: Any = NO_DEFAULT,
        *,
        dtype: Any = None,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Mean of every leaf (``dim`` forms as in :meth:`sum`); leaves must be floating point
        (or pass ``dtype``). With ``reduce=True`` the mean of all elements of all leaves.

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims; without it every element of
                each leaf is reduced (see :meth:`sum`).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            dtype (torch.dtype, optional): leaves are cast to it first.
            reduce (bool, optional): combine all leaves into one tensor.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 3.0], [5.0, 7.0]])}, [2, 2])
            >>> td.mean(dim=1)["a"]
            tensor([2., 6.])
            >>> td.mean(dim=(0, 1), keepdim=True).batch_size
            torch.Size([1, 1])
        """
        return _reduce(self, "mean", _sum_op(torch.mean, dtype), dim, keepdim, reduce)

    @_with_out
    def nanmean(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: Any = NO_DEFAULT,
        *,
        dtype: Any = None,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Like :meth:`mean`, ignoring NaN.

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims; without it every element of
                each leaf is reduced (see :meth:`sum`).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            dtype (torch.dtype, optional): leaves are cast to it first.
            reduce (bool, optional): combine all leaves into one tensor.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1.0, float("nan"), 3.0])}, [3])
            >>> td.nanmean(dim=0)["a"]
            tensor(2.)
        """
        return _reduce(self, "nanmean", _sum_op(torch.nanmean, dtype), dim, keepdim, reduce)

    @_with_out
    def prod(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: Any = NO_DEFAULT,
        *,
        dtype: Any = None,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Product of every leaf (``dim`` forms as in :meth:`sum`; a tuple reduces each dim).

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims; without it every element of
                each leaf is reduced (see :meth:`sum`).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            dtype (torch.dtype, optional): leaves are cast to it first.
            reduce (bool, optional): combine all leaves into one tensor.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 2.0], [3.0, 4.0]])}, [2, 2])
            >>> td.prod(dim=0)["a"]
            tensor([3., 8.])
            >>> td.prod(dim=(0, 1))["a"]
            tensor(24.)
        """
        return _reduce(self, "prod", _prod_op(dtype), dim, keepdim, reduce, combine=torch.prod)

    @_with_key_transform
    @_with_out
    def std(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: Any = NO_DEFAULT,
        *,
        correction: int = 1,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Standard deviation of every leaf (``dim`` forms as in :meth:`sum`).

        Keyword Args:
            correction (int): Bessel's correction (``1``: unbiased). Defaults to 1.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1.0, 3.0])}, [2])
            >>> td.std(dim=0)["a"]
            tensor(1.4142)
        """
        return _reduce(self, "std", _stat_op(torch.std, correction), dim, keepdim, reduce)

    @_with_key_transform
    @_with_out
    def var(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: Any = NO_DEFAULT,
        *,
        correction: int = 1,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Variance of every leaf (``dim`` forms as in :meth:`sum`).

        Keyword Args:
            correction (int): Bessel's correction (``1``: unbiased). Defaults to 1.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1.0, 3.0])}, [2])
            >>> td.var(dim=0, correction=0)["a"]
            tensor(1.)
        """
        return _reduce(self, "var", _stat_op(torch.var, correction), dim, keepdim, reduce)

    def _minmax(self, name: str, dim: Any, keepdim: bool, reduce: Any, return_indices: bool) -> Any:
        fn = torch.max if name == "max" else torch.min
        afn = torch.amax if name == "max" else torch.amin
        if dim is NO_DEFAULT or dim is None or dim == "feature":
            if (
                not reduce
                and not keepdim
                and dim != "feature"
                and torch._C._functorch.peek_interpreter_stack() is None
            ):
                leaves: list = []
                spec = _flatten_tensors(self, leaves)
                if leaves and name == "max":
                    try:
                        res = list(torch._foreach_max(leaves))
                    except (RuntimeError, TypeError):
                        res = [fn(x) for x in leaves]
                else:
                    res = [fn(x) for x in leaves]
                return _scalar_tree(spec, res)
            return _reduce(self, name, _dims_op(afn), dim, keepdim, reduce, combine=afn)
        d = _check_single_dim(self, dim, name)
        if reduce:
            leaves = []
            _flatten_tensors(self, leaves)
            out = fn(_cat_along(leaves, d, name), d, keepdim=keepdim)
            return out if return_indices else out.values
        if not return_indices:
            return _reduce(self, name, _dims_op(afn), d, keepdim, None)
        values, indices = _reduce(self, name, _minmax_op(fn, afn), d, keepdim, None, nout=2)
        return _return_type(name, values, indices)

    @_with_out
    def max(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: bool = False,
        *,
        reduce: Any = None,
        return_indices: bool = True,
    ) -> Any:
        """Maximum of every leaf.

        Without ``dim`` each leaf is reduced to its largest element (one
        ``torch._foreach_max`` call). With an int batch ``dim``, as :func:`torch.max`,
        the result is a named tuple ``(values, indices)`` of two TensorDicts (or only
        ``values`` when ``return_indices=False``).

        Args:
            dim (int, optional): the batch dim to reduce.
            keepdim (bool): keep the reduced dim with size 1.

        Keyword Args:
            reduce (bool, optional): reduce all leaves together into one tensor.
            return_indices (bool): return ``(values, indices)`` when ``dim`` is given.

        Raises:
            ValueError: ``dim`` is a tuple of several dims (use :meth:`amax`).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 5.0], [4.0, 2.0]])}, [2, 2])
            >>> td.max()["a"]
            tensor(5.)
            >>> out = td.max(dim=0)
            >>> out.values["a"], out.indices["a"]
            (tensor([4., 5.]), tensor([1, 0]))
            >>> td.max(reduce=True)
            tensor(5.)
        """
        return self._minmax("max", dim, keepdim, reduce, return_indices)

    @_with_out
    def min(
        self,
        dim: Any = NO_DEFAULT,
        keepdim: bool = False,
        *,
        reduce: Any = None,
        return_indices: bool = True,
    ) -> Any:
        """Minimum of every leaf; see :meth:`max`.

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims; without it every element of
                each leaf is reduced (see :meth:`sum`).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            reduce (bool, optional): combine all leaves into one tensor.
            return_indices (bool, optional): with an int ``dim``, return
                ``(values, indices)`` TensorDicts. Defaults to ``True``.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 5.0], [4.0, 2.0]])}, [2, 2])
            >>> td.min(dim=1).values["a"]
            tensor([1., 2.])
        """
        return self._minmax("min", dim, keepdim, reduce, return_indices)

    @_with_out
    def amax(self, dim: Any = NO_DEFAULT, keepdim: bool = False, *, reduce: Any = None) -> TensorDictBase | torch.Tensor:
        """Maximum values of every leaf over ``dim`` (int, tuple, "feature" or all).

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims; without it every element of
                each leaf is reduced (see :meth:`sum`).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            reduce (bool, optional): combine all leaves into one tensor.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 5.0], [4.0, 2.0]])}, [2, 2])
            >>> td.amax(dim=(0, 1))["a"]
            tensor(5.)
        """
        return _reduce(self, "amax", _dims_op(torch.amax), dim, keepdim, reduce, combine=torch.amax)

    @_with_out
    def amin(self, dim: Any = NO_DEFAULT, keepdim: bool = False, *, reduce: Any = None) -> TensorDictBase | torch.Tensor:
        """Minimum values of every leaf over ``dim`` (int, tuple, "feature" or all).

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims; without it every element of
                each leaf is reduced (see :meth:`sum`).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            reduce (bool, optional): combine all leaves into one tensor.

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([[1.0, 5.0], [4.0, 2.0]])}, [2, 2])
            >>> td.amin(dim=0)["a"]
            tensor([1., 2.])
        """
        return _reduce(self, "amin", _dims_op(torch.amin), dim, keepdim, reduce, combine=torch.amin)

    @_with_out
    def logsumexp(self, dim: Any = None, keepdim: bool = False, *, reduce: Any = None) -> TensorDictBase | torch.Tensor:
        """``log(sum(exp(x)))`` of every leaf over batch dims (numerically stable).

        Unlike :meth:`sum`, it never reduces the feature dims unless asked: without
        ``dim`` every batch dim is reduced (tensordict 0.15).

        Args:
            dim (int, tuple of int or "feature", optional): the batch dim(s) to reduce,
                ``"feature"`` for each leaf's feature dims. Defaults to ``None``: all the
                batch dims (a TensorDict without batch dims is returned unchanged, copied).
            keepdim (bool, optional): keep the reduced batch dims with size 1.
                Defaults to ``False``.

        Keyword Args:
            reduce (bool, optional): combine all leaves into one tensor.
            out (TensorDictBase, optional): where to write the result (returned).

        Returns:
            a TensorDict with the reduced batch size, or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.zeros(2, 3), batch_size=[2])
            >>> td.logsumexp()["a"]  # log(exp(0) + exp(0))
            tensor([0.6931, 0.6931, 0.6931])
        """
        if (dim is None or dim is NO_DEFAULT) and not reduce:  # reduce=True: one value, as before
            if not self.batch_dims:
                return self.apply(torch.clone)
            dim = tuple(range(self.batch_dims))
        return _reduce(
            self,
            "logsumexp",
            _dims_op(torch.logsumexp),
            dim,
            keepdim,
            reduce,
            combine=lambda t: torch.logsumexp(t, 0),
        )

    @_with_out
    def quantile(
        self,
        q: Any,
        dim: Any = NO_DEFAULT,
        keepdim: bool = False,
        *,
        interpolation: str = "linear",
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """The ``q``-th quantile of every leaf over ``dim`` (forms as in :meth:`sum`).

        Args:
            q (float or Tensor): quantile(s) in ``[0, 1]``; a 1-d tensor of ``k``
                quantiles adds a leading dim of size ``k`` to each leaf, as
                ``torch.quantile`` does.
            dim (int, tuple of int or "feature", optional): see :meth:`sum`.
            keepdim (bool): keep the reduced batch dims with size 1.

        Keyword Args:
            interpolation (str): ``"linear"``, ``"lower"``, ``"higher"``, ``"midpoint"``
                or ``"nearest"``.
            reduce (bool, optional): one quantile of all the leaves together.
            out (TensorDictBase, optional): write the result into it.

        Returns:
            a TensorDict (integer leaves become float), or a tensor with ``reduce=True``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(5.0)}, [5])
            >>> td.quantile(0.5)["a"]
            tensor(2.)
            >>> td.quantile(0.5, reduce=True)
            tensor(2.)
        """
        return _reduce(self, "quantile", _quantile_op(q, interpolation), dim, keepdim, reduce)

    @_with_key_transform
    @_with_out
    def norm(
        self,
        p: Any = 2,
        dim: Any = NO_DEFAULT,
        keepdim: bool = False,
        *,
        dtype: Any = None,
        reduce: Any = None,
    ) -> TensorDictBase | torch.Tensor:
        """Vector ``p``-norm of every leaf (``torch.linalg.vector_norm``).

        Without ``dim`` the per-leaf norms come from one ``torch._foreach_norm`` call.

        Args:
            p (float): the order of the norm. Defaults to 2.
            dim, keepdim: as in :meth:`sum`.

        Keyword Args:
            dtype (torch.dtype, optional): computation dtype.
            reduce (bool, optional): the norm of all leaves together (one tensor).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([3.0, 4.0]), "b": torch.tensor([0.0, 12.0])}, [2])
            >>> td.norm()["a"]
            tensor(5.)
            >>> td.norm(reduce=True)
            tensor(13.)
        """
        if (dim is NO_DEFAULT or dim is None) and not keepdim and dtype is None and not reduce:
            leaves: list = []
            spec = _flatten_tensors(self, leaves)
            res = None
            if leaves and torch._C._functorch.peek_interpreter_stack() is None:
                try:
                    res = list(torch._foreach_norm(leaves, p))
                except (RuntimeError, TypeError):
                    res = None
            if res is None:
                res = [torch.linalg.vector_norm(x, p) for x in leaves]
            return _scalar_tree(spec, res)

        def op(x: _Tensor, dims: tuple | None, kd: bool) -> _Tensor:
            return torch.linalg.vector_norm(x, p, dim=dims, keepdim=kd, dtype=dtype)

        combine = None
        if isinstance(p, (int, float)) and p > 0:

            def combine(t: _Tensor) -> _Tensor:
                return torch.linalg.vector_norm(t, p)

        return _reduce(self, "norm", op, dim, keepdim, reduce, combine=combine)

    # ------------------------------------------------------------ shape-preserving scans
    def softmax(self, dim: int, dtype: Any = None) -> TensorDictBase:
        """Softmax of every leaf along batch dim ``dim``.

        Args:
            dim (int): the batch dim (negative counts from the end of the batch dims).
            dtype (torch.dtype, optional): leaves are cast to it first.

        Returns:
            a TensorDict with the batch size and leaf shapes of ``self``.

        Raises:
            IndexError: ``dim`` is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2])
            >>> td.softmax(0)["a"][:, 0]
            tensor([0.5000, 0.5000])
        """
        d = _check_single_dim(self, dim, "softmax")
        return _shape_preserving(self, lambda x: torch.softmax(x, d, dtype=dtype))

    def log_softmax(self, dim: int, dtype: Any = None) -> TensorDictBase:
        """Log-softmax of every leaf along batch dim ``dim``.

        Args:
            dim (int): the batch dim (negative counts from the end of the batch dims).
            dtype (torch.dtype, optional): leaves are cast to it first.

        Returns:
            a TensorDict with the batch size and leaf shapes of ``self``.

        Raises:
            IndexError: ``dim`` is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.log_softmax(0)["a"]
            tensor([-0.6931, -0.6931])
        """
        d = _check_single_dim(self, dim, "log_softmax")
        return _shape_preserving(self, lambda x: torch.log_softmax(x, d, dtype=dtype))

    def cumsum(self, dim: int, *, dtype: Any = None) -> TensorDictBase:
        """Cumulative sum of every leaf along batch dim ``dim``.

        Args:
            dim (int): the batch dim (negative counts from the end of the batch dims).

        Keyword Args:
            dtype (torch.dtype, optional): leaves are cast to it first.

        Returns:
            a TensorDict with the batch size and leaf shapes of ``self``.

        Raises:
            IndexError: ``dim`` is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, 2)}, [3])
            >>> td.cumsum(0)["a"][:, 0]
            tensor([1., 2., 3.])
        """
        d = _check_single_dim(self, dim, "cumsum")
        return _shape_preserving(self, lambda x: torch.cumsum(x, d, dtype=dtype))

    def cumprod(self, dim: int, *, dtype: Any = None) -> TensorDictBase:
        """Cumulative product of every leaf along batch dim ``dim``.

        Args:
            dim (int): the batch dim (negative counts from the end of the batch dims).

        Keyword Args:
            dtype (torch.dtype, optional): leaves are cast to it first.

        Returns:
            a TensorDict with the batch size and leaf shapes of ``self``.

        Raises:
            IndexError: ``dim`` is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1.0, 2.0, 3.0])}, [3])
            >>> td.cumprod(0)["a"]
            tensor([1., 2., 6.])
        """
        d = _check_single_dim(self, dim, "cumprod")
        return _shape_preserving(self, lambda x: torch.cumprod(x, d, dtype=dtype))


def _scalar_tree(spec: tuple, results: list) -> Any:
    """Rebuilds ``spec`` with the scalar ``results`` as leaves; every node gets
    ``batch_size=[]`` (a ``NonTensorData`` follows, a ``NonTensorStack`` is left out)."""
    return _scalar_node(spec, results, 0)[0]


def _scalar_node(spec: tuple, results: list, pos: int) -> tuple[Any, int]:
    node, entries, _ = spec
    source = {}
    for entry in entries:
        if entry.__class__ is str:
            source[entry] = results[pos]
            pos += 1
        elif entry[1] == _NESTED:
            source[entry[0]], pos = _scalar_node(entry[2], results, pos)
        elif entry[1] == _TC:
            sub, pos = _scalar_node(entry[2][1], results, pos)
            source[entry[0]] = _rewrap(entry[2][0], sub)
        elif isinstance(entry[2], NonTensorData):
            source[entry[0]] = entry[2]._with_batch(())
    return node._new_like(source, batch_size=_Size(())), pos


def _torch_reduction_table() -> dict:
    """``torch.fn -> impl`` for the reductions (merged into the ``__torch_function__`` table)."""
    import torch.nn.functional as F

    def method(name: str) -> Callable:
        def impl(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
            return getattr(input, name)(*args, **kwargs)

        return impl

    table: dict = {}
    for name in (
        "sum",
        "nansum",
        "mean",
        "nanmean",
        "prod",
        "std",
        "var",
        "max",
        "min",
        "amax",
        "amin",
        "logsumexp",
        "softmax",
        "log_softmax",
        "cumsum",
        "cumprod",
    ):
        table[getattr(torch, name)] = method(name)
    table[torch.norm] = method("norm")
    table[torch.linalg.vector_norm] = lambda input, ord=2, dim=None, keepdim=False, **kw: (
        input.norm(ord, dim, keepdim, **kw)
    )  # noqa: A006
    table[F.softmax] = lambda input, dim=None, _stacklevel=3, dtype=None: input.softmax(
        dim, dtype=dtype
    )  # noqa: A006
    table[F.log_softmax] = lambda input, dim=None, _stacklevel=3, dtype=None: input.log_softmax(
        dim, dtype=dtype
    )  # noqa: A006
    return table
