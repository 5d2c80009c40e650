"""MosaicML Streaming (MDS) datasets from TensorDicts (``td.to_mds``).

Each element of the first batch dim is one sample; a TensorDict without batch dims is
one sample. ``mosaicml-streaming`` is imported when ``to_mds`` runs (td-core extra
``mds``; it pins an older numpy, so the project tests it in its own nox session).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import torch

from tensordict import _classes
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._optional import require

__all__ = ["to_mds"]

_JSON_TYPES = (dict, list, tuple, bool, type(None))


def _encoding(name: str, value: Any) -> str:
    """The MDS encoding of a column, read from its first sample."""
    if isinstance(value, torch.Tensor) or type(value).__name__ == "ndarray":
        return "ndarray"
    if isinstance(value, bool) or isinstance(value, _JSON_TYPES):
        if value is None:
            msg = f"to_mds: the first sample of column {name!r} is None; its type cannot be inferred (pass columns=)."
            raise ValueError(msg)
        return "json"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes):
        return "bytes"
    msg = (
        f"to_mds: column {name!r} holds a {type(value).__name__}, which has no MDS encoding "
        "without pickling; pass columns={name: 'pkl'} to pickle it explicitly."
    )
    raise TypeError(msg)


def _columns_of(td: Any) -> list:
    """``[(name, kind, value)]`` for the entries of ``td`` (kind: tensor, data, stack)."""
    out = []
    for key, value in td.items():
        if getattr(value, "_is_tensorclass", False):
            value = value._tensordict
        if isinstance(value, NonTensorStack):
            out.append((key, "stack", value.tolist()))
        elif isinstance(value, NonTensorData):
            out.append((key, "data", value.data))
        elif isinstance(value, _classes.TensorDictBase):
            msg = (
                f"to_mds: {key!r} is a nested TensorDict; MDS columns are flat: call "
                "td.flatten_keys() before writing (and unflatten_keys() after reading)."
            )
            raise ValueError(msg)
        else:
            out.append((key, "tensor", value.detach().cpu() if isinstance(value, torch.Tensor) else value))
    return out


def _sample(cols: list, i: int | None) -> dict:
    sample = {}
    for key, kind, value in cols:
        if kind == "tensor":
            item = value if i is None else value[i]
            sample[key] = item.item() if isinstance(item, torch.Tensor) and item.dim() == 0 else item.numpy() if isinstance(item, torch.Tensor) else item
        elif kind == "stack":
            sample[key] = value if i is None else value[i]
        else:
            sample[key] = value
    return sample


def _samples(td: Any) -> Iterator[dict]:
    """One ``{column: value}`` per row (a lazy stack along dim 0: one per stacked TensorDict)."""
    if not td.batch_dims:
        yield _sample(_columns_of(td), None)
    elif isinstance(td, _classes.LazyStackedTensorDict) and td.stack_dim == 0:
        for sub in td.tensordicts:
            yield from _samples(sub) if not sub.batch_dims else (_sample(_columns_of(sub[i]), None) for i in range(sub.batch_size[0]))
    else:
        cols = _columns_of(td)
        for i in range(td.batch_size[0]):
            yield _sample(cols, i)


def to_mds(
    td: Any,
    *,
    columns: dict[str, str] | None = None,
    out: Any,
    keep_local: bool = False,
    compression: str | None = None,
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    writer: Any = None,
    finish_writer: bool | None = None,
    **kwargs: Any,
) -> None:
    """Writes ``td`` to a MosaicML Streaming (MDS) dataset, one sample per row.

    Tensors are written as NumPy arrays (``"ndarray"``), 0-dim ones as Python numbers
    (``"int"``/``"float64"``), strings as ``"str"``, bytes as ``"bytes"``, lists, dicts,
    bools as ``"json"``. The encoding of a column not given in ``columns`` is read from
    its first sample. Nested keys are refused: call ``td.flatten_keys()`` first.

    Keyword Args:
        columns (dict of str to str, optional): the MDS encoding of each column.
        out (str or tuple of str): a local folder, a remote location, or
            ``(local, remote)``.
        keep_local (bool): keep the local copy of an uploaded dataset. Defaults to ``False``.
        compression (str, optional): ``"name"`` or ``"name:level"`` (e.g. ``"zstd:7"``).
        hashes (list of str, optional): hash algorithms for the shard files.
        size_limit (int or str, optional): bytes per shard (``None``: one shard).
            Defaults to ``1 << 26``.
        writer (streaming.MDSWriter, optional): write through this writer instead.
        finish_writer (bool, optional): finish ``writer`` afterwards. ``None`` leaves it
            open for a TensorDict without batch dims and finishes it (with a
            ``FutureWarning``) otherwise. A writer made here is always finished.
        **kwargs: passed to ``streaming.MDSWriter``.

    Raises:
        ImportError: ``mosaicml-streaming`` is not installed (the install line is given).
        ValueError: ``td`` is empty, a nested key, a first sample of ``None``.
        TypeError: a column of objects with no MDS encoding (pass ``columns=``).

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.arange(2), name=["x", "y"], batch_size=[2])
        >>> with tempfile.TemporaryDirectory() as tmp:  # doctest: +SKIP
        ...     td.to_mds(out=tmp)
    """
    streaming = require("streaming.base", "to_mds", "mosaicml-streaming", "mds")
    if getattr(td, "_is_tensorclass", False):
        td = td._tensordict
    if td.is_empty():
        msg = "to_mds: the TensorDict has no entries; there is nothing to write."
        raise ValueError(msg)
    samples = _samples(td)
    first = next(samples, None)
    if first is None:
        msg = "to_mds: the TensorDict has no rows (batch_size[0] == 0); there is nothing to write."
        raise ValueError(msg)
    encodings = {k: (columns or {}).get(k) or _encoding(k, v) for k, v in first.items()}
    own = writer is None
    if own:
        writer = streaming.MDSWriter(
            columns=encodings, out=out, keep_local=keep_local, compression=compression,
            hashes=hashes, size_limit=size_limit, **kwargs,
        )
    writer.write(first)
    for sample in samples:
        writer.write(sample)
    if own:
        writer.finish()
        return
    if finish_writer is None and td.batch_dims:
        warnings.warn(
            "to_mds finished the writer it was given (finish_writer=None with batch dims); pass "
            "finish_writer=True or False explicitly: upstream will leave it open from 0.17.",
            FutureWarning, stacklevel=2,
        )
        finish_writer = True
    if finish_writer:
        writer.finish()
