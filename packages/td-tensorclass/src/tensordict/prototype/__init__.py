"""``tensordict.prototype``: the older import path of the tensorclass API.

``from tensordict.prototype import tensorclass`` is the same decorator as
``from tensordict import tensorclass``. Provided by the ``td-tensorclass``
distribution.

``symbolic_trace`` (also ``tensordict.prototype.fx``) is td-nn's
``tensordict.nn.fx.symbolic_trace``, loaded on first use; without td-nn it raises an
``ImportError`` naming the distribution.
"""

import importlib as _importlib
from typing import Any as _Any

from tensordict.tensorclass import TensorClass, from_dataclass, is_tensorclass, tensorclass

__all__ = ["tensorclass", "TensorClass", "from_dataclass", "is_tensorclass", "symbolic_trace"]


def __getattr__(name: str) -> _Any:
    if name == "symbolic_trace":
        return _importlib.import_module("tensordict.prototype.fx").symbolic_trace
    msg = f"module 'tensordict.prototype' has no attribute {name!r}"
    raise AttributeError(msg)
