"""Free functions on TensorDicts: ``pad``, ``pad_sequence``, ``merge_tensordicts``,
``make_tensordict`` and ``dense_stack_tds`` (also reachable as ``tensordict.<name>``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from tensordict._base import TensorDictBase
from tensordict._convert import from_dict
from tensordict._grouping import collate, group_by, unpad_sequence
from tensordict._keys import NestedKey, unravel_key
from tensordict._lazy_funcs import dense_stack_tds as _dense_stack_tds
from tensordict._leaves import is_leaf_nontensor
from tensordict._nontensor import _stack_non_tensor
from tensordict._pad import _pad_non_tensor, pad
from tensordict._td import TensorDict

__all__ = [
    "collate",
    "dense_stack_tds",
    "group_by",
    "make_tensordict",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
    "unpad_sequence",
]


# ---------------------------------------------------------------------- pad
# ---------------------------------------------------------------------- pad_sequence
def _padding_for(padding_value: Any, key: NestedKey) -> float:
    if not isinstance(padding_value, Mapping):
        return padding_value
    for candidate in (key, unravel_key(key), (key,) if isinstance(key, str) else None):
        if candidate is not None and candidate in padding_value:
            return padding_value[candidate]
    return 0.0


def pad_sequence(
    list_of_tensordicts: Sequence[TensorDictBase],
    pad_dim: int = 0,
    padding_value: float | Mapping[NestedKey, float] = 0.0,
    out: TensorDictBase | None = None,
    device: Any = None,
    return_mask: bool | NestedKey = False,
    padding_side: str = "right",
) -> TensorDictBase:
    """Pads TensorDicts to a common length along ``pad_dim`` and stacks them.

    Args:
        list_of_tensordicts (sequence of TensorDictBase): the TensorDicts, with the
            same keys. Their leaves may differ in size along ``pad_dim`` only.
        pad_dim (int, optional): the dim to pad, counted from the first dim of every
            leaf (a batch dim when ``pad_dim < batch_dims``; a negative value counts
            from the end of the batch dims). Defaults to ``0``.
        padding_value (float or dict, optional): the fill value, or a dict of fill
            values per (nested) key (keys absent from it are padded with ``0.0``).
            Defaults to ``0.0``.
        out (TensorDictBase, optional): written in place with the result if given.
        device (torch.device, optional): device of the result.
        return_mask (bool or NestedKey, optional): if ``True``, a ``"masks"`` entry
            (or this key) holds a TensorDict of bool masks, one per leaf, of shape
            ``[N, *leaf_shape[:pad_dim], max_len]``: ``True`` where values are real.
        padding_side (str, optional): ``"right"`` (the default) pads after the values,
            ``"left"`` before them.

    Returns:
        a TensorDict of batch size ``[N, *batch_size]`` (the padded batch dim, if any,
        is the maximum length).

    Raises:
        RuntimeError: empty list, or batch sizes that differ outside ``pad_dim``.
        KeyError: the key sets differ (the keys are named).
        ValueError: a negative ``pad_dim`` with no batch dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, pad_sequence
        >>> tds = [TensorDict({"a": torch.zeros(3, 8), "b": torch.zeros(6, 8)}),
        ...        TensorDict({"a": torch.zeros(5, 8), "b": torch.zeros(6, 8)})]
        >>> padded = pad_sequence(tds, return_mask=True)
        >>> padded["a"].shape, padded["masks", "a"].shape, padded["masks", "a"].sum().item()
        (torch.Size([2, 5, 8]), torch.Size([2, 5]), 8)
    """
    tds = list(list_of_tensordicts)
    if not tds:
        msg = "pad_sequence expects a non-empty sequence of TensorDicts."
        raise RuntimeError(msg)
    tc_cls = type(tds[0]) if getattr(tds[0], "_is_tensorclass", False) else None
    if tc_cls is not None:
        # tensorclass instances: padded as TensorDicts (non-tensor fields included), rebuilt after
        tds = [td.to_tensordict() if getattr(td, "_is_tensorclass", False) else td for td in tds]
    nd = tds[0].batch_dims
    if padding_side not in ("left", "right"):
        msg = f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}."
        raise ValueError(msg)
    left = padding_side == "left"
    if pad_dim < 0:
        if nd == 0:
            msg = f"pad_sequence: a negative pad_dim ({pad_dim}) counts from the end of the batch dims, but batch_size is []."
            raise ValueError(msg)
        pad_dim += nd
    ref = tds[0].batch_size
    for i, td in enumerate(tds[1:], 1):
        bs = td.batch_size
        if len(bs) != nd or any(a != b for j, (a, b) in enumerate(zip(ref, bs)) if j != pad_dim):
            msg = (
                f"pad_sequence: TensorDict {i} has batch_size {tuple(bs)}, which differs from "
                f"{tuple(ref)} (TensorDict 0) outside pad_dim={pad_dim}."
            )
            raise RuntimeError(msg)
    keys = list(tds[0].keys(True, True, is_leaf=is_leaf_nontensor))
    key_set = set(keys)
    for i, td in enumerate(tds[1:], 1):
        other = set(td.keys(True, True, is_leaf=is_leaf_nontensor))
        if other != key_set:
            msg = f"pad_sequence: TensorDict {i} has different keys (missing {sorted(map(str, key_set - other))}, extra {sorted(map(str, other - key_set))})."
            raise KeyError(msg)
    batched_pad = pad_dim < nd
    if batched_pad:
        max_bs = max(td.batch_size[pad_dim] for td in tds)
        new_bs = list(ref)
        new_bs[pad_dim] = max_bs
    else:
        new_bs = list(ref)
    result_bs = torch.Size((len(tds), *new_bs))
    result = TensorDict({}, batch_size=result_bs, device=device)
    masks = TensorDict({}, batch_size=result_bs, device=device) if return_mask else None
    for key in keys:
        values = [td._get_any_raw(key) for td in tds]
        first = values[0]
        if not isinstance(first, torch.Tensor):
            result.set(key, _stack_non_tensor_padded(values, pad_dim, batched_pad, new_bs, left))
            continue
        for v in values:
            if v.ndim <= pad_dim:
                msg = f"pad_sequence: key {key!r} has shape {tuple(v.shape)}, with no dim {pad_dim} to pad."
                raise RuntimeError(msg)
        length = max(v.shape[pad_dim] for v in values)
        padded = []
        mask_rows = []
        for v in values:
            extra = length - v.shape[pad_dim]
            spec = [0, 0] * (v.ndim - pad_dim - 1) + ([extra, 0] if left else [0, extra])
            padded.append(F.pad(v, spec, value=_padding_for(padding_value, key)) if extra else v)
            if masks is not None:
                m = torch.zeros((*v.shape[:pad_dim], length), dtype=torch.bool, device=v.device)
                if left:
                    m[..., extra:] = True
                else:
                    m[..., : v.shape[pad_dim]] = True
                mask_rows.append(m)
        result.set(key, torch.stack(padded, 0))
        if masks is not None:
            masks.set(key, torch.stack(mask_rows, 0))
    if masks is not None:
        mask_key = "masks" if return_mask is True else unravel_key(return_mask)  # type: ignore[arg-type]
        result.set(mask_key, masks)
    elif tc_cls is not None and out is None:
        return tc_cls.from_tensordict(result)  # type: ignore[attr-defined]
    if out is not None:
        out.update(result)
        return out
    return result


def _stack_non_tensor_padded(values: list, pad_dim: int, batched_pad: bool, new_bs: list, left: bool = False) -> Any:
    if batched_pad:
        widened = []
        for v in values:
            extra = new_bs[pad_dim] - v.batch_size[pad_dim]
            spec = [0, 0] * v.batch_dims
            spec[2 * pad_dim + (0 if left else 1)] = extra
            widened.append(_pad_non_tensor(v, spec, torch.Size(new_bs)) if extra else v)
        values = widened
    return _stack_non_tensor(values, 0)


# ---------------------------------------------------------------------- merge
def merge_tensordicts(
    *tensordicts: TensorDictBase,
    callback_exist: Callable[..., Any] | Mapping[NestedKey, Callable[..., Any]] | None = None,
) -> TensorDictBase:
    """Merges TensorDicts into a new one (the first one's batch size and device).

    The result holds every leaf of every TensorDict. A leaf present in several of them
    takes its value from the first one that has it, unless ``callback_exist`` applies.

    Args:
        *tensordicts (TensorDictBase): the TensorDicts to merge (at least one).

    Keyword Args:
        callback_exist (callable or dict of NestedKey to callable, optional): for a leaf
            present in every TensorDict, ``callback(*values)`` gives the merged value.
            A dict gives a callback per nested key (keys without one take the first value).

    Returns:
        a new TensorDict.

    Raises:
        ValueError: no TensorDict given.
        RuntimeError: a leaf does not fit the first TensorDict's batch size.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, merge_tensordicts
        >>> td0 = TensorDict({"a": {"b0": 0}, "common": 0})
        >>> td1 = TensorDict({"a": {"b1": 1}, "common": 1})
        >>> td = merge_tensordicts(td0, td1, callback_exist=lambda *v: torch.stack(list(v)))
        >>> list(td.keys(True, True)), td["common"]
        ([('a', 'b0'), ('a', 'b1'), 'common'], tensor([0, 1]))
    """
    if not tensordicts:
        msg = "merge_tensordicts needs at least one TensorDict."
        raise ValueError(msg)
    first = tensordicts[0]
    out = TensorDict({}, batch_size=first.batch_size, device=first.device)
    counts: dict = {}
    for td in tensordicts:
        for key in td.keys(True, True, is_leaf=is_leaf_nontensor):
            counts[key] = counts.get(key, 0) + 1
    n = len(tensordicts)
    for key in counts:
        values = [td._get_any_raw(key) for td in tensordicts if key in td.keys(True, True, is_leaf=is_leaf_nontensor)]
        callback = (
            callback_exist.get(key) if isinstance(callback_exist, Mapping) else callback_exist
        )
        if callback is not None and counts[key] == n:
            unwrapped = [TensorDictBase._unwrap_leaf(v) for v in values]
            out.set(key, callback(*unwrapped))
        else:
            out.set(key, values[0])
    return out


# ---------------------------------------------------------------------- constructors
def make_tensordict(
    input_dict: Mapping | None = None,
    batch_size: Any = None,
    device: Any = None,
    auto_batch_size: bool | None = None,
    **kwargs: Any,
) -> TensorDict:
    """Builds a TensorDict from a dict and/or keyword arguments (``TensorDict.from_dict``).

    As in tensordict 0.15, the batch size is ``[]`` unless ``batch_size`` is given or
    ``auto_batch_size=True``.

    Args:
        input_dict (dict, optional): entries (nested dicts and tuple keys allowed); they
            replace ``**kwargs`` entries of the same key.
        batch_size (torch.Size or sequence of int, optional): the batch size.
        device (torch.device, optional): leaves are moved there.
        auto_batch_size (bool, optional): with no ``batch_size``, use the largest
            leading shape that every entry shares (each nested TensorDict gets its own).
            Defaults to ``None``, which does not.
        **kwargs: more entries (str keys).

    Raises:
        RuntimeError: a value does not start with ``batch_size``.

    Examples:
        >>> import torch
        >>> from tensordict import make_tensordict
        >>> make_tensordict(a=torch.zeros(3, 4), b=torch.zeros(3)).batch_size
        torch.Size([])
        >>> td = make_tensordict({"a": torch.zeros(3), "b": {"c": torch.zeros(3, 4)}}, auto_batch_size=True)
        >>> td.batch_size, td["b"].batch_size
        (torch.Size([3]), torch.Size([3, 4]))
    """

    if isinstance(input_dict, TensorDictBase):
        # its nested TensorDicts are read as the dicts they hold, so that the batch size
        # is computed through them (as for a nested dict)
        input_dict = input_dict.to_dict()
    data = dict(kwargs)
    data.update(input_dict if input_dict is not None else {})
    auto_batch_size = bool(auto_batch_size) and batch_size is None
    return from_dict(data, batch_size=batch_size, device=device, auto_batch_size=auto_batch_size)


def dense_stack_tds(
    td_list: Sequence[TensorDictBase] | TensorDictBase, dim: int | None = None
) -> TensorDictBase:
    """Densely stacks TensorDicts (or the TensorDicts of a lazy stack); see
    ``tensordict.LazyStackedTensorDict``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, dense_stack_tds
        >>> tds = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)]
        >>> dense_stack_tds(tds).batch_size
        torch.Size([3, 2])
    """
    if dim is None:
        return _dense_stack_tds(td_list)
    return _dense_stack_tds(td_list, dim)
