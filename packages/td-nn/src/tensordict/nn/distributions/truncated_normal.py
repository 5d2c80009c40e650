"""``tensordict.nn.distributions.truncated_normal``: :class:`TruncatedNormal`."""

from tensordict.nn._distributions import TruncatedNormal

__all__ = ["TruncatedNormal"]
