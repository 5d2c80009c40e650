"""Small behaviours pinned by tensordict 0.15: error wording, comparisons with
non-tensor objects, nested TensorDicts adopting the parent's batch size, ``to(other=)``
and ``repeat_interleave`` without ``dim``."""

import pytest
import torch

from tensordict import TensorDict


def make():
    return TensorDict({"a": torch.zeros(4, 3), "b": {"c": torch.ones(4, 3, dtype=torch.int64)}}, [4, 3])


def test_bool_and_pop_wording():
    td = make()
    with pytest.raises(RuntimeError, match="Converting a tensordict to boolean value is not permitted"):
        bool(td)
    with pytest.raises(KeyError, match="You are trying to pop key .*zz.*Present keys"):
        td.pop("zz")
    assert td.pop("zz", None) is None


def test_compare_with_str_and_none():
    td = make()
    assert (td == "z") is False and (td != "z") is True
    assert (td == None) is False  # noqa: E711
    assert (td == td.clone()).all()


def test_nested_td_adopts_parent_batch_size():
    td = make()
    inner = TensorDict({"x": torch.randn(4, 3, 2)}, [])
    td["inner"] = inner
    assert td["inner"].batch_size == (4, 3) and inner.batch_size == ()
    assert td["inner", "x"] is inner["x"]
    td["part"] = TensorDict({"x": torch.randn(4, 3)}, [4])
    assert td["part"].batch_size == (4, 3)
    with pytest.raises(RuntimeError, match="'bad'"):
        td["bad"] = TensorDict({"x": torch.randn(5)}, [])


def test_to_other_tensordict():
    td = make()
    same = TensorDict({"a": torch.zeros(1, dtype=torch.half)}, [], device="cpu")
    out = td.to(other=same)
    assert out.device == torch.device("cpu") and out["b", "c"].dtype == torch.half
    mixed = TensorDict({"a": torch.zeros(1, dtype=torch.half), "i": torch.zeros(1, dtype=torch.int64)}, [], device="cpu")
    out = td.to(mixed)
    assert out["a"].dtype == torch.float32 and out.device == torch.device("cpu")


def test_repeat_interleave_without_dim():
    td = make()
    out = td.repeat_interleave(2)
    assert out.batch_size == (24,)
    assert torch.equal(out["b", "c"], td["b", "c"].repeat_interleave(2))
    assert td.repeat_interleave(2, dim=1).batch_size == (4, 6)
