"""``tensordict.typedtensordict``: upstream's module path for :class:`TypedTensorDict`
(the code lives in ``tensordict._typed``)."""

from tensordict._typed import TypedTensorDict

__all__ = ["TypedTensorDict"]
