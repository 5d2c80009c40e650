"""``tensordict.nn.ensemble``: upstream's module path of :class:`EnsembleModule`."""

from tensordict.nn._ensemble import EnsembleModule

__all__ = ["EnsembleModule"]
