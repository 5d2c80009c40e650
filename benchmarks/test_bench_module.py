"""``to_module`` + forward of a 3-layer MLP next to the plain forward.

``_td``: ``with params.to_module(model): model(x)`` (swap the parameters in, run,
swap them back). ``_dict``: ``model(x)`` with the module's own parameters. A second
group compares against the hand-written functional equivalent,
``torch.func.functional_call`` with a dict of parameters.
"""

import pytest
import torch
from torch import nn

from tensordict import TensorDict

WIDTH = 32


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))


def bench(group):
    return pytest.mark.benchmark(group=group)


@bench("to_module + forward MLP")
def test_to_module_forward_td(benchmark):
    model = mlp()
    params = TensorDict.from_module(model).detach().clone()
    x = torch.randn(64, WIDTH)

    def run():
        with params.to_module(model):
            return model(x)

    benchmark(run)


@bench("to_module + forward MLP")
def test_to_module_forward_dict(benchmark):
    model = mlp()
    x = torch.randn(64, WIDTH)
    benchmark(model, x)


@bench("to_module + forward MLP vs functional_call")
def test_functional_forward_td(benchmark):
    model = mlp()
    params = TensorDict.from_module(model).detach().clone()
    x = torch.randn(64, WIDTH)

    def run():
        with params.to_module(model):
            return model(x)

    benchmark(run)


@bench("to_module + forward MLP vs functional_call")
def test_functional_forward_dict(benchmark):
    model = mlp()
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    x = torch.randn(64, WIDTH)
    benchmark(torch.func.functional_call, model, params, (x,))


@bench("from_module MLP")
def test_from_module_td(benchmark):
    model = mlp()
    benchmark(TensorDict.from_module, model)


@bench("from_module MLP")
def test_from_module_dict(benchmark):
    model = mlp()
    benchmark(lambda: dict(model.named_parameters()))
