"""from_module / from_modules / to_module on real nn.Modules."""

import pytest
import torch
from torch import nn

import tensordict
from tensordict import TensorDict, TensorDictBase, from_module, from_modules


def mlp(device="cpu"):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2)).to(device)


# ---------------------------------------------------------------------- from_module
def test_from_module_tree_and_identity():
    model = mlp()
    params = TensorDict.from_module(model)
    assert set(params.keys(True, True)) == {
        ("0", "weight"), ("0", "bias"),
        ("2", "weight"), ("2", "bias"), ("2", "running_mean"), ("2", "running_var"), ("2", "num_batches_tracked"),
        ("3", "weight"), ("3", "bias"),
    }
    assert params["0", "weight"] is model[0].weight
    assert params["2", "running_mean"] is model[2].running_mean
    assert "1" not in params.keys()  # ReLU: no parameters, filtered (filter_empty=True)
    kept = TensorDict.from_module(model, filter_empty=False)
    assert isinstance(kept["1"], TensorDictBase) and kept["1"].is_empty()
    assert params.batch_size == torch.Size([]) and params.device is None
    # in-place changes reach the module
    with torch.no_grad():
        params["0", "bias"].zero_()
    assert (model[0].bias == 0).all()


def test_from_module_lock_defaults():
    model = nn.Linear(2, 2)
    assert not TensorDict.from_module(model).is_locked
    assert TensorDict.from_module(model, lock=True).is_locked
    assert from_module(model).is_locked
    assert not from_module(model, lock=False).is_locked
    assert tensordict.from_module is from_module
    assert tensordict.from_modules is from_modules


def test_from_module_skips_none_and_matches_state_dict():
    model = nn.Sequential(nn.Linear(3, 4, bias=False), nn.Linear(4, 4))
    params = TensorDict.from_module(model)
    assert ("0", "bias") not in params.keys(True)
    ref = TensorDict(model.state_dict(), []).unflatten_keys(".")
    assert (params == ref).all()


def test_from_module_use_state_dict_runs_hooks():
    model = nn.Linear(2, 3)

    def hook(module, state_dict, prefix, local_metadata):
        state_dict[prefix + "weight"] = state_dict[prefix + "weight"] * 0 + 7

    model.register_state_dict_post_hook(hook)
    td = TensorDict.from_module(model, use_state_dict=True)
    assert (td["weight"] == 7).all()
    assert not isinstance(td["weight"], nn.Parameter)


def test_from_module_bad_input():
    with pytest.raises(TypeError, match="nn.Module"):
        TensorDict.from_module({"weight": torch.zeros(2)})


def test_from_module_as_module():
    nn_pkg = pytest.importorskip("tensordict.nn")
    if not hasattr(nn_pkg, "TensorDictParams"):
        pytest.skip("td-nn does not provide TensorDictParams yet")
    model = nn.Linear(2, 3)
    params = TensorDict.from_module(model, as_module=True)
    assert isinstance(params, nn_pkg.TensorDictParams)
    assert isinstance(params, nn.Module)
    assert {p.shape for p in params.parameters()} == {torch.Size([3, 2]), torch.Size([3])}


# ---------------------------------------------------------------------- to_module
def test_to_module_context_restores(device):
    model = mlp(device)
    originals = {k: v for k, v in TensorDict.from_module(model).items(True, True)}
    params = TensorDict.from_module(model).detach().clone()
    params.zero_()
    x = torch.randn(5, 3, device=device)
    model.eval()
    with params.to_module(model, preserve_module_state=False) as swap:
        y = model(x)
        assert model[0].weight is params["0", "weight"]
        assert not isinstance(model[0].weight, nn.Parameter)  # plain tensors are not wrapped
        assert swap["0", "weight"] is originals[("0", "weight")]
    assert (y == 0).all()
    for key, value in TensorDict.from_module(model).items(True, True):
        assert value is originals[key]
    assert isinstance(model[0].weight, nn.Parameter)


def test_to_module_restores_on_exception():
    model = nn.Linear(2, 2)
    weight = model.weight
    params = TensorDict({"weight": torch.zeros(2, 2), "bias": torch.zeros(2)})
    with pytest.raises(ValueError, match="boom"):
        with params.to_module(model, preserve_module_state=False):
            assert model.weight is params["weight"]
            raise ValueError("boom")
    assert model.weight is weight


def test_to_module_without_context_and_swap_back():
    model = nn.Linear(2, 2)
    weight, bias = model.weight, model.bias
    new = TensorDict({"weight": nn.Parameter(torch.ones(2, 2)), "bias": nn.Parameter(torch.ones(2))})
    swap = new.to_module(model)
    assert model.weight is new["weight"]
    assert swap["weight"] is weight
    swap.to_module(model)
    assert model.weight is weight and model.bias is bias


def test_to_module_inplace_keeps_identity():
    model = nn.Linear(2, 2)
    weight = model.weight
    before = weight.detach().clone()
    new = TensorDict({"weight": torch.full((2, 2), 3.0)})
    with new.to_module(model, inplace=True):
        assert model.weight is weight
        assert (model.weight == 3).all()
    assert model.weight is weight
    assert torch.equal(model.weight.detach(), before)
    new.to_module(model, inplace=True, return_swap=False)
    assert (model.weight == 3).all()


def test_to_module_return_swap_false_and_swap_dest():
    model = nn.Linear(2, 2)
    weight = model.weight
    new = TensorDict({"weight": torch.zeros(2, 2)})
    assert new.to_module(model, return_swap=False, preserve_module_state=False) is None
    assert model.weight is new["weight"]
    dest = TensorDict()
    back = TensorDict({"weight": weight})
    with back.to_module(model, swap_dest=dest) as out:
        assert out is dest
        assert dest["weight"] is new["weight"]
        assert model.weight is weight
    assert model.weight is new["weight"]


def test_to_module_preserves_module_state_by_default():
    model = nn.Linear(4, 2)
    model.weight.requires_grad_(False)
    keys = set(model.state_dict())
    values = TensorDict.from_module(model).detach().clone().zero_()
    values.to_module(model)
    assert set(model.state_dict()) == keys
    assert isinstance(model.weight, nn.Parameter) and isinstance(model.bias, nn.Parameter)
    assert not model.weight.requires_grad and model.bias.requires_grad
    assert (model.weight == 0).all()


def test_to_module_without_preserving_state_sets_plain_attributes():
    model = nn.Linear(4, 2)
    values = TensorDict.from_module(model).detach().clone()
    with values.to_module(model, preserve_module_state=False):
        assert "weight" not in model.state_dict()
        assert not isinstance(model.weight, nn.Parameter)
    assert isinstance(model.weight, nn.Parameter) and "weight" in model.state_dict()


def test_to_module_parameter_into_buffer_slot_stays_buffer():
    module = nn.Module()
    module.register_buffer("buffer", torch.ones(3))
    TensorDict({"buffer": nn.Parameter(torch.zeros(3))}).to_module(module)
    assert "buffer" in dict(module.named_buffers())
    assert "buffer" not in dict(module.named_parameters())
    assert not isinstance(module.buffer, nn.Parameter)
    assert (module.buffer == 0).all()


def test_to_module_keeps_autograd_history():
    model = nn.Linear(2, 2)
    weight = torch.ones(2, 2, requires_grad=True)
    scaled = {"weight": weight * 2}
    with TensorDict(scaled).to_module(model):
        model(torch.ones(2)).sum().backward()
    assert weight.grad is not None


def test_to_module_partial_td():
    model = nn.Linear(2, 2)
    bias = model.bias
    with TensorDict({"weight": torch.zeros(2, 2)}).to_module(model):
        assert model.bias is bias
        assert (model.weight == 0).all()


def test_to_module_bias_none_slot():
    model = nn.Linear(2, 2, bias=False)
    td = TensorDict({"weight": torch.zeros(2, 2), "bias": torch.ones(2)})
    with td.to_module(model) as swap:
        assert (model(torch.zeros(2)) == 1).all()
        assert "bias" not in swap.keys()
    assert model.bias is None


def test_to_module_mismatch_names_missing_and_extra_leaves_module_unchanged():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    before = {k: v for k, v in TensorDict.from_module(model).items(True, True)}
    # the first keys are valid: nothing must be written before the bad key is found
    bad = TensorDict({"0": {"weight": torch.zeros(4, 3), "bias": torch.zeros(4)}, "1": {"weight": torch.zeros(2, 4), "bais": torch.zeros(2)}})
    with pytest.raises(KeyError) as err:
        bad.to_module(model)
    msg = str(err.value)
    assert "1.bais" in msg and "extra" in msg
    assert "1.bias" in msg and "missing" in msg
    after = {k: v for k, v in TensorDict.from_module(model).items(True, True)}
    assert all(after[k] is before[k] for k in before) and after.keys() == before.keys()


def test_to_module_unknown_submodule_and_non_tensor():
    model = nn.Linear(2, 2)
    with pytest.raises(KeyError, match="extra keys \\['layer.weight'\\]"):
        TensorDict({"layer": {"weight": torch.zeros(2, 2)}}).to_module(model)
    with pytest.raises(TypeError, match="not a tensor"):
        TensorDict({"weight": "a string"}).to_module(model)
    with pytest.raises(TypeError, match="nn.Module"):
        TensorDict({"weight": torch.zeros(2, 2)}).to_module("not a module")
    weight = model.weight
    with pytest.raises(KeyError):
        TensorDict({"weight": torch.zeros(2, 2), "scale": torch.ones(1)}).to_module(model, inplace=True)
    assert model.weight is weight and model.weight.abs().sum() > 0


def test_to_module_use_state_dict():
    model = nn.Linear(2, 2)
    calls = []
    model.register_load_state_dict_pre_hook(lambda *args, **kwargs: calls.append(1))
    weight = model.weight
    before = weight.detach().clone()
    new = TensorDict({"weight": torch.ones(2, 2), "bias": torch.zeros(2)})
    with new.to_module(model, use_state_dict=True):
        assert model.weight is weight and (model.weight == 1).all()
    assert calls
    assert torch.equal(model.weight.detach(), before)
    with pytest.raises(ValueError, match="use_state_dict"):
        new.to_module(model, use_state_dict=True, inplace=True)
    with pytest.raises(KeyError, match="extra"):
        TensorDict({"wieght": torch.ones(2, 2)}).to_module(model, use_state_dict=True)


def test_to_module_on_a_submodule_slice():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 3))
    params = TensorDict.from_module(model).detach().clone().zero_()
    params["0"].to_module(model[0])
    assert (model[0].weight == 0).all()
    assert (model[1].weight != 0).any()


def test_seed_000_context_manager_example():
    module = nn.Linear(3, 4)
    x = torch.randn(3)
    params = TensorDict.from_module(module).clone()
    params.zero_()
    with params.to_module(module):
        y = module(x)
    assert (y == 0).all()
    assert (module.weight != 0).any()


# ---------------------------------------------------------------------- from_modules
def test_from_modules_dense_stack():
    modules = [nn.Linear(3, 4) for _ in range(3)]
    params = from_modules(*modules)
    assert params.batch_size == torch.Size([3]) and params.is_locked
    assert isinstance(params["weight"], nn.Parameter) and params["weight"].is_leaf
    for i, m in enumerate(modules):
        assert torch.equal(params["weight"][i], m.weight.detach())
    assert params["weight"].data_ptr() != modules[0].weight.data_ptr()
    nested = TensorDict.from_modules(*[mlp() for _ in range(2)])
    assert nested["2", "running_mean"].shape == (2, 4)
    assert not isinstance(nested["2", "running_mean"], nn.Parameter)
    assert nested["1"].batch_size == torch.Size([2])


def test_from_modules_structure_mismatch():
    with pytest.raises(RuntimeError, match="lazy_stack"):
        from_modules(nn.Linear(3, 4), nn.Linear(3, 5))
    with pytest.raises(RuntimeError, match="lacks"):
        from_modules(nn.Linear(3, 4), nn.Linear(3, 4, bias=False))
    with pytest.raises(ValueError):
        from_modules()
    with pytest.raises(RuntimeError, match="within a TensorDictParams.*as_module"):
        from_modules(nn.Linear(1, 1), as_module=True, lazy_stack=True)
    with pytest.raises(RuntimeError, match="not compatible with lazy modules"):
        from_modules(nn.LazyLinear(2), nn.LazyLinear(2), lazy_stack=True)


def test_from_modules_expand_identical():
    shared = nn.Linear(3, 4)
    params = from_modules(shared, shared, expand_identical=True, lock=False)
    assert params["weight"].shape == (2, 4, 3)
    assert params["weight"].stride()[0] == 0  # expanded, not copied
    assert params["weight"].data_ptr() == shared.weight.data_ptr()
    # a view of the shared parameter, not a new one: its gradient reaches `shared`
    assert not isinstance(params["weight"], nn.Parameter)
    params["weight"].sum().backward()
    assert (shared.weight.grad == 2).all()


def test_seed_003_from_modules_vmap_example():
    torch.manual_seed(0)
    empty_module = nn.Linear(3, 4, device="meta")
    n_models = 2
    modules = [nn.Linear(3, 4) for _ in range(n_models)]
    params = TensorDict.from_modules(*modules)

    def exec_module(params, x):
        with params.to_module(empty_module):
            return empty_module(x)

    x = torch.randn(3)
    y = torch.vmap(exec_module, (0, None))(params, x)
    assert y.shape == (n_models, 4)
    expected = torch.stack([m(x) for m in modules])
    torch.testing.assert_close(y, expected)
    # since lazy_stack = False, backprop leaves the original params untouched
    y.sum().backward()
    assert params["weight"].grad.norm() > 0
    assert modules[0].weight.grad is None
    assert empty_module.weight.device.type == "meta"  # restored


def test_seed_003_lazy_stack_example():
    pytest.importorskip("tensordict._lazy")
    empty_module = nn.Linear(3, 4, device="meta")
    modules = [nn.Linear(3, 4) for _ in range(2)]
    params = TensorDict.from_modules(*modules, lazy_stack=True)
    assert type(params).__name__ == "LazyStackedTensorDict"

    def exec_module(params, x):
        with params.to_module(empty_module):
            return empty_module(x)

    y = torch.vmap(exec_module, (0, None))(params, torch.randn(3))
    assert y.shape == (2, 4)
    y.sum().backward()
    assert modules[0].weight.grad is not None


def test_seed_004_functional_example():
    layer1 = nn.Linear(3, 4)
    layer2 = nn.Linear(4, 4)
    model = nn.Sequential(layer1, layer2)
    params = TensorDict.from_module(model)
    weights1 = TensorDict(layer1.state_dict(), []).unflatten_keys(".")
    weights2 = TensorDict(layer2.state_dict(), []).unflatten_keys(".")
    assert (params == TensorDict({"0": weights1, "1": weights2}, [])).all()
    x = torch.randn(10, 3)
    with params.to_module(model):
        out = model(x)
    torch.testing.assert_close(out, model(x))
    params_stack = torch.stack([params, params], 0)

    def func(x, params):
        with params.to_module(model):
            return model(x)

    y = torch.vmap(func, (None, 0))(x, params_stack)
    assert y.shape == torch.Size([2, 10, 4])
    torch.testing.assert_close(y[1], out)


def test_vmap_ensemble_on_device(device):
    modules = [nn.Linear(3, 2).to(device) for _ in range(4)]
    params = from_modules(*modules)
    base = nn.Linear(3, 2, device="meta")
    x = torch.randn(5, 3, device=device)

    def run(p, x):
        with p.to_module(base):
            return base(x)

    y = torch.vmap(run, (0, None))(params, x)
    torch.testing.assert_close(y, torch.stack([m(x) for m in modules]))


def test_to_module_shared_submodule_restored():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.Sequential(shared))
    original = shared.weight
    params = TensorDict.from_module(model).detach().clone().zero_()
    for preserve in (True, False):
        with params.to_module(model, preserve_module_state=preserve):
            assert (model(torch.ones(2)) == 0).all()
        assert shared.weight is original
    with params.to_module(model, inplace=True):
        assert (shared.weight == 0).all()
    assert shared.weight is original and not (shared.weight == 0).all()


def test_a_tensordict_is_a_mapping_modules_load_from():
    from collections.abc import Mapping

    net = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    td = TensorDict.from_module(net, filter_empty=False).detach().clone().zero_()
    assert isinstance(td, Mapping)
    net.load_state_dict(td.flatten_keys("."))
    assert all((p == 0).all() for p in net.parameters())
