"""TensorDictBase methods for leaf-wise arithmetic, comparisons helpers, pointwise math and reductions (``MathMixin``)."""

from __future__ import annotations

__all__ = ["MathMixin"]


class MathMixin:
    """Mixed into TensorDictBase: leaf-wise arithmetic, comparisons helpers, pointwise math and reductions."""
