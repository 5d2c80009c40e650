"""td-nn names of tensordict 0.15.3 (issue 31): TruncatedStandardNormal, TruncatedNormal(a=, b=)
and TensorClassModuleWrapper; values read from the same calls on tensordict 0.15.3."""

import pytest
import torch

from tensordict import TensorClass, TensorDict
from tensordict.nn import TensorClassModuleBase, TensorClassModuleWrapper
from tensordict.nn.distributions import TruncatedNormal
from tensordict.nn.distributions.truncated_normal import TruncatedStandardNormal


def test_truncated_standard_normal_values():
    dist = TruncatedStandardNormal(a=torch.zeros(2), b=torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(dist.mean, torch.tensor([0.4599, 0.7228]), atol=1e-4, rtol=0)
    torch.testing.assert_close(dist.auc, torch.tensor([0.3413, 0.4772]), atol=1e-4, rtol=0)
    d = TruncatedStandardNormal(torch.tensor([-1.0]), torch.tensor([2.0]))
    for got, want in [
        (d.variance, 0.5198), (d.entropy(), 1.0050), (d.log_prob(torch.tensor([0.5])), -0.8438),
        (d.cdf(torch.tensor([0.5])), 0.6509), (d.icdf(torch.tensor([0.5])), 0.1712),
    ]:
        torch.testing.assert_close(got, torch.tensor([want]), atol=1e-4, rtol=0)
    sample = d.rsample((100,))
    assert ((sample >= -1) & (sample <= 2)).all()
    with pytest.raises(ValueError):
        TruncatedStandardNormal(1.0, 0.0)


def test_truncated_normal_a_b_keywords():
    d = TruncatedNormal(torch.tensor([1.0]), torch.tensor([2.0]), a=torch.tensor([-1.0]), b=torch.tensor([2.0]))
    torch.testing.assert_close(d.mean, torch.tensor([0.5867]), atol=1e-4, rtol=0)
    torch.testing.assert_close(d.variance, torch.tensor([0.6911]), atol=1e-4, rtol=0)
    torch.testing.assert_close(d.log_prob(torch.tensor([0.5])), torch.tensor([-1.0137]), atol=1e-4, rtol=0)
    assert d.a.tolist() == [-1.0] and d.b.tolist() == [0.5]  # standard units
    torch.testing.assert_close(TruncatedNormal(loc=5.0, scale=1.0, a=4.0, b=6.0).mean, torch.tensor(5.0))


class _In(TensorClass):
    x: torch.Tensor


class _Out(TensorClass):
    y: torch.Tensor


class _AddOne(TensorClassModuleBase[_In, _Out]):
    def forward(self, data: _In) -> _Out:
        return _Out(y=data.x + 1, batch_size=data.batch_size)


def test_tensorclass_module_wrapper():
    module = _AddOne()
    wrapper = module.as_td_module()
    assert isinstance(wrapper, TensorClassModuleWrapper) and wrapper.tc_module is module
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    out = TensorClassModuleWrapper(module)(td)
    assert list(out.keys()) == ["y"] and out["y"].tolist() == [1.0, 1.0, 1.0]
    assert "y" not in td.keys()
