"""TensorDictBase methods for consolidate / from_consolidated (``ConsolidateMixin``)."""

from __future__ import annotations

__all__ = ["ConsolidateMixin"]


class ConsolidateMixin:
    """Mixed into TensorDictBase: consolidate / from_consolidated."""
