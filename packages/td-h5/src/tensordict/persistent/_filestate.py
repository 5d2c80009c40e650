"""Per-file state shared by a PersistentTensorDict, its views and nested groups, and
batch-size inference from HDF5 metadata (shapes only, no data read)."""

from __future__ import annotations

from typing import Any

import h5py
import torch

from tensordict._errors import batch_mismatch_error
from tensordict.persistent import _h5io as io

__all__ = ["FileState", "infer_batch_size", "validate_members"]


class FileState:
    """What every PersistentTensorDict of one open file shares (views and nested ones)."""

    __slots__ = ("file", "filename", "mode", "bs_cache", "closed", "batch_dims", "use_stored")

    def __init__(self, file: h5py.File, filename: str, mode: str, batch_dims: int | None, use_stored: bool) -> None:
        self.file = file
        self.filename = filename
        self.mode = mode
        self.bs_cache: dict[str, tuple[tuple, bool]] = {}
        self.closed = False
        self.batch_dims = batch_dims
        self.use_stored = use_stored

    def natural(self, group: h5py.Group) -> tuple[tuple, bool]:
        """(largest batch size the group's entries share, whether it has any entry)."""
        key = group.name
        hit = self.bs_cache.get(key)
        if hit is not None:
            return hit
        out = infer_batch_size(group, self.batch_dims, self.use_stored, self.natural)
        self.bs_cache[key] = out
        return out

    def child_bs(self, group: h5py.Group, parent_bs: torch.Size) -> torch.Size:
        bs, _ = self.natural(group)
        n = len(parent_bs)
        if tuple(bs[:n]) == tuple(parent_bs):
            return torch.Size(bs)
        return parent_bs


def infer_batch_size(group: h5py.Group, batch_dims: int | None, use_stored: bool, recurse: Any = None) -> tuple[tuple, bool]:
    """Batch size of ``group`` and whether it has entries, from metadata only.

    With ``use_stored``, the ``_td_batch_size`` attribute written by ``to_h5`` is
    authoritative (a dataset that does not fit it raises when read). Otherwise, or
    without that attribute, it is the longest leading shape shared by the numeric
    datasets and sub-groups (string datasets and attributes do not constrain it), cut
    to ``batch_dims``.
    """
    if use_stored:
        stored = io.stored_batch_size(group)
        if stored is not None:
            return stored, True
    recurse = recurse or (lambda g: infer_batch_size(g, batch_dims, use_stored))
    shapes = []
    for name in group:
        obj = group.get(name)
        if isinstance(obj, h5py.Group):
            bs, content = recurse(obj)
            if content:
                shapes.append(tuple(bs))
        elif isinstance(obj, h5py.Dataset) and io.dataset_kind(obj)[0] in ("tensor", "stack"):
            shapes.append(tuple(obj.shape))
    bs = io.common_prefix(shapes)
    if batch_dims is not None:
        bs = bs[:batch_dims]
    return bs, bool(shapes)


def validate_members(group: h5py.Group, batch_size: torch.Size, prefix: tuple = ()) -> None:
    n = len(batch_size)
    for name in group:
        obj = group.get(name)
        path = prefix + (name,)
        if isinstance(obj, h5py.Group):
            validate_members(obj, batch_size, path)
        elif isinstance(obj, h5py.Dataset) and io.dataset_kind(obj)[0] in ("tensor", "stack"):
            if tuple(obj.shape[:n]) != tuple(batch_size):
                raise batch_mismatch_error(path[0] if len(path) == 1 else path, obj.shape, batch_size)
