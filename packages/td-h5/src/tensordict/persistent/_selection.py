"""Lazy row selections over the leading (batch) dims of HDF5 datasets.

Indexing a :class:`~tensordict.persistent.PersistentTensorDict` reads nothing: it
composes the index into a selection, and a dataset is read (or written) through that
selection only when a key asks for it.

Two representations exist:

* :class:`Selection` keeps one selector per batch dim of the file (an ``int`` that
  removes the dim, a ``range`` or a 1-D ``LongTensor`` of positions) plus a layout
  that says where indexing inserted new axes (``None``). Successive index operations
  with at most one tensor each compose exactly into this form, and h5py can read it
  as hyperslabs plus one sorted fancy index.
* :class:`FlatSel` holds a tensor of flat positions into the file's batch dims, with
  the view's batch shape. Anything torch can index (several tensors at once,
  multi-dim masks) composes into it by indexing that tensor, so its semantics are
  torch's own; reading goes through the sorted unique rows of the first dim.

h5py fancy indexing needs increasing, unique positions: reads sort and de-duplicate,
read, then re-order and repeat with the inverse permutation, so unsorted and repeated
indices give the rows asked for, in the order asked for.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = ["Selection", "FlatSel", "compose", "read_selected", "write_selected"]

_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _check_positions(idx: torch.Tensor, size: int, dim: int) -> torch.Tensor:
    if idx.dtype is torch.bool:
        if idx.shape[0] != size:
            msg = (
                f"boolean index of length {idx.shape[0]} does not match batch dim {dim} of size {size}."
            )
            raise IndexError(msg)
        return idx.nonzero().squeeze(1)
    if idx.dtype not in _INT_DTYPES:
        msg = f"tensors used as indices must be long, int, byte or bool tensors, got {idx.dtype}."
        raise IndexError(msg)
    idx = idx.long()
    if idx.numel():
        lo = int(idx.min())
        hi = int(idx.max())
        if hi >= size or lo < -size:
            bad = hi if hi >= size else lo
            msg = f"index {bad} is out of bounds for batch dim {dim} with size {size}."
            raise IndexError(msg)
        if lo < 0:
            idx = torch.where(idx < 0, idx + size, idx)
    return idx


class Selection:
    """One selector per file batch dim, and the layout of the view's dims.

    Attributes:
        in_shape (torch.Size): the file batch dims the selection covers.
        dims (list): per file dim, an ``int`` (dim removed), a ``range`` (``step > 0``)
            or a 1-D ``int64`` tensor of positions.
        layout (list): per view dim, the file dim it comes from, or ``None`` for an
            axis inserted by indexing with ``None``.
    """

    __slots__ = ("in_shape", "dims", "layout")

    def __init__(self, in_shape: torch.Size, dims: list, layout: list) -> None:
        self.in_shape = in_shape
        self.dims = dims
        self.layout = layout

    @classmethod
    def identity(cls, shape: torch.Size) -> Selection:
        return cls(torch.Size(shape), [range(n) for n in shape], list(range(len(shape))))

    @property
    def out_shape(self) -> torch.Size:
        dims = self.dims
        return torch.Size([1 if o is None else len(dims[o]) for o in self.layout])

    def extend(self, shape: torch.Size) -> Selection:
        """The same selection over ``shape``, whose leading dims are ``in_shape``."""
        n = len(self.in_shape)
        if len(shape) == n:
            return self
        extra = shape[n:]
        return Selection(
            torch.Size(shape),
            self.dims + [range(s) for s in extra],
            self.layout + list(range(n, len(shape))),
        )

    def to_flat(self) -> FlatSel:
        t = torch.arange(math.prod(self.in_shape)).view(self.in_shape)
        for o in reversed(range(len(self.dims))):
            s = self.dims[o]
            if s.__class__ is int:
                t = t.select(o, s)
            elif s.__class__ is range:
                t = t.narrow(o, 0, 0) if not len(s) else t[(slice(None),) * o + (slice(s.start, s[-1] + 1, s.step),)]
            else:
                t = t.index_select(o, s)
        for pos, o in enumerate(self.layout):
            if o is None:
                t = t.unsqueeze(pos)
        return FlatSel(self.in_shape, t)

    def compose(self, index: tuple) -> Selection | FlatSel:
        """Applies a normalised index tuple (no Ellipsis) to the view's dims."""
        n_tensors = 0
        for idx in index:
            if isinstance(idx, torch.Tensor):
                if idx.dtype is torch.bool:
                    if idx.ndim != 1:
                        return self.to_flat().compose(index)
                elif idx.ndim > 1:
                    return self.to_flat().compose(index)
                elif idx.ndim == 0:
                    continue
                n_tensors += 1
            elif idx.__class__ is bool:
                return self.to_flat().compose(index)
        if n_tensors > 1:
            return self.to_flat().compose(index)
        dims = list(self.dims)
        layout: list = []
        sizes = self.out_shape
        old = self.layout
        pos = 0
        for idx in index:
            if idx is None:
                layout.append(None)
                continue
            if pos >= len(old):
                msg = f"too many indices for a view with batch dims {tuple(sizes)}: {index!r}."
                raise IndexError(msg)
            o = old[pos]
            size = sizes[pos]
            if isinstance(idx, torch.Tensor) and idx.ndim == 0 and idx.dtype is not torch.bool:
                idx = int(idx)
            if isinstance(idx, int):
                if not -size <= idx < size:
                    msg = f"index {idx} is out of bounds for batch dim {pos} with size {size}."
                    raise IndexError(msg)
                if idx < 0:
                    idx += size
                if o is not None:
                    s = dims[o][idx]
                    dims[o] = s if s.__class__ is int else int(s)
            elif isinstance(idx, slice):
                if idx.step is not None and idx.step <= 0:
                    msg = f"slice step must be positive, got {idx.step} (as in torch)."
                    raise ValueError(msg)
                if o is None:
                    if len(range(1)[idx]) != 1:
                        return self.to_flat().compose(index)
                else:
                    dims[o] = dims[o][idx]
                layout.append(o)
            elif isinstance(idx, torch.Tensor):
                if o is None:
                    return self.to_flat().compose(index)
                idx = _check_positions(idx, size, pos)
                s = dims[o]
                if s.__class__ is range:
                    dims[o] = idx * s.step + s.start if s.step != 1 or s.start else idx
                else:
                    dims[o] = s[idx]
                layout.append(o)
            else:
                msg = f"unsupported index {idx!r} of type {type(idx).__name__} for a PersistentTensorDict."
                raise TypeError(msg)
            pos += 1
        layout.extend(old[pos:])
        return Selection(self.in_shape, dims, layout)


class FlatSel:
    """Flat positions into the file's batch dims, shaped like the view's batch dims."""

    __slots__ = ("in_shape", "flat")

    def __init__(self, in_shape: torch.Size, flat: torch.Tensor) -> None:
        self.in_shape = in_shape
        self.flat = flat

    @property
    def out_shape(self) -> torch.Size:
        return self.flat.shape

    def extend(self, shape: torch.Size) -> FlatSel:
        n = len(self.in_shape)
        if len(shape) == n:
            return self
        extra = torch.Size(shape[n:])
        m = math.prod(extra)
        flat = (self.flat.unsqueeze(-1) * m + torch.arange(m)).view(*self.flat.shape, *extra)
        return FlatSel(torch.Size(shape), flat)

    def to_flat(self) -> FlatSel:
        return self

    def compose(self, index: tuple) -> FlatSel:
        if len(index) == 1:
            index = index[0]
        return FlatSel(self.in_shape, self.flat[index])


def compose(sel: Selection | FlatSel | None, shape: torch.Size, index: tuple) -> Selection | FlatSel:
    """Composes ``index`` after ``sel`` (``None`` = identity) for a group of batch ``shape``."""
    if sel is None:
        sel = Selection.identity(shape)
    else:
        sel = sel.extend(shape)
    return sel.compose(index)


# ---------------------------------------------------------------------- reading
# Index bookkeeping and gathers use numpy: single-threaded, and the arrays come from
# h5py as numpy anyway (torch's threaded index_select stalls on a busy machine).
def _rows_and_inverse(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Sorted unique positions and the inverse map (``None`` when already increasing)."""
    if pos.size < 2 or bool((pos[1:] > pos[:-1]).all()):
        return pos, None
    rows, inv = np.unique(pos, return_inverse=True)
    return rows, inv.reshape(-1)


def _h5_rows(rows: np.ndarray) -> Any:
    """Sorted unique positions -> a slice when contiguous, else the int64 array h5py wants."""
    first = int(rows[0])
    last = int(rows[-1])
    if last - first + 1 == rows.size:
        return slice(first, last + 1)
    return rows


def read_selected(dset: Any, sel: Selection | FlatSel, to_tensor: Any) -> torch.Tensor:
    """Reads the rows ``sel`` picks from ``dset``; returns ``view_shape + feature_shape``.

    ``to_tensor(numpy_array)`` turns what h5py returns into a tensor (dtype fixes).
    """
    if sel.__class__ is FlatSel:
        return _read_flat(dset, sel, to_tensor)
    h5sel = []
    post = []
    fancy_done = False
    out_dim = 0
    for s in sel.dims:  # type: ignore[union-attr]
        cls = s.__class__
        if cls is int:
            h5sel.append(s)
            continue
        if cls is range:
            if not len(s):
                return _read_empty(dset, sel, to_tensor)  # type: ignore[arg-type]
            h5sel.append(slice(s.start, s[-1] + 1, s.step))
        else:
            if not s.numel():
                return _read_empty(dset, sel, to_tensor)  # type: ignore[arg-type]
            pos = s.numpy()
            if not fancy_done:
                fancy_done = True
                rows, inv = _rows_and_inverse(pos)
                h5sel.append(_h5_rows(rows))
                if inv is not None:
                    post.append((out_dim, inv))
            else:
                lo = int(pos.min())
                h5sel.append(slice(lo, int(pos.max()) + 1))
                post.append((out_dim, pos - lo))
        out_dim += 1
    arr = np.asarray(dset[tuple(h5sel)] if h5sel else dset[()])
    for d, ix in post:
        arr = arr.take(ix, axis=d)
    t = to_tensor(arr)
    for pos, o in enumerate(sel.layout):  # type: ignore[union-attr]
        if o is None:
            t = t.unsqueeze(pos)
    return t


def _read_empty(dset: Any, sel: Selection, to_tensor: Any) -> torch.Tensor:
    return to_tensor(np.empty((*sel.out_shape, *dset.shape[len(sel.in_shape) :]), dtype=dset.dtype))


def _read_flat(dset: Any, sel: FlatSel, to_tensor: Any) -> torch.Tensor:
    in_shape = sel.in_shape
    k = len(in_shape)
    feat = dset.shape[k:]
    out_shape = sel.flat.shape
    pos = sel.flat.reshape(-1).numpy()
    if not pos.size:
        return to_tensor(np.empty((*out_shape, *feat), dtype=dset.dtype))
    uniq, inv = _rows_and_inverse(pos)
    if k == 1:
        data = np.asarray(dset[_h5_rows(uniq)])
        if inv is not None:
            data = data.take(inv, axis=0)
        return to_tensor(data).reshape(*out_shape, *feat)
    inner = math.prod(in_shape[1:])
    c0 = uniq // inner
    rows = c0[np.concatenate(([True], c0[1:] != c0[:-1]))]
    data = np.asarray(dset[_h5_rows(rows)]).reshape(rows.size * inner, *feat)
    local = np.searchsorted(rows, c0) * inner + uniq % inner
    if inv is not None:
        local = local[inv]
    return to_tensor(data.take(local, axis=0)).reshape(*out_shape, *feat)


# ---------------------------------------------------------------------- writing
def _unique_last(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique positions and, for each, the index of its last occurrence in ``pos``."""
    order = np.argsort(pos, kind="stable")
    sorted_pos = pos[order]
    keep = np.ones(sorted_pos.size, dtype=bool)
    keep[:-1] = sorted_pos[1:] != sorted_pos[:-1]
    return sorted_pos[keep], order[keep]


def write_selected(dset: Any, sel: Selection | FlatSel, value: torch.Tensor, to_numpy: Any) -> None:
    """Writes ``value`` (shape ``view_shape + feature_shape``, dataset dtype) at ``sel``.

    Repeated positions keep the last value written to them. ``to_numpy(tensor)``
    turns a tensor into the array h5py stores.
    """
    arr = np.asarray(to_numpy(value))
    if sel.__class__ is FlatSel:
        _write_flat(dset, sel, arr)
        return
    new_axes = tuple(pos for pos, o in enumerate(sel.layout) if o is None)  # type: ignore[union-attr]
    if new_axes:
        arr = arr.squeeze(axis=new_axes)
    if any(len(d) == 0 for d in sel.dims if d.__class__ is not int):  # type: ignore[union-attr]
        return
    n_tensors = sum(1 for d in sel.dims if d.__class__ not in (int, range))  # type: ignore[misc, union-attr]
    if n_tensors <= 1:
        h5sel = []
        out_dim = 0
        for s in sel.dims:  # type: ignore[union-attr]
            cls = s.__class__
            if cls is int:
                h5sel.append(s)
                continue
            if cls is range:
                h5sel.append(slice(s.start, s[-1] + 1, s.step))
            else:
                pos = s.numpy()
                rows, last = _unique_last(pos)
                if rows.size != pos.size or not bool((pos[1:] > pos[:-1]).all()):
                    arr = arr.take(last, axis=out_dim)
                h5sel.append(_h5_rows(rows))
            out_dim += 1
        dset[tuple(h5sel)] = np.ascontiguousarray(arr)
        return
    # several independent position lists: read-modify-write their bounding box
    box_sel = []
    local = []
    for s in sel.dims:  # type: ignore[union-attr]
        cls = s.__class__
        if cls is int:
            box_sel.append(s)
        elif cls is range:
            box_sel.append(slice(s.start, s[-1] + 1))
            local.append(np.arange(0, s[-1] + 1 - s.start, s.step))
        else:
            pos = s.numpy()
            lo = int(pos.min())
            box_sel.append(slice(lo, int(pos.max()) + 1))
            local.append(pos - lo)
    box = np.array(dset[tuple(box_sel)])
    box[np.ix_(*local)] = arr
    dset[tuple(box_sel)] = box


def _write_flat(dset: Any, sel: FlatSel, arr: np.ndarray) -> None:
    in_shape = sel.in_shape
    k = len(in_shape)
    feat = dset.shape[k:]
    pos = sel.flat.reshape(-1).numpy()
    if not pos.size:
        return
    uniq, last = _unique_last(pos)
    values = arr.reshape(pos.size, *feat)[last]
    if k == 1:
        dset[_h5_rows(uniq)] = values
        return
    inner = math.prod(in_shape[1:])
    lo = int(uniq[0]) // inner
    hi = int(uniq[-1]) // inner
    box = np.array(dset[lo : hi + 1])
    flat_box = box.reshape((hi + 1 - lo) * inner, *feat)
    flat_box[uniq - lo * inner] = values
    dset[lo : hi + 1] = flat_box.reshape(box.shape)
