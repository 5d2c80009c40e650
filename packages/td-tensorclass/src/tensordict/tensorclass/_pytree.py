"""Registers every tensorclass as a ``torch.utils._pytree`` node.

The children are the entries of the instance's TensorDict (tensors, nested
TensorDicts and tensorclasses); the context holds the keys, the non-tensor fields,
``batch_size``, ``device``, ``names`` and each child's number of dims. On
unflatten the batch size follows the leaves: under ``torch.vmap`` the leaves are
batched tensors missing the mapped dim, so the batch loses that dim; on vmap's
output the leaves gain it back, and so does the batch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from tensordict.ext import TensorDict
from tensordict.tensorclass._storage import _new

__all__ = ["register_pytree"]


def _ndim(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.ndim
    bs = getattr(value, "batch_size", None)
    return len(bs) if bs is not None else -1


def _shape(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.shape
    return getattr(value, "batch_size", None)


def _is_batched(value: Any) -> bool:
    if not isinstance(value, torch.Tensor):
        return False
    try:
        return bool(torch._C._functorch.is_batchedtensor(value))
    except Exception:  # pragma: no cover - functorch internals moved
        return False


def _flatten(obj: Any) -> tuple[list, tuple]:
    td = obj._tensordict
    keys = tuple(td._keys_raw())
    children = [td._get_raw(k) for k in keys]
    names = td.names if td._has_names() else None
    context = (
        keys,
        tuple(sorted(obj._non_tensordict.items(), key=lambda kv: kv[0])),
        td.batch_size,
        td.device,
        tuple(names) if names is not None else None,
        tuple(_ndim(c) for c in children),
    )
    return children, context


def _flatten_with_keys(obj: Any) -> tuple[list, tuple]:
    children, context = _flatten(obj)
    return [(pytree.GetAttrKey(k), c) for k, c in zip(context[0], children)], context


def _candidate(child: Any, old: int, batch_size: torch.Size) -> tuple | None:
    shape = _shape(child)
    if shape is None or old < 0:
        return None
    n = len(batch_size)
    delta = len(shape) - old
    if delta == 0 or (delta < 0 and not _is_batched(child) and tuple(shape[:n]) == tuple(batch_size)):
        return tuple(shape[:n])
    return tuple(shape[: max(0, n + delta)])


def _batch_size(children: list, ndims: tuple, batch_size: torch.Size) -> torch.Size:
    """The batch size of the rebuilt instance: read off the first leaf, then cut to the
    prefix every leaf shares (so the result is always a valid batch size)."""
    shapes = [(c, o) for c, o in zip(children, ndims) if _shape(c) is not None and o >= 0]
    if not shapes:
        return batch_size
    out = _candidate(shapes[0][0], shapes[0][1], batch_size)
    if out is None:
        return batch_size
    for child, _ in shapes[1:]:
        shape = tuple(_shape(child))
        k = 0
        while k < len(out) and k < len(shape) and shape[k] == out[k]:
            k += 1
        out = out[:k]
    return torch.Size(out)


def _make_unflatten(cls: type) -> Any:
    def unflatten(children: Any, context: tuple) -> Any:
        keys, nt, batch_size, device, names, ndims = context
        children = list(children)
        bs = _batch_size(children, ndims, batch_size)
        if names is not None and len(names) != len(bs):
            names = None
        td = TensorDict._new_unsafe(dict(zip(keys, children)), bs, device, names)
        return _new(cls, td, dict(nt))

    return unflatten


def register_pytree(cls: type) -> None:
    """Registers ``cls`` as a pytree node (done for every tensorclass when it is built)."""
    if cls in pytree.SUPPORTED_NODES:
        return
    pytree.register_pytree_node(
        cls,
        _flatten,
        _make_unflatten(cls),
        serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
        flatten_with_keys_fn=_flatten_with_keys,
    )
