"""``update`` / ``update_``: keyword entries, batch-size changes, nested lists."""

import pytest
import torch

from tensordict import TensorDict, lazy_stack, set_list_to_stack


def test_update_keyword_entries_win_and_empty_call_is_noop():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    assert td.update() is td
    td.update({"a": torch.full((3,), 2.0), "b": torch.ones(3)}, a=torch.full((3,), 7.0))
    assert (td["a"] == 7).all() and (td["b"] == 1).all()
    td.update(outer={"inner": torch.ones(3)})
    assert (td["outer", "inner"] == 1).all()


def test_update_inplace_keyword_and_missing_key_wording():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    ref = td["a"]
    assert td.update_() is td
    td.update_(a=torch.ones(3))
    assert td["a"] is ref and (ref == 1).all()
    with pytest.raises(KeyError, match="'b' was not found"):
        td.update_(b=torch.ones(3))


def test_update_from_incompatible_batch_size_asks_for_update_batch_size():
    td0 = TensorDict(batch_size=(3,))
    td1 = TensorDict(batch_size=(4,))
    with pytest.raises(RuntimeError, match="update_batch_size"):
        td0.update(td1)
    td0.update(td1, update_batch_size=True)
    assert td0.batch_size == (4,)
    # a source of smaller (compatible) batch size is fine
    td = TensorDict(batch_size=(3,))
    td.update(TensorDict({"x": torch.zeros(3)}, []))
    assert td["x"].shape == (3,)


def test_update_batch_size_resizes_nested_tensordicts_in_place():
    t = torch.zeros(2, 3, 4)
    dest = TensorDict(a=t, b=TensorDict(c=t, batch_size=(2, 3)), batch_size=(2,))
    nested = dest["b"]
    src = TensorDict(a=torch.ones(5, 4), b=TensorDict(c=torch.ones(5, 2, 4), batch_size=(5, 2)), batch_size=(5,))
    dest.update(src, update_batch_size=True)
    assert dest.batch_size == (5,)
    assert dest["b"] is nested and nested.batch_size == (5, 2)
    assert (dest["b", "c"] == 1).all()
    # with is_leaf saying "leaf" for every class, nested TensorDicts are replaced whole
    dest2 = TensorDict(b=TensorDict(c=t, batch_size=(2, 3)), batch_size=(2,))
    dest2.update(TensorDict(b=TensorDict(c=torch.ones(2, 2, 4), batch_size=(2, 2)), batch_size=(2,)),
                 update_batch_size=True, is_leaf=lambda cls: True)
    assert dest2["b"].batch_size == (2, 2)


def test_update_batch_size_refusals():
    src = TensorDict(a=torch.zeros(4), batch_size=(4,))
    with pytest.raises(RuntimeError, match="inplace"):
        TensorDict(batch_size=(3,)).update(src, update_batch_size=True, inplace=True)
    with pytest.raises(RuntimeError, match="keys_to_update"):
        TensorDict(a=torch.zeros(3), batch_size=(3,)).update(src, update_batch_size=True, keys_to_update=["a"])
    with pytest.raises(RuntimeError, match="locked"):
        TensorDict(batch_size=(3,), lock=True).update(src, update_batch_size=True)
    stack = lazy_stack([TensorDict(batch_size=(3,)), TensorDict(batch_size=(3,))]).lock_()
    with pytest.raises(RuntimeError, match="lock"):
        stack.update(lazy_stack([src, src]), update_batch_size=True)


def test_nested_number_lists_become_tensors_under_list_to_stack():
    with set_list_to_stack(True):
        td = TensorDict({"a": {"d": [[[0]] * 3] * 2}}, [2, 3])
        assert isinstance(td.get(("a", "d")), torch.Tensor)
        td.update({"a": {"b": [[[1]] * 3] * 2}})
        assert td["a", "b"].shape == (2, 3, 1)
        assert ("a", "d") in td.keys(True)


def test_a_tensorclass_with_a_shorter_batch_size_adopts_the_parents():
    pytest.importorskip("tensordict.tensorclass")  # a sibling distribution
    from tensordict import tensorclass

    @tensorclass
    class Point:
        x: torch.Tensor

    p = Point(x=torch.zeros(4, 5, 2))  # batch_size [] by default
    td = TensorDict(p=p, batch_size=(4, 5))
    assert td["p"].batch_size == (4, 5)
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        TensorDict(p=Point(x=torch.zeros(3)), batch_size=(4,))


def test_repeat_keeps_dim_names():
    td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3], names=["x", "y"])
    assert td.repeat(1, 2).names == ["x", "y"]
    assert td.repeat(2, 1, 2).names == [None, None, None]


def test_grad_and_data_of_a_locked_tensordict_are_locked():
    td = TensorDict({"a": torch.ones(3, requires_grad=True)}, [3])
    (td["a"] * 2).sum().backward()
    assert not td.grad.is_locked and not td.data.is_locked
    td.lock_()
    assert td.grad.is_locked and td.data.is_locked
    assert td.grad is not td.grad
