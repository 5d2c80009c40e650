"""TensorDictBase methods for constructors and conversions (from_dict, from_namedtuple, from_pytree, numpy, ...) (``ConvertMixin``)."""

from __future__ import annotations

__all__ = ["ConvertMixin"]


class ConvertMixin:
    """Mixed into TensorDictBase: constructors and conversions (from_dict, from_namedtuple, from_pytree, numpy, ...)."""
