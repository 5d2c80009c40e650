"""``tensordict.nn.params``: upstream's module path of :class:`TensorDictParams`."""

from tensordict.nn._params import TensorDictParams

__all__ = ["TensorDictParams"]
