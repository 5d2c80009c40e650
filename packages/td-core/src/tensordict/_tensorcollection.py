"""COMPATIBILITY: upstream's ``tensordict._tensorcollection`` path (TorchRL imports
``TensorCollection`` from it). See ``tensordict._compat_upstream``."""

from tensordict._compat_upstream import TensorCollection

__all__ = ["TensorCollection"]
