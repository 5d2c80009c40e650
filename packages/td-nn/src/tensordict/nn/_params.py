"""``TensorDictParams``: a TensorDict of parameters that is also an ``nn.Module``.

Storage is the ``nn.Module``'s own: tensor leaves live in ``_parameters`` (or
``_buffers``), nested TensorDicts are nested ``TensorDictParams`` in ``_modules``, and
other values (non-tensor data) in ``_extra``. The TensorDict API reads and writes those
dicts through the storage primitives (``_keys_raw``, ``_get_raw``, ``_set_raw``, ...),
so whatever touches the module (``module.to(device)``, ``load_state_dict``,
``torch.func.functional_call``, ``to_module``) and whatever touches the TensorDict see
the same tensors. ``named_parameters()`` names follow the nested keys joined with
``"."`` (``("a", "b")`` is ``"a.b"``).

Where ``nn.Module`` and ``TensorDictBase`` both define a method, the module's version is
kept for what an enclosing module relies on (``state_dict``, ``load_state_dict``,
``_apply``, ``to``, ``cpu``, ``cuda``), and the TensorDict's for the rest (``apply``,
``requires_grad_``, the dtype casts ``float()``/``int()``/``type(dtype)``/..., which
give a new plain TensorDict as in tensordict 0.15, ``__eq__``, ``__repr__``, indexing).
Keys iterate in insertion order, whichever storage dict holds them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from tensordict import TensorDict, TensorDictBase
from tensordict.ext import INPLACE_METHODS, NO_DEFAULT, batch_mismatch_error, locked_error
from tensordict.nn._common import _NOTSET

__all__ = ["TensorDictParams"]

_STORES = ("_parameters", "_buffers", "_modules", "_extra")
_Buffer = nn.Buffer


def _iter_items(d: dict) -> Iterator[tuple[str, Any]]:
    """The entries of the four storage dicts in insertion order (``_order``, kept by
    ``_set_raw``), then any entry added through the ``nn.Module`` API behind it;
    ``None`` slots skipped."""
    order = d.get("_order", {})
    stores = [d[name] for name in _STORES]
    seen = 0
    for key in order:
        for store in stores:
            value = store.get(key)
            if value is not None:
                seen += 1
                yield key, value
                break
    if seen != sum(len(store) for store in stores):
        for store in stores:
            for key, value in store.items():
                if value is not None and key not in order:
                    yield key, value


class _ChainKeys:
    """Live view over the keys of the four storage dicts (``None`` slots skipped), in
    insertion order."""

    __slots__ = ("_owner",)

    def __init__(self, owner: TensorDictParams) -> None:
        self._owner = owner

    def __iter__(self) -> Iterator[str]:
        for key, _ in _iter_items(self._owner.__dict__):
            yield key

    def __contains__(self, key: object) -> bool:
        d = self._owner.__dict__
        return any(d[name].get(key) is not None for name in _STORES)

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: the dtypes stored as parameters; any other tensor (integers, bool, bfloat16, complex,
#: float8) is a buffer, as in tensordict 0.15
_PARAM_DTYPES = frozenset({torch.float16, torch.float32, torch.float64})


def _to_param(value: torch.Tensor, no_convert: bool) -> tuple[str, torch.Tensor]:
    """Where a tensor is stored and as what (parameter or buffer)."""
    if isinstance(value, nn.Parameter):
        return "_parameters", value
    if no_convert or value.dtype not in _PARAM_DTYPES:
        if isinstance(value, _Buffer) or value.__class__ is not torch.Tensor:
            return "_buffers", value
        if value.requires_grad:
            # a tensor in an autograd graph (``from_modules(expand_identical=True)`` stores an
            # expanded view of a shared parameter) keeps its history, so gradients reach the
            # parameter: it is marked as a buffer itself instead of being detached
            value._is_buffer = True  # type: ignore[attr-defined]
            return "_buffers", value
        # marked as torch's Buffer (``isinstance(t, nn.Buffer)``), as upstream: a detached
        # alias of the same storage
        return "_buffers", _Buffer(value)
    return "_parameters", nn.Parameter(value, requires_grad=True)


def _plain_td(td: TensorDictBase) -> TensorDict:
    source = {key: _plain_td(value) if isinstance(value, TensorDictBase) else value for key, value in td._items_raw()}
    return TensorDict(source, batch_size=td.batch_size, device=td.device)


class TensorDictParams(TensorDictBase, nn.Module):  # type: ignore[misc]
    """A TensorDict of parameters and buffers that is an ``nn.Module``.

    Store it as a module attribute and its tensors show up in ``parameters()``,
    ``named_parameters()``, ``state_dict()`` and optimizers, and follow
    ``module.to(device)``. At the same time it behaves as a TensorDict: ``get``, ``set``,
    indexing (which returns plain TensorDicts), ``apply``, ``to_module``, ``keys``,
    ``flatten_keys``, ``torch.stack`` and so on.

    Args:
        parameters (TensorDictBase or dict, optional): the content. Keyword arguments
            are added to it.

    Keyword Args:
        no_convert (bool, optional): if ``False`` (default), floating-point tensors are
            wrapped in ``nn.Parameter`` (sharing their storage) when set, integer and
            boolean tensors become buffers. If ``True``, nothing is converted:
            ``nn.Parameter`` values are parameters and other tensors buffers.
        lock (bool, optional): lock the TensorDict (no new keys). Defaults to ``False``.

    Raises:
        TypeError: ``parameters`` is neither a TensorDict nor a mapping.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> params = TensorDictParams(TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(2)}}))
        >>> class Model(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.params = params
        >>> sorted(name for name, _ in Model().named_parameters())
        ['params.a', 'params.b.c']
        >>> isinstance(params["b", "c"], nn.Parameter)
        True
        >>> params["a"] = torch.ones(3)  # converted to a Parameter
        >>> isinstance(params["a"], nn.Parameter)
        True
    """

    def __init__(
        self,
        parameters: TensorDictBase | Mapping | None = None,
        *,
        no_convert: bool = False,
        lock: bool = False,
        **kwargs: Any,
    ) -> None:
        nn.Module.__init__(self)
        if parameters is None:
            parameters = TensorDict(kwargs) if kwargs else TensorDict({})
        elif kwargs:
            if isinstance(parameters, TensorDictBase):
                parameters = parameters.copy()
                parameters.update(kwargs)
            else:
                parameters = {**parameters, **kwargs}
        if not isinstance(parameters, TensorDictBase):
            if not isinstance(parameters, Mapping):
                msg = f"TensorDictParams expects a TensorDict or a dict, got {type(parameters).__name__}."
                raise TypeError(msg)
            parameters = TensorDict(parameters)
        d = self.__dict__
        d["_extra"] = {}
        d["_order"] = {}
        d["no_convert"] = bool(no_convert)
        d["_batch_size"] = parameters.batch_size
        d["_device"] = parameters.device
        for key, value in parameters._items_raw():
            self._set_raw(key, value)
        if lock:
            self.lock_()

    # -------------------------------------------------------------- storage primitives
    def _keys_raw(self) -> _ChainKeys:
        return _ChainKeys(self)

    def _items_raw(self) -> Iterator[tuple[str, Any]]:
        hooks = self.__dict__.get("_get_post_hooks")
        if not hooks:
            return _iter_items(self.__dict__)
        return ((key, self._hooked(value)) for key, value in _iter_items(self.__dict__))

    def _get_raw(self, key: str, default: Any = NO_DEFAULT) -> Any:
        d = self.__dict__
        for name in _STORES:
            value = d[name].get(key)
            if value is not None:
                return self._hooked(value) if d.get("_get_post_hooks") else value
        return default

    def _hooked(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            for hook in self.__dict__["_get_post_hooks"]:
                out = hook(self, value)
                if out is not None:
                    value = out
        return value

    @property
    def _param_td(self) -> TensorDict:
        """A plain :class:`~tensordict.TensorDict` of the same leaves (upstream's private name).

        The leaves are the very ``nn.Parameter`` and buffer objects this module holds, so an
        in-place op on it (``params._param_td += 1``) updates the module; nested levels are
        plain TensorDicts too. TorchRL's loss tests read parameters through it.

        Examples:
            >>> params = TensorDictParams(TensorDict(a=torch.zeros(2)))
            >>> params._param_td["a"] is params["a"]
            True
        """
        return _plain_td(self)

    def register_get_post_hook(self, hook: Any) -> None:
        """Registers ``hook(params, tensor) -> tensor | None``, run on every tensor read
        from this TensorDictParams and the TensorDictParams nested in it (``get``,
        ``td[key]``, ``values``, ``items``...); a non-``None`` return replaces the tensor
        read. For example ``lambda self, x: x.data`` reads the parameters without their
        autograd link. Nested TensorDictParams added later get the hook too.

        Args:
            hook (Callable): ``hook(params, tensor)``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from tensordict.nn import TensorDictParams
            >>> params = TensorDictParams(TensorDict(w=torch.zeros(2, requires_grad=True)))
            >>> params.register_get_post_hook(lambda self, x: x.data)
            >>> params["w"].requires_grad
            False
        """
        d = self.__dict__
        d.setdefault("_get_post_hooks", []).append(hook)
        for value in d["_modules"].values():
            if isinstance(value, TensorDictParams):
                value.register_get_post_hook(hook)

    def _set_raw(self, key: str, value: Any, inplace: bool = False) -> None:
        d = self.__dict__
        for name in _STORES:
            d[name].pop(key, None)
        if isinstance(value, torch.Tensor):
            store, value = _to_param(value, d["no_convert"])
        elif isinstance(value, TensorDictBase):
            if not isinstance(value, TensorDictParams):
                value = TensorDictParams(value, no_convert=d["no_convert"], lock=value.is_locked)
            for hook in d.get("_get_post_hooks", ()):
                value.register_get_post_hook(hook)
            store = "_modules"
        else:
            store = "_extra"
        d[store][key] = value
        d.setdefault("_order", {})[key] = None

    def _del_raw(self, key: str) -> None:
        d = self.__dict__
        for name in _STORES:
            d[name].pop(key, None)
        d.get("_order", {}).pop(key, None)

    def _create_nested(self, key: str) -> TensorDictBase:
        out = self._get_raw(key, _NOTSET)
        if out is _NOTSET:
            if self.is_locked:
                raise locked_error("create a nested TensorDict", key)
            out = TensorDictParams(TensorDict({}, batch_size=self.batch_size, device=self.device), no_convert=self.no_convert)  # type: ignore[arg-type]
            self.__dict__["_modules"][key] = out
            self.__dict__.setdefault("_order", {})[key] = None
            return out
        return TensorDictBase._create_nested(self, key)

    def _write_inplace(self, key: Any, existing: Any, value: Any) -> None:
        if isinstance(existing, torch.Tensor) and existing.requires_grad and existing.is_leaf:
            with torch.no_grad():
                TensorDictBase._write_inplace(self, key, existing, value)
            return
        TensorDictBase._write_inplace(self, key, existing, value)

    def _setitem_index(self, index: Any, value: Any) -> None:
        # ``params[idx] = value`` (and ``lazy_stack(..., out=params)``) rewrites the
        # parameters' data, as an optimiser does: under no_grad, as the data writes below
        with torch.no_grad():
            TensorDictBase._setitem_index(self, index, value)

    def _refuse_inplace_apply(self) -> None:
        """``apply(fn, inplace=True)`` would rewrite parameters that require grad through
        autograd, which autograd refuses: tensordict 0.15's ValueError, before anything is
        written. (``apply_``, the optimiser-style data write, runs under no_grad.)"""
        if torch.is_grad_enabled():
            for key, value in self.items(include_nested=True, leaves_only=True):
                if isinstance(value, torch.Tensor) and value.requires_grad and value.is_leaf:
                    msg = (
                        f"Failed to update {key!r} in place: it is a parameter that requires grad (a leaf "
                        "of the autograd graph). Use `params.apply_(fn)`, write through `params.data`, "
                        "or call it under `torch.no_grad()`."
                    )
                    raise ValueError(msg)

    def apply(self, fn: Any, *others: Any, inplace: bool = False, **kwargs: Any) -> Any:
        """:meth:`TensorDictBase.apply`; with ``inplace=True`` and grad enabled, refused
        (ValueError) when a parameter requires grad."""
        if inplace:
            self._refuse_inplace_apply()
        return TensorDictBase.apply(self, fn, *others, inplace=inplace, **kwargs)

    def named_apply(self, fn: Any, *others: Any, inplace: bool = False, **kwargs: Any) -> Any:
        """:meth:`TensorDictBase.named_apply`; ``inplace=True`` as for :meth:`apply`."""
        if inplace:
            self._refuse_inplace_apply()
        return TensorDictBase.named_apply(self, fn, *others, inplace=inplace, **kwargs)

    def _new_like(self, source: dict, batch_size: Any = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT) -> TensorDict:
        bs = self.batch_size if batch_size is None else torch.Size(batch_size)
        dev = self.device if device is NO_DEFAULT else device
        return TensorDict._new_unsafe(source, bs, dev)

    # -------------------------------------------------------------- shape / device
    @property
    def batch_size(self) -> torch.Size:
        """Leading dims shared by every leaf."""
        return self.__dict__["_batch_size"]

    @batch_size.setter
    def batch_size(self, new_size: Any) -> None:
        new_size = torch.Size([new_size] if isinstance(new_size, int) else new_size)
        if self.is_locked and new_size != self.batch_size:
            raise locked_error("change the batch_size")
        n = len(new_size)
        for key, value in self._items_raw():
            if isinstance(value, torch.Tensor):
                if value.shape[:n] != new_size:
                    raise batch_mismatch_error(key, value.shape, new_size)
            elif isinstance(value, TensorDictBase):
                if value.batch_size[:n] != new_size:
                    value.batch_size = new_size
        self.__dict__["_batch_size"] = new_size

    @property
    def device(self) -> torch.device | None:
        """Device of every leaf, or ``None`` if not fixed."""
        return self.__dict__["_device"]

    @device.setter
    def device(self, value: Any) -> None:
        msg = "TensorDictParams.device cannot be set directly; use `params.to(device)`."
        raise RuntimeError(msg)

    def _has_names(self) -> bool:
        return False

    @property
    def names(self) -> list:
        """Names of the batch dims (always ``None``: TensorDictParams has no dim names)."""
        return [None] * len(self.batch_size)

    # -------------------------------------------------------------- nn.Module side
    state_dict = nn.Module.state_dict  # type: ignore[assignment]

    def load_state_dict(self, state_dict: Mapping, strict: bool = True, assign: bool = False, **kwargs: Any) -> Any:  # type: ignore[override]
        """Loads a module state dict (``"a.b"`` keys, as :meth:`state_dict` gives) or a
        TensorDict state dict (nested, with ``"__batch_size"`` entries, as
        ``TensorDict.state_dict()`` gives, e.g. from ``params.detach().state_dict()``).

        Returns:
            what ``nn.Module.load_state_dict`` returns for a module state dict, else ``self``.
        """
        if "__batch_size" in state_dict or any(isinstance(v, Mapping) for v in state_dict.values()):
            with torch.no_grad():
                return TensorDictBase.load_state_dict(self, state_dict, strict=strict, assign=assign, **kwargs)
        return nn.Module.load_state_dict(self, state_dict, strict=strict, assign=assign)

    cpu = nn.Module.cpu  # type: ignore[assignment]
    cuda = nn.Module.cuda  # type: ignore[assignment]

    # ``float()``, ``int()``, ``type(dtype)``, ... are the TensorDict casts: a new plain
    # TensorDict with every leaf cast, as in tensordict 0.15 (not nn.Module's in-place
    # cast of the floating parameters). A parent module's ``.float()`` still casts the
    # parameters in place, through ``_apply``.
    def type(self, dst_type: Any) -> TensorDict:  # type: ignore[override]
        """A new TensorDict with every tensor leaf cast to ``dst_type``."""
        return TensorDictBase.to(self, dst_type)  # type: ignore[return-value]
    __getstate__ = nn.Module.__getstate__ if hasattr(nn.Module, "__getstate__") else object.__getstate__  # type: ignore[attr-defined]
    __setstate__ = nn.Module.__setstate__
    __dir__ = nn.Module.__dir__

    def _apply(self, fn: Any, recurse: bool = True) -> TensorDictParams:
        nn.Module._apply(self, fn, recurse)
        if self.__dict__["_device"] is not None:
            for _, value in self._items_raw():
                if isinstance(value, torch.Tensor):
                    self.__dict__["_device"] = value.device
                    break
        return self

    def to(self, *args: Any, **kwargs: Any) -> TensorDictParams:
        """Moves/casts the parameters in place, as ``nn.Module.to``; returns ``self``.

        Examples:
            >>> import torch
            >>> params = TensorDictParams({"w": torch.zeros(2)})
            >>> params.to(torch.float64)["w"].dtype
            torch.float64
        """
        return nn.Module.to(self, *args, **kwargs)

    # -------------------------------------------------------------- TensorDict side
    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictParams:
        """A new TensorDictParams.

        With ``recurse=True`` (default) the tensors are copied (parameters stay
        parameters, with the same ``requires_grad``, as new leaves; a parameter
        found under several keys gets one copy, so tied weights stay tied); with
        ``recurse=False`` the same parameter objects are shared.
        """
        return self._clone(recurse, {})

    def _clone(self, recurse: bool, memo: dict) -> TensorDictParams:
        # ``memo`` maps id(parameter) -> its copy, so tied parameters stay tied
        source: dict = {}
        for key, value in self._items_raw():
            if isinstance(value, TensorDictParams):
                source[key] = value._clone(recurse, memo)
            elif isinstance(value, nn.Parameter):
                if recurse:
                    copy = memo.get(id(value))
                    if copy is None:
                        copy = memo[id(value)] = nn.Parameter(value.detach().clone(), requires_grad=value.requires_grad)
                    source[key] = copy
                else:
                    source[key] = value
            elif isinstance(value, torch.Tensor):
                source[key] = value.clone() if recurse else value
            else:
                source[key] = value.clone() if recurse and hasattr(value, "clone") else value
        td = TensorDict._new_unsafe({}, self.batch_size, self.device)
        out = TensorDictParams(td, no_convert=True)
        out.__dict__["no_convert"] = self.no_convert
        for key, value in source.items():
            out._set_raw(key, value)
        return out

    @property
    def data(self) -> TensorDict:
        """A TensorDict of the ``.data`` of every tensor (no autograd history)."""
        return self._map_leaves(lambda t: t.data, keep_non_tensor=True)  # type: ignore[return-value]

    def map(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: worker processes cannot write into parameters (autograd leaves).

        Raises:
            RuntimeError: always; map ``params.data`` (a TensorDict) instead.
        """
        msg = (
            "Cannot call map on a TensorDictParams object: its leaves are parameters. "
            "Map `params.data` (a detached TensorDict) instead."
        )
        raise RuntimeError(msg)

    __repr__ = TensorDictBase.__repr__
    __str__ = TensorDictBase.__repr__

    def __hash__(self) -> int:
        return id(self)


# In-place TensorDict ops rewrite the parameters' data, as optimisers and
# initialisers do: they run under ``torch.no_grad()`` (a leaf parameter that requires
# grad cannot be written in place otherwise), so ``params.zero_()`` or
# ``params.copy_(other)`` work on a TensorDictParams as on its parameters' ``.data``.
_DATA_WRITES = INPLACE_METHODS | {
    "zero_", "copy_", "fill_", "update_", "update_at_", "set_", "set_at_", "copy_at_",
    "uniform_", "normal_", "data_ptr_", "masked_fill_",
    "apply_leaves_",  # what a parent TensorDict's zero_()/fill_() reaches a nested TensorDictParams through
}


def _no_grad_write(name: str) -> Any:
    base = getattr(TensorDictBase, name)

    @functools.wraps(base)
    def write(self: TensorDictParams, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return base(self, *args, **kwargs)

    return write


def _cast(dtype: torch.dtype) -> Any:
    def cast(self: TensorDictParams) -> TensorDict:
        return TensorDictBase.to(self, dtype)  # type: ignore[return-value]

    cast.__doc__ = f"A new TensorDict with every tensor leaf cast to ``{dtype}``."
    return cast


for _name, _dtype in (
    ("float", torch.float32), ("double", torch.float64), ("half", torch.float16),
    ("bfloat16", torch.bfloat16), ("int", torch.int32), ("long", torch.int64),
    ("short", torch.int16), ("byte", torch.uint8), ("char", torch.int8), ("bool", torch.bool),
):
    setattr(TensorDictParams, _name, _cast(_dtype))
del _dtype

for _name in sorted(_DATA_WRITES):
    if callable(getattr(TensorDictBase, _name, None)) and _name not in TensorDictParams.__dict__:
        setattr(TensorDictParams, _name, _no_grad_write(_name))
del _name
