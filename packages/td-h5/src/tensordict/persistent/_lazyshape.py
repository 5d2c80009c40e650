"""Shape operations that a ``PersistentTensorDict`` serves as lazy views (``LazyShapeMixin``).

``unbind``, ``split``, ``chunk``, ``narrow``, ``unsqueeze`` and ``squeeze`` only select
rows or add/remove size-1 dims, so they are expressed as indexing and return
PersistentTensorDict views that read nothing until a key is asked for. Shape ops that
move data (``view``, ``permute``, ...) use td-core's dense implementations.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tensordict import lazy_legacy

if TYPE_CHECKING:  # the class the mixin is mixed into (type checkers only)
    import torch

    from tensordict import TensorDictBase as _MixinBase
else:
    _MixinBase = object

__all__ = ["LazyShapeMixin"]


class LazyShapeMixin(_MixinBase):
    """Index-based shape ops returning lazy views."""

    if TYPE_CHECKING:
        @property
        def _batch_size(self) -> torch.Size: ...

    def _dim(self, dim: int, extra: int = 0) -> int:
        nd = len(self._batch_size) + extra
        if not -nd <= dim < nd:
            msg = f"dim={dim} is out of range for a PersistentTensorDict with batch_size {tuple(self._batch_size)}."
            raise IndexError(msg)
        return dim + nd if dim < 0 else dim

    def unbind(self, dim: int = 0) -> tuple:
        """Lazy views, one per index along batch dim ``dim``."""
        d = self._dim(dim)
        lead = (slice(None),) * d
        return tuple(self._index(lead + (i,)) for i in range(self._batch_size[d]))

    def split(self, split_size: Any, dim: int = 0) -> tuple:
        """Lazy views of consecutive chunks along batch dim ``dim`` (sizes as ``torch.split``)."""
        d = self._dim(dim)
        n = self._batch_size[d]
        if isinstance(split_size, int):
            if split_size <= 0:
                msg = f"split_size must be positive, got {split_size}."
                raise RuntimeError(msg)
            sizes = [min(split_size, n - s) for s in range(0, n, split_size)] or [0]
        else:
            sizes = list(split_size)
            if sum(sizes) != n:
                msg = f"split sizes {sizes} do not add up to batch dim {d} of size {n}."
                raise RuntimeError(msg)
        lead = (slice(None),) * d
        out, start = [], 0
        for size in sizes:
            out.append(self._index(lead + (slice(start, start + size),)))
            start += size
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """Lazy views, as ``torch.chunk`` along batch dim ``dim``."""
        d = self._dim(dim)
        n = self._batch_size[d]
        return self.split(max(1, math.ceil(n / chunks)), d)

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """A lazy view of ``length`` rows from ``start`` along batch dim ``dim``."""
        d = self._dim(dim)
        return self._index((slice(None),) * d + (slice(start, start + length),))

    def unsqueeze(self, dim: int) -> Any:
        """A lazy view with a batch dim of size 1 inserted at ``dim``.

        Under ``set_lazy_legacy(True)``, td-core's live legacy view (whose inverse
        ``squeeze`` gives this TensorDict back).
        """
        if lazy_legacy():
            return super().unsqueeze(dim)
        d = self._dim(dim, extra=1)
        return self._index((slice(None),) * d + (None,))

    def squeeze(self, dim: int | None = None) -> Any:
        """A lazy view without the batch dims of size 1 (only ``dim`` when given); under
        ``set_lazy_legacy(True)``, td-core's live legacy view."""
        if lazy_legacy():
            return super().squeeze(dim)
        bs = self._batch_size
        if dim is None:
            dims = {i for i, s in enumerate(bs) if s == 1}
        else:
            d = self._dim(dim)
            dims = {d} if bs[d] == 1 else set()
        if not dims:
            return self
        return self._index(tuple(0 if i in dims else slice(None) for i in range(len(bs))))
