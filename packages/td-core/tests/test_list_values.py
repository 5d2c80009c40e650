"""Python lists written into a TensorDict follow ``list_to_stack()``.

Default (unset, as tensordict 0.15.3) / ``True``: a list spanning a one-dim batch becomes
a stack (tensors stacked, other objects a ``NonTensorStack``). ``set_list_to_stack(False)``:
``torch.as_tensor`` semantics, a list torch cannot convert is one non-tensor object.
"""

from __future__ import annotations

import pytest
import torch

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    list_to_stack,
    set_list_to_stack,
)


def test_switch_reads_true_when_unset_as_tensordict_015():
    assert list_to_stack() is True
    assert list_to_stack(allow_none=True) is None
    td = TensorDict({"q": ["x", "y"]}, [2])  # the default stacks a list spanning the batch
    assert isinstance(td.get("q"), NonTensorStack) and td[1]["q"] == "y"


class TestListsAsTensors:
    """``set_list_to_stack(False)``: ``torch.as_tensor`` semantics."""

    @pytest.fixture(autouse=True)
    def _lists_as_tensors(self):
        with set_list_to_stack(False):
            yield

    def test_switch_reads_false(self):
        assert list_to_stack() is False

    def test_constructor_float_list(self):
        td = TensorDict({"a": [1.0]}, [1])
        value = td.get("a")
        assert isinstance(value, torch.Tensor)
        assert value.dtype == torch.float32
        assert torch.equal(value, torch.tensor([1.0]))
        # arithmetic goes through the leaves
        assert torch.equal((td + 1)["a"], torch.tensor([2.0]))

    def test_setitem_int_list(self):
        td = TensorDict(batch_size=[3])
        td["x"] = [1, 2, 3]
        assert isinstance(td.get("x"), torch.Tensor)
        assert td["x"].dtype == torch.int64
        assert td["x"].tolist() == [1, 2, 3]

    def test_nested_list_and_scalar_tensors(self):
        td = TensorDict(batch_size=[2])
        td["m"] = [[1.0, 2.0], [3.0, 4.0]]
        assert td["m"].shape == (2, 2)
        td["s"] = [torch.zeros(()), torch.ones(())]
        assert torch.equal(td["s"], torch.tensor([0.0, 1.0]))

    def test_nested_key_and_empty_list(self):
        td = TensorDict()
        td["a", "b"] = [1, 2]
        assert isinstance(td.get(("a", "b")), torch.Tensor)
        td["e"] = []
        assert isinstance(td.get("e"), torch.Tensor)
        assert td["e"].shape == (0,)

    def test_batch_mismatch_raises(self):
        td = TensorDict(batch_size=[3])
        with pytest.raises(RuntimeError, match="'x'"):
            td["x"] = [1, 2]

    def test_strings_stay_one_object(self):
        td = TensorDict({"q": ["x", "y"]}, [2])
        assert isinstance(td.get("q"), NonTensorData)
        assert td["q"] == ["x", "y"]
        assert td[0]["q"] == ["x", "y"]

    def test_mixed_objects_stay_one_object(self):
        td = TensorDict(batch_size=[])
        td["m"] = [1, "two", None]
        assert isinstance(td.get("m"), NonTensorData)
        assert td["m"] == [1, "two", None]


class TestListsToStack:
    @pytest.fixture(autouse=True)
    def _lists_to_stack(self):
        with set_list_to_stack(True):
            yield

    def test_switch_reads_true(self):
        assert list_to_stack() is True

    def test_strings_become_a_stack(self):
        td = TensorDict({"q": ["x", "y"]}, [2])
        assert isinstance(td.get("q"), NonTensorStack)
        assert td["q"] == ["x", "y"]
        assert td[0]["q"] == "x"
        assert td[1]["q"] == "y"

    def test_tensors_are_stacked(self):
        td = TensorDict(a=[torch.zeros(()), torch.ones(())], batch_size=2)
        assert isinstance(td.get("a"), torch.Tensor)
        assert torch.equal(td["a"], torch.tensor([0.0, 1.0]))

    def test_mixed_items(self):
        td = TensorDict(a=[torch.zeros(()), "another string"], batch_size=2)
        assert isinstance(td.get("a"), NonTensorStack)
        assert td[0]["a"] == 0
        assert td[1]["a"] == "another string"

    def test_empty_list_is_an_empty_tensor(self):
        td = TensorDict()
        td["key"] = []
        assert isinstance(td["key"], torch.Tensor)
        assert td["key"].shape == (0,)

    def test_list_not_spanning_the_batch_is_one_object(self):
        td = TensorDict(batch_size=[])
        td["q"] = ["x", "y"]
        assert isinstance(td.get("q"), NonTensorData)
        assert td["q"] == ["x", "y"]
