"""What TorchRL 0.14 calls in td-core, each as TorchRL uses it (issue 32).

Every test here also passes on tensordict 0.15.3 (run the file with its interpreter).
"""

from __future__ import annotations

import importlib
import sys
import warnings

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
