"""``tensordict.tensordict``: the historical module path of :class:`TensorDict`.

Tutorials and older code write ``from tensordict.tensordict import TensorDict``; this
thin module keeps that path working. The code lives in ``_td.py``, ``_lazy.py`` and
``_stack.py``.
"""

from tensordict._base import TensorDictBase, get_defaults_to_none, is_tensor_collection
from tensordict._keys import NO_DEFAULT
from tensordict._lazy import LazyStackedTensorDict, lazy_stack
from tensordict._stack import cat, stack
from tensordict._td import TensorDict

__all__ = [
    "NO_DEFAULT",
    "LazyStackedTensorDict",
    "TensorDict",
    "TensorDictBase",
    "cat",
    "get_defaults_to_none",
    "is_tensor_collection",
    "lazy_stack",
    "stack",
]
