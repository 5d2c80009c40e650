"""create_nested, cat/stack_tensors, separates, replace, get_item_shape, from_schema,
dtype, bytes, param_count, _check_batch_size."""

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict({"a": torch.zeros(3, 1), "b": {"c": torch.ones(3, 2)}}, [3])


def test_create_nested():
    td = make()
    assert td.create_nested(("x", "y")) is td
    assert td["x", "y"].batch_size == (3,) and td["x", "y"].is_empty()
    with pytest.raises(KeyError):
        td.create_nested(("a", "z"))
    td.lock_()
    with pytest.raises(RuntimeError):
        td.create_nested("new")


@pytest.mark.parametrize("keep", [False, True])
def test_cat_and_stack_tensors(keep):
    td = make()
    td.cat_tensors("a", ("b", "c"), out_key="cat", dim=-1, keep_entries=keep)
    assert td["cat"].shape == (3, 3) and (td["cat"][:, 0] == 0).all()
    assert ("a" in td.keys()) is keep
    td = TensorDict({"a": torch.zeros(3), "b": torch.ones(3)}, [3])
    td.stack_tensors("a", "b", out_key=("n", "s"), dim=-1, keep_entries=keep)
    assert td["n", "s"].shape == (3, 2)
    with pytest.raises(TypeError, match="not a tensor"):
        make().cat_tensors("a", "b", out_key="x")


def test_separates():
    td = TensorDict(a=0, b=TensorDict(c=0, d=0), u=TensorDict(v=0))
    out = td.separates("a", ("b", "d"))
    assert set(out.keys(True, True)) == {"a", ("b", "d")}
    assert set(td.keys(True, True)) == {("b", "c"), ("u", "v")}
    with pytest.raises(KeyError, match="key .*e.* not found"):
        td.separates("e")
    out = td.separates(("u", "v"), "e", default=None)
    assert out["e"] is None and "u" not in td.keys()
    td = TensorDict(u=TensorDict(v=0))
    td.separates(("u", "v"), filter_empty=False)
    assert "u" in td.keys()


def test_replace_and_item_shape():
    td = make()
    out = td.replace({"a": torch.ones(3, 1)}, b={"c": torch.zeros(3, 2)})
    assert (out["a"] == 1).all() and (td["a"] == 0).all()
    assert (out["b", "c"] == 0).all() and (td["b", "c"] == 1).all()
    assert td.get_item_shape(("b", "c")) == (3, 2)
    assert td.get_item_shape("b") == (3,)


def test_from_schema(tmp_path):
    schema = {"obs": ([4], torch.float32), "nested": {"r": ([], torch.int64)}}
    td = TensorDict.from_schema(schema, batch_size=[2])
    assert td["obs"].shape == (2, 4) and td["nested", "r"].dtype == torch.int64
    assert (td == 0).all()
    assert TensorDict.from_schema(schema, batch_size=[2], storage="shared").is_shared()
    with pytest.raises(ValueError, match="Unknown storage backend"):
        TensorDict.from_schema(schema, storage="nope")
    with pytest.raises(TypeError, match="'obs'"):
        TensorDict.from_schema({"obs": 3})


def test_dtype_bytes_param_count():
    td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.zeros(2)}}, [])
    assert td.dtype == torch.float32
    td["i"] = torch.zeros(1, dtype=torch.int64)
    assert td.dtype is None
    assert td.bytes() == 12 + 8 + 8
    td["dup"] = td["a"]
    assert td.bytes() == 40 and td.bytes(count_duplicates=False) == 28  # 0.15.3 counts duplicates by default
    assert td.param_count() == 9 and td.param_count(count_duplicates=False) == 6
    g = torch.ones(2, requires_grad=True)
    g.sum().backward()
    assert TensorDict({"g": g}).bytes() == 16


def test_check_batch_size_and_has_non_tensor():
    td = make()
    td._check_batch_size()
    assert not td._has_non_tensor
    td["b", "s"] = "text"
    assert td._has_non_tensor
    bad = TensorDict._new_unsafe({"a": torch.zeros(2)}, torch.Size([3]), None)
    with pytest.raises(RuntimeError, match="'a'"):
        bad._check_batch_size()
