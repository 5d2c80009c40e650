"""Live shape views of ``set_lazy_legacy(True)`` (upstream's ``_CustomOpTensorDict`` family).

Under ``set_lazy_legacy(True)``, ``unsqueeze``, ``squeeze``, ``permute``, ``transpose``
and ``view`` of a TensorDict (or lazy stack) return a view that stores nothing: it
holds its ``_source`` and the op, and

* reading a key reads the source's entry and applies the op (a tensor view, or a view
  of the same kind over a nested TensorDict), so later writes into the source show;
* writing a key applies the inverse op and writes into the source, so new keys and
  replaced tensors reach it;
* applying the inverse op to a view returns its source (``td.unsqueeze(0).squeeze(0)
  is td``; the same for ``permute``/``transpose``/``view``).

Outside legacy mode these shape ops on a view raise ``RuntimeError`` (make it dense
with ``to_tensordict()`` first), as do the in-place structural ops a view cannot
serve (``select``/``exclude``/``flatten_keys``/``unflatten_keys`` with
``inplace=True``, ``to(..., inplace=True)``, ``to(batch_size=)``). Every other method
works on a dense TensorDict of the viewed leaves (:meth:`_CustomOpTensorDict._dense`),
whose tensors share storage with the source's.

Plain shape ops (legacy mode off) never reach this module: the ops in ``_shape.py``
and ``_shape_context.py`` only read one flag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict import _classes, _stack
from tensordict._base import TensorDictBase
from tensordict._keys import _MISSING, NO_DEFAULT
from tensordict._names import drop_dims, insert_dim
from tensordict._shape import _infer_shape
from tensordict._td import TensorDict
from tensordict._unbatched import UnbatchedTensor

__all__ = [
    "_CustomOpTensorDict",
    "_PermutedTensorDict",
    "_SqueezedTensorDict",
    "_TransposedTensorDict",
    "_UnsqueezedTensorDict",
    "_ViewedTensorDict",
    "legacy_view",
]

_Tensor = torch.Tensor
_Size = torch.Size


def _norm(dim: int, nd: int, op: str) -> int:
    if not -nd <= dim < nd if nd else dim not in (0, -1):
        msg = f"{op}: dim={dim} is out of range for a TensorDict with {nd} batch dims."
        raise IndexError(msg)
    return dim + nd if dim < 0 else dim


def _transform(value: Any, fn: Callable[[Any, int], Any], nd: int) -> Any:
    """``fn`` applied to the first ``nd`` dims of any leaf (the ``_batch_transform`` dispatch)."""
    if isinstance(value, _Tensor) and value.__class__ is not UnbatchedTensor:
        return fn(value, nd)
    if isinstance(value, TensorDictBase):
        return value._batch_transform(fn, nd)
    if hasattr(value, "_batch_transform"):
        return value._batch_transform(fn, nd)
    return value


class _CustomOpTensorDict(TensorDictBase):
    """A live view of ``_source`` through one shape op (see the module docstring).

    Subclasses give the op (``_fwd``), its inverse (``_inv``), the op's name, the
    names rule and the shape op that cancels it.
    """

    _op_name = "custom op"
    _bs_key: Any = None
    _bs_val: Any = None
    _lock_stack = None

    def __init__(self, source: TensorDictBase, nd: int | None = None) -> None:
        self._source = source
        self._nd = len(source.batch_size) if nd is None else nd

    # ------------------------------------------------------------------ the op
    def _fwd(self, value: _Tensor, nd: int) -> _Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def _inv(self, value: _Tensor, nd: int) -> _Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def _names_rule(self, names: list) -> list:  # pragma: no cover - abstract
        raise NotImplementedError

    def _args(self) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    def _rewrap(self, source: TensorDictBase) -> _CustomOpTensorDict:
        """The same op over ``source`` (a nested TensorDict of the source)."""
        return type(self)(source, *self._args())

    def _view_nd(self) -> int:
        """How many batch dims the op's result has (what the inverse acts on)."""
        return len(self._fwd(torch.zeros((), dtype=torch.uint8).expand(self._source.batch_size[: self._nd]), self._nd).shape)

    def _forward(self, value: Any) -> Any:
        if value.__class__ is _Tensor or (isinstance(value, _Tensor) and value.__class__ is not UnbatchedTensor):
            return self._fwd(value, self._nd)
        if isinstance(value, TensorDictBase):
            return self._rewrap(value)
        return _transform(value, self._fwd, self._nd)

    def _backward(self, value: Any) -> Any:
        return _transform(value, self._inv, self._view_nd())

    # ------------------------------------------------------------------ storage
    def _keys_raw(self) -> Any:
        return self._source._keys_raw()

    def _items_raw(self) -> list[tuple[str, Any]]:
        fwd = self._forward
        return [(k, fwd(v)) for k, v in self._source._items_raw()]

    def _get_raw(self, key: str, default: Any = _MISSING) -> Any:
        value = self._source._get_raw(key, _MISSING)
        if value is _MISSING:
            return default
        return self._forward(value)

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        # the source's own write path: a lazy stack splits the value, a file writes it
        self._source._set_str(key, self._backward(value), inplace, validated=True)

    def _del_raw(self, key: str) -> None:
        self._source._del_raw(key)

    def _create_nested(self, key: str) -> TensorDictBase:
        return self._rewrap(self._source._create_nested(key))

    def _write_inplace(self, key: Any, existing: Any, value: Any) -> None:
        if isinstance(existing, _Tensor) and isinstance(value, _Tensor) and existing.shape == value.shape:
            # through the source: a lazy stack's (or a file's) leaf read here is a copy
            self._source.set_(key, self._backward(value))
            return
        super()._write_inplace(key, existing, value)

    def _new_like(self, source: dict, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT) -> TensorDict:
        if batch_size is None:
            batch_size = self.batch_size
            if names is NO_DEFAULT:
                names = self.names if self._has_names() else None
        elif names is NO_DEFAULT:
            names = None
        return TensorDict._new_unsafe(source, _Size(batch_size), self.device if device is NO_DEFAULT else device, names)

    def _dense(self) -> TensorDict:
        """A TensorDict of the viewed leaves (nested views made dense too); no copy."""
        source = {}
        for key, value in self._items_raw():
            source[key] = value._dense() if isinstance(value, _CustomOpTensorDict) else value
        return self._new_like(source)

    # ------------------------------------------------------------------ metadata
    @property
    def batch_size(self) -> torch.Size:
        """The source's batch size through the op."""
        src = self._source.batch_size
        if src is not self._bs_key:
            nd = self._nd
            self._bs_val = self._fwd(torch.zeros((), dtype=torch.uint8).expand(src), nd).shape
            self._bs_key = src
        return self._bs_val

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        if _Size(value) == self.batch_size:
            return
        msg = f"Cannot set the batch_size of a lazy {type(self).__name__}; call to_tensordict() first."
        raise RuntimeError(msg)

    @property
    def _batch_size(self) -> torch.Size:
        return self.batch_size

    @property
    def device(self) -> torch.device | None:
        """The source's device."""
        return self._source.device

    @device.setter
    def device(self, value: Any) -> None:
        msg = "device cannot be set directly; use `td = td.to(device)`."
        raise RuntimeError(msg)

    @property
    def _device(self) -> torch.device | None:
        return self._source.device

    def _has_names(self) -> bool:
        return self._source._has_names()

    @property
    def names(self) -> list:
        """The source's dim names through the op (new dims are unnamed)."""
        src = self._source.names
        nd = self._nd
        return list(self._names_rule(src[:nd])) + src[nd:]

    @names.setter
    def names(self, value: Any) -> None:
        if value is not None and list(value) == self.names:
            return
        msg = f"Names of a lazy tensordict cannot be modified ({type(self).__name__}). Call to_tensordict() first."
        raise RuntimeError(msg)

    @property
    def _names(self) -> list | None:
        return self.names if self._has_names() else None

    def is_shared(self) -> bool:  # noqa: D102
        return self._source.is_shared()

    def is_memmap(self) -> bool:  # noqa: D102
        return self._source.is_memmap()

    @property
    def _is_locked(self) -> bool:
        return self._source._is_locked

    @_is_locked.setter
    def _is_locked(self, value: bool) -> None:
        self._source._set_lock_flag(value)

    def _set_lock_flag(self, value: bool) -> None:
        self._source._set_lock_flag(value)

    @property
    def _lock_parents(self) -> list:
        return self._source._lock_parents

    @_lock_parents.setter
    def _lock_parents(self, value: list) -> None:
        self._source._lock_parents = value

    # ------------------------------------------------------------------ dense fallbacks
    def _batch_transform(self, fn: Callable[[Any, int], Any], nd: int | None = None, names: Any = None) -> Any:
        return self._dense()._batch_transform(fn, nd, names=names)

    def _split_leaves(self, fn: Callable[[Any, int], Any], nd: int, names: Any = None) -> list:
        return self._dense()._split_leaves(fn, nd, names)

    def _index(self, index: Any) -> Any:
        return self._dense()._index(index)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:  # noqa: D102
        return self._dense().to_tensordict(retain_none=retain_none)  # type: ignore[return-value]

    def clone(self, recurse: bool = True, **kwargs: Any) -> _CustomOpTensorDict:
        """The same view over a clone of the source (``recurse=False``: sharing its tensors)."""
        return self._rewrap(self._source.clone(recurse, **kwargs))

    def contiguous(self, *args: Any, **kwargs: Any) -> TensorDict:  # noqa: D102
        return self._dense().contiguous(*args, **kwargs)  # type: ignore[return-value]

    # ------------------------------------------------------------------ shape ops
    def _dense_only(self, op: str) -> RuntimeError:
        return RuntimeError(
            f"Cannot call `{op}` on a lazy tensordict ({type(self).__name__}) outside "
            f"set_lazy_legacy(True). Make it dense before calling this method by calling `to_tensordict`."
        )

    @staticmethod
    def _make(td: Any, op: str, args: tuple) -> Any:
        """:func:`legacy_view`: how ``TensorDictBase``'s shape ops reach this module."""
        return legacy_view(td, op, args)

    def _cancels(self, op: str, args: tuple) -> bool:
        """``True`` if ``op(*args)`` undoes this view's op (then the source is returned)."""
        return False

    def _legacy_op(self, op: str, args: tuple) -> Any:
        if not _stack._LAZY_LEGACY[0]:
            raise self._dense_only(op)
        if self._cancels(op, args):
            return self._source
        return legacy_view(self, op, args)

    def unsqueeze(self, dim: int) -> Any:  # noqa: D102
        return self._legacy_op("unsqueeze", (dim,))

    def squeeze(self, dim: int | None = None) -> Any:  # noqa: D102
        return self._legacy_op("squeeze", (dim,))

    def permute(self, *dims_list: Any, dims: Any = None) -> Any:  # noqa: D102
        if dims is not None:
            dims_list = tuple(dims)
        if len(dims_list) == 1 and not isinstance(dims_list[0], int):
            dims_list = tuple(dims_list[0])
        return self._legacy_op("permute", dims_list)

    def transpose(self, dim0: int, dim1: int) -> Any:  # noqa: D102
        return self._legacy_op("transpose", (dim0, dim1))

    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> Any:  # noqa: D102
        if shape and isinstance(shape[0], torch.dtype):
            return self._dense().view(*shape, batch_size=batch_size)
        if batch_size is not None:
            shape = (batch_size,)
        if size is not None:
            shape = (size,)
        if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
            shape = tuple(shape[0])
        return self._legacy_op("view", tuple(shape))

    def movedim(self, source: Any, destination: Any) -> Any:  # noqa: D102
        if not _stack._LAZY_LEGACY[0]:
            raise self._dense_only("movedim")
        return super().movedim(source, destination)

    moveaxis = movedim

    def swapaxes(self, dim0: int, dim1: int) -> Any:  # noqa: D102
        if not _stack._LAZY_LEGACY[0]:
            raise self._dense_only("swapaxes")
        return self.transpose(dim0, dim1)

    swapdims = swapaxes

    # ------------------------------------------------------------------ refused in place
    def select(self, *keys: Any, inplace: bool = False, strict: bool = True) -> Any:  # type: ignore[override]  # noqa: D102
        if inplace:
            msg = f"Cannot call select with inplace=True on a lazy tensordict ({type(self).__name__})."
            raise RuntimeError(msg)
        return self._dense().select(*keys, strict=strict)

    def exclude(self, *keys: Any, inplace: bool = False) -> Any:  # noqa: D102
        if inplace:  # the keys are the source's: they go from there
            return super().exclude(*keys, inplace=True)
        return self._dense().exclude(*keys)

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> Any:  # noqa: D102
        if inplace:
            msg = f"Cannot call exclude (flatten_keys with inplace=True) on a lazy tensordict ({type(self).__name__})."
            raise RuntimeError(msg)
        return super().flatten_keys(separator, False, is_leaf)

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> Any:  # noqa: D102
        if inplace:
            msg = f"Cannot call exclude (unflatten_keys with inplace=True) on a lazy tensordict ({type(self).__name__})."
            raise RuntimeError(msg)
        return super().unflatten_keys(separator, False)

    def to(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        if kwargs.get("inplace"):
            msg = f"Cannot use inplace=True with {type(self).__name__}.to(); call to_tensordict() first."
            raise TypeError(msg)
        if kwargs.get("batch_size") is not None:
            msg = f"Cannot pass batch-size to {type(self).__name__}.to(); call to_tensordict() first."
            raise TypeError(msg)
        return self._dense().to(*args, **kwargs)

    # ------------------------------------------------------------------ misc
    def __reduce__(self) -> tuple:
        return (type(self), (self._source, *self._args()))

    def __repr__(self) -> str:
        return repr(self._dense()).replace("TensorDict(", f"{type(self).__name__}(", 1)


class _UnsqueezedTensorDict(_CustomOpTensorDict):
    """``source.unsqueeze(dim)``, live."""

    _op_name = "unsqueeze"

    def __init__(self, source: TensorDictBase, dim: int, nd: int | None = None) -> None:
        super().__init__(source, nd)
        self._dim = _norm(dim, self._nd + 1, "unsqueeze")

    def _args(self) -> tuple:
        return (self._dim, self._nd)

    def _fwd(self, value: _Tensor, nd: int) -> _Tensor:
        return value.unsqueeze(self._dim)

    def _inv(self, value: _Tensor, nd: int) -> _Tensor:
        return value.squeeze(self._dim)

    def _view_nd(self) -> int:
        return self._nd + 1

    def _names_rule(self, names: list) -> list:
        return insert_dim(self._dim)(names)

    def _cancels(self, op: str, args: tuple) -> bool:
        if op != "squeeze" or args[0] is None:
            return False
        return _norm(args[0], len(self.batch_size), "squeeze") == self._dim


class _SqueezedTensorDict(_CustomOpTensorDict):
    """``source.squeeze(dims)`` (batch dims of size 1), live."""

    _op_name = "squeeze"

    def __init__(self, source: TensorDictBase, dims: Any, nd: int | None = None) -> None:
        super().__init__(source, nd)
        self._dims = tuple(sorted(dims))

    def _args(self) -> tuple:
        return (self._dims, self._nd)

    def _fwd(self, value: _Tensor, nd: int) -> _Tensor:
        return value.squeeze(self._dims)

    def _inv(self, value: _Tensor, nd: int) -> _Tensor:
        for d in self._dims:
            value = value.unsqueeze(d)
        return value

    def _view_nd(self) -> int:
        return self._nd - len(self._dims)

    def _names_rule(self, names: list) -> list:
        return drop_dims(self._dims)(names)

    def _cancels(self, op: str, args: tuple) -> bool:
        if op != "unsqueeze" or len(self._dims) != 1:
            return False
        return _norm(args[0], len(self.batch_size) + 1, "unsqueeze") == self._dims[0]


class _PermutedTensorDict(_CustomOpTensorDict):
    """``source.permute(dims)``, live."""

    _op_name = "permute"

    def __init__(self, source: TensorDictBase, dims: Any, nd: int | None = None) -> None:
        super().__init__(source, nd)
        self._dims = tuple(dims)
        self._inv_dims = tuple(self._dims.index(i) for i in range(len(self._dims)))

    def _args(self) -> tuple:
        return (self._dims, self._nd)

    def _fwd(self, value: _Tensor, nd: int) -> _Tensor:
        return value.permute(*self._dims, *range(nd, value.ndim))

    def _inv(self, value: _Tensor, nd: int) -> _Tensor:
        return value.permute(*self._inv_dims, *range(nd, value.ndim))

    def _view_nd(self) -> int:
        return self._nd

    def _names_rule(self, names: list) -> list:
        return [names[d] for d in self._dims]

    def _cancels(self, op: str, args: tuple) -> bool:
        if op != "permute":
            return False
        nd = len(self._dims)
        try:
            dims = tuple(_norm(int(d), nd, "permute") for d in args)
        except (IndexError, TypeError):
            return False
        return dims == self._inv_dims


class _TransposedTensorDict(_CustomOpTensorDict):
    """``source.transpose(dim0, dim1)``, live."""

    _op_name = "transpose"

    def __init__(self, source: TensorDictBase, dim0: int, dim1: int, nd: int | None = None) -> None:
        super().__init__(source, nd)
        self._dim0, self._dim1 = dim0, dim1

    def _args(self) -> tuple:
        return (self._dim0, self._dim1, self._nd)

    def _fwd(self, value: _Tensor, nd: int) -> _Tensor:
        return value.transpose(self._dim0, self._dim1)

    _inv = _fwd

    def _view_nd(self) -> int:
        return self._nd

    def _names_rule(self, names: list) -> list:
        out = list(names)
        out[self._dim0], out[self._dim1] = out[self._dim1], out[self._dim0]
        return out

    def _cancels(self, op: str, args: tuple) -> bool:
        if op != "transpose":
            return False
        nd = self._nd
        try:
            pair = {_norm(args[0], nd, "transpose"), _norm(args[1], nd, "transpose")}
        except IndexError:
            return False
        return pair == {self._dim0, self._dim1}


class _ViewedTensorDict(_CustomOpTensorDict):
    """``source.view(shape)``, live."""

    _op_name = "view"

    def __init__(self, source: TensorDictBase, shape: Any, nd: int | None = None) -> None:
        super().__init__(source, nd)
        self._shape = _Size(shape)
        self._src_shape = _Size(source.batch_size[: self._nd])

    def _args(self) -> tuple:
        return (self._shape, self._nd)

    def _fwd(self, value: _Tensor, nd: int) -> _Tensor:
        return value.view(*self._shape, *value.shape[nd:])

    def _inv(self, value: _Tensor, nd: int) -> _Tensor:
        return value.view(*self._src_shape, *value.shape[nd:])

    def _view_nd(self) -> int:
        return len(self._shape)

    def _names_rule(self, names: list) -> list:
        return [None] * len(self._shape)

    def _cancels(self, op: str, args: tuple) -> bool:
        if op != "view":
            return False
        bs = self.batch_size
        return _infer_shape(args, bs.numel(), bs, "view") == self._source.batch_size


# ---------------------------------------------------------------------- construction
def _legacy_permute_dims(args: tuple, bs: torch.Size) -> tuple[int, ...]:
    """``permute``'s dims under legacy mode, with tensordict 0.15's legacy errors.

    Raises:
        RuntimeError: not one dim per batch dim, or a repeated dim.
        IndexError: a dim is out of range.
    """
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        args = tuple(args[0])
    nd = len(bs)
    if len(args) != nd:
        msg = f"permute: got {len(args)} dims {tuple(args)} for a TensorDict with {nd} batch dims {tuple(bs)}."
        raise RuntimeError(msg)
    dims = tuple(_norm(int(d), nd, "permute") for d in args)
    if len(set(dims)) != nd:
        msg = f"permute: repeated dim in {tuple(args)} (batch_size {tuple(bs)})."
        raise RuntimeError(msg)
    return dims


def legacy_view(td: Any, op: str, args: tuple) -> Any:
    """The live view ``td.<op>(*args)`` under ``set_lazy_legacy(True)`` (``td`` itself
    when the op changes nothing).

    Raises:
        IndexError: a dim is out of range.
        RuntimeError: the dims are not a permutation, or a view shape does not fit.
        ValueError: ``transpose`` dims out of range (as tensordict 0.15).
    """
    bs = td.batch_size
    nd = len(bs)
    if op == "unsqueeze":
        return _UnsqueezedTensorDict(td, _norm(args[0], nd + 1, "unsqueeze"), nd)
    if op == "squeeze":
        dim = args[0]
        if dim is None:
            dims = tuple(i for i, s in enumerate(bs) if s == 1)
        else:
            d = _norm(dim, nd, "squeeze")
            dims = (d,) if bs[d] == 1 else ()
        return _SqueezedTensorDict(td, dims, nd) if dims else td
    if op == "permute":
        dims = _legacy_permute_dims(args, bs)
        if dims == tuple(range(nd)):
            return td
        return _PermutedTensorDict(td, dims, nd)
    if op == "transpose":
        d0, d1 = args
        if not (-nd <= d0 < nd and -nd <= d1 < nd):
            msg = (
                f"The provided dimensions are incompatible with the tensordict batch-size: "
                f"got ({d0}, {d1}) for batch_size {tuple(bs)}."
            )
            raise ValueError(msg)
        d0, d1 = d0 % nd, d1 % nd
        if d0 == d1:
            return td
        return _TransposedTensorDict(td, min(d0, d1), max(d0, d1), nd)
    if op == "view":
        shape = _infer_shape(args, bs.numel(), bs, "view")
        if shape == bs:
            return td
        return _ViewedTensorDict(td, shape, nd)
    msg = f"legacy_view: unknown op {op!r}."
    raise ValueError(msg)


_classes._bind(CustomOpTensorDict=_CustomOpTensorDict)
