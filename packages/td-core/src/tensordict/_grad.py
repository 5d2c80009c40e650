"""Autograd on TensorDicts: ``requires_grad``, ``grad``, ``backward``, ``zero_grad``.

``backward`` gathers the differentiable leaves (and their gradients) into two flat
lists and makes one ``torch.autograd.backward`` call, so the graph is walked once
whatever the number of leaves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _classes
from tensordict._host import TensorDictHost

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["GradMixin", "autograd_grad"]


def _tensor_leaves(td: Any) -> Iterator[tuple[tuple, torch.Tensor]]:
    """``(nested_key, tensor)`` for every tensor leaf (non-tensor data is skipped); a
    lazy stack gives the leaves of the TensorDicts it stacks (the real autograd leaves)."""
    stack: list[tuple[tuple, Any]] = [((), td)]
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


def _paired_leaves(td: Any, other: Any) -> Iterator[tuple[tuple, torch.Tensor, Any]]:
    """``(nested_key, leaf, other_leaf)`` for every tensor leaf of ``td`` (as
    :func:`_tensor_leaves`), ``other_leaf`` being the entry of ``other`` at the same
    place (``None`` when ``other`` is ``None``). Where ``td`` is a lazy stack, ``other``
    is split along the stack dim so each stacked TensorDict meets its own slice.
    ``other_leaf`` is ``None`` where ``other`` has no such entry.
    """
    todo: list[tuple[tuple, Any, Any]] = [((), td, other)]
    while todo:
        prefix, node, peer = todo.pop()
        if isinstance(node, _classes.LazyStackedTensorDict):
            parts = node.tensordicts
            peers = [None] * len(parts) if peer is None else peer.unbind(node.stack_dim)
            todo.extend((prefix, part, p) for part, p in zip(parts, peers))
            continue
        for key, value in node._items_raw():
            sub = None
            if peer is not None and (
                isinstance(value, (torch.Tensor, _classes.TensorDictBase)) or getattr(value, "_is_tensorclass", False)
            ):
                sub = peer.get(key, None)
            if isinstance(value, torch.Tensor):
                yield (*prefix, key), value, sub
            elif isinstance(value, _classes.TensorDictBase):
                todo.append(((*prefix, key), value, sub))
            elif getattr(value, "_is_tensorclass", False):
                todo.append(((*prefix, key), value._tensordict, None if sub is None else sub._tensordict))


def _grad_like(leaf: torch.Tensor, grad: Any) -> Any:
    """``grad`` as the kind of leaf it belongs to (an ``UnbatchedTensor`` keeps its
    ``batch_size``, so the TensorDict of gradients accepts it as the leaf)."""
    if grad is not None and getattr(leaf, "_pass_through", False) and not isinstance(grad, type(leaf)):
        return type(leaf)(grad, leaf.batch_size)  # type: ignore[attr-defined]
    return grad


def autograd_grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> Any:
    """``torch.autograd.grad`` when ``outputs`` or ``inputs`` is a TensorDict.

    The differentiable leaves of ``outputs`` (weighted by the matching entries of
    ``grad_outputs``, a TensorDict shaped like ``outputs``) are differentiated with
    respect to the leaves of ``inputs`` in one autograd call. A TensorDict ``inputs``
    gives a TensorDict of gradients with its structure (a lazy stack gives a lazy
    stack); leaves that do not require gradients are left out.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> x = TensorDict(a=torch.ones(3), b=torch.zeros(3), batch_size=[3]).requires_grad_()
        >>> y = x * 2
        >>> torch.autograd.grad(y, x, torch.ones_like(y))["a"]
        tensor([2., 2., 2.])
    """
    is_td = _classes.TensorDictBase
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    if grad_outputs is not None and not isinstance(grad_outputs, (tuple, list)):
        grad_outputs = (grad_outputs,)
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        msg = f"torch.autograd.grad: got {len(grad_outputs)} grad_outputs for {len(outputs)} outputs."
        raise RuntimeError(msg)
    flat_out = []
    flat_grad = []
    for i, out in enumerate(outputs):
        weight = None if grad_outputs is None else grad_outputs[i]
        if isinstance(out, is_td):
            for key, value, grad in _paired_leaves(out, weight):
                if value.requires_grad:
                    if weight is not None and grad is None:
                        msg = f"Missing grad_outputs entry for key {_key_str(key)} (expected shape {tuple(value.shape)})."
                        raise KeyError(msg)
                    flat_out.append(value)
                    flat_grad.append(grad)
        elif isinstance(weight, is_td):
            msg = f"torch.autograd.grad: grad_outputs[{i}] is a TensorDict but outputs[{i}] is a {type(out).__name__}."
            raise TypeError(msg)
        else:
            flat_out.append(out)
            flat_grad.append(weight)
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    flat_in: list[Any] = []
    spans = []
    for inp in inputs:
        start = len(flat_in)
        if isinstance(inp, is_td):
            flat_in.extend(value for _, value in _tensor_leaves(inp) if value.requires_grad)
        else:
            flat_in.append(inp)
        spans.append((start, len(flat_in)))
    if not flat_in:
        msg = "torch.autograd.grad: the inputs hold no leaf tensor requiring gradients."
        raise RuntimeError(msg)
    grads = torch.autograd.grad(
        flat_out,
        flat_in,
        None if grad_outputs is None else flat_grad,
        retain_graph=retain_graph,
        create_graph=create_graph,
        only_inputs=only_inputs,
        allow_unused=allow_unused,
        is_grads_batched=is_grads_batched,
        materialize_grads=materialize_grads,
    )
    result: list[Any] = []
    for inp, (start, stop) in zip(inputs, spans):
        if isinstance(inp, is_td):
            by_id = {id(leaf): grad for leaf, grad in zip(flat_in[start:stop], grads[start:stop])}
            result.append(inp.apply(lambda t, by_id=by_id: _grad_like(t, by_id.get(id(t))), filter_empty=True))
        else:
            result.append(grads[start])
    if len(result) == 1 and isinstance(inputs[0], is_td):
        return result[0]  # one TensorDict in, one TensorDict of gradients out
    return tuple(result)


class GradMixin(TensorDictHost):
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
            a TensorDict with the batch size of ``self`` (locked if ``self`` is), or
            ``None`` when no leaf has a gradient.

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
        out = self.apply(lambda t: _grad_like(t, t.grad), filter_empty=True)
        if out is not None and self.is_locked and not out.is_locked:
            out.lock_()  # as ``data``: the view of a locked TensorDict is locked
        return out

    def zero_grad(self, set_to_none: bool = True) -> Self:
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
        for key, value, grad in _paired_leaves(self, gradient):
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
