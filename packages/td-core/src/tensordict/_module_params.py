"""TensorDictBase methods for parameters of nn.Modules (from_module, to_module, state_dict) (``ModuleParamsMixin``)."""

from __future__ import annotations

__all__ = ["ModuleParamsMixin"]


class ModuleParamsMixin:
    """Mixed into TensorDictBase: parameters of nn.Modules (from_module, to_module, state_dict)."""
