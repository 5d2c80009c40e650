"""The stacking functions of the lazy-stack API: ``lazy_stack``,
``maybe_dense_stack`` and ``dense_stack_tds`` (exported by ``tensordict._lazy``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._base import TensorDictBase

__all__ = ["lazy_stack", "maybe_dense_stack", "dense_stack_tds"]

_Tensor = torch.Tensor


def lazy_stack(
    input: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None, **kwargs: Any
) -> Any:
    """Stacks TensorDicts into a :class:`LazyStackedTensorDict` along a new batch dim ``dim``.

    No leaf is copied: the result keeps ``input`` and stacks a key only when it is
    read. The TensorDicts must share one batch size; their keys and feature
    shapes may differ. A list of tensors is stacked with ``torch.stack``.

    Args:
        input (sequence of TensorDictBase): the TensorDicts to stack.
        dim (int, optional): the new batch dim. Defaults to ``0``.

    Keyword Args:
        out (TensorDictBase, optional): a TensorDict to write the result into (in place).
        **kwargs: passed to :class:`LazyStackedTensorDict` (``stack_dim_name``, ``strict_shape``).

    Returns:
        a :class:`LazyStackedTensorDict` (``out`` when given).

    Raises:
        RuntimeError: ``input`` is empty or the batch sizes differ (both named).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> a = TensorDict(x=torch.zeros(3), batch_size=[3])
        >>> b = TensorDict(y=torch.ones(3), batch_size=[3])
        >>> s = lazy_stack([a, b])
        >>> type(s).__name__, s.batch_size
        ('LazyStackedTensorDict', torch.Size([2, 3]))
    """
    tds = input if isinstance(input, list) else list(input)
    if not tds:
        msg = "lazy_stack expects a non-empty sequence of TensorDicts."
        raise RuntimeError(msg)
    if isinstance(tds[0], _Tensor):
        return torch.stack(tds, dim, out=out)
    from tensordict._lazy import LazyStackedTensorDict

    if kwargs:
        result = LazyStackedTensorDict(*tds, stack_dim=dim, **kwargs)
    else:
        result = LazyStackedTensorDict._from_list(tds, dim)
    if out is not None:
        out.update_(result)
        return out
    return result


def _dense_stack(tds: list, dim: int, out: Any, maybe: bool) -> Any:
    from tensordict import _stack

    prev = _stack._LAZY_LEGACY[0]
    _stack._LAZY_LEGACY[0] = False
    try:
        return _stack.stack(tds, dim, out=out, maybe_dense_stack=maybe)
    finally:
        _stack._LAZY_LEGACY[0] = prev


def maybe_dense_stack(
    input: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None, **kwargs: Any
) -> Any:
    """Stacks TensorDicts densely when they have the same keys and shapes, lazily otherwise.

    The result is a :class:`~tensordict.TensorDict` when every TensorDict has the
    same keys and the same shape for each key; otherwise a
    :class:`LazyStackedTensorDict` (a nested key whose TensorDicts differ becomes a
    lazy stack inside a dense result). Tensors are stacked with ``torch.stack``.

    Args:
        input (sequence of TensorDictBase): the TensorDicts to stack.
        dim (int, optional): the new batch dim. Defaults to ``0``.

    Keyword Args:
        out (TensorDictBase, optional): a TensorDict to write the result into.

    Raises:
        RuntimeError: ``input`` is empty or the batch sizes differ.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, maybe_dense_stack
        >>> a = TensorDict(x=torch.zeros(3), batch_size=[3])
        >>> b = TensorDict(x=torch.ones(3), batch_size=[3])
        >>> c = TensorDict(y=torch.ones(3), batch_size=[3])
        >>> type(maybe_dense_stack([a, b])).__name__
        'TensorDict'
        >>> type(maybe_dense_stack([a, c])).__name__
        'LazyStackedTensorDict'
    """
    tds = list(input)
    if tds and isinstance(tds[0], _Tensor):
        return torch.stack(tds, dim, out=out)
    return _dense_stack(tds, dim, out, True)


def dense_stack_tds(td_list: Any, dim: int | None = None) -> TensorDictBase:
    """Densely stacks a list of TensorDicts (or the TensorDicts of a lazy stack).

    Unlike ``torch.stack`` under ``set_lazy_legacy(True)``, the result is always
    dense, also for TensorDicts that hold lazy stacks themselves.

    Args:
        td_list (sequence of TensorDictBase or LazyStackedTensorDict): the
            TensorDicts; for a lazy stack, its ``tensordicts``.
        dim (int, optional): the stack dim. Defaults to the lazy stack's
            ``stack_dim``, or ``0``.

    Returns:
        a dense :class:`~tensordict.TensorDict`.

    Raises:
        RuntimeError: the batch sizes or the shapes of a key differ.
        KeyError: the key sets differ.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> s = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)], 1)
        >>> dense = dense_stack_tds(s)
        >>> type(dense).__name__, dense.batch_size
        ('TensorDict', torch.Size([2, 3]))
    """
    from tensordict._lazy import LazyStackedTensorDict

    if isinstance(td_list, LazyStackedTensorDict):
        if dim is None:
            dim = td_list.stack_dim
        td_list = td_list.tensordicts
    if dim is None:
        dim = 0
    return _dense_stack(list(td_list), dim, None, False)
