"""TensorDict operations on a tensorclass: shape, device and dtype, selection, apply,
math and operators. Each runs the TensorDict method of the same name on the
instance's ``_tensordict`` and wraps the result back into the class (``_wrap.py``).

The methods users call most are written out (typed ``Self`` for static checkers);
the rest are generated from the tables at the bottom, and every other public
TensorDictBase attribute gets a forwarder when the base class is built
(``_wrap.install_td_forwarders``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from tensordict.ext import TensorDictBase, unravel_key
from tensordict.tensorclass._storage import _full_td, _new, _non_tensor_in_td, _resync, _Slots
from tensordict.tensorclass._wrap import (
    _call_deep,
    _unwrap,
    _unwrap_args,
    _wrap_out,
    binary_dunder,
    forward,
    unary_dunder,
)

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

__all__: list[str] = []


if TYPE_CHECKING:  # pragma: no cover - the instance layout the mixin reads (type checkers only)
    _MixinBase = _Slots
else:
    _MixinBase = object


class _OpsMixin(_MixinBase):
    """Shape, device, selection and math methods (see the module docstring)."""

    __slots__ = ()

    if TYPE_CHECKING:  # pragma: no cover
        _tensordict: Any
        _non_tensordict: dict

    # ------------------------------------------------------------------ shape
    def view(self, *shape: Any, **kwargs: Any) -> Self:
        """Views the batch dims as ``shape`` (every field keeps its feature dims)."""
        return _wrap_out(self, self._tensordict.view(*shape, **kwargs))

    def reshape(self, *shape: Any, **kwargs: Any) -> Self:
        """Reshapes the batch dims to ``shape`` (copies only where a view is impossible).

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class Img(TensorClass):
            ...     x: torch.Tensor
            >>> Img(x=torch.zeros(100, 3), batch_size=[100]).reshape(10, 10).x.shape
            torch.Size([10, 10, 3])
        """
        return _wrap_out(self, self._tensordict.reshape(*shape, **kwargs))

    def permute(self, *dims: Any) -> Self:
        """Permutes the batch dims."""
        return _wrap_out(self, self._tensordict.permute(*dims))

    def transpose(self, dim0: int, dim1: int) -> Self:
        """Swaps two batch dims."""
        return _wrap_out(self, self._tensordict.transpose(dim0, dim1))

    def squeeze(self, dim: int | None = None) -> Self:
        """Removes batch dims of size 1 (only ``dim`` when given)."""
        return _wrap_out(self, self._tensordict.squeeze(dim))

    def unsqueeze(self, dim: int) -> Self:
        """Inserts a batch dim of size 1 at ``dim``."""
        return _wrap_out(self, self._tensordict.unsqueeze(dim))

    def expand(self, *shape: Any) -> Self:
        """Expands the batch dims to ``shape`` (no copy)."""
        return _wrap_out(self, self._tensordict.expand(*shape))

    def expand_as(self, other: Any) -> Self:
        """Expands to ``other``'s batch size (a tensorclass or TensorDict) or shape (a tensor)."""
        return _wrap_out(self, self._tensordict.expand_as(_unwrap(other)))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Self:
        """Flattens batch dims ``start_dim..end_dim`` into one."""
        return _wrap_out(self, self._tensordict.flatten(start_dim, end_dim))

    def unflatten(self, dim: int, unflattened_size: Any) -> Self:
        """Splits batch dim ``dim`` into ``unflattened_size``."""
        return _wrap_out(self, self._tensordict.unflatten(dim, unflattened_size))

    def split(self, split_size: Any, dim: int = 0) -> tuple[Self, ...]:
        """Splits along batch dim ``dim`` into instances of ``split_size`` (or the given sizes)."""
        return _wrap_out(self, self._tensordict.split(split_size, dim))

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Self, ...]:
        """Splits into ``chunks`` instances along batch dim ``dim``."""
        return _wrap_out(self, self._tensordict.chunk(chunks, dim))

    # ------------------------------------------------------------------ device / dtype
    def to(self, *args: Any, **kwargs: Any) -> Self:
        """Moves and/or casts every tensor field (the forms of ``torch.Tensor.to``).

        Returns ``self`` when nothing changes, a new instance otherwise.
        """
        args, kwargs = _unwrap_args(args, kwargs)
        return _wrap_out(self, self._tensordict.to(*args, **kwargs))

    def cpu(self, **kwargs: Any) -> Self:
        """``to("cpu")``."""
        return _wrap_out(self, self._tensordict.cpu(**kwargs))

    def cuda(self, device: Any = None, **kwargs: Any) -> Self:
        """``to("cuda")`` (or ``cuda:<device>``)."""
        return _wrap_out(self, self._tensordict.cuda(device, **kwargs))

    def detach(self) -> Self:
        """Every tensor field detached from the autograd graph (same storage)."""
        return _wrap_out(self, self._tensordict.detach())

    def contiguous(self) -> Self:
        """Every tensor field made contiguous."""
        return _wrap_out(self, self._tensordict.contiguous())

    # ------------------------------------------------------------------ selection / apply
    def select(self, *keys: Any, inplace: bool = False, strict: bool = True, as_tensordict: bool = False) -> Self:
        """An instance with only ``keys`` set (the other fields, non-tensor ones included,
        read ``None``); with ``as_tensordict=True`` a ``TensorDict`` of just those keys."""
        if as_tensordict:
            return _full_td(self).select(*keys, strict=strict)  # type: ignore[return-value]
        nt = self._non_tensordict
        wanted = {k if isinstance(k, str) else k[0] for k in keys}
        td_keys = [k for k in keys if not (isinstance(k, str) and k in nt)]
        out = self._tensordict.select(*td_keys, inplace=inplace, strict=strict)
        if inplace:
            for key in list(nt):
                if key not in wanted:
                    del nt[key]
            _resync(self)
            return self
        return _new(type(self), out, {k: v for k, v in nt.items() if k in wanted})

    def is_non_tensor(self, key: Any) -> bool:
        """Whether field (or nested key) ``key`` holds non-tensor data: a field kept
        outside the TensorDict (a str, any object, ``None``) or a non-tensor leaf.

        Raises:
            KeyError: ``key`` is not a field.

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class T(TensorClass):
            ...     obs: torch.Tensor
            ...     label: str
            >>> t = T(obs=torch.zeros(4), label="cat")
            >>> t.is_non_tensor("label"), t.is_non_tensor("obs")
            (True, False)
        """
        if not isinstance(key, str):
            key = unravel_key(key)
            if isinstance(key, tuple):
                parent = self.get(key[0])
                if parent is None or not hasattr(parent, "is_non_tensor"):
                    msg = f"{type(self).__name__}.is_non_tensor({key!r}): {key[0]!r} holds no nested container."
                    raise KeyError(msg)
                return parent.is_non_tensor(key[1:] if len(key) > 2 else key[1])
        if key in self._non_tensordict:
            return True
        if key in self._tensordict._keys_raw():
            return self._tensordict.is_non_tensor(key)
        if key in type(self)._tc_field_set:
            return True  # a field that holds nothing reads None, a non-tensor value
        msg = f"{type(self).__name__} has no field {key!r}; its fields are {list(type(self)._tc_fields)}."
        raise KeyError(msg)

    def exclude(self, *keys: Any, inplace: bool = False) -> Self:
        """An instance without ``keys`` (they read ``None``)."""
        return _wrap_out(self, self._tensordict.exclude(*keys, inplace=inplace))

    def apply(self, fn: Any, *others: Any, **kwargs: Any) -> Self:
        """``TensorDict.apply`` over every tensor field, nested instances included;
        ``others`` may be instances too. Non-tensor fields are carried over.

        Examples:
            >>> import torch
            >>> from tensordict.tensorclass import TensorClass
            >>> class P(TensorClass):
            ...     x: torch.Tensor
            >>> P(x=torch.zeros(2), batch_size=[2]).apply(lambda t: t + 1).x
            tensor([1., 1.])
        """
        return _call_deep(self, "apply", (fn, *others), kwargs)

    def apply_(self, fn: Any, *others: Any, **kwargs: Any) -> Self:
        """``TensorDict.apply_``: ``fn`` applied in place to every tensor field."""
        return _call_deep(self, "apply_", (fn, *others), kwargs)

    def update(self, input_dict_or_td: Any = None, clone: bool = False, inplace: bool = False, **kwargs: Any) -> Self:
        """Writes the fields of ``input_dict_or_td`` (an instance, a TensorDict or a dict)
        and the fields given as keywords (``obj.update(x=...)``; keywords win).

        Raises:
            KeyError: a key is not a field of the class.
        """
        cls = type(self)
        source, kwargs = _merge_update_source(input_dict_or_td, kwargs)
        if source is None:
            return self
        keys = source._keys_raw() if hasattr(source, "_keys_raw") else source.keys()
        extra = [k for k in keys if (k if isinstance(k, str) else k[0]) not in cls._tc_field_set]
        if extra:
            msg = f"{cls.__name__}.update: {extra} are not fields of {cls.__name__} (fields: {list(cls._tc_fields)})."
            raise KeyError(msg)
        if cls._tc_frozen:
            import dataclasses

            msg = f"cannot update fields of {cls.__name__}: it is frozen."
            raise dataclasses.FrozenInstanceError(msg)
        # a nested instance is updated field by field from a dict or TensorDict (it stays
        # an instance of its class)
        nested = {}
        for key in list(keys):
            if not isinstance(key, str):
                continue
            current = self._tensordict._get_raw(key, None)
            if isinstance(current, _Slots):
                value = source[key] if not hasattr(source, "_get_raw") else source._get_raw(key)
                if isinstance(value, (Mapping, TensorDictBase)) and not isinstance(value, _Slots):
                    nested[key] = value
        if nested:
            source = {k: (source[k] if not hasattr(source, "_get_raw") else source._get_raw(k)) for k in keys if k not in nested}
            for key, value in nested.items():
                self._tensordict._get_raw(key).update(value, clone=clone, inplace=inplace, **kwargs)
        with _non_tensor_in_td(self) as td:
            td.update(source, clone=clone, inplace=inplace, **kwargs)
        return self


    def update_(self, input_dict_or_td: Any = None, clone: bool = False, **kwargs: Any) -> Self:
        """Copies the fields of ``input_dict_or_td`` and the keyword fields into the
        existing tensors (in place); returns ``self``."""
        source, kwargs = _merge_update_source(input_dict_or_td, kwargs)
        if source is None:
            return self
        if isinstance(source, _Slots):
            source = source._tensordict
        self._tensordict.update_(source, clone=clone, **kwargs)
        _resync(self)
        return self


#: keywords of ``TensorDict.update`` that are options, not field values
_UPDATE_OPTIONS = frozenset({"non_blocking", "keys_to_update", "is_leaf", "update_batch_size", "ignore_lock"})


def _merge_update_source(source: Any, kwargs: dict) -> tuple[Any, dict]:
    """``(source, options)`` for ``update``/``update_``: field values given as keywords are
    merged into the source (a plain dict then), option keywords are returned apart."""
    fields = {k: v for k, v in kwargs.items() if k not in _UPDATE_OPTIONS}
    options = {k: v for k, v in kwargs.items() if k in _UPDATE_OPTIONS}
    if isinstance(source, _Slots):
        source = _full_td(source)
    if not fields:
        return source, options
    if source is None:
        return dict(fields), options
    merged = dict(source.items()) if not isinstance(source, TensorDictBase) else {k: source._get_raw(k) for k in source._keys_raw()}
    merged.update(fields)
    return merged, options


# ---------------------------------------------------------------------- generated
#: methods returning a TensorDict of the same fields (or ``self``) whose arguments are
#: never tensorclasses
_PLAIN = [
    "movedim", "moveaxis", "repeat", "repeat_interleave", "flip", "roll", "narrow",
    "gather", "tensor_split", "type", "pin_memory", "empty",
    "share_memory_", "lock_", "unlock_", "clear_device_",
    "rename", "rename_", "refine_names", "densify", "auto_batch_size_",
    "filter_empty_", "data_ptr", "is_shared",
]
#: methods whose arguments may be tensorclasses (unwrapped to their TensorDicts first)
_UNWRAP = [
    # leaf-wise: they must reach the leaves of nested instances too
    "float", "double", "half", "bfloat16", "int", "long", "short", "byte", "char", "bool",
    "zero_", "fill_", "detach_", "requires_grad_", "all", "any",
    "named_apply", "copy_", "masked_fill", "masked_fill_", "masked_select",
    "where", "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "pow", "pow_",
    "maximum", "maximum_", "minimum", "minimum_", "clamp", "clamp_", "clamp_min",
    "clamp_min_", "clamp_max", "clamp_max_", "lerp", "lerp_", "addcmul", "addcmul_",
    "addcdiv", "addcdiv_", "abs", "abs_", "neg", "neg_", "exp", "exp_", "log", "log_",
    "log1p", "log1p_", "sqrt", "sqrt_", "sin", "sin_", "cos", "cos_", "tanh", "tanh_",
    "sigmoid", "sigmoid_", "sign", "sign_", "floor", "floor_", "ceil", "ceil_", "round",
    "round_", "reciprocal", "reciprocal_", "isnan", "isfinite", "sum", "mean", "nanmean",
    "nansum", "prod", "std", "var", "max", "min", "amax", "amin", "norm", "logsumexp",
    "softmax", "cumsum", "set_at_", "update_at_", "copy_at_",
]
_BINARY = [
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__",
    "__rmul__", "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__",
    "__rfloordiv__", "__ifloordiv__", "__mod__", "__rmod__", "__imod__", "__pow__",
    "__rpow__", "__ipow__", "__matmul__", "__and__", "__or__", "__xor__", "__lt__",
    "__le__", "__gt__", "__ge__", "__rand__", "__ror__", "__rxor__",
]
_UNARY = ["__neg__", "__abs__", "__invert__", "__pos__"]

for _name in _PLAIN:
    if _name not in _OpsMixin.__dict__:
        setattr(_OpsMixin, _name, forward(_name))
for _name in _UNWRAP:
    if _name not in _OpsMixin.__dict__:
        setattr(_OpsMixin, _name, forward(_name, unwrap=True))
for _name in _BINARY:
    setattr(_OpsMixin, _name, binary_dunder(_name))
for _name in _UNARY:
    setattr(_OpsMixin, _name, unary_dunder(_name))
del _name


# ---------------------------------------------------------------------- upstream method set
# The TensorDict methods upstream's tensorclass stub lists. Each is forwarded to the
# TensorDict implementation when td-core has it; a handful have a local definition in
# terms of other methods (dtype casts, axis aliases); the rest raise AttributeError
# naming the missing TensorDict method when called.
_CASTS = [
    "float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "complex32", "complex64", "complex128",
    "qint8", "quint8", "qint32", "quint4x2",
]
_ALIASES = {"swapaxes": "transpose", "swapdims": "transpose"}
_UPSTREAM_METHODS = [
    "as_tensor", "atleast_1d", "atleast_2d", "atleast_3d", "attrs", "auto_device_",
    "broadcast_to", "bytes", "cat_from_tensordict", "cat_tensors", "clear_refs_for_compile_",
    "create_nested", "cummax", "cummin", "entry_class", "filter_non_tensor_data", "fliplr",
    "flipud", "get_item_shape", "is_contiguous", "is_floating_point", "isreal",
    "make_memmap", "make_memmap_from_storage", "make_memmap_from_tensor", "mod", "new_empty",
    "new_full", "new_ones", "new_tensor", "new_zeros", "non_tensor_items", "pad",
    "param_count", "pin_memory_", "quantile", "record_stream", "rot90", "rsub", "separates",
    "set_non_tensor", "stack_from_tensordict", "stack_tensors", "tile", "to_csv", "to_json",
    "to_mds", "to_padded_tensor", "to_pandas", "to_parquet", "to_zarr",
    "zero_grad", "asend", "arecv", "get_non_tensor",
]
_UPSTREAM_PROPERTIES = ["dtype", "depth", "is_cpu", "is_cuda", "is_meta"]
_UPSTREAM_CLASSMETHODS = ["from_csv", "from_json", "from_list", "from_pandas", "from_parquet", "from_schema", "from_zarr"]


def _cast_method(name: str) -> Any:
    dtype = getattr(torch, name)

    def method(self: Any) -> Any:
        fn = getattr(self._tensordict, name, None)
        if fn is not None:
            return _wrap_out(self, fn())
        return self.to(dtype)

    method.__name__ = name
    method.__qualname__ = f"TensorClass.{name}"
    method.__doc__ = f"Casts every tensor field to ``torch.{name}`` (a new instance)."
    return method


def _alias_method(name: str, target: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self._tensordict, name, None)
        if fn is not None:
            return _wrap_out(self, fn(*args, **kwargs))
        return getattr(self, target)(*args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"TensorClass.{name}"
    method.__doc__ = f"Alias of :meth:`{target}` (as ``torch.Tensor.{name}``)."
    return method


def _property_forward(name: str) -> property:
    def fget(self: Any) -> Any:
        try:
            return getattr(self._tensordict, name)
        except AttributeError:
            msg = f"{type(self).__name__}.{name} reads TensorDict.{name}, which the installed td-core does not provide."
            raise AttributeError(msg) from None

    return property(fget, doc=f"``TensorDict.{name}`` of the instance's TensorDict.")


for _name in _CASTS:
    if not hasattr(_OpsMixin, _name):
        setattr(_OpsMixin, _name, _cast_method(_name))
for _name, _target in _ALIASES.items():
    if not hasattr(_OpsMixin, _name):
        setattr(_OpsMixin, _name, _alias_method(_name, _target))
for _name in _UPSTREAM_METHODS:
    if not hasattr(_OpsMixin, _name):
        setattr(_OpsMixin, _name, forward(_name, unwrap=True))
for _name in _UPSTREAM_PROPERTIES:
    if not hasattr(_OpsMixin, _name):
        setattr(_OpsMixin, _name, _property_forward(_name))
del _name, _target
