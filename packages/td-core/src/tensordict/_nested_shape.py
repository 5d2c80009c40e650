"""The shape of any tensor leaf, strided nested tensors included.

A nested tensor of the strided layout (``torch.nested.nested_tensor(...)`` without
``layout=torch.jagged``) has no ``.shape``: reading it raises ``NestedTensorImpl doesn't
support sizes``. Its regular dims still answer ``size(dim)``; the ragged ones are shown
as ``-1``, as tensordict 0.15 does (``f32[-1, 2]``)."""

from __future__ import annotations

import torch

__all__ = ["leaf_shape"]


def leaf_shape(tensor: torch.Tensor) -> torch.Size:
    """``tensor.shape``, or for a strided nested tensor its sizes with ``-1`` for ragged dims.

    Examples:
        >>> import torch
        >>> leaf_shape(torch.zeros(2, 3))
        torch.Size([2, 3])
    """
    try:
        return tensor.shape
    except RuntimeError:
        if not tensor.is_nested:
            raise
    sizes = []
    for dim in range(tensor.dim()):
        try:
            sizes.append(tensor.size(dim))
        except RuntimeError:  # a ragged dim
            sizes.append(-1)
    return torch.Size(sizes)
