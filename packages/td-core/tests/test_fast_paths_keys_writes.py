"""The dense-TensorDict fast paths of select/exclude, flatten/unflatten_keys, the key
views, ``set_`` and ``td[slice] = other`` give what the general paths give: the same
results, key order and errors (issue 21 made them cheaper, not different)."""

import pytest
import torch

from tensordict import NonTensorData, TensorDict, lazy_stack


def _chain(depth):
    td = TensorDict({"leaf": torch.zeros(3)}, [3])
    for i in range(depth):
        td = TensorDict({f"l{i}": td, "x": torch.full((3,), float(i))}, [3])
    return td


# ------------------------------------------------------------------ select / exclude
def test_select_str_keys_order_names_and_sharing():
    td = TensorDict({k: torch.zeros(2) for k in "abcde"}, [2], names=["n"])
    out = td.select("d", "a", "d")
    assert list(out.keys()) == ["d", "a"]
    assert out["a"] is td["a"]
    assert out.names == ["n"] and out.batch_size == td.batch_size


def test_select_missing_key_strict_and_not():
    td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, [2])
    with pytest.raises(KeyError, match="zz"):
        td.select("a", "zz")
    assert list(td.select("zz", "a", strict=False).keys()) == ["a"]
    # a nested key after a missing str key: the general path reports the missing key
    with pytest.raises(KeyError, match="zz"):
        td.select("zz", ("b", "c"))
    assert list(td.select("a", ("b", "c")).keys(True, True)) == ["a", ("b", "c")]
    assert list(td.select(["a"]).keys()) == ["a"]


def test_select_bad_key_type_is_reported_before_a_missing_key():
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(TypeError):
        td.select("zz", 3)


def test_exclude_str_keys_keeps_order_and_ignores_missing():
    td = TensorDict({k: torch.zeros(2) for k in "abcde"}, [2])
    out = td.exclude("d", "zz", "b", "d")
    assert list(out.keys()) == ["a", "c", "e"]
    assert list(td.keys()) == list("abcde")
    nested = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2), "d": torch.zeros(2)}}, [2])
    assert list(nested.exclude("a", ("b", "c")).keys(True, True)) == [("b", "d")]


# ------------------------------------------------------------------ flatten / unflatten
def test_flatten_unflatten_round_trip_deeper_than_the_recursion_limit():
    td = _chain(1500)
    flat = td.flatten_keys()
    assert len(flat.keys()) == 1501
    back = flat.unflatten_keys()
    deep = tuple(f"l{i}" for i in reversed(range(1500))) + ("leaf",)
    assert back.get(deep) is td.get(deep)
    assert list(back.keys(True, True)) == list(td.keys(True, True))


def test_flatten_keys_collision_is_a_key_error():
    td = TensorDict({"a.b": torch.zeros(2), "a": {"b": torch.zeros(2)}}, [2])
    with pytest.raises(KeyError, match="collide"):
        td.flatten_keys()
    assert list(td.flatten_keys("/").keys()) == ["a.b", "a/b"]


@pytest.mark.parametrize("sep", [".", "::", "-"])
def test_unflatten_keys_parents_made_once_and_merged(sep):
    src = {
        sep.join(["a", "b", "c"]): torch.zeros(2),
        sep.join(["a", "d"]): torch.ones(2),
        sep.join(["a", "b", "e"]): torch.ones(2),
        "f": torch.zeros(2),
        sep.join(["", "g"]): torch.zeros(2),
    }
    out = TensorDict(src, [2]).unflatten_keys(sep)
    assert list(out.keys(True, True)) == [("a", "b", "c"), ("a", "b", "e"), ("a", "d"), "f", ("", "g")]
    assert out.batch_size == torch.Size([2])
    assert out["a", "b"].batch_size == torch.Size([2])


def test_unflatten_keys_merges_a_nested_tensordict_with_flat_keys():
    td = TensorDict({"a": {"x": torch.zeros(2)}, "a.y": torch.ones(2), "a.z.w": torch.ones(2)}, [2])
    out = td.unflatten_keys()
    assert sorted(out.keys(True, True), key=str) == [("a", "x"), ("a", "y"), ("a", "z", "w")]


def test_unflatten_keys_under_a_leaf_is_a_key_error():
    td = TensorDict({"a": torch.zeros(2), "a.b.c": torch.ones(2)}, [2])
    with pytest.raises(KeyError, match="a.b.c"):
        td.unflatten_keys()
    td = TensorDict({"a.b": torch.zeros(2), "a.b.c": torch.ones(2)}, [2])
    with pytest.raises(KeyError, match="a.b.c"):
        td.unflatten_keys()


def test_unflatten_keys_multi_char_separator_splits_left_to_right():
    out = TensorDict({"a...b": torch.zeros(2)}, [2]).unflatten_keys("..")
    assert list(out.keys(True, True)) == [("a", ".b")]


# ------------------------------------------------------------------ key views
def test_len_of_nested_views_matches_their_iteration():
    td = TensorDict(
        {
            "a": torch.zeros(2),
            "n": NonTensorData("x", batch_size=[2]),
            "e": TensorDict({}, [2]),
            "s": {"t": torch.zeros(2), "u": {"v": torch.zeros(2)}},
            "w": {f"k{i}": torch.zeros(2) for i in range(12)},
        },
        [2],
    )
    td["lz"] = lazy_stack([TensorDict({"p": torch.zeros(1)}), TensorDict({"p": torch.zeros(1)})])
    for nested in (False, True):
        for leaves in (False, True):
            for is_leaf in (None, lambda t: True):
                view = td.keys(nested, leaves, is_leaf=is_leaf)
                assert len(view) == len(list(view)), (nested, leaves)
                items = td.items(nested, leaves, is_leaf=is_leaf)
                # same keys; the order differs as in tensordict 0.15 (keys list a nested
                # TensorDict after its own keys, items before)
                assert sorted((k for k, _ in items), key=repr) == sorted(view, key=repr)


def test_nested_keys_of_a_deep_chain_in_order():
    td = _chain(3)
    assert list(td.keys(True, True)) == [("l2", "l1", "l0", "leaf"), ("l2", "l1", "x"), ("l2", "x"), "x"]
    # a nested TensorDict's key comes after its own keys, as in tensordict 0.15
    assert list(td.keys(True)) == [
        ("l2", "l1", "l0", "leaf"), ("l2", "l1", "l0"), ("l2", "l1", "x"), ("l2", "l1"), ("l2", "x"), "l2", "x",
    ]


# ------------------------------------------------------------------ set_
def test_set_inplace_broadcasts_and_refuses_what_does_not():
    td = TensorDict({"a": torch.zeros(4, 3), "b": {"c": torch.zeros(4, 3)}}, [4])
    a = td["a"]
    td.set_("a", torch.arange(3.0))
    assert td["a"] is a and (a == torch.arange(3.0)).all()
    td.set_(("b", "c"), torch.ones(4, 3))
    assert (td["b", "c"] == 1).all()
    with pytest.raises(ValueError, match="Failed to update"):
        td.set_("a", torch.ones(5, 3))
    with pytest.raises(ValueError, match="Failed to update"):
        td.set_(("b", "c"), torch.ones(1, 4, 3))
    with pytest.raises(KeyError):
        td.set_(("b", "zz"), torch.ones(4, 3))
    with pytest.raises(KeyError):
        td.set_("zz", torch.ones(4, 3))


def test_set_inplace_on_a_leaf_that_requires_grad_raises_as_torch_does():
    td = TensorDict({"a": torch.zeros(2, requires_grad=True)}, [2])
    with pytest.raises(RuntimeError, match="in-place"):
        td.set_("a", torch.ones(2))


def test_nested_set_through_dense_tensordicts():
    td = _chain(5)
    key = ("l4", "l3", "l2", "l1", "l0", "leaf")
    v = torch.ones(3)
    td.set(key, v)
    assert td.get(key) is v
    with pytest.raises(RuntimeError):
        td.set(key, torch.ones(4))
    td.set(("l4", "new", "deeper"), v)  # missing levels are created by the general path
    assert td["l4", "new", "deeper"] is v


# ------------------------------------------------------------------ td[slice] = other
def test_setitem_slice_writes_every_leaf():
    td = TensorDict({"a": torch.zeros(10, 2), "b": torch.zeros(10)}, [10])
    sub = TensorDict({"a": torch.ones(3, 2), "b": torch.full((3,), 2.0)}, [3])
    td[2:5] = sub
    assert (td["a"][2:5] == 1).all() and (td["a"][:2] == 0).all()
    assert (td["b"][2:5] == 2).all()
    td[7] = TensorDict({"a": torch.full((2,), 5.0), "b": torch.tensor(6.0)}, [])
    assert (td["a"][7] == 5).all() and td["b"][7] == 6


def test_setitem_slice_feature_mismatch_writes_nothing():
    td = TensorDict({"a": torch.zeros(10, 2), "b": torch.zeros(10, 2)}, [10])
    sub = TensorDict({"a": torch.ones(3, 2), "b": torch.ones(3, 5)}, [3])
    with pytest.raises(RuntimeError, match="feature shape"):
        td[2:5] = sub
    assert (td["a"] == 0).all()  # the first key was not written either


def test_setitem_slice_broadcast_feature_and_batch_mismatch():
    td = TensorDict({"a": torch.zeros(10, 2)}, [10])
    td[0:3] = TensorDict({"a": torch.ones(3, 1)}, [3])
    assert (td["a"][:3] == 1).all()
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        td[0:3] = TensorDict({"a": torch.ones(4, 2)}, [4])


def test_setitem_slice_new_key_is_preallocated():
    td = TensorDict({"a": torch.zeros(4)}, [4])
    td[1:3] = TensorDict({"a": torch.ones(2), "z": torch.ones(2, 3)}, [2])
    assert td["z"].shape == (4, 3) and (td["z"][1:3] == 1).all() and (td["z"][0] == 0).all()


# ------------------------------------------------------------------ consolidate
def test_consolidate_deeper_than_the_recursion_limit():
    td = _chain(1200)
    td["note"] = "kept"
    out = td.consolidate()
    assert out.is_consolidated() and out.is_locked
    deep = tuple(f"l{i}" for i in reversed(range(1200))) + ("leaf",)
    assert out.get(deep).untyped_storage().data_ptr() == out["x"].untyped_storage().data_ptr()
    assert (out.get(deep) == td.get(deep)).all() and out["note"] == "kept"
    assert out.to("cpu").is_consolidated()
    inplace = td.clone().consolidate(inplace=True)
    assert inplace.is_consolidated()


def test_consolidate_nested_and_mixed_dtypes_keep_layout_and_values():
    td = TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3),
            "b": {"c": torch.arange(2), "d": torch.tensor([True, False])},
            "e": torch.ones(2, 1, dtype=torch.float16),
        },
        [2],
    )
    out = td.consolidate()
    assert list(out.keys(True, True)) == list(td.keys(True, True))
    for key in td.keys(True, True):
        assert out[key].dtype == td[key].dtype and (out[key] == td[key]).all()
    assert out["b"].is_locked and out.is_consolidated()
    out2 = td.exclude("e").consolidate()  # one dtype per leaf group: float32, int64, bool
    assert out2["b", "c"].dtype == torch.int64
