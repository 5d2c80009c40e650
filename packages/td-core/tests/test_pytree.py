"""from_pytree / to_pytree (bijective conversion) and TensorDicts as torch pytree nodes
(tree_map, torch.vmap, torch.func, DataLoader collation)."""

from __future__ import annotations

import collections
import importlib.util

import numpy as np
import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.utils.data import DataLoader, Dataset, default_collate

import tensordict
from tensordict import NonTensorData, NonTensorStack, TensorDict

Pair = collections.namedtuple("Pair", ["left", "right"])


def _same_tree(a, b):
    """Same structure (types, keys) and equal leaves."""
    la, sa = pytree.tree_flatten(a)
    lb, sb = pytree.tree_flatten(b)
    assert sa == sb, (sa, sb)
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y)
        else:
            assert x == y


# ---------------------------------------------------------------------- from_pytree / to_pytree
class TestFromPytree:
    def test_doc_example(self):
        class WeirdLookingClass:
            pass

        weird_key = WeirdLookingClass()
        tree = (
            [torch.randint(10, (3,)), torch.zeros(2)],
            {
                "tensor": torch.randn(2),
                "td": TensorDict({"one": 1}),
                weird_key: torch.randint(10, (2,)),
                "list": [1, 2, 3],
            },
            {"named_tuple": TensorDict({"two": torch.ones(1) * 2}).to_namedtuple()},
        )
        td = TensorDict.from_pytree(tree)
        recon = td.to_pytree()

        def check(v1, v2):
            assert (v1 == v2).all()

        pytree.tree_map(check, tree, recon)
        assert weird_key in recon[1]
        assert type(recon[2]["named_tuple"]) is type(tree[2]["named_tuple"])

    @pytest.mark.parametrize(
        "tree",
        [
            [torch.zeros(2), torch.ones(3)],
            (torch.zeros(2), [torch.ones(1), (torch.zeros(()),)]),
            Pair(torch.zeros(2), Pair(torch.ones(2), [torch.zeros(1)])),
            {"a": torch.zeros(2), "b": {"c": [torch.ones(2)]}},
            collections.OrderedDict([("z", torch.zeros(1)), ("a", torch.ones(1))]),
            {
                1: torch.zeros(2),
                ("x", "y"): torch.ones(2),
                "_pytree_type": torch.zeros(1),
                "s": torch.ones(3),
            },
            {"name": "text", "nothing": None, "t": torch.zeros(2)},
            [],
            {},
        ],
        ids=[
            "list",
            "tuple",
            "namedtuple",
            "dict",
            "ordereddict",
            "odd-keys",
            "str-none",
            "empty-list",
            "empty-dict",
        ],
    )
    def test_bijective_round_trip(self, tree):
        td = TensorDict.from_pytree(tree)
        back = td.to_pytree()
        _same_tree(tree, back)
        if isinstance(tree, dict):
            assert list(back.keys()) == list(tree.keys())

    def test_defaultdict_keeps_its_factory(self):
        tree = collections.defaultdict(list, {"a": torch.zeros(2)})
        back = TensorDict.from_pytree(tree).to_pytree()
        assert type(back) is collections.defaultdict and back.default_factory is list
        assert torch.equal(back["a"], torch.zeros(2))

    def test_return_types_round_trip(self):
        res = torch.max(torch.arange(6.0).view(3, 2), 0)
        back = TensorDict.from_pytree([res]).to_pytree()
        assert type(back[0]) is type(res)
        assert torch.equal(back[0].values, res.values) and torch.equal(back[0].indices, res.indices)

    def test_numbers_and_arrays_become_tensors(self):
        back = TensorDict.from_pytree({"n": 3, "f": 0.5, "arr": np.arange(3)}).to_pytree()
        assert torch.equal(back["n"], torch.tensor(3))
        assert torch.equal(back["arr"], torch.arange(3))

    def test_batch_size_options(self):
        tree = {"a": [torch.zeros(3, 2), torch.zeros(3)], "b": torch.zeros(3, 4)}
        assert TensorDict.from_pytree(tree, auto_batch_size=True).batch_size == (3,)
        td = TensorDict.from_pytree(tree, batch_size=[3])
        assert td["a"].batch_size == (3,)
        _same_tree(td.to_pytree(), tree)
        with pytest.raises(TypeError, match="exclusive"):
            TensorDict.from_pytree(tree, batch_size=[3], auto_batch_size=True)

    def test_unsupported_leaf(self):
        class Thing:
            pass

        with pytest.raises(TypeError, match=r"Thing.*\['a'\]\[1\]") as err:
            TensorDict.from_pytree({"a": [torch.zeros(1), Thing()]})
        assert isinstance(err.value, NotImplementedError)
        with pytest.raises(NotImplementedError, match="set"):
            TensorDict.from_pytree([{1, 2}])

    def test_top_level(self):
        t = torch.zeros(2)
        assert TensorDict.from_pytree(t) is t
        with pytest.raises(TypeError, match="top"):
            TensorDict.from_pytree(3)
        with pytest.raises(TypeError, match="unsupported leaf"):
            TensorDict.from_pytree(object())

    def test_to_pytree_of_a_plain_tensordict(self):
        td = TensorDict({"a": torch.zeros(2)})
        assert td.to_pytree() is td

    def test_module_level(self):
        assert tensordict.from_pytree([torch.zeros(3)], auto_batch_size=True).batch_size == (3,)


# ---------------------------------------------------------------------- pytree registration
def _td():
    return TensorDict(
        {
            "a": torch.randn(4, 3),
            "b": {"c": torch.randn(4, 2, 5)},
            "s": "hello",
            "z": torch.zeros(4),
        },
        [4],
        names=["batch"],
    )


class TestRegistration:
    def test_flatten_and_unflatten(self):
        td = _td()
        leaves, spec = pytree.tree_flatten(td)
        assert len(leaves) == 3
        assert all(isinstance(x, torch.Tensor) for x in leaves)
        out = pytree.tree_unflatten(leaves, spec)
        assert isinstance(out, TensorDict)
        assert out.batch_size == (4,) and out.names == ["batch"]
        assert list(out.keys()) == ["a", "b", "s", "z"]  # order kept
        assert out["s"] == "hello"
        assert out["a"] is td["a"]

    def test_paths(self):
        paths = [pytree.keystr(p) for p, _ in pytree.tree_flatten_with_path(_td())[0]]
        assert paths == ["['a']", "['b']['c']", "['z']"]

    def test_tree_map(self, device):
        td = _td().to(device)
        out = pytree.tree_map(lambda x: x + 1, td)
        assert out.device == td.device and out.batch_size == (4,)
        assert torch.allclose(out["b", "c"], td["b", "c"] + 1)
        both = pytree.tree_map(lambda x, y: x - y, out, td)
        assert torch.allclose(both["a"], torch.ones(4, 3, device=device))

    def test_tree_map_that_changes_shapes(self):
        td = _td()
        out = pytree.tree_map(lambda x: x.sum(0), td)
        assert out.batch_size == () and out["b"].batch_size == ()
        out = pytree.tree_map(lambda x: x[:2], td)
        assert out.batch_size == (2,) and out["s"] == "hello"

    def test_tree_map_returning_non_tensors(self):
        out = pytree.tree_map(lambda x: x.ndim, _td())
        assert out.batch_size == (4,)
        assert out["b", "c"] == 3
        leaves, _ = pytree.tree_flatten(out)
        assert leaves == [2, 3, 1]
        nothing = pytree.tree_map(lambda x: None, _td())
        assert nothing["a"] is None and nothing["s"] == "hello"

    def test_context_equality(self):
        _, s1 = pytree.tree_flatten(_td())
        _, s2 = pytree.tree_flatten(_td())
        assert s1 == s2 and hash(s1) == hash(s2)
        other = _td()
        other["extra"] = torch.zeros(4)
        assert s1 != pytree.tree_flatten(other)[1]

    def test_subclass_registered(self):
        class MyTD(TensorDict):
            pass

        assert MyTD in pytree.SUPPORTED_NODES
        td = MyTD({"a": torch.zeros(2)}, [2])
        assert len(pytree.tree_leaves(td)) == 1

    def test_nested_in_containers(self):
        tree = {"x": [_td(), _td()], "y": torch.zeros(1)}
        assert len(pytree.tree_leaves(tree)) == 7


class TestVmap:
    def test_in_dims_zero(self):
        td = _td()

        def f(t):
            assert t.batch_size == () and t["b"].batch_size == ()
            assert t["a"].shape == (3,)
            assert t["s"] == "hello"
            assert t.names == []
            return t["a"].sum() + t["b", "c"].sum()

        out = torch.vmap(f)(td)
        assert torch.allclose(out, td["a"].sum(-1) + td["b", "c"].sum((-1, -2)))

    def test_returning_a_tensordict(self):
        td = _td()
        out = torch.vmap(lambda t: TensorDict({"x": t["a"] * 2, "y": t["a"].sum(), "s": "k"}, []))(
            td
        )
        assert out.batch_size == (4,)
        assert torch.allclose(out["x"], td["a"] * 2)
        assert out["y"].shape == (4,)
        assert out["s"] == "k"
        same = torch.vmap(lambda t: t)(td)
        assert same.batch_size == (4,) and same["b"].batch_size == (4,) and same.names == [None]
        assert torch.equal(same["b", "c"], td["b", "c"])

    def test_in_and_out_dims(self):
        td = TensorDict({"a": torch.randn(4, 3, 2)}, [4, 3])
        seen = []
        out = torch.vmap(lambda t: (seen.append(t.batch_size), t)[1], in_dims=1)(td)
        assert seen == [torch.Size([4])]
        assert out.batch_size == (3, 4) and torch.equal(out["a"], td["a"].transpose(0, 1))
        out = torch.vmap(lambda t: t, in_dims=1, out_dims=1)(td)
        assert out.batch_size == (4, 3) and torch.equal(out["a"], td["a"])

    def test_nested_vmap(self):
        td = TensorDict({"a": torch.randn(2, 3, 4)}, [2, 3])

        def inner(t):
            assert t.batch_size == ()
            return TensorDict({"a": t["a"] + 1}, [])

        out = torch.vmap(torch.vmap(inner))(td)
        assert out.batch_size == (2, 3)
        assert torch.allclose(out["a"], td["a"] + 1)

    def test_vmap_with_tensor_args(self):
        td = TensorDict({"w": torch.randn(5, 3)}, [5])
        x = torch.randn(3)
        out = torch.vmap(lambda t, x: t["w"] @ x, (0, None))(td, x)
        assert torch.allclose(out, td["w"] @ x)

    def test_grad(self):
        td = TensorDict({"a": torch.randn(4, 3), "b": {"c": torch.randn(4)}}, [4])
        g = torch.func.grad(lambda t: (t["a"] ** 2).sum() + t["b", "c"].sum())(td)
        assert isinstance(g, TensorDict) and g.batch_size == (4,)
        assert torch.allclose(g["a"], 2 * td["a"])
        assert torch.allclose(g["b", "c"], torch.ones(4))

    def test_functional_call_ensemble(self):
        torch.manual_seed(0)
        module = nn.Linear(3, 2)
        params = TensorDict(dict(module.named_parameters()), []).detach()
        stacked = torch.stack([params, pytree.tree_map(lambda p: p * 2, params)])
        x = torch.randn(5, 3)

        def call(p, x):
            return torch.func.functional_call(module, p.flatten_keys(".").to_dict(), (x,))

        out = torch.vmap(call, (0, None))(stacked, x)
        assert out.shape == (2, 5, 2)
        assert torch.allclose(out[0], module(x), atol=1e-6)
        assert torch.allclose(out[1], x @ (2 * module.weight).T + 2 * module.bias, atol=1e-6)

    def test_functional_call_with_tensordict_input(self):
        class Reads(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 1)

            def forward(self, td):
                return TensorDict({"out": self.lin(td["x"])}, td.batch_size)

        module = Reads()
        params = {k: torch.zeros_like(v) for k, v in module.named_parameters()}
        td = TensorDict({"x": torch.randn(4, 3)}, [4])
        out = torch.func.functional_call(module, params, (td,))
        assert out.batch_size == (4,) and torch.equal(out["out"], torch.zeros(4, 1))


class TestCollate:
    def test_default_collate(self):
        items = [TensorDict({"a": torch.full((2,), float(i)), "s": "x"}, []) for i in range(3)]
        batch = default_collate(items)
        assert isinstance(batch, TensorDict) and batch.batch_size == (3,)
        assert torch.equal(batch["a"][:, 0], torch.tensor([0.0, 1.0, 2.0]))
        assert batch["s"] == ["x", "x", "x"]  # a stack of the 3 values, as tensordict 0.15

    def test_dataloader(self):
        class DS(Dataset):
            def __len__(self):
                return 10

            def __getitem__(self, i):
                return TensorDict(
                    {"x": torch.full((3,), float(i)), "y": {"z": torch.tensor(i)}, "tag": f"t{i}"},
                    [],
                )

        batches = list(DataLoader(DS(), batch_size=4))
        assert [b.batch_size for b in batches] == [
            torch.Size([4]),
            torch.Size([4]),
            torch.Size([2]),
        ]
        assert torch.equal(batches[1]["y", "z"], torch.tensor([4, 5, 6, 7]))
        assert isinstance(batches[0]._get_raw("tag"), NonTensorStack)
        assert batches[0]["tag"] == ["t0", "t1", "t2", "t3"]


@pytest.mark.skipif(
    importlib.util.find_spec("tensordict._lazy") is None, reason="tensordict._lazy not available"
)
class TestLazyStack:
    def test_registered_and_round_trip(self):
        from tensordict._lazy import LazyStackedTensorDict

        assert LazyStackedTensorDict in pytree.SUPPORTED_NODES
        tds = [TensorDict({"a": torch.randn(3)}, [3]) for _ in range(2)]
        lazy = LazyStackedTensorDict(*tds, stack_dim=0)
        out = pytree.tree_map(lambda x: x + 1, lazy)
        assert isinstance(out, LazyStackedTensorDict) and out.batch_size == (2, 3)
        assert torch.allclose(out["a"], torch.stack([t["a"] for t in tds]) + 1)

    def test_vmap_over_stack_dim(self):
        from tensordict._lazy import LazyStackedTensorDict

        tds = [TensorDict({"a": torch.randn(3, requires_grad=True)}, [3]) for _ in range(2)]
        lazy = LazyStackedTensorDict(*tds, stack_dim=0)
        out = torch.vmap(lambda t: t["a"].sum())(lazy)
        assert out.shape == (2,)
        out.sum().backward()
        assert tds[0]["a"].grad is not None


def test_non_tensor_data_is_not_a_leaf():
    td = TensorDict({"s": NonTensorData("x"), "t": torch.zeros(())}, [])
    assert pytree.tree_leaves(td) == [td["t"]]


@pytest.mark.skipif(
    importlib.util.find_spec("tensordict._lazy") is None, reason="tensordict._lazy not available"
)
def test_heterogeneous_lazy_stack_keeps_its_tensordicts():
    from tensordict._lazy import LazyStackedTensorDict

    a = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3, 2)}, [3])
    b = TensorDict({"a": torch.ones(3), "x": torch.zeros(3)}, [3])
    c = TensorDict({"a": torch.ones(3), "b": torch.zeros(3, 5)}, [3])
    for lazy in (
        LazyStackedTensorDict(a, b, stack_dim=0),
        LazyStackedTensorDict(a, c, stack_dim=1),
    ):
        out = pytree.tree_map(lambda x: x + 1, lazy)
        assert isinstance(out, LazyStackedTensorDict)
        assert out.stack_dim == lazy.stack_dim and out.batch_size == lazy.batch_size
        for new, old in zip(out.tensordicts, lazy.tensordicts):
            assert sorted(new.keys()) == sorted(old.keys())
            for key in old.keys():
                assert torch.equal(new[key], old[key] + 1)


def test_jacrev_of_a_tensordict_function_keeps_the_batch_size():
    from torch.func import jacrev

    td = TensorDict({"a": torch.randn(2, 2), "b": torch.randn(2, 2)}, batch_size=[2])

    def f(x):
        return TensorDict({"x": x["a"] ** 2, "y": x["b"] ** 3}, batch_size=x.batch_size)

    jac = jacrev(f)(td)
    assert jac.batch_size == td.batch_size
    assert jac["x", "a"].shape == (2, 2, 2, 2)
    assert torch.allclose(jac["x", "a"].flatten(-2).flatten(end_dim=-2), torch.diag(2 * td["a"].flatten()))


def test_make_tensordict_of_a_tensordict_computes_the_batch_size_through_nested_ones():
    from tensordict import make_tensordict

    src = TensorDict({"a": {"b": torch.randn(3, 4), "c": torch.randn(3, 4, 5)}, "d": torch.randn(3)}, [])
    out = make_tensordict(src, auto_batch_size=True)
    assert out.batch_size == (3,)
    assert out["a"].batch_size == (3, 4)
