"""``__torch_function__`` table: which torch functions accept TensorDicts.

``register_torch_function(torch.foo)`` adds an implementation; anything absent from
the table returns ``NotImplemented`` so torch raises its usual ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict._grad import autograd_grad
from tensordict._losses import loss_torch_table
from tensordict._ops import _torch_function_table
from tensordict._shape_aliases import shape_alias_torch_table
from tensordict._stack import cat, stack

__all__ = ["register_torch_function", "dispatch", "TD_HANDLED_FUNCTIONS"]

TD_HANDLED_FUNCTIONS: dict[Callable, Callable] = {}


def register_torch_function(func: Callable) -> Callable[[Callable], Callable]:
    """Decorator: ``impl`` handles ``func`` when a TensorDict is among its arguments."""

    def deco(impl: Callable) -> Callable:
        TD_HANDLED_FUNCTIONS[func] = impl
        return impl

    return deco


def dispatch(func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
    impl = TD_HANDLED_FUNCTIONS.get(func)
    if impl is None:
        if isinstance(func, torch._ops.HigherOrderOperator):
            # a higher-order op (torch.compiler.nested_compile_region's invoke_subgraph,
            # torch.cond, ...) takes TensorDicts as pytrees of tensors: run it as is
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        return NotImplemented
    return impl(*args, **kwargs)


def _register_defaults() -> None:
    reg = TD_HANDLED_FUNCTIONS
    reg.update(_torch_function_table())  # leaf-wise math and reductions (_ops.py)
    reg.update(shape_alias_torch_table())  # swapaxes, fliplr, rot90, tile, atleast_*d, ...
    reg.update(loss_torch_table())  # F.l1_loss, F.mse_loss, ... leaf by leaf
    reg[torch.autograd.grad] = autograd_grad
    reg[torch.stack] = stack
    reg[torch.cat] = cat
    reg[torch.concat] = cat
    reg[torch.concatenate] = cat
    reg[torch.unbind] = lambda td, dim=0: td.unbind(dim)
    reg[torch.split] = lambda td, split_size_or_sections, dim=0: td.split(split_size_or_sections, dim)
    reg[torch.chunk] = lambda td, chunks, dim=0: td.chunk(chunks, dim)
    reg[torch.tensor_split] = lambda td, indices_or_sections, dim=0: td.tensor_split(indices_or_sections, dim)
    reg[torch.squeeze] = lambda td, dim=None: td.squeeze(dim)
    reg[torch.unsqueeze] = lambda td, dim: td.unsqueeze(dim)
    reg[torch.permute] = lambda td, dims: td.permute(*dims)
    reg[torch.transpose] = lambda td, dim0, dim1: td.transpose(dim0, dim1)
    reg[torch.flatten] = lambda td, start_dim=0, end_dim=-1: td.flatten(start_dim, end_dim)
    reg[torch.unflatten] = lambda td, dim, sizes: td.unflatten(dim, sizes)
    reg[torch.reshape] = lambda td, shape: td.reshape(shape)
    reg[torch.clone] = lambda td, **kw: td.clone()
    reg[torch.gather] = lambda td, dim, index, **kw: td.gather(dim, index, **kw)
    reg[torch.flip] = lambda td, dims: td.flip(dims)
    reg[torch.roll] = lambda td, shifts, dims: td.roll(shifts, dims)
    reg[torch.narrow] = lambda td, dim, start, length: td.narrow(dim, start, length)
    reg[torch.movedim] = lambda td, source, destination: td.movedim(source, destination)
    reg[torch.repeat_interleave] = lambda td, repeats, dim=0, **kw: td.repeat_interleave(repeats, dim, **kw)
    reg[torch.zeros_like] = lambda td, **kw: _like(td, torch.zeros_like, kw)
    reg[torch.ones_like] = lambda td, **kw: _like(td, torch.ones_like, kw)
    reg[torch.empty_like] = lambda td, **kw: _like(td, torch.empty_like, kw)
    reg[torch.rand_like] = lambda td, **kw: _like(td, torch.rand_like, kw)
    reg[torch.randn_like] = lambda td, **kw: _like(td, torch.randn_like, kw)
    reg[torch.full_like] = lambda td, fill_value, **kw: _like(td, lambda t, **k: torch.full_like(t, fill_value, **k), kw)


def _like(td: Any, fn: Callable, kwargs: dict) -> Any:
    device = kwargs.get("device")
    if device is not None:  # the result lives on (and reports) that device
        return td._map_leaves(lambda t: fn(t, **kwargs), keep_non_tensor=True, device=torch.device(device))
    return td._map_leaves(lambda t: fn(t, **kwargs), keep_non_tensor=True)


_register_defaults()
