"""``TensorDict.is_non_tensor(key)``, ``select(..., as_tensordict=True)`` and ragged
reads of a lazy stack as a nested tensor without torch's prototype warning."""

import warnings

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack


def test_is_non_tensor_flat_and_nested():
    td = TensorDict({"obs": torch.randn(4), "sub": TensorDict()}, [])
    td.set_non_tensor("label", "cat")
    td.set_non_tensor(("sub", "x"), 42)
    td["sub", "y"] = torch.zeros(3)
    assert td.is_non_tensor("label")
    assert not td.is_non_tensor("obs")
    assert not td.is_non_tensor("sub")
    assert td.is_non_tensor(("sub", "x"))
    assert not td.is_non_tensor(("sub", "y"))


def test_is_non_tensor_stack_and_missing_key():
    stack = lazy_stack([TensorDict(a="x", b=torch.zeros(())), TensorDict(a="y", b=torch.ones(()))])
    assert stack.is_non_tensor("a")
    assert not stack.is_non_tensor("b")
    with pytest.raises(KeyError, match="missing"):
        TensorDict(a=torch.zeros(())).is_non_tensor("missing")


def test_select_as_tensordict_is_a_plain_selection():
    td = TensorDict({"a": torch.zeros(3), "b": torch.ones(3)}, [3])
    out = td.select("a", as_tensordict=True)
    assert type(out) is TensorDict
    assert set(out.keys()) == {"a"}
    stack = lazy_stack([td, td.clone()])
    assert set(stack.select("b", as_tensordict=True).keys()) == {"b"}


def test_nested_tensor_read_does_not_warn():
    stack = LazyStackedTensorDict(TensorDict(X=torch.ones(3)), TensorDict(X=torch.ones(2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nt = stack.get("X", as_nested_tensor=True)
    assert nt.is_nested
    assert [t.shape for t in nt.unbind()] == [(3,), (2,)]
