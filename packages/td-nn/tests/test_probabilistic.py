"""Probabilistic modules, interaction types and their sequences."""

import pytest
import torch
from torch import distributions as d
from torch import nn

from tensordict import TensorDict
from tensordict.nn import (
    CompositeDistribution,
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    interaction_type,
    set_interaction_type,
    set_skip_existing,
)


def _normal_module(**kwargs):
    return ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=d.Normal, **kwargs)


def _td():
    return TensorDict(loc=torch.arange(6.0).reshape(3, 2), scale=torch.ones(3, 2), batch_size=[3])


class TestInteraction:
    def test_default_is_deterministic(self):
        td = _normal_module()(_td())
        assert torch.equal(td["action"], td["loc"])

    @pytest.mark.parametrize("itype", [InteractionType.MODE, InteractionType.MEAN, InteractionType.MEDIAN, InteractionType.DETERMINISTIC])
    def test_non_random_types_give_loc(self, itype):
        with set_interaction_type(itype):
            assert interaction_type() is itype
            td = _normal_module()(_td())
        torch.testing.assert_close(td["action"], td["loc"])
        assert interaction_type() is None

    def test_random(self):
        module = _normal_module(default_interaction_type=InteractionType.RANDOM)
        a, b = module(_td())["action"], module(_td())["action"]
        assert not torch.equal(a, b)

    def test_random_is_reparameterised(self):
        loc = torch.zeros(3, 2, requires_grad=True)
        with set_interaction_type("random"):
            td = _normal_module()(TensorDict(loc=loc, scale=torch.ones(3, 2), batch_size=[3]))
        td["action"].sum().backward()
        assert loc.grad is not None

    def test_decorator(self):
        @set_interaction_type(InteractionType.RANDOM)
        def current():
            return interaction_type()

        assert current() is InteractionType.RANDOM and interaction_type() is None

    def test_from_str(self):
        assert InteractionType.from_str("MeAn") is InteractionType.MEAN
        with pytest.raises(ValueError, match="is not a valid InteractionType"):
            InteractionType.from_str("nope")

    def test_empirical_mean_and_median(self):
        class NoMean(d.Distribution):
            arg_constraints = {}
            has_rsample = False

            def __init__(self, loc):
                self.loc = loc
                super().__init__(loc.shape, validate_args=False)

            def sample(self, shape=()):
                return self.loc.expand(torch.Size(shape) + self.loc.shape) + torch.randn(torch.Size(shape) + self.loc.shape) * 0.01

        module = ProbabilisticTensorDictModule(["loc"], ["x"], distribution_class=NoMean, n_empirical_estimate=200)
        for itype in (InteractionType.MEAN, InteractionType.MEDIAN):
            with set_interaction_type(itype):
                out = module(TensorDict(loc=torch.ones(4), batch_size=[4]))
            torch.testing.assert_close(out["x"], torch.ones(4), atol=0.01, rtol=0)


class TestModule:
    def test_log_prob(self):
        td = _normal_module(return_log_prob=True)(_td())
        expected = d.Normal(td["loc"], td["scale"]).log_prob(td["action"])
        torch.testing.assert_close(td["action_log_prob"], expected)

    def test_log_prob_key_and_out_keys(self):
        module = _normal_module(return_log_prob=True, log_prob_key=("lp", "action"))
        assert module.out_keys == ["action", ("lp", "action")]
        assert module.in_keys == ["loc", "scale"]
        assert ("lp", "action") in module(_td()).keys(True)

    def test_dict_in_keys_and_nested(self):
        module = ProbabilisticTensorDictModule(
            in_keys={"loc": ("p", "mu"), "scale": ("p", "sigma")}, out_keys=[("out", "x")], distribution_class=d.Normal
        )
        td = TensorDict({"p": {"mu": torch.zeros(2), "sigma": torch.ones(2)}}, [2])
        assert torch.equal(module(td)["out", "x"], torch.zeros(2))

    def test_default_delta(self):
        module = ProbabilisticTensorDictModule(in_keys=["param"], out_keys=["x"], return_log_prob=True)
        td = module(TensorDict(param=torch.randn(3, 2), batch_size=[3]))
        assert torch.equal(td["x"], td["param"]) and (td["x_log_prob"] == float("inf")).all()  # 0.15.3: inf at param

    def test_distribution_kwargs(self):
        module = ProbabilisticTensorDictModule(["loc", "scale"], ["x"], distribution_class=d.Normal,
                                               distribution_kwargs={"validate_args": True})
        with pytest.raises(ValueError):
            module(TensorDict(loc=torch.zeros(2), scale=-torch.ones(2), batch_size=[2]))
        module = ProbabilisticTensorDictModule(["logits"], ["x"], distribution_class=d.Categorical, default_interaction_type="mode")
        td = module(TensorDict(logits=torch.tensor([[0.0, 3.0, 0.0]]), batch_size=[1]))
        assert td["x"].tolist() == [1]

    def test_skip_existing(self):
        td = _td()
        td["action"] = torch.full((3, 2), -5.0)
        with set_skip_existing(True):
            _normal_module()(td)
        assert (td["action"] == -5).all()

    def test_get_dist_and_log_prob_method(self):
        module = _normal_module()
        td = module(_td())
        dist = module.get_dist(td)
        assert isinstance(dist, d.Normal)
        torch.testing.assert_close(module.log_prob(td), dist.log_prob(td["action"]))

    def test_keyword_call(self):
        out = _normal_module()(loc=torch.zeros(4, 2), scale=torch.ones(4, 2))
        assert out.batch_size == torch.Size([4, 2]) and "action" in out.keys()

    def test_missing_parameter(self):
        td = TensorDict(loc=torch.zeros(3), batch_size=[3])
        with pytest.raises(KeyError, match="'scale'"):
            _normal_module()(td)
        assert list(td.keys()) == ["loc"]

    def test_wrong_distribution_keywords(self):
        module = ProbabilisticTensorDictModule(["loc", "width"], ["x"], distribution_class=d.Normal)
        with pytest.raises(TypeError, match="could not build Normal"):
            module(TensorDict(loc=torch.zeros(2), width=torch.ones(2), batch_size=[2]))

    def test_out_keys_required(self):
        with pytest.raises(ValueError, match="out_keys is required"):
            ProbabilisticTensorDictModule(["loc", "scale"], distribution_class=d.Normal)

    def test_composite_out_keys_inferred(self):
        module = ProbabilisticTensorDictModule(
            in_keys=["params"],
            distribution_class=CompositeDistribution,
            distribution_kwargs={"distribution_map": {"cont": d.Normal, ("nested", "disc"): d.Categorical}},
            return_log_prob=True,
            default_interaction_type=InteractionType.RANDOM,
        )
        assert module.out_keys[:2] == ["cont", ("nested", "disc")]
        params = TensorDict({"cont": {"loc": torch.randn(3, 4), "scale": torch.rand(3, 4) + 0.1},
                             ("nested", "disc"): {"logits": torch.randn(3, 10)}}, [3])
        td = module(TensorDict(params=params, batch_size=[3]))
        assert td["cont"].shape == (3, 4) and td["nested", "disc"].shape == (3,)
        assert td["cont_log_prob"].shape == (3, 4) and td["nested", "disc_log_prob"].shape == (3,)


class TestSequence:
    def _policy(self):
        return ProbabilisticTensorDictSequential(
            TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["params"]),
            TensorDictModule(NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]),
            _normal_module(return_log_prob=True),
        )

    def test_run_and_get_dist(self):
        policy = self._policy()
        td = TensorDict(obs=torch.randn(5, 3), batch_size=[5])
        dist = policy.get_dist(td)
        assert isinstance(dist, d.Normal) and dist.batch_shape == (5, 2)
        td = policy(td)
        assert td["action"].shape == (5, 2)
        torch.testing.assert_close(policy.log_prob(td), td["action_log_prob"])
        assert policy.in_keys == ["obs"]
        assert policy.out_keys == ["params", "loc", "scale", "action", "action_log_prob"]
        assert policy.dist_sample_keys == ["action"]

    def test_last_must_be_probabilistic_without_composite(self):
        policy = self._policy()
        tail = TensorDictModule(nn.Linear(2, 2), in_keys=["action"], out_keys=["out"])
        with pytest.raises(ValueError, match="last step must be a ProbabilisticTensorDictModule"):
            ProbabilisticTensorDictSequential(*policy, tail, return_composite=False)

    def test_without_probabilistic_steps_is_a_sequence(self):
        seq = ProbabilisticTensorDictSequential(TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["p"]))
        assert seq.return_composite and not seq._requires_sample
        td = TensorDict(obs=torch.randn(2, 3), batch_size=[2])
        assert seq(td) is td and td["p"].shape == (2, 4)

    def test_subsequence_falls_back_to_sequential(self):
        sub = self._policy().select_subsequence(out_keys=["loc"])
        assert type(sub) is TensorDictSequential and len(sub) == 2

    def test_gradient_to_network(self):
        policy = self._policy()
        with set_interaction_type(InteractionType.RANDOM):
            td = policy(TensorDict(obs=torch.randn(5, 3), batch_size=[5]))
        td["action_log_prob"].sum().backward()
        assert policy[0].module.weight.grad is not None


class TestUpstreamSurface:
    """Names, values and options as tensordict 0.15 spells them."""

    def test_interaction_type_values(self):
        assert InteractionType.MODE.value == "mode" and str(InteractionType.RANDOM) == "random"
        assert InteractionType.from_str("MeAn") is InteractionType.MEAN

    def test_deterministic_of_transformed_distribution(self):
        module = ProbabilisticTensorDictModule(
            in_keys=[], out_keys=["out"], distribution_class=lambda: d.LogisticNormal(torch.zeros(1), torch.ones(1))
        )
        torch.testing.assert_close(module(TensorDict())["out"], torch.tensor([0.5, 0.5]))
        lkj = ProbabilisticTensorDictModule(in_keys=[], out_keys=["out"], distribution_class=lambda: d.LKJCholesky(3, 5.0))
        with pytest.raises(RuntimeError, match="DETERMINISTIC, MEAN and MODE"):
            lkj(TensorDict())

    def test_log_prob_keys_follow_sample_keys(self):
        from tensordict.nn import set_composite_lp_aggregate

        module = _normal_module(return_log_prob=True)
        assert module.log_prob_keys == ["action_log_prob"] and module.log_prob_key == "action_log_prob"
        with set_composite_lp_aggregate(True):
            assert module.log_prob_key == "sample_log_prob"

    @pytest.mark.parametrize("num_samples", [2, (2, 3)])
    def test_num_samples(self, num_samples):
        module = _normal_module(return_log_prob=True, num_samples=num_samples, default_interaction_type="random")
        shape = (num_samples,) if isinstance(num_samples, int) else num_samples
        out = module(_td())
        assert out.batch_size == (*shape, *_td().batch_size)
        assert out["action"].shape == (*shape, *_td()["loc"].shape)
        assert out["action_log_prob"].shape == out["action"].shape

    def test_generator_object_and_seed(self):
        make = lambda g: _normal_module(default_interaction_type="random", generator=g)  # noqa: E731
        torch.manual_seed(5)
        state = torch.get_rng_state()
        a = make(torch.Generator().manual_seed(0))(_td())["action"]
        assert torch.equal(torch.get_rng_state(), state)  # global RNG untouched
        b = make(0)(_td())["action"]
        assert torch.equal(a, b)
        with pytest.raises(TypeError, match="generator must be"):
            make(1.5)

    def test_generator_key_seed_is_advanced(self):
        from tensordict import NonTensorData

        module = _normal_module(default_interaction_type="random", generator=("meta", "rng"))
        td = _td()
        td["meta", "rng"] = NonTensorData(3)
        first = module(td)["action"].clone()
        assert td["meta", "rng"] != 3
        second = module(td)["action"]
        assert not torch.equal(first, second)

    def test_return_composite_over_intermediate_steps(self):
        from tensordict.nn import CompositeDistribution

        seq = ProbabilisticTensorDictSequential(
            TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["loc"]),
            ProbabilisticTensorDictModule(["loc"], ["y"], distribution_class=d.Normal,
                                          distribution_kwargs={"scale": 1.0}, default_interaction_type="random"),
            TensorDictModule(nn.Linear(4, 5), in_keys=["y"], out_keys=["loc2"]),
            return_composite=True,
        )
        assert seq.default_interaction_type is InteractionType.RANDOM
        dist = seq.get_dist(TensorDict(x=torch.randn(10, 3)))
        assert isinstance(dist, CompositeDistribution)
        out = seq(TensorDict(x=torch.randn(10, 3)))
        assert set(out.keys()) == {"x", "loc", "y", "loc2"}
        lp = seq.log_prob(out)
        torch.testing.assert_close(lp["y_log_prob"], d.Normal(out["loc"], 1.0).log_prob(out["y"]))
        assert type(seq[:1]) is TensorDictSequential


def test_deterministic_prefers_mode_over_nan_mean():
    module = ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["x"], distribution_class=d.Categorical)
    td = module(TensorDict(logits=torch.tensor([0.0, 5.0, 0.0])))
    assert td["x"] == 1


def test_composite_legacy_log_prob_layout():
    from tensordict.nn import CompositeDistribution, set_composite_lp_aggregate

    params = TensorDict({"params": {"cont": {"loc": torch.zeros(3, 4), "scale": torch.ones(3, 4)}}}, [3])
    with set_composite_lp_aggregate(True):
        module = ProbabilisticTensorDictModule(
            in_keys=["params"], distribution_class=CompositeDistribution,
            distribution_kwargs={"distribution_map": {"cont": d.Normal}}, return_log_prob=True,
        )
        out = module(params)
        assert out["cont_log_prob"].shape == (3, 4) and out["sample_log_prob"].shape == (3,)
        clone = out.exclude("cont_log_prob")
        lp = module.log_prob(clone)
        torch.testing.assert_close(lp, clone["cont_log_prob"].sum(-1))


def test_composite_module_keeps_the_lp_mode_it_was_built_with():
    import functools

    from tensordict.nn import CompositeDistribution, set_composite_lp_aggregate

    maker = functools.partial(CompositeDistribution, distribution_map={"cont": d.Normal, ("nested", "disc"): d.Categorical})
    with set_composite_lp_aggregate(True):
        module = ProbabilisticTensorDictModule(
            in_keys=["params"], out_keys=["cont", ("nested", "disc")], distribution_class=maker, return_log_prob=True
        )
        assert module.out_keys == ["cont", ("nested", "disc"), "sample_log_prob"]
    with set_composite_lp_aggregate(False), pytest.raises(RuntimeError, match="built under"):
        _ = module.log_prob_keys


def test_deterministic_uses_mode_for_enumerable_support_and_mean_otherwise():
    def draw(dist):
        module = ProbabilisticTensorDictModule(in_keys=[], out_keys=["out"], distribution_class=lambda: dist)
        return module(TensorDict())["out"]

    assert draw(d.Bernoulli(probs=torch.tensor([0.7]))).tolist() == [1.0]  # the mode, not 0.7
    assert draw(d.Binomial(10, torch.tensor([0.33]))).tolist() == [3.0]
    torch.testing.assert_close(draw(d.Poisson(torch.tensor([2.5]))), torch.tensor([2.5]))  # no enumerable support
    assert draw(d.StudentT(torch.tensor([0.5]))).isnan().all()  # the mean, even where it is nan
    assert draw(d.Independent(d.Bernoulli(probs=torch.full((2, 3), 0.7)), 1)).eq(1).all()


def test_deterministic_probabilistic_sequence_exports_with_torch_export():
    model = ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["latent"]),
        TensorDictModule(NormalParamExtractor(), in_keys=["latent"], out_keys=["loc", "scale"]),
        ProbabilisticTensorDictModule(
            in_keys=["loc", "scale"],
            out_keys=["sample"],
            distribution_class=d.Normal,
            distribution_kwargs={"validate_args": False},
        ),
    )
    model.select_out_keys("sample")
    x = torch.randn(2, 3)
    exported = torch.export.export(model, args=(TensorDict(x=x, batch_size=[2]),), strict=False).module()
    expected = model(TensorDict(x=x, batch_size=[2]))["sample"]
    torch.testing.assert_close(exported(TensorDict(x=x, batch_size=[2]))["sample"], expected)
    torch.testing.assert_close(expected, model[0](TensorDict(x=x, batch_size=[2]))["latent"][:, :2])
