"""clone/copy_/detach/requires_grad/zero_/fill_/contiguous, locking, comparisons, repr."""

import pytest
import torch

from tensordict import TensorDict, parse_tensor_dict_string


def make():
    return TensorDict({"a": torch.randn(3, 2), "b": {"c": torch.randn(3)}, "s": "x"}, [3])


def test_detach_requires_grad_zero_fill():
    td = make().requires_grad_()
    assert td["a"].requires_grad and td["b", "c"].requires_grad
    d = td.detach()
    assert not d["a"].requires_grad
    td2 = make()
    td2.zero_()
    assert (td2["a"] == 0).all() and (td2["b", "c"] == 0).all()
    td2.fill_("a", 3.0)
    assert (td2["a"] == 3).all()
    td2.fill_("b", 2.0)
    assert (td2["b", "c"] == 2).all()
    td3 = make()
    td3["a"].requires_grad_()
    td3.detach_()
    assert not td3["a"].requires_grad


def test_copy_():
    td = make()
    other = make()
    td.copy_(other)
    assert (td == other).all()


def test_contiguous():
    td = TensorDict({"a": torch.randn(4, 3).t()}, [3])
    assert not td["a"].is_contiguous()
    assert td.contiguous()["a"].is_contiguous()


def test_is_contiguous_checks_nested_tensor_leaves_and_is_false_for_a_lazy_stack():
    from tensordict import lazy_stack

    td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.randn(4, 3).t()}, "s": "text"}, [3])
    assert not td.is_contiguous()  # the nested leaf is a transposed view
    assert td.contiguous().is_contiguous()  # non-tensor data does not count
    dense = TensorDict({"a": torch.zeros(3)}, [3])
    assert dense.is_contiguous()
    assert not lazy_stack([dense, dense]).is_contiguous()


def test_data_ptr():
    td = make()
    ptrs = td.data_ptr()
    assert ptrs["a"].item() == td["a"].data_ptr()


def test_lock():
    td = make()
    td.lock_()
    assert td.is_locked and td["b"].is_locked
    before = td.clone()
    for op in [
        lambda: td.set("new", torch.zeros(3)),
        lambda: td.__setitem__("a", torch.zeros(3, 2)),
        lambda: td.rename_key_("a", "z"),
        lambda: td.__delitem__("a"),
        lambda: td.pop("a"),
        lambda: td.update({"new": torch.zeros(3)}),
        lambda: td["b"].set("new", torch.zeros(3)),
        lambda: td.clear(),
    ]:
        with pytest.raises(RuntimeError, match="locked"):
            op()
    assert (td == before).all() and set(td.keys(True)) == set(before.keys(True))
    td.set_("a", torch.ones(3, 2))  # in-place writes are allowed
    td[0] = before[0]
    with td.unlock_():
        td.set("key", torch.zeros(3))
    assert td.is_locked
    td.unlock_()
    with td.lock_():
        assert td.is_locked
    assert not td.is_locked


def test_comparisons():
    td = TensorDict({"a": torch.tensor([1.0, 2.0]), "b": {"c": torch.tensor([3.0, 4.0])}}, [2])
    eq = td == td.clone()
    assert isinstance(eq, TensorDict) and eq["a"].dtype == torch.bool and eq.all()
    assert (td != td.clone()).any() is False
    assert (td > 0).all() and (td < 3)["a"].tolist() == [True, True]
    assert (td >= 2)["b", "c"].tolist() == [True, True]
    assert (td <= 1)["a"].tolist() == [True, False]
    assert (td == torch.tensor([1.0, 0.0]))["a"].tolist() == [True, False]
    assert (td == 1).any()
    assert (td == 1).any(dim=0)["a"].item()
    assert (td > 0).all(dim=0)["a"].item()


def test_bool_raises():
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(make())


def test_repr_format():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    assert repr(td) == (
        "TensorDict(\n    fields={\n        a: Tensor(shape=torch.Size([3]), device=cpu, "
        "dtype=torch.float32, is_shared=False)},\n    batch_size=torch.Size([3]),\n"
        "    device=None,\n    is_shared=False)"
    )


def test_repr_nested_and_parse_roundtrip():
    td = TensorDict(
        {"a": torch.zeros(3, 2, dtype=torch.int16), "nested": {"x y": torch.ones(3, 1), "s": "hi"}, "e": {}}, [3]
    )
    text = repr(td)
    assert "        nested: TensorDict(\n            fields={" in text
    back = parse_tensor_dict_string(text)
    assert set(back.keys(True, True)) == set(td.keys(True, True))
    for k in td.keys(True, True):
        v, w = td.get(k), back.get(k)
        if isinstance(v, torch.Tensor):
            assert v.shape == w.shape and v.dtype == w.dtype
    assert back["nested"].batch_size == td["nested"].batch_size
    with pytest.raises(ValueError):
        parse_tensor_dict_string("not a tensordict")
