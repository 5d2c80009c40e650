"""``tensordict.tensorclass``: dataclasses of tensors with every TensorDict operation.

Provided by the ``td-tensorclass`` distribution. Two ways to declare one:

- the ``@tensorclass`` decorator (also ``@tensorclass(autocast=..., frozen=...)``);
- subclassing ``TensorClass`` (``class MyData(TensorClass): ...``), which static type
  checkers understand best.

``from tensordict import tensorclass`` gives the decorator even after this
subpackage has been imported (td-core keeps the top-level name bound to it).
"""

from tensordict import MetaData, is_non_tensor  # upstream re-exports them here
from tensordict.ext import NonTensorData, NonTensorStack
from tensordict.tensorclass._dataclass import from_dataclass
from tensordict.tensorclass._decorator import TensorClass, tensorclass

# td-memmap (when installed) learns to save and load tensorclasses, also inside TensorDicts
from tensordict.tensorclass._memmap import register_with_memmap as _register_with_memmap
from tensordict.tensorclass._registry import (
    get_tensorclass,
    is_tensorclass,
    register_tensorclass,
    registered_tensorclasses,
    tensorclass_name,
)
from tensordict.tensorclass._version import __version__

_register_with_memmap()
del _register_with_memmap

#: upstream's common base class of ``NonTensorData`` and ``MetaData``; here
#: ``NonTensorData`` is that base (``MetaData`` derives from it), so the name is an alias
NonTensorDataBase = NonTensorData

__all__ = [
    # declaring tensorclasses
    "tensorclass",
    "TensorClass",
    "from_dataclass",
    # non-tensor leaves (re-exported from td-core, as upstream does)
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "MetaData",
    "is_non_tensor",
    # registry, for loaders that resolve class names read from disk
    "is_tensorclass",
    "get_tensorclass",
    "register_tensorclass",
    "registered_tensorclasses",
    "tensorclass_name",
    "__version__",
]
