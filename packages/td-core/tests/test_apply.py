"""apply / named_apply / apply_: leaf by leaf against the same function on each tensor."""

import pytest
import torch

from tensordict import NonTensorData, TensorDict


def make_td(device="cpu"):
    return TensorDict(
        {
            "a": torch.arange(12.0).view(3, 4),
            "b": {"c": torch.ones(3, 2, dtype=torch.int64), "d": {"e": torch.zeros(3, 5, 1)}},
            "s": "text",
        },
        batch_size=[3],
        device=device,
    )


def leaves(td):
    return {k: v for k, v in td.items(True, True) if isinstance(v, torch.Tensor)}


def test_apply_matches_leaf_by_leaf(device):
    td = make_td(device)
    out = td.apply(lambda x: x * 2 + 1)
    assert out.batch_size == td.batch_size
    assert out.device == td.device
    for key, value in leaves(td).items():
        torch.testing.assert_close(out[key], value * 2 + 1)
    assert set(out.keys(True, True)) == set(td.keys(True, True))
    assert out["s"] == "text"
    assert isinstance(out["b"], TensorDict) and out["b", "d"].batch_size == torch.Size([3])


def test_apply_returns_new_storage_and_keeps_input():
    td = make_td()
    before = td["a"].clone()
    out = td.apply(lambda x: x + 1)
    assert torch.equal(td["a"], before)
    assert out["a"].data_ptr() != td["a"].data_ptr()


def test_apply_none_drops_leaf_and_emptied_subtd():
    td = make_td()
    out = td.apply(lambda x: x if x.dtype == torch.float32 else None)
    assert "a" in out.keys()
    assert ("b", "c") not in out.keys(True)
    assert ("b", "d", "e") in out.keys(True)
    out = td.apply(lambda x: x if x.ndim == 2 and x.shape[1] == 4 else None)
    # "b" lost every leaf: dropped with the default filter_empty=None
    assert "b" not in out.keys()


def test_readme_filter_example():
    data = TensorDict(
        {"a": torch.tensor(1.0, dtype=torch.float), "b": torch.tensor(1, dtype=torch.int64)}, []
    )
    data_float = data.apply(lambda x: x if x.dtype == torch.float else None)
    assert "b" not in data_float
    assert "a" in data_float


def test_readme_uniform_example():
    data = TensorDict(
        {"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5)}, batch_size=[3, 4]
    )
    out = data.apply(lambda tensor: tensor.uniform_())
    assert out["key 1"].shape == (3, 4, 5)
    assert ((out["key 1"] >= 0) & (out["key 1"] < 1)).all()


def test_filter_empty_modes():
    td = TensorDict(
        {"a": torch.zeros(2), "empty": TensorDict({}, [2]), "n": {"x": torch.zeros(2)}}, [2]
    )
    drop_x = lambda x: None  # noqa: E731
    default = td.apply(drop_x)
    # already-empty sub-TensorDicts survive; the one emptied by fn does not
    assert "empty" in default.keys() and "n" not in default.keys()
    keep = td.apply(drop_x, filter_empty=False)
    assert "empty" in keep.keys() and "n" in keep.keys() and keep["n"].is_empty()
    assert td.apply(drop_x, filter_empty=True) is None
    some = td.apply(lambda x: x, filter_empty=True)
    assert "empty" not in some.keys() and ("n", "x") in some.keys(True)
    # all-None without filter_empty=True still returns an (empty) TensorDict
    assert default.is_empty() and default.batch_size == td.batch_size


def test_apply_bad_leading_dims_raises():
    td = make_td()
    with pytest.raises(RuntimeError, match=r"key 'a'.*\(\).*batch_size \(3,\)"):
        td.apply(lambda x: x.sum())
    with pytest.raises(RuntimeError, match=r"key \('b', 'd', 'e'\)"):
        td.apply(lambda x: x if x.ndim != 3 else x[:2])
    with pytest.raises(RuntimeError, match=r"shape \(3, 4\).*batch_size \(2,\)"):
        td.apply(lambda x: x, batch_size=[2])
    td2 = TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    with pytest.raises(RuntimeError, match="key 'a'"):
        td2.apply(lambda x: x.t())


def test_apply_batch_size_change():
    td = make_td()
    out = td.apply(lambda x: x[:2], batch_size=[2])
    assert out.batch_size == torch.Size([2])
    assert out["b"].batch_size == torch.Size([2])
    torch.testing.assert_close(out["a"], td["a"][:2])
    assert out["s"] == "text" and out.get("s").data == "text"
    # nested TensorDicts keep their extra batch dims
    td = TensorDict(
        {"x": torch.zeros(3, 4), "n": TensorDict({"y": torch.zeros(3, 4, 5)}, [3, 4])}, [3, 4]
    )
    out = td.apply(lambda x: x.reshape(12, *x.shape[2:]), batch_size=[12])
    assert out.batch_size == torch.Size([12])
    assert out["n"].batch_size == torch.Size([12])
    assert out["n", "y"].shape == (12, 5)


def test_apply_several_tensordicts():
    td = make_td()
    other = td.apply(lambda x: x + 10)
    third = td.apply(lambda x: x * 3)
    out = td.apply(lambda x, y: x + y, other)
    for key, value in leaves(td).items():
        torch.testing.assert_close(out[key], value + other[key])
    out = td.apply(lambda x, y, z: x - y + z, other, third)
    for key, value in leaves(td).items():
        torch.testing.assert_close(out[key], value - other[key] + third[key])
    assert out["s"] == "text"


def test_apply_others_missing_key_raises_or_uses_default():
    a = TensorDict({"x": torch.ones(2), "n": {"y": torch.ones(2)}}, [2])
    b = TensorDict({"x": torch.ones(2)}, [2])
    with pytest.raises(KeyError, match="'n'"):
        a.apply(lambda x, y: x + y, b)
    b2 = TensorDict({"x": torch.ones(2), "n": {}}, [2])
    with pytest.raises(KeyError, match=r"\('n', 'y'\)"):
        a.apply(lambda x, y: x + y, b2)
    out = a.apply(lambda x, y: x + y, b, default=torch.zeros(2))
    torch.testing.assert_close(out["n", "y"], torch.ones(2))
    torch.testing.assert_close(out["x"], torch.full((2,), 2.0))
    # keys only in the other TensorDict are not walked (tensordict 0.15.3; issue 32)
    c = TensorDict({"x": torch.ones(2), "z": torch.full((2,), 5.0)}, [2])
    out = b.apply(lambda x, y: x + y, c, default=0.0)
    assert "z" not in out.keys()


def test_apply_others_type_mismatch():
    a = TensorDict({"x": {"y": torch.ones(2)}}, [2])
    b = TensorDict({"x": torch.ones(2)}, [2])
    with pytest.raises(TypeError, match="'x'"):
        a.apply(lambda x, y: x, b)
    with pytest.raises(TypeError, match="must be TensorDicts"):
        a.apply(lambda x, y: x, torch.ones(2))


def test_apply_inplace_and_apply_():
    td = make_td()
    a = td["a"]
    ptr = a.data_ptr()
    out = td.apply(lambda x: x + 1, inplace=True)
    assert out is td
    assert td["a"].data_ptr() == ptr
    torch.testing.assert_close(a, torch.arange(12.0).view(3, 4) + 1)
    assert td.apply_(lambda x: x * 0) is td
    assert (a == 0).all() and (td["b", "c"] == 0).all()
    # apply_ with another TensorDict
    other = td.apply(lambda x: x + 2)
    td.apply_(lambda x, y: x + y, other)
    assert (a == 2).all()
    with pytest.raises(RuntimeError, match="key 'a'"):
        td.apply_(lambda x: torch.zeros(7))


def test_apply_out():
    td = make_td()
    out = td.apply(lambda x: x * 0)
    ptr = out["a"].data_ptr()
    res = td.apply(lambda x: x + 1, out=out)
    assert res is out and out["a"].data_ptr() == ptr
    torch.testing.assert_close(out["a"], td["a"] + 1)
    torch.testing.assert_close(out["b", "d", "e"], td["b", "d", "e"] + 1)
    # keys missing from ``out`` are created
    empty = TensorDict({}, [3])
    td.apply(lambda x: x * 2, out=empty)
    torch.testing.assert_close(empty["b", "c"], td["b", "c"] * 2)
    assert empty["s"] == "text"


def test_named_apply():
    td = make_td()
    seen = []
    td.named_apply(lambda k, x: seen.append(k), nested_keys=True)
    assert seen == ["a", ("b", "c"), ("b", "d", "e")]
    seen.clear()
    td.named_apply(lambda k, x: seen.append(k))
    assert seen == ["a", "c", "e"]
    out = td.named_apply(lambda k, x: x if k != "c" else None)
    assert ("b", "c") not in out.keys(True) and "a" in out.keys()
    out = td.named_apply(lambda k, x, y: x + y if k == "a" else x, td, nested_keys=True)
    torch.testing.assert_close(out["a"], td["a"] * 2)
    seen.clear()
    td.named_apply(lambda k, x: seen.append(k), nested_keys=True, prefix=("root",))
    assert seen[0] == ("root", "a")


def test_call_on_nested_and_is_leaf():
    td = make_td()
    calls = []

    def fn(x):
        calls.append(type(x).__name__)
        return x

    td.apply(fn, call_on_nested=True)
    assert calls == ["Tensor", "TensorDict"]
    out = td.apply(
        lambda x: x.exclude("c") if isinstance(x, TensorDict) else x, call_on_nested=True
    )
    assert ("b", "c") not in out.keys(True) and ("b", "d", "e") in out.keys(True)
    calls.clear()
    td.apply(fn, is_leaf=lambda cls: issubclass(cls, (torch.Tensor, TensorDict)))
    assert calls == ["Tensor", "TensorDict"]


def test_apply_device_names_lock_kwargs(device):
    td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3], names=["x", "y"])
    out = td.apply(lambda x: x + 1)
    assert out.names == ["x", "y"]
    out = td.apply(lambda x: x + 1, names=["u", "v"])
    assert out.names == ["u", "v"]
    out = td.apply(lambda x: x.to(device), device=device)
    assert out.device == device and out["a"].device.type == device.type
    td.lock_()
    assert td.apply(lambda x: x, propagate_lock=True).is_locked
    assert not td.apply(lambda x: x).is_locked
    td.unlock_()
    assert td.apply(lambda x: x, lock=True).is_locked
    with pytest.raises(TypeError, match="unexpected keyword"):
        td.apply(lambda x: x, bogus=1)


def test_apply_non_tensor_result_converted():
    td = TensorDict({"a": torch.zeros(2)}, [2])
    out = td.apply(lambda x: 3)
    assert torch.equal(out["a"], torch.full((2,), 3))


def test_apply_non_tensor_follows_batch_change():
    td = TensorDict({"a": torch.zeros(2, 3), "s": NonTensorData("hi", batch_size=[2, 3])}, [2, 3])
    out = td.apply(lambda x: x.reshape(6), batch_size=[6])
    assert out.batch_size == torch.Size([6])
    assert out["s"] == "hi"


def test_apply_empty_tensordict():
    td = TensorDict({}, [4])
    out = td.apply(lambda x: x + 1)
    assert out.is_empty() and out.batch_size == torch.Size([4])


def test_apply_autograd():
    x = torch.ones(3, requires_grad=True)
    td = TensorDict({"x": x}, [3])
    td.apply(lambda t: t * 3)["x"].sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))


def test_fast_apply_alias():
    td = make_td()
    torch.testing.assert_close(td._fast_apply(lambda x: x + 1)["a"], td["a"] + 1)


def test_apply_walks_tensorclass_values():
    tc_mod = pytest.importorskip("tensordict.tensorclass")

    @tc_mod.tensorclass
    class Box:
        x: torch.Tensor
        tag: str

    box = Box(x=torch.ones(2, 3), tag="t", batch_size=[2])
    td = TensorDict({"box": box}, [2])
    out = td.apply(lambda t: t * 5, batch_size=[2], filter_empty=False)
    assert isinstance(out["box"], Box) and out["box"].tag == "t"
    torch.testing.assert_close(out["box"].x, torch.full((2, 3), 5.0))
    out = td.named_apply(lambda k, t: t + 1, nested_keys=True)
    torch.testing.assert_close(out["box"].x, torch.full((2, 3), 2.0))
    td.apply_(lambda t: t * 2)
    torch.testing.assert_close(box.x, torch.full((2, 3), 2.0))
