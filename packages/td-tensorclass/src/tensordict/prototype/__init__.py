"""``tensordict.prototype``: the older import path of the tensorclass API.

``from tensordict.prototype import tensorclass`` is the same decorator as
``from tensordict import tensorclass``. Provided by the ``td-tensorclass``
distribution.
"""

from tensordict.tensorclass import TensorClass, from_dataclass, is_tensorclass, tensorclass

__all__ = ["tensorclass", "TensorClass", "from_dataclass", "is_tensorclass"]
