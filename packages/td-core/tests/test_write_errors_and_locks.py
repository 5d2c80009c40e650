"""Indexed writes, in-place writes into lazy stacks, the lock graph through lazy stacks,
and the error wording tensordict 0.15's tests pin (our details follow it)."""

import gc

import numpy as np
import pytest
import torch

from tensordict import TensorDict, lazy_stack


def make(n=4):
    return TensorDict({"a": torch.randn(n, 3), "b": {"c": torch.randn(n)}}, [n])


@pytest.mark.parametrize("idx", [slice(1), torch.tensor([0]), torch.tensor([0, 1]), range(2)])
def test_setitem_with_non_broadcasting_batch_names_both_sizes(idx):
    td = make()
    value = td[idx].clone()
    value = torch.cat([value, value], 0)
    with pytest.raises(RuntimeError, match="batch dimension mismatch.*indexed destination TensorDict batch size is"):
        td[idx] = value


def test_setitem_with_broadcasting_batch_still_writes():
    td = make()
    td[torch.tensor([0, 1])] = TensorDict({"a": torch.ones(3), "b": {"c": torch.ones(())}}, [])
    assert (td["a"][:2] == 1).all() and (td["b", "c"][:2] == 1).all()


def test_lazy_stack_setitem_mismatch_wording():
    ls = lazy_stack([make(3), make(3)])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        ls[0:1] = lazy_stack([make(3), make(3)]).contiguous()


def test_locked_error_starts_with_upstream_wording_and_names_the_key():
    td = make().lock_()
    with pytest.raises(RuntimeError, match=r"Cannot modify locked TensorDict\. For in-place modification.*'z'"):
        td.set("z", torch.zeros(4))


def test_lazy_set_inplace_missing_key_wording():
    ls = lazy_stack([make(3), make(3)])
    with pytest.raises(KeyError, match="setting a value in-place on a stack of TensorDict.*'nope'"):
        ls.set_("nope", torch.zeros(2, 3))


def test_lazy_set_inplace_and_set_at_split_numpy_arrays_like_tensors():
    ls = lazy_stack([TensorDict({"x": torch.zeros(3, 2)}, [3]) for _ in range(2)], 1)
    ls.set_("x", np.ones((3, 2, 2)))
    assert (ls["x"] == 1).all()
    ls.set_at_("x", np.full((2,), 7.0), (1, 0))
    assert torch.equal(ls["x"][1, 0], torch.full((2,), 7.0))
    assert torch.equal(ls.tensordicts[0]["x"][1], torch.full((2,), 7.0))


def test_lazy_rename_key_safe_wording():
    ls = lazy_stack([make(3), make(3)])
    with pytest.raises(KeyError, match="already present in TensorDict"):
        ls.rename_key_("a", "b", safe=True)


def test_nested_of_locked_lazy_stack_cannot_be_unlocked_while_the_stack_lives():
    ls = lazy_stack([make(3), make(3)])
    ls.set(("some", "nested"), torch.zeros(ls.shape))
    ls.lock_()
    some = ls.get("some")
    assert some.is_locked
    with pytest.raises(RuntimeError, match="part of a locked graph"):
        some.unlock_()
    ls.unlock_()  # the root itself can be unlocked
    ls.lock_()
    del ls
    gc.collect()
    some.unlock_()
    assert not some.is_locked


def test_lazy_stack_data_ptr_has_empty_batch_size():
    ls = lazy_stack([make(3), make(3)])
    ptrs = ls.data_ptr()
    assert ptrs.batch_size == torch.Size([])
    # one entry per stacked TensorDict, as tensordict 0.15.3
    assert [ptrs[str(i), "a"].item() for i in range(2)] == [td["a"].data_ptr() for td in ls.tensordicts]


def test_gather_out_refuses_differentiable_leaves_like_torch():
    td = TensorDict({"a": torch.randn(3, 4, requires_grad=True)}, [3, 4])
    index = torch.zeros(3, 2, dtype=torch.long)
    out = td.gather(1, index).detach()
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        torch.gather(td, 1, index, out=out)
    with torch.no_grad():
        torch.gather(td, 1, index, out=out)
    assert torch.equal(out["a"], td["a"].detach()[:, :1].expand(3, 2))
