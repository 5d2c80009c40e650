"""``tensordict.nn.probabilistic``: upstream's module path of the probabilistic modules.

A thin module; the code lives in ``_probabilistic.py``. ``_use_generator`` is an
upstream private helper that TorchRL imports (see ``tensordict.nn._compat_upstream``).
"""

from tensordict.nn._compat_upstream import _use_generator  # noqa: F401 - upstream private name
from tensordict.nn._probabilistic import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    interaction_type,
    set_interaction_type,
)

__all__ = [
    "InteractionType",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "interaction_type",
    "set_interaction_type",
]
