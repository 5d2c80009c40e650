"""Behaviours of tensordict 0.15.3 that its documentation's examples (tutorials and concept
pages for td-core) rely on, checked against the same calls run on tensordict 0.15.3."""

import warnings

import pytest
import torch

from tensordict import TensorDict, lazy_stack


def _nested() -> TensorDict:
    return TensorDict(
        {"a": torch.zeros(2), "n": {"b": torch.zeros(2), "m": {"c": torch.zeros(2)}}, "s": "str"}, [2]
    )


def test_keys_membership_is_existence_even_with_leaves_only():
    td = _nested()
    # concepts/keys and TensorDictBase.keys: `in` checks that the key exists, not that it is a leaf
    assert "n" in td.keys(True, True)
    assert ("n", "m") in td.keys(include_nested=True, leaves_only=True)
    assert "n" in td.keys(leaves_only=True) and "s" in td.keys(leaves_only=True)
    assert ("n", "zz") not in td.keys(True, True) and ("a", "b") not in td.keys(True)


def test_nested_key_is_not_in_a_view_without_include_nested():
    td = _nested()
    assert ("n", "b") not in td.keys()
    assert ("n", "b") not in td.keys(leaves_only=True)
    assert ("n",) in td.keys()  # a one-element tuple is a top-level key
    with pytest.raises(TypeError):
        1 in td.keys()  # noqa: B015


def test_lazy_stack_view_finds_nested_key_without_include_nested_with_future_warning():
    stack = lazy_stack([_nested(), _nested()])
    with pytest.warns(FutureWarning, match="include_nested"):
        assert ("n", "b") in stack.keys()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ("n", "zz") not in stack.keys()
        assert ("n", "b") not in stack.keys(leaves_only=True)
        assert ("n", "b") in stack.keys(True)


def test_nested_keys_list_a_nested_tensordict_after_its_own_keys():
    # tutorials/tensordict_keys prints keys(include_nested=True): tensordict 0.15 lists
    # a nested TensorDict's key after the keys it holds; items() lists it before
    td = TensorDict({"a": torch.rand(10), "nested": {"b": torch.rand(10)}}, [10])
    td["nested", "d", "e"] = torch.rand(10)
    assert list(td.keys(include_nested=True)) == ["a", ("nested", "b"), ("nested", "d", "e"), ("nested", "d"), "nested"]
    assert [k for k, _ in td.items(include_nested=True)] == ["a", "nested", ("nested", "b"), ("nested", "d"), ("nested", "d", "e")]
    assert list(td.keys(True, True)) == ["a", ("nested", "b"), ("nested", "d", "e")]
    assert list(td.keys(True, sort=True)) == ["a", "nested", ("nested", "b"), ("nested", "d"), ("nested", "d", "e")]
    assert list(lazy_stack([td, td.clone()]).keys(True)) == list(td.keys(True))


def test_nested_keys_order_with_many_tensors_in_a_node():
    td = TensorDict({"w": {f"k{i}": torch.zeros(2) for i in range(12)}, "z": torch.zeros(2)}, [2])
    keys = list(td.keys(True))
    assert keys[:12] == [("w", f"k{i}") for i in range(12)] and keys[12:] == ["w", "z"]


def test_auto_batch_size_keep_compliant_size():
    def make() -> TensorDict:
        nested = TensorDict({"c": torch.zeros(3, 4, 6), "d": {"e": torch.zeros(3, 4, 6, 7)}}, [3, 4])
        return TensorDict({"a": torch.zeros(3, 4, 5), "b": nested}, batch_size=[])

    td = make().auto_batch_size_(batch_dims=1, keep_compliant_size=True)
    assert (td.batch_size, td["b"].batch_size, td["b", "d"].batch_size) == ((3,), (3, 4), (3, 4))
    td = make().auto_batch_size_(batch_dims=1)
    assert (td.batch_size, td["b"].batch_size, td["b", "d"].batch_size) == ((3,), (3,), (3,))
    # a nested TensorDict with fewer batch dims than asked is sized again, its own nested too
    td = make().auto_batch_size_(3, True)
    assert (td.batch_size, td["b"].batch_size, td["b", "d"].batch_size) == ((3, 4), (3, 4, 6), (3, 4, 6))
    # without batch_dims the flag changes nothing
    td = make().auto_batch_size_(keep_compliant_size=True)
    assert (td["b"].batch_size, td["b", "d"].batch_size) == ((3, 4, 6), (3, 4, 6, 7))


def test_apply_returns_none_when_every_result_is_none():
    # a function run for its side effects (print, append): tensordict 0.15 returns None
    td = TensorDict({"p": torch.ones(3, 4), "w": {"v": torch.ones(3, 4, 2)}}, [3, 4])
    seen = []
    assert td.apply(lambda x: seen.append(x.shape)) is None and len(seen) == 2
    assert td.named_apply(lambda k, x: None) is None
    assert td.apply(lambda x, y: None, td) is None
    assert lazy_stack([td, td]).apply(lambda x: None) is None
    kept = td.apply(lambda x: None, filter_empty=False)
    assert list(kept.keys(True)) == ["w"] and kept.batch_size == (3, 4)
    # an input without leaves gives an empty TensorDict, not None
    assert TensorDict({}, [3]).apply(lambda x: x).batch_size == (3,)
    td["empty"] = TensorDict({}, [3, 4])
    assert list(td.apply(lambda x: None).keys()) == ["empty"]


def test_auto_device_sets_the_common_device_of_the_leaves():
    td = TensorDict(a=torch.zeros(3), n={"b": torch.zeros(3)}, s="text", batch_size=[3])
    assert td.device is None
    assert td.auto_device_() is td
    assert td.device == torch.device("cpu") and td["n"].device == torch.device("cpu")
    assert td.get("s").device == torch.device("cpu")
    td["c"] = torch.zeros(3)  # new entries follow the device now
    assert td["c"].device == torch.device("cpu")
    mixed = TensorDict(a=torch.zeros(3), n={"b": torch.zeros(3, device="meta")}, batch_size=[3])
    assert mixed.auto_device_().device is None and mixed["n"].device is None
    assert mixed["a"].device == torch.device("cpu") and mixed["n", "b"].device == torch.device("meta")
    assert TensorDict(n={"b": torch.zeros(3, device="meta")}).auto_device_()["n"].device == torch.device("meta")
    assert TensorDict(s="x").auto_device_().device is None
    stack = lazy_stack([TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(3))])
    assert stack.auto_device_().device == torch.device("cpu")


def test_masked_select_inplace_keeps_the_identity():
    td = TensorDict(source={"a": torch.arange(12.0).view(3, 4)}, batch_size=[3])
    mask = torch.tensor([True, False, True])
    assert td.masked_select(mask).batch_size == (2,) and td.batch_size == (3,)
    assert td.masked_select(mask, inplace=True) is td
    assert td.batch_size == (2,) and td["a"][:, 0].tolist() == [0.0, 8.0]
    with pytest.raises(NotImplementedError):
        lazy_stack([td, td]).masked_select(torch.tensor([True, False]), inplace=True)


def test_to_padded_tensor_pads_the_ragged_batch_dim_and_writes_a_mask():
    stack = TensorDict.lazy_stack(
        [
            TensorDict(a=torch.zeros(3, 2), c={"d": torch.zeros(3)}, batch_size=[3]),
            TensorDict(a=torch.ones(4, 2), c={"d": torch.ones(4)}, batch_size=[4]),
        ]
    )
    td = stack.densify(layout=torch.jagged)
    assert td.batch_size == (2, -1)
    padded = td.to_padded_tensor(padding=-1.0, mask_key="mask")
    assert padded.batch_size == (2, 4) and padded["c"].batch_size == (2, 4)
    assert padded["a"].shape == (2, 4, 2) and padded["a"][0, 3].tolist() == [-1.0, -1.0]
    assert padded["c", "d"].tolist() == [[0.0, 0.0, 0.0, -1.0], [1.0, 1.0, 1.0, 1.0]]
    assert padded["mask"].tolist() == [[True, True, True, False], [True, True, True, True]]
    plain = TensorDict(a=torch.zeros(3), batch_size=[3])
    assert plain.to_padded_tensor()["a"] is plain["a"]
    with pytest.raises(RuntimeError):
        plain.to_padded_tensor(mask_key="mask")


def test_unsqueeze_out_of_range_raises_runtime_error_and_index_error():
    td = TensorDict({"a": torch.rand(3, 4)}, [3, 4])
    for dim in (3, -4):
        with pytest.raises(RuntimeError):
            td.unsqueeze(dim)
        with pytest.raises(IndexError):  # as for a tensor
            td.unsqueeze(dim)
    with pytest.raises(RuntimeError):
        lazy_stack([td, td]).unsqueeze(4)
    assert td.unsqueeze(2).batch_size == (3, 4, 1) and td.unsqueeze(-3).batch_size == (1, 3, 4)


def test_update_with_is_leaf_replaces_a_nested_tensordict_whole():
    def make() -> TensorDict:
        return TensorDict({"a": torch.zeros(3), "b": {"c": torch.arange(3.0)}}, [3])

    for source in (TensorDict({"b": TensorDict({"d": torch.zeros(3)}, [3])}, [3]), {"b": {"d": torch.zeros(3)}}):
        assert list(make().update(source).keys(True, True)) == ["a", ("b", "c"), ("b", "d")]
        replaced = make().update(source, is_leaf=lambda cls: issubclass(cls, TensorDict))
        assert list(replaced.keys(True, True)) == ["a", ("b", "d")]
    # an is_leaf that does not accept TensorDicts merges as without it
    kept = make().update({"b": {"d": torch.zeros(3)}}, is_leaf=lambda cls: issubclass(cls, torch.Tensor))
    assert list(kept.keys(True, True)) == ["a", ("b", "c"), ("b", "d")]


def test_get_of_a_key_through_a_leaf_raises_without_default():
    td = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3])
    assert td.get(("n", "zz")) is None and td.get(("zz", "y")) is None and td.get("zz") is None
    with pytest.raises(ValueError):
        td.get(("a", "zz"))
    with pytest.raises(ValueError):
        td.get(("n", "b", "zz"))
    assert td.get(("a", "zz"), None) is None and td.get(("a", "zz"), 5) == 5
