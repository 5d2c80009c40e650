"""``tensordict.nn``: ``nn.Module``s that read and write TensorDicts.

Provided by the ``td-nn`` distribution. Every module declares the keys it reads
(``in_keys``) and writes (``out_keys``), so one generic loop
(``data = model(data); loss = loss_module(data)``) serves every task.
"""

from tensordict.nn._common import (
    TensorDictModuleBase,
    dispatch,
    make_tensordict,
    set_skip_existing,
    skip_existing,
)
from tensordict.nn._module import TensorDictModule, TensorDictModuleWrapper, WrapModule
from tensordict.nn._sequence import TensorDictSequential
from tensordict.nn._version import __version__

__all__ = [
    "TensorDictModuleBase",
    "TensorDictModule",
    "TensorDictModuleWrapper",
    "TensorDictSequential",
    "WrapModule",
    "dispatch",
    "make_tensordict",
    "set_skip_existing",
    "skip_existing",
    "__version__",
]
