"""``tensordict.nn.distributions.continuous``: continuous distributions and their parameter maps."""

from tensordict.nn._distributions import Delta
from tensordict.nn._mappings import AddStateIndependentNormalScale, NormalParamExtractor

__all__ = ["AddStateIndependentNormalScale", "Delta", "NormalParamExtractor"]
