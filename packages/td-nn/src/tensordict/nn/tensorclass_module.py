"""``tensordict.nn.tensorclass_module``: upstream's module path of
:class:`TensorClassModuleBase` and :class:`TensorClassModuleWrapper`."""

from tensordict.nn._tensorclass_module import TensorClassModuleBase, TensorClassModuleWrapper

__all__ = ["TensorClassModuleBase", "TensorClassModuleWrapper"]
