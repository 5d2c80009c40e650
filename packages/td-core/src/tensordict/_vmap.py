"""``torch.vmap`` over tensor collections (TensorDicts, lazy stacks, tensorclasses).

``torch.vmap`` flattens its inputs and outputs with ``torch.utils._pytree`` and batches
each tensor leaf on its own. That is not enough for a tensor collection: its
``batch_size`` must lose the vmapped dim inside the function and regain it (at
``out_dims``) outside, a lock must survive, a lazy stack must stay a lazy stack, and a
collection that is not a pytree node (``TensorDictParams``, a persistent TensorDict)
must be accepted too. So vmap treats a tensor collection as one leaf, the way it treats
a tensor:

- in ``in_dims``/``out_dims`` a collection takes an ``int`` (a dim among its batch dims,
  negative values counted from the last batch dim) or ``None``, like a tensor; a
  collection returned alone accepts ``out_dims=(d,)`` as a tensor does;
- batching a collection batches each tensor leaf along ``in_dim`` (nested collections
  share the leading batch dims, so they recurse with the same dim); the batch size,
  names and lock follow; non-tensor data is kept once for the whole batch;
- a lazy stack batched along a dim other than its stack dim stays a lazy stack of
  batched TensorDicts; batched along its stack dim it becomes one TensorDict of stacked
  batched leaves, which comes back out of vmap as a lazy stack again (along ``out_dim``)
  when the function returns it (or writes into it and returns it);
- unbatching inserts the vmapped dim at ``out_dim`` in every leaf and in the batch
  size; ``out_dim`` must be at most the number of batch dims.

The three helpers of ``torch._functorch.vmap`` that batch inputs and unbatch outputs
(``_process_batched_inputs``, ``_create_batched_inputs``, ``_unwrap_batched``) are
replaced by :func:`install` with versions that do the above and hand every call
without a tensor collection to torch's own function unchanged. ``chunk_size=`` and
``randomness=`` work as for tensors (``randomness`` acts on the leaves).
A collection class can refuse vmap with a class attribute ``_vmap_unsupported`` holding
the error message (raised as ``RuntimeError``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._functorch import vmap as _vm
from torch.utils._pytree import _broadcast_to_and_flatten, tree_flatten, tree_unflatten

from tensordict import _classes
from tensordict._unbatched import UnbatchedTensor

__all__ = ["install"]

_Tensor = torch.Tensor
_is_tc = _classes.is_tensor_collection


def _is_coll(value: Any) -> bool:
    """A tensor collection, or an ``UnbatchedTensor`` (batched through its ``batch_size``)."""
    return value.__class__ is UnbatchedTensor or _is_tc(value)

_ORIGINAL: dict[str, Any] = {}
#: attribute marking a TensorDict made from a lazy stack batched along its stack dim
_RESTACK = "_vmap_restack_level"


def _name(func: Any) -> str:
    return _vm._get_name(func)


def _ndim(coll: Any) -> int:
    return len(coll.batch_size)


# ---------------------------------------------------------------------- batching
def _nt_rebatch(value: Any, batch_size: torch.Size) -> Any:
    """Non-tensor data with a new batch size (one value for the whole batch)."""
    nt_data = _classes.NonTensorData
    data = value.tolist() if isinstance(value, _classes.NonTensorStack) else value.data
    return nt_data(data, batch_size=batch_size, device=value.device)


def _keep(value: Any, in_dim: Any, level: Any) -> Any:
    return value


def add_batch_dim(coll: Any, in_dim: int | None, level: int) -> Any:
    """``coll`` batched along batch dim ``in_dim`` (non-negative) at vmap ``level``.

    With ``in_dim=None``, a shallow copy of the structure (same leaves), so that keys
    the function writes into an unbatched input do not leak batched tensors out.
    """
    cls = type(coll)
    if cls is UnbatchedTensor:  # kept whole: only its batch size changes
        bs = coll.batch_size
        return coll if in_dim is None else coll._rebatch(bs[:in_dim] + bs[in_dim + 1 :])
    if in_dim is None and not (
        getattr(coll, "_is_tensorclass", False)
        or cls is _classes.TensorDict
        or cls is _classes.LazyStackedTensorDict
    ):
        return coll
    unsupported = getattr(cls, "_vmap_unsupported", None)
    if unsupported:
        raise RuntimeError(unsupported)
    if getattr(coll, "_is_tensorclass", False) and hasattr(coll, "_tensordict"):
        non_tensor = getattr(coll, "_non_tensordict", None)
        inner = add_batch_dim(coll._tensordict, in_dim, level)
        return cls._from_tensordict(inner, dict(non_tensor) if non_tensor else None)
    if isinstance(coll, (_classes.NonTensorData, _classes.NonTensorStack)):
        bs = coll.batch_size
        if in_dim is None:
            return coll
        return _nt_rebatch(coll, torch.Size(bs[:in_dim] + bs[in_dim + 1 :]))
    lazy = _classes.LazyStackedTensorDict
    if isinstance(coll, lazy):
        return _add_lazy(coll, in_dim, level)  # type: ignore[arg-type]
    bs = coll.batch_size
    if in_dim is None:
        new_bs, add = bs, _keep
    else:
        new_bs, add = torch.Size(bs[:in_dim] + bs[in_dim + 1 :]), _vm._add_batch_dim  # type: ignore[assignment]
    source = {}
    for key, value in coll._items_raw():
        if value.__class__ is UnbatchedTensor:
            source[key] = value._rebatch(new_bs)
        elif isinstance(value, _Tensor):
            source[key] = add(value, in_dim, level)
        elif isinstance(value, (_classes.NonTensorData, _classes.NonTensorStack)):
            source[key] = value if in_dim is None else _nt_rebatch(value, new_bs)  # type: ignore[assignment]
        else:
            source[key] = add_batch_dim(value, in_dim, level)
    names = None
    if coll._has_names():
        names = list(coll.names)
        if in_dim is not None:
            del names[in_dim]
    out = _classes.TensorDict._new_unsafe(source, new_bs, coll.device, names)
    if coll.is_locked:
        out.lock_()
    return out


def _add_lazy(coll: Any, in_dim: int, level: int) -> Any:
    stack_dim = coll.stack_dim
    if in_dim is None:
        inner, new_stack = None, stack_dim
    elif in_dim == stack_dim:
        # one TensorDict of stacked leaves, batched; rebuilt as a lazy stack on the way out
        dense = add_batch_dim(coll.to_tensordict(), in_dim, level)
        setattr(dense, _RESTACK, level)
        if coll.is_locked:
            dense.lock_()
        return dense
    elif in_dim < stack_dim:
        inner, new_stack = in_dim, stack_dim - 1
    else:
        inner, new_stack = in_dim - 1, stack_dim
    tds = [add_batch_dim(td, inner, level) for td in coll.tensordicts]
    out = _classes.LazyStackedTensorDict(*tds, stack_dim=new_stack)
    if coll.is_locked:
        out.lock_()
    return out


# ---------------------------------------------------------------------- unbatching
def remove_batch_dim(coll: Any, level: int, batch_size: int, out_dim: int) -> Any:
    """``coll`` with the vmap ``level`` turned back into a dim of size ``batch_size`` at ``out_dim``."""
    cls = type(coll)
    if cls is UnbatchedTensor:
        bs = coll.batch_size
        return coll._rebatch((*bs[:out_dim], batch_size, *bs[out_dim:]))
    if getattr(coll, "_is_tensorclass", False) and hasattr(coll, "_tensordict"):
        non_tensor = getattr(coll, "_non_tensordict", None)
        inner = remove_batch_dim(coll._tensordict, level, batch_size, out_dim)
        return cls._from_tensordict(inner, dict(non_tensor) if non_tensor else None)
    bs = coll.batch_size
    if isinstance(coll, (_classes.NonTensorData, _classes.NonTensorStack)):
        return _nt_rebatch(coll, torch.Size((*bs[:out_dim], batch_size, *bs[out_dim:])))
    lazy = _classes.LazyStackedTensorDict
    if isinstance(coll, lazy):
        stack_dim = coll.stack_dim
        if out_dim <= stack_dim:
            inner, new_stack = out_dim, stack_dim + 1
        else:
            inner, new_stack = out_dim - 1, stack_dim
        tds = [remove_batch_dim(td, level, batch_size, inner) for td in coll.tensordicts]
        return lazy(*tds, stack_dim=new_stack)
    new_bs = torch.Size((*bs[:out_dim], batch_size, *bs[out_dim:]))
    source = {}
    remove = _vm._remove_batch_dim
    for key, value in coll._items_raw():
        if value.__class__ is UnbatchedTensor:
            source[key] = value._rebatch(new_bs)
        elif isinstance(value, _Tensor):
            source[key] = remove(value, level, batch_size, out_dim)  # type: ignore[assignment]
        elif isinstance(value, (_classes.NonTensorData, _classes.NonTensorStack)):
            source[key] = _nt_rebatch(value, new_bs)
        else:
            source[key] = remove_batch_dim(value, level, batch_size, out_dim)
    names = None
    if coll._has_names():
        names = list(coll.names)
        names.insert(out_dim, None)
    out = _classes.TensorDict._new_unsafe(source, new_bs, coll.device, names)
    if getattr(coll, _RESTACK, None) == level:
        return lazy(*out.unbind(out_dim), stack_dim=out_dim)
    return out


# ---------------------------------------------------------------------- torch's helpers
def _check_dim(func: Any, in_dims: Any, arg: Any, dim: int) -> int:
    nd = _ndim(arg)
    if not -nd <= dim < nd:
        msg = (
            f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an input, "
            f"but that input is a {type(arg).__name__} with batch_size {list(arg.batch_size)} "
            f"({nd} batch dims), so expected in_dim to satisfy -{nd} <= in_dim < {nd}."
        )
        raise ValueError(msg)
    return dim % nd


def _process_batched_inputs(in_dims: Any, args: tuple, func: Any) -> tuple:
    flat_args, args_spec = tree_flatten(args, is_leaf=_is_coll)
    if not any(map(_is_coll, flat_args)):
        return _ORIGINAL["_process_batched_inputs"](in_dims, args, func)
    if not isinstance(in_dims, (int, tuple)):
        msg = (
            f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int "
            f"or a (potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}."
        )
        raise ValueError(msg)
    flat_in_dims = _broadcast_to_and_flatten(in_dims, args_spec)
    if flat_in_dims is None:
        msg = (
            f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
            f"the structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs "
            f"has structure {args_spec}."
        )
        raise ValueError(msg)
    sizes = []
    for i, (arg, dim) in enumerate(zip(flat_args, flat_in_dims)):
        if dim is None:
            continue
        if not isinstance(dim, int):
            msg = (
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an "
                f"input but in_dim must be either an integer dimension or None."
            )
            raise ValueError(msg)
        if _is_coll(arg):
            dim = flat_in_dims[i] = _check_dim(func, in_dims, arg, dim)
            sizes.append(arg.batch_size[dim])
        elif isinstance(arg, _Tensor):
            nd = arg.dim()
            if not -nd <= dim < nd:
                msg = (
                    f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for some "
                    f"input, but that input is a Tensor of dimensionality {nd} so expected in_dim to "
                    f"satisfy -{nd} <= in_dim < {nd}."
                )
                raise ValueError(msg)
            dim = flat_in_dims[i] = dim % nd
            sizes.append(arg.shape[dim])
        else:
            msg = (
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an input "
                f"but the input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, "
                f"please use None as the respective in_dim"
            )
            raise ValueError(msg)
    if not sizes:
        msg = "vmap: Expected at least one Tensor to vmap over"
        raise ValueError(msg)
    if any(size != sizes[0] for size in sizes):
        msg = (
            f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
            f"{sizes} for the mapped dimension"
        )
        raise ValueError(msg)
    return sizes[0], flat_in_dims, flat_args, args_spec


def _create_batched_inputs(flat_in_dims: list, flat_args: list, vmap_level: int, args_spec: Any) -> Any:
    add = _vm._add_batch_dim
    batched = [
        add_batch_dim(arg, dim, vmap_level)
        if _is_coll(arg)
        else (arg if dim is None else add(arg, dim, vmap_level))
        for dim, arg in zip(flat_in_dims, flat_args)
    ]
    return tree_unflatten(batched, args_spec)


def _unwrap_batched(batched_outputs: Any, out_dims: Any, vmap_level: int, batch_size: int, func: Any) -> Any:
    flat, spec = tree_flatten(batched_outputs, is_leaf=_is_coll)
    if not any(map(_is_coll, flat)):
        return _ORIGINAL["_unwrap_batched"](batched_outputs, out_dims, vmap_level, batch_size, func)
    if _is_coll(batched_outputs) and isinstance(out_dims, tuple) and len(out_dims) == 1:
        flat_out_dims = list(out_dims)
    else:
        flat_out_dims = _broadcast_to_and_flatten(out_dims, spec)  # type: ignore[assignment]
        if flat_out_dims is None:
            msg = (
                f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
                f"with the structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} "
                f"but outputs has structure {spec}."
            )
            raise ValueError(msg)
    out = []
    for value, dim in zip(flat, flat_out_dims):
        if not _is_coll(value):
            out.append(_vm._maybe_remove_batch_dim(_name(func), value, vmap_level, batch_size, dim))
        elif dim is None:
            out.append(value)
        else:
            nd = _ndim(value)
            if not -nd - 1 <= dim <= nd:
                msg = (
                    f"vmap({_name(func)}, ..., out_dims={out_dims}): out_dim={dim} for a "
                    f"{type(value).__name__} with batch_size {list(value.batch_size)}; expected "
                    f"-{nd + 1} <= out_dim <= {nd} (the vmapped dim must land among the batch dims)."
                )
                raise ValueError(msg)
            out.append(remove_batch_dim(value, vmap_level, batch_size, dim % (nd + 1)))
    return tree_unflatten(out, spec)


def install() -> None:
    """Replaces torch's vmap input/output helpers (idempotent); see the module doc."""
    if _ORIGINAL:
        return
    for name, fn in (
        ("_process_batched_inputs", _process_batched_inputs),
        ("_create_batched_inputs", _create_batched_inputs),
        ("_unwrap_batched", _unwrap_batched),
    ):
        _ORIGINAL[name] = getattr(_vm, name)
        setattr(_vm, name, fn)
