"""Upstream tensordict's module map on the full stack (every distribution installed)."""

import importlib

import pytest
import torch
from torch import nn

UPSTREAM_PATHS = [
    "tensordict.base",
    "tensordict.tensordict",
    "tensordict.utils",
    "tensordict.functional",
    "tensordict.testing",
    "tensordict.nn.common",
    "tensordict.nn.probabilistic",
    "tensordict.nn.sequence",
    "tensordict.nn.params",
    "tensordict.nn.utils",
    "tensordict.nn.distributions",
    "tensordict.nn.distributions.composite",
    "tensordict.nn.distributions.continuous",
    "tensordict.nn.distributions.discrete",
    "tensordict.nn.functional_modules",
    "tensordict.nn.ensemble",
    "tensordict.nn.cudagraphs",
    "tensordict.prototype",
    "tensordict.prototype.fx",
    "tensordict._tensorcollection",
]


@pytest.mark.parametrize("path", UPSTREAM_PATHS)
def test_upstream_path_imports_and_all_resolves(path):
    module = importlib.import_module(path)
    for name in getattr(module, "__all__", []):
        assert getattr(module, name) is not None, name


def test_prototype_symbolic_trace_is_td_nn_fx():
    import tensordict.nn.fx
    from tensordict.nn import TensorDictModule, TensorDictSequential
    from tensordict.prototype import symbolic_trace

    assert symbolic_trace is tensordict.nn.fx.symbolic_trace
    seq = TensorDictSequential(TensorDictModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["y"]))
    graph = symbolic_trace(seq)
    from tensordict import TensorDict

    out = graph(TensorDict(x=torch.ones(4, 3), batch_size=[4]))
    assert out["y"].shape == (4, 2)


def test_top_level_names_from_siblings():
    import tensordict

    assert tensordict.TensorDictParams is importlib.import_module("tensordict.nn").TensorDictParams
    assert tensordict.as_tensordict_module is importlib.import_module("tensordict.nn").as_tensordict_module
    assert tensordict.MetaData is importlib.import_module("tensordict.tensorclass").MetaData
