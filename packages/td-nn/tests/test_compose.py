"""torch.compile (fullgraph) and torch.fx tracing of TensorDict modules (CUDA graphs: test_cudagraphs.py)."""

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    TensorDictModule,
    TensorDictSequential,
)
from tensordict.nn.fx import TDGraphModule, symbolic_trace


def _seq():
    return TensorDictSequential(
        TensorDictModule(nn.Linear(3, 3), in_keys=["x"], out_keys=["x2"]),
        TensorDictModule(nn.Linear(3, 4), in_keys=["x2"], out_keys=[("h", "a")]),
        TensorDictModule(lambda h, x: (h.relu(), h.sum(-1, keepdim=True) + x), in_keys=[("h", "a"), "x"], out_keys=["y", "z"]),
    )


class TestCompile:
    @pytest.mark.timeout(300)
    def test_fullgraph_sequence_reads_and_writes_keys(self):
        torch._dynamo.reset()
        seq = _seq()

        def step(td):
            td = seq(td)
            td["w"] = td["y"] * 2
            return td["z"].sum(), td

        compiled = torch.compile(step, fullgraph=True, backend="eager")
        td = TensorDict(x=torch.randn(5, 3), batch_size=[5])
        total, out = compiled(td)
        assert out is td
        assert set(td.keys(True, True)) == {"x", "x2", ("h", "a"), "y", "z", "w"}
        ref = step(TensorDict(x=td["x"], batch_size=[5]))[1]
        torch.testing.assert_close(td["w"], ref["w"])
        torch.testing.assert_close(total, ref["z"].sum())

    @pytest.mark.timeout(600)
    def test_inductor_module_compile(self):
        torch._dynamo.reset()
        seq = TensorDictSequential(
            TensorDictModule(nn.Linear(4, 4), in_keys=["x"], out_keys=["h"]),
            TensorDictModule(nn.Linear(4, 2), in_keys=["h"], out_keys=["y"]),
        )
        compiled = torch.compile(seq, fullgraph=True)
        td = TensorDict(x=torch.randn(8, 4), batch_size=[8])
        out = compiled(td)
        torch.testing.assert_close(out["y"], seq(TensorDict(x=td["x"], batch_size=[8]))["y"])


class TestFx:
    def test_trace_sequence(self):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(100, 1)

            def forward(self, x):
                logits = self.linear(x)
                return logits, torch.sigmoid(logits)

        seq = TensorDictSequential(
            TensorDictModule(Net(), in_keys=["input"], out_keys=[("outputs", "logits"), ("outputs", "probabilities")]),
            TensorDictModule(lambda a, b: a * b, in_keys=[("outputs", "logits"), ("outputs", "probabilities")], out_keys=["z"]),
        )
        graph_module = symbolic_trace(seq)
        assert isinstance(graph_module, TDGraphModule)
        ops = [n.op for n in graph_module.graph.nodes]
        assert ops.count("placeholder") == 1 and "call_module" in ops
        assert 'getattr(self, "0").module.linear' in graph_module.code  # the sequence's own layout
        td = TensorDict(input=torch.randn(8, 100), batch_size=[8])
        traced = graph_module(td.clone())
        eager = seq(td.clone())
        assert set(traced.keys(True, True)) == set(eager.keys(True, True))
        torch.testing.assert_close(traced["z"], eager["z"])

    def test_trace_kwargs_and_selection(self):
        module = TensorDictModule(lambda a, *, b: a - b, in_keys={"x": "a", "y": "b"}, out_keys=["d"], out_to_in_map=False)
        gm = symbolic_trace(module)
        out = gm(TensorDict(x=torch.ones(2), y=torch.ones(2), batch_size=[2]))
        assert (out["d"] == 0).all()

    def test_unsupported(self):
        module = ProbabilisticTensorDictModule(["loc"], ["x"])
        with pytest.raises(TypeError, match="symbolic_trace supports"):
            symbolic_trace(module)


def test_ensemble_resets_through_the_module_once_per_copy():
    import unittest.mock

    from tensordict.nn import EnsembleModule

    lin = nn.Linear(1, 1)
    lin.reset_parameters = unittest.mock.Mock()
    EnsembleModule(TensorDictModule(nn.Sequential(lin), in_keys=["a"], out_keys=["b"]), num_copies=2)
    assert lin.reset_parameters.call_count == 2


def test_ensemble_keeps_buffers_as_buffers():
    from tensordict.nn import EnsembleModule

    ensemble = EnsembleModule(
        TensorDictModule(nn.Sequential(nn.Linear(1, 1), nn.BatchNorm1d(1)), in_keys=["a"], out_keys=["b"]), num_copies=3
    )
    params = ensemble.params_td
    assert isinstance(params["module", "0", "weight"], nn.Parameter)
    assert not isinstance(params["module", "1", "running_mean"], nn.Parameter)
    assert params["module", "0", "weight"].shape == (3, 1, 1)


def test_traced_module_keeps_the_wrapped_module_names_and_parameters():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 1)

        def forward(self, x):
            return self.linear(x), torch.sigmoid(self.linear(x))

    module = TensorDictModule(Net(), in_keys=["input"], out_keys=[("outputs", "logits"), ("outputs", "probs")])
    graph_module = symbolic_trace(module)
    assert "self.linear(" in graph_module.code
    targets = [n.target for n in graph_module.graph.nodes if n.op == "call_module"]
    assert targets == ["linear", "linear"]
    assert dict(graph_module.named_parameters()).keys() == {"_gm.linear.weight", "_gm.linear.bias"}
    assert graph_module._gm.linear.weight is module.module.linear.weight  # shared, not copied


def test_prob_module_distribution_kwargs_as_tensordict_params():
    from tensordict import NonTensorData
    from tensordict.nn import InteractionType, TensorDictParams

    kwargs = TensorDictParams(TensorDict(scale=1.0, validate_args=NonTensorData(False)), no_convert=True)
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 3), in_keys=["inp"], out_keys=["loc"]),
        ProbabilisticTensorDictModule(
            in_keys=["loc"],
            out_keys=["sample"],
            distribution_class=torch.distributions.Normal,
            distribution_kwargs=kwargs,  # kept as is: no bool() of a TensorDict
            default_interaction_type=InteractionType.RANDOM,
        ),
    )
    assert len(list(seq.buffers())) == 1  # the scale is a buffer of the sequence
    assert seq(TensorDict(inp=torch.randn(3)))["sample"].shape == (3,)
    compiled = torch.compile(seq, fullgraph=True, backend="eager")
    assert compiled(TensorDict(inp=torch.randn(3)))["sample"].shape == (3,)
