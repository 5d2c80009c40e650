"""TensorDicts as ``torch.utils._pytree`` nodes, and DataLoader collation.

Imported at the end of ``tensordict/__init__.py``. It registers ``TensorDict`` (and
its subclasses), ``LazyStackedTensorDict`` when ``tensordict._lazy`` is loaded (the
class registers itself when it is created, through ``ConvertMixin.__init_subclass__``)
and any TensorDictBase subclass that sets ``_td_pytree_node = True``, so that
``tree_map``, ``torch.vmap``, ``torch.func`` transforms and ``torch.export`` see
through TensorDicts.

A TensorDict flattens to its tensor and TensorDict values (the children, in key
order); keys, batch size, device, names and the non-tensor data go in the context.
Unflattening rebuilds a TensorDict without re-checking every leaf, except when the
first tensor child changed shape. That happens in two places, which decide the new
batch size:

- inside ``torch.vmap``: the children are batched tensors that lost the vmapped dim;
  ``functorch`` tells which dim it was, and that dim leaves the batch size when it was
  a batch dim (``in_dims=0`` over a TensorDict of batch size ``[B, ...]`` gives
  ``[...]`` inside the function);
- out of ``torch.vmap``: the children gained the vmapped dim (at ``out_dims``); it is
  inserted in the batch size when it lands among the batch dims, so a function
  returning a TensorDict of batch size ``[...]`` gives ``[B, ...]``.

Otherwise (``tree_map`` with a function that changes shapes) the batch size becomes
the longest leading shape the children share, at most the old number of dims.
Non-tensor data follows the new batch size; a ``NonTensorStack`` whose dims change
becomes one ``NonTensorData`` holding its list. Children that come back as neither
tensors nor tensor collections (``tree_map(lambda x: x.ndim, td)``, or the placeholder
ints ``torch.vmap`` unflattens) are stored as non-tensor data that stays a child when
that TensorDict is flattened again.

A lazy stack flattens to its dense view (one stacked tensor per key, so that
``torch.vmap`` over its stack dim works and gradients reach the stacked TensorDicts),
and is rebuilt as a lazy stack when the stack dim is still there; a heterogeneous one
(no dense view) flattens to its TensorDicts.

``torch.utils.data.default_collate`` of a list of TensorDicts stacks them
(``tensordict.stack``; a lazy stack when their keys differ).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch.utils import _pytree as _pt

from tensordict import _classes
from tensordict._base import TensorDictBase
from tensordict._convert import _PENDING_PYTREE_CLASSES
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._stack import stack
from tensordict._td import TensorDict

__all__ = ["register_td_class", "registered_classes"]

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_Size = torch.Size
_new_unsafe = TensorDict._new_unsafe
_REGISTERED: list[type] = []
#: types of children that need no check before unflattening
_CHILD_TYPES = {torch.Tensor, torch.nn.Parameter, TensorDict}
#: value types for which a TensorDict takes the fast flatten path (no non-tensor data)
_DENSE_TYPES = frozenset(_CHILD_TYPES)


class _TDContext(NamedTuple):
    """Pytree context of a TensorDict node.

    A named tuple of constants, so that ``torch.compile``/``torch.export`` (Dynamo) can
    hold the context of a TensorDict built inside a traced function as a constant (the
    output spec of an exported program). When the sizes are symbolic (dynamic shapes),
    ``batch_size`` and ``ref_shape`` are ``None`` and ``batch_dims`` says how many
    leading dims of the children make the batch size again on unflattening.

    Equality (used by ``tree_map`` over several trees and by spec comparisons) is
    structural: keys, batch size, device, names and non-tensor keys, not the
    non-tensor values.
    """

    keys: tuple
    batch_size: Any
    device: Any
    names: Any
    non_tensor: Any
    order: Any
    ref_idx: int
    ref_shape: Any
    stack: Any
    batch_dims: int = -1

    def _nt_keys(self) -> tuple:
        return tuple(self.non_tensor) if self.non_tensor else ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not _TDContext:
            return NotImplemented
        return (
            self.keys == other.keys
            and self.batch_size == other.batch_size
            and self.batch_dims == other.batch_dims
            and self.device == other.device
            and self.names == other.names
            and self._nt_keys() == other._nt_keys()
            and (self.stack is None) == (other.stack is None)
        )

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        bs = self.batch_size
        return hash((self.keys, tuple(bs) if bs is not None else self.batch_dims, self._nt_keys()))

    def __repr__(self) -> str:
        extra = f", non_tensor={list(self._nt_keys())}" if self.non_tensor else ""
        bs = list(self.batch_size) if self.batch_size is not None else f"<{self.batch_dims} dims>"
        return f"TensorDictSpec(keys={list(self.keys)}, batch_size={bs}, device={self.device}{extra})"


_new_context = tuple.__new__  # (a NamedTuple's generated __new__ costs twice as much)


def _symbolic(size: torch.Size) -> bool:
    # the sum of a Size is an int unless a dim is symbolic (one C call, no guard)
    return sum(size).__class__ is not int


def _context(
    keys: tuple, bs: Any, device: Any, names: Any, non_tensor: Any, order: Any, ref_idx: int, ref_shape: Any, stack: Any
) -> _TDContext:
    # a symbolic size (torch.export with dynamic shapes) is no constant: keep the number
    # of batch dims, the children's shapes give the sizes back
    if _symbolic(bs) or (ref_shape is not None and _symbolic(ref_shape)):
        return _TDContext(keys, None, device, names, non_tensor, order, ref_idx, None, stack, len(bs))
    return _TDContext(keys, bs, device, names, non_tensor, order, ref_idx, ref_shape, stack)


def _items_for_flatten(td: Any) -> tuple[Any, Any]:
    """(items, stack info). A lazy stack flattens to its dense view when it has one."""
    stack_dim = getattr(td, "stack_dim", None)
    if stack_dim is None or not hasattr(td, "tensordicts"):
        return td._items_raw(), None
    tds = td.tensordicts
    if tds:
        first = tds[0]._keys_raw()
        if any(other._keys_raw() != first for other in tds[1:]):
            # keys only some TensorDicts hold: no dense view
            return None, (type(td), stack_dim)
    try:
        items = list(td._items_raw())
    except (RuntimeError, KeyError, ValueError):
        # heterogeneous keys or shapes: the stacked TensorDicts are the children
        return None, (type(td), stack_dim)
    return items, (type(td), stack_dim)


def _flatten_dense(td: Any) -> tuple[list, _TDContext]:
    """``_flatten`` for ``TensorDict`` and its subclasses (reads the storage directly)."""
    storage = td._tensordict
    values = list(storage.values())
    # (an attribute read, not ``td.__dict__``: reading ``__dict__`` builds the instance's
    # dict object, and every later attribute read of that TensorDict gets slower)
    if not _DENSE_TYPES.issuperset(map(type, values)) or td._pytree_leaf_keys is not None:
        return _flatten(td)
    ref_idx = 0
    for i, value in enumerate(values):
        if value.__class__ is not TensorDict:
            ref_idx = i
            break
    ref_shape = values[ref_idx].shape if values else None
    bs = td._batch_size
    if sum(bs).__class__ is int and (ref_shape is None or sum(ref_shape).__class__ is int):  # no symbolic size
        return values, _new_context(_TDContext, (tuple(storage), bs, td._device, td._names, None, None, ref_idx, ref_shape, None, -1))
    return values, _context(tuple(storage), bs, td._device, td._names, None, None, ref_idx, ref_shape, None)


def _flatten(td: Any) -> tuple[list, _TDContext]:
    items, stack = _items_for_flatten(td)
    if items is None:
        children = list(td.tensordicts)
        ctx = _context(
            tuple(range(len(children))),
            td.batch_size,
            td.device,
            None,
            None,
            None,
            -1,
            None,
            (*stack, True),
        )
        return children, ctx
    keys = []
    values: list[Any] = []
    non_tensor = None
    ref_idx = -1
    # values that unflattening stored as non-tensor data (``tree_map`` may return
    # anything, and ``torch.vmap`` unflattens placeholder ints) stay children, so that
    # flattening the result again gives the same leaves
    leaf_keys = getattr(td, "_pytree_leaf_keys", None)
    for key, value in items:
        cls = value.__class__
        if cls is _Tensor or isinstance(value, _Tensor):
            if ref_idx < 0:
                ref_idx = len(values)
            keys.append(key)
            values.append(value)
        elif leaf_keys is not None and cls is NonTensorData and key in leaf_keys:
            keys.append(key)
            values.append(value.data)
        elif cls is NonTensorData or cls is NonTensorStack or not _is_child(value):
            if non_tensor is None:
                non_tensor = {}
            non_tensor[key] = value
        else:
            keys.append(key)
            values.append(value)
    ref_shape = None
    if ref_idx >= 0:
        ref_shape = values[ref_idx].shape
    else:
        ref_idx = 0
        for i, value in enumerate(values):
            if _is_child(value):
                ref_idx, ref_shape = i, value.shape
                break
    order = tuple(td._keys_raw()) if non_tensor else None
    names = td.names if td._has_names() else None
    ctx = _context(
        tuple(keys), td.batch_size, td.device, names, non_tensor, order, ref_idx, ref_shape, stack
    )
    return values, ctx


def _is_child(value: Any) -> bool:
    return isinstance(value, TensorDictBase) or _classes.is_tensor_collection(value)


def _flatten_with_keys(td: Any) -> tuple[list, _TDContext]:
    values, ctx = _flatten_dense(td) if isinstance(td, TensorDict) else _flatten(td)
    return [(_pt.MappingKey(k), v) for k, v in zip(ctx.keys, values)], ctx


# ---------------------------------------------------------------------- unflatten
def _removed_dim(ref: Any, old: tuple, new: tuple) -> int | None:
    """Which dim of ``old`` is missing from ``new`` (the vmapped one for batched tensors)."""
    if isinstance(ref, _Tensor) and torch._C._functorch.is_batchedtensor(ref):
        bdim = torch._C._functorch.maybe_get_bdim(ref)
        if bdim is not None and 0 <= bdim < len(old) and old[:bdim] + old[bdim + 1 :] == new:
            return bdim
    for p in range(len(old)):
        if old[:p] + old[p + 1 :] == new:
            return p
    return None


def _inserted_dim(old: tuple, new: tuple) -> int | None:
    for p in range(len(new)):
        if new[:p] + new[p + 1 :] == old:
            return p
    return None


def _fits(values: list, batch_size: torch.Size) -> bool:
    n = len(batch_size)
    return all(v.shape[:n] == batch_size for v in values)


def _common_prefix(values: list, max_dims: int) -> torch.Size:
    common: list | None = None
    for v in values:
        shape = list(v.shape)
        if common is None:
            common = shape
            continue
        k = 0
        for a, b in zip(common, shape):
            if a != b:
                break
            k += 1
        common = common[:k]
    return _Size((common or [])[:max_dims])


def _new_batch(values: list, ctx: _TDContext, loose: set | None) -> tuple[torch.Size, Any]:
    """Batch size (and names) after the children changed shape; see the module doc."""
    bs = ctx.batch_size
    n = len(bs)
    names = ctx.names
    kept = values if not loose else [v for i, v in enumerate(values) if i not in loose]
    if not kept:
        return bs, names
    out = None
    if ctx.ref_shape is not None and (not loose or ctx.ref_idx not in loose):
        ref = values[ctx.ref_idx]
        if not isinstance(ref, _Tensor) and _fits(kept, bs):
            # the reference leaf came back as a tensor collection (e.g. torch.func.jacrev
            # puts a TensorDict of the inputs in place of each output leaf): its batch
            # size is no trace of a dim removed or inserted, and the children still fit
            return bs, names
        old, new = tuple(ctx.ref_shape), tuple(ref.shape)
        if len(new) == len(old) - 1:
            p = _removed_dim(ref, old, new)
            if p is not None:
                if p < n:
                    out = _Size(bs[:p] + bs[p + 1 :])
                    names = None if names is None else names[:p] + names[p + 1 :]
                else:
                    out = bs
        elif len(new) == len(old) + 1:
            p = _inserted_dim(old, new)
            if p is not None:
                if p <= n:
                    out = _Size((*bs[:p], new[p], *bs[p:]))
                    names = None if names is None else [*names[:p], None, *names[p:]]
                else:
                    out = bs
        elif new == old:
            out = bs
    if out is not None and _fits(kept, out):
        return out, names
    if _fits(kept, bs):
        return bs, ctx.names
    return _common_prefix(kept, n), None


def _rebatch(value: Any, bs: torch.Size, device: Any) -> Any:
    if value.__class__ is NonTensorData:
        return NonTensorData(value.data, bs, device)
    if value.__class__ is NonTensorStack:
        return NonTensorData(value.tolist(), bs, device)
    return value


def _common_device(values: list) -> Any:
    device = None
    for v in values:
        d = v.device
        if d is None:
            continue
        if device is None:
            device = d
        elif d != device:
            return None
    return device


def _loosen(values: list) -> tuple[list, set]:
    """Wraps the values that are neither tensors nor tensor collections (``tree_map``
    may return anything) as non-tensor data; returns their positions."""

    loose = set()
    out = []
    for i, v in enumerate(values):
        if isinstance(v, _Tensor) or _classes.is_tensor_collection(v):
            out.append(v)
        else:
            loose.add(i)
            out.append(NonTensorData(v))
    return out, loose


def _unflatten(values: Any, ctx: _TDContext) -> Any:
    if not isinstance(values, list):
        values = list(values)
    stack = ctx.stack
    if stack is not None and len(stack) == 3:
        return stack[0](*values, stack_dim=stack[1])
    bs = ctx.batch_size
    symbolic = bs is None  # flattened with symbolic sizes: the children give the batch size
    if symbolic:
        bs = values[ctx.ref_idx].shape[: ctx.batch_dims] if values else _Size([0] * ctx.batch_dims)
    names = ctx.names
    device = ctx.device
    loose = None
    if values:
        if not _CHILD_TYPES.issuperset(map(type, values)):
            values, loose = _loosen(values)
        ref = values[ctx.ref_idx]
        if loose or (not symbolic and ref.shape != ctx.ref_shape):
            bs, names = _new_batch(values, ctx, loose)
            values = [_fix_child(v, bs) for v in values]
        if device is not None and ref.device != device:
            device = _common_device(
                [v for i, v in enumerate(values) if not loose or i not in loose]
            )
        if loose:
            for i in loose:
                values[i] = NonTensorData(values[i].data, bs, device)
    source = dict(zip(ctx.keys, values))
    non_tensor = ctx.non_tensor
    if non_tensor:
        for key, value in non_tensor.items():
            source[key] = value if value.batch_size == bs else _rebatch(value, bs, device)
        source = {key: source[key] for key in ctx.order}
    td = _new_unsafe(source, bs, device, names)
    if loose:
        td._pytree_leaf_keys = frozenset(ctx.keys[i] for i in loose)
    if stack is not None and not loose and (symbolic or bs == ctx.batch_size):
        cls, stack_dim = stack
        return cls(*td.unbind(stack_dim), stack_dim=stack_dim)
    return td


def _fix_child(value: Any, bs: torch.Size) -> Any:
    """An empty nested TensorDict cannot follow a batch change by itself: give it ``bs``."""
    if isinstance(value, TensorDictBase) and value.batch_size[: len(bs)] != bs and value.is_empty():
        return _new_unsafe(
            {k: v for k, v in value._items_raw() if isinstance(v, TensorDictBase)}, bs, value.device
        )
    return value


# ---------------------------------------------------------------------- registration
def _should_register(cls: type) -> bool:
    flag = getattr(cls, "_td_pytree_node", None)
    if flag is not None:
        return bool(flag)
    if cls is TensorDictBase or not issubclass(cls, TensorDictBase):
        return False
    return issubclass(cls, TensorDict) or cls.__name__ == "LazyStackedTensorDict"


def register_td_class(cls: type) -> None:
    """Registers a TensorDictBase subclass as a pytree node (if it should be and is not yet).

    ``TensorDict`` subclasses and ``LazyStackedTensorDict`` are registered; other
    subclasses opt in with a class attribute ``_td_pytree_node = True``.
    """
    if cls in _REGISTERED or cls in _pt.SUPPORTED_NODES or not _should_register(cls):
        return
    _pt.register_pytree_node(
        cls,
        _flatten_dense if issubclass(cls, TensorDict) else _flatten,
        _unflatten,
        serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
        flatten_with_keys_fn=_flatten_with_keys,
    )
    _REGISTERED.append(cls)
    _CHILD_TYPES.add(cls)


def registered_classes(lazy: bool = False) -> tuple[type, ...]:
    """The TensorDict classes registered as pytree nodes so far, in registration order.

    Args:
        lazy (bool, optional): ``False`` (default) gives the dense classes
            (``TensorDict`` and the registered subclasses); ``True`` gives the lazy stacks
            (``LazyStackedTensorDict`` and its subclasses).

    This is what upstream's ``PYTREE_REGISTERED_TDS`` / ``PYTREE_REGISTERED_LAZY_TDS``
    hold; ``tensordict.nn.functional_modules`` publishes it under those names.
    """
    if lazy:
        _classes._load_lazy_stack()  # loading tensordict._lazy registers the class
    return tuple(c for c in _REGISTERED if any(k.__name__ == "LazyStackedTensorDict" for k in c.__mro__) == lazy)


def _collate(batch: Any, *, collate_fn_map: Any = None) -> Any:
    if isinstance(batch, TensorDictBase):  # a batch read at once through ``__getitems__``
        return batch
    return stack(list(batch), 0, maybe_dense_stack=True)


def _register_collate() -> None:
    from torch.utils.data._utils.collate import default_collate_fn_map

    default_collate_fn_map.setdefault(TensorDictBase, _collate)


for _cls in (TensorDict, *_PENDING_PYTREE_CLASSES):
    register_td_class(_cls)
_PENDING_PYTREE_CLASSES.clear()
del _cls
_register_collate()
