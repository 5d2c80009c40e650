"""``tensordict.nn.cudagraphs``: upstream's module path of :class:`CudaGraphModule`."""

from tensordict.nn._cudagraphs import CudaGraphModule

__all__ = ["CudaGraphModule"]
