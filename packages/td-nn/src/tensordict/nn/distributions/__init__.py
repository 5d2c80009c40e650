"""``tensordict.nn.distributions``: the distributions and parameter extractors of
``tensordict.nn`` under upstream's module paths.

A thin package: ``continuous`` (``NormalParamExtractor``,
``AddStateIndependentNormalScale``, ``Delta``), ``discrete`` (``OneHotCategorical``,
``rand_one_hot``), ``composite`` (``CompositeDistribution``) and ``truncated_normal``
(``TruncatedNormal``); the code lives in ``_distributions.py`` and ``_mappings.py``.
"""

from tensordict.nn._distributions import (
    ReparamGradientStrategy,
    composite_lp_aggregate,
    set_composite_lp_aggregate,
)
from tensordict.nn._mappings import add_custom_mapping, mappings
from tensordict.nn._probabilistic import InteractionType, set_interaction_type
from tensordict.nn.distributions import continuous, discrete
from tensordict.nn.distributions.composite import CompositeDistribution
from tensordict.nn.distributions.continuous import (
    AddStateIndependentNormalScale,
    Delta,
    NormalParamExtractor,
)
from tensordict.nn.distributions.discrete import OneHotCategorical, rand_one_hot
from tensordict.nn.distributions.truncated_normal import TruncatedNormal

#: lower-cased class name -> class, for the classes of ``continuous`` and ``discrete``
distributions_maps = {
    name.lower(): getattr(module, name) for module in (continuous, discrete) for name in module.__all__
}

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "Delta",
    "InteractionType",
    "NormalParamExtractor",
    "OneHotCategorical",
    "ReparamGradientStrategy",
    "TruncatedNormal",
    "add_custom_mapping",
    "composite_lp_aggregate",
    "continuous",
    "discrete",
    "distributions_maps",
    "mappings",
    "rand_one_hot",
    "set_composite_lp_aggregate",
    "set_interaction_type",
]
