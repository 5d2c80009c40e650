"""TensorDictParams: a TensorDict of parameters that is also an nn.Module."""

import copy
import pickle

import pytest
import torch
from torch import nn

import tensordict
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictParams


def _params():
    return TensorDictParams(TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(2)}, "i": torch.arange(3)}))


class Holder(nn.Module):
    def __init__(self, params):
        super().__init__()
        self.params = params


class TestModuleSide:
    def test_parameters_and_buffers_registered(self):
        params = _params()
        holder = Holder(params)
        assert [n for n, _ in holder.named_parameters()] == ["params.a", "params.b.c"]
        assert [n for n, _ in holder.named_buffers()] == ["params.i"]
        assert set(holder.state_dict()) == {"params.a", "params.b.c", "params.i"}
        assert all(isinstance(p, nn.Parameter) for p in holder.parameters())

    def test_optimizer_updates_tensordict_values(self):
        params = _params()
        holder = Holder(params)
        opt = torch.optim.SGD(holder.parameters(), lr=1.0)
        (params["a"].sum() + params["b", "c"].sum()).backward()
        opt.step()
        assert (params["a"] == -1).all() and (params["b", "c"] == 0).all()

    def test_to_dtype_in_place(self):
        params = _params()
        holder = Holder(params)
        assert holder.to(torch.float64) is holder
        assert params["a"].dtype == torch.float64 and params["b", "c"].dtype == torch.float64
        assert isinstance(params["a"], nn.Parameter)
        assert params.to(torch.float32) is params

    def test_to_device_updates_device(self, device):
        params = TensorDictParams(TensorDict({"a": torch.zeros(3)}, device="cpu"))
        params.to(device)
        assert params["a"].device.type == device.type and params.device.type == device.type

    def test_state_dict_round_trip(self):
        src, dst = Holder(_params()), Holder(_params())
        with torch.no_grad():
            src.params["a"].add_(5)
        dst.load_state_dict(src.state_dict())
        assert (dst.params["a"] == 5).all()

    def test_deepcopy_and_pickle(self):
        holder = Holder(_params())
        twin = copy.deepcopy(holder)
        assert twin.params["a"] is not holder.params["a"]
        assert torch.equal(twin.params["b", "c"], holder.params["b", "c"])
        restored = pickle.loads(pickle.dumps(holder))
        assert set(restored.params.keys(True, True)) == {"a", "i", ("b", "c")}

    def test_functional_call(self):
        class Reader(nn.Module):
            def __init__(self):
                super().__init__()
                self.params = _params()

            def forward(self):
                return self.params["a"] + self.params["b", "c"].sum()

        reader = Reader()
        out = torch.func.functional_call(reader, {"params.a": torch.full((3,), 7.0)}, ())
        assert (out == 9).all()
        assert (reader.params["a"] == 0).all()


class TestTensorDictSide:
    def test_get_set_index(self):
        params = _params()
        assert isinstance(params["b", "c"], nn.Parameter)
        assert isinstance(params.get("b"), TensorDictParams)
        params["d"] = torch.randn(3)
        assert isinstance(params["d"], nn.Parameter)
        params.set(("e", "f"), torch.randn(2))
        assert isinstance(params["e", "f"], nn.Parameter)
        assert ("e", "f") in params.keys(True)
        del params["d"]
        assert "d" not in params.keys()

    def test_no_convert(self):
        params = TensorDictParams(TensorDict({"p": nn.Parameter(torch.zeros(2)), "t": torch.zeros(2)}), no_convert=True)
        assert isinstance(params["p"], nn.Parameter)
        assert not isinstance(params["t"], nn.Parameter)
        assert [n for n, _ in params.named_buffers()] == ["t"]

    def test_batched_index_and_apply_give_tensordicts(self):
        params = TensorDictParams(TensorDict({"w": torch.randn(4, 3)}, batch_size=[4]))
        assert params[1:3].batch_size == torch.Size([2])
        doubled = params.apply(lambda t: t * 2)
        assert type(doubled) is TensorDict
        torch.testing.assert_close(doubled["w"], params["w"] * 2)

    def test_stack_and_compare(self):
        params = _params()
        stacked = torch.stack([params, params], 0)
        assert stacked.batch_size == torch.Size([2])
        assert (params == params.clone()).all()

    def test_clone(self):
        params = _params()
        clone = params.clone()
        assert isinstance(clone, TensorDictParams)
        assert isinstance(clone["a"], nn.Parameter) and clone["a"] is not params["a"]
        shallow = params.clone(recurse=False)
        assert shallow["a"] is params["a"]

    def test_in_place_write_into_parameters(self):
        params = _params()
        params.set_("a", torch.ones(3))
        params.update_({"b": {"c": torch.full((2,), 4.0)}})
        assert (params["a"] == 1).all() and (params["b", "c"] == 4).all()

    def test_lock(self):
        params = TensorDictParams(TensorDict({"a": torch.zeros(2)}), lock=True)
        with pytest.raises(RuntimeError, match="locked"):
            params["b"] = torch.zeros(2)

    def test_to_module(self):
        linear = nn.Linear(3, 4)
        params = TensorDictParams(TensorDict({"weight": torch.zeros(4, 3), "bias": torch.zeros(4)}))
        with params.to_module(linear):
            assert (linear(torch.ones(3)) == 0).all()
        assert linear.weight.abs().sum() > 0

    def test_as_module_attribute_of_td_module(self):
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.params = TensorDictParams(TensorDict({"scale": torch.ones(1)}))

            def forward(self, x):
                return x * self.params["scale"]

        module = TensorDictModule(Scaled(), in_keys=["x"], out_keys=["y"])
        td = module(TensorDict(x=torch.ones(2), batch_size=[2]))
        td["y"].sum().backward()
        assert module.module.params["scale"].grad is not None

    def test_bad_input(self):
        with pytest.raises(TypeError, match="TensorDict or a dict"):
            TensorDictParams([1, 2])
        params = TensorDictParams(TensorDict({"w": torch.zeros(4, 3)}, batch_size=[4]))
        with pytest.raises(RuntimeError, match="batch"):
            params["x"] = torch.zeros(3)

    def test_from_dict_and_kwargs(self):
        params = TensorDictParams({"a": torch.zeros(2)}, b=torch.ones(2))
        assert sorted(params.keys()) == ["a", "b"]


class TestSeams:
    def test_top_level_name(self):
        assert tensordict.TensorDictParams is TensorDictParams

    def test_from_module_as_module(self):
        linear = nn.Linear(3, 4)
        params = TensorDict.from_module(linear, as_module=True)
        assert isinstance(params, TensorDictParams)
        assert params["weight"] is linear.weight
        holder = Holder(params)
        assert [n for n, _ in holder.named_parameters()] == ["params.weight", "params.bias"]

    def test_from_modules_as_module(self):
        params = TensorDict.from_modules(nn.Linear(3, 4), nn.Linear(3, 4), as_module=True)
        assert isinstance(params, TensorDictParams) and params.batch_size == torch.Size([2])
        assert params["weight"].shape == (2, 4, 3)


def test_clone_keeps_tied_parameters_tied():
    shared = torch.nn.Parameter(torch.zeros(()))
    params = TensorDictParams(TensorDict({"a": shared, "b": {"c": shared}}, []), no_convert=True)
    clone = params.clone()
    assert clone["a"] is clone["b", "c"] and clone["a"] is not shared


def test_in_place_writes_on_leaf_parameters():
    td = TensorDict({"a": {"b": torch.zeros((), requires_grad=True)}, "e": torch.zeros((), requires_grad=True)}, [])
    params = TensorDictParams(td)
    params.copy_(params.data.apply(lambda x: x + 1))
    assert (params == 1).all()
    params.zero_()
    assert (params == 0).all() and params["e"].requires_grad


@pytest.mark.parametrize("detach", [True, False])
def test_load_tensordict_state_dict(detach):
    params = TensorDictParams(TensorDict({"a": 1.0, "b": {"c": 3.0}}, []))
    sd = params.detach().clone().zero_().state_dict() if detach else {k: v * 0 for k, v in params.state_dict().items()}
    params.load_state_dict(sd)
    assert (params == 0).all() and isinstance(params["b", "c"], nn.Parameter)


def test_casts_give_a_plain_tensordict_with_every_leaf_cast():
    params = TensorDictParams(TensorDict({"w": torch.randn(3), "n": torch.arange(3)}, [3]))
    out = params.float()
    assert type(out) is TensorDict
    assert out["n"].dtype is torch.float32
    assert params["n"].dtype is torch.int64  # the parameters are untouched
    assert params.int()["w"].dtype is torch.int32
    assert params.type(torch.float64)["n"].dtype is torch.float64


def test_parent_module_cast_still_reaches_the_parameters():
    params = TensorDictParams(TensorDict({"w": torch.randn(3)}, [3]))
    holder = torch.nn.Module()
    holder.params = params
    holder.double()
    assert params["w"].dtype is torch.float64
    assert isinstance(params["w"], torch.nn.Parameter)


def test_keys_keep_insertion_order_across_parameters_and_buffers():
    params = TensorDictParams(TensorDict({"a": torch.randn(2), "b": torch.arange(2), "c": torch.randn(2)}, [2]))
    params["d"] = torch.randn(2)
    params["aa"] = torch.arange(2)
    assert list(params.keys()) == ["a", "b", "c", "d", "aa"]
    del params["b"]
    assert list(params.keys()) == ["a", "c", "d", "aa"]


def test_parent_zero_reaches_nested_params_without_autograd_error():
    params = TensorDictParams(TensorDict({"w": torch.randn(2)}, [2]))
    td = TensorDict({"p": params}, [2])
    td.zero_()
    assert (params["w"] == 0).all()
    assert params["w"].requires_grad


def test_apply_inplace_into_parameters_is_refused_but_apply__works():
    params = TensorDictParams(TensorDict({"w": torch.zeros(2)}, [2]))
    with pytest.raises(ValueError, match="Failed to update 'w'"):
        params.apply(lambda x: x + 1, inplace=True)
    params.apply_(lambda x: x + 1)
    assert (params["w"] == 1).all() and params["w"].requires_grad
    with torch.no_grad():
        params.apply(lambda x: x + 1, inplace=True)
    assert (params["w"] == 2).all()


def test_indexed_write_of_mismatched_batch_reports_the_batch_sizes():
    params = TensorDictParams(TensorDict({"w": torch.zeros(4, 2)}, [4]))
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        params[torch.tensor([0, 1])] = TensorDict({"w": torch.ones(4, 2)}, [4])


def test_out_writes_into_parameters_work():
    params = TensorDictParams(TensorDict({"w": torch.randn(4, 2)}, [4]))
    out = params.clone()
    mask = torch.tensor([True, False, True, False])
    torch.where(mask, params, torch.ones_like(params), out=out)
    assert (out["w"][~mask] == 1).all() and isinstance(out["w"], nn.Parameter)
    from tensordict import lazy_stack

    parts = [TensorDict({"w": torch.ones(2)}, []) for _ in range(4)]
    lazy_stack(parts, 0, out=params)
    assert (params["w"] == 1).all() and params["w"].requires_grad
    with pytest.raises(RuntimeError, match="out.batch_size and stacked"):
        lazy_stack(parts[:2], 0, out=params)


def test_get_post_hook_reads_through_nested_params():
    td = TensorDict(
        {"a": {"b": torch.zeros(2, requires_grad=True)}, "e": torch.zeros(2, requires_grad=True)}, []
    )
    params = TensorDictParams(td)
    params.register_get_post_hook(lambda self, x: x.data)
    assert not params["e"].requires_grad and not params.get(("a", "b")).requires_grad
    assert not any(v.requires_grad for v in params.values(True, True))
    # the same storage, and the parameters themselves are untouched
    assert params["a", "b"].data_ptr() == td["a", "b"].data_ptr()
    assert all(p.requires_grad for p in params.parameters())
    params["f"] = TensorDict(g=torch.ones(2, requires_grad=True))  # a nested one added later
    assert not params["f", "g"].requires_grad
    calls = []
    params.register_get_post_hook(lambda self, x: calls.append(1))  # None: the value is kept
    assert not params["e"].requires_grad and calls == [1]


def test_buffers_are_marked_as_torch_buffers():
    td = TensorDict(w=torch.zeros(2), i=torch.zeros(2, dtype=torch.long), f=torch.ones(2), batch_size=[])
    params = TensorDictParams(td)
    assert isinstance(params["w"], nn.Parameter) and isinstance(params["i"], nn.Buffer)
    kept = TensorDictParams(td, no_convert=True)
    assert isinstance(kept["f"], nn.Buffer) and not isinstance(kept["f"], nn.Parameter)
    # the same storage: writes through the TensorDictParams reach the source
    kept["f"].add_(1)
    assert torch.equal(td["f"], torch.full((2,), 2.0))
    assert "f" in dict(kept.named_buffers()) and "w" in dict(params.named_parameters())


def test_from_module_keeps_a_tensordictparams_submodule_itself_so_to_module_reaches_it():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)))
    params = TensorDict.from_module(net, as_module=True)

    class Holder(nn.Module):
        pass

    holder = Holder()
    holder.params = params
    holder.extra = nn.Linear(2, 3)
    for as_module in (False, True):
        tree = TensorDict.from_module(holder, as_module=as_module)
        assert tree["params"] is params  # the same module, not a copy of its tree
        assert tree["extra", "weight"] is holder.extra.weight
    tree = TensorDict.from_module(holder, as_module=True)
    zeros = tree.apply(lambda x: x.data * 0)
    with zeros.to_module(holder):
        # the TensorDictParams is updated in place (so every view of it reads zeros), a
        # plain submodule gets the zero tensors as its attributes
        assert (tree["params"] == 0).all() and (params == 0).all() and (holder.extra.weight == 0).all()
    assert not (params == 0).all()  # restored on exit
    assert (params["0", "weight"] == net[0].weight).all()


def test_an_expanded_shared_parameter_keeps_its_gradient_path_in_tensordictparams():
    shared = nn.Linear(3, 3)
    modules = [nn.Sequential(shared, nn.Linear(3, 2)) for _ in range(3)]
    params = TensorDict.from_modules(*modules, as_module=True, expand_identical=True)
    weight = params["0", "weight"]
    assert isinstance(weight, nn.Buffer) and not isinstance(weight, nn.Parameter)
    assert weight.data_ptr() == shared.weight.data_ptr()  # a view, not a copy
    skeleton = nn.Sequential(nn.Linear(3, 3, device="meta"), nn.Linear(3, 2, device="meta"))

    def run(p, x):
        with p.to_module(skeleton, preserve_module_state=False):
            return skeleton(x)

    torch.vmap(run, (0, None))(params, torch.ones(3)).sum().backward()
    assert shared.weight.grad is not None and shared.bias.grad is not None  # through the expanded view
    assert all(p.grad is not None for p in params.values(True, True) if isinstance(p, nn.Parameter))
    assert modules[0][1].weight.grad is None  # stacked copies, not the modules' own tensors
