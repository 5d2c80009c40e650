"""``tensordict.nn.functional_modules``: the functional API under the module path used
by the ``tensordict`` documentation."""

from tensordict.nn._compat_upstream import _exclude_td_from_pytree  # noqa: F401 - upstream private name
from tensordict.nn._functional import (
    get_functional,
    is_functional,
    make_functional,
    repopulate_module,
)

__all__ = ["get_functional", "is_functional", "make_functional", "repopulate_module"]
