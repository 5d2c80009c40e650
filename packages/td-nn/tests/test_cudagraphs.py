"""CudaGraphModule: the CPU fallback (runs the callable, warns once) everywhere, capture
and replay where CUDA is available."""

import warnings

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import CudaGraphModule, TensorDictModule

_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not _CUDA, reason="CUDA graphs need a GPU")


def _wrap(module, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphed = CudaGraphModule(module, **kwargs)
    return graphed, [w for w in caught if issubclass(w.category, UserWarning)]


class TestFallback:
    @pytest.mark.skipif(_CUDA, reason="the fallback is for machines without CUDA")
    def test_warns_and_runs_eagerly(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        graphed, caught = _wrap(module, warmup=1)
        assert any("CUDA is not available" in str(w.message) for w in caught)
        td = TensorDict(x=torch.randn(2, 3), batch_size=[2])
        for _ in range(3):
            out = graphed(td)
        assert out is td and graphed._out_matches_in
        torch.testing.assert_close(td["y"], module.module(td["x"]))

    def test_arguments(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        graphed, _ = _wrap(module)
        assert graphed._is_tensordict_module and graphed.in_keys == ["x"] and graphed.out_keys == ["y"]
        assert graphed._warmup == 2 and graphed.device is None
        fn, _ = _wrap(lambda x: x + 1)
        assert not fn._is_tensordict_module and fn.in_keys is None
        td_fn, _ = _wrap(lambda td: td.set("y", td["x"] + 1), in_keys=[], out_keys=[])
        assert td_fn._is_tensordict_module
        with pytest.raises(ValueError, match="warmup"):
            CudaGraphModule(module, warmup=0)
        with pytest.warns(UserWarning, match="ignored"):
            CudaGraphModule(module, in_keys=["other"])

    def test_state_dict_is_the_module(self):
        linear = nn.Linear(3, 4)
        graphed, _ = _wrap(linear)
        other, _ = _wrap(nn.Linear(3, 4))
        other.load_state_dict(graphed.state_dict())
        x = torch.randn(5, 3)
        torch.testing.assert_close(graphed(x), other(x))
        assert graphed.weight is linear.weight  # attributes come from the module


@needs_cuda
class TestCapture:
    def test_td_module_replay(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"]).cuda()
        graphed, _ = _wrap(module, warmup=2)
        for _ in range(5):
            td = TensorDict(x=torch.randn(2, 3, device="cuda"), batch_size=[2])
            out = graphed(td)
            assert out is td
            torch.testing.assert_close(out["y"], module.module(td["x"]))
        assert graphed._selected_keys == ["y"]
        with pytest.raises(ValueError, match="shape"):
            graphed(TensorDict(x=torch.randn(3, 3, device="cuda"), batch_size=[3]))
        with pytest.raises(KeyError):
            graphed(TensorDict(z=torch.randn(2, 3, device="cuda"), batch_size=[2]))

    def test_tensor_function_replay(self):
        graphed, _ = _wrap(lambda x, y, c: x * y + c, warmup=1)
        for _ in range(3):
            x, y = torch.randn(4, device="cuda"), torch.randn(4, device="cuda")
            torch.testing.assert_close(graphed(x, y, 1.0), x * y + 1)
        with pytest.raises(ValueError, match="Varying inputs"):
            graphed(x, y, 2.0)
