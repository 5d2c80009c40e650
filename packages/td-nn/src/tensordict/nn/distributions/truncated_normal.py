"""``tensordict.nn.distributions.truncated_normal``: :class:`TruncatedNormal` and
:class:`TruncatedStandardNormal`."""

from tensordict.nn._distributions import TruncatedNormal, TruncatedStandardNormal

__all__ = ["TruncatedNormal", "TruncatedStandardNormal"]
