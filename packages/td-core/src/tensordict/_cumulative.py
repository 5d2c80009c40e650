"""Cumulative ops that return values and indices: ``cummin`` and ``cummax``.

``cumsum`` and ``cumprod`` live with the reductions (``_reductions.py``); the two here
give a pair of TensorDicts (``torch.return_types.cummin`` / ``cummax``) built from one
pass over the flat list of leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict._apply import _flatten_tensors, _unflatten_tensors
from tensordict._host import TensorDictHost
from tensordict._reductions import _check_single_dim

__all__ = ["CumulativeMixin"]


def _kept_whole(x: Any) -> bool:
    """An ``UnbatchedTensor``: batch-dim ops leave it as it is."""
    return x.__class__ is not torch.Tensor and getattr(x.__class__, "_pass_through", False)


class _Whole:
    __slots__ = ("values", "indices")

    def __init__(self, x: Any) -> None:
        self.values = self.indices = x


def _cumulative(td: Any, name: str, fn: Callable, dim: int, return_indices: bool) -> Any:
    d = _check_single_dim(td, dim, name)
    leaves: list = []
    spec = _flatten_tensors(td, leaves)
    results = [fn(x, d) if not _kept_whole(x) else _Whole(x) for x in leaves]
    values = _unflatten_tensors(spec, [r.values for r in results])[0]
    if not return_indices:
        return values
    indices = _unflatten_tensors(spec, [r.indices for r in results])[0]
    return getattr(torch.return_types, name)((values, indices))


class CumulativeMixin(TensorDictHost):
    """Mixed into TensorDictBase: ``cummin`` / ``cummax`` along a batch dim."""

    def cummin(self, dim: int, *, return_indices: bool = True) -> Any:
        """Cumulative minimum of every leaf along batch dim ``dim``.

        Args:
            dim (int): the batch dim (negative counts from the last batch dim).

        Keyword Args:
            return_indices (bool): return ``torch.return_types.cummin(values,
                indices)`` (default) instead of the values alone.

        Returns:
            TensorDicts with the batch size of ``self``.

        Raises:
            IndexError: ``dim`` is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([3.0, 1.0, 2.0])}, [3])
            >>> td.cummin(0).values["a"]
            tensor([3., 1., 1.])
            >>> td.cummin(0).indices["a"]
            tensor([0, 1, 1])
        """
        return _cumulative(self, "cummin", torch.cummin, dim, return_indices)

    def cummax(self, dim: int, *, return_indices: bool = True) -> Any:
        """Cumulative maximum of every leaf along batch dim ``dim``.

        Args:
            dim (int): the batch dim (negative counts from the last batch dim).

        Keyword Args:
            return_indices (bool): return ``torch.return_types.cummax(values,
                indices)`` (default) instead of the values alone.

        Returns:
            TensorDicts with the batch size of ``self``.

        Raises:
            IndexError: ``dim`` is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.tensor([1.0, 3.0, 2.0])}, [3])
            >>> td.cummax(0, return_indices=False)["a"]
            tensor([1., 3., 3.])
        """
        return _cumulative(self, "cummax", torch.cummax, dim, return_indices)
