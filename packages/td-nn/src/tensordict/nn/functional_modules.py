"""``tensordict.nn.functional_modules``: the functional API under the module path used
by the ``tensordict`` documentation."""

from tensordict.ext import pytree_registered_classes
from tensordict.nn._compat_upstream import _exclude_td_from_pytree  # noqa: F401 - upstream private name
from tensordict.nn._functional import (
    get_functional,
    is_functional,
    make_functional,
    repopulate_module,
)

__all__ = [
    "PYTREE_REGISTERED_LAZY_TDS",  # noqa: F822 - served by the module __getattr__ below
    "PYTREE_REGISTERED_TDS",  # noqa: F822
    "get_functional",
    "is_functional",
    "make_functional",
    "repopulate_module",
]


def __getattr__(name: str) -> tuple:
    # the TensorDict classes registered as pytree nodes, read when asked (a subclass
    # defined later is registered when it is created)
    if name == "PYTREE_REGISTERED_TDS":
        return pytree_registered_classes(lazy=False)
    if name == "PYTREE_REGISTERED_LAZY_TDS":
        return pytree_registered_classes(lazy=True)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
