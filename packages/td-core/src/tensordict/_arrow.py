"""Apache Arrow tables to and from TensorDicts (``from_arrow`` / ``to_arrow``).

One column per entry, one row per element of the first (only) batch dim. Numeric
columns view Arrow's buffers through DLPack (no copy); booleans are copied (Arrow packs
them as bits); ``list`` columns of numbers become jagged nested tensors, fixed-size
lists and ``arrow.fixed_shape_tensor`` columns tensors with trailing dims, ``struct``
columns nested TensorDicts, every other column a ``NonTensorStack`` of Python objects.

pyarrow is imported when a function here runs (td-core extra ``arrow``).
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict import _classes
from tensordict._keys import unravel_key
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._optional import require

__all__ = ["from_arrow", "to_arrow", "arrow_column", "import_pyarrow", "host_tensor"]

_NULLS = ("raise", "fill", "mask")


_PA: list = []  # pyarrow, once imported
_NUMERIC_IDS: dict = {}  # Arrow type id -> torch dtype, for the integer and floating-point types


def import_pyarrow(feature: str) -> Any:
    """``pyarrow`` (and ``pyarrow.compute``), or ImportError naming the install line."""
    if _PA:
        return _PA[0]
    pa = require("pyarrow", feature, "pyarrow", "arrow")
    require("pyarrow.compute", feature, "pyarrow", "arrow")
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"):
        _NUMERIC_IDS[getattr(pa, name)().id] = getattr(torch, name)
    _PA.append(pa)
    return pa


class _Ctx:
    """What one conversion needs: its options and the masks it collects."""

    __slots__ = ("pa", "pc", "copy", "nulls", "masks", "n")

    def __init__(self, pa: Any, copy: bool | None, nulls: str, n: int) -> None:
        self.pa, self.pc = pa, pa.compute
        self.copy, self.nulls, self.n = copy, nulls, n
        self.masks: dict = {}


def _name(key: tuple) -> Any:
    return key[0] if len(key) == 1 else key


def _null_error(key: tuple, count: int, where: str = "") -> ValueError:
    msg = (
        f"from_arrow: the Arrow column {_name(key)!r} has {count} null value(s){where}. "
        "Pass nulls='fill' to fill them, or nulls='mask' to also get a mask entry."
    )
    return ValueError(msg)


def _row_nulls(arr: Any, key: tuple, ctx: _Ctx) -> None:
    """Raises for null rows under ``nulls='raise'``; records the row mask under ``'mask'``."""
    count = arr.null_count
    if not count:
        return
    if ctx.nulls == "raise":
        raise _null_error(key, count)
    if ctx.nulls == "mask":
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        ctx.masks[key] = torch.from_numpy(valid.copy())


def _numeric(arr: Any, key: tuple, ctx: _Ctx, where: str = "") -> torch.Tensor:
    """A tensor over a primitive numeric or boolean Arrow array (nulls filled)."""
    pa, pc = ctx.pa, ctx.pc
    filled = False
    if arr.null_count:
        if ctx.nulls == "raise":
            raise _null_error(key, arr.null_count, where)
        fill = float("nan") if pa.types.is_floating(arr.type) else (False if pa.types.is_boolean(arr.type) else 0)
        arr = pc.fill_null(arr, pa.scalar(fill, arr.type))
        filled = True
    if pa.types.is_boolean(arr.type):
        return torch.from_numpy(arr.to_numpy(zero_copy_only=False).copy())
    return _view(arr, _NUMERIC_IDS[arr.type.id], False if filled else ctx.copy)


def _view(arr: Any, dtype: torch.dtype, copy: bool | None) -> torch.Tensor:
    """A tensor over a numeric Arrow array without nulls: a view of its buffer, or a copy
    (``copy=True``, or ``copy=None`` and a buffer Arrow marks immutable)."""
    if not len(arr):
        return torch.empty(0, dtype=dtype)
    out = torch.from_dlpack(arr)
    if copy or (copy is None and not arr.buffers()[1].is_mutable):
        return out.clone()
    return out


def _is_number(pa: Any, typ: Any) -> bool:
    return pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ)


def _jagged(arr: Any, key: tuple, ctx: _Ctx) -> torch.Tensor:
    """A ``list``/``large_list`` column of numbers as a jagged nested tensor."""
    pc = ctx.pc
    _row_nulls(arr, key, ctx)
    values = _numeric(arr.flatten(), key, ctx, " inside its lists")
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    offsets = torch.zeros(len(arr) + 1, dtype=torch.int64)
    torch.cumsum(torch.from_numpy(lengths.astype("int64")), 0, out=offsets[1:])
    return torch.nested.nested_tensor_from_jagged(values, offsets=offsets)


def _fixed(arr: Any, key: tuple, ctx: _Ctx) -> torch.Tensor:
    """A (nested) ``fixed_size_list`` column of numbers as a tensor with trailing dims."""
    pa = ctx.pa
    _row_nulls(arr, key, ctx)
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
    dims, level = [], arr
    while pa.types.is_fixed_size_list(level.type):
        size = level.type.list_size
        dims.append(size)
        level = level.values.slice(level.offset * size, len(level) * size)
    out = _numeric(level, key, ctx, " inside its lists").reshape(len(arr), *dims)
    if valid is not None:  # a null row's slots hold arbitrary values: fill them
        out = out.clone()
        out[torch.from_numpy(~valid)] = float("nan") if out.is_floating_point() else 0
    return out


def _fixed_depth_type(pa: Any, typ: Any) -> Any:
    while pa.types.is_fixed_size_list(typ):
        typ = typ.value_type
    return typ


def _tensor_extension(arr: Any, key: tuple, ctx: _Ctx) -> torch.Tensor:
    typ = arr.type
    shape = list(typ.shape)
    perm = list(typ.permutation) if typ.permutation is not None else list(range(len(shape)))
    flat = _fixed(arr.storage, key, ctx)
    out = flat.reshape(len(arr), *[shape[p] for p in perm])
    if perm != sorted(perm):
        out = out.permute(0, *[1 + perm.index(i) for i in range(len(shape))])
    return out


def arrow_column(arr: Any, key: tuple, ctx: _Ctx) -> Any:
    """Converts one Arrow array (one column) to a leaf or a dict of leaves (struct)."""
    pa = ctx.pa
    typ = arr.type
    if _is_number(pa, typ):
        if arr.null_count and ctx.nulls == "mask":
            _row_nulls(arr, key, ctx)
        return _numeric(arr, key, ctx)
    if pa.types.is_struct(typ):
        out = {}
        for i, part in enumerate(arr.flatten()):
            out[typ.field(i).name] = arrow_column(part, (*key, typ.field(i).name), ctx)
        return out
    if (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and _is_number(pa, typ.value_type):
        return _jagged(arr, key, ctx)
    if pa.types.is_fixed_size_list(typ) and _is_number(pa, _fixed_depth_type(pa, typ)):
        return _fixed(arr, key, ctx)
    if isinstance(typ, pa.FixedShapeTensorType):
        return _tensor_extension(arr, key, ctx)
    _row_nulls(arr, key, ctx)
    return NonTensorStack._from_flat(arr.to_pylist(), [len(arr)])


def _as_table(pa: Any, table: Any) -> Any:
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        return table
    try:
        return pa.table(table)
    except (TypeError, ValueError, pa.ArrowException) as err:
        msg = (
            f"from_arrow: cannot read an Arrow table from a {type(table).__name__} ({err}); "
            "pass a pyarrow.Table, a RecordBatch, or an object with __arrow_c_stream__ (e.g. a polars DataFrame)."
        )
        raise TypeError(msg) from err


def _column_array(pa: Any, col: Any) -> Any:
    """One array for a column (a ChunkedArray of several chunks is concatenated: a copy)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        if col.num_chunks == 0:
            return pa.array([], type=col.type)
        return col.combine_chunks()
    return col


def table_to_source(table: Any, *, copy: bool | None, nulls: str, mask_key: Any, feature: str = "from_arrow") -> tuple:
    """``({column name: leaf or dict}, num_rows)`` of an Arrow table (the masks added)."""
    pa = import_pyarrow(feature)
    if nulls not in _NULLS:
        msg = f"nulls must be one of {_NULLS}, got {nulls!r}."
        raise ValueError(msg)
    if mask_key is not None and nulls != "mask":
        msg = f"from_arrow got a mask_key but nulls={nulls!r}, not 'mask'."
        raise ValueError(msg)
    table = _as_table(pa, table)
    ctx = _Ctx(pa, copy, nulls, table.num_rows)
    source: dict = {}
    names = table.column_names
    if len(set(names)) != len(names):
        dup = next(name for i, name in enumerate(names) if name in names[:i])
        msg = f"{feature}: the table has two columns named {dup!r}; rename one first."
        raise ValueError(msg)
    numeric, frombuffer, chunked = _NUMERIC_IDS, torch.frombuffer, pa.ChunkedArray
    for name, col in zip(names, table.columns):
        arr = col.chunk(0) if col.__class__ is chunked and col.num_chunks == 1 else _column_array(pa, col)
        dtype = numeric.get(arr.type.id)
        if dtype is not None and not arr.null_count and len(arr):  # the fast path
            buf = arr.buffers()[1]
            if buf.is_mutable and not copy:  # a view of Arrow's buffer
                source[name] = frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)
            elif copy is False:  # a view of an immutable buffer (DLPack: no read-only warning)
                source[name] = torch.from_dlpack(arr)
            else:
                source[name] = torch.from_dlpack(arr).clone()
        else:
            source[name] = arrow_column(arr, (name,), ctx)
    if ctx.masks:
        root = unravel_key(mask_key if mask_key is not None else "_mask")
        root = root if isinstance(root, tuple) else (root,)
        if root[0] in source:
            msg = f"{feature}: the mask key {mask_key!r} is also a column name; pass another mask_key."
            raise ValueError(msg)
        for key, mask in ctx.masks.items():
            node = source
            for part in (*root, *key)[:-1]:
                node = node.setdefault(part, {})
            node[key[-1]] = mask
    return source, table.num_rows


def from_arrow(
    table: Any,
    *,
    copy: bool | None = None,
    nulls: str = "raise",
    mask_key: Any = None,
    device: Any = None,
) -> Any:
    """Converts an Arrow table to a TensorDict of batch size ``[num_rows]``, one entry per column.

    Columns convert as follows: integer and floating-point columns become tensors that
    view Arrow's buffer through DLPack (no copy); boolean columns are copied (Arrow packs
    them as bits); ``list``/``large_list`` columns of numbers become jagged nested tensors
    (``layout=torch.jagged``, shape ``[num_rows, j]``); ``fixed_size_list`` and
    ``arrow.fixed_shape_tensor`` columns become tensors ``[num_rows, *shape]``;
    ``struct`` columns become nested TensorDicts; every other column (strings, binary,
    dictionaries, timestamps, lists of strings, ...) a ``NonTensorStack`` of the Python
    objects of ``to_pylist()``. A column of several chunks is concatenated first (a copy).

    Args:
        table (pyarrow.Table or pyarrow.RecordBatch): the table. Other objects go through
            :func:`pyarrow.table` first (a polars DataFrame, anything with
            ``__arrow_c_stream__``).

    Keyword Args:
        copy (bool, optional): ``None`` views the buffers Arrow marks mutable and copies
            the immutable ones (a memory-mapped file); ``True`` copies every column;
            ``False`` views every column it can. Defaults to ``None``.
        nulls (str): ``"raise"`` (a ``ValueError`` naming the column), ``"fill"`` (``NaN``
            in floating-point tensors, ``0``/``False`` in the others, an empty list in
            jagged tensors, ``None`` in a ``NonTensorStack``; a null struct makes its fields
            null) or ``"mask"`` (fills, and adds a ``torch.bool`` entry
            ``(*mask_key, *key)``, ``True`` where the row is valid, for each entry with
            nulls). Defaults to ``"raise"``.
        mask_key (NestedKey, optional): where ``nulls="mask"`` puts the masks. Defaults to
            ``"_mask"``; passing it with another ``nulls`` raises ``ValueError``.
        device (torch.device, optional): the device of the result. Defaults to ``None``.

    Returns:
        TensorDict: batch size ``[num_rows]``.

    Raises:
        ImportError: pyarrow is not installed (the message gives the install line).
        ValueError: a null under ``nulls="raise"``, an unknown ``nulls``, two columns with
            one name.
        TypeError: ``table`` cannot be read as an Arrow table.

    Examples:
        >>> import pyarrow as pa
        >>> from tensordict import from_arrow
        >>> td = from_arrow(pa.table({"x": [1.0, 2.0], "ids": [[1, 2], [3]], "s": ["a", "b"]}))
        >>> td["x"], td["ids"].unbind(0), td.get("s").tolist()
        (tensor([1., 2.], dtype=torch.float64), (tensor([1, 2]), tensor([3])), ['a', 'b'])
        >>> td = from_arrow(pa.table({"y": [1.0, None]}), nulls="mask")
        >>> td["y"], td["_mask", "y"]
        (tensor([1., nan], dtype=torch.float64), tensor([ True, False]))
    """
    source, n = table_to_source(table, copy=copy, nulls=nulls, mask_key=mask_key)
    if device is None and all(type(v) is torch.Tensor for v in source.values()):
        # every leaf is a [n]-leading tensor made here: nothing to validate
        return _classes.TensorDict._new_unsafe(source, torch.Size([n]))
    return _classes.TensorDict(source, batch_size=[n], device=device)


# ---------------------------------------------------------------------- export
def _unwrap(td: Any) -> Any:
    inner = getattr(td, "_tensordict", None)
    if getattr(td, "_is_tensorclass", False) and inner is not None:
        return inner
    return td


def as_one_dim(td: Any, feature: str) -> Any:
    """``td`` as a TensorDict with one batch dim (a ragged lazy stack densified as jagged)."""
    td = _unwrap(td)
    if td.batch_dims != 1:
        msg = (
            f"{feature} needs a TensorDict with one batch dim (the rows), got batch_size "
            f"{list(td.batch_size)}; call td.reshape(-1) first to flatten the batch dims."
        )
        raise ValueError(msg)
    return _dense(td)


def _dense(td: Any) -> Any:
    if isinstance(td, _classes.LazyStackedTensorDict):
        try:
            return td.to_tensordict()
        except (RuntimeError, ValueError):
            return td.densify(layout=torch.jagged)
    return td


def host_tensor(value: torch.Tensor) -> torch.Tensor:
    """``value`` on the CPU, without grad, conjugate or negative bits (no copy if none is set)."""
    if value.requires_grad:
        value = value.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    if value.is_conj() or value.is_neg():
        value = value.resolve_conj().resolve_neg()
    return value


def _tensor_array(pa: Any, value: torch.Tensor, key: tuple) -> Any:
    value = host_tensor(value)
    if value.is_nested:
        if value.layout != torch.jagged or getattr(value, "_ragged_idx", 1) != 1:
            msg = f"to_arrow: the nested tensor at {_name(key)!r} is not jagged along dim 1; it has no Arrow type."
            raise ValueError(msg)
        values = _tensor_array(pa, value.values(), key)
        return pa.LargeListArray.from_arrays(pa.array(value.offsets().numpy()), values)  # type: ignore[attr-defined]
    if value.dtype == torch.bfloat16:
        msg = f"to_arrow: the tensor at {_name(key)!r} is bfloat16, which Arrow has no type for; cast it first (e.g. to float32)."
        raise TypeError(msg)
    if value.dim() == 1:
        return pa.array(value.numpy())
    if value.dim() == 0:
        msg = f"to_arrow: the tensor at {_name(key)!r} has no batch dim."
        raise ValueError(msg)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(value.contiguous().numpy())


def _object_array(pa: Any, rows: list, key: tuple) -> Any:
    try:
        return pa.array(rows)
    except (pa.ArrowException, TypeError, ValueError) as err:
        msg = f"to_arrow: the non-tensor values at {_name(key)!r} have no common Arrow type ({err})."
        raise TypeError(msg) from err


def collect_arrays(pa: Any, td: Any, prefix: tuple, separator: str | None, out: dict) -> None:
    """Adds ``column -> Arrow array`` for each entry of ``td``: nested TensorDicts become
    ``struct`` arrays, or (with ``separator``) columns named by the joined key."""
    n = td.batch_size[0]
    tensor_type, pa_array = torch.Tensor, pa.array
    for key, value in td.items():
        if (
            type(value) is tensor_type and value.is_cpu and value.ndim == 1 and not value.requires_grad
            and not value.is_nested and value.dtype is not torch.bfloat16 and not value.is_conj() and not value.is_neg()
        ):  # the common case: a view of the tensor's memory
            name = key if separator is None or not prefix else separator.join((*prefix, key))
            if name in out:
                msg = f"to_arrow: two keys give the column name {name!r}; pass another separator."
                raise ValueError(msg)
            out[name] = pa_array(value.numpy())
            continue
        full = (*prefix, key)
        if type(value) is tensor_type and value.dtype is not torch.bfloat16 and not value.is_nested:
            arr = _tensor_array(pa, value, full)
        elif isinstance(value := _unwrap(value), NonTensorStack):
            arr = _object_array(pa, value.tolist(), full)
        elif isinstance(value, NonTensorData):
            arr = _object_array(pa, [value.data] * n, full)
        elif isinstance(value, _classes.TensorDictBase):
            value = _dense(value)
            if separator is not None:
                collect_arrays(pa, value, full, separator, out)
                continue
            sub: dict = {}
            collect_arrays(pa, value, full, None, sub)
            if sub:
                arr = pa.StructArray.from_arrays(list(sub.values()), names=list(sub))
            else:
                arr = pa.array([{}] * n, type=pa.struct([]))
        elif isinstance(value, torch.Tensor):
            if getattr(value.__class__, "_pass_through", False):
                msg = f"to_arrow: the UnbatchedTensor at {_name(full)!r} has no row dim; remove it first."
                raise TypeError(msg)
            arr = _tensor_array(pa, value, full)
        else:
            arr = _object_array(pa, [value] * n, full)
        name = full[-1] if separator is None else separator.join(full)
        if name in out:
            msg = f"to_arrow: two keys give the column name {name!r}; pass another separator."
            raise ValueError(msg)
        out[name] = arr


def to_arrow(td: Any, *, separator: str | None = None) -> Any:
    """Converts a TensorDict with one batch dim to a ``pyarrow.Table``, one column per entry.

    The reverse of :func:`from_arrow`: 1-D tensors become primitive columns (contiguous
    numeric CPU tensors are viewed, not copied; booleans are copied); tensors
    ``[n, *shape]`` become ``arrow.fixed_shape_tensor`` columns; jagged nested tensors
    (ragged dim 1) ``large_list`` columns; nested TensorDicts ``struct`` columns (or, with
    ``separator``, one column per leaf named by the joined key); non-tensor entries
    columns of the type :func:`pyarrow.array` infers. A lazy stack of different shapes is
    densified as jagged first. Tensors on another device go through the CPU.

    Args:
        td (TensorDictBase): ``batch_size`` ``[n]`` (call ``td.reshape(-1)`` first
            otherwise); a tensorclass converts through its TensorDict.

    Keyword Args:
        separator (str, optional): join nested keys into flat column names instead of
            writing ``struct`` columns (an extension; upstream has no such argument).

    Returns:
        pyarrow.Table: ``n`` rows (no rows if ``td`` has no entries).

    Raises:
        ValueError: ``td`` does not have exactly one batch dim, two keys give one column
            name, or a nested tensor is not jagged along dim 1.
        TypeError: a bfloat16 tensor, an ``UnbatchedTensor``, or non-tensor values with no
            common Arrow type (the key is named).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict, to_arrow
        >>> td = TensorDict(x=torch.tensor([1.0, 2.0]), obs=TensorDict(y=torch.tensor([3, 4]), batch_size=[2]), batch_size=[2])
        >>> to_arrow(td).schema
        x: float
        obs: struct<y: int64>
          child 0, y: int64
        >>> to_arrow(td, separator=".").column_names
        ['x', 'obs.y']
    """
    pa = import_pyarrow("to_arrow")
    td = as_one_dim(td, "to_arrow")
    arrays: dict = {}
    collect_arrays(pa, td, (), separator, arrays)
    if not arrays:
        return pa.table({})
    return pa.Table.from_arrays(list(arrays.values()), names=list(arrays))
