"""Nested keys and the keys/values/items views."""

import pytest
import torch

from tensordict import TensorDict, is_leaf_nontensor, unravel_key, unravel_key_list


def make():
    return TensorDict(
        {"a": torch.zeros(3), "b": {"c": torch.ones(3), "d": {"e": torch.ones(3)}}, "s": "x"}, [3]
    )


def test_unravel_key():
    assert unravel_key("a") == "a"
    assert unravel_key(("a",)) == "a"
    assert unravel_key(("a", ("b", ("c",)))) == ("a", "b", "c")
    assert unravel_key_list(["a", ("b", ("c",))]) == ["a", ("b", "c")]


def test_nested_set_get_unravel():
    data = TensorDict({}, [3, 4])
    data["nested", "key"] = torch.zeros(3, 4)
    data["nested", ("supernested", ("key",))] = torch.zeros(3, 4)
    assert (data["nested", "supernested", "key"] == 0).all()
    assert (("nested",), "supernested", (("key",),)) in data.keys(include_nested=True)


def test_keys_views():
    td = make()
    assert list(td.keys()) == ["a", "b", "s"]
    assert set(td.keys(True)) == {"a", "b", ("b", "c"), ("b", "d"), ("b", "d", "e"), "s"}
    # non-tensor data is not a leaf unless is_leaf says so (tensordict 0.15)
    assert set(td.keys(True, True)) == {"a", ("b", "c"), ("b", "d", "e")}
    assert set(td.keys(True, True, is_leaf=is_leaf_nontensor)) == {"a", ("b", "c"), ("b", "d", "e"), "s"}
    assert ("b", "c") in td.keys(True)
    assert ("b", "c") not in td.keys()  # a nested key needs include_nested (tensordict 0.15)
    with pytest.raises(TypeError, match="always strings"):
        42 in td.keys()  # noqa: B015
    assert "b" in td.keys(True, True)  # membership is existence, as in tensordict 0.15
    assert len(td.keys(True, True)) == 3
    assert td.keys(sort=True) == ["a", "b", "s"]
    keys = td.keys()
    td["z"] = torch.zeros(3)
    assert "z" in keys  # live view


def test_values_items():
    td = make()
    items = dict(td.items(True, True, is_leaf=is_leaf_nontensor))
    assert items["s"].data == "x"  # a NonTensorData (== "x" is False, as tensordict 0.15)
    assert torch.equal(items[("b", "d", "e")], torch.ones(3))
    assert len(list(td.values())) == 3


def test_is_leaf():
    td = make()
    keys = set(td.keys(True, True, is_leaf=lambda cls: issubclass(cls, TensorDict) or not issubclass(cls, TensorDict)))
    assert "b" in keys


def test_contains_and_sorted_keys():
    td = make()
    assert "a" in td and ("b", "c") in td and "zz" not in td
    assert td.sorted_keys == ["a", "b", "s"]


@pytest.mark.parametrize("bad", [1, None, (), ("a", 1), 1.5])
def test_bad_keys(bad):
    td = make()
    with pytest.raises((TypeError, ValueError)):
        td.get(bad)
    with pytest.raises((TypeError, ValueError)):
        td.set(bad, torch.zeros(3))


def test_nested_keys_have_no_recursion_limit_on_depth():
    # a 1,000-deep chain of TensorDicts (more levels than Python's default recursion limit
    # allows frames): listing and counting nested keys walk it with an explicit stack
    import sys

    depth = sys.getrecursionlimit() + 10
    key = tuple(f"l{i}" for i in range(depth))
    td = TensorDict(batch_size=[2])
    td.set(key + ("leaf",), torch.zeros(2))
    td.set("top", torch.ones(2))
    keys = list(td.keys(include_nested=True))
    assert len(keys) == depth + 2 == len(td.keys(include_nested=True))
    # children first, as in tensordict 0.15
    assert keys[0] == key + ("leaf",) and keys[1] == key and keys[-2] == "l0" and keys[-1] == "top"
    assert list(td.keys(include_nested=True, leaves_only=True)) == [key + ("leaf",), "top"]
