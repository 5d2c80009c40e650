"""``tensordict.nn.distributions.discrete``: discrete distributions."""

from tensordict.nn._distributions import OneHotCategorical, rand_one_hot

__all__ = ["OneHotCategorical", "rand_one_hot"]
