"""Distributions and parameter extractors."""

import math

import pytest
import torch
from torch import distributions as d

from tensordict import TensorDict
from tensordict.nn import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    Delta,
    NormalParamExtractor,
    OneHotCategorical,
    ReparamGradientStrategy,
    TruncatedNormal,
    add_custom_mapping,
    biased_softplus,
    composite_lp_aggregate,
    expln,
    inv_softplus,
    mappings,
    rand_one_hot,
    set_composite_lp_aggregate,
)
from tensordict.nn.distributions import NormalParamExtractor as NPE2


class TestMappings:
    def test_normal_param_extractor(self):
        loc, scale = NormalParamExtractor()(torch.randn(5, 6))
        assert loc.shape == (5, 3) and (scale >= 1e-4).all()
        x = torch.cat([torch.zeros(2, 2), torch.full((2, 2), -10.0)], -1)
        loc, scale = NormalParamExtractor(scale_mapping="exp", scale_lb=0.5)(x)
        assert loc.shape == (2, 2) and (scale == 0.5).all()
        assert NPE2 is NormalParamExtractor
        with pytest.raises(RuntimeError, match="even"):
            NormalParamExtractor()(torch.zeros(2, 3))

    def test_biased_softplus(self):
        assert float(biased_softplus(2.0)(torch.zeros(()))) == pytest.approx(2.0)
        assert float(mappings("biased_softplus_3.0_0.5")(torch.zeros(()))) == pytest.approx(3.0)
        assert float(inv_softplus(torch.nn.functional.softplus(torch.tensor(0.3)))) == pytest.approx(0.3, abs=1e-5)
        with pytest.raises(ValueError, match="larger than min_val"):
            biased_softplus(0.001)

    def test_mappings(self):
        x = torch.linspace(-3, 3, 7)
        assert (mappings("expln")(x) > 0).all()
        torch.testing.assert_close(expln(torch.tensor([0.0, 1.0])), torch.tensor([1.0, 1 + math.log(2)]))
        add_custom_mapping("square", lambda t: t * t)
        assert float(mappings("square")(torch.tensor(3.0))) == 9
        with pytest.raises(NotImplementedError, match="Unknown mapping"):
            mappings("nope")

    def test_state_independent_scale(self):
        module = AddStateIndependentNormalScale(4, init_value=0.0)
        loc, scale = module(torch.randn(3, 4))
        assert torch.allclose(scale, torch.ones(3, 4))
        assert len(list(module.parameters())) == 1

    def test_state_independent_scale_after_a_recurrent_module(self):
        lstm = torch.nn.LSTM(3, 4)
        loc, scale, (h, c) = AddStateIndependentNormalScale(4)(*lstm(torch.randn(5, 2, 3)))
        assert loc.shape == scale.shape == (5, 2, 4)
        assert h.shape == c.shape == (1, 2, 4)


class TestDelta:
    def test_sample_and_log_prob(self):
        param = torch.randn(3, 2, requires_grad=True)
        dist = Delta(param)
        assert dist.batch_shape == (3,) and dist.event_shape == (2,)
        assert dist.sample((4,)).shape == (4, 3, 2)
        assert (dist.log_prob(param.detach()) == float("inf")).all()  # tensordict 0.15.3
        assert torch.isinf(dist.log_prob(param.detach() + 1)).all()
        dist.rsample().sum().backward()
        assert param.grad is not None
        assert dist.mode is param and dist.deterministic_sample is param


class TestOneHot:
    def test_mode_and_samples(self):
        dist = OneHotCategorical(logits=torch.tensor([[0.0, 5.0, 0.0], [9.0, 0.0, 0.0]]))
        assert dist.mode.tolist() == [[0, 1, 0], [1, 0, 0]]
        s = dist.sample((10,))
        assert s.shape == (10, 2, 3) and (s.sum(-1) == 1).all()

    @pytest.mark.parametrize("method", list(ReparamGradientStrategy))
    def test_rsample_gradient(self, method):
        logits = torch.randn(4, 3, requires_grad=True)
        dist = OneHotCategorical(logits=logits, grad_method=method)
        sample = dist.rsample()
        assert ((sample == 0) | (sample == 1)).all() and (sample.sum(-1) == 1).all()
        (sample * torch.arange(3.0)).sum().backward()
        assert logits.grad is not None and logits.grad.abs().sum() > 0

    def test_rand_one_hot(self):
        out = rand_one_hot(torch.zeros(5, 4))
        assert (out.sum(-1) == 1).all()


class TestTruncatedNormal:
    def test_support_and_gradients(self):
        loc = torch.zeros(1000, requires_grad=True)
        dist = TruncatedNormal(loc, torch.ones(1000), low=-0.5, high=0.5)
        sample = dist.rsample()
        assert ((sample >= -0.5) & (sample <= 0.5)).all()
        sample.sum().backward()
        assert loc.grad is not None

    def test_log_prob_integrates_to_one(self):
        dist = TruncatedNormal(torch.tensor(0.3), torch.tensor(0.7), low=-1.0, high=1.0)
        x = torch.linspace(-1, 1, 20001)
        density = dist.log_prob(x).exp()
        assert float(torch.trapezoid(density, x)) == pytest.approx(1.0, abs=1e-3)
        strict = TruncatedNormal(torch.tensor(0.3), torch.tensor(0.7), validate_args=True)
        with pytest.raises(ValueError, match="support"):
            strict.log_prob(torch.tensor(1.5))
        lax = TruncatedNormal(torch.tensor(0.3), torch.tensor(0.7), validate_args=False)
        assert float(lax.log_prob(torch.tensor(1.5))) == -math.inf

    def test_mean_entropy_against_numeric(self):
        dist = TruncatedNormal(torch.tensor(0.3), torch.tensor(0.7), low=-1.0, high=1.0)
        x = torch.linspace(-1, 1, 20001, dtype=torch.float64)
        p = dist.log_prob(x.float()).double().exp()
        assert float(dist.mean) == pytest.approx(float(torch.trapezoid(p * x, x)), abs=1e-3)
        entropy = -torch.trapezoid(p * p.log(), x)
        assert float(dist.entropy()) == pytest.approx(float(entropy), abs=1e-3)
        var = torch.trapezoid(p * (x - float(dist.mean)) ** 2, x)
        assert float(dist.variance) == pytest.approx(float(var), abs=1e-3)

    def test_wide_bounds_match_normal(self):
        loc, scale = torch.tensor([0.2, -0.1]), torch.tensor([0.3, 0.5])
        dist = TruncatedNormal(loc, scale, low=-50.0, high=50.0)
        torch.testing.assert_close(dist.log_prob(torch.tensor([0.0, 0.0])), d.Normal(loc, scale).log_prob(torch.zeros(2)))
        torch.testing.assert_close(dist.mean, loc)
        assert torch.equal(dist.mode, loc)

    def test_tanh_loc_and_bad_bounds(self):
        dist = TruncatedNormal(torch.tensor([100.0]), torch.ones(1), upscale=2.0, tanh_loc=True, low=-5.0, high=5.0)
        assert float(dist.loc) == pytest.approx(2.0, abs=1e-4)
        with pytest.raises(ValueError, match="low must be smaller than high"):
            TruncatedNormal(torch.zeros(1), torch.ones(1), low=1.0, high=0.0)


class TestComposite:
    def _dist(self, **kwargs):
        params = TensorDict({
            "cont": {"loc": torch.randn(3, 4), "scale": torch.rand(3, 4) + 0.1},
            ("nested", "disc"): {"logits": torch.randn(3, 10)},
        }, [3])
        return CompositeDistribution(params, distribution_map={"cont": d.Normal, ("nested", "disc"): d.Categorical}, **kwargs), params

    def test_sample_log_prob_entropy(self):
        dist, params = self._dist()
        sample = dist.sample((4,))
        assert sample.batch_size == (4, 3)
        assert sample["cont"].shape == (4, 3, 4) and sample["nested", "disc"].shape == (4, 3)
        assert not composite_lp_aggregate()
        lp = dist.log_prob(sample)
        expected = d.Normal(params["cont", "loc"], params["cont", "scale"]).log_prob(sample["cont"])
        torch.testing.assert_close(lp["cont_log_prob"], expected)
        assert lp["nested", "disc_log_prob"].shape == (4, 3)
        ent = dist.entropy()
        assert ent["cont_entropy"].shape == (3, 4) and ent["nested", "disc_entropy"].shape == (3,)

    def test_aggregate(self):
        dist, _ = self._dist()
        sample = dist.sample()
        with set_composite_lp_aggregate(True):
            lp = dist.log_prob(sample)
        separate = dist.log_prob(sample)
        torch.testing.assert_close(lp, separate["cont_log_prob"].sum(-1) + separate["nested", "disc_log_prob"])
        dist2, _ = self._dist(aggregate_probabilities=True)
        assert dist2.entropy().shape == (3,)

    def test_log_prob_composite_and_name_map(self):
        dist, _ = self._dist(name_map={"cont": ("out", "c")})
        sample = dist.rsample() if dist.has_rsample else dist.sample()
        assert ("out", "c") in sample.keys(True)
        lps = dist.log_prob_composite(sample)
        assert lps is not sample and "sample_log_prob" not in lps.keys()
        assert ("out", "c_log_prob") in lps.keys(True)
        dist.log_prob_composite(sample, include_sum=True, inplace=True)
        assert sample["sample_log_prob"].shape == (3,)
        assert ("out", "c_log_prob") in sample.keys(True)
        ent = dist.entropy_composite()
        assert ent["entropy"].shape == (3,)

    def test_mode_mean_deterministic(self):
        dist, params = self._dist()
        torch.testing.assert_close(dist.mean["cont"], params["cont", "loc"])
        assert dist.mode["nested", "disc"].shape == (3,)
        assert dist.deterministic_sample["cont"].shape == (3, 4)

    def test_cdf_icdf(self):
        params = TensorDict({"a": {"loc": torch.zeros(3), "scale": torch.ones(3)}}, [3])
        dist = CompositeDistribution(params, {"a": d.Normal})
        sample = TensorDict(a=torch.full((3,), 0.25), batch_size=[3])
        cdf = dist.cdf(sample)
        assert cdf is sample  # written into the sample, as upstream
        back = dist.icdf(cdf)
        assert back is sample and set(back.keys()) == {"a", "a_cdf", "a_icdf"}
        torch.testing.assert_close(back["a_icdf"], back["a"], atol=1e-6, rtol=0)

    def test_missing_params_key(self):
        with pytest.raises(KeyError, match="no entry 'b'"):
            CompositeDistribution(TensorDict({"a": {"loc": torch.zeros(1), "scale": torch.ones(1)}}, [1]), {"b": d.Normal})
