"""``tensordict.nn.functional_modules``: the functional API under the module path used
by the ``tensordict`` documentation."""

from tensordict.nn._functional import (
    get_functional,
    is_functional,
    make_functional,
    repopulate_module,
)

__all__ = ["get_functional", "is_functional", "make_functional", "repopulate_module"]
