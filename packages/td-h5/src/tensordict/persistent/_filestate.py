"""Per-file state shared by a PersistentTensorDict, its views and nested groups, and
batch-size inference from HDF5 metadata (shapes only, no data read)."""

from __future__ import annotations

from typing import Any

import h5py
import torch

from tensordict.ext import batch_mismatch_error
from tensordict.persistent import _h5io as io
from tensordict.persistent import _links
from tensordict.persistent._nodes import is_dataset, is_group

__all__ = ["FileState", "infer_batch_size", "validate_members"]


class FileState:
    """What every PersistentTensorDict of one open file shares (views and nested ones)."""

    __slots__ = ("file", "filename", "mode", "bs_cache", "hidden_cache", "closed", "batch_dims", "use_stored", "backend", "to_attr")

    def __init__(self, file: h5py.File, filename: str, mode: str, batch_dims: int | None, use_stored: bool) -> None:
        self.file = file
        self.filename = filename
        self.mode = mode
        self.bs_cache: dict[str, tuple[tuple, bool]] = {}
        #: group path -> (member names when scanned, {name: why it is not read})
        self.hidden_cache: dict[str, tuple[frozenset, dict[str, str]]] = {}
        self.closed = False
        self.batch_dims = batch_dims
        self.use_stored = use_stored
        #: "h5" or "zarr"; ``to_attr(key, value)`` turns a non-tensor value into what ``group.attrs`` takes
        self.backend = "h5"
        self.to_attr = io.python_to_attr

    def natural(self, group: h5py.Group) -> tuple[tuple, bool]:
        """(largest batch size the group's entries share, whether it has any entry)."""
        key = group.name
        hit = self.bs_cache.get(key)
        if hit is not None:
            return hit
        out = infer_batch_size(group, self.batch_dims, self.use_stored, self.natural, self.hidden)
        self.bs_cache[key] = out
        return out

    @property
    def what(self) -> str:
        """How messages name the storage: ``"HDF5 file"`` or ``"Zarr store"``."""
        return "Zarr store" if self.backend == "zarr" else "HDF5 file"

    def changed(self) -> None:
        """Forgets what was inferred from the file's structure (after a structural write)."""
        self.bs_cache.clear()
        self.hidden_cache.clear()
        if self.backend == "zarr":  # cached listings and the store's consolidated metadata
            self.file.on_change()
            self.file.consolidate()

    def hidden(self, group: h5py.Group, names: list | None = None) -> dict[str, str]:
        """``{name: reason}`` for the members of ``group`` that are not read (see ``_links``).

        Cached per group and rescanned when its member names change (``names``: the
        current names when the caller already listed them).
        """
        if names is None:
            names = list(group.keys())
        key = group.name
        hit = self.hidden_cache.get(key)
        if hit is not None and len(hit[0]) == len(names) and hit[0].issuperset(names):
            return hit[1]
        out = _links.scan(group, names)
        self.hidden_cache[key] = (frozenset(names), out)
        return out

    def refused(self, group: h5py.Group, name: str) -> str | None:
        """Why the member ``name`` of ``group`` is not read, or ``None``."""
        hit = self.hidden_cache.get(group.name)
        if hit is not None and name in hit[0]:
            return hit[1].get(name)
        if not _links.has_link(group, name):
            return None
        return self.hidden(group).get(name)

    def child_bs(self, group: h5py.Group, parent_bs: torch.Size) -> torch.Size:
        bs, _ = self.natural(group)
        n = len(parent_bs)
        if tuple(bs[:n]) == tuple(parent_bs):
            return torch.Size(bs)
        return parent_bs


def infer_batch_size(
    group: h5py.Group, batch_dims: int | None, use_stored: bool, recurse: Any = None, hidden: Any = None
) -> tuple[tuple, bool]:
    """Batch size of ``group`` and whether it has entries, from metadata only.

    With ``use_stored``, the ``_td_batch_size`` attribute written by ``to_h5`` is
    authoritative (a dataset that does not fit it raises when read). Otherwise, or
    without that attribute, it is the longest leading shape shared by the numeric
    datasets and sub-groups (string datasets and attributes do not constrain it), cut
    to ``batch_dims``. Members that are not read (``hidden(group, names)``, see
    ``_links``) do not count.
    """
    if use_stored:
        stored = io.stored_batch_size(group)
        if stored is not None:
            return stored, True
    recurse = recurse or (lambda g: infer_batch_size(g, batch_dims, use_stored, None, hidden))
    names = list(group.keys())
    skip = hidden(group, names) if hidden is not None else _links.scan(group, names)
    shapes = []
    for name in names:
        if name in skip:
            continue
        obj = group.get(name)
        if is_group(obj):
            bs, content = recurse(obj)
            if content:
                shapes.append(tuple(bs))
        elif is_dataset(obj) and io.dataset_kind(obj)[0] in ("tensor", "stack"):
            shapes.append(tuple(obj.shape))
    bs = io.common_prefix(shapes)
    if batch_dims is not None:
        bs = bs[:batch_dims]
    return bs, bool(shapes)


def validate_members(group: h5py.Group, batch_size: torch.Size, prefix: tuple = ()) -> None:
    n = len(batch_size)
    names = list(group.keys())
    skip = _links.scan(group, names)
    for name in names:
        if name in skip:
            continue
        obj = group.get(name)
        path = prefix + (name,)
        if is_group(obj):
            validate_members(obj, batch_size, path)
        elif is_dataset(obj) and io.dataset_kind(obj)[0] in ("tensor", "stack"):
            if tuple(obj.shape[:n]) != tuple(batch_size):
                raise batch_mismatch_error(path[0] if len(path) == 1 else path, obj.shape, batch_size)
