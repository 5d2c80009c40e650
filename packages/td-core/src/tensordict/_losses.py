"""Element-wise losses of ``torch.nn.functional`` on TensorDicts (``__torch_function__``).

``F.l1_loss(td_input, td_target, reduction=...)`` (and ``mse_loss``,
``smooth_l1_loss``, ``huber_loss``, ``binary_cross_entropy``,
``binary_cross_entropy_with_logits``) computes the loss leaf by leaf: the result is
a TensorDict with the structure of the input. ``reduction="none"`` keeps each leaf's
shape and the batch size; ``"mean"``/``"sum"`` reduce every leaf to a scalar (batch
size ``[]``), as the reductions with ``dim=None`` do. The target may be a TensorDict
with the same keys, or a tensor / number used for every leaf.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from tensordict import _classes

__all__ = ["loss_torch_table"]

_REDUCTIONS = ("none", "mean", "sum")


def _leafwise_loss(fn: Callable) -> Callable:
    def impl(input: Any, target: Any, *args: Any, reduction: str = "mean", **kwargs: Any) -> Any:  # noqa: A002
        if reduction not in _REDUCTIONS:
            msg = f"{fn.__name__}: reduction must be one of {_REDUCTIONS}, got {reduction!r}."
            raise ValueError(msg)
        if not isinstance(input, _classes.TensorDictBase):
            msg = f"{fn.__name__}: with a TensorDict target the input must be a TensorDict too, got {type(input).__name__}."
            raise TypeError(msg)
        if isinstance(target, _classes.TensorDictBase):
            out = input.apply(lambda x, y: fn(x, y, *args, reduction="none", **kwargs), target)
        else:
            def leaf(x: Any) -> Any:
                y = torch.as_tensor(target, dtype=x.dtype, device=x.device).expand_as(x)
                return fn(x, y, *args, reduction="none", **kwargs)

            out = input.apply(leaf)
        if reduction == "mean":
            return out.mean()  # type: ignore[union-attr]
        if reduction == "sum":
            return out.sum()  # type: ignore[union-attr]
        return out

    return impl


def loss_torch_table() -> dict:
    """``F.loss -> impl`` entries for the ``__torch_function__`` table."""
    fns = (
        F.l1_loss,
        F.mse_loss,
        F.smooth_l1_loss,
        F.huber_loss,
        F.binary_cross_entropy,
        F.binary_cross_entropy_with_logits,
    )
    return {fn: _leafwise_loss(fn) for fn in fns}
