"""Calls that tensordict 0.15.3 accepts and that used to raise here (issue 31).

Each expectation was checked by running the same code on tensordict 0.15.3; the file
uses public names only, so it runs unchanged against either implementation."""

import pytest
import torch
from torch import distributions as d

from tensordict import TensorDict
from tensordict.nn import CompositeDistribution, InteractionType, NormalParamExtractor


@pytest.mark.parametrize("name", ["RANDOM", "Random", "random", "rAnDoM"])
def test_interaction_type_from_any_case(name):
    assert InteractionType(name) is InteractionType.RANDOM


def test_interaction_type_unknown_value():
    with pytest.raises(ValueError, match="not a valid InteractionType"):
        InteractionType("sometimes")
    with pytest.raises(ValueError):
        InteractionType(3)


def test_normal_param_extractor_passes_other_inputs_through():
    x, hidden, other = torch.randn(3, 4), torch.randn(3, 6), "state"
    loc, scale, hidden_out, other_out = NormalParamExtractor()(x, hidden, other)
    assert loc.shape == scale.shape == (3, 2)
    assert hidden_out is hidden and other_out is other
    assert torch.equal(loc, x[:, :2]) and bool((scale > 0).all())
    assert len(NormalParamExtractor()(x)) == 2


def _composite(name_map=None):
    params = TensorDict(
        {"cont": {"loc": torch.randn(3, 4), "scale": torch.rand(3, 4) + 0.1}, ("nested", "disc"): {"logits": torch.randn(3, 10)}},
        [3],
    )
    return CompositeDistribution(
        params, distribution_map={"cont": d.Normal, ("nested", "disc"): d.Categorical}, name_map=name_map
    )


def test_composite_distribution_indexed_by_key():
    dist = _composite()
    assert isinstance(dist["cont"], d.Normal) and dist["cont"].loc.shape == (3, 4)
    assert isinstance(dist["nested", "disc"], d.Categorical)
    with pytest.raises(KeyError):
        dist["missing"]


def test_composite_distribution_indexed_by_written_name():
    dist = _composite(name_map={"cont": "renamed"})
    assert isinstance(dist["renamed"], d.Normal)
    with pytest.raises(KeyError):
        dist["cont"]  # the source key is not where the sample goes


def test_dispatch_duplicated_argument_wording():
    import torch
    from torch import nn

    from tensordict.nn import dispatch

    class Nest(nn.Module):
        in_keys = [("a", "c"), "d"]
        out_keys = ["b"]

        @dispatch(separator="__")
        def forward(self, tensordict):
            tensordict["b"] = tensordict["a", "c"] + tensordict["d"]
            return tensordict

    assert torch.equal(Nest()(a__c=torch.zeros(2), d=torch.ones(2)), torch.ones(2))
    with pytest.raises(RuntimeError, match=r"^Duplicated argument in args and kwargs"):
        Nest()(torch.zeros(2), a__c=torch.ones(2))
