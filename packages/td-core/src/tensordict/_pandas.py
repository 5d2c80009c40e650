"""pandas DataFrames to and from the leaves of a TensorDict (column by column).

``dataframe_leaves`` turns each column into a leaf: numeric and boolean columns become
tensors (a copy: pandas' arrays are read-only under copy-on-write), categoricals their
integer codes, datetimes and timedeltas ``int64`` nanoseconds, nullable integer columns
with missing values ``float64`` with ``NaN``; strings, mixed and other object columns a
``NonTensorStack`` of the Python objects (missing values as ``None``).
``frame_columns`` is the reverse for one-dim TensorDicts. pandas is imported when they run.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict import _classes
from tensordict._arrow import _Ctx, arrow_column, as_one_dim, host_tensor, import_pyarrow
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._optional import require

__all__ = ["import_pandas", "dataframe_leaves", "frame_columns"]


def import_pandas(feature: str) -> Any:
    """``pandas``, or ImportError naming the install line."""
    return require("pandas", feature, "pandas", "pandas")


def _objects(series: Any) -> NonTensorStack:
    values = series.to_numpy(dtype=object, na_value=None).tolist()
    return NonTensorStack._from_flat(values, [len(values)])


def _series_leaf(pd: Any, series: Any, name: str) -> Any:
    import numpy as np  # pandas depends on numpy

    dt = series.dtype
    if isinstance(dt, pd.CategoricalDtype):
        return torch.from_numpy(series.cat.codes.to_numpy(copy=True))
    if isinstance(dt, np.dtype):
        if dt.kind in "iufcb":
            return torch.from_numpy(series.to_numpy(copy=True))
        if dt.kind in "mM":
            return torch.from_numpy(series.to_numpy(copy=True).view("int64"))
        return _objects(series)
    if isinstance(dt, pd.ArrowDtype):
        pa = import_pyarrow("from_pandas")
        return arrow_column(pa.array(series), (name,), _Ctx(pa, None, "fill", len(series)))
    numpy_dtype = getattr(dt, "numpy_dtype", None)
    if numpy_dtype is not None and numpy_dtype.kind in "iufb":
        missing = int(series.isna().sum())
        if not missing:
            return torch.from_numpy(series.to_numpy(dtype=numpy_dtype))
        if numpy_dtype.kind == "b":
            msg = (
                f"from_pandas: the boolean column {name!r} has {missing} missing value(s), which a "
                "bool tensor cannot hold; fill them first (df.fillna(...)) or cast the column."
            )
            raise ValueError(msg)
        target = numpy_dtype if numpy_dtype.kind == "f" else np.dtype("float64")
        return torch.from_numpy(series.to_numpy(dtype=target, na_value=np.nan))
    return _objects(series)


def dataframe_leaves(df: Any, feature: str = "from_pandas") -> tuple:
    """``({column name: leaf}, number of rows)`` of a DataFrame (names made ``str``)."""
    pd = import_pandas(feature)
    if not isinstance(df, pd.DataFrame):
        msg = f"{feature} expects a pandas.DataFrame, got {type(df).__name__}."
        raise TypeError(msg)
    out: dict = {}
    for col, series in df.items():
        name = col if isinstance(col, str) else str(col)
        if name in out:
            msg = f"{feature}: the DataFrame has two columns named {name!r}; rename one first."
            raise ValueError(msg)
        out[name] = _series_leaf(pd, series, name)
    return out, len(df)


def _column_name(full: tuple, separator: str | None) -> str:
    if len(full) == 1:
        return full[0]
    if separator is None:
        msg = (
            f"to_pandas: the TensorDict has the nested key {full!r}; pass a separator "
            "(e.g. separator='.') to join nested keys into column names."
        )
        raise ValueError(msg)
    return separator.join(full)


def _tensor_column(value: torch.Tensor, full: tuple) -> Any:
    if value.is_nested or value.dim() != 1:
        shape = "nested" if value.is_nested else value.shape
        msg = (
            f"Cannot convert tensor with shape {shape} at key {full if len(full) > 1 else full[0]!r} to a "
            "single DataFrame column. Only 1D tensors (matching the batch size) are supported."
        )
        raise ValueError(msg)
    value = host_tensor(value)
    if value.dtype == torch.bfloat16:
        value = value.float()
    return value.numpy()


def _collect(td: Any, prefix: tuple, n: int, separator: str | None, out: dict) -> None:
    for key, value in td.items():
        full = (*prefix, key)
        if getattr(value, "_is_tensorclass", False):
            value = value._tensordict
        if isinstance(value, NonTensorStack):
            column: Any = value.tolist()
        elif isinstance(value, NonTensorData):
            column = [value.data] * n
        elif isinstance(value, _classes.TensorDictBase):
            _column_name(full + ("",), separator)  # raises without a separator
            _collect(value, full, n, separator, out)
            continue
        elif isinstance(value, torch.Tensor):
            column = _tensor_column(value, full)
        else:
            column = [value] * n
        name = _column_name(full, separator)
        if name in out:
            msg = f"to_pandas: two keys give the column name {name!r}; pass another separator."
            raise ValueError(msg)
        out[name] = column


def frame_columns(td: Any, separator: str | None, feature: str) -> tuple:
    """``({column name: 1-D array or list}, number of rows)`` for a one-dim TensorDict."""
    td = as_one_dim(td, feature)
    n = td.batch_size[0]
    out: dict = {}
    _collect(td, (), n, separator, out)
    return out, n
