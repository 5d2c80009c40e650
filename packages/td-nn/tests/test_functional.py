"""The functional API and composability with torch.vmap / torch.func."""

import warnings

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import (
    EnsembleModule,
    TensorDictModule,
    TensorDictSequential,
    get_functional,
    is_functional,
    make_functional,
    repopulate_module,
)


class TestOverviewExample:
    def _run(self, vmap):
        layer1 = nn.Linear(3, 4)
        layer2 = nn.Linear(4, 4)
        model = nn.Sequential(layer1, layer2)
        weights1 = TensorDict(layer1.state_dict(), []).unflatten_keys(separator=".")
        weights2 = TensorDict(layer2.state_dict(), []).unflatten_keys(separator=".")
        params = make_functional(model)
        assert (params == TensorDict({"0": weights1, "1": weights2}, [])).all()
        x = torch.randn(10, 3)
        out = model(x, params=params)
        hidden = torch.nn.functional.linear(x, params["0", "weight"], params["0", "bias"])
        torch.testing.assert_close(out, torch.nn.functional.linear(hidden, params["1", "weight"], params["1", "bias"]))
        params_stack = torch.stack([params, params], 0)
        y = vmap(model, (None, 0))(x, params_stack)
        assert y.shape == torch.Size([2, 10, 4])
        torch.testing.assert_close(y[0], out)

    def test_with_torch_vmap(self):
        self._run(torch.vmap)

    def test_with_functorch_vmap(self):
        functorch = pytest.importorskip("functorch")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._run(functorch.vmap)


class TestFunctional:
    def test_make_functional_strips_and_repopulates(self):
        model = nn.Linear(2, 3)
        params = make_functional(model)
        assert is_functional(model) and model.weight is None
        assert list(model.parameters()) == []
        out = model(torch.ones(2), params)  # params as the last positional argument
        assert out.shape == (3,)
        assert model.weight is None  # restored after the call
        repopulate_module(model, params)
        assert model.weight is params["weight"]
        torch.testing.assert_close(model(torch.ones(2)), out)

    def test_keep_params_and_get_functional(self):
        model = get_functional(nn.Linear(2, 1))
        assert is_functional(model) and model.weight is not None
        zeros = TensorDict({"weight": torch.zeros(1, 2), "bias": torch.zeros(1)})
        assert model(torch.ones(2), params=zeros).item() == 0
        assert model(torch.ones(2)).item() != 0
        assert not is_functional(nn.Linear(1, 1))

    def test_td_module_functional(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        params = make_functional(module)
        td = TensorDict(x=torch.randn(5, 3), batch_size=[5])
        out = module(td, params=params)
        assert out["y"].shape == (5, 4)
        stacked = torch.stack([params, params.apply(torch.zeros_like)], 0)
        res = torch.vmap(module, (None, 0))(td, stacked)
        assert res.batch_size == torch.Size([2, 5])
        assert (res["y"][1] == 0).all()
        torch.testing.assert_close(res["y"][0], out["y"])

    def test_funs_to_decorate(self):
        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(2, 2)

            def forward(self, x):
                return self.lin(x)

            def other(self, x):
                return self.lin(x) * 2

        model = Two()
        params = make_functional(model, funs_to_decorate=["forward", "other"], keep_params=True)
        zeros = params.apply(torch.zeros_like)
        assert (model.other(torch.ones(2), params=zeros) == 0).all()
        with pytest.raises(AttributeError, match="no method 'nope'"):
            make_functional(model, funs_to_decorate=["nope"])

    def test_not_a_module(self):
        with pytest.raises(TypeError, match="nn.Module"):
            make_functional(lambda x: x)

    def test_gradients_reach_params(self):
        model = nn.Linear(2, 1)
        params = make_functional(model)
        model(torch.ones(2), params=params).sum().backward()
        assert params["weight"].grad is not None


class TestComposability:
    def test_vmap_over_stacked_params(self):
        modules = [nn.Linear(3, 4) for _ in range(3)]
        params = TensorDict.from_modules(*modules)
        template = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        td = TensorDict(x=torch.randn(6, 3), batch_size=[6])

        def run(p, data):
            with p.to_module(template.module):
                return template(data)

        out = torch.vmap(run, (0, None))(params, td)
        assert out.batch_size == torch.Size([3, 6])
        for i, m in enumerate(modules):
            torch.testing.assert_close(out["y"][i], m(td["x"]))
        out["y"].sum().backward()
        assert params["weight"].grad.shape == (3, 4, 3)

    def test_functional_call(self):
        module = TensorDictSequential(
            TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["h"]),
            TensorDictModule(nn.Linear(4, 1), in_keys=["h"], out_keys=["y"]),
        )
        zeros = {name: torch.zeros_like(p) for name, p in module.named_parameters()}
        td = TensorDict(x=torch.randn(5, 3), batch_size=[5])
        out = torch.func.functional_call(module, zeros, (td,))
        assert (out["y"] == 0).all()
        assert module[0].module.weight.abs().sum() > 0

    def test_grad_with_functional_call(self):
        module = TensorDictModule(nn.Linear(3, 1), in_keys=["x"], out_keys=["y"])
        params = dict(module.named_parameters())
        x = torch.randn(5, 3)

        def loss(p):
            return torch.func.functional_call(module, p, (TensorDict(x=x, batch_size=[5]),))["y"].sum()

        grads = torch.func.grad(loss)(params)
        torch.testing.assert_close(grads["module.weight"], x.sum(0, keepdim=True))


class TestEnsemble:
    def test_ensemble(self):
        module = TensorDictModule(nn.Linear(2, 3), in_keys=["x"], out_keys=["y"])
        ensemble = EnsembleModule(module, num_copies=4)
        assert ensemble.params_td.batch_size == torch.Size([4])
        assert ensemble.in_keys == ["x"] and ensemble.out_keys == ["y"]
        names = [n for n, _ in ensemble.named_parameters()]
        assert names == ["params_td.module.weight", "params_td.module.bias"]
        td = TensorDict(x=torch.randn(5, 2), batch_size=[5])
        out = ensemble(td)
        assert out.batch_size == torch.Size([4, 5]) and out["y"].shape == (4, 5, 3)
        assert not torch.allclose(out["y"][0], out["y"][1])
        w = ensemble.params_td["module", "weight"][2]
        b = ensemble.params_td["module", "bias"][2]
        torch.testing.assert_close(out["y"][2], td["x"] @ w.T + b)

    def test_ensemble_trains(self):
        ensemble = EnsembleModule(TensorDictModule(nn.Linear(2, 1), in_keys=["x"], out_keys=["y"]), num_copies=3)
        opt = torch.optim.SGD(ensemble.parameters(), lr=0.1)
        out = ensemble(TensorDict(x=torch.randn(8, 2), batch_size=[8]))
        out["y"].pow(2).mean().backward()
        assert ensemble.params_td["module", "weight"].grad.shape == (3, 1, 2)
        opt.step()

    def test_no_expand(self):
        ensemble = EnsembleModule(TensorDictModule(nn.Linear(2, 1), in_keys=["x"], out_keys=["y"]), num_copies=2, expand_input=False)
        out = ensemble(TensorDict(x=torch.randn(2, 5, 2), batch_size=[2, 5]))
        assert out["y"].shape == (2, 5, 1)
        with pytest.raises(RuntimeError, match="leading dim must be 2"):
            ensemble(TensorDict(x=torch.randn(3, 5, 2), batch_size=[3, 5]))

    def test_bad_input(self):
        with pytest.raises(ValueError, match="num_copies"):
            EnsembleModule(TensorDictModule(nn.Linear(2, 1), in_keys=["x"], out_keys=["y"]), num_copies=0)
        with pytest.raises(TypeError, match="nn.Module"):
            EnsembleModule(lambda td: td, num_copies=2)

    def test_reset_parameters(self):
        ensemble = EnsembleModule(TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"]), num_copies=2)
        before = ensemble.params_td["module", "weight"].detach().clone()
        ensemble.reset_parameters_recursive()
        after = ensemble.params_td["module", "weight"]
        assert not torch.equal(before, after) and not torch.equal(after[0], after[1])
