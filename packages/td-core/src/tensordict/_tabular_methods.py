"""``TabularMixin``: the table methods of every TensorDict (pandas, CSV, Parquet, Arrow, MDS).

Each forwards to the function of the same name in :mod:`tensordict.tabular` (or
:mod:`tensordict._mds`), which imports pandas / pyarrow / mosaicml-streaming when it
runs. The class methods build a :class:`~tensordict.TensorDict` whatever class they are
called on (tensorclasses wrap the result in their own class).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensordict import _mds, tabular
from tensordict._host import TensorDictHost

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

__all__ = ["TabularMixin"]


class TabularMixin(TensorDictHost):
    """Table conversions: see :mod:`tensordict.tabular`."""

    @classmethod
    def from_pandas(
        cls,
        dataframe: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: Any = None,
    ) -> TensorDictBase:
        """Converts a pandas DataFrame to a TensorDict of batch size ``[len(dataframe)]``.

        See :func:`tensordict.tabular.from_pandas` for the column conversions and errors.

        Examples:
            >>> import pandas as pd
            >>> from tensordict import TensorDict
            >>> TensorDict.from_pandas(pd.DataFrame({"a": [1, 2]}))["a"]
            tensor([1, 2])
        """
        return tabular.from_pandas(
            dataframe, auto_batch_size=auto_batch_size, batch_dims=batch_dims, device=device,
            batch_size=batch_size, separator=separator, dtype=dtype,
        )

    @classmethod
    def from_csv(
        cls,
        path: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Reads a CSV file into a TensorDict, one row per element of the first batch dim.

        See :func:`tensordict.tabular.from_csv` (``**kwargs`` go to ``pandas.read_csv``).

        Examples:
            >>> import io
            >>> from tensordict import TensorDict
            >>> TensorDict.from_csv(io.StringIO("a\\n1\\n2\\n"))["a"]
            tensor([1, 2])
        """
        return tabular.from_csv(
            path, auto_batch_size=auto_batch_size, batch_dims=batch_dims, device=device,
            batch_size=batch_size, separator=separator, dtype=dtype, **kwargs,
        )

    @classmethod
    def from_parquet(
        cls,
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
    ) -> TensorDictBase:
        """Reads a Parquet file into a TensorDict (``columns=`` selects columns).

        See :func:`tensordict.tabular.from_parquet`.

        Examples:
            >>> import io, torch
            >>> from tensordict import TensorDict
            >>> buf = io.BytesIO()
            >>> TensorDict(a=torch.arange(2), b=torch.ones(2), batch_size=[2]).to_parquet(buf)
            >>> sorted(TensorDict.from_parquet(buf, columns=["a"]).keys())
            ['a']
        """
        return tabular.from_parquet(
            path, auto_batch_size=auto_batch_size, batch_dims=batch_dims, device=device,
            batch_size=batch_size, separator=separator, dtype=dtype, columns=columns, **kwargs,
        )

    @classmethod
    def from_arrow(
        cls,
        table: Any,
        *,
        copy: bool | None = None,
        nulls: str = "raise",
        mask_key: Any = None,
        device: Any = None,
    ) -> TensorDictBase:
        """Converts an Arrow table (or a polars DataFrame) to a TensorDict of ``[num_rows]``.

        See :func:`tensordict.from_arrow` for the column conversions, ``copy`` and ``nulls``.

        Examples:
            >>> import pyarrow as pa
            >>> from tensordict import TensorDict
            >>> TensorDict.from_arrow(pa.table({"a": [1.0, None]}), nulls="fill")["a"]
            tensor([1., nan], dtype=torch.float64)
        """
        return tabular.from_arrow(table, copy=copy, nulls=nulls, mask_key=mask_key, device=device)

    def to_pandas(self, *, separator: str | None = None) -> Any:
        """Converts this TensorDict (one batch dim) to a pandas DataFrame, one column per leaf.

        See :func:`tensordict.tabular.to_pandas`.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict(a=torch.arange(2), batch_size=[2]).to_pandas()["a"].tolist()
            [0, 1]
        """
        return tabular.to_pandas(self, separator=separator)

    def to_csv(self, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
        """Writes this TensorDict (one batch dim) as CSV; a failed write keeps an earlier file.

        See :func:`tensordict.tabular.to_csv` (``**kwargs`` go to ``DataFrame.to_csv``).

        Examples:
            >>> import io, torch
            >>> from tensordict import TensorDict
            >>> buf = io.StringIO()
            >>> TensorDict(a=torch.arange(2), batch_size=[2]).to_csv(buf)
            >>> buf.getvalue().split()
            ['a', '0', '1']
        """
        tabular.to_csv(self, path, separator=separator, **kwargs)

    def to_parquet(self, path: Any, *, separator: str | None = None, **kwargs: Any) -> None:
        """Writes this TensorDict (one batch dim) as Parquet; a failed write keeps an earlier file.

        See :func:`tensordict.tabular.to_parquet` (``**kwargs`` go to ``pyarrow.parquet.write_table``).

        Examples:
            >>> import io, torch
            >>> from tensordict import TensorDict
            >>> buf = io.BytesIO()
            >>> TensorDict(a=torch.arange(2), batch_size=[2]).to_parquet(buf)
            >>> buf.getvalue()[:4]
            b'PAR1'
        """
        tabular.to_parquet(self, path, separator=separator, **kwargs)

    def to_arrow(self, *, separator: str | None = None) -> Any:
        """Converts this TensorDict (one batch dim) to a ``pyarrow.Table``; see :func:`tensordict.to_arrow`.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> TensorDict(a=torch.arange(2), batch_size=[2]).to_arrow().num_rows
            2
        """
        return tabular.to_arrow(self, separator=separator)

    def to_mds(
        self,
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
        """Writes this TensorDict as a MosaicML Streaming (MDS) dataset, one sample per row.

        See :func:`tensordict._mds.to_mds` for the column encodings and the writer rules.
        Needs ``mosaicml-streaming`` (``pip install mosaicml-streaming``).

        Examples:
            >>> import tempfile, torch
            >>> from tensordict import TensorDict
            >>> td = TensorDict(a=torch.arange(2), batch_size=[2])
            >>> with tempfile.TemporaryDirectory() as tmp:  # doctest: +SKIP
            ...     td.to_mds(out=tmp)
        """
        _mds.to_mds(
            self, columns=columns, out=out, keep_local=keep_local, compression=compression,
            hashes=hashes, size_limit=size_limit, writer=writer, finish_writer=finish_writer, **kwargs,
        )
