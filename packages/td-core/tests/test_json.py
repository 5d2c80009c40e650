"""``TensorDict.to_json`` / ``TensorDict.from_json`` / ``tensordict.from_json`` (stdlib json)."""

import io
import json

import pytest
import torch

import tensordict
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict


def sample():
    return TensorDict(
        {
            "x": torch.arange(3),
            "y": torch.tensor([0.5, 1.5, 2.5], dtype=torch.float64),
            "flag": torch.tensor([True, False, True]),
            "obs": {"pos": torch.arange(6.0, dtype=torch.float64).view(3, 2)},
            "name": NonTensorStack("a", "b", "c"),
        },
        [3],
    )


def test_records_along_first_batch_dim(tmp_path):
    path = tmp_path / "out.json"
    sample().to_json(path, separator=".")
    data = json.loads(path.read_text())
    assert data == [
        {"x": 0, "y": 0.5, "flag": True, "obs.pos": [0.0, 1.0], "name": "a"},
        {"x": 1, "y": 1.5, "flag": False, "obs.pos": [2.0, 3.0], "name": "b"},
        {"x": 2, "y": 2.5, "flag": True, "obs.pos": [4.0, 5.0], "name": "c"},
    ]


def test_json_lines_and_round_trip(tmp_path):
    path = tmp_path / "out.jsonl"
    td = sample()
    td.to_json(str(path), separator="/", lines=True)
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[1])["obs/pos"] == [2.0, 3.0]
    back = TensorDict.from_json(path, lines=True, separator="/")
    assert back.batch_size == (3,)
    assert back["x"].dtype == torch.int64
    assert back["flag"].dtype == torch.bool
    assert back["y"].dtype == torch.float64
    assert (back.exclude("name") == td.exclude("name")).all()
    assert back.get("name").tolist() == ["a", "b", "c"]
    assert back["obs"].batch_size == (3,)


def test_nested_key_needs_a_separator():
    with pytest.raises(ValueError, match="separator"):
        sample().to_json(io.StringIO())


def test_column_name_collision():
    td = TensorDict({"a.b": torch.zeros(2), "a": {"b": torch.ones(2)}}, [2])
    with pytest.raises(ValueError, match="'a.b'"):
        td.to_json(io.StringIO(), separator=".")


def test_unbatched_refused_and_non_json_values_named():
    with pytest.raises(ValueError, match=r"batch_size \[\]"):
        TensorDict({"a": torch.zeros(())}).to_json(io.StringIO())
    td = TensorDict({"c": torch.ones(2, dtype=torch.complex64)}, [2])
    with pytest.raises(TypeError, match="column 'c'"):
        td.to_json(io.StringIO())


def test_non_tensor_data_repeats_and_kwargs_reach_json():
    td = TensorDict({"a": torch.zeros(2), "meta": NonTensorData("m", batch_size=[2])}, [2])
    buf = io.StringIO()
    td.to_json(buf, indent=2)
    assert "\n  " in buf.getvalue()
    assert [r["meta"] for r in json.loads(buf.getvalue())] == ["m", "m"]


def test_lazy_stack_with_keys_of_some_parts_refused():
    stack = LazyStackedTensorDict(TensorDict({"a": 1}), TensorDict({"a": 2, "b": 3}))
    with pytest.raises(ValueError, match="'b'"):
        stack.to_json(io.StringIO())
    stack = LazyStackedTensorDict(TensorDict({"a": 1}), TensorDict({"a": 2}))
    buf = io.StringIO()
    stack.to_json(buf)
    assert json.loads(buf.getvalue()) == [{"a": 1}, {"a": 2}]


def test_from_json_records_columns_and_pandas_layout(tmp_path):
    path = tmp_path / "in.json"
    path.write_text(json.dumps([{"a": 1, "b": 4.0}, {"a": 2, "b": None}]))
    td = tensordict.from_json(path)
    assert td.batch_size == (2,)
    assert torch.equal(td["a"], torch.tensor([1, 2]))
    assert td["b"][0] == 4.0 and td["b"][1].isnan()
    cols = TensorDict.from_json(io.StringIO(json.dumps({"a": [1, 2, 3]})))
    assert cols["a"].tolist() == [1, 2, 3]
    pandas_default = TensorDict.from_json(io.StringIO('{"a": {"0": 5, "1": 6}}'))
    assert pandas_default["a"].tolist() == [5, 6]


def test_from_json_options(tmp_path):
    path = tmp_path / "in.json"
    path.write_text(json.dumps([{"m": [[1, 2], [3, 4]]}, {"m": [[5, 6], [7, 8]]}]))
    td = TensorDict.from_json(path, dtype=torch.float32)
    assert td["m"].shape == (2, 2, 2) and td["m"].dtype == torch.float32
    assert TensorDict.from_json(path, auto_batch_size=True).batch_size == (2, 2, 2)
    assert TensorDict.from_json(path, batch_dims=2).batch_size == (2, 2)
    assert TensorDict.from_json(path, batch_size=[2, 2]).batch_size == (2, 2)
    assert TensorDict.from_json(path, device="cpu").device == torch.device("cpu")


def test_from_json_errors(tmp_path):
    with pytest.raises(KeyError, match="'b'"):
        TensorDict.from_json(io.StringIO('[{"a": 1}, {"a": 2, "b": 3}]'))
    with pytest.raises(TypeError, match="row 1"):
        TensorDict.from_json(io.StringIO('[{"a": 1}, 3]'))
    with pytest.raises(TypeError, match="list of records"):
        TensorDict.from_json(io.StringIO("3"))
    with pytest.raises(ValueError, match="line 2"):
        TensorDict.from_json(io.StringIO('{"a": 1}\n{oops\n'), lines=True)
    with pytest.raises(ValueError, match="same length"):
        TensorDict.from_json(io.StringIO('{"a": [1, 2], "b": [1]}'))


def test_empty_document():
    td = TensorDict.from_json(io.StringIO("[]"))
    assert td.batch_size == (0,) and not list(td.keys())
