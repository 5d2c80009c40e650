"""TensorDictBase methods for apply, named_apply, apply_ and the tree helpers (``ApplyMixin``)."""

from __future__ import annotations

__all__ = ["ApplyMixin"]


class ApplyMixin:
    """Mixed into TensorDictBase: apply, named_apply, apply_ and the tree helpers."""
