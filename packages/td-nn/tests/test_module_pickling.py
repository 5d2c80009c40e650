"""Pickling and copying a TensorDictModule that wraps a plain callable (a lambda, a
local function): pickled with cloudpickle, as tensordict 0.15 does, so such a module
can go to a spawned process; ``copy.deepcopy`` keeps the function itself."""

from __future__ import annotations

import copy
import pickle

import torch
import torch.multiprocessing as mp
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictModule


def test_a_module_over_a_lambda_pickles_and_runs_after_loading():
    offset = torch.tensor(10.0)
    module = TensorDictModule(lambda x: x + offset, in_keys=["x"], out_keys=["y"])
    loaded = pickle.loads(pickle.dumps(module))
    assert torch.equal(loaded(TensorDict(x=torch.ones(2)))["y"], torch.full((2,), 11.0))
    assert loaded.in_keys == ["x"] and loaded.out_keys == ["y"]
    assert callable(module.module)  # the original is untouched by pickling


def test_a_module_over_a_local_function_runs_in_a_spawned_process():
    def double(x):
        return 2 * x

    module = TensorDictModule(double, in_keys=["x"], out_keys=["y"])
    # the pool pickles the module itself as the task: the child unpickles it and calls it
    with mp.get_context("spawn").Pool(1) as pool:
        out = pool.apply(module, (TensorDict(x=torch.arange(3.0)),))
    assert torch.equal(out["y"], torch.tensor([0.0, 2.0, 4.0]))


def test_deepcopy_keeps_a_wrapped_function_and_copies_a_wrapped_module():
    def fn(x):
        return x + 1

    copied = copy.deepcopy(TensorDictModule(fn, in_keys=["x"], out_keys=["y"]))
    assert copied.module is fn
    assert torch.equal(copied(TensorDict(x=torch.zeros(1)))["y"], torch.ones(1))
    linear = TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"])
    twin = copy.deepcopy(linear)
    assert twin.module is not linear.module
    assert twin.module.weight is not linear.module.weight
    assert torch.equal(twin.module.weight, linear.module.weight)
    x = TensorDict(x=torch.randn(4, 2), batch_size=[4])
    assert torch.equal(twin(x.clone())["y"], linear(x.clone())["y"])
