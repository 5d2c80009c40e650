"""Shape ops that torch spells several ways: ``swapaxes``/``swapdims``, ``fliplr``,
``flipud``, ``rot90``, ``tile``, ``broadcast_to`` and ``atleast_1d/2d/3d``.

Each acts on the batch dims only and goes through the shape engine
(``_batch_transform``) or an existing shape op, so nested TensorDicts, non-tensor
leaves and lazy stacks behave as they do for ``transpose``, ``flip`` and ``expand``.
``shape_alias_torch_table()`` gives the ``__torch_function__`` entries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._host import TensorDictHost
from tensordict._pad import pad as _pad_fn

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["ShapeAliasMixin", "shape_alias_torch_table"]


def _need_dims(td: Any, n: int, name: str) -> None:
    if td.batch_dims < n:
        msg = f"{name} requires at least {n} batch dims, got batch_size {tuple(td.batch_size)}."
        raise RuntimeError(msg)


def _norm(dim: int, nd: int, name: str) -> int:
    if not -nd <= dim < nd:
        msg = f"{name}: dim {dim} is out of range for {nd} batch dims."
        raise IndexError(msg)
    return dim % nd


class ShapeAliasMixin(TensorDictHost):
    """Mixed into TensorDictBase: torch's alias spellings of batch-dim shape ops."""

    def swapaxes(self, dim0: int, dim1: int) -> TensorDictBase:
        """Swaps batch dims ``dim0`` and ``dim1`` (same as :meth:`transpose`).

        Args:
            dim0 (int): a batch dim.
            dim1 (int): the batch dim to swap it with.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3])
            >>> td.swapaxes(0, 1)["a"].shape
            torch.Size([3, 2, 4])
        """
        return self.transpose(dim0, dim1)

    def swapdims(self, dim0: int, dim1: int) -> TensorDictBase:
        """Alias of :meth:`swapaxes`.

        Args:
            dim0 (int): a batch dim.
            dim1 (int): the batch dim to swap it with.
        """
        return self.transpose(dim0, dim1)

    def fliplr(self) -> TensorDictBase:
        """Flips batch dim 1 (left/right), as ``torch.fliplr``.

        Raises:
            RuntimeError: fewer than 2 batch dims.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.arange(4).view(2, 2)}, [2, 2])
            >>> td.fliplr()["a"]
            tensor([[1, 0],
                    [3, 2]])
        """
        _need_dims(self, 2, "fliplr")
        return self.flip(1)

    def flipud(self) -> TensorDictBase:
        """Flips batch dim 0 (up/down), as ``torch.flipud``.

        Raises:
            RuntimeError: no batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.arange(3)}, [3]).flipud()["a"]
            tensor([2, 1, 0])
        """
        _need_dims(self, 1, "flipud")
        return self.flip(0)

    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> TensorDictBase:
        """Rotates the plane of batch dims ``dims`` by ``k`` quarter turns, as ``torch.rot90``.

        Args:
            k (int): number of quarter turns (from the first dim towards the second).
            dims (pair of int): two batch dims.

        Raises:
            RuntimeError: fewer than 2 batch dims.
            IndexError: a dim is not a batch dim.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3, 5)}, [2, 3])
            >>> td.rot90().batch_size
            torch.Size([3, 2])
        """
        _need_dims(self, 2, "rot90")
        nd = self.batch_dims
        d0, d1 = (_norm(d, nd, "rot90") for d in dims)
        if d0 == d1:
            msg = f"rot90: dims must differ, got {tuple(dims)}."
            raise RuntimeError(msg)
        return self._batch_transform(lambda t, n: torch.rot90(t, k, (d0, d1)))

    def tile(self, dims: Sequence[int] | int, *more: int) -> TensorDictBase:
        """Repeats the batch as ``torch.tile`` repeats a tensor of shape ``batch_size``.

        Args:
            dims (sequence of int): repetitions per batch dim; a shorter sequence is
                padded with 1 on the left, a longer one adds leading batch dims.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3])
            >>> td.tile((2,)).batch_size
            torch.Size([2, 6])
            >>> td.tile((2, 1))["a"].shape
            torch.Size([4, 3, 4])
        """
        reps = (dims, *more) if isinstance(dims, int) else tuple(dims)
        nd = self.batch_dims
        if len(reps) < nd:
            reps = (1,) * (nd - len(reps)) + tuple(reps)

        def fn(t: torch.Tensor, n: int) -> torch.Tensor:
            return t.repeat(*reps, *([1] * (t.ndim - n)))

        return self._batch_transform(fn)

    def broadcast_to(self, shape: Sequence[int]) -> TensorDictBase:
        """Expands the batch to ``shape`` (same as :meth:`expand`).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(3, 2)}, [3]).broadcast_to((4, 3))["a"].shape
            torch.Size([4, 3, 2])
        """
        return self.expand(*shape)

    def pad(self, pad_size: Sequence[int], value: float = 0.0, inplace: bool = False, safe: bool = True) -> TensorDictBase:
        """Pads the batch dims with ``value`` (see :func:`tensordict.pad`).

        Args:
            pad_size (sequence of int): ``(dim0_left, dim0_right, dim1_left, ...)``.
            value (float): the fill value. Defaults to ``0.0``.
            inplace (bool): make ``self`` hold the padded leaves and return it.
            safe (bool): check for a negative output size before padding anything.

        Raises:
            RuntimeError: a malformed ``pad_size``, or a batch dim would get a negative
                output size.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict({"a": torch.ones(3, 4)}, [3, 4])
            >>> td.pad([0, 1, 0, 2]).batch_size
            torch.Size([4, 6])
            >>> td.pad([1, 0], inplace=True) is td, td.batch_size
            (True, torch.Size([4, 4]))
        """
        return _pad_fn(self, pad_size, value, inplace=inplace, safe=safe)  # type: ignore[arg-type]

    def _atleast(self, n: int) -> Any:
        nd = self.batch_dims
        if nd >= n:
            return self
        lead = (1,) * (n - nd)
        return self._batch_transform(lambda t, k: t.reshape(*lead, *t.shape))

    def atleast_1d(self) -> TensorDictBase:
        """``self`` if it has a batch dim, else a view with ``batch_size=[1]``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(3)}, []).atleast_1d().batch_size
            torch.Size([1])
        """
        return self._atleast(1)

    def atleast_2d(self) -> TensorDictBase:
        """``self`` if it has 2 batch dims or more, else a view with leading dims of size 1.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(3)}, [3]).atleast_2d().batch_size
            torch.Size([1, 3])
        """
        return self._atleast(2)

    def atleast_3d(self) -> TensorDictBase:
        """``self`` if it has 3 batch dims or more, else a view with leading dims of size 1.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict({"a": torch.zeros(2, 3)}, [2, 3]).atleast_3d().batch_size
            torch.Size([1, 2, 3])
        """
        return self._atleast(3)


def _atleast_fn(n: int) -> Callable:
    def impl(*tds: Any) -> Any:
        if len(tds) == 1 and isinstance(tds[0], (list, tuple)):
            tds = tuple(tds[0])
        out = [td._atleast(n) for td in tds]
        return out[0] if len(out) == 1 else tuple(out)

    return impl


def shape_alias_torch_table() -> dict:
    """``torch.fn -> impl`` for the alias shape ops (merged into ``__torch_function__``)."""
    return {
        torch.swapaxes: lambda td, axis0, axis1: td.swapaxes(axis0, axis1),
        torch.swapdims: lambda td, dim0, dim1: td.swapdims(dim0, dim1),
        torch.moveaxis: lambda td, source, destination: td.moveaxis(source, destination),
        torch.fliplr: lambda td: td.fliplr(),
        torch.flipud: lambda td: td.flipud(),
        torch.rot90: lambda td, k=1, dims=(0, 1): td.rot90(k, dims),
        torch.tile: lambda td, dims: td.tile(dims),
        torch.broadcast_to: lambda td, size: td.broadcast_to(size),
        torch.atleast_1d: _atleast_fn(1),
        torch.atleast_2d: _atleast_fn(2),
        torch.atleast_3d: _atleast_fn(3),
    }
