"""``tensordict.nn.common``: upstream's module path of the TensorDict module base classes.

A thin module; the code lives in ``_common.py`` and ``_module.py``.
"""

from tensordict.nn._common import TensorDictModuleBase, dispatch, make_tensordict
from tensordict.nn._module import (
    TensorDictModule,
    TensorDictModuleWrapper,
    WrapModule,
    as_tensordict_module,
)

__all__ = [
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "WrapModule",
    "as_tensordict_module",
    "dispatch",
    "make_tensordict",
]
