"""``tensordict.nn.utils``: upstream's module path of td-nn's helpers.

A thin module: the mappings (``mappings``, ``expln``, ``biased_softplus``,
``inv_softplus``, ``add_custom_mapping``) live in ``_mappings.py``, the switches in
``_common.py`` and ``_distributions.py``. The underscore names are upstream private
helpers that TorchRL imports (see ``tensordict.nn._compat_upstream``).
"""

from tensordict.nn._common import set_skip_existing, skip_existing
from tensordict.nn._compat_upstream import (  # noqa: F401 - upstream private names
    _dispatch_td_nn_modules,
    _set_dispatch_td_nn_modules,
    _set_skip_existing_None,
)
from tensordict.nn._distributions import composite_lp_aggregate, set_composite_lp_aggregate
from tensordict.nn._mappings import (
    add_custom_mapping,
    biased_softplus,
    expln,
    inv_softplus,
    mappings,
)
from tensordict.utils import Buffer  # noqa: F401 - upstream re-exports torch.nn.Buffer here too

__all__ = [
    "add_custom_mapping",
    "biased_softplus",
    "composite_lp_aggregate",
    "expln",
    "inv_softplus",
    "mappings",
    "set_composite_lp_aggregate",
    "set_skip_existing",
    "skip_existing",
]
