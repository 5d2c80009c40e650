"""Batching helpers of ``tensordict.functional``: :func:`group_by` (rows sharing a value),
:func:`unpad_sequence` (the inverse of ``pad_sequence(return_mask=True)``) and
:func:`collate` (a ``DataLoader`` ``collate_fn`` for tensor collections)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch

from tensordict import _classes
from tensordict._keys import NestedKey, unravel_key
from tensordict._leaves import is_non_tensor, is_tensorclass

__all__ = ["collate", "group_by", "unpad_sequence"]


def _key_repr(key: NestedKey) -> str:
    return repr(key)


def group_by(tensordict: Any, key: NestedKey) -> tuple[Any, tuple]:
    """Splits ``tensordict`` along its first batch dim into groups of rows sharing ``tensordict[key]``.

    Args:
        tensordict (TensorDictBase or tensorclass): at least one batch dim.
        key (NestedKey): a tensor entry (rows of more than one value are compared whole,
            as ``torch.unique(dim=0)``) or a non-tensor entry of hashable, sortable values.

    Returns:
        ``(values, groups)``: the sorted unique values (a tensor, or a list for
        non-tensor data) and a tuple with one group per value, each holding the rows with
        that value in their original order (same type as ``tensordict``).

    Raises:
        ValueError: ``tensordict`` has no batch dim.
        KeyError: no entry ``key``.
        TypeError: the entry is a TensorDict, or non-tensor values that cannot be
            hashed or sorted.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(uid=torch.tensor([2, 0, 2, 1, 0]), reward=torch.arange(5.0), batch_size=[5])
        >>> values, groups = group_by(td, "uid")
        >>> values
        tensor([0, 1, 2])
        >>> [group["reward"] for group in groups]
        [tensor([1., 4.]), tensor([3.]), tensor([0., 2.])]
    """
    if not tensordict.batch_dims:
        msg = "group_by groups the rows along the first batch dimension of the tensordict, which has none."
        raise ValueError(msg)
    if key not in tensordict.keys(include_nested=True):
        msg = f"group_by: the tensordict has no entry {_key_repr(key)}."
        raise KeyError(msg)
    entry = tensordict.get(key)
    if isinstance(entry, torch.Tensor):
        rows = entry.reshape(entry.shape[0], -1) if entry.ndim > 1 else entry
        values, inverse = torch.unique(rows, sorted=True, return_inverse=True, dim=0 if entry.ndim > 1 else None)
        if entry.ndim > 1:
            values = values.reshape(values.shape[0], *entry.shape[1:])
        counts = torch.bincount(inverse, minlength=values.shape[0]).tolist()
        order = torch.sort(inverse, stable=True).indices
    elif is_non_tensor(entry):
        items = entry.tolist()
        rows_py = [tuple(_flatten(r)) if isinstance(r, list) else r for r in items]
        try:
            values = sorted(set(rows_py))
        except TypeError as err:
            msg = f"group_by: the values of {_key_repr(key)} cannot be hashed and sorted ({err})."
            raise TypeError(msg) from err
        position = {v: i for i, v in enumerate(values)}
        inverse = torch.tensor([position[r] for r in rows_py], dtype=torch.long)
        counts = torch.bincount(inverse, minlength=len(values)).tolist()
        order = torch.sort(inverse, stable=True).indices
    else:
        msg = f"group_by needs a tensor or non-tensor entry, but {_key_repr(key)} holds a {type(entry).__name__}."
        raise TypeError(msg)
    gathered = tensordict[order]
    return values, tuple(gathered.split(counts, 0))


def _flatten(row: list) -> list:
    out: list = []
    for item in row:
        out.extend(_flatten(item) if isinstance(item, list) else [item])
    return out


def _run(mask_row: torch.Tensor, key: NestedKey) -> tuple[int, int]:
    """``(start, length)`` of the one run of ``True`` along the last dim of ``mask_row``."""
    flat = mask_row.reshape(-1, mask_row.shape[-1]).any(0) if mask_row.ndim > 1 else mask_row
    where = flat.nonzero().flatten().tolist()
    if not where:
        return 0, 0
    start, stop = where[0], where[-1] + 1
    if len(where) != stop - start:
        msg = f"unpad_sequence: the valid positions of {_key_repr(key)} are not contiguous in a row ({flat.tolist()})."
        raise ValueError(msg)
    return start, stop - start


def unpad_sequence(padded: Any, mask: Any = None, *, pad_dim: int = 0) -> Any:
    """Splits a batch padded by ``pad_sequence(..., return_mask=True)`` back into its samples.

    Args:
        padded (TensorDictBase): the samples along the first batch dim.
        mask (TensorDictBase or Tensor, optional): the valid positions: one mask per
            entry (``pad_sequence``'s layout) or one boolean ``[len(padded), max_len]``
            tensor for every entry. ``None`` reads ``padded["masks"]`` (and drops it).

    Keyword Args:
        pad_dim (int): the ``pad_dim`` given to ``pad_sequence``, counted in each
            sample's entries. Defaults to ``0``.

    Returns:
        a lazy stack of the samples (views of ``padded``), each with its original batch
        size; non-tensor entries are kept, and cropped when ``pad_dim`` is a batch dim.

    Raises:
        ValueError: ``padded`` has no batch dim, there is no mask, a tensor mask has the
            wrong shape, or a row's valid positions are not contiguous.
        KeyError: a mask TensorDict lacks an entry of ``padded``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, pad_sequence
        >>> tds = [TensorDict(a=torch.arange(n), batch_size=[n]) for n in (3, 5)]
        >>> samples = unpad_sequence(pad_sequence(tds, return_mask=True))
        >>> samples[0]["a"], [t.batch_size for t in samples.tensordicts]
        (tensor([0, 1, 2]), [torch.Size([3]), torch.Size([5])])
    """
    if not padded.batch_dims:
        msg = "unpad_sequence needs the samples along the first batch dimension of padded, which has none."
        raise ValueError(msg)
    if mask is None:
        if "masks" not in padded.keys():
            msg = "unpad_sequence needs a mask: pass mask=..., or pad with pad_sequence(..., return_mask=True)."
            raise ValueError(msg)
        mask = padded.get("masks")
        padded = padded.exclude("masks")
    n = padded.batch_size[0]
    sample_bs = list(padded.batch_size[1:])
    batched_pad = pad_dim < len(sample_bs)
    leaves = [
        (k, v) for k, v in padded.items(include_nested=True)
        if isinstance(v, torch.Tensor) or is_non_tensor(v)  # nested TensorDicts are rebuilt from their keys
    ]
    if isinstance(mask, torch.Tensor):
        if mask.ndim != 2 or mask.shape[0] != n:
            msg = f"unpad_sequence: a tensor mask must have shape [len(padded), max_len] = [{n}, max_len], got {list(mask.shape)}."
            raise ValueError(msg)
        masks = dict.fromkeys((k for k, _ in leaves), mask)
    else:
        masks = {}
        for k, v in leaves:
            if not isinstance(v, torch.Tensor):
                continue  # non-tensor data has no mask: it follows the tensors' run
            if k not in mask.keys(include_nested=True):
                msg = f"unpad_sequence: the mask tensordict has no mask for the entry {_key_repr(k)}."
                raise KeyError(msg)
            masks[k] = mask.get(k)
    samples = []
    for i in range(n):
        entries = {}
        length = None
        for k, value in leaves:
            if isinstance(value, torch.Tensor):
                start, size = _run(masks[k][i], k)
                entries[k] = value[i].narrow(pad_dim, start, size)
                if length is None:
                    length = (start, size)
            else:
                entries[k] = value[i]
        bs = list(sample_bs)
        if batched_pad and length is not None:
            bs[pad_dim] = length[1]
            start, size = length
            for k, value in entries.items():
                if not isinstance(value, torch.Tensor):
                    entries[k] = value[(slice(None),) * pad_dim + (slice(start, start + size),)]
        sample = _classes.TensorDict(batch_size=bs, device=padded.device)
        for k, value in entries.items():
            sample.set(k, value)
        samples.append(sample)
    return _classes.LazyStackedTensorDict(*samples, stack_dim=0)


def _collate_padded(batch: list, pad_keys: Mapping | None, nested_keys: Sequence | None, mask_key: Any) -> Any:
    first = batch[0]
    pad_keys = {unravel_key(k): v for k, v in (pad_keys or {}).items()}
    nested = [unravel_key(k) for k in (nested_keys or ())]
    both = set(pad_keys) & set(nested)
    if both:
        msg = f"collate: the keys {sorted(both, key=str)} are in both pad_keys and nested_keys."
        raise ValueError(msg)
    if pad_keys and first.batch_dims:
        msg = f"collate(pad_keys=...) needs samples with an empty batch size, got {list(first.batch_size)}."
        raise ValueError(msg)
    if mask_key is not None:
        if not pad_keys:
            msg = "collate got a mask_key but no pad_keys to mask."
            raise ValueError(msg)
        if mask_key in first.keys(include_nested=True):
            msg = f"collate: mask_key {mask_key!r} is an entry of the samples."
            raise ValueError(msg)
    special = [*pad_keys, *nested]
    for sample in batch:
        for k in special:
            if k not in sample.keys(include_nested=True):
                msg = f"collate: a sample has no entry {_key_repr(k)}."
                raise KeyError(msg)
    rest = [sample.exclude(*special) for sample in batch] if special else batch
    try:
        # a stack of tensor collections is one too (``__torch_function__``), not a Tensor
        out = cast("_classes.TensorDictBase", torch.stack(rest))
    except (RuntimeError, ValueError) as err:
        if nested:
            msg = f"collate(nested_keys=...): the other entries do not stack densely ({err}); name every varying entry in pad_keys or nested_keys."
            raise ValueError(msg) from err
        raise
    masks = {}
    for k, value in pad_keys.items():
        seqs = [sample.get(k) for sample in batch]
        longest = max(s.shape[0] for s in seqs)
        stacked = seqs[0].new_full((len(seqs), longest, *seqs[0].shape[1:]), value)
        valid = torch.zeros(len(seqs), longest, dtype=torch.bool, device=seqs[0].device)
        for j, s in enumerate(seqs):
            stacked[j, : s.shape[0]] = s
            valid[j, : s.shape[0]] = True
        out.set(k, stacked)
        masks[k] = valid
    for k in nested:
        out.set(k, torch.nested.as_nested_tensor([sample.get(k) for sample in batch], layout=torch.jagged))
    if mask_key is not None:
        mask_td = _classes.TensorDict(batch_size=out.batch_size, device=out.device)
        for k, valid in masks.items():
            mask_td.set(k, valid)
        out.set(mask_key, mask_td)
    return out


def collate(
    batch: Any,
    *,
    pad_keys: Mapping[NestedKey, float] | None = None,
    nested_keys: Sequence[NestedKey] | None = None,
    mask_key: NestedKey | None = None,
) -> Any:
    """Collates a list of samples into a batch (a ``DataLoader`` ``collate_fn``).

    Tensor collections are stacked densely when their keys and shapes agree and lazily
    otherwise (a tensorclass keeps its type); tensors go through ``torch.stack``;
    mappings and (named) tuples are collated entry by entry; anything else through
    ``torch.utils.data.default_collate``. Anything other than a non-empty list is
    returned as is.

    Keyword Args:
        pad_keys (Mapping[NestedKey, float], optional): entries padded along their first
            dim to the longest sample with the value given, then stacked (samples must
            have an empty batch size).
        nested_keys (sequence of NestedKey, optional): entries stacked as jagged nested
            tensors; the other entries must then stack densely.
        mask_key (NestedKey, optional): where to store the masks of the ``pad_keys``
            entries (``True`` at valid positions). Requires ``pad_keys``.

    Raises:
        KeyError: a sample lacks a ``pad_keys`` / ``nested_keys`` entry.
        ValueError: inconsistent options (see above).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> samples = [(TensorDict(x=torch.zeros(3)), i) for i in range(4)]
        >>> td, label = collate(samples)
        >>> td.batch_size, label
        (torch.Size([4]), tensor([0, 1, 2, 3]))
    """
    if not isinstance(batch, list) or not batch:
        return batch
    first = batch[0]
    options = pad_keys is not None or nested_keys is not None or mask_key is not None
    if isinstance(first, _classes.TensorDictBase) or is_tensorclass(first):
        if options:
            return _collate_padded(batch, pad_keys, nested_keys, mask_key)
        if is_tensorclass(first):
            try:
                return torch.stack(batch)
            except (RuntimeError, ValueError):
                stacked = _classes.LazyStackedTensorDict.maybe_dense_stack([b._tensordict for b in batch])
                return type(first).from_tensordict(stacked)
        return _classes.LazyStackedTensorDict.maybe_dense_stack(batch)
    kwargs: dict[str, Any] = {"pad_keys": pad_keys, "nested_keys": nested_keys, "mask_key": mask_key}
    if isinstance(first, torch.Tensor):
        return torch.stack(batch)
    if isinstance(first, Mapping):
        return {k: collate([b[k] for b in batch], **kwargs) for k in first}
    if isinstance(first, tuple):
        columns = [collate(list(col), **kwargs) for col in zip(*batch, strict=True)]
        return type(first)(*columns) if hasattr(first, "_fields") else tuple(columns)
    from torch.utils.data import default_collate

    return default_collate(batch)
