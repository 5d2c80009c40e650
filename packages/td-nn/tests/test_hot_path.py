"""The fast paths of TensorDictModule / TensorDictSequential keep nn.Module semantics."""

import pytest
import torch
from torch import nn

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential, set_skip_existing


def _mod(fn=None, i="x", o="y"):
    return TensorDictModule(fn or (lambda x: x + 1), in_keys=[i], out_keys=[o])


@pytest.mark.parametrize("in_sequence", [False, True])
def test_forward_hooks_fire(in_sequence):
    module = _mod()
    calls = []
    module.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    module.register_forward_hook(lambda m, args, out: calls.append("post"))
    runner = TensorDictSequential(module) if in_sequence else module
    runner(TensorDict(x=torch.zeros(2), batch_size=[2]))
    assert calls == ["pre", "post"]


def test_global_hooks_fire():
    seen = []
    handle = nn.modules.module.register_module_forward_hook(lambda m, a, o: seen.append(type(m).__name__))
    try:
        TensorDictSequential(_mod())(TensorDict(x=torch.zeros(2), batch_size=[2]))
    finally:
        handle.remove()
    assert "TensorDictModule" in seen and "TensorDictSequential" in seen


def test_hook_on_inner_module_fires():
    inner = nn.Linear(2, 2)
    seen = []
    inner.register_forward_hook(lambda m, a, o: seen.append(1))
    TensorDictSequential(TensorDictModule(inner, in_keys=["x"], out_keys=["y"]))(TensorDict(x=torch.zeros(3, 2), batch_size=[3]))
    assert seen == [1]


@pytest.mark.parametrize("in_sequence", [False, True])
def test_non_tensor_input_and_missing_key(in_sequence):
    module = _mod(lambda s: torch.zeros(2) if s == "hello" else torch.ones(2), i="s")
    runner = TensorDictSequential(module) if in_sequence else module
    td = TensorDict(s=NonTensorData("hello", batch_size=[2]), batch_size=[2])
    assert (runner(td)["y"] == 0).all()
    with pytest.raises(KeyError, match="'s'"):
        _mod(i="s")(TensorDict(x=torch.zeros(2), batch_size=[2]))


@pytest.mark.parametrize("in_sequence", [False, True])
def test_non_tensor_inputs_arrive_as_python_values(in_sequence):
    seen = []
    module = TensorDictModule(lambda s, n: seen.append((s, n)) or s + "!", in_keys=["s", "n"], out_keys=["out"])
    runner = TensorDictSequential(module) if in_sequence else module
    td = TensorDict(s="a string", n=NonTensorStack(NonTensorData(1), NonTensorData(2)))
    out = runner(td)
    (s, n), = seen
    assert s.__class__ is str and s == "a string"
    assert list(n) == [1, 2] and not isinstance(n, NonTensorStack)
    assert out["out"] == "a string!"


@pytest.mark.parametrize("in_sequence", [False, True])
def test_locked_and_batch_errors(in_sequence):
    runner = TensorDictSequential(_mod()) if in_sequence else _mod()
    td = TensorDict(x=torch.zeros(2), batch_size=[2]).lock_()
    with pytest.raises(RuntimeError, match="locked"):
        runner(td)
    bad = TensorDictSequential(_mod(lambda x: x.sum())) if in_sequence else _mod(lambda x: x.sum())
    td = TensorDict(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(RuntimeError, match="batch"):
        bad(td)
    assert "y" not in td.keys()


def test_device_tensordict(device):
    td = TensorDict(x=torch.zeros(2), batch_size=[2], device=device)
    out = TensorDictSequential(_mod(), _mod(i="y", o="z"))(td)
    assert out["z"].device.type == device.type


def test_changing_attributes_rebuilds_the_plan():
    module = _mod()
    module.inplace = False
    td = TensorDict(x=torch.zeros(2), batch_size=[2])
    out = module(td)
    assert out is not td and "y" not in td.keys()
    module.inplace = True
    module.module = lambda x: x * 0 - 1
    assert (module(td)["y"] == -1).all()


def test_skip_existing_per_step():
    calls = []
    first = _mod(lambda x: calls.append("a") or x + 1, "x", "y")
    second = _mod(lambda y: calls.append("b") or y + 1, "y", "z")
    td = TensorDict(x=torch.zeros(2), y=torch.zeros(2), batch_size=[2])
    with set_skip_existing(True):
        TensorDictSequential(first, second)(td)
    assert calls == ["b"] and (td["z"] == 1).all()


def test_compiled_submodule():
    module = _mod()
    module.compile(backend="eager")
    assert (TensorDictSequential(module)(TensorDict(x=torch.zeros(2), batch_size=[2]))["y"] == 1).all()


def test_deepcopy_uses_its_own_module():
    import copy

    module = TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"])
    twin = copy.deepcopy(module)
    with torch.no_grad():
        twin.module.weight.zero_()
        twin.module.bias.fill_(3.0)
    x = torch.randn(4, 2)
    assert (twin(TensorDict(x=x, batch_size=[4]))["y"] == 3).all()
    seq_twin = copy.deepcopy(TensorDictSequential(module))
    with torch.no_grad():
        seq_twin[0].module.bias.fill_(-7.0)
        seq_twin[0].module.weight.zero_()
    assert (seq_twin(TensorDict(x=x, batch_size=[4]))["y"] == -7).all()
    assert not (module(TensorDict(x=x, batch_size=[4]))["y"] == -7).all()
