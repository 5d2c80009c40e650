"""Tensorclasses for tests that cross process boundaries.

A class that a test sends to another process (``init_remote``/``from_remote_init``,
the collectives) must be importable by name in every process; these are.
``tensordict.testing.MyDistData`` is the same class (upstream's name for it).
"""

from __future__ import annotations

import torch

from tensordict.tensorclass._decorator import TensorClass

__all__ = ["MyDistData"]


class MyDistData(TensorClass):
    """Two tensor fields, ``a`` and ``b``, for distributed round trips.

    Examples:
        >>> import torch
        >>> from tensordict.tensorclass.testing import MyDistData
        >>> MyDistData(a=torch.ones(3), b=torch.zeros(3, 2), batch_size=[3]).b.shape
        torch.Size([3, 2])
    """

    a: torch.Tensor
    b: torch.Tensor
