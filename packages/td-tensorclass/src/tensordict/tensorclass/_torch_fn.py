"""``torch.*`` functions called on tensorclasses (``__torch_function__``).

``torch.stack`` and ``torch.cat`` get their own implementation, which carries the
non-tensor fields along (equal values stay one object, differing ones become a
``NonTensorStack``). Every other function td-core handles for TensorDicts
(``torch.unbind``, ``torch.split``, ``torch.squeeze``, ``torch.zeros_like``, ...) runs
on the instances' TensorDicts and the result is wrapped back into the class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict.ext import TD_HANDLED_FUNCTIONS, NonTensorData, TensorDict, TensorDictBase
from tensordict.ext import same_value as _same
from tensordict.tensorclass._storage import _full_td, _new, _non_tensor_in_td, _Slots
from tensordict.tensorclass._wrap import _unwrap, _wrap_out

__all__ = ["stack_instances", "cat_instances", "dispatch"]


def _instances(items: Sequence[Any], op: str) -> tuple[list, type]:
    items = list(items)
    if not items:
        msg = f"{op} expects a non-empty sequence of tensorclass instances."
        raise RuntimeError(msg)
    cls = type(items[0])
    for i, item in enumerate(items):
        if type(item) is not cls:
            msg = (
                f"{op} expects instances of one tensorclass: item 0 is a {cls.__name__}, "
                f"item {i} is a {type(item).__name__}."
            )
            raise TypeError(msg)
    return items, cls


def _write_out(out: Any, result: Any) -> Any:
    if not isinstance(out, _Slots):
        out.update_(result)
        return out
    with _non_tensor_in_td(out) as td:
        td.update_(result)
    return out


def stack_instances(items: Sequence[Any], dim: int = 0, *, out: Any = None, how: str = "stack", **kwargs: Any) -> Any:
    """Stacks tensorclass instances of one class along a new batch dim ``dim``.

    ``how`` is ``"stack"`` (dense; lazy under ``set_lazy_legacy(True)``),
    ``"lazy_stack"`` or ``"maybe_dense_stack"``.
    """
    items, cls = _instances(items, "stack")
    common, tds = _split_common(items, keep_members=how != "stack")
    if how == "stack":
        from tensordict.ext import stack

        result = stack(tds, dim, **kwargs)
    else:
        import tensordict

        result = getattr(tensordict, how)(tds, dim, **kwargs)
    if out is not None:
        return _write_out(out, result)
    return _new(cls, result, common)


def _split_common(items: Sequence[Any], keep_members: bool = False) -> tuple[dict, list]:
    """``(common, tds)``: the non-tensor fields every item holds with the same value (they
    stay one object, whatever the batch size, even an empty one), and each item's
    TensorDict with its other non-tensor fields as ``NonTensorData``.

    With ``keep_members`` (lazy stacks) an item's own unlocked TensorDict receives those
    fields and is the member itself, as in tensordict 0.15.3: a field written on the item
    afterwards (TorchRL's MCTS ``Tree`` sets ``subtree`` on stacked nodes) shows through
    the stack, and weak references to the item's TensorDict stay alive.
    """
    first = items[0]._non_tensordict
    common = {
        k: v for k, v in first.items()
        if all(k in it._non_tensordict and _same(v, it._non_tensordict[k]) for it in items[1:])
    }
    if len(common) == len(first) and all(len(it._non_tensordict) == len(common) for it in items[1:]):
        return common, [item._tensordict for item in items]
    tds: list[TensorDictBase] = []
    for item in items:
        own = item._tensordict
        if keep_members and own.__class__ is TensorDict and not own.is_locked:
            nt = item._non_tensordict
            for key in [k for k in nt if k not in common and nt[k] is not None]:
                # (a None field stays out: the stack's members may then differ in keys)
                own._tensordict[key] = NonTensorData(nt.pop(key), own.batch_size, own.device)
            tds.append(own)
            continue
        full = _full_td(item)
        if common:
            full = full.exclude(*common)
        tds.append(full)
    return common, tds


def cat_instances(items: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    """Concatenates tensorclass instances of one class along batch dim ``dim``."""
    from tensordict.ext import cat

    items, cls = _instances(items, "cat")
    common, tds = _split_common(items)
    result = cat(tds, dim)
    if out is not None:
        return _write_out(out, result)
    return _new(cls, result, common)


def _stack(tensors: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    return stack_instances(tensors, dim, out=out)


def _cat(tensors: Sequence[Any], dim: int = 0, *, out: Any = None) -> Any:
    return cat_instances(tensors, dim, out=out)


def _comparison(op: str, reflected: str) -> Any:
    def impl(input: Any, other: Any, *, out: Any = None) -> Any:
        if isinstance(input, _Slots):
            return getattr(input, op)(other)
        return getattr(other, reflected)(input)

    return impl


_OWN = {
    torch.stack: _stack,
    torch.cat: _cat,
    torch.concat: _cat,
    torch.concatenate: _cat,
    torch.eq: _comparison("__eq__", "__eq__"),
    torch.ne: _comparison("__ne__", "__ne__"),
    torch.lt: _comparison("__lt__", "__gt__"),
    torch.le: _comparison("__le__", "__ge__"),
    torch.gt: _comparison("__gt__", "__lt__"),
    torch.ge: _comparison("__ge__", "__le__"),
}


def _template(args: tuple, kwargs: dict) -> Any:
    for value in (*args, *kwargs.values()):
        if isinstance(value, _Slots):
            return value
        if isinstance(value, (list, tuple)):
            for v in value:
                if isinstance(v, _Slots):
                    return v
    return None


_JOINS = frozenset({torch.stack, torch.cat, torch.concat, torch.concatenate})


def _mixed_classes(args: tuple, kwargs: dict) -> bool:
    items = args[0] if args else kwargs.get("tensors", ())
    if not isinstance(items, (list, tuple)) or not items:
        return False
    first = type(items[0])
    return any(type(item) is not first for item in items[1:])


def dispatch(func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    impl = _OWN.get(func)
    if impl is not None:
        if func in _JOINS and _mixed_classes(args, kwargs):
            # instances of different classes (or a tensorclass with tensors): no
            # implementation, as upstream (torch raises "no implementation found")
            return NotImplemented
        return impl(*args, **kwargs)
    td_impl = TD_HANDLED_FUNCTIONS.get(func)
    if td_impl is None:
        return NotImplemented
    template = _template(args, kwargs)
    args = tuple(_unwrap(a) for a in args)
    kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    out = td_impl(*args, **kwargs)
    return _wrap_out(template, out) if template is not None else out
