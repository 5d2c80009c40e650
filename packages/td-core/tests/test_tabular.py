"""Tables in and out (tensordict.tabular): Arrow, pandas, polars, Parquet, CSV; bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tensordict import (
    TensorDict,
    from_any,
    from_arrow,
    from_csv,
    from_pandas,
    from_parquet,
    lazy_stack,
    to_arrow,
)
from tensordict.tabular import to_pandas

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pq = pytest.importorskip("pyarrow.parquet")


# ---------------------------------------------------------------------- Arrow
def test_from_arrow_numeric_columns_view_arrow_buffers():
    table = pa.table({"x": pa.array([1.0, 2.0, 3.0]), "i": pa.array([1, 2, 3], pa.int32())})
    td = from_arrow(table)
    assert td.batch_size == torch.Size([3])
    assert td["x"].dtype == torch.float64 and td["i"].dtype == torch.int32
    x_buf = table.column("x").chunk(0).buffers()[1]
    assert td["x"].data_ptr() == x_buf.address  # zero-copy
    assert from_arrow(table, copy=True)["x"].data_ptr() != x_buf.address


def test_from_arrow_copies_immutable_buffers_by_default(tmp_path):
    path = tmp_path / "t.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, pa.schema([("x", pa.float64())])) as w:
        w.write_table(pa.table({"x": [1.0, 2.0]}))
    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
        assert not table.column("x").chunk(0).buffers()[1].is_mutable
        view = from_arrow(table, copy=False)["x"]  # a view, at the caller's risk
        assert view.data_ptr() == table.column("x").chunk(0).buffers()[1].address
        td = from_arrow(table)
        td["x"] += 1  # a copy: writing is safe
        assert td["x"].tolist() == [2.0, 3.0]
        assert table.column("x").to_pylist() == [1.0, 2.0]


def test_from_arrow_types():
    table = pa.table({
        "b": pa.array([True, False]),
        "ids": pa.array([[1, 2], [3]]),
        "fixed": pa.array([[1, 2], [3, 4]], pa.list_(pa.int64(), 2)),
        "st": pa.array([{"a": 1, "b": 2.0}, {"a": 3, "b": 4.0}]),
        "s": pa.array(["a", "b"]),
        "d": pa.array(["x", "y"]).dictionary_encode(),
        "h": pa.array([1, 2], pa.float16()),
        "img": pa.FixedShapeTensorArray.from_numpy_ndarray(torch.arange(12.0).reshape(2, 2, 3).numpy()),
    })
    td = from_arrow(table)
    assert td["b"].dtype == torch.bool
    assert [t.tolist() for t in td["ids"].unbind(0)] == [[1, 2], [3]]
    assert td["fixed"].tolist() == [[1, 2], [3, 4]]
    assert td["st", "a"].tolist() == [1, 3] and td["st", "b"].dtype == torch.float64
    assert td.get("s").tolist() == ["a", "b"] and td.get("d").tolist() == ["x", "y"]
    assert td["h"].dtype == torch.float16
    assert torch.equal(td["img"], torch.arange(12.0).reshape(2, 2, 3))


def test_from_arrow_chunked_and_sliced_columns():
    table = pa.table({"c": pa.chunked_array([[1, 2], [3]])}).slice(1)
    assert from_arrow(table)["c"].tolist() == [2, 3]
    assert from_arrow(pa.table({"l": pa.array([[1], [2, 3], [4]])}).slice(1))["l"].unbind(0)[0].tolist() == [2, 3]


def test_from_arrow_record_batch_polars_and_device():
    pl = pytest.importorskip("polars")
    td = from_arrow(pl.DataFrame({"a": [1, 2], "s": ["x", "y"]}), device="cpu")
    assert td.device == torch.device("cpu") and td["a"].tolist() == [1, 2] and td.get("s").tolist() == ["x", "y"]
    assert from_arrow(pa.record_batch({"a": [1.0]}))["a"].tolist() == [1.0]


def test_from_arrow_nulls_raise_names_the_column():
    table = pa.table({"ok": [1, 2], "x": pa.array([1.0, None])})
    with pytest.raises(ValueError, match=r"'x' has 1 null value"):
        from_arrow(table)
    with pytest.raises(ValueError, match=r"\('st', 'a'\)"):
        from_arrow(pa.table({"st": pa.array([{"a": 1}, None])}))
    with pytest.raises(ValueError, match="null"):
        from_arrow(pa.table({"s": pa.array(["a", None])}))


def test_from_arrow_nulls_fill_and_mask():
    table = pa.table({
        "x": pa.array([1.0, None, 3.0]),
        "i": pa.array([1, None, 3]),
        "b": pa.array([True, None, False]),
        "s": pa.array(["a", None, "c"]),
        "l": pa.array([[1, 2], None, []]),
        "st": pa.array([{"a": 1}, None, {"a": 3}]),
    })
    td = from_arrow(table, nulls="fill")
    assert td["x"].isnan().tolist() == [False, True, False]
    assert td["i"].tolist() == [1, 0, 3] and td["b"].tolist() == [True, False, False]
    assert td.get("s").tolist() == ["a", None, "c"]
    assert [t.tolist() for t in td["l"].unbind(0)] == [[1, 2], [], []]
    assert td["st", "a"].tolist() == [1, 0, 3]
    assert "_mask" not in td.keys()
    masked = from_arrow(table, nulls="mask", mask_key="valid")
    for key in ("x", "i", "b", "s", "l", ("st", "a")):
        key = key if isinstance(key, tuple) else (key,)
        assert masked[("valid", *key)].tolist() == [True, False, True]
    assert masked["x"].isnan().tolist() == [False, True, False]


def test_from_arrow_bad_options():
    table = pa.table({"a": [1]})
    with pytest.raises(ValueError, match="nulls must be one of"):
        from_arrow(table, nulls="drop")
    with pytest.raises(ValueError, match="mask_key"):
        from_arrow(table, nulls="fill", mask_key="m")
    with pytest.raises(ValueError, match="two columns named 'd'"):
        from_arrow(pa.table({"d": [1], "e": [2]}).rename_columns(["d", "d"]))
    with pytest.raises(TypeError, match="Arrow table"):
        from_arrow(42)


def test_to_arrow_round_trip_and_views():
    x = torch.arange(4.0)
    td = TensorDict(
        x=x, b=torch.tensor([True, False, True, True]), img=torch.zeros(4, 2, 3),
        obs=TensorDict(y=torch.arange(4), batch_size=[4]), s=["a", "b", "c", "d"], batch_size=[4],
    )
    table = to_arrow(td)
    assert table.column("x").chunk(0).buffers()[1].address == x.data_ptr()
    assert table.schema.field("obs").type == pa.struct([("y", pa.int64())])
    back = from_arrow(table)
    assert (back == td).all() if False else torch.equal(back["img"], td["img"])
    assert back["obs", "y"].tolist() == [0, 1, 2, 3] and back.get("s").tolist() == ["a", "b", "c", "d"]
    assert to_arrow(td, separator="/").column_names == ["x", "b", "img", "obs/y", "s"]
    assert td.to_arrow().num_rows == 4


def test_to_arrow_jagged_and_ragged_lazy_stack():
    stack = lazy_stack([TensorDict(a=torch.arange(2)), TensorDict(a=torch.arange(3))])
    table = to_arrow(stack)
    assert pa.types.is_large_list(table.schema.field("a").type)
    assert table.column("a").to_pylist() == [[0, 1], [0, 1, 2]]


def test_to_arrow_errors():
    with pytest.raises(ValueError, match="one batch dim"):
        to_arrow(TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3]))
    with pytest.raises(TypeError, match="bfloat16"):
        to_arrow(TensorDict(a=torch.zeros(2, dtype=torch.bfloat16), batch_size=[2]))
    with pytest.raises(ValueError, match="column name 'a.b'"):
        to_arrow(TensorDict({"a": {"b": torch.zeros(2)}, "a.b": torch.zeros(2)}, batch_size=[2]), separator=".")
    assert to_arrow(TensorDict(batch_size=[3])).num_rows == 0
    with pytest.raises(TypeError, match="non-tensor values at 'm' have no common Arrow type"):
        to_arrow(TensorDict(m=[1, "x"], batch_size=[2]))  # a mixed-type column


# ---------------------------------------------------------------------- pandas
def test_from_pandas_column_kinds():
    df = pd.DataFrame({
        "i": [1, 2, 3], "f": [1.0, None, 3.0], "b": [True, False, True],
        "name": ["a", None, "c"], "mixed": [1, "x", 2.5], "lists": [[1], [2, 3], []],
        "cat": pd.Categorical(["u", "v", "u"]), "t": pd.to_datetime(["2020-01-01"] * 3),
        "nullable": pd.array([1, None, 3], dtype="Int64"), "full": pd.array([1, 2, 3], dtype="Int64"),
    })
    td = from_pandas(df)
    assert td["i"].dtype == torch.int64 and td["b"].dtype == torch.bool
    assert td["f"].isnan().tolist() == [False, True, False]
    assert td.get("name").tolist() == ["a", None, "c"]
    assert td.get("mixed").tolist() == [1, "x", 2.5]  # mixed-type column: the objects, unchanged
    assert td.get("lists").tolist() == [[1], [2, 3], []]
    assert td["cat"].tolist() == [0, 1, 0]
    assert td["t"].dtype == torch.int64
    assert td["nullable"].dtype == torch.float64 and td["nullable"].isnan().tolist() == [False, True, False]
    assert td["full"].dtype == torch.int64
    arrow_backed = from_pandas(pd.DataFrame({"a": pd.array([1, 2], dtype=pd.ArrowDtype(pa.int64()))}))
    assert arrow_backed["a"].tolist() == [1, 2]


def test_from_pandas_copies_and_options():
    df = pd.DataFrame({"obs.x": [1.0, 2.0], "a": [0, 1]})
    td = from_pandas(df, separator=".", dtype=torch.float32)
    td["obs", "x"] += 1
    assert df["obs.x"].tolist() == [1.0, 2.0]
    assert td["a"].dtype == torch.float32
    with pytest.raises(TypeError, match="Conflicting"):
        from_pandas(df, auto_batch_size=True, batch_size=[2])
    assert from_pandas(pd.DataFrame({"a": [[1, 2]] * 2}).assign(b=[0, 1]), batch_size=[2]).batch_size == torch.Size([2])


def test_from_pandas_bad_columns():
    with pytest.raises(ValueError, match="boolean column 'b' has 1 missing"):
        from_pandas(pd.DataFrame({"b": pd.array([True, None], dtype="boolean")}))
    with pytest.raises(ValueError, match="two columns named 'a'"):
        from_pandas(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(ValueError, match="'obs.x'"):
        from_pandas(pd.DataFrame({"obs": [1], "obs.x": [2]}), separator=".")
    with pytest.raises(TypeError, match="DataFrame"):
        from_pandas({"a": [1]})
    # dtype= casts tensor columns only; an object column stays objects
    td = from_pandas(pd.DataFrame({"o": ["1", 2]}), dtype=torch.float32)
    assert td.get("o").tolist() == ["1", 2]


def test_to_pandas():
    td = TensorDict(
        {"a": torch.arange(3), "h": torch.ones(3, dtype=torch.bfloat16), "s": ["x", "y", "z"], "c": "k",
         "obs": {"x": torch.zeros(3)}},
        batch_size=[3],
    )
    df = td.to_pandas(separator=".")
    assert list(df.columns) == ["a", "h", "s", "c", "obs.x"]
    assert df["h"].dtype.name == "float32" and df["s"].tolist() == ["x", "y", "z"] and df["c"].tolist() == ["k"] * 3
    with pytest.raises(ValueError, match="separator"):
        td.to_pandas()
    with pytest.raises(ValueError, match="Cannot convert tensor"):
        TensorDict(m=torch.ones(3, 2), batch_size=[3]).to_pandas()
    assert len(to_pandas(TensorDict(batch_size=[2]))) == 2


def test_from_any_tables():
    assert from_any(pd.DataFrame({"a": [1, 2]}))["a"].tolist() == [1, 2]
    assert from_any(pa.table({"a": [1.0]}), device="cpu").device == torch.device("cpu")
    pl = pytest.importorskip("polars")
    assert from_any(pl.DataFrame({"a": [3]}))["a"].tolist() == [3]


# ---------------------------------------------------------------------- CSV
def test_csv_round_trip_nested(tmp_path):
    td = TensorDict({"a": torch.arange(3), "obs": {"x": torch.tensor([0.5, 1.5, 2.5], dtype=torch.float64)}}, [3])
    td.to_csv(tmp_path / "t.csv", separator=".")
    back = from_csv(tmp_path / "t.csv", separator=".")
    assert torch.equal(back["a"], td["a"]) and torch.equal(back["obs", "x"], td["obs", "x"])


def test_csv_ragged_rows(tmp_path):
    long_row = tmp_path / "long.csv"
    long_row.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(ValueError, match=r"long\.csv.*line 3"):
        from_csv(long_row)
    short_row = tmp_path / "short.csv"
    short_row.write_text("a,b\n1,2\n3\n")
    td = from_csv(short_row)  # a missing field is a missing value
    assert td["b"].dtype == torch.float64 and td["b"].isnan().tolist() == [False, True]
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty.csv"):
        from_csv(empty)


def test_csv_mixed_column(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("a,b\n1,x\n2,3\n")
    td = from_csv(path)
    assert td["a"].tolist() == [1, 2] and td.get("b").tolist() == ["x", "3"]


def test_failed_write_keeps_the_earlier_file(tmp_path):
    path = tmp_path / "t.csv"
    TensorDict(a=torch.arange(2), batch_size=[2]).to_csv(path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="Cannot convert tensor"):
        TensorDict(a=torch.ones(2, 2), batch_size=[2]).to_csv(path)
    with pytest.raises(TypeError):
        TensorDict(a=torch.arange(2), batch_size=[2]).to_csv(path, no_such_option=1)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["t.csv"]  # no temporary file left
    parquet = tmp_path / "t.parquet"
    TensorDict(a=torch.arange(2), batch_size=[2]).to_parquet(parquet)
    before = parquet.read_bytes()
    with pytest.raises(TypeError, match="bfloat16"):
        TensorDict(a=torch.zeros(2, dtype=torch.bfloat16), batch_size=[2]).to_parquet(parquet)
    with pytest.raises(TypeError):
        TensorDict(a=torch.arange(2), batch_size=[2]).to_parquet(parquet, no_such_option=1)
    assert parquet.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["t.csv", "t.parquet"]


# ---------------------------------------------------------------------- Parquet
def test_parquet_round_trip_struct_and_tensor_columns(tmp_path):
    td = TensorDict({"a": torch.arange(3), "img": torch.rand(3, 2, 2), "obs": {"x": torch.zeros(3)}}, [3])
    td.to_parquet(tmp_path / "t.parquet")
    back = TensorDict.from_parquet(tmp_path / "t.parquet")
    assert torch.equal(back["img"], td["img"]) and torch.equal(back["obs", "x"], td["obs", "x"])
    assert list(from_parquet(tmp_path / "t.parquet", columns=["a"]).keys()) == ["a"]


def test_parquet_truncated_and_not_parquet(tmp_path):
    path = tmp_path / "t.parquet"
    TensorDict(a=torch.arange(100), batch_size=[100]).to_parquet(path)
    data = path.read_bytes()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.parquet"):
        from_parquet(cut)
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        from_parquet(tmp_path / "missing.parquet")
    with pytest.raises(ValueError, match="null"):
        pq.write_table(pa.table({"x": [1.0, None]}), str(tmp_path / "n.parquet"))
        from_parquet(tmp_path / "n.parquet")


def test_truncated_arrow_ipc_file(tmp_path):
    path = tmp_path / "t.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, pa.schema([("x", pa.float64())])) as w:
        w.write_table(pa.table({"x": list(map(float, range(1000)))}))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(pa.ArrowInvalid):  # pyarrow refuses the file before from_arrow sees a table
        pa.ipc.open_file(str(path)).read_all()


# ---------------------------------------------------------------------- tensorclass
def test_tensorclass_tables(tmp_path):
    tensorclass = pytest.importorskip("tensordict.tensorclass").tensorclass

    @tensorclass
    class Row:
        x: torch.Tensor
        y: torch.Tensor

    row = Row(x=torch.arange(2), y=torch.zeros(2), batch_size=[2])
    row.to_parquet(tmp_path / "r.parquet")
    back = Row.from_parquet(tmp_path / "r.parquet")
    assert isinstance(back, Row) and torch.equal(back.x, row.x)
    assert list(row.to_pandas().columns) == ["x", "y"]


# ---------------------------------------------------------------------- missing dependencies
_MISSING = '''
import importlib.abc, sys
import torch, tensordict
from tensordict import TensorDict
blocked = set()
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
td = TensorDict(a=torch.ones(1), batch_size=[1])
for mod, call in [
    ("pyarrow", lambda: tensordict.from_arrow({"a": [1]})),
    ("pyarrow", lambda: td.to_parquet("x.parquet")),
    ("pandas", lambda: td.to_pandas()),
    ("pandas", lambda: tensordict.from_csv("x.csv")),
    ("streaming", lambda: td.to_mds(out="x")),
]:
    blocked.clear(); blocked.add(mod)
    try:
        call()
        print("no error")
    except ImportError as err:
        print(err)
'''


def test_missing_dependency_names_the_install_line(tmp_path):
    res = subprocess.run([sys.executable, "-c", _MISSING], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 5, res.stdout
    for line, pip in zip(lines, ["pyarrow", "pyarrow", "pandas", "pandas", "mosaicml-streaming"]):
        assert f"`pip install {pip}`" in line and "td-core[" in line, line
