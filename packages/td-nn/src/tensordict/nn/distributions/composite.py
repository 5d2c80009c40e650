"""``tensordict.nn.distributions.composite``: :class:`CompositeDistribution`."""

from tensordict.nn._distributions import CompositeDistribution

__all__ = ["CompositeDistribution"]
