"""``tensordict.nn.distributions.composite``: :class:`CompositeDistribution`.

``_add_suffix`` is upstream's private helper naming the per-sample entries a
composite distribution writes (``"action"`` -> ``"action_log_prob"``); TorchRL's
loss code imports it from here.
"""

from typing import cast

from tensordict import NestedKey
from tensordict.ext import unravel_key
from tensordict.nn._distributions import CompositeDistribution

__all__ = ["CompositeDistribution"]


def _add_suffix(key: NestedKey, suffix: str) -> NestedKey:
    """Appends ``suffix`` to the last part of ``key``: ``("agent", "action")`` -> ``("agent", "action_log_prob")``.

    Raises:
        TypeError: ``key`` is not a str or a (nested) tuple of str.

    Examples:
        >>> _add_suffix(("agent", ("action",)), "_log_prob")
        ('agent', 'action_log_prob')
        >>> _add_suffix("action", "_entropy")
        'action_entropy'
    """
    key = unravel_key(key)
    if isinstance(key, str):
        return key + suffix
    last = cast(str, key[-1])  # unravel_key returns a flat tuple of str
    return (*key[:-1], last + suffix)
