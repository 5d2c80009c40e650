"""What TorchRL 0.14 calls in td-core, each as TorchRL uses it (issue 32).

Every test here also passes on tensordict 0.15.3 (run the file with its interpreter).
"""

from __future__ import annotations

import importlib
import sys

import pytest
import torch
from torch import nn

from tensordict import TensorDict, assert_allclose_td, unravel_key, unravel_key_to_tuple


def test_c_module_exports_the_key_helpers_and_warns():
    sys.modules.pop("tensordict._C", None)
    with pytest.warns(DeprecationWarning, match="tensordict._C is deprecated"):
        c_mod = importlib.import_module("tensordict._C")
    assert {"unravel_key", "unravel_keys", "unravel_key_list", "_unravel_key_to_tuple"} <= set(dir(c_mod))
    # TorchRL's loss tests flatten keys with it: "_".join(unravel_keys(key))
    assert "_".join(c_mod.unravel_keys(("agents", ("action",)))) == "agents_action"
    assert c_mod.unravel_key_list([("a",), ("b", ("c",))]) == ["a", ("b", "c")]
    assert c_mod._unravel_key_to_tuple(("a", 1)) == ()


@pytest.mark.parametrize("index", [(0,), (0, slice(3, 4)), (), ("a", 1), ("a", ()), (Ellipsis, "a")])
def test_unravel_key_of_an_index_is_empty(index):
    # TorchRL's Composite.__getitem__ tells an index from a key with `unravel_key(idx) == ()`
    assert unravel_key(index) == ()


@pytest.mark.parametrize("index", [0, None, 1.5, ["a"]])
def test_unravel_key_of_a_non_tuple_raises_runtime_error(index):
    with pytest.raises(RuntimeError):
        unravel_key(index)


def test_unravel_key_still_flattens_keys():
    assert unravel_key(("a", ("b", ("c",)))) == ("a", "b", "c")
    assert unravel_key(("a",)) == "a"
    assert unravel_key_to_tuple("a") == ("a",)


def test_to_module_with_a_new_unsafe_nested_dict_of_params():
    # TorchRL's SACLoss builds target params as TensorDict._new_unsafe({"module": {"0": ..., "1": ...}})
    net = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))
    outer = nn.Sequential(net)
    first = TensorDict.from_module(net[0]).clone().zero_()
    second = TensorDict.from_module(net[1]).detach().apply(torch.ones_like)
    params = TensorDict._new_unsafe({"0": {"0": first, "1": second}}, torch.Size([]))
    x = torch.ones(2, 3)
    with params.to_module(outer, preserve_module_state=False):
        out = outer(x)
    assert (out == 1.0).all()
    assert not (net[1].bias == 1.0).all()  # restored


def test_assert_allclose_td_intersection_compares_shared_keys():
    a = TensorDict(x=torch.zeros(2), nested={"y": torch.ones(2), "z": torch.ones(1)})
    b = TensorDict(x=torch.zeros(2), nested={"y": torch.ones(2)}, other=torch.ones(3))
    assert assert_allclose_td(a, b, intersection=True, msg="keys were modified")
    b["x"] += 1
    with pytest.raises(AssertionError, match="keys were modified"):
        assert_allclose_td(a, b, intersection=True, msg="keys were modified")
    with pytest.raises(KeyError):
        assert_allclose_td(a, TensorDict(x=torch.zeros(2)))


def test_non_tensor_leaves_have_no_dtype_and_a_data_entry():
    from tensordict import NonTensorData, NonTensorStack

    data = NonTensorData("hello")
    stack = NonTensorStack(NonTensorData("a"), NonTensorData("b"))
    # TorchRL's NonTensor spec compares `val.dtype == self.dtype` (None)
    assert data.dtype is None and stack.dtype is None
    assert data.get("data") == "hello"
    assert data.get("other") is None and data.get("other", 1) == 1
    assert stack.get("data", 1) == 1


def test_lazy_stack_has_exclusive_keys():
    from tensordict import LazyStackedTensorDict

    a = TensorDict(a=torch.zeros(3), n={"x": torch.zeros(1)})
    assert not LazyStackedTensorDict(a, a.clone())._has_exclusive_keys
    assert LazyStackedTensorDict(a, TensorDict(a=torch.zeros(3), n={"y": torch.zeros(1)}))._has_exclusive_keys
    assert LazyStackedTensorDict(a, TensorDict(b=torch.zeros(3)))._has_exclusive_keys


def test_stack_errors_are_runtime_errors_with_upstream_wording():
    # TorchRL's rollout catches RuntimeError and matches these opening words
    import re

    with pytest.raises(RuntimeError) as info:
        torch.stack([TensorDict(a=torch.ones(1)), TensorDict(b=torch.ones(1))])
    assert re.match("The sets of keys in the tensordicts to stack are exclusive", str(info.value))
    with pytest.raises(RuntimeError) as info:
        torch.stack([TensorDict(a=torch.ones(2)), TensorDict(a=torch.ones(3))])
    assert re.match("The shapes of the tensors to stack is incompatible", str(info.value))


def test_stack_into_a_locked_out_writes_the_keys_out_holds():
    out = TensorDict(a=torch.zeros(2, 3), batch_size=[2]).lock_()
    parts = [TensorDict(a=torch.ones(3), b=torch.ones(3)) for _ in range(2)]
    assert torch.stack(parts, out=out) is out
    assert sorted(out.keys()) == ["a"] and out["a"].sum() == 6


def test_apply_with_default_walks_the_first_tensordicts_keys():
    x = TensorDict(a=torch.ones(2), n={"c": torch.ones(1)})
    y = TensorDict(a=torch.ones(2), b=torch.ones(2), n={"d": torch.ones(1)})
    calls = []

    def fn(u, v):
        calls.append(v is None)
        return u

    out = x.apply(fn, y, default=None)
    assert sorted(out.keys(True, True), key=str) == [("n", "c"), "a"]
    assert calls == [False, True]
    # the binary ops' default= fills either side: the keys of both
    assert sorted(x.maximum(y, default=torch.zeros(())).keys(True, True), key=str) == [("n", "c"), ("n", "d"), "a", "b"]


def test_where_takes_update_batch_size():
    td = TensorDict(a=torch.ones(3, 2), batch_size=[3])
    other = TensorDict(a=torch.zeros(3, 2), batch_size=[3])
    cond = torch.tensor([True, False, True])
    assert td.where(cond, other, update_batch_size=True)["a"].sum() == 4
    out = TensorDict(a=torch.zeros(3, 2), batch_size=[])
    assert td.where(cond, other, out=out, update_batch_size=True) is out
    assert out["a"].sum() == 4 and out.batch_size == ()


def test_unravel_key_list_refuses_a_str_and_non_keys():
    # TorchRL's LSTMModule(in_keys="abc") expects this TypeError ("incompatible function arguments")
    from tensordict import unravel_key_list

    with pytest.raises(TypeError, match="incompatible function arguments"):
        unravel_key_list("abc")
    with pytest.raises(RuntimeError):
        unravel_key_list(["a", 1])
    with pytest.raises(RuntimeError):
        unravel_key_list([("a", 1)])
    assert unravel_key_list(("a", ("b", ("c",)))) == ["a", ("b", "c")]


def test_iterating_a_0d_tensordict_is_a_type_error():
    with pytest.raises(TypeError, match="iteration over a 0-d"):
        iter(TensorDict(a=torch.zeros(2)))


def test_lazy_stack_of_non_tensor_leaves_is_a_non_tensor_stack():
    # TorchRL's NonTensor.rand(shape) lazily stacks copies of a NonTensorData
    from tensordict import (
        MetaData,
        NonTensorData,
        NonTensorStack,
        lazy_stack,
        set_capture_non_tensor_stack,
    )

    with set_capture_non_tensor_stack(False):
        value = NonTensorData("a", batch_size=(1,))
        stacked = lazy_stack([value.copy() for _ in range(3)])
    assert isinstance(stacked, NonTensorStack)
    assert stacked.shape == (3, 1) and stacked.tolist() == [["a"], ["a"], ["a"]]
    pair = lazy_stack([NonTensorData("a", batch_size=[2]), NonTensorData("b", batch_size=[2])], dim=1)
    assert pair.tolist() == [["a", "b"], ["a", "b"]]
    assert isinstance(lazy_stack([MetaData("m"), MetaData("m")]), MetaData)
