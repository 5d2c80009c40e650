"""Autograd on TensorDicts: ``requires_grad``, ``grad``, ``backward``, ``zero_grad``.

``backward`` gathers the differentiable leaves (and their gradients) into two flat
lists and makes one ``torch.autograd.backward`` call, so the graph is walked once
whatever the number of leaves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from tensordict import _classes

__all__ = ["GradMixin"]


def _tensor_leaves(td: Any) -> Iterator[tuple[tuple, torch.Tensor]]:
    """``(nested_key, tensor)`` for every tensor leaf (non-tensor data is skipped); a
    lazy stack gives the leaves of the TensorDicts it stacks (the real autograd leaves)."""
    stack = [((), td)]
    while stack:
        prefix, node = stack.pop()
        parts = getattr(node, "tensordicts", None)
        if parts is not None and isinstance(node, _classes.LazyStackedTensorDict):
            stack.extend((prefix, part) for part in parts)
            continue
        for key, value in node._items_raw():
            if isinstance(value, torch.Tensor):
                yield (*prefix, key), value
            elif isinstance(value, _classes.TensorDictBase):
                stack.append(((*prefix, key), value))
            elif getattr(value, "_is_tensorclass", False):
                stack.append(((*prefix, key), value._tensordict))


def _key_str(key: tuple) -> str:
    return repr(key[0]) if len(key) == 1 else repr(key)


class GradMixin:
    """Mixed into TensorDictBase: gradient properties and the autograd entry points."""

    @property
    def requires_grad(self) -> bool:
        """``True`` if any tensor leaf requires gradients.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.zeros(3, requires_grad=True)}}, [3])
            >>> td.requires_grad
            True
        """
        return any(value.requires_grad for _, value in _tensor_leaves(self))

    @property
    def grad(self) -> Any:
        """A TensorDict of the leaves' ``.grad``; leaves without one are left out.

        Returns:
            a TensorDict with the batch size of ``self``, or ``None`` when no leaf
            has a gradient.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, requires_grad=True)}, [3])
            >>> td.grad is None
            True
            >>> (td["a"] * 2).sum().backward()
            >>> td.grad["a"]
            tensor([2., 2., 2.])
        """
        return self.apply(lambda t: t.grad, filter_empty=True)

    def zero_grad(self, set_to_none: bool = True) -> Any:
        """Resets the gradient of every tensor leaf.

        Args:
            set_to_none (bool): set ``.grad`` to ``None`` (default) instead of
                zeroing it in place.

        Returns:
            ``self``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, requires_grad=True)}, [3])
            >>> td["a"].sum().backward()
            >>> td.zero_grad().grad is None
            True
        """
        for _, value in _tensor_leaves(self):
            if value.grad is None:
                continue
            if set_to_none:
                value.grad = None
            else:
                value.grad.detach_()
                value.grad.zero_()
        return self

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Back-propagates from every differentiable leaf in one autograd call.

        Without ``gradient`` every differentiable leaf must be a scalar: the result
        is that of ``sum(leaves).backward()``. With ``gradient`` (a TensorDict with an
        entry for each differentiable leaf), each leaf is weighted by its entry, as
        ``leaf.backward(entry)`` would.

        Args:
            gradient (TensorDictBase, optional): the gradient w.r.t. each leaf.
            retain_graph (bool, optional): keep the graph for another backward.
            create_graph (bool): record the backward pass (higher-order gradients).
            inputs (sequence of Tensor or TensorDictBase, optional): accumulate the
                gradient into these tensors only.

        Raises:
            RuntimeError: no leaf requires gradients; a leaf is not a scalar and no
                ``gradient`` is given ("grad can be implicitly created only for scalar
                outputs"); a gradient's shape differs from its leaf's.
            TypeError: ``gradient`` is not a TensorDict.
            KeyError: ``gradient`` lacks the entry of a differentiable leaf.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> x = torch.ones(3, requires_grad=True)
            >>> TensorDict(l1=x.sum(), l2=(2 * x).sum()).backward()
            >>> x.grad
            tensor([3., 3., 3.])
        """
        if gradient is not None and not isinstance(gradient, _classes.TensorDictBase):
            msg = f"gradient must be a TensorDictBase instance with one entry per differentiable leaf, got {type(gradient).__name__}."
            raise TypeError(msg)
        tensors = []
        grads = []
        for key, value in _tensor_leaves(self):
            if not value.requires_grad:
                continue
            if gradient is None:
                if value.numel() != 1:
                    msg = (
                        "grad can be implicitly created only for scalar outputs: "
                        f"leaf {_key_str(key)} has shape {tuple(value.shape)}; pass a gradient TensorDict."
                    )
                    raise RuntimeError(msg)
                grads.append(torch.ones_like(value, memory_format=torch.preserve_format))
            else:
                grad = gradient._get_any_raw(key if len(key) > 1 else key[0], None)
                if grad is None:
                    msg = f"Missing gradient entry for key {_key_str(key)} (expected shape {tuple(value.shape)})."
                    raise KeyError(msg)
                if grad.shape != value.shape:
                    msg = (
                        f"Mismatch in shape: gradient for key {_key_str(key)} has shape "
                        f"{tuple(grad.shape)}, expected {tuple(value.shape)}."
                    )
                    raise RuntimeError(msg)
                grads.append(grad)
            tensors.append(value)
        if not tensors:
            msg = "backward: the TensorDict has no leaf tensor requiring gradients."
            raise RuntimeError(msg)
        if isinstance(inputs, _classes.TensorDictBase):
            inputs = [value for _, value in _tensor_leaves(inputs)]
        torch.autograd.backward(
            tensors, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs
        )
