"""new_zeros / new_ones / new_empty / new_full / new_tensor / as_tensor."""

import warnings

import pytest
import torch

from tensordict import TensorDict, lazy_stack


def make():
    return TensorDict(
        {"a": torch.zeros(3, 4, 2, dtype=torch.int32), "b": TensorDict({"c": torch.ones(3, 4, 5, 6)}, [3, 4, 5])},
        [3, 4],
    )


@pytest.mark.parametrize("size", [(2,), ([2],), ((2, 7),), (2, 7), (0,)])
@pytest.mark.parametrize("name,value", [("new_zeros", 0), ("new_ones", 1), ("new_empty", None)])
def test_new_factories(size, name, value):
    td = make()
    out = getattr(td, name)(*size)
    expected = torch.Size(size[0] if isinstance(size[0], (list, tuple)) else size)
    assert out.batch_size == expected
    assert out["a"].shape == (*expected, 2) and out["a"].dtype == torch.int32
    assert out["b"].batch_size == (*expected, 5)
    assert out["b", "c"].shape == (*expected, 5, 6)
    if value is not None:
        assert (out == value).all()


def test_new_full_and_kwargs():
    td = make()
    out = td.new_full((2, 3), 2.5, dtype=torch.float64, requires_grad=True)
    assert out.batch_size == (2, 3)
    assert out["a"].dtype == torch.float64 and out["a"].requires_grad
    assert (out == 2.5).all()


def test_new_on_lazy_stack():
    s = lazy_stack([make()[0], make()[1]])
    assert s.new_zeros(5).batch_size == (5,)


def test_new_tensor():
    td = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = td.new_tensor(td[0] * 0)
        t = td.new_tensor(torch.arange(3))
    assert out.batch_size == (4,) and (out == 0).all()
    assert out["a"].data_ptr() != td["a"].data_ptr()
    # tensor-like data: a TensorDict of that shape, one copy per leaf with its dtype (0.15.3)
    assert t.batch_size == (3,) and t["b"].batch_size == (3,) and torch.equal(t["a"], torch.arange(3, dtype=torch.int32))


def test_as_tensor():
    p = torch.nn.Parameter(torch.zeros(3))
    td = TensorDict({"p": p, "t": torch.ones(3)}, [3])
    out = td.as_tensor()
    assert type(out["p"]) is torch.Tensor
    assert out["p"].data_ptr() == p.data_ptr()
    assert out["t"] is td["t"]
