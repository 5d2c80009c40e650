"""JSON export and import of TensorDicts (``to_json`` / ``from_json``).

The rows of the JSON document are the entries of the first batch dim: row ``i`` is the
record ``{column: value of td[i]}``. A column is a leaf; a nested key is one column
whose name joins the key's parts with ``separator``. Tensors are written with
``tolist()`` (a leaf with more dims than the batch dim gives a nested list per row),
non-tensor data with its Python value (the same value on every row for
``NonTensorData``, one per row for a ``NonTensorStack``).

tensordict 0.15 goes through pandas for this; this module uses the standard-library
:mod:`json` module only (imported when a method runs), so the written files are the
records orientation of ``pandas.DataFrame.to_json(orient="records")`` and the JSON
Lines of ``lines=True``.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from tensordict import _classes
from tensordict._apply import _exclusive_keys

_Tensor = torch.Tensor


# ---------------------------------------------------------------------- export
def _column_name(key: tuple, separator: str | None) -> str:
    if len(key) == 1:
        return key[0]
    if separator is None:
        msg = (
            f"to_json: the TensorDict has the nested key {key!r}; pass a separator "
            "(e.g. separator='.') to join nested keys into column names."
        )
        raise ValueError(msg)
    return separator.join(key)


def _collect_columns(td: Any, prefix: tuple, n: int, separator: str | None, out: dict) -> None:
    """Adds ``column name -> list of n row values`` for every leaf of ``td`` to ``out``."""
    tdb = _classes.TensorDictBase
    if isinstance(td, _classes.LazyStackedTensorDict):
        lone = _exclusive_keys(td)
        if lone:
            i, key = lone[0]
            msg = (
                f"to_json: key {prefix + (key,)!r} is held by stacked TensorDict {i} of a lazy "
                "stack but not by all of them; a JSON column needs a value on every row."
            )
            raise ValueError(msg)
    for key, value in td._items_raw():
        full = prefix + (key,)
        if getattr(value, "_is_tensorclass", False) and isinstance(getattr(value, "_tensordict", None), tdb):
            value = value._tensordict
        if isinstance(value, _classes.NonTensorStack):
            rows = value.tolist()
        elif isinstance(value, _classes.NonTensorData):
            rows = [value.data] * n
        elif isinstance(value, tdb):
            _collect_columns(value, full, n, separator, out)
            continue
        elif isinstance(value, _Tensor):
            if value.__class__ is not _Tensor and getattr(value.__class__, "_pass_through", False):
                rows = [value.tolist()] * n  # an UnbatchedTensor: the same on every row
            else:
                rows = value.detach().cpu().tolist()
        else:
            rows = [value] * n
        name = _column_name(full, separator)
        if name in out:
            msg = f"to_json: two keys give the column name {name!r}; pass another separator."
            raise ValueError(msg)
        out[name] = rows


def _dump_error(columns: dict, json: Any, kwargs: dict, err: Exception) -> TypeError:
    """The error naming the first column whose values JSON cannot encode."""
    for name, rows in columns.items():
        try:
            json.dumps(rows, **kwargs)
        except (TypeError, ValueError) as sub:
            return TypeError(f"to_json: the values of column {name!r} cannot be written as JSON ({sub}).")
    return TypeError(f"to_json: {err}")


def to_json(td: Any, path: Any, *, separator: str | None = None, lines: bool = False, **kwargs: Any) -> None:
    """Writes ``td`` as JSON records along its first batch dim (see ``TensorDictBase.to_json``)."""
    import json

    if not td.batch_size:
        msg = (
            "to_json: the TensorDict has batch_size []; its first batch dim gives the rows of "
            "the JSON document (use td.unsqueeze(0) for a single row)."
        )
        raise ValueError(msg)
    n = td.batch_size[0]
    columns: dict = {}
    _collect_columns(td, (), n, separator, columns)
    names = list(columns)
    rows = [dict(zip(names, row)) for row in zip(*columns.values())] if names else [{} for _ in range(n)]
    try:
        if lines:
            text = "".join(json.dumps(row, **kwargs) + "\n" for row in rows)
        else:
            text = json.dumps(rows, **kwargs)
    except (TypeError, ValueError) as err:
        raise _dump_error(columns, json, kwargs, err) from None
    if hasattr(path, "write"):
        path.write(text)
        return
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------------- import
def _read_records(path: Any, lines: bool, kwargs: dict) -> list:
    import json

    if hasattr(path, "read"):
        text = path.read()
    else:
        with open(os.fspath(path), encoding="utf-8") as f:
            text = f.read()
    if lines:
        records = []
        for i, line in enumerate(text.splitlines()):
            if line.strip():
                try:
                    records.append(json.loads(line, **kwargs))
                except json.JSONDecodeError as err:
                    msg = f"from_json(lines=True): line {i + 1} is not valid JSON ({err})."
                    raise ValueError(msg) from None
    else:
        data = json.loads(text, **kwargs)
        if isinstance(data, dict):  # columns: {"a": [...]} or pandas' {"a": {"0": ...}}
            records = _columns_to_records(data)
        elif isinstance(data, list):
            records = data
        else:
            msg = f"from_json: expected a list of records or a dict of columns, got a {type(data).__name__}."
            raise TypeError(msg)
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            msg = f"from_json: row {i} is a {type(rec).__name__}, expected a JSON object (a record)."
            raise TypeError(msg)
    return records


def _columns_to_records(data: dict) -> list:
    cols = {k: list(v.values()) if isinstance(v, dict) else v for k, v in data.items()}
    lengths = {k: len(v) for k, v in cols.items() if isinstance(v, list)}
    if len(lengths) != len(cols) or len(set(lengths.values())) > 1:
        msg = f"from_json: a dict of columns needs one list (or index mapping) of the same length per column, got lengths {lengths}."
        raise ValueError(msg)
    n = next(iter(lengths.values()), 0)
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


def _flatten_record(rec: dict, prefix: tuple, out: dict, separator: str | None) -> None:
    for name, value in rec.items():
        key = prefix + (tuple(name.split(separator)) if separator else (name,))
        if isinstance(value, dict):
            _flatten_record(value, key, out, separator)
        else:
            out[key] = value


def _to_leaf(key: tuple, values: list, dtype: Any) -> Any:
    """A tensor for a numeric column (bool, int64, float64 or the given dtype), else a
    ``NonTensorStack`` of the values."""
    kinds = {type(v) for v in values}
    if kinds and kinds <= {bool}:
        out = torch.tensor(values, dtype=torch.bool)
    elif kinds and kinds <= {int}:
        out = torch.tensor(values, dtype=torch.int64)
    elif kinds and kinds <= {int, float, type(None)} and kinds & {int, float}:
        out = torch.tensor([float("nan") if v is None else v for v in values], dtype=torch.float64)
    elif kinds == {list}:
        try:
            out = torch.tensor(values)
        except (TypeError, ValueError, RuntimeError):
            return _classes.NonTensorStack(*values)
        if out.is_floating_point():
            out = out.to(torch.float64)
    else:
        return _classes.NonTensorStack(*values)
    return out if dtype is None else out.to(dtype)


def from_json(
    path: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
    separator: str | None = None,
    dtype: Any = None,
    lines: bool = False,
    **kwargs: Any,
) -> Any:
    """Reads JSON records into a TensorDict; see :meth:`TensorDictBase.from_json`.

    Examples:
        >>> import io
        >>> from tensordict import from_json
        >>> from_json(io.StringIO('{"a": 1}\\n{"a": 2}\\n'), lines=True)["a"]
        tensor([1, 2])
    """
    records = _read_records(path, lines, kwargs)
    n = len(records)
    columns: dict = {}
    for i, rec in enumerate(records):
        flat: dict = {}
        _flatten_record(rec, (), flat, separator)
        if i and flat.keys() != columns.keys():
            missing = [k for k in columns if k not in flat] or [k for k in flat if k not in columns]
            key = missing[0] if missing else next(iter(flat))
            name = key[0] if len(key) == 1 else key
            msg = (
                f"from_json: row {i} does not have the keys of row 0 (key {name!r} is in one "
                "of them only); every record needs the same keys."
            )
            raise KeyError(msg)
        for key, value in flat.items():
            columns.setdefault(key, []).append(value)
    source = {key[0] if len(key) == 1 else key: _to_leaf(key, values, dtype) for key, values in columns.items()}
    td = _classes.TensorDict.from_dict(source, batch_size=[n], device=device)
    if batch_size is not None:
        td.batch_size = batch_size
    elif auto_batch_size or batch_dims is not None:
        td.auto_batch_size_(batch_dims)
    return td
