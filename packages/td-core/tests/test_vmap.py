"""torch.vmap with TensorDicts, lazy stacks and tensorclasses as inputs and outputs."""

import importlib.util

import pytest
import torch
from torch import nn

from tensordict import LazyStackedTensorDict, TensorDict


def _td():
    return TensorDict({"a": torch.randn(3, 4, 5), "n": {"b": torch.randn(3, 4)}}, [3, 4])


class TestVmapTensorDict:
    @pytest.mark.parametrize("in_dim", [0, 1, -1])
    def test_batch_size_inside(self, in_dim):
        td = _td()
        seen = []

        def fn(t):
            seen.append((t.batch_size, t["n"].batch_size, t["a"].shape))
            return t["a"].sum(-1)

        out = torch.vmap(fn, (in_dim,))(td)
        other = 4 if in_dim == 0 else 3
        assert seen == [(torch.Size([other]), torch.Size([other]), torch.Size([other, 5]))]
        expected = td["a"].sum(-1).movedim(in_dim % 2, 0)
        torch.testing.assert_close(out, expected)

    @pytest.mark.parametrize("out_dims", [0, 1, (0,), (1,)])
    def test_out_dims(self, out_dims):
        td = _td()
        out = torch.vmap(lambda t: t, (0,), out_dims)(td)
        dim = out_dims[0] if isinstance(out_dims, tuple) else out_dims
        assert out.batch_size == (torch.Size([3, 4]) if dim == 0 else torch.Size([4, 3]))
        torch.testing.assert_close(out["a"], td["a"].movedim(0, dim))
        torch.testing.assert_close(out["n", "b"], td["n", "b"].movedim(0, dim))

    def test_out_dim_past_batch_dims_raises(self):
        with pytest.raises(ValueError, match="out_dim=2"):
            torch.vmap(lambda t: t, (0,), 2)(TensorDict({"a": torch.zeros(3, 4)}, [3]))

    def test_in_dim_past_batch_dims_raises(self):
        with pytest.raises(ValueError, match="batch_size"):
            torch.vmap(lambda t: t, (1,))(TensorDict({"a": torch.zeros(3, 4)}, [3]))

    def test_mixed_with_tensors(self):
        td = TensorDict({"a": torch.randn(4, 3)}, [4])
        x = torch.randn(3)
        out, y = torch.vmap(lambda t, x: (t.set("b", t["a"] + x), x), (0, None))(td, x)
        assert out.batch_size == (4,) and y.shape == (4, 3)
        torch.testing.assert_close(out["b"], td["a"] + x)

    def test_size_mismatch(self):
        with pytest.raises(ValueError, match="same size in the mapped dimension"):
            torch.vmap(lambda a, b: a)(TensorDict({"a": torch.zeros(3)}, [3]), torch.zeros(4))

    def test_unbatched_input_not_polluted(self):
        td = TensorDict({"a": torch.randn(5, 3)}, [5])
        w = torch.randn(2, 3)
        out = torch.vmap(lambda t, w: t.set("b", t["a"] * w), (None, 0))(td, w)
        assert "b" not in td.keys()
        assert out.batch_size == (2, 5)
        torch.testing.assert_close(out["b"], td["a"] * w[:, None])
        torch.testing.assert_close(out["a"], td["a"].expand(2, 5, 3))

    def test_names(self):
        td = TensorDict({"b": torch.randn(3, 5, 4)}, [3, 5], names=["A", "B"])
        out = torch.vmap(lambda t: t, (1,))(td)
        assert out.names == [None, "A"]

    def test_lock_kept_inside(self):
        td = TensorDict({"a": torch.zeros(3)}, [3]).lock_()

        def fn(t):
            assert t.is_locked
            t.set("b", t["a"])
            return t

        with pytest.raises(RuntimeError, match="locked"):
            torch.vmap(fn)(td)

    def test_in_place_write_reaches_input(self):
        td = TensorDict({"a": torch.zeros(3, 2)}, [3])
        torch.vmap(lambda t: t["a"].add_(1))(td)
        assert (td["a"] == 1).all()

    @pytest.mark.parametrize("randomness", ["different", "same"])
    def test_randomness(self, randomness):
        td = TensorDict({"a": torch.zeros(6, 2)}, [6])
        out = torch.vmap(lambda t: t.apply(lambda x: x + torch.randn(())), randomness=randomness)(td)
        values = out["a"][:, 0]
        assert (values == values[0]).all() == (randomness == "same")

    def test_non_tensor_kept(self):
        td = TensorDict({"a": torch.zeros(3), "s": "text"}, [3])
        out = torch.vmap(lambda t: t)(td)
        assert out.batch_size == (3,) and out["s"] == "text"


class TestVmapLazyStack:
    @pytest.mark.parametrize("stack_dim", [0, 1])
    @pytest.mark.parametrize("in_dim", [0, 1])
    @pytest.mark.parametrize("out_dim", [0, 1])
    @pytest.mark.parametrize("key", ["a", ("a", "b")])
    def test_write_and_return(self, stack_dim, in_dim, out_dim, key):
        x = LazyStackedTensorDict.lazy_stack(
            [TensorDict({key: torch.ones(1)}, [1]) for _ in range(2)], stack_dim
        )
        y = LazyStackedTensorDict.lazy_stack(
            [TensorDict({key: torch.full((1,), 2.0)}, [1]) for _ in range(2)], stack_dim
        )
        out = torch.vmap(lambda x, y: x.set(key, x.get(key) + y.get(key)), (in_dim, in_dim), (out_dim,))(x, y)
        assert isinstance(out, LazyStackedTensorDict)
        assert (out[key] == 3).all()
        assert out.shape[out_dim] == x.shape[in_dim]

    def test_locked_write_raises(self):
        x = LazyStackedTensorDict.lazy_stack([TensorDict({"a": torch.ones(1)}, [1]) for _ in range(2)])
        x.lock_()
        with pytest.raises(RuntimeError, match="locked"):
            torch.vmap(lambda x: x.set("b", x["a"]), (1,))(x)

    def test_heterogeneous_along_other_dim(self):
        x = LazyStackedTensorDict.lazy_stack(
            [TensorDict({"a": torch.ones(4, 3)}, [4]), TensorDict({"a": torch.ones(4, 2)}, [4])], 1
        )
        out = torch.vmap(lambda t: t, (0,))(x)
        assert isinstance(out, LazyStackedTensorDict)
        assert out.batch_size == (4, 2)
        assert [td["a"].shape for td in out.tensordicts] == [(4, 3), (4, 2)]

    def test_nested_lazy(self):
        x = LazyStackedTensorDict.lazy_stack(
            [TensorDict({"a": {"b": torch.full((3,), float(i))}}, []) for i in range(2)]
        )
        out = torch.vmap(lambda t: t["a", "b"].sum())(x)
        torch.testing.assert_close(out, torch.tensor([0.0, 3.0]))


class TestVmapEnsembles:
    @pytest.mark.parametrize("as_module", [False, True])
    def test_from_modules_to_module(self, as_module):
        if as_module and importlib.util.find_spec("tensordict.nn") is None:
            pytest.skip("as_module=True builds a TensorDictParams (td-nn)")
        modules = [nn.Linear(3, 4) for _ in range(5)]
        params = TensorDict.from_modules(*modules, as_module=as_module)
        base = nn.Linear(3, 4).to("meta")

        def call(p, x):
            with p.to_module(base):
                return base(x)

        x = torch.randn(10, 3)
        y = torch.vmap(call, (0, None))(params, x)
        assert y.shape == (5, 10, 4)
        torch.testing.assert_close(y[2], modules[2](x))
        y.sum().backward()
        assert params["weight"].grad is not None
        assert params["weight"].grad.shape == (5, 4, 3)

    def test_functional_call_with_unbound_params(self):
        modules = [nn.Linear(3, 4) for _ in range(2)]
        params = TensorDict.from_modules(*modules)
        base = nn.Linear(3, 4)
        x = torch.randn(3)
        y = torch.vmap(
            lambda p, x: torch.func.functional_call(base, dict(p.flatten_keys(".").items()), (x,)), (0, None)
        )(params, x)
        torch.testing.assert_close(y[1], modules[1](x))


def test_tensorclass_in_and_out():
    tensorclass = pytest.importorskip("tensordict.tensorclass")
    from tensordict import tensorclass as tc_decorator

    assert tensorclass is not None

    @tc_decorator
    class Pair:
        x: torch.Tensor
        y: torch.Tensor

    data = Pair(x=torch.randn(3, 2), y=torch.randn(3), batch_size=[3])

    def fn(p):
        assert p.batch_size == ()
        return p

    out = torch.vmap(fn)(data)
    assert isinstance(out, Pair)
    assert out.batch_size == (3,)
    torch.testing.assert_close(out.x, data.x)
