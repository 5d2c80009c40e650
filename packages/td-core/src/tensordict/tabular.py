"""Tables in and out: Apache Arrow, pandas, Parquet, CSV and JSON.

A table's rows are the first batch dim of a TensorDict and its columns are entries; a
nested key is one column whose name joins the key's parts with ``separator``
(``("obs", "x")`` <-> ``"obs.x"`` with ``separator="."``).

=========================  ==============================================  ==========
read                       write                                           needs
=========================  ==============================================  ==========
:func:`from_arrow`         :func:`to_arrow`                                pyarrow
:func:`from_pandas`        :func:`to_pandas`                               pandas
:func:`from_csv`           :func:`to_csv`                                  pandas
:func:`from_parquet`       :func:`to_parquet`                              pyarrow
:func:`from_json`          :func:`to_json`                                 (stdlib)
=========================  ==============================================  ==========

pyarrow and pandas are optional (td-core extras ``arrow``, ``pandas``, ``tabular``) and
imported only when a function runs; a missing one raises ``ImportError`` with the
``pip install`` line. The same functions are methods of every TensorDict
(``td.to_pandas()``, ``TensorDict.from_csv(path)``, ...) and of tensorclasses. Writes
to a path go to a temporary file in the same folder that replaces the target only once
complete, so a failed write leaves an earlier file intact.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch

from tensordict import _classes
from tensordict._arrow import (
    as_one_dim,
    collect_arrays,
    from_arrow,
    import_pyarrow,
    table_to_source,
    to_arrow,
)
from tensordict._json import from_json, to_json
from tensordict._optional import require
from tensordict._pandas import dataframe_leaves, frame_columns, import_pandas

__all__ = [
    "from_arrow",
    "to_arrow",
    "from_pandas",
    "to_pandas",
    "from_csv",
    "to_csv",
    "from_parquet",
    "to_parquet",
    "from_json",
    "to_json",
    "is_table",
]


# ---------------------------------------------------------------------- helpers
def _cast(leaf: Any, dtype: Any) -> Any:
    if isinstance(leaf, dict):
        return {k: _cast(v, dtype) for k, v in leaf.items()}
    if isinstance(leaf, torch.Tensor) and not leaf.is_nested:
        return leaf.to(dtype)
    return leaf


def _nest(flat: dict, separator: str | None, dtype: Any, feature: str) -> dict:
    """Splits column names on ``separator`` into nested dicts (a clash raises ValueError)."""
    out: dict = {}
    origin: dict = {}
    for name, leaf in flat.items():
        if dtype is not None:
            leaf = _cast(leaf, dtype)
        parts = name.split(separator) if separator else [name]
        node = out
        for i, part in enumerate(parts[:-1]):
            sub = node.setdefault(part, {})
            if not isinstance(sub, dict):
                msg = (
                    f"{feature}: column {name!r} nests under {separator.join(parts[: i + 1])!r}, "  # type: ignore[union-attr]
                    f"which column {origin[id(sub)]!r} holds as a value; rename one of them."
                )
                raise ValueError(msg)
            node = sub
        if parts[-1] in node:
            msg = f"{feature}: column {name!r} clashes with another column once split on {separator!r}."
            raise ValueError(msg)
        node[parts[-1]] = leaf
        origin[id(leaf)] = name
    return out


def _build(
    flat: dict,
    n: int,
    *,
    feature: str,
    auto_batch_size: bool,
    batch_dims: int | None,
    device: Any,
    batch_size: Any,
    separator: str | None,
    dtype: Any,
) -> Any:
    if auto_batch_size and batch_size is not None:
        msg = f"Conflicting batch sizes in {feature}: batch_size and auto_batch_size cannot be both specified."
        raise TypeError(msg)
    source = _nest(flat, separator, dtype, feature)
    td = _classes.TensorDict(source, batch_size=[n], device=device)
    if batch_size is not None:
        td.batch_size = batch_size
    elif auto_batch_size or batch_dims is not None:
        td.auto_batch_size_(batch_dims)
    return td


def _atomic(path: Any, write: Callable[[Any], None]) -> None:
    """Runs ``write(target)``; for a path, into a temp file that then replaces ``path``."""
    if not isinstance(path, (str, os.PathLike)):
        write(path)  # a file object: the caller owns it
        return
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix="-" + base)  # suffix kept: compression inference
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_error(feature: str, path: Any, err: Exception) -> ValueError:
    return ValueError(f"{feature}: cannot read {os.fspath(path) if isinstance(path, os.PathLike) else path!r}: {err}")


def is_table(obj: Any) -> str | None:
    """``"pandas"`` for a pandas DataFrame, ``"arrow"`` for an Arrow table, a record batch or
    any object with ``__arrow_c_stream__`` (a polars DataFrame), else ``None``. Imports
    nothing: the type's module is read.

    Examples:
        >>> is_table({"a": [1]}) is None
        True
    """
    module = type(obj).__module__ or ""
    if module.startswith("pandas.") and hasattr(obj, "columns"):
        return "pandas"
    if module.startswith("pyarrow") and type(obj).__name__ in ("Table", "RecordBatch"):
        return "arrow"
    if hasattr(type(obj), "__arrow_c_stream__") and hasattr(obj, "columns"):
        return "arrow"
    return None


# ---------------------------------------------------------------------- pandas
def from_pandas(
    dataframe: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
    separator: str | None = None,
    dtype: Any = None,
) -> Any:
    """Converts a pandas DataFrame to a TensorDict of batch size ``[len(dataframe)]``.

    Numeric and boolean columns become tensors of the matching dtype (copied),
    categoricals their integer codes, datetimes/timedeltas ``int64`` nanoseconds,
    nullable integer columns with missing values ``float64`` with ``NaN``; strings and
    other object columns (mixed types, lists) a ``NonTensorStack`` of the Python objects,
    missing values as ``None``. The index is not kept. Column names become ``str``.

    Args:
        dataframe (pandas.DataFrame): the table.

    Keyword Args:
        auto_batch_size (bool): extend the batch size over the leading dims every leaf
            shares. Exclusive with ``batch_size``. Defaults to ``False``.
        batch_dims (int, optional): with ``auto_batch_size``, the number of batch dims.
        device (torch.device, optional): the device of the result.
        batch_size (torch.Size, optional): the batch size (it must start with the number
            of rows). Defaults to ``[len(dataframe)]``.
        separator (str, optional): splits column names into nested keys (``"obs.x"`` ->
            ``("obs", "x")`` with ``"."``).
        dtype (torch.dtype, optional): the dtype of every tensor column.

    Raises:
        ImportError: pandas is not installed.
        TypeError: ``auto_batch_size`` together with ``batch_size`` ("Conflicting ..."),
            or ``dataframe`` is not a DataFrame.
        ValueError: two columns with one name, two names that clash once split on
            ``separator``, a nullable boolean column with missing values.

    Examples:
        >>> import pandas as pd
        >>> from tensordict import from_pandas
        >>> td = from_pandas(pd.DataFrame({"obs.x": [1.0, 2.0], "a": [0, 1]}), separator=".")
        >>> td["obs", "x"], td["a"]
        (tensor([1., 2.], dtype=torch.float64), tensor([0, 1]))
    """
    flat, n = dataframe_leaves(dataframe)
    return _build(
        flat, n, feature="from_pandas", auto_batch_size=auto_batch_size, batch_dims=batch_dims,
        device=device, batch_size=batch_size, separator=separator, dtype=dtype,
    )


def to_pandas(td: Any, *, separator: str | None = None) -> Any:
    """Converts a TensorDict with one batch dim to a pandas DataFrame, one column per leaf.

    1-D tensors become numeric columns (bfloat16 as float32), ``NonTensorStack`` entries
    object columns, ``NonTensorData`` a column repeating its value.

    Args:
        td (TensorDictBase): ``batch_size`` ``[n]``; a tensorclass converts through its
            TensorDict.

    Keyword Args:
        separator (str, optional): joins nested keys into column names; required when
            ``td`` has nested keys.

    Returns:
        pandas.DataFrame: ``n`` rows.

    Raises:
        ImportError: pandas is not installed.
        ValueError: a tensor with more than the batch dim ("Cannot convert tensor ..."), a
            nested key without ``separator``, two keys giving one column name, or ``td``
            without exactly one batch dim.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(2), "obs": {"x": torch.zeros(2)}}, [2])
        >>> list(td.to_pandas(separator=".").columns)
        ['a', 'obs.x']
    """
    pd = import_pandas("to_pandas")
    columns, n = frame_columns(td, separator, "to_pandas")
    if not columns:
        return pd.DataFrame(index=pd.RangeIndex(n))
    return pd.DataFrame(columns)


# ---------------------------------------------------------------------- CSV
def from_csv(
    path: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
    separator: str | None = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Any:
    """Reads a CSV file (with :func:`pandas.read_csv`) into a TensorDict, one row per batch element.

    Columns convert as in :func:`from_pandas`. A row with fewer fields than the header
    gets missing values (``NaN``: an integer column becomes ``float64``); a row with more
    fields raises ``ValueError`` naming the file and the line.

    Args:
        path (str, os.PathLike or file object): the CSV file.

    Keyword Args:
        auto_batch_size, batch_dims, device, batch_size, separator, dtype: as in
            :func:`from_pandas` (``separator`` splits column names, not fields).
        **kwargs: passed to :func:`pandas.read_csv` (``sep=";"``, ``usecols=``, ...).

    Raises:
        ImportError: pandas is not installed.
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file cannot be parsed (ragged rows, empty file), naming the file.

    Examples:
        >>> import io
        >>> from tensordict import from_csv
        >>> from_csv(io.StringIO("a,b\\n1,2.5\\n3,4.5\\n"))["b"]
        tensor([2.5000, 4.5000], dtype=torch.float64)
    """
    pd = import_pandas("from_csv")
    try:
        df = pd.read_csv(path, **kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise _read_error("from_csv", path, err) from err
    flat, n = dataframe_leaves(df, "from_csv")
    return _build(
        flat, n, feature="from_csv", auto_batch_size=auto_batch_size, batch_dims=batch_dims,
        device=device, batch_size=batch_size, separator=separator, dtype=dtype,
    )


def to_csv(td: Any, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
    """Writes a TensorDict with one batch dim as CSV (with :meth:`pandas.DataFrame.to_csv`).

    The columns are those of :func:`to_pandas`; the row index is not written unless
    ``index=True`` is passed. A path is written through a temporary file in the same
    folder, so a failed write leaves an earlier file intact.

    Args:
        td (TensorDictBase): ``batch_size`` ``[n]``.
        path (str, os.PathLike or file object): where to write.

    Keyword Args:
        separator (str, optional): joins nested keys into column names.
        **kwargs: passed to :meth:`pandas.DataFrame.to_csv`.

    Raises:
        ImportError: pandas is not installed.
        ValueError: as :func:`to_pandas`.

    Examples:
        >>> import io, torch
        >>> from tensordict import TensorDict
        >>> buf = io.StringIO()
        >>> TensorDict(a=torch.arange(2), batch_size=[2]).to_csv(buf)
        >>> buf.getvalue().splitlines()
        ['a', '0', '1']
    """
    df = to_pandas(td, separator=separator)
    kwargs.setdefault("index", False)
    _atomic(path, lambda target: df.to_csv(target, **kwargs))


# ---------------------------------------------------------------------- Parquet
def from_parquet(
    path: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
    separator: str | None = None,
    dtype: Any = None,
    columns: list[str] | None = None,
    **kwargs: Any,
) -> Any:
    """Reads a Parquet file (with :func:`pyarrow.parquet.read_table`) into a TensorDict.

    Columns convert as in :func:`from_arrow` (numeric columns without copies beyond the
    read; ``struct`` columns as nested TensorDicts; nulls raise ``ValueError``).

    Args:
        path (str, os.PathLike or file object): the Parquet file.

    Keyword Args:
        auto_batch_size, batch_dims, device, batch_size, separator, dtype: as in
            :func:`from_pandas`.
        columns (list of str, optional): read only these columns.
        **kwargs: passed to :func:`pyarrow.parquet.read_table`.

    Raises:
        ImportError: pyarrow is not installed.
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not Parquet or is cut short (naming the file), or a
            column holds nulls.

    Examples:
        >>> import io, torch
        >>> from tensordict import TensorDict, from_parquet
        >>> buf = io.BytesIO()
        >>> TensorDict(a=torch.arange(3), batch_size=[3]).to_parquet(buf)
        >>> _ = buf.seek(0)
        >>> from_parquet(buf)["a"]
        tensor([0, 1, 2])
    """
    pa = import_pyarrow("from_parquet")
    pq = import_pyarrow_module("pyarrow.parquet", "from_parquet")
    if isinstance(path, (str, os.PathLike)) and not os.path.exists(path):
        msg = f"from_parquet: no such file: {os.fspath(path)!r}"
        raise FileNotFoundError(msg)
    try:
        table = pq.read_table(path, columns=columns, **kwargs)
    except (pa.ArrowInvalid, OSError) as err:
        raise _read_error("from_parquet", path, err) from err
    flat, n = table_to_source(table, copy=None, nulls="raise", mask_key=None, feature="from_parquet")
    return _build(
        flat, n, feature="from_parquet", auto_batch_size=auto_batch_size, batch_dims=batch_dims,
        device=device, batch_size=batch_size, separator=separator, dtype=dtype,
    )


def import_pyarrow_module(module: str, feature: str) -> Any:
    """``pyarrow.<sub>`` (e.g. ``pyarrow.parquet``), or ImportError naming the install line."""
    return require(module, feature, "pyarrow", "arrow")


def to_parquet(td: Any, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
    """Writes a TensorDict with one batch dim as Parquet (with :func:`pyarrow.parquet.write_table`).

    The table is :func:`to_arrow`'s: nested TensorDicts become ``struct`` columns, or with
    ``separator`` flat columns named by the joined key; tensors with feature dims become
    ``arrow.fixed_shape_tensor`` columns. A path is written through a temporary file in
    the same folder, so a failed write leaves an earlier file intact.

    Args:
        td (TensorDictBase): ``batch_size`` ``[n]``.
        path (str, os.PathLike or file object): where to write.

    Keyword Args:
        separator (str, optional): joins nested keys into column names.
        **kwargs: passed to :func:`pyarrow.parquet.write_table` (``compression=``, ...).

    Raises:
        ImportError: pyarrow is not installed.
        ValueError, TypeError: as :func:`to_arrow`.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(2), "obs": {"x": torch.zeros(2)}}, [2])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     td.to_parquet(Path(tmp) / "t.parquet", separator=".")
        ...     TensorDict.from_parquet(Path(tmp) / "t.parquet", separator=".")["obs", "x"]
        tensor([0., 0.])
    """
    pa = import_pyarrow("to_parquet")
    pq = import_pyarrow_module("pyarrow.parquet", "to_parquet")
    td = as_one_dim(td, "to_parquet")
    arrays: dict = {}
    collect_arrays(pa, td, (), separator, arrays)
    table = pa.Table.from_arrays(list(arrays.values()), names=list(arrays)) if arrays else pa.table({})
    _atomic(path, lambda target: pq.write_table(table, target, **kwargs))
