"""``tensordict.nn.sequence``: upstream's module path of :class:`TensorDictSequential`."""

from tensordict.nn._sequence import TensorDictSequential

__all__ = ["TensorDictSequential"]
