"""Padding the batch dims of a TensorDict: :func:`pad` (also ``TensorDict.pad``).

``functional.pad_sequence`` reuses the helpers for non-tensor stacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F  # noqa: N812

from tensordict import _classes
from tensordict._deep import trampoline
from tensordict._nontensor import NonTensorData, NonTensorStack

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._base import TensorDictBase

__all__ = ["pad"]


def _torch_pad_spec(pad_size: Sequence[int], ndim: int) -> list[int]:
    """``F.pad`` wants (last dim left, last dim right, ...); ours go from dim 0 forward."""
    n = len(pad_size) // 2
    spec = [0, 0] * (ndim - n)
    for d in reversed(range(n)):
        spec += [pad_size[2 * d], pad_size[2 * d + 1]]
    return spec


def _pad_non_tensor(value: Any, pad_size: Sequence[int], new_bs: torch.Size) -> Any:
    """Padded slots hold ``None``: a ``NonTensorData`` that grows becomes a
    ``NonTensorStack`` (its object in the old slots); one that is only cropped stays."""
    if isinstance(value, NonTensorData):
        if not any(p > 0 for p in pad_size):
            return value._rebuild(new_bs)  # MetaData and typed data keep their class
        items = [value.data] * value.batch_size.numel()
    else:
        items = value._items
    index = torch.arange(value.batch_size.numel()).view(value.batch_size)
    index = F.pad(index, _torch_pad_spec(pad_size, index.ndim), value=-1)
    flat = index.reshape(-1).tolist()
    return NonTensorStack._from_flat([None if i < 0 else items[i] for i in flat], index.shape, value.device)


def _assign_stack(old: NonTensorStack, new: Any) -> NonTensorStack:
    """Makes the ``NonTensorStack`` ``old`` hold ``new``'s objects (identity kept)."""
    items = [new.data] * new.batch_size.numel() if isinstance(new, NonTensorData) else list(new._items)
    old._items = items
    old._batch_size = new.batch_size
    return old


def _pad(
    td: TensorDictBase, pad_size: Sequence[int], value: float, new_bs: torch.Size
) -> TensorDictBase:
    """The padded copy of ``td`` (nested TensorDicts included, at any depth)."""
    return trampoline(_pad_node, td, pad_size, value, new_bs)


def _pad_node(td: TensorDictBase, pad_size: Sequence[int], value: float, new_bs: torch.Size) -> Any:
    """One node of :func:`_pad`, run by :func:`~tensordict._deep.trampoline`: it yields the
    arguments of each nested TensorDict and is sent back its padded copy."""
    source = {}
    for key, leaf in td._items_raw():
        if getattr(leaf.__class__, "_pass_through", False):
            source[key] = leaf  # an UnbatchedTensor is not padded: the same leaf is kept
        elif isinstance(leaf, torch.Tensor):
            source[key] = F.pad(leaf, _torch_pad_spec(pad_size, leaf.ndim), value=value)
        elif isinstance(leaf, _classes.TensorDictBase):
            sub_bs = torch.Size((*new_bs, *leaf.batch_size[len(new_bs) :]))
            source[key] = yield (leaf, pad_size, value, sub_bs)
        else:
            source[key] = _pad_non_tensor(leaf, pad_size, new_bs)
    return _classes.TensorDict._new_unsafe(source, new_bs, td.device, td.names if td._has_names() else None)


def _assign_in_place(td: TensorDictBase, new: TensorDictBase, pad_left: Sequence[int] = ()) -> TensorDictBase:
    """Makes ``td`` hold ``new``'s leaves and batch size; nested TensorDicts keep their
    identity (each is updated the same way, from a work list: any depth), the old leaves
    are released."""
    work: list = [(td, new, pad_left)]
    while work:
        node, padded, left = work.pop()
        _assign_node(node, padded, left, work)
    return td


def _assign_node(td: TensorDictBase, new: TensorDictBase, pad_left: Sequence[int], work: list) -> None:
    """One node of :func:`_assign_in_place`; the nested pairs to update go on ``work``."""
    if type(td) is _classes.LazyStackedTensorDict:
        # the stack keeps its identity: it now stacks the padded TensorDicts
        if td.is_locked:
            msg = "pad(inplace=True): the TensorDict is locked; unlock it first."
            raise RuntimeError(msg)
        sd = td.stack_dim
        left = pad_left[sd] if sd < len(pad_left) else 0
        old_tds = td.tensordicts
        parts = list(new.unbind(sd))
        for j, part in enumerate(parts):
            i = j - left
            if 0 <= i < len(old_tds) and type(old_tds[i]) is _classes.TensorDict:
                work.append((old_tds[i], part, ()))  # the stacked TensorDict keeps its identity
                parts[j] = old_tds[i]
        td.tensordicts = parts
        td._batch_size = new.batch_size
        td._bs_cache = None
        td._fast = None
        return
    if type(td) is not _classes.TensorDict:
        if td.is_locked:
            msg = "pad(inplace=True): the TensorDict is locked; unlock it first."
            raise RuntimeError(msg)
        for key in list(td.keys()):
            td.del_(key)
        td.batch_size = new.batch_size
        td.update(new)
        return
    store = td._tensordict
    for key, value in new._items_raw():
        old = store.get(key)
        if type(old) is _classes.TensorDict and isinstance(value, _classes.TensorDictBase):
            work.append((old, value, ()))
        elif type(old) is NonTensorStack and isinstance(value, (NonTensorStack, NonTensorData)):
            _assign_stack(old, value)
        else:
            store[key] = value
    if len(new.batch_size) != len(td.batch_size):
        td._names = None
    td._batch_size = new.batch_size


def pad(
    tensordict: TensorDictBase,
    pad_size: Sequence[int],
    value: float = 0.0,
    inplace: bool = False,
    safe: bool = True,
) -> TensorDictBase:
    """Pads every leaf along the batch dims with a constant, in a new TensorDict.

    Args:
        tensordict (TensorDictBase, NonTensorStack or NonTensorData): what to pad.
        pad_size (sequence of int): ``(dim0_left, dim0_right, dim1_left, dim1_right, ...)``,
            from the first batch dim forward; an even number of ints, at most
            ``2 * batch_dims``. Negative values crop.
        value (float, optional): the fill value. Defaults to ``0.0``. Padded slots of a
            ``NonTensorStack`` hold ``None``.
        inplace (bool, optional): make ``tensordict`` itself hold the padded leaves (its
            nested TensorDicts keep their identity; the old leaves are released) and
            return it. Defaults to ``False``.
        safe (bool, optional): check before anything is padded that no batch dim is
            cropped below 0. Defaults to ``True``.

    Returns:
        a TensorDict whose batch size grew by the padding (leaves keep their dtype),
        ``tensordict`` itself with ``inplace=True``.

    Raises:
        RuntimeError: ``pad_size`` has an odd length or more than ``2 * batch_dims``
            entries, or a batch dim would get a negative output size, or
            ``inplace=True`` for a ``NonTensorData`` (padding makes it a stack).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, pad
        >>> td = TensorDict({"a": torch.ones(3, 4, 1), "b": torch.ones(3, 4, 1, 1)}, batch_size=[3, 4])
        >>> padded = pad(td, [0, 1, 0, 2], value=0.0)
        >>> padded.batch_size, padded["a"].shape, padded["b"].shape
        (torch.Size([4, 6]), torch.Size([4, 6, 1]), torch.Size([4, 6, 1, 1]))
    """
    pad_size = [int(p) for p in pad_size]
    nd = tensordict.batch_dims
    non_tensor = isinstance(tensordict, (NonTensorData, NonTensorStack))
    if non_tensor and inplace and isinstance(tensordict, NonTensorData):
        msg = (
            "pad(inplace=True) cannot preserve the identity of a NonTensorData: padded slots hold None, "
            "so it must become a NonTensorStack. Pad it out of place."
        )
        raise RuntimeError(msg)
    if len(pad_size) % 2 or len(pad_size) > 2 * nd:
        msg = (
            f"pad: pad_size {pad_size} must have an even length of at most 2 * batch_dims "
            f"= {2 * nd} (batch_size {tuple(tensordict.batch_size)})."
        )
        raise RuntimeError(msg)
    new_bs = list(tensordict.batch_size)
    for d in range(len(pad_size) // 2):
        new_bs[d] += pad_size[2 * d] + pad_size[2 * d + 1]
        if new_bs[d] < 0 and safe:
            msg = (
                f"pad: pad_size {pad_size} gives a negative output size {new_bs[d]} for batch dim {d} "
                f"of size {tensordict.batch_size[d]} (it crops below 0)."
            )
            raise RuntimeError(msg)
    if non_tensor:
        out = _pad_non_tensor(tensordict, pad_size, torch.Size(new_bs))
        return _assign_stack(tensordict, out) if inplace else out  # type: ignore[arg-type, return-value]
    out = _pad(tensordict, pad_size, value, torch.Size(new_bs))
    return _assign_in_place(tensordict, out, pad_size[::2]) if inplace else out
