"""``tensordict.nn.distributions``: the distributions and parameter extractors of
``tensordict.nn`` under the module path used by the ``tensordict`` documentation."""

from tensordict.nn._distributions import (
    CompositeDistribution,
    Delta,
    OneHotCategorical,
    ReparamGradientStrategy,
    TruncatedNormal,
    composite_lp_aggregate,
    rand_one_hot,
    set_composite_lp_aggregate,
)
from tensordict.nn._mappings import AddStateIndependentNormalScale, NormalParamExtractor, mappings

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "Delta",
    "NormalParamExtractor",
    "OneHotCategorical",
    "ReparamGradientStrategy",
    "TruncatedNormal",
    "composite_lp_aggregate",
    "mappings",
    "rand_one_hot",
    "set_composite_lp_aggregate",
]
