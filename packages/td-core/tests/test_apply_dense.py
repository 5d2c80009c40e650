"""apply_ / named_apply / apply(batch_size=, device=) on trees of dense TensorDicts.

These calls take the flat loop of ``_apply_dense.py`` when every node is a TensorDict
and every leaf a plain tensor; a non-tensor leaf anywhere sends the same call through
the general engine. Each test checks the dense road against the documented behaviour,
and, where it helps, against the general road on the same tree plus one string leaf.
"""

import pytest
import torch

from tensordict import TensorDict


def dense_tree():
    return TensorDict(
        {
            "a": torch.arange(6.0).view(3, 2),
            "b": {"c": torch.ones(3, 4), "d": {"e": torch.zeros(3, 5, 2)}},
            "f": torch.full((3,), 7.0),
        },
        batch_size=[3],
    )


def with_string(td):
    out = td.clone()
    out["z"] = "text"  # a non-tensor leaf: the general engine takes the call
    return out


def test_apply_inplace_calls_in_depth_first_key_order_and_keeps_storage():
    td = dense_tree()
    ptrs = {k: v.data_ptr() for k, v in td.items(True, True)}
    seen = []

    def fn(x):
        seen.append(tuple(x.shape))
        return x + 1

    assert td.apply_(fn) is td
    # a, then b.c, then b.d.e, then f: the nested node's leaves at its key's position
    assert seen == [(3, 2), (3, 4), (3, 5, 2), (3,)]
    assert {k: v.data_ptr() for k, v in td.items(True, True)} == ptrs
    assert torch.equal(td["b", "d", "e"], torch.ones(3, 5, 2))
    assert torch.equal(td["f"], torch.full((3,), 8.0))


def test_apply_inplace_same_order_as_general_engine():
    dense, general = dense_tree(), with_string(dense_tree())
    orders = ([], [])
    dense.apply_(lambda x: orders[0].append(x.shape) or x)
    general.apply_(lambda x: orders[1].append(x.shape) or x)
    assert orders[0] == orders[1]


def test_apply_inplace_with_others_and_broadcast_result():
    td = dense_tree()
    other = dense_tree().apply(lambda x: x * 0 + 2)
    td.apply_(lambda x, y: x * y, other)
    assert torch.equal(td["b", "c"], torch.full((3, 4), 2.0))
    # a result that broadcasts to the leaf (same batch dims) is copied in
    td.apply_(lambda x: x.sum(-1, keepdim=True) if x.dim() == 2 else x)
    assert torch.equal(td["b", "c"], torch.full((3, 4), 8.0))


def test_apply_inplace_bad_result_names_the_key():
    td = dense_tree()
    with pytest.raises(RuntimeError, match=r"\('b', 'c'\)"):
        td.apply_(lambda x: x[:2] if x.shape[-1] == 4 else x)
    with pytest.raises(ValueError, match=r"\('b', 'd', 'e'\)"):
        td.apply_(lambda x: torch.zeros(3, 7) if x.dim() == 3 else x)


def test_apply_inplace_missing_key_in_other_raises_before_any_write():
    td = dense_tree()
    other = dense_tree().exclude(("b", "d", "e"))
    calls = []
    with pytest.raises(KeyError, match="e"):
        td.apply_(lambda x, y: calls.append(1) or x + y, other)
    # the general engine walked it: leaves before the missing one were written, as upstream
    assert len(calls) == 2


def test_apply_inplace_filter_empty_returns_none_when_top_level_wrote_nothing():
    td = TensorDict({"n": {"x": torch.zeros(2)}}, [2])
    assert td.apply_(lambda x: None, filter_empty=True) is None
    assert td.apply_(lambda x: x + 1, filter_empty=False) is td
    assert torch.equal(td["n", "x"], torch.ones(2))


def test_named_apply_keys_prefix_and_filtering():
    td = dense_tree()
    seen = []
    out = td.named_apply(lambda k, x: seen.append(k) or (None if k == "c" else x * 2))
    assert seen == ["a", "c", "e", "f"]
    assert set(out.keys(True, True)) == {"a", ("b", "d", "e"), "f"}
    nested = []
    td.named_apply(lambda k, x: nested.append(k), nested_keys=True, prefix=("root",))
    assert nested == [("root", "a"), ("root", "b", "c"), ("root", "b", "d", "e"), ("root", "f")]
    # every result None: the emptied nodes go, an empty node of the input stays
    td["empty"] = TensorDict({}, [3])
    out = td.named_apply(lambda k, x: None)
    assert list(out.keys()) == ["empty"]
    assert td.named_apply(lambda k, x: None, filter_empty=True) is None
    kept = td.named_apply(lambda k, x: None, filter_empty=False)
    assert set(kept.keys(True)) == {"b", ("b", "d"), "empty"}


def test_named_apply_matches_general_engine():
    fn = lambda k, x, y: x * y + len(k)  # noqa: E731
    dense = dense_tree()
    other = dense_tree().apply(lambda x: x + 3)
    a = dense.named_apply(fn, other, nested_keys=True)
    b = with_string(dense).named_apply(fn, with_string(other), nested_keys=True)
    assert b["z"] == "text"
    assert (a == b.exclude("z")).all()


def test_apply_batch_size_and_device_on_nested_tree():
    td = TensorDict({"a": torch.zeros(3, 4), "n": TensorDict({"x": torch.zeros(3, 2, 5)}, [3, 2])}, [3])
    out = td.apply(lambda x: x[0], batch_size=[])
    assert out.batch_size == torch.Size([])
    assert out["n"].batch_size == torch.Size([2])  # the new batch size, then the node's own extra dims
    assert out["n", "x"].shape == torch.Size([2, 5])
    with pytest.raises(RuntimeError, match=r"\('n', 'x'\)"):
        td.apply(lambda x: x[0, 0] if x.dim() == 3 else x[0], batch_size=[])
    moved = td.apply(lambda x: x + 1, device="cpu")
    assert moved.device == torch.device("cpu") and moved["n"].device == torch.device("cpu")


@pytest.mark.parametrize("depth", [1_000])
def test_deep_chains(depth):
    td = TensorDict({"x": torch.zeros(2)}, [2])
    for _ in range(depth):
        td = TensorDict({"x": torch.zeros(2), "n": td}, [2])
    td.apply_(lambda x: x.add_(1))
    keys = td.named_apply(lambda k, x: x, nested_keys=True).keys(True, True)
    assert sum(1 for _ in keys) == depth + 1
    node = td
    for _ in range(depth):
        node = node["n"]
    assert torch.equal(node["x"], torch.ones(2))
