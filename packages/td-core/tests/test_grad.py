"""Autograd on TensorDicts: requires_grad, grad, zero_grad, backward."""

import pytest
import torch

from tensordict import TensorDict, lazy_stack


def make():
    return TensorDict({"a": torch.zeros(3, 2), "b": {"c": torch.ones(3)}}, [3])


def test_requires_grad_property():
    td = make()
    assert td.requires_grad is False
    td["b", "c"].requires_grad_()
    assert td.requires_grad is True
    assert lazy_stack([make(), make()]).requires_grad is False


def test_grad_and_zero_grad():
    td = make().requires_grad_()
    assert td.grad is None
    (td + 1).sum(reduce=True).backward()
    assert (td.grad == 1).all()
    td.zero_grad(set_to_none=False)
    assert (td.grad == 0).all()
    td.zero_grad()
    assert td.grad is None


def test_backward_scalars_is_sum():
    x = torch.randn(3, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    TensorDict(l1=x.sum(), l2=x.pow(2).sum(), note="text").backward()
    (y.sum() + y.pow(2).sum()).backward()
    torch.testing.assert_close(x.grad, y.grad)


def test_backward_with_gradient_td():
    x = torch.randn(3, requires_grad=True)
    out = TensorDict({"n": {"a": x * 2}, "b": x.sum(), "c": torch.ones(4)}, [])
    out.backward(TensorDict({"n": {"a": torch.ones(3)}, "b": torch.tensor(1.0)}, []))
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))


def test_backward_inputs_retain_graph():
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3, requires_grad=True)
    out = TensorDict(loss=(x * y).sum())
    out.backward(inputs=TensorDict(x=x), retain_graph=True)
    assert y.grad is None
    out.backward(inputs=[y])
    torch.testing.assert_close(y.grad, x.detach())


def test_backward_errors():
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="only for scalar outputs.*'a'"):
        TensorDict(a=x * 2).backward()
    with pytest.raises(KeyError, match="Missing gradient entry for key 'a'"):
        TensorDict(a=x * 2).backward(TensorDict(b=torch.ones(3)))
    with pytest.raises(RuntimeError, match="Mismatch in shape.*'a'.*\\(4,\\).*\\(3,\\)"):
        TensorDict(a=x * 2).backward(TensorDict(a=torch.ones(4)))
    with pytest.raises(TypeError, match="gradient must be a TensorDictBase"):
        TensorDict(a=x * 2).backward(torch.ones(3))
    with pytest.raises(RuntimeError, match="no leaf tensor requiring gradients"):
        make().backward()


def test_zero_grad_on_lazy_stack_reaches_the_stacked_leaves():
    import warnings

    parts = [make().requires_grad_() for _ in range(2)]
    s = lazy_stack(parts)
    (s + 1).sum(reduce=True).backward()
    assert all((p["a"].grad == 1).all() for p in parts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert s.requires_grad
        s.zero_grad()
    assert all(p["a"].grad is None for p in parts)


def test_autograd_grad_gives_a_tensordict_shaped_like_the_inputs():
    x = TensorDict({"a": torch.ones(3), "b": {"c": torch.full((3,), 2.0)}}, [3]).requires_grad_()
    y = x * x
    g = torch.autograd.grad(y, x, torch.ones_like(y))
    assert isinstance(g, TensorDict)
    assert torch.equal(g["a"], 2 * x["a"].detach())
    assert torch.equal(g["b", "c"], 2 * x["b", "c"].detach())


def test_autograd_grad_on_lazy_stack_splits_grad_outputs_per_stacked_td():
    parts = [TensorDict({"a": torch.full((2,), float(i))}, [2]) for i in range(3)]
    x = lazy_stack(parts).requires_grad_()
    y = x * 3
    w = TensorDict({"a": torch.arange(6.0).reshape(3, 2)}, [3, 2])
    g = torch.autograd.grad(y, x, w)
    assert type(g).__name__ == "LazyStackedTensorDict"
    assert torch.equal(g["a"], 3 * w["a"])


def test_autograd_grad_mixed_tensor_and_tensordict_inputs():
    x = TensorDict({"a": torch.ones(2)}, [2]).requires_grad_()
    t = torch.ones(2, requires_grad=True)
    out = (x["a"] * t * 5).sum()
    gx, gt = torch.autograd.grad(out, (x, t))
    assert torch.equal(gx["a"], torch.full((2,), 5.0))
    assert torch.equal(gt, torch.full((2,), 5.0))


def test_autograd_grad_missing_grad_output_entry_names_the_key():
    x = TensorDict({"a": torch.ones(2), "b": torch.ones(2)}, [2]).requires_grad_()
    y = x + 1
    with pytest.raises(KeyError, match="'b'"):
        torch.autograd.grad(y, x, TensorDict({"a": torch.ones(2)}, [2]))


def test_backward_with_gradient_on_lazy_stack_and_nested_tensorclass():
    pytest.importorskip("tensordict.tensorclass")  # a sibling distribution
    from tensordict import tensorclass

    @tensorclass
    class TC:
        x: torch.Tensor

    parts = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(2)]
    x = lazy_stack(parts).requires_grad_()
    y = x + 1
    y.backward(torch.ones_like(y))
    assert (x.grad == 1).all()
    assert all((p["a"].grad == 1).all() for p in parts)

    td = TensorDict({"tc": TC(x=torch.zeros(3), batch_size=[3])}, [3]).requires_grad_()
    assert td["tc"].x.requires_grad
    out = td * 2
    out.backward(torch.ones_like(out))
    assert torch.equal(td["tc"].x.grad, torch.full((3,), 2.0))


def test_zero_reaches_nested_tensorclass_leaves():
    pytest.importorskip("tensordict.tensorclass")  # a sibling distribution
    from tensordict import tensorclass

    @tensorclass
    class TC:
        x: torch.Tensor

    td = TensorDict({"tc": TC(x=torch.ones(3), batch_size=[3])}, [3])
    td.zero_()
    assert (td["tc"].x == 0).all()


def test_filter_non_tensor_data_of_lazy_stack_keeps_the_stacked_leaves():
    parts = [TensorDict({"a": torch.zeros(2), "s": "text"}, [2]) for _ in range(2)]
    ls = lazy_stack(parts)
    out = ls.filter_non_tensor_data()
    assert type(out).__name__ == "LazyStackedTensorDict"
    assert list(out.keys()) == ["a"]
    assert out.tensordicts[0].get("a") is parts[0].get("a")
