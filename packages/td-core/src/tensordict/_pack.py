"""Packing every leaf into one feature tensor: ``td.pack()`` and :class:`PackLayout`
(whose ``unpack`` rebuilds the TensorDict from views of the packed tensor)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, cast

import torch

from tensordict import _classes
from tensordict._host import TensorDictHost
from tensordict._keys import NestedKey

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["PackLayout", "PackMixin"]


def _as_size(shape: Any) -> torch.Size:
    return shape if isinstance(shape, torch.Size) else torch.Size(shape)


@dataclasses.dataclass(frozen=True)
class PackLayout:
    """Where each leaf lives in a tensor made by :meth:`~tensordict.TensorDictBase.pack`.

    Frozen, hashable and compared by value (a module can cache it).

    Attributes:
        keys (tuple of NestedKey): the leaf keys in column order (sorted keys).
        shapes (tuple of torch.Size): each leaf's shape after the batch dims.
        dim (int): the packed dim, counted from the end (negative).
        nested (tuple): ``(key, batch_shape, cls)`` of each nested collection, with its
            batch shape after the root's batch dims and its tensorclass (or ``None``).
        device (torch.device or None): the packed TensorDict's device.
        cls (type or None): the packed tensorclass, or ``None``.
        offsets (tuple of int): the first column of each leaf.
        numel (int): the number of columns.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), batch_size=[5])
        >>> flat, layout = td.pack()
        >>> layout.keys, layout.offsets, layout.numel
        (('p', 'v'), (0, 1), 4)
        >>> layout.unpack(flat[:2])["v"].shape
        torch.Size([2, 3])
    """

    keys: tuple
    shapes: tuple
    dim: int = -1
    nested: tuple = ()
    device: torch.device | None = None
    cls: type | None = None
    offsets: tuple = dataclasses.field(init=False)
    numel: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        shapes = tuple(_as_size(s) for s in self.shapes)
        nested = tuple((k, _as_size(bs), c) for k, bs, c in self.nested)
        offsets, total = [], 0
        for shape in shapes:
            offsets.append(total)
            total += math.prod(shape)
        object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "shapes", shapes)
        object.__setattr__(self, "nested", nested)
        object.__setattr__(self, "offsets", tuple(offsets))
        object.__setattr__(self, "numel", total)

    def unpack(self, flat: torch.Tensor) -> TensorDictBase:
        """Rebuilds the TensorDict from ``flat`` (its leaves are views of ``flat``).

        Args:
            flat (torch.Tensor): ``numel`` entries along ``dim``; the other dims are the
                batch size of the result (they may differ from the packed TensorDict's).

        Returns:
            a TensorDict (an instance of ``cls`` for a packed tensorclass).

        Raises:
            ValueError: ``flat`` does not have ``numel`` entries along ``dim``.
        """
        if flat.ndim < -self.dim or flat.shape[self.dim] != self.numel:
            msg = f"PackLayout.unpack: expected {self.numel} entries along dim {self.dim}, got a tensor of shape {list(flat.shape)}."
            raise ValueError(msg)
        cols = flat.movedim(self.dim, -1)
        bs = cols.shape[:-1]
        out = _classes.TensorDict(batch_size=bs, device=self.device)
        for key, sub_bs, _ in self.nested:
            out.set(key, _classes.TensorDict(batch_size=(*bs, *sub_bs), device=self.device))
        for key, shape, offset in zip(self.keys, self.shapes, self.offsets, strict=True):
            out.set(key, cols[..., offset : offset + math.prod(shape)].reshape(*bs, *shape))
        for key, _, cls in reversed(self.nested):
            if cls is not None:
                out.set(key, cls.from_tensordict(out.get(key)))
        # ``cls`` is a tensorclass: ``from_tensordict`` is added by ``@tensorclass``
        return cast(Any, self.cls).from_tensordict(out) if self.cls is not None else out


def _tensorclass_of(value: Any) -> type | None:
    return type(value) if getattr(type(value), "_is_tensorclass", False) else None


class PackMixin(TensorDictHost):
    """``pack``: every leaf in one ``(*batch_size, F)`` tensor."""

    def pack(self, dim: int = -1, *, layout: PackLayout | None = None) -> tuple[torch.Tensor, PackLayout]:
        """Packs every tensor leaf, flattened after the batch dims, into one tensor.

        The leaves are concatenated in ``keys(True, True, sort=True)`` order, giving a
        contiguous tensor of shape ``(*batch_size, F)`` for ``dim=-1`` (``F`` the sum of
        the leaves' feature sizes); :meth:`PackLayout.unpack` inverts it.

        Args:
            dim (int, optional): where the packed dim goes in the result (among the
                ``batch_dims + 1`` dims). Defaults to ``-1``.

        Keyword Args:
            layout (PackLayout, optional): a layout to follow (same keys and shapes
                required); ``None`` builds one.

        Returns:
            ``(packed tensor, layout)``.

        Raises:
            TypeError: a non-tensor entry, or leaves of different dtypes or devices.
            KeyError: the leaves differ from ``layout``'s keys.
            ValueError: a leaf shape or ``dim`` differs from ``layout``'s.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), nested={"s": torch.ones(5, 3, 3)}, batch_size=[5])
            >>> flat, layout = td.pack()
            >>> flat.shape, layout.keys
            (torch.Size([5, 13]), (('nested', 's'), 'p', 'v'))
        """
        nb = self.batch_dims
        if not -(nb + 1) <= dim <= nb:
            msg = f"pack: dim {dim} is out of range for a result of {nb + 1} dims."
            raise IndexError(msg)
        dim = dim - (nb + 1) if dim >= 0 else dim
        keys, shapes, leaves, nested = [], [], [], []
        dtype = device = None
        for key, value in self.items(include_nested=True, leaves_only=False, sort=True):
            if _classes.is_tensor_collection(value) and not isinstance(value, torch.Tensor):
                if getattr(value, "_is_non_tensor", False) or isinstance(value, (_classes.NonTensorData, _classes.NonTensorStack)):
                    msg = f"Cannot pack the non-tensor entry {key!r}. Drop the non-tensor entries with filter_non_tensor_data() first."
                    raise TypeError(msg)
                nested.append((key, value.batch_size[nb:], _tensorclass_of(value)))
                continue
            if not isinstance(value, torch.Tensor):
                msg = f"Cannot pack the non-tensor entry {key!r}. Drop the non-tensor entries with filter_non_tensor_data() first."
                raise TypeError(msg)
            if dtype is None:
                dtype, device = value.dtype, value.device
            elif value.dtype != dtype:
                msg = f"Cannot pack leaves of different dtypes: {dtype} and {value.dtype} at {key!r}. Cast the tensordict first, e.g. with float()."
                raise TypeError(msg)
            elif value.device != device:
                msg = f"Cannot pack leaves on different devices: {device} and {value.device} at {key!r}."
                raise TypeError(msg)
            keys.append(key)
            shapes.append(value.shape[nb:])
            leaves.append(value)
        nested.sort(key=lambda entry: len(entry[0]) if isinstance(entry[0], tuple) else 1)
        if layout is not None:
            _check_layout(layout, keys, shapes, dim)
        else:
            layout = PackLayout(tuple(keys), tuple(shapes), dim, tuple(nested), self.device, _tensorclass_of(self))
        bs = self.batch_size
        flat = torch.cat([leaf.reshape(*bs, -1) for leaf in leaves], -1) if leaves else torch.empty(*bs, 0)
        if dim != -1:
            flat = flat.movedim(-1, dim).contiguous()
        return flat, layout


def _check_layout(layout: PackLayout, keys: list[NestedKey], shapes: list, dim: int) -> None:
    if tuple(keys) != layout.keys:
        msg = f"The leaves of the tensordict differ from the keys of the layout: {keys} vs {list(layout.keys)}."
        raise KeyError(msg)
    for key, shape, expected in zip(keys, shapes, layout.shapes, strict=True):
        if shape != expected:
            msg = f"pack: the leaf {key!r} has feature shape {list(shape)}, the layout has {list(expected)}."
            raise ValueError(msg)
    if dim != layout.dim:
        msg = f"pack: dim {dim} differs from the layout's dim {layout.dim}."
        raise ValueError(msg)
