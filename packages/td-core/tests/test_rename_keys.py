"""``TensorDictBase.rename_keys(mapping, *, strict=True)``: several keys renamed at once."""

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict


def sample():
    return TensorDict(
        {
            "a": torch.zeros(2),
            "b": torch.ones(2),
            "n": {"c": torch.full((2,), 2.0)},
            "e": {},
            "s": NonTensorData("hi", batch_size=[2]),
        },
        [2],
        names=["x"],
    )


def test_swap_and_chain_read_sources_first():
    td = sample()
    out = td.rename_keys({"a": "b", "b": "a"})
    assert out["a"] is td["b"] and out["b"] is td["a"]
    out = td.rename_keys({"a": "b", "b": "c"})
    assert sorted(out.keys()) == ["b", "c", "e", "n", "s"]
    assert out["b"] is td["a"] and out["c"] is td["b"]


def test_source_untouched_result_unlocked_and_metadata_kept():
    td = sample().lock_()
    out = td.rename_keys({"a": "z"})
    assert td.is_locked and "a" in td.keys() and "z" not in td.keys()
    assert not out.is_locked
    assert out.batch_size == td.batch_size and out.names == ["x"] and out.device == td.device
    out["new"] = torch.zeros(2)  # a new tree: writing to it leaves td alone
    assert "new" not in td.keys()
    assert out["n"] is not td["n"] and out["n", "c"] is td["n", "c"]


def test_nested_moves_and_emptied_nodes_removed():
    td = sample()
    out = td.rename_keys({("n", "c"): "c", "s": ("m", "s")})
    assert "n" not in out.keys()  # emptied by the renaming
    assert "e" in out.keys()  # empty before: kept
    assert out["c"] is td["n", "c"]
    assert out["m", "s"] == "hi"
    out = td.rename_keys({"n": ("deep", "er")})
    assert out["deep", "er", "c"] is td["n", "c"]


def test_strict():
    td = sample()
    with pytest.raises(KeyError, match="'q'"):
        td.rename_keys({"q": "r"})
    with pytest.raises(KeyError, match=r"\('n', 'q'\)"):
        td.rename_keys({("n", "q"): "r"})
    assert sorted(td.rename_keys({"q": "r", "a": "z"}, strict=False).keys()) == ["b", "e", "n", "s", "z"]
    with pytest.raises(TypeError, match="mapping"):
        td.rename_keys([("a", "b")])


def test_lazy_stack_renames_each_stacked_tensordict():
    stack = LazyStackedTensorDict(TensorDict({"a": 1}), TensorDict({"a": 2, "b": 3}))
    out = stack.rename_keys({"b": "c", "a": "z"})
    assert isinstance(out, LazyStackedTensorDict)
    assert [sorted(t.keys()) for t in out.tensordicts] == [["z"], ["c", "z"]]
    assert [sorted(t.keys()) for t in stack.tensordicts] == [["a"], ["a", "b"]]
    with pytest.raises(KeyError, match="'q'"):
        stack.rename_keys({"q": "r"})


def test_lazy_stack_removes_a_nested_tensordict_only_if_emptied_in_all():
    stack = LazyStackedTensorDict(
        TensorDict({"n": {"c": 1}}), TensorDict({"n": {"c": 2, "d": 3}})
    )
    out = stack.rename_keys({("n", "c"): "c"})
    assert [sorted(t.keys(True, True), key=str) for t in out.tensordicts] == [["c"], [("n", "d"), "c"]]
    assert "n" in out.tensordicts[0].keys()  # emptied there, kept: stacked TensorDict 1 still holds it
    out = stack.rename_keys({("n", "c"): "c", ("n", "d"): "d"}, strict=False)
    assert all("n" not in t.keys() for t in out.tensordicts)
